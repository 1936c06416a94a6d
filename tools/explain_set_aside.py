"""Which counters explain the set-aside penalty? The hot/cold kernel (16 MiB hot, 1 GiB cold)
at persisting limit 0, at the maximum without a window and at the maximum with a window of
hitRatio 1, with every candidate L2 / DRAM metric the chip has (each measured on its own, so
one unknown name does not hide the others). Prints the metrics that move the most."""

import json
import sys

import numpy as np

import l2persist as l2p
from l2persist import kernels as K

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


def main():
    dev = l2p.Device(0)
    raw = set(l2p.counter_names(dev, raw=True))
    picked = sorted(r for r in raw if r.startswith(("lts__", "dram__"))
                    and any(k in r for k in KEYS))
    print(f"{len(raw)} raw metrics; {len(picked)} L2/DRAM candidates:", ", ".join(picked))
    metrics = [m for m in EXTRA if m.split(".")[0] in raw]
    metrics += [m + ".sum" for m in picked if m + ".sum" not in metrics][:40]
    pmax = dev.properties.persisting_l2_cache_max_size
    out = {}
    with l2p.Stream(dev) as s, l2p.zeros(1024 * MIB // 4, np.int32, dev) as cold, \
            l2p.zeros(16 * MIB // 4, np.int32, dev) as hot:
        fn = lambda: K.hot_cold(hot, cold, stream=s)
        configs = {"limit0": (0, None), "max_nowin": (pmax, None),
                   "max_win1": (pmax, l2p.AccessPolicyWindow(hot, hit_ratio=1.0))}
        for name, (limit, window) in configs.items():
            with dev.persisting_l2(limit), s.access_policy(window, reset=True):
                t = l2p.benchmark(fn, stream=s, repeat=15)
                row = {"ms": t.median}
                for i in range(0, len(metrics), 12):  # one session per batch of metrics
                    batch = metrics[i:i + 12]
                    try:
                        row.update(l2p.measure(fn, batch, device=dev, warmup=fn).as_dict())
                    except Exception as e:  # noqa: BLE001 - report and go on
                        print("batch failed:", batch, e, flush=True)
                out[name] = row
                print(name, f"{t.median:.4f} ms", flush=True)
    rows = []
    for m in ["ms"] + metrics:
        a, b, c = (out[k].get(m) for k in ("limit0", "max_nowin", "max_win1"))
        if a is None or b is None:
            continue
        ratio = (b / a) if a else float("inf") if b else 1.0
        rows.append((abs(np.log(ratio)) if ratio > 0 and np.isfinite(ratio) else 99, m, a, b, c))
    rows.sort(reverse=True)
    print("| metric | limit 0 | max, no window | max, hitRatio 1 | max/limit0 |")
    print("|---|---:|---:|---:|---:|")
    for _, m, a, b, c in rows:
        print(f"| {m} | {a:.6g} | {b:.6g} | {c if c is None else format(c, '.6g')} | "
              f"{(b / a) if a else float('nan'):.3f} |")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
