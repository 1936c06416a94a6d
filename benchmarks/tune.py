"""tune() against an exhaustive grid, on the hot/cold kernel (read-write and read-only; hot 8,
16, 32, 64 MiB; 1 GiB cold) and on the CUDA guide's worked example (kernel A x10 + B on data1).

The grid: set-aside 0, the default, every second granule up to the max, x hitRatio 0.1..1.0
(PERSISTING hits, STREAMING misses), plus the baselines (a) limit 0 and (b) the default limit
without a window. At the end the grid's best point and tune's pick are re-measured interleaved
(same run), so "pick vs grid best" compares like with like. Speedups are against the better of
(a) and (b)."""

import time

import numpy as np

import l2persist
from l2persist import kernels as K
from l2persist.tune import _Installer, _describe
from _common import device_line, finish, parser, table

MIB = 1 << 20


def grid_configs(dev):
    g, pmax = dev.persisting_l2_granule, dev.properties.persisting_l2_cache_max_size
    levels = sorted({0, dev.default_persisting_l2_limit,
                     *[min(k * g, pmax) for k in range(2, pmax // g + 2, 2)]})
    props = {"hit_prop": l2persist.AccessProperty.PERSISTING,
             "miss_prop": l2persist.AccessProperty.STREAMING}
    configs = [{"set_aside": 0, "windows": [None]},
               {"set_aside": dev.default_persisting_l2_limit, "windows": [None]}]
    configs += [{"set_aside": s, "windows": [dict(hit_ratio=h / 10, **props)]}
                for s in levels for h in range(1, 11)]
    return configs


def timed(fn, inst, s, dev, config, repeat):
    inst.install(config)
    return l2persist._core.time_calls(fn, stream=s, warmup=2, repeat=repeat, device=dev,
                                      hold_us=50.0)


def run_case(name, fn, target, s, dev, repeat):
    inst = _Installer(dev, [target], s)
    try:
        t0 = time.perf_counter()
        grid = [(c, float(np.median(timed(fn, inst, s, dev, c, repeat))))
                for c in grid_configs(dev)]
        grid_wall = time.perf_counter() - t0
        best_cfg, best_ms = min(grid, key=lambda x: x[1])
        base_ms = min(grid[0][1], grid[1][1])
    finally:
        inst.restore()
    r = l2persist.tune(fn, [target], stream=s, device=dev, repeat=repeat)
    # the grid's best and tune's pick, interleaved in one run
    inst = _Installer(dev, [target], s)
    try:
        pick, gbest = [], []
        for _ in range(5):
            pick += timed(fn, inst, s, dev, r.recommended, repeat)
            gbest += timed(fn, inst, s, dev, best_cfg, repeat)
    finally:
        inst.restore()
    pick_ms, gbest_ms = float(np.median(pick)), float(np.median(gbest))
    return {"case": name, "limit0_ms": r.limit0_ms, "default_ms": r.default_ms,
            "aside_ms": r.aside_ms, "pick": _describe(r.recommended),
            "pick_ms": pick_ms, "speedup": r.baseline_ms / r.found_ms if r.persistence_helps
            else 1.0, "ci": f"{r.ci[0]:.3f}-{r.ci[1]:.3f}", "helps": r.persistence_helps,
            "grid_best": _describe(best_cfg), "grid_best_ms": gbest_ms,
            "grid_best_vs_base": base_ms / best_ms, "pick_vs_grid": pick_ms / gbest_ms,
            "evals": r.evals, "grid_evals": len(grid), "tune_s": r.wall_s,
            "grid_s": grid_wall}


def main():
    p = parser(__doc__)
    p.add_argument("--cold-mib", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--hot", default="8,16,32,64")
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    rows = []
    rng = np.random.default_rng()
    with l2persist.Stream(dev) as s, \
            l2persist.to_device(rng.integers(0, 1 << 20, args.cold_mib * MIB // 4,
                                             dtype=np.int32), dev) as cold:
        for mib in map(int, args.hot.split(",")):
            with l2persist.to_device(rng.integers(0, 1 << 20, mib * MIB // 4, dtype=np.int32),
                                     dev) as hot:
                for ro in (False, True):
                    fn = (lambda h=hot, r=ro: K.hot_cold(h, cold, read_only=r, stream=s))
                    rows.append(run_case(f"hot/cold {'ro' if ro else 'rw'} {mib} MiB", fn,
                                         hot, s, dev, args.repeat))
                    print(rows[-1]["case"], f"{rows[-1]['pick_vs_grid']:.3f}", flush=True)
        set_aside = l2persist._core.default_set_aside(
            dev.properties.l2_cache_size, dev.properties.persisting_l2_cache_max_size)
        with l2persist.to_device(rng.random(set_aside // 4, dtype=np.float32), dev) as data1:
            def guide():
                for _ in range(10):
                    K.scale_shift(data1, 1.0, 1.0, stream=s)
                K.scale_shift(data1, 2.0, 0.0, stream=s)
            rows.append(run_case("guide example A x10 + B", guide, data1, s, dev, args.repeat))
    print(table(rows, [("case", "case"), ("limit0_ms", "(a) limit 0 ms"),
                       ("default_ms", "(b) default ms"), ("aside_ms", "(c) set-aside ms"),
                       ("pick", "tune's pick"), ("speedup", "pick vs best baseline"),
                       ("ci", "95% CI"), ("grid_best", "grid's best"),
                       ("grid_best_vs_base", "grid best vs baseline"),
                       ("pick_vs_grid", "pick / grid best (time)"), ("evals", "tune evals"),
                       ("grid_evals", "grid evals"), ("tune_s", "tune s")]))
    worst = max(r["pick_vs_grid"] for r in rows)
    evals = max(r["evals"] / r["grid_evals"] for r in rows)
    print(f"\nbars: pick within 2 % of the grid's best: worst {worst:.3f} "
          f"({'met' if worst <= 1.02 else 'NOT met'}); evaluations <= grid/4: worst "
          f"{evals:.2f} ({'met' if evals <= 0.25 else 'NOT met'}); tune under 10 s: worst "
          f"{max(r['tune_s'] for r in rows):.1f} s")
    finish(args, {"device": device_line(dev), "rows": rows})


if __name__ == "__main__":
    main()
