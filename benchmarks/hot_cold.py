"""The Best Practices guide's hot/cold kernel: 1 GiB streamed (cold) while a hot region of
2..64 MiB is updated, with no window, a window of hitRatio 1 over the hot region, and the
guide's tuned hitRatio = min(1, set_aside / hot_bytes). The set-aside is the guide's
min(0.75 L2, persisting max); persisting lines are reset between configurations."""

import numpy as np

import l2persist
from l2persist import AccessPolicyWindow
from l2persist import kernels as K
from _common import device_line, finish, parser, table

MIB = 1 << 20


def main():
    p = parser(__doc__)
    p.add_argument("--cold-mib", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=15)
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    rows = []
    cold_n = args.cold_mib * MIB // 4
    with dev.persisting_l2() as set_aside, l2persist.Stream(dev) as s, \
            l2persist.zeros(cold_n, np.int32, dev) as cold, \
            l2persist.zeros(64 * MIB // 4, np.int32, dev) as hot_all:
        for hot_mib in (2, 4, 8, 16, 24, 32, 48, 64):
            hot = hot_all[: hot_mib * MIB // 4]
            row = {"hot_mib": hot_mib}
            tuned = min(1.0, set_aside / hot.nbytes)
            configs = {"none": None, "hit1": AccessPolicyWindow(hot, hit_ratio=1.0, clamp=True),
                       "tuned": AccessPolicyWindow(hot, hit_ratio=tuned, clamp=True)}
            for name, window in configs.items():
                with s.access_policy(window, reset=True):
                    t = l2persist.benchmark(lambda: K.hot_cold(hot, cold, stream=s), stream=s,
                                            warmup=3, repeat=args.repeat)
                row[f"{name}_ms"] = t.median
            row["tuned_ratio"] = tuned
            row["hit1_speedup"] = row["none_ms"] / row["hit1_ms"]
            row["tuned_speedup"] = row["none_ms"] / row["tuned_ms"]
            rows.append(row)
    print(f"set-aside granted: {l2persist.human_bytes(set_aside)}; cold stream "
          f"{args.cold_mib} MiB")
    print(table(rows, [("hot_mib", "hot MiB"), ("none_ms", "no window ms"),
                       ("hit1_ms", "hitRatio 1 ms"), ("tuned_ratio", "tuned hitRatio"),
                       ("tuned_ms", "tuned ms"), ("hit1_speedup", "speedup hit1"),
                       ("tuned_speedup", "speedup tuned")]))
    finish(args, {"device": device_line(dev), "set_aside": set_aside, "rows": rows})


if __name__ == "__main__":
    main()
