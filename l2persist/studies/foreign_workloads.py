"""tune() on work from another library (PyTorch): an embedding lookup with skewed ids into a
table larger than L2, a sparse matrix-vector product that reuses its vector, and a small MLP
whose weights serve batches streamed from a pool larger than L2. Each against the better of
(a) limit 0 and (b) the default limit, also where the answer is "don't"."""

from __future__ import annotations

from ..results import PlotSpec

TITLE = "tune() on PyTorch workloads: embedding lookup, SpMV, MLP"
NEEDS_GPU = True
NEEDS = ("gpu", "torch")
NOTEBOOK = False
SOURCE = "l2persist's own question, on other libraries' work."
ROW = "`tune()` on PyTorch's embedding lookup, SpMV and an MLP, results checked before and after"


def axes(ctx) -> dict:
    from ..workloads import WORKLOADS
    return {"workload": list(WORKLOADS)}


def run(ctx):
    from .. import workloads
    from ..tune import tune

    def point(workload):
        w = workloads.WORKLOADS[workload]()
        ok_before = w.check()
        r = tune(w.fn, w.targets, stream=w.stream, device=ctx.device,
                 repeat=5 if ctx.quick else 10)
        return {"what": w.description, "limit0_ms": r.limit0_ms, "default_ms": r.default_ms,
                "aside_ms": r.aside_ms, "speedup": r.speedup, "ci_low": r.ci[0],
                "ci_high": r.ci[1], "helps": r.persistence_helps, "verdict": r.verdict(),
                "correct": ok_before and w.check(), "evals": r.evals, "tune_s": r.wall_s}

    return ctx.results(ctx.sweep(ctx.axes, point), columns=COLUMNS)


COLUMNS = [("workload", "workload"), ("limit0_ms", "(a) limit 0 ms"),
           ("default_ms", "(b) default ms"), ("aside_ms", "(c) set-aside ms"),
           ("speedup", "best found vs best baseline"), ("helps", "helps"),
           ("correct", "results right"), ("evals", "evals")]


def findings(res) -> list:
    return [f"{r['workload']} ({r['what']}): {r['verdict']}; results right: {r['correct']}"
            for r in res.records]


def bars(res) -> list:
    return [(f"{r['workload']} computes the same results under tune", r["correct"])
            for r in res.records]


def plot_spec(res) -> PlotSpec:
    helped = sum(r["helps"] for r in res.records)
    return PlotSpec(x="workload", y=["speedup"], kind="bar", hline=1.0,
                    interval=["ci_low", "ci_high"], labels={"speedup": "best found"},
                    xlabel="workload", ylabel="speed vs better of limit 0 / default",
                    title=f"tune on PyTorch work: persistence helps {helped} of "
                          f"{len(res.records)}")
