"""Which counters explain the set-aside penalty? The hot/cold kernel (16 MiB hot, 1 GiB cold)
at persisting limit 0, at the maximum without a window and at the maximum with a window of
hitRatio 1, with every candidate L2 / DRAM metric the chip has (measured in batches, so one
unknown name does not hide the others). The records are the metrics, the most moved first."""

from __future__ import annotations

import math

import numpy as np

from .. import _core, kernels as K
from ..counters import counter_names, measure
from ..results import PlotSpec

TITLE = "The set-aside penalty under the counters: every L2 / DRAM metric at three settings"
NEEDS_GPU = True
NEEDS = ("gpu", "counters")
NOTEBOOK = False
SOURCE = ("l2persist's own question: the set-aside alone slows read-write work up to 2.2x; "
          "which counters move with it?")
ROW = ("every L2 / DRAM counter of the hot/cold kernel at limit 0, the maximum set-aside and "
       "the maximum with a window")
MIB = 1 << 20
KEYS = ("persist", "evict", "fabric", "fill", "dirty", "clean", "reclaim", "lookup_miss",
        "throughput", "sectors_op_write", "sectors_op_read")
EXTRA = ["lts__t_sectors_srcunit_ltcfabric.sum", "lts__t_sector_op_write_hit_rate.pct",
         "lts__t_sectors_lookup_miss.sum", "lts__t_sectors_lookup_hit.sum",
         "lts__throughput.avg.pct_of_peak_sustained_elapsed",
         "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sectors.sum",
         "lts__d_sectors_fill_device.sum", "lts__d_sectors_fill_sysmem.sum",
         "lts__t_sectors_op_write.sum", "lts__t_sectors_op_read.sum", "dram__bytes_read.sum",
         "dram__bytes_write.sum", "gpu__time_duration.sum", "lts__cycles_active.avg",
         "lts__t_sector_hit_rate.pct"]
SETTINGS = ("limit0", "max_nowin", "max_win1")


def _metrics(dev, quick: bool) -> list:
    raw = set(counter_names(dev, raw=True))
    picked = sorted(r for r in raw if r.startswith(("lts__", "dram__"))
                    and any(k in r for k in KEYS))
    metrics = [m for m in EXTRA if m.split(".")[0] in raw]
    metrics += [m + ".sum" for m in picked if m + ".sum" not in metrics][:40]
    return metrics[:12] if quick else metrics


def run(ctx):
    dev = ctx.device
    metrics = _metrics(dev, ctx.quick)
    pmax = dev.properties.persisting_l2_cache_max_size
    out, failed = {}, []
    with _core.Stream(dev) as s, _core.zeros(1024 * MIB // 4, np.int32, dev) as cold, \
            _core.zeros(16 * MIB // 4, np.int32, dev) as hot:
        def fn():
            K.hot_cold(hot, cold, stream=s)
        settings = {"limit0": (0, None), "max_nowin": (pmax, None),
                    "max_win1": (pmax, _core.AccessPolicyWindow(hot, hit_ratio=1.0))}
        for name in SETTINGS:
            limit, window = settings[name]
            with dev.persisting_l2(limit), s.access_policy(window, reset=True):
                row = {"ms": ctx.measure(fn, stream=s)["ms"]}
                for i in range(0, len(metrics), 12):  # one session per batch of metrics
                    batch = metrics[i:i + 12]
                    try:
                        row.update(measure(fn, batch, device=dev, warmup=fn).as_dict())
                    except (ValueError, RuntimeError) as e:  # an unknown name: say, go on
                        failed.append(f"{', '.join(batch)}: {e}")
                out[name] = row
    records = []
    for m in ["ms"] + metrics:
        a, b, c = (out[k].get(m) for k in SETTINGS)
        if a is None or b is None:
            continue
        ratio = b / a if a else (math.inf if b else 1.0)
        records.append({"metric": m, "limit0": a, "max_nowin": b, "max_win1": c,
                        "max_vs_limit0": ratio})
    records.sort(key=lambda r: -abs(math.log(r["max_vs_limit0"]))
                 if 0 < r["max_vs_limit0"] < math.inf else -99.0)
    notes = [f"metric batches that failed: {'; '.join(failed)}"] if failed else []
    return ctx.results(records, notes=notes, summary={"failed_batches": failed},
                       columns=[("metric", "metric"), ("limit0", "limit 0"),
                                ("max_nowin", "max, no window"),
                                ("max_win1", "max, hitRatio 1"),
                                ("max_vs_limit0", "max / limit 0")])


def findings(res) -> list:
    t = next(r for r in res.records if r["metric"] == "ms")
    moved = [r for r in res.records if r["metric"] != "ms"][:6]
    return [f"the maximum set-aside without a window takes the kernel from {t['limit0']:.3f} "
            f"to {t['max_nowin']:.3f} ms ({t['max_vs_limit0']:.2f}x)",
            "the metrics that move the most (max / limit 0): " + "; ".join(
                f"{r['metric']} {r['max_vs_limit0']:.3g}x" for r in moved)] + [
        f"metric batches that failed: {b}" for b in res.summary.get("failed_batches", [])]


def plot_spec(res) -> PlotSpec:
    top = [r["metric"] for r in res.records if 0 < r["max_vs_limit0"] < math.inf][:12]
    return PlotSpec(x="metric", y=["max_vs_limit0"], kind="bar", hline=1.0,
                    labels={"max_vs_limit0": "max set-aside / limit 0"}, where={"metric": top},
                    xlabel="counter", ylabel="value at the max set-aside / at limit 0",
                    title="The set-aside penalty: the counters that move the most")
