"""Host cost of launching an empty kernel: l2persist vs CuPy RawKernel vs a one-element
PyTorch add, in the same process. Each figure: wall time of `count` launches, then a sync,
divided by `count`; the median of `trials`. Target: l2persist below CuPy."""

import time

import numpy as np

import l2persist
from _common import device_line, finish, parser, table


def per_launch_us(launch, sync, count, trials):
    for _ in range(100):
        launch()
    sync()
    out = []
    for _ in range(trials):
        t0 = time.perf_counter()
        for _ in range(count):
            launch()
        sync()
        out.append((time.perf_counter() - t0) / count * 1e6)
    return float(np.median(out)), out


def main():
    p = parser(__doc__)
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--trials", type=int, default=7)
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    rows = []
    with l2persist.Stream(dev) as s:
        noop = l2persist.kernels.noop
        med, raw = per_launch_us(lambda: noop(stream=s), s.synchronize, args.count, args.trials)
        rows.append({"launcher": "l2persist.kernels.noop", "us": med, "samples": raw})
    try:
        import cupy
        k = cupy.RawKernel(r'extern "C" __global__ void empty() {}', "empty")
        cs = cupy.cuda.Stream(non_blocking=True)
        with cs:
            med, raw = per_launch_us(lambda: k((1,), (1,), ()), cs.synchronize, args.count,
                                     args.trials)
        rows.append({"launcher": "cupy.RawKernel", "us": med, "samples": raw})
    except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
        print(f"cupy: {e!r}")
    try:
        import torch
        x = torch.ones(1, device=f"cuda:{args.device}")
        ts = torch.cuda.Stream()
        with torch.cuda.stream(ts):
            med, raw = per_launch_us(lambda: x.add_(1), ts.synchronize, args.count, args.trials)
        rows.append({"launcher": "torch (1-element add_)", "us": med, "samples": raw})
    except Exception as e:  # noqa: BLE001
        print(f"torch: {e!r}")
    ours = rows[0]["us"]
    for r in rows:
        r["vs_l2persist"] = r["us"] / ours
    print(table(rows, [("launcher", "launcher"), ("us", "median us / launch"),
                       ("vs_l2persist", "/ l2persist")]))
    cupy_row = next((r for r in rows if r["launcher"].startswith("cupy")), None)
    if cupy_row:
        print(f"\nl2persist {ours:.2f} us vs CuPy {cupy_row['us']:.2f} us: "
              f"{'lower (target met)' if ours < cupy_row['us'] else 'HIGHER (target missed)'}")
    finish(args, {"device": device_line(dev), "rows": rows})


if __name__ == "__main__":
    main()
