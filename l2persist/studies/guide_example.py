"""The CUDA Programming Guide's worked example of L2 persistence (set-aside, window on data1
with hitRatio 0.6, kernel A x10 and B on data1, window off, reset, kernel C on data2), timed
under the honest baselines: (a) persisting limit 0 and (b) the device's default limit, both
without a window, against (c) the guide's set-aside alone and (d) set-aside + window."""

from __future__ import annotations

from ..examples import CONFIGS, _LABELS, guide_example
from ..results import PlotSpec

TITLE = "The CUDA guide's persistence example, against limit 0 and the default"
NEEDS_GPU = True
SOURCE = ("CUDA C++ Programming Guide, 'L2 persistence example': reserve min(0.75 L2, max) "
          "for persisting accesses, put data1 in a window with hitRatio 0.6; the guide implies "
          "kernels A and B on data1 run faster.")


def run(ctx):
    repeats = 5 if ctx.quick else 10
    records = []
    r = guide_example(ctx.device.index, repeats=repeats)
    base_ab = min(r.runs[k]["A"] * 10 + r.runs[k]["B"] for k in ("limit0", "default"))
    for k in CONFIGS:
        run = r.runs[k]
        records.append({"config": _LABELS[k], "key": k, "A_ms": run["A"], "B_ms": run["B"],
                        "C_ms": run["C"], "A_vs_best_baseline": r.speedup("A", k),
                        "AB_vs_best_baseline": base_ab / (run["A"] * 10 + run["B"])})
    d = records[-1]
    verdict = ("helps" if d["AB_vs_best_baseline"] > 1.02 else
               "does not help" if d["AB_vs_best_baseline"] >= 0.98 else "slows the work")
    notes = [f"guide's set-aside {r.set_aside >> 20} MiB, default limit "
             f"{r.default_limit / (1 << 20):.2f} MiB, data1 {r.data1_bytes >> 20} MiB, "
             f"hitRatio {r.hit_ratio}",
             f"the guide's recipe (d) {verdict}: A x10 + B at {d['AB_vs_best_baseline']:.3f}x the "
             f"better of limit 0 and the default; the set-aside alone (c) at "
             f"{records[2]['AB_vs_best_baseline']:.3f}x",
             "values checked against NumPy after the runs"]
    return ctx.results(
        records, notes=notes, summary={"recipe_vs_best_baseline": d["AB_vs_best_baseline"]},
        columns=[("config", "configuration"), ("A_ms", "A ms"), ("B_ms", "B ms"),
                 ("C_ms", "C ms"), ("AB_vs_best_baseline", "A x10 + B vs best baseline")],
        plot=PlotSpec(x="key", y=["AB_vs_best_baseline"], kind="bar",
                      xlabel="configuration (a) limit 0, (b) default, (c) set-aside, (d) + window",
                      ylabel="speed vs best baseline (>1 faster)",
                      title="The guide's recipe against doing nothing"))
