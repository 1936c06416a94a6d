"""Counter tables (the L1/L2 study's cases are the `granularity` study): a streaming read's
DRAM bytes, an L2-resident re-read's hit rate and where its lookups go, and the hot/cold
kernel with and without a window at the guide's set-aside (where does the window's gain come
from?)."""

from __future__ import annotations

import numpy as np

from .. import _core, kernels as K
from ..counters import measure
from ..results import PlotSpec

TITLE = "Counters: streaming read, L2-resident re-read, hot/cold with and without a window"
NEEDS_GPU = True
NEEDS = ("gpu", "counters")
NOTEBOOK = False
SOURCE = "l2persist's own questions: which cache served what, and where the window's gain is."
ROW = "DRAM bytes of a streaming read, L2 hit rates of a re-read, hot/cold counters with a window"
MIB = 1 << 20
HOT_COLD = ["gpu_time_ns", "l2_hit_rate", "l2_read_hit_rate",
            "lts__t_sector_op_write_hit_rate.pct", "dram_bytes_read", "dram_bytes_write",
            "l2_read_sectors", "l2_read_hit_sectors"]


def _reads(dev, summary):
    """The streaming read's DRAM bytes and the L2-resident re-read's figures (summary)."""
    n = 256 * MIB
    with _core.zeros(n, np.uint8, dev) as src, \
            _core.empty(2 * dev.properties.l2_cache_size, np.uint8, dev) as scratch:
        def cold():
            _core.reset_persisting_l2(dev.index)
            K.stream_write(scratch)
        c = measure(lambda: K.stream_read(src), ["dram_bytes_read", "l2_read_sectors",
                                                 "lts__t_sectors_op_read.sum"],
                    device=dev, warmup=cold)
        summary.update(stream_dram_read_ratio=c["dram_bytes_read"] / n,
                       stream_sm_sectors_ratio=c["l2_read_sectors"] * 32 / n,
                       stream_l2_sectors_ratio=c["lts__t_sectors_op_read.sum"] * 32 / n)
        with src[: 8 * MIB] as small:
            c2 = measure(lambda: K.l2_read(small, 10), ["l2_hit_rate"], device=dev,
                         warmup=lambda: K.l2_read(small, 1))
            c4 = measure(lambda: K.l2_read(small, 10),
                         ["l2_read_sectors", "lts__t_sectors_op_read.sum",
                          "lts__t_sectors_srcunit_ltcfabric_op_read.sum", "gpu_time_ns"],
                         device=dev, warmup=lambda: K.l2_read(small, 1))
        summary.update(reread_l2_hit_rate=c2["l2_hit_rate"],
                       lookups_per_sm_sector=c4["lts__t_sectors_op_read.sum"]
                       / c4["l2_read_sectors"],
                       fabric_sectors=c4["lts__t_sectors_srcunit_ltcfabric_op_read.sum"],
                       reread_tbs=c4["l2_read_sectors"] * 32 / c4["gpu_time_ns"] / 1e3)


def axes(ctx) -> dict:
    """The hot/cold part's: hot_mib, the hot region; window, none or one of hitRatio 1 on it
    (the streaming read and the re-read run in every part)."""
    return {"hot_mib": (8, 16) if ctx.quick else (8, 16, 32), "window": ("none", "hitRatio 1")}


def run(ctx):
    dev = ctx.device
    summary = {}
    _reads(dev, summary)
    with dev.persisting_l2() as set_aside, _core.Stream(dev) as s, \
            _core.zeros(256 * MIB // 4, np.int32, dev) as cold:
        def point(hot_mib, window):
            with _core.zeros(hot_mib * MIB // 4, np.int32, dev) as hot:
                w = _core.AccessPolicyWindow(hot, hit_ratio=1.0) if window else None
                with s.access_policy(w, reset=True):
                    c = measure(lambda: K.hot_cold(hot, cold, stream=s), HOT_COLD, device=dev,
                                warmup=lambda: K.hot_cold(hot, cold, stream=s))
            return c.as_dict()

        records = ctx.sweep(ctx.axes, lambda hot_mib, window: point(hot_mib, window != "none"))
    summary["set_aside"] = set_aside
    return ctx.results(records, summary=summary, columns=COLUMNS)


COLUMNS = [("hot_mib", "hot_mib (MiB)"), ("window", "window"), ("gpu_time_ns", "ns"),
           ("l2_hit_rate", "L2 hit %"), ("l2_read_hit_rate", "read hit %"),
           ("lts__t_sector_op_write_hit_rate.pct", "write hit %"),
           ("dram_bytes_read", "DRAM read B"), ("dram_bytes_write", "DRAM write B")]


def findings(res) -> list:
    s = res.summary
    out = [f"streaming read: DRAM bytes {s['stream_dram_read_ratio']:.4f}x the bytes asked, SM "
           f"read sectors {s['stream_sm_sectors_ratio']:.4f}x, all L2 read sectors "
           f"{s['stream_l2_sectors_ratio']:.3f}x (partition crossings included)",
           f"L2-resident re-read (8 MiB x10): hit rate {s['reread_l2_hit_rate']:.2f} %, "
           f"{s['lookups_per_sm_sector']:.3f} L2 lookups per SM sector, "
           f"{s['reread_tbs']:.2f} TB/s delivered"]
    for r in res.records:
        if r["window"] != "none":
            base = next((b for b in res.records if b["hot_mib"] == r["hot_mib"]
                         and b["window"] == "none"), None)
            if base is None:  # a part of the sweep (--only window=hitRatio 1)
                continue
            out.append(f"hot {r['hot_mib']} MiB at set-aside {s['set_aside'] / MIB:g} MiB: the "
                       f"window takes DRAM reads from {base['dram_bytes_read'] / MIB:.1f} to "
                       f"{r['dram_bytes_read'] / MIB:.1f} MiB and the time from "
                       f"{base['gpu_time_ns'] / 1e3:.1f} to {r['gpu_time_ns'] / 1e3:.1f} us")
    return out


def plot_spec(res) -> PlotSpec:
    return PlotSpec(x="hot_mib", y=["l2_hit_rate"], hue="window", logx=True,
                    xlabel="hot region, MiB", ylabel="L2 hit rate, %",
                    title="Hot/cold at the guide's set-aside: the window's L2 hits")
