"""The cache-hint matrix: a 24 MiB hot set re-read while a 1 GiB cold stream passes
(`hot_cold_read`), every load flavour of the hot set against every flavour of the cold
stream; each cell's time against default/default. Which hint keeps the hot set in L2?"""

from __future__ import annotations

import numpy as np

from .. import _core, kernels as K
from ..timing import benchmark
from ..results import PlotSpec

TITLE = "Cache hints: hot-set flavour x cold-stream flavour"
NEEDS_GPU = True
SOURCE = ("PTX ISA cache operators and L2::evict_* hints; DESIGN.md measured cold data read with "
          "__ldcs / L2::evict_first while a 24 MiB hot set is re-read: 1.4x faster.")
MIB = 1 << 20


def run(ctx):
    dev = ctx.device
    flavours = (("default", "cs", "evict_first", "evict_last") if ctx.quick else
                ("default", "cg", "cs", "lu", "nc", "evict_first", "evict_last", "evict_normal"))
    cold_mib = 256 if ctx.quick else 1024
    repeat = 7 if ctx.quick else 12
    with _core.Stream(dev) as s, _core.zeros(24 * MIB // 4, np.float32, dev) as hot, \
            _core.zeros(cold_mib * MIB // 4, np.float32, dev) as cold:
        def point(hot_load, cold_load):
            t = benchmark(lambda: K.hot_cold_read(hot, cold, hot_load=hot_load,
                                                  cold_load=cold_load, stream=s),
                          stream=s, warmup=2, repeat=repeat)
            return {"ms": t.median}

        records = ctx.sweep({"hot_load": flavours, "cold_load": flavours}, point)
    base = next(r["ms"] for r in records if r["hot_load"] == r["cold_load"] == "default")
    for r in records:
        r["vs_default"] = base / r["ms"]
    best = max(records, key=lambda r: r["vs_default"])
    notes = [f"fastest: hot {best['hot_load']} / cold {best['cold_load']} at "
             f"{best['vs_default']:.2f}x default/default ({base:.3f} ms)",
             "hint rows that change nothing run at about 1.00x: the hint is a request the L2 "
             "may ignore"]
    return ctx.results(
        records, notes=notes, summary={"best": best, "default_ms": base},
        columns=[("hot_load", "hot flavour"), ("cold_load", "cold flavour"), ("ms", "median ms"),
                 ("vs_default", "vs default/default")],
        plot=PlotSpec(x="cold_load", y=["vs_default"], hue="hot_load", kind="heatmap",
                      xlabel="cold stream's load flavour", ylabel="speed vs default/default",
                      title="Hot 24 MiB re-read under a cold stream"))
