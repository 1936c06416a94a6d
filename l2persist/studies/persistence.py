"""The Best Practices guide's hot/cold kernel: a cold stream (1 GiB, 256 MiB in quick mode)
while a hot region is updated (read-write) or re-read (read-only), over set-aside x hitRatio x
hot size, each point against the better of (a) limit 0 and (b) the default limit without a
window; tune's pick for each (mode, hot size) is measured and marked."""

from __future__ import annotations

import numpy as np

from .. import _core, kernels as K
from ..tune import describe, tune, verdict
from ..results import PlotSpec

TITLE = "Hot/cold persistence grid with tune's pick, against limit 0 and the default"
NEEDS_GPU = True
SOURCE = ("CUDA Best Practices Guide, 'L2 cache': a hot region in a persisting window with "
          "hitRatio min(1, set-aside / hot) runs faster than without; the guide measures "
          "against the same set-aside without a window.")
MIB = 1 << 20
ROW = ("hot/cold grid: set-aside x hitRatio x hot size, read-write and read-only, `tune`'s "
       "pick marked")
INTRO = """# Hot/cold persistence: which settings beat doing nothing?

**The source.** The CUDA Best Practices Guide's example kernel updates a small hot region and
a large cold stream; with the hot region in a persisting window (hitRatio
`min(1, set-aside / hot bytes)`) it reports a speedup — measured against the *same set-aside
without a window*.

**What we measure.** A 1 GiB cold stream with a hot region of 4-64 MiB, read-write and
read-only, over set-aside levels x hitRatio, each against the better of (a) limit 0 and (b) the
default limit without a window; `tune`'s pick for each case is measured in the same run."""
WHY = """**Why.** Two effects pull against each other. A window keeps the hot lines in the L2 while
the cold stream passes (fewer DRAM reads), but the set-aside itself slows read-write traffic
(the `set-aside-counters` study shows the same sector counts with half the L2
throughput). Read-only work does not pay that price, which is why the read-only rows can gain
where read-write rows lose. Quoting the window against "same set-aside, no window" hides the
cost; the table above does not."""


def axes(ctx) -> dict:
    """mode: the hot region read-write (rw) or read-only (ro); hot_mib: its size."""
    return {"mode": ("rw", "ro"), "hot_mib": (16,) if ctx.quick else (4, 8, 16, 32, 64)}


def run(ctx):
    dev = ctx.device
    props = dev.properties
    pmax = props.persisting_l2_cache_max_size
    guide = _core.default_set_aside(props.l2_cache_size, pmax)
    quick = ctx.quick
    hots = ctx.values("hot_mib")
    asides = (guide,) if quick else (dev.default_persisting_l2_limit, pmax // 2, guide)
    ratios = (0.5, 1.0) if quick else (0.25, 0.5, 0.75, 1.0)
    repeat = 7 if quick else 12
    cold_n = (256 if quick else 1024) * MIB // 4
    rng = np.random.default_rng()
    records = []
    with _core.Stream(dev) as s, \
            _core.to_device(rng.integers(0, 9, cold_n, dtype=np.int32), dev) as cold, \
            _core.to_device(rng.integers(0, 9, max(hots) * MIB // 4, dtype=np.int32),
                            dev) as hot_all:
        def time_config(fn, limit, window, traffic):
            """The measure fields of fn under (limit, window), and the limit granted."""
            with dev.persisting_l2(limit) as granted, s.access_policy(window, reset=True):
                m = ctx.measure(fn, stream=s, warmup=2, repeat=repeat, bytes_moved=traffic)
            return m, granted

        def point(mode, hot_mib):
            hot = hot_all[: hot_mib * MIB // 4]
            fn = (lambda: K.hot_cold(hot, cold, read_only=mode == "ro", stream=s))
            # one thread per cold word touches it and a hot word: read (+ write when rw)
            traffic = (2 if mode == "ro" else 4) * cold.nbytes
            out = []
            a, _ = time_config(fn, 0, None, traffic)
            b, b_lim = time_config(fn, dev.default_persisting_l2_limit, None, traffic)
            out.append(dict(config="(a) limit 0, no window", set_aside=0, hit_ratio=None, **a))
            out.append(dict(config="(b) default limit, no window", set_aside=b_lim,
                            hit_ratio=None, **b))
            for aside in asides:
                m, granted = time_config(fn, aside, None, traffic)
                out.append(dict(config=f"set-aside {granted / MIB:g} MiB, no window",
                                set_aside=granted, hit_ratio=None, **m))
                for h in ratios:
                    w = _core.AccessPolicyWindow(hot, hit_ratio=h, clamp=True)
                    m, granted = time_config(fn, aside, w, traffic)
                    out.append(dict(config=f"set-aside {granted / MIB:g} MiB, hitRatio {h}",
                                    set_aside=granted, hit_ratio=h, **m))
            r = tune(fn, [hot], stream=s, device=dev, repeat=repeat)
            out.append(dict(config="tune's pick", pick=describe(r.recommended),
                            set_aside=r.recommended["set_aside"], hit_ratio=None,
                            ms=r.found_ms if r.persistence_helps else r.baseline_ms,
                            tune_pick=True, tune_helps=r.persistence_helps,
                            tune_ci=list(r.ci)))
            for rec in out:  # the better-baseline rule on the medians (ctx.measure keeps
                # no samples, so the verdict's interval is not used here)
                rec["vs_best_baseline"] = verdict([a["ms"]], [b["ms"]], [rec["ms"]]).speedup
                rec.setdefault("tune_pick", False)
            return out

        records = ctx.sweep(ctx.axes, point)
    return ctx.results(records, columns=COLUMNS)


COLUMNS = [("mode", "mode"), ("hot_mib", "hot_mib (MiB)"), ("config", "configuration"),
           ("ms", "median ms"), ("vs_best_baseline", "vs best baseline"),
           ("pick", "tune's pick")]


def label(r) -> str:
    """A record's setting in words, set-aside sizes exact (11.25 MiB, not 11.2)."""
    if r.get("tune_pick"):
        return "tune's pick"
    if r["config"].startswith(("(a)", "(b)")):
        return r["config"]
    aside = f"set-aside {r['set_aside'] / MIB:g} MiB"
    return aside + (", no window" if r["hit_ratio"] is None else f", hitRatio {r['hit_ratio']}")


def findings(res) -> list:
    records, notes = res.records, []
    for mode in dict.fromkeys(r["mode"] for r in records):  # both, or a part's (--only)
        grid = [r for r in records if r["mode"] == mode and r["hit_ratio"] is not None]
        best = max(grid, key=lambda r: r["vs_best_baseline"])
        picks = [r for r in records if r["mode"] == mode and r["tune_pick"]]
        notes.append(f"{'read-write' if mode == 'rw' else 'read-only'}: best grid point "
                     f"{best['vs_best_baseline']:.3f}x ({label(best)}, hot {best['hot_mib']} "
                     f"MiB); tune: " + "; ".join(
                         f"{p['hot_mib']} MiB -> {p['vs_best_baseline']:.3f}x ({p['pick']})"
                         f"{'' if p['tune_helps'] else ' (no persistence)'}" for p in picks))
    aside_only = [r for r in records if r["mode"] == "rw" and r["hit_ratio"] is None
                  and r["config"].startswith("set-aside")]
    if aside_only:
        worst = min(aside_only, key=lambda r: r["vs_best_baseline"])
        notes.append(f"the set-aside alone slows read-write work down to "
                     f"{worst['vs_best_baseline']:.2f}x ({label(worst)}, hot "
                     f"{worst['hot_mib']} MiB): compare against limit 0, not against it")
    return notes


def plot_spec(res) -> PlotSpec:
    shown = [r for r in res.records if r["hit_ratio"] in (1.0, None)]
    rw = [r for r in shown if r["mode"] == "rw" and r["hit_ratio"] == 1.0]
    best = max(rw, key=lambda r: r["vs_best_baseline"]) if rw else None
    aside = [r for r in shown if r["mode"] == "rw" and r["hit_ratio"] is None
             and r["config"].startswith("set-aside")]
    worst = min(aside, key=lambda r: r["vs_best_baseline"]) if aside else None
    title = "Hot/cold under a 1 GiB cold stream: which settings beat doing nothing"
    if best and worst:
        title = (f"Hot/cold: a window gains at most {best['vs_best_baseline']:.2f}x; the "
                 f"set-aside alone costs read-write work down to {worst['vs_best_baseline']:.2f}x")
    return PlotSpec(x="hot_mib", y=["vs_best_baseline"], hue="config", logx=True, hline=1.0,
                    facet="mode", facet_titles={"rw": "read-write hot region",
                                                "ro": "read-only hot region"},
                    labels={r["config"]: label(r) for r in shown},
                    xlabel="hot region, MiB",
                    ylabel="speed vs better of limit 0 / default (>1 faster)", title=title,
                    where={"hit_ratio": [1.0, None]})
