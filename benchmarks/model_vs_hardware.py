"""The coalescing model's sectors rule against the counters (global load/store requests and
sectors) over several hundred generated patterns; prints the match rate and every pattern
where the model and the hardware differ."""

import numpy as np

import l2persist
from l2persist import coalescing as C
from _common import device_line, finish, parser


def main():
    p = parser(__doc__)
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    rows = C.hardware_check(dev, rng=np.random.default_rng(args.seed))
    misses = [r for r in rows if not r["match"]]
    print(f"sectors rule: {len(rows) - len(misses)} of {len(rows)} patterns match exactly "
          f"({100 * (1 - len(misses) / len(rows)):.1f} %)")
    for r in misses:
        print(f"  {r['pattern']}: predicted {r['predicted']}, measured {r['measured']}")
    print("\nThe L1/L2 study under the model:")
    print(C.format_study_table())
    finish(args, {"device": device_line(dev), "rows": rows, "misses": len(misses)})


if __name__ == "__main__":
    main()
