"""The non-coherent cache study on this GPU: out[i] = in[map[i]] with a random map, plain /
const __restrict__ / texture-object variants, N = 2^0 .. 2^27, 10 iterations each,
ping-ponging in and out, data and maps generated on the device. Target: the whole table in
under 5 s of wall time, data generation included.

The study ran on a K20X (cc 3.5); its source, as quoted in DESIGN.md, gives its findings but
not its per-N table: the read-only and texture paths helped most between 32 KiB and 4 MiB,
and texture fetches had a fixed overhead of about 7 ns per launch there."""

import time

import numpy as np

import l2persist
from l2persist import kernels as K
from _common import device_line, finish, parser, table

VARIANTS = ("plain", "restrict", "texture")


def main():
    p = parser(__doc__)
    p.add_argument("--max-log2", type=int, default=27)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--seed-map", action="store_true",
                   help="use the study's srand(0); rand() %% N map (host-generated, slower)")
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    wall0 = time.perf_counter()
    nmax = 1 << args.max_log2
    rows = []
    with l2persist.Stream(dev) as s, l2persist.empty(nmax, np.int32, dev) as a, \
            l2persist.empty(nmax, np.int32, dev) as b, l2persist.empty(nmax, np.int32, dev) as m:
        for k in range(args.max_log2 + 1):
            n = 1 << k
            bufs = [a[:n], b[:n]]
            mp = m[:n]
            if args.seed_map:
                mp.copy_from(K.seed_map(n))
            else:
                K.random_map(mp, k, stream=s)
            K.random_map(bufs[0], 1000 + k, range=2**31 - 1, stream=s)
            row = {"log2N": k, "bytes": 4 * n}
            for v in VARIANTS:
                state = [0]

                def step(v=v):  # out = in[map], then swap in and out
                    i = state[0]
                    K.gather(bufs[1 - i], bufs[i], mp, v, check=False, stream=s)
                    state[0] = 1 - i

                t = l2persist.benchmark(step, stream=s, warmup=1, repeat=args.iterations)
                row[f"{v}_us"] = t.median * 1e3
            row["restrict_speedup"] = row["plain_us"] / row["restrict_us"]
            row["texture_speedup"] = row["plain_us"] / row["texture_us"]
            rows.append(row)
        s.synchronize()
        # One final correctness check at a mid size against NumPy.
        n = 1 << 12
        K.random_map(m[:n], 99, stream=s)
        with l2persist.empty(n, np.int32, dev) as out:
            K.gather(out, a[:n], m[:n], "texture", stream=s)
            s.synchronize()
            ok = np.array_equal(out.to_numpy(), a[:n].to_numpy()[m[:n].to_numpy()])
    wall = time.perf_counter() - wall0
    print(table(rows, [("log2N", "log2 N"), ("bytes", "bytes of in"), ("plain_us", "plain us"),
                       ("restrict_us", "restrict us"), ("texture_us", "texture us"),
                       ("restrict_speedup", "plain/restrict"),
                       ("texture_speedup", "plain/texture")]))
    small = [r for r in rows if r["log2N"] <= 4]
    overhead = np.median([r["texture_us"] - r["plain_us"] for r in small]) * 1e3
    band = [r for r in rows if 32 << 10 <= r["bytes"] <= 4 << 20]
    print(f"\nwhole table: {wall:.2f} s wall (target < 5 s), check vs NumPy: {ok}")
    print(f"texture minus plain at N <= 16: {overhead:.1f} ns per launch (K20X study: ~7 ns)")
    print(f"32 KiB..4 MiB: restrict {np.median([r['restrict_speedup'] for r in band]):.3f}x, "
          f"texture {np.median([r['texture_speedup'] for r in band]):.3f}x plain (median)")
    finish(args, {"device": device_line(dev), "rows": rows, "wall_s": wall, "check": bool(ok),
                  "texture_overhead_ns": float(overhead)})


if __name__ == "__main__":
    main()
