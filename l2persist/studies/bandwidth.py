"""Streaming bandwidth at the roofline: cudaMemcpy D2D (read + write counted), STREAM-style
read / write / copy / triad with load and store flavours, and the L2-resident read (ours, and
with CuPy installed a reference kernel on gpu-benches' scheme) over data set sizes."""

from __future__ import annotations

import numpy as np

from .. import _core, kernels as K
from ..results import PlotSpec
from . import cupy_stream

TITLE = "Streaming and L2-resident bandwidth vs cudaMemcpy"
NEEDS_GPU = True
NEEDS = ("gpu",)  # CuPy adds the reference kernel; skipped with a reason without it
SOURCE = ("STREAM's kernels; te42kyfo/gpu-benches' own L2 kernel (gpu-l2-cache/main.cu, built "
          "with nvcc -O3) read 9.94 / 9.69 / 9.66 TB/s at 8 / 16 / 24 MiB on the lent H200 and "
          "8.33 / 8.11 TB/s at 8 / 16 MiB on the H100 (run by this project, 2026-11).")
MIB = 1 << 20
ROW = ("STREAM kernels and the L2-resident read vs cudaMemcpy and a gpu-benches-scheme "
       "reference")
INTRO = """# Streaming and L2-resident bandwidth

**What we measure.** cudaMemcpy device-to-device (read + write counted) against STREAM-style
read / write / copy / triad with each load and store flavour, and the L2-resident read: our
`l2_read` (8- and 16-byte loads), the bulk copy engine (`bulk_read`), and — with CuPy installed
— a reference kernel built on te42kyfo/gpu-benches' L2 scheme (1024 threads, 64 independent
8-byte loads each, 512 KB per block, 100000 blocks), same buffer, same stream. Each point is
repeated until its spread (IQR) is under 2 % of the median."""
WHY = """**Why.** An L2-resident read is limited by how many loads each SM keeps in flight. Blocks
whose footprint exceeds the L1 and that never read a word twice keep the L1 out of the way
(the counters show every requested sector served by the L2, tests/test_counters_gpu.py), and
many short blocks keep every SM's queue full to the end. Past the L2's capacity for a read
from every SM (less than its total size: Hopper's L2 is two partitions, and data read by SMs
on both sides takes room in both) part of each pass comes from DRAM, and the rate falls
toward DRAM's."""

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
              stream=cupy_stream(cupy, stream.handle))
    return launch


def _cases(quick: bool) -> list:
    """The DRAM cases: (label, op, load flavour, store flavour)."""
    loads = ("default", "cs") if quick else ("default", "cg", "cs", "nc", "lu", "evict_first")
    stores = ("wb",) if quick else ("wb", "cs")
    return ([("cudaMemcpy D2D", "copy", "-", "-")]
            + [(f"read ({ld})", "read", ld, "-") for ld in loads]
            + [(f"write ({st})", "write", "-", st) for st in stores]
            + [("copy", "copy", "default", "wb"), ("triad", "triad", "default", "wb")])


def axes(ctx) -> dict:
    return {"case": [c[0] for c in _cases(ctx.quick)],
            "l2_mib": (16,) if ctx.quick else (8, 16, 24, 32, 48)}


def run(ctx):
    dev = ctx.device
    nbytes = (512 if ctx.quick else 2048) * MIB
    repeat = 10 if ctx.quick else 20
    cases = {c[0]: c for c in _cases(ctx.quick)}
    ref = _reference(dev) if ctx.has("cupy", "the gpu-benches-scheme reference") else None
    with _core.Stream(dev) as s, _core.empty(nbytes // 4, np.float32, dev) as a, \
            _core.empty(nbytes // 4, np.float32, dev) as b, \
            _core.empty(nbytes // 4, np.float32, dev) as c:
        for buf in (a, b, c):
            K.stream_write(buf, stream=s)

        def timed(fn, traffic):
            return ctx.measure(fn, stream=s, repeat=repeat, warmup=3, bytes_moved=traffic)

        def work(name, op, ld, st):
            """(the call, the bytes it moves) of one DRAM case."""
            if name == "cudaMemcpy D2D":
                return lambda: _core.copy(b, a, stream=s), 2 * nbytes
            if op == "read":
                return lambda: K.stream_read(a, load=ld, stream=s), nbytes
            if op == "write":
                return lambda: K.stream_write(b, store=st, stream=s), nbytes
            if op == "copy":
                return lambda: K.stream_copy(b, a, stream=s), 2 * nbytes
            return lambda: K.triad(c, a, b, 3.0, stream=s), 3 * nbytes

        def stream_point(case):
            name, op, ld, st = cases[case]
            return dict(kernel=name, op=op, load=ld, store=st, size_mib=nbytes // MIB,
                        where="DRAM", **timed(*work(name, op, ld, st)))

        sweep = axes(ctx)
        records = ctx.sweep({"case": sweep["case"]}, stream_point, desc="bandwidth: DRAM")

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

        records += ctx.sweep({"l2_mib": sweep["l2_mib"]}, l2_point, desc="bandwidth: L2")
    for r in records:
        r.pop("case", None)
    derive(records)
    return ctx.results(
        records,
        columns=[("where", "from"), ("kernel", "kernel"), ("size_mib", "MiB"), ("ms", "median ms"),
                 ("tbs", "TB/s"), ("vs_memcpy", "/ memcpy")])


def derive(records) -> None:
    memcpy = records[0]["tbs"] if records[0]["kernel"] == "cudaMemcpy D2D" else next(
        r["tbs"] for r in records if r["kernel"] == "cudaMemcpy D2D")
    for r in records:
        r["vs_memcpy"] = r["tbs"] / memcpy


def numbers(records, meta) -> dict:
    dram = [r for r in records if r["where"] == "DRAM"]
    memcpy = next(r["tbs"] for r in dram if r["kernel"] == "cudaMemcpy D2D")
    l2 = [r for r in records if r["where"] == "L2"]
    ours = [r for r in l2 if r["kernel"].startswith("l2_read")]
    refs = [r for r in l2 if r["kernel"].startswith("reference")]
    best = max(ours, key=lambda r: r["tbs"]) if ours else None
    sizes = sorted({r["size_mib"] for r in ours})
    plateau = [max(r["tbs"] for r in ours if r["size_mib"] == m) for m in sizes]
    # the first size whose best l2_read falls >10 % below the best smaller size: past the L2's
    # capacity for this access (None: no drop in the sweep)
    drop = next(((sizes[i - 1], m, plateau[i]) for i, m in enumerate(sizes)
                 if i and plateau[i] < 0.9 * max(plateau[:i])), None)
    return {"memcpy_tbs": memcpy, "read_tbs": max(r["tbs"] for r in dram if r["op"] == "read"),
            "l2_read_tbs": best["tbs"] if best else 0.0, "l2_read_mib": best and best["size_mib"],
            "reference_tbs": max(r["tbs"] for r in refs) if refs else None, "drop": drop,
            "l2_mib": meta.get("l2_cache_size", 0) / MIB}


def findings(res) -> list:
    n = numbers(res.records, res.meta)
    res.summary.update({k: v for k, v in n.items() if k != "drop"})
    notes = [f"streaming read {n['read_tbs']:.2f} TB/s = {n['read_tbs'] / n['memcpy_tbs']:.3f}x "
             f"cudaMemcpy D2D ({n['memcpy_tbs']:.2f} TB/s, read + write counted)",
             f"L2-resident read: l2_read {n['l2_read_tbs']:.2f} TB/s at best" + (
                 f", the gpu-benches-scheme reference {n['reference_tbs']:.2f} TB/s "
                 f"({n['l2_read_tbs'] / n['reference_tbs']:.3f}x)" if n["reference_tbs"]
                 else " (CuPy absent: no reference run)")]
    if n["drop"]:
        below, at, tbs = n["drop"]
        notes.append(f"between {below:g} and {at:g} MiB the read falls to {tbs:.2f} TB/s: the "
                     f"working set passes the L2's capacity for a read from every SM (below "
                     f"its {n['l2_mib']:g} MiB: data read from both partitions takes room in "
                     f"each), so part of each pass comes from DRAM "
                     f"({n['read_tbs']:.2f} TB/s streaming)")
    return notes


_LABELS = {"l2_read (8-byte, 64 loads)": "l2_read, 8-byte loads",
           "l2_read (8-byte nc, 64 loads)": "l2_read, 8-byte ld.global.nc",
           "l2_read (16-byte, 32 loads)": "l2_read, 16-byte loads",
           "bulk_read (bulk copy engine)": "bulk copy engine (bulk_read)",
           "reference (gpu-benches scheme, CuPy)": "reference, gpu-benches scheme (CuPy)"}


def plot_spec(res) -> PlotSpec:
    n = numbers(res.records, res.meta)
    title = f"L2-resident read: l2_read {n['l2_read_tbs']:.2f} TB/s"
    if n["reference_tbs"]:
        title += f" ({n['l2_read_tbs'] / n['reference_tbs']:.3f}x the reference)"
    if n["drop"]:
        title += f"; past {n['drop'][0]:g} MiB it reads partly from DRAM"
    return PlotSpec(x="size_mib", y=["tbs"], hue="kernel", logx=True, labels=_LABELS,
                    vlines={n["l2_mib"]: f"L2 {n['l2_mib']:g} MiB"} if n["l2_mib"] else None,
                    xlabel="L2-resident data set, MiB", ylabel="read bandwidth, TB/s",
                    title=title, where={"where": "L2"})
