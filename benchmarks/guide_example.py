"""The CUDA guide's worked example of L2 access management, timed with and without the
window (l2persist.examples.guide_example)."""

import l2persist
from l2persist.examples import guide_example
from _common import device_line, finish, parser


def main():
    args = parser(__doc__).parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    r = guide_example(dev)
    print(f"set-aside {l2persist.human_bytes(r.set_aside)} (default limit "
          f"{l2persist.human_bytes(r.default_limit)}), data1 "
          f"{l2persist.human_bytes(r.data1_bytes)} (window hitRatio {r.hit_ratio}), data2 "
          f"{l2persist.human_bytes(r.data2_bytes)}")
    print(r.table())
    print(f"kernel A with the guide's recipe vs the better baseline: {r.speedup('A'):.3f}x")
    finish(args, {"device": device_line(dev), "runs": r.runs, "set_aside": r.set_aside,
                  "default_limit": r.default_limit, "speedup_A": r.speedup("A")})


if __name__ == "__main__":
    main()
