"""Streaming bandwidth at the roofline: cudaMemcpy D2D (read + write counted), STREAM-style
read / write / copy / triad with load and store flavours, and the L2-resident read (ours, and
with CuPy installed a reference kernel on gpu-benches' scheme) over data set sizes."""

from __future__ import annotations

import numpy as np

from .. import _core, kernels as K
from ..timing import benchmark
from ..results import PlotSpec

TITLE = "Streaming and L2-resident bandwidth vs cudaMemcpy"
NEEDS_GPU = True
SOURCE = ("STREAM's kernels; the gpu-benches L2 kernel (te42kyfo/gpu-benches gpu-l2-cache) read "
          "9.65-9.95 TB/s on an H200 at 8-24 MB (DESIGN.md).")
MIB = 1 << 20

# gpu-benches' L2 scheme, written for this study: 1024 threads, 64 independent 8-byte loads
# each, rows of 1024 doubles `chunks` rows apart, block b on chunk b % chunks.
_REFERENCE = r'''
extern "C" __global__ void __launch_bounds__(1024)
reference_l2_read(double *sink, const double *__restrict__ src, int chunks)
{
    double sum = 0.0;
    int chunk = blockIdx.x % chunks;
#pragma unroll
    for (int i = 0; i < 64; i++)
        sum += src[(size_t)(i * chunks + chunk) * 1024 + threadIdx.x];
    if (sum == 1.2345) sink[threadIdx.x] = sum;
}
'''


def _reference(dev):
    """(launch(buffer, blocks, stream), name) of the reference kernel, or None without CuPy."""
    try:
        import cupy
    except ImportError:
        return None
    with cupy.cuda.Device(dev.index):
        k = cupy.RawKernel(_REFERENCE, "reference_l2_read")
        sink = cupy.zeros(1024, cupy.float64)

    def launch(buf, chunks, blocks, stream):
        with cupy.cuda.Device(dev.index):
            arr = cupy.asarray(buf).view(cupy.float64)
            k((blocks,), (1024,), (sink, arr, np.int32(chunks)),
              stream=cupy.cuda.ExternalStream(stream.handle))
    return launch


def run(ctx):
    dev = ctx.device
    nbytes = (512 if ctx.quick else 2048) * MIB
    repeat = 10 if ctx.quick else 20
    loads = ("default", "cs") if ctx.quick else ("default", "cg", "cs", "nc", "lu", "evict_first")
    stores = ("wb",) if ctx.quick else ("wb", "cs")
    l2_sizes = (16,) if ctx.quick else (8, 16, 24, 32, 48)
    ref = _reference(dev)
    with _core.Stream(dev) as s, _core.empty(nbytes // 4, np.float32, dev) as a, \
            _core.empty(nbytes // 4, np.float32, dev) as b, \
            _core.empty(nbytes // 4, np.float32, dev) as c:
        for buf in (a, b, c):
            K.stream_write(buf, stream=s)

        def timed(fn, traffic):
            t = benchmark(fn, stream=s, repeat=repeat, warmup=3)
            return {"ms": t.median, "bytes_moved": traffic, "tbs": t.bandwidth(traffic) / 1e12}

        streaming = [("cudaMemcpy D2D", "copy", "-", "-",
                      lambda: _core.copy(b, a, stream=s), 2 * nbytes)]
        streaming += [(f"read ({ld})", "read", ld, "-",
                       lambda ld=ld: K.stream_read(a, load=ld, stream=s), nbytes) for ld in loads]
        streaming += [(f"write ({st})", "write", "-", st,
                       lambda st=st: K.stream_write(b, store=st, stream=s), nbytes) for st in stores]
        streaming += [("copy", "copy", "default", "wb", lambda: K.stream_copy(b, a, stream=s),
                       2 * nbytes),
                      ("triad", "triad", "default", "wb", lambda: K.triad(c, a, b, 3.0, stream=s),
                       3 * nbytes)]

        def stream_point(case):
            name, op, ld, st, fn, traffic = case
            return dict(kernel=name, op=op, load=ld, store=st, size_mib=nbytes // MIB,
                        where="DRAM", **timed(fn, traffic))

        records = ctx.sweep({"case": streaming}, stream_point, desc="bandwidth: DRAM")

        def l2_point(l2_mib):
            chunk = 1024 * 64 * 8
            chunks = max(1, l2_mib * MIB // chunk)
            view = a[: chunks * chunk // 4]
            reps = max(1, (16 << 30) // view.nbytes)
            K.l2_read(view, 1, stream=s)
            out = [dict(kernel="l2_read (8-byte, 64 loads)", **timed(
                        lambda: K.l2_read(view, reps, stream=s), view.nbytes * reps)),
                   dict(kernel="l2_read (8-byte nc, 64 loads)", **timed(
                        lambda: K.l2_read(view, reps, load="nc", stream=s), view.nbytes * reps)),
                   dict(kernel="l2_read (16-byte, 32 loads)", **timed(
                        lambda: K.l2_read(view, reps, width=16, loads=32, stream=s),
                        view.nbytes * reps)),
                   dict(kernel="bulk_read (bulk copy engine)", **timed(
                        lambda: K.bulk_read(view, 200, stream=s),
                        view.nbytes // 16384 * 16384 * 200))]
            if ref is not None:
                blocks = min(2**31 - 1, chunks * reps)
                out.append(dict(kernel="reference (gpu-benches scheme, CuPy)", **timed(
                    lambda: ref(view, chunks, blocks, s), blocks * chunk)))
            for o in out:
                o.update(op="L2 read", where="L2", size_mib=view.nbytes / MIB)
            return out

        records += ctx.sweep({"l2_mib": l2_sizes}, l2_point, desc="bandwidth: L2")
    for r in records:
        r.pop("case", None)
    dram = [r for r in records if r["where"] == "DRAM"]
    memcpy = dram[0]["tbs"]
    best_read = max(r["tbs"] for r in dram if r["op"] == "read")
    for r in records:
        r["vs_memcpy"] = r["tbs"] / memcpy
    l2 = [r for r in records if r["where"] == "L2"]
    ours = max((r["tbs"] for r in l2 if r["kernel"].startswith("l2_read")), default=0.0)
    refs = [r["tbs"] for r in l2 if r["kernel"].startswith("reference")]
    notes = [f"streaming read {best_read:.2f} TB/s = {best_read / memcpy:.3f}x cudaMemcpy D2D "
             f"({memcpy:.2f} TB/s, read + write counted)",
             f"L2-resident read: l2_read {ours:.2f} TB/s at best" + (
                 f", the gpu-benches-scheme reference {max(refs):.2f} TB/s "
                 f"({ours / max(refs):.3f}x)" if refs else " (CuPy absent: no reference run)")]
    return ctx.results(
        records, notes=notes,
        summary={"memcpy_tbs": memcpy, "read_tbs": best_read, "l2_read_tbs": ours,
                 "reference_tbs": max(refs) if refs else None},
        columns=[("where", "from"), ("kernel", "kernel"), ("size_mib", "MiB"), ("ms", "median ms"),
                 ("tbs", "TB/s"), ("vs_memcpy", "/ memcpy")],
        plot=PlotSpec(x="size_mib", y=["tbs"], hue="kernel", logx=True,
                      xlabel="L2-resident data set, MiB", ylabel="TB/s",
                      title="L2-resident read bandwidth", where={"where": "L2"}))
