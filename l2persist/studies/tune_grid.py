"""tune() against an exhaustive grid, on the hot/cold kernel (read-write and read-only; hot 8,
16, 32, 64 MiB; 1 GiB cold) and on the CUDA guide's worked example (kernel A x10 + B on data1).

The grid: set-aside 0, the default, every second granule up to the max, x hitRatio 0.1..1.0
(PERSISTING hits, STREAMING misses), plus the baselines (a) limit 0 and (b) the default limit
without a window. At the end the grid's best point and tune's pick are re-measured interleaved
(same run), so "pick vs grid best" compares like with like. The bars: the pick within 2 % of
the grid's best, in at most a quarter of the grid's evaluations."""

from __future__ import annotations

import time

import numpy as np

from .. import _core
from ..plan import Plan
from ..results import PlotSpec
from ..timing import benchmark
from .tune import guide_workloads

TITLE = "tune() against an exhaustive set-aside x hitRatio grid"
NEEDS_GPU = True
NEEDS = ("gpu",)
NOTEBOOK = False
SOURCE = "l2persist's own claim: tune finds what a full grid finds, in a quarter of the time."
ROW = ("`tune()` vs an exhaustive set-aside x hitRatio grid on hot/cold and the guide's "
       "example; bars: within 2 % of the grid's best, <= 1/4 of its evaluations")
MIB = 1 << 20
WITHIN, EVALS = 1.02, 0.25


def grid(dev) -> list:
    """The grid's configurations, in tune's layout ({"set_aside", "windows": [None | dict]}):
    every second of the tuner's set-aside levels (_core.set_aside_levels), with 0, the
    default and the max."""
    g, pmax = dev.persisting_l2_granule, dev.properties.persisting_l2_cache_max_size
    default = dev.default_persisting_l2_limit
    levels = [s for s in _core.set_aside_levels(g, pmax, default)
              if s in (0, default, pmax) or (s % g == 0 and (s // g) % 2 == 0)]
    props = {"hit_prop": _core.AccessProperty.PERSISTING,
             "miss_prop": _core.AccessProperty.STREAMING}
    configs = [{"set_aside": 0, "windows": [None]}, {"set_aside": default, "windows": [None]}]
    return configs + [{"set_aside": s, "windows": [dict(hit_ratio=h / 10, **props)]}
                      for s in levels for h in range(1, 11)]


def _samples(fn, s, dev, target, config, repeat) -> list:
    """fn's times under config, installed as a Plan (restored on exit)."""
    w = config["windows"][0]
    window = None if w is None else _core.AccessPolicyWindow(
        target, hit_ratio=w["hit_ratio"], hit_prop=w["hit_prop"], miss_prop=w["miss_prop"],
        clamp=True)
    plan = Plan(dev, set_aside=config["set_aside"])
    plan.add(s, window)
    with plan:
        return list(benchmark(fn, stream=s, warmup=2, repeat=repeat).samples)


def _case(fn, target, s, dev, repeat):
    from ..tune import describe, tune, verdict
    t0 = time.perf_counter()
    points = [(c, _samples(fn, s, dev, target, c, repeat)) for c in grid(dev)]
    grid_s = time.perf_counter() - t0
    best_cfg, best = min(points, key=lambda x: float(np.median(x[1])))
    # the grid's best against the better of (a) limit 0 and (b) the default: the one rule
    vs_base = verdict(points[0][1], points[1][1], best).speedup
    r = tune(fn, [target], stream=s, device=dev, repeat=repeat)
    pick, gbest = [], []
    for _ in range(5):  # tune's pick and the grid's best, interleaved in one run
        pick += _samples(fn, s, dev, target, r.recommended, repeat)
        gbest += _samples(fn, s, dev, target, best_cfg, repeat)
    pick_ms, gbest_ms = float(np.median(pick)), float(np.median(gbest))
    return {"limit0_ms": r.limit0_ms, "default_ms": r.default_ms,
            "pick": describe(r.recommended), "pick_ms": pick_ms, "helps": r.persistence_helps,
            "ci_low": r.ci[0], "ci_high": r.ci[1], "grid_best": describe(best_cfg),
            "grid_best_ms": gbest_ms, "grid_best_vs_base": vs_base,
            "pick_vs_grid": pick_ms / gbest_ms, "evals": r.evals, "grid_evals": len(points),
            "tune_s": r.wall_s, "grid_s": grid_s}


def _cases(quick: bool) -> dict:
    """case (the table's name, what --only case= names) -> (mode, hot MiB)."""
    out = {f"hot/cold {m} {h} MiB": (m, h) for h in ((16,) if quick else (8, 16, 32, 64))
           for m in ("rw", "ro")}
    out["guide example A x10 + B"] = ("guide", 0)
    return out


def axes(ctx) -> dict:
    return {"case": list(_cases(ctx.quick))}


def run(ctx):
    dev = ctx.device
    repeat = 5 if ctx.quick else 10
    cases = _cases(ctx.quick)
    hots = [mib for mode, mib in cases.values() if mode != "guide"]
    rng = np.random.default_rng()
    cold_n = (256 if ctx.quick else 1024) * MIB // 4
    with guide_workloads(dev, hots, cold_n, rng) as (s, hot_cold, guide, data1):
        def point(case):
            mode, mib = cases[case]
            if mode == "guide":
                return _case(guide, data1, s, dev, repeat)
            fn, hot = hot_cold(mode, mib)
            return _case(fn, hot, s, dev, repeat)

        records = ctx.sweep(ctx.axes, point, desc="tune vs grid")
    return ctx.results(records, columns=COLUMNS)


COLUMNS = [("case", "case"), ("pick", "tune's pick"), ("grid_best", "grid's best"),
           ("grid_best_vs_base", "grid best vs baseline"), ("pick_vs_grid", "pick / grid best"),
           ("evals", "tune evals"), ("grid_evals", "grid evals"), ("tune_s", "tune s")]


def findings(res) -> list:
    worst = max(res.records, key=lambda r: r["pick_vs_grid"])
    evals = max(r["evals"] / r["grid_evals"] for r in res.records)
    return [f"{r['case']}: pick {r['pick']} at {r['pick_vs_grid']:.3f}x the grid's best time "
            f"({r['grid_best']}, {r['grid_best_vs_base']:.3f}x the baseline)"
            for r in res.records] + [
        f"worst pick / grid best {worst['pick_vs_grid']:.3f} ({worst['case']}); evaluations at "
        f"most {evals:.2f} of the grid's; tune took at most "
        f"{max(r['tune_s'] for r in res.records):.1f} s"]


def bars(res) -> list:
    worst = max(r["pick_vs_grid"] for r in res.records)
    evals = max(r["evals"] / r["grid_evals"] for r in res.records)
    return [(f"tune's pick within {(WITHIN - 1) * 100:g} % of the grid's best (worst "
             f"{worst:.3f})", worst <= WITHIN),
            (f"tune uses at most {EVALS:g} of the grid's evaluations (worst {evals:.2f})",
             evals <= EVALS)]


def plot_spec(res) -> PlotSpec:
    worst = max(r["pick_vs_grid"] for r in res.records)
    return PlotSpec(x="case", y=["pick_vs_grid"], kind="bar", hline=1.0,
                    labels={"pick_vs_grid": "tune's pick / grid's best (time)"},
                    xlabel="workload", ylabel="time of tune's pick / grid's best (<= 1.02: bar)",
                    title=f"tune vs an exhaustive grid: worst pick {worst:.3f}x the grid's best")
