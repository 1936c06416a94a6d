"""tune() on work from another library (PyTorch): an embedding lookup with skewed ids into a
table larger than L2, a sparse matrix-vector product that reuses its vector, and a small MLP
whose weights serve batches streamed from a pool larger than L2. Each is reported against the
better of (a) limit 0 and (b) the default limit, also where the answer is "don't"."""

import l2persist
from l2persist import workloads
from l2persist.tune import _describe
from _common import device_line, finish, parser, table


def main():
    p = parser(__doc__)
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    rows = []
    for name, build in workloads.WORKLOADS.items():
        w = build()
        ok_before = w.check()
        r = l2persist.tune(w.fn, w.targets, stream=w.stream, device=dev, repeat=args.repeat)
        ok_after = w.check()
        rows.append({"workload": name, "what": w.description, "limit0_ms": r.limit0_ms,
                     "default_ms": r.default_ms, "aside_ms": r.aside_ms,
                     "found": _describe(r.found), "found_x": r.speedup,
                     "ci": f"{r.ci[0]:.3f}-{r.ci[1]:.3f}",
                     "verdict": "use it" if r.persistence_helps else "don't",
                     "correct": ok_before and ok_after, "evals": r.evals,
                     "tune_s": r.wall_s})
        print(name, rows[-1]["verdict"], f"{r.speedup:.3f}", flush=True)
    print(table(rows, [("workload", "workload"), ("limit0_ms", "(a) limit 0 ms"),
                       ("default_ms", "(b) default ms"), ("aside_ms", "(c) set-aside ms"),
                       ("found", "best found (d)"), ("found_x", "(d) vs best baseline"),
                       ("ci", "95% CI"), ("verdict", "verdict"), ("correct", "results right"),
                       ("evals", "evals"), ("tune_s", "tune s")]))
    for r in rows:
        print(f"- {r['workload']}: {r['what']}")
    finish(args, {"device": device_line(dev), "rows": rows})


if __name__ == "__main__":
    main()
