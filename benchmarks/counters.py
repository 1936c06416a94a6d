"""Counter tables (the L1/L2 study's cases are the `granularity` study): a streaming read's DRAM
bytes, an L2-resident re-read's hit rate, and the hot/cold kernel with and without a window
(where does the window's gain come from?)."""

import numpy as np

import l2persist
from l2persist import AccessPolicyWindow
from l2persist import kernels as K
from _common import device_line, finish, parser, table

MIB = 1 << 20


def hot_cold(dev, rows):
    names = ["gpu_time_ns", "l2_hit_rate", "l2_read_hit_rate", "lts__t_sector_op_write_hit_rate.pct",
             "dram_bytes_read", "dram_bytes_write", "l2_read_sectors", "l2_read_hit_sectors"]
    with dev.persisting_l2() as set_aside, l2persist.Stream(dev) as s, \
            l2persist.zeros(256 * MIB // 4, np.int32, dev) as cold:
        for hot_mib in (8, 16, 32):
            with l2persist.zeros(hot_mib * MIB // 4, np.int32, dev) as hot:
                for label, w in (("none", None), ("hitRatio 1",
                                                  AccessPolicyWindow(hot, hit_ratio=1.0))):
                    with s.access_policy(w, reset=True):
                        c = l2persist.measure(lambda: K.hot_cold(hot, cold, stream=s), names,
                                              warmup=lambda: K.hot_cold(hot, cold, stream=s))
                    rows.append(dict(hot_mib=hot_mib, window=label, **c.as_dict()))
    return set_aside


def main():
    args = parser(__doc__).parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    hc_rows = []
    n = 256 * MIB
    with l2persist.zeros(n, np.uint8, dev) as src, \
            l2persist.empty(2 * dev.properties.l2_cache_size, np.uint8, dev) as scratch:
        def cold():
            l2persist.reset_persisting_l2(dev)
            K.stream_write(scratch)
        c = l2persist.measure(lambda: K.stream_read(src),
                              ["dram_bytes_read", "l2_read_sectors", "lts__t_sectors_op_read.sum"],
                              warmup=cold)
        print(f"\nstreaming read of {n} B: dram_bytes_read {c['dram_bytes_read']:.0f} "
              f"({c['dram_bytes_read'] / n:.4f} x), SM->L2 read sectors {c['l2_read_sectors']:.0f}"
              f" ({c['l2_read_sectors'] * 32 / n:.4f} x), all L2 read sectors "
              f"{c['lts__t_sectors_op_read.sum'] * 32 / n:.3f} x (partition crossings included)")
        with src[: 8 * MIB] as small:
            c2 = l2persist.measure(lambda: K.l2_read(small, 10), ["l2_hit_rate"],
                                   warmup=lambda: K.l2_read(small, 1))
            # One read right after a warming read (the warm-up runs inside the pass).
            c3 = l2persist.measure(lambda: K.l2_read(small, 1),
                                   ["l2_hit_rate", "l2_read_hit_sectors", "l2_read_sectors",
                                    "dram_bytes_read"], warmup=lambda: K.l2_read(small, 1))
            # Where L2 bandwidth goes: lookups per sector the SMs asked for.
            c4 = l2persist.measure(lambda: K.l2_read(small, 10),
                                   ["l2_read_sectors", "lts__t_sectors_op_read.sum",
                                    "lts__t_sectors_srcunit_ltcfabric_op_read.sum", "gpu_time_ns"],
                                   warmup=lambda: K.l2_read(small, 1))
        print(f"L2-resident re-read (8 MiB x10): l2_hit_rate {c2['l2_hit_rate']:.2f} %")
        print(f"one 8 MiB read after a warming read: l2_hit_rate {c3['l2_hit_rate']:.2f} %, "
              f"SM read sectors hit {c3['l2_read_hit_sectors']:.0f} of "
              f"{c3['l2_read_sectors']:.0f}, dram_bytes_read {c3['dram_bytes_read']:.0f}")
        print(f"L2-resident read 8 MiB x10: SM sectors {c4['l2_read_sectors']:.0f}, all L2 read "
              f"lookups {c4['lts__t_sectors_op_read.sum']:.0f} "
              f"({c4['lts__t_sectors_op_read.sum'] / c4['l2_read_sectors']:.3f} per SM sector), "
              f"from the partition fabric {c4['lts__t_sectors_srcunit_ltcfabric_op_read.sum']:.0f}, "
              f"{c4['l2_read_sectors'] * 32 / c4['gpu_time_ns'] / 1e3:.2f} TB/s delivered")
    set_aside = hot_cold(dev, hc_rows)
    print(f"\nhot/cold (cold 256 MiB streamed, set-aside {l2persist.human_bytes(set_aside)}):")
    print(table(hc_rows, [("hot_mib", "hot MiB"), ("window", "window"),
                          ("gpu_time_ns", "ns"), ("l2_hit_rate", "L2 hit %"),
                          ("l2_read_hit_rate", "read hit %"),
                          ("lts__t_sector_op_write_hit_rate.pct", "write hit %"),
                          ("dram_bytes_read", "DRAM read B"), ("dram_bytes_write", "DRAM write B")]))
    finish(args, {"device": device_line(dev), "hot_cold": hc_rows,
                  "dram_read_ratio": c["dram_bytes_read"] / n, "l2_hit_rate": c2["l2_hit_rate"]})


if __name__ == "__main__":
    main()
