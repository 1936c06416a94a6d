"""Host cost of enqueueing an empty kernel: l2persist vs cuda.core vs CuPy RawKernel vs a
one-element PyTorch add, in the same process, on the same device.

Each sample queues a spin kernel (one thread, `--spin-ms` of GPU time) and then times the
host enqueueing `--count` empty launches behind it: the GPU is busy spinning, so its own
launch throughput cannot hide (or add to) the host's cost. The figure is the median over
`--trials` samples of wall time / count. Target: l2persist at or below cuda.core."""

import time

import numpy as np

import l2persist
from _common import device_line, finish, parser, table


def host_us(launch, spin, sync, count, trials):
    """Median host microseconds per enqueue, measured behind a spin kernel."""
    for _ in range(200):
        launch()
    sync()
    out = []
    for _ in range(trials):
        spin()
        t0 = time.perf_counter()
        for _ in range(count):
            launch()
        out.append((time.perf_counter() - t0) / count * 1e6)
        sync()
    return float(np.median(out)), out


def cuda_core_launcher(device):
    """An empty kernel through cuda.core (None with the reason when it is not installed)."""
    try:
        try:
            from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
        except ImportError:
            from cuda.core.experimental import (Device, LaunchConfig, Program, ProgramOptions,
                                                launch)
    except ImportError as e:
        return None, f"cuda.core: {e}"
    dev = Device(device)
    dev.set_current()
    prog = Program('extern "C" __global__ void empty() {}', code_type="c++",
                   options=ProgramOptions(arch=f"sm_{dev.arch}"))
    kernel = prog.compile("cubin").get_kernel("empty")
    stream = dev.create_stream()
    config = LaunchConfig(grid=1, block=1)
    return (lambda: launch(stream, config, kernel)), stream


def main():
    p = parser(__doc__)
    p.add_argument("--count", type=int, default=400,
                   help="launches per sample; below the driver's queue depth (~1000)")
    p.add_argument("--trials", type=int, default=31)
    p.add_argument("--spin-ms", type=float, default=10.0)
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    K = l2persist.kernels
    spin_ns = int(args.spin_ms * 1e6)
    print(device_line(dev))
    rows = []

    def add(name, launch, stream, sync):
        med, raw = host_us(launch, lambda: K.spin(spin_ns, stream=stream), sync, args.count,
                           args.trials)
        rows.append({"launcher": name, "us": med, "samples": raw})

    with l2persist.Stream(dev) as s:
        add("l2persist.kernels.noop", lambda: K.noop(stream=s), s, s.synchronize)
    try:
        launch, cstream = cuda_core_launcher(args.device)
        if launch is None:
            print(cstream)
        else:
            add("cuda.core launch()", launch, cstream, cstream.sync)
    except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
        print(f"cuda.core: {e!r}")
    try:
        import cupy
        with cupy.cuda.Device(args.device):
            k = cupy.RawKernel(r'extern "C" __global__ void empty() {}', "empty")
            cs = cupy.cuda.Stream(non_blocking=True)
            with cs:
                add("cupy.RawKernel", lambda: k((1,), (1,), ()), cs, cs.synchronize)
    except Exception as e:  # noqa: BLE001
        print(f"cupy: {e!r}")
    try:
        import torch
        x = torch.ones(1, device=f"cuda:{args.device}")
        ts = torch.cuda.Stream(device=args.device)
        with torch.cuda.stream(ts):
            add("torch (1-element add_)", lambda: x.add_(1), ts, ts.synchronize)
    except Exception as e:  # noqa: BLE001
        print(f"torch: {e!r}")
    ours = rows[0]["us"]
    for r in rows:
        r["vs_l2persist"] = r["us"] / ours
    print(table(rows, [("launcher", "launcher"), ("us", "median host us / launch"),
                       ("vs_l2persist", "/ l2persist")]))
    ref = next((r for r in rows if r["launcher"].startswith("cuda.core")), None)
    if ref:
        verdict = "at or below (target met)" if ours <= ref["us"] else "ABOVE (target missed)"
        print(f"\nl2persist {ours:.2f} us vs cuda.core {ref['us']:.2f} us: {verdict}")
    finish(args, {"device": device_line(dev), "method": "host enqueue time behind a spin kernel",
                  "rows": rows})


if __name__ == "__main__":
    main()
