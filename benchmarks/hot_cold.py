"""The Best Practices guide's hot/cold kernel: 1 GiB streamed (cold) while a hot region of
2..64 MiB is updated, under (a) persisting limit 0, no window (what a user has without
l2persist), (b) the device's default limit, no window, (c) the guide's set-aside
min(0.75 L2, max) without a window, and (d) that set-aside with a window over the hot region,
hitRatio 1 or the guide's min(1, set_aside / hot_bytes). Speedups are against the better of
(a) and (b); persisting lines are reset between configurations."""

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
    p.add_argument("--read-only", action="store_true")
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    props = dev.properties
    set_aside = l2persist._core.default_set_aside(props.l2_cache_size,
                                                  props.persisting_l2_cache_max_size)
    rows = []
    cold_n = args.cold_mib * MIB // 4
    rng = np.random.default_rng()
    with l2persist.Stream(dev) as s, \
            l2persist.to_device(rng.integers(0, 9, cold_n, dtype=np.int32), dev) as cold, \
            l2persist.to_device(rng.integers(0, 9, 64 * MIB // 4, dtype=np.int32), dev) as hot_all:
        for hot_mib in (2, 4, 8, 16, 24, 32, 48, 64):
            hot = hot_all[: hot_mib * MIB // 4]
            row = {"hot_mib": hot_mib}
            guide = min(1.0, set_aside / hot.nbytes)
            configs = {"a": (0, None), "b": (dev.default_persisting_l2_limit, None),
                       "c": (set_aside, None),
                       "hit1": (set_aside, AccessPolicyWindow(hot, hit_ratio=1.0, clamp=True)),
                       "guide": (set_aside, AccessPolicyWindow(hot, hit_ratio=guide,
                                                               clamp=True))}
            for name, (limit, window) in configs.items():
                with dev.persisting_l2(limit), s.access_policy(window, reset=True):
                    t = l2persist.benchmark(
                        lambda: K.hot_cold(hot, cold, read_only=args.read_only, stream=s),
                        stream=s, warmup=3, repeat=args.repeat)
                row[f"{name}_ms"] = t.median
            base = min(row["a_ms"], row["b_ms"])
            row["guide_ratio"] = guide
            for name in ("c", "hit1", "guide"):
                row[f"{name}_x"] = base / row[f"{name}_ms"]
            rows.append(row)
    print(f"guide's set-aside: {l2persist.human_bytes(set_aside)}; default limit "
          f"{l2persist.human_bytes(dev.default_persisting_l2_limit)}; cold stream "
          f"{args.cold_mib} MiB; {'read-only' if args.read_only else 'read-write'}")
    print(table(rows, [("hot_mib", "hot MiB"), ("a_ms", "(a) limit 0 ms"),
                       ("b_ms", "(b) default ms"), ("c_ms", "(c) set-aside ms"),
                       ("hit1_ms", "(d) hitRatio 1 ms"), ("guide_ratio", "guide hitRatio"),
                       ("guide_ms", "(d) guide ms"), ("c_x", "(c) vs best baseline"),
                       ("hit1_x", "hitRatio 1 vs best baseline"),
                       ("guide_x", "guide vs best baseline")]))
    finish(args, {"device": device_line(dev), "set_aside": set_aside, "rows": rows})


if __name__ == "__main__":
    main()
