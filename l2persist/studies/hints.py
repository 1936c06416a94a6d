"""The cache-hint matrix: a 24 MiB hot set re-read while a 1 GiB cold stream passes
(`hot_cold_read`), every load flavour of the hot set against every flavour of the cold
stream; each cell's time against default/default. Which hint keeps the hot set in L2?"""

from __future__ import annotations

import numpy as np

from .. import _core, kernels as K
from ..results import PlotSpec

TITLE = "Cache hints: hot-set flavour x cold-stream flavour"
NEEDS_GPU = True
SOURCE = ("PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution): the cache operators and the "
          "L2::evict_* eviction-priority hints are performance hints; on the lent H200 "
          "(2026-11) a cold stream read with __ldcs / L2::evict_first while a 24 MiB hot set "
          "is re-read ran 1.4x faster.")
MIB = 1 << 20
ROW = "hot-set load flavour x cold-stream load flavour"
INTRO = """# Cache hints: which one keeps the hot set in L2?

**What we measure.** A 24 MiB hot set re-read while a 1 GiB cold stream passes through
(`kernels.hot_cold_read`), with every load flavour for the hot set against every flavour for
the cold stream: cache operators (`cg`, `cs`, `lu`, `nc`) and the L2 eviction-priority hints
(`evict_first`, `evict_last`, `evict_normal`). Each cell is the speed against default/default.

**The source.** The PTX ISA's cache operators and `L2::cache_hint` policies, which the
hardware may honour or ignore; a first measurement on the lent H200 gave 1.4x with `__ldcs` /
`evict_first` on the cold stream."""
WHY = """**Why.** Marking the cold stream evict-first (or streaming, `cs`) lets its lines leave
the L2 before the hot set's, without reserving anything: no set-aside, so no throughput cost
for the rest of the program. It is the first thing to try before persistence."""


def axes(ctx) -> dict:
    flavours = (("default", "cs", "evict_first", "evict_last") if ctx.quick else
                ("default", "cg", "cs", "lu", "nc", "evict_first", "evict_last", "evict_normal"))
    return {"hot_load": flavours, "cold_load": flavours}


def run(ctx):
    dev = ctx.device
    cold_mib = 256 if ctx.quick else 1024
    with _core.Stream(dev) as s, _core.zeros(24 * MIB // 4, np.float32, dev) as hot, \
            _core.zeros(cold_mib * MIB // 4, np.float32, dev) as cold:
        def point(hot_load, cold_load):
            return ctx.measure(lambda: K.hot_cold_read(hot, cold, hot_load=hot_load,
                                                       cold_load=cold_load, stream=s),
                               stream=s, warmup=2)

        records = ctx.sweep(ctx.axes, point)
    derive(records)
    return ctx.results(records, columns=COLUMNS)


COLUMNS = [("hot_load", "hot_load"), ("cold_load", "cold_load"), ("ms", "median ms"),
           ("vs_default", "vs default/default")]


def derive(records) -> None:
    """Each cell's speed against default/default (the same run's; None in a part of the
    sweep without it)."""
    base = next((r["ms"] for r in records if r["hot_load"] == r["cold_load"] == "default"),
                None)
    for r in records:
        r["vs_default"] = base / r["ms"] if base else None


def _default(records) -> dict:
    return next(r for r in records if r["hot_load"] == r["cold_load"] == "default")


def fastest(records) -> dict:
    return max(records, key=lambda r: r["vs_default"])


def findings(res) -> list:
    base, best = _default(res.records), fastest(res.records)
    alone = [r for r in res.records if r["hot_load"] == "default" != r["cold_load"]]
    flat = [r for r in alone if abs(r["vs_default"] - 1) < 0.02]
    res.summary.update(best=dict(best), default_ms=base["ms"])
    return [f"fastest: hot {best['hot_load']} / cold {best['cold_load']} at "
            f"{best['ms']:.3f} ms, {best['vs_default']:.2f}x default/default "
            f"({base['ms']:.3f} ms)",
            f"{len(flat)} of {len(alone)} cold-stream flavours alone (hot default) change the "
            "time by under 2 % (" + ", ".join(r["cold_load"] for r in flat) + "): a hint is a "
            "request the L2 may ignore"]


def plot_spec(res) -> PlotSpec:
    if not any(r["hot_load"] == r["cold_load"] == "default" for r in res.records):
        raise ValueError("the plot draws each cell against default/default, and this part of "
                         "the sweep does not have it (name default in both hot_load and "
                         "cold_load)")
    best = fastest(res.records)
    return PlotSpec(x="cold_load", y=["vs_default"], hue="hot_load", kind="heatmap", hline=1.0,
                    labels={"hot_load": "hot set's load flavour"},
                    xlabel="cold stream's load flavour", ylabel="speed vs default/default (>1 faster)",
                    title=f"Hot 24 MiB re-read under a cold stream: hot {best['hot_load']} / "
                          f"cold {best['cold_load']} is fastest, {best['vs_default']:.2f}x")
