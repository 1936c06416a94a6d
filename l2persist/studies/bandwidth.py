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


REFERENCE = "reference (gpu-benches scheme; CuPy)"


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
    """The DRAM cases: (kernel, op, load flavour, store flavour)."""
    loads = ("default", "cs") if quick else ("default", "cg", "cs", "nc", "lu", "evict_first")
    stores = ("wb",) if quick else ("wb", "cs")
    return ([("cudaMemcpy D2D", "copy", "-", "-")]
            + [(f"read ({ld})", "read", ld, "-") for ld in loads]
            + [(f"write ({st})", "write", "-", st) for st in stores]
            + [("copy", "copy", "default", "wb"), ("triad", "triad", "default", "wb")])


# The L2-resident reads, each timed at every L2 size: (kernel, l2_read's keywords) or
# (kernel, None) for the bulk copy engine and the CuPy reference.
L2_KERNELS = [("l2_read (8-byte loads x64)", {"loads": 64}),
              ("l2_read (8-byte nc loads x64)", {"load": "nc", "loads": 64}),
              ("l2_read (16-byte loads x32)", {"width": 16, "loads": 32}),
              ("bulk_read (bulk copy engine)", None), (REFERENCE, None)]


def _dram_mib(quick: bool) -> int:
    """The DRAM cases' buffers, MiB (each of three)."""
    return 512 if quick else 2048


def _l2_mib(quick: bool) -> list:
    """The L2-resident data sets, MiB."""
    return [16] if quick else [8, 16, 24, 32, 48]


def axes(ctx) -> dict:
    """kernel: the DRAM cases and the L2-resident reads; size_mib: the DRAM cases' buffer and
    the L2-resident data sets. A record is kept when its kernel and its size are."""
    return {"kernel": [c[0] for c in _cases(ctx.quick)] + [k for k, _ in L2_KERNELS],
            "size_mib": [_dram_mib(ctx.quick)] + _l2_mib(ctx.quick)}


def run(ctx):
    dev = ctx.device
    nbytes = _dram_mib(ctx.quick) * MIB
    repeat = 10 if ctx.quick else 20
    cases = {c[0]: c for c in _cases(ctx.quick)}
    l2_kernels = [k for k in L2_KERNELS if k[0] in ctx.values("kernel")]
    ref = None
    if any(k == REFERENCE for k, _ in l2_kernels) and ctx.has("cupy", "the gpu-benches-scheme "
                                                                 "reference"):
        ref = _reference(dev)
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

        def stream_point(kernel, size_mib):
            name, op, ld, st = cases[kernel]
            return dict(op=op, load=ld, store=st, where="DRAM", **timed(*work(name, op, ld, st)))

        records = ctx.sweep({"kernel": list(cases), "size_mib": [_dram_mib(ctx.quick)]},
                            stream_point, desc="bandwidth: DRAM")

        def l2_point(size_mib):
            chunk = 1024 * 64 * 8
            chunks = max(1, size_mib * MIB // chunk)
            view = a[: chunks * chunk // 4]
            reps = max(1, (16 << 30) // view.nbytes)
            K.l2_read(view, 1, stream=s)
            out = []
            for kernel, kw in l2_kernels:
                if kw is not None:
                    m = timed(lambda kw=kw: K.l2_read(view, reps, stream=s, **kw),
                              view.nbytes * reps)
                elif kernel == REFERENCE:
                    if ref is None:
                        continue
                    blocks = min(2**31 - 1, chunks * reps)
                    m = timed(lambda: ref(view, chunks, blocks, s), blocks * chunk)
                else:
                    m = timed(lambda: K.bulk_read(view, 200, stream=s),
                              view.nbytes // 16384 * 16384 * 200)
                out.append(dict(kernel=kernel, op="L2 read", where="L2", **m,
                                size_mib=view.nbytes / MIB))
            return out

        if l2_kernels:  # a part naming only DRAM cases reads nothing from the L2
            records += ctx.sweep({"size_mib": _l2_mib(ctx.quick)}, l2_point,
                                 desc="bandwidth: L2")
    derive(records)
    return ctx.results(records, columns=COLUMNS)


COLUMNS = [("where", "from"), ("kernel", "kernel"), ("size_mib", "size_mib (MiB)"),
           ("ms", "median ms"), ("tbs", "TB/s"), ("vs_memcpy", "/ memcpy")]


def derive(records) -> None:
    """Each record's rate against cudaMemcpy D2D's (None in a part of the sweep without it)."""
    memcpy = next((r["tbs"] for r in records if r["kernel"] == "cudaMemcpy D2D"), None)
    for r in records:
        r["vs_memcpy"] = r["tbs"] / memcpy if memcpy else None


def numbers(records, meta) -> dict:
    """The headline numbers; None (or no drop) for what a part of the sweep did not run."""
    dram = [r for r in records if r["where"] == "DRAM"]
    memcpy = next((r["tbs"] for r in dram if r["kernel"] == "cudaMemcpy D2D"), None)
    reads = [r["tbs"] for r in dram if r["op"] == "read"]
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
    return {"memcpy_tbs": memcpy, "read_tbs": max(reads) if reads else None,
            "l2_read_tbs": best["tbs"] if best else None, "l2_read_mib": best and best["size_mib"],
            "reference_tbs": max(r["tbs"] for r in refs) if refs else None, "drop": drop,
            "l2_mib": meta.get("l2_cache_size", 0) / MIB}


def findings(res) -> list:
    n = numbers(res.records, res.meta)
    res.summary.update({k: v for k, v in n.items() if k != "drop"})
    notes = []
    if n["read_tbs"] and n["memcpy_tbs"]:
        notes.append(f"streaming read {n['read_tbs']:.2f} TB/s = "
                     f"{n['read_tbs'] / n['memcpy_tbs']:.3f}x cudaMemcpy D2D "
                     f"({n['memcpy_tbs']:.2f} TB/s, read + write counted)")
    if n["l2_read_tbs"]:
        notes.append(f"L2-resident read: l2_read {n['l2_read_tbs']:.2f} TB/s at best" + (
            f", the gpu-benches-scheme reference {n['reference_tbs']:.2f} TB/s "
            f"({n['l2_read_tbs'] / n['reference_tbs']:.3f}x)" if n["reference_tbs"]
            else " (CuPy absent: no reference run)"))
    if n["drop"]:
        below, at, tbs = n["drop"]
        notes.append(f"between {below:g} and {at:g} MiB the read falls to {tbs:.2f} TB/s: the "
                     f"working set passes the L2's capacity for a read from every SM (below "
                     f"its {n['l2_mib']:g} MiB: data read from both partitions takes room in "
                     "each), so part of each pass comes from DRAM"
                     + (f" ({n['read_tbs']:.2f} TB/s streaming)" if n["read_tbs"] else ""))
    return notes


_LABELS = {"l2_read (8-byte loads x64)": "l2_read, 8-byte loads",
           "l2_read (8-byte nc loads x64)": "l2_read, 8-byte ld.global.nc",
           "l2_read (16-byte loads x32)": "l2_read, 16-byte loads",
           "bulk_read (bulk copy engine)": "bulk copy engine (bulk_read)",
           REFERENCE: "reference, gpu-benches scheme (CuPy)"}
# the kernels' names in results stored before the names lost their commas (--only splits
# its values at commas)
_LABELS.update({"l2_read (8-byte, 64 loads)": _LABELS["l2_read (8-byte loads x64)"],
                "l2_read (8-byte nc, 64 loads)": _LABELS["l2_read (8-byte nc loads x64)"],
                "l2_read (16-byte, 32 loads)": _LABELS["l2_read (16-byte loads x32)"],
                "reference (gpu-benches scheme, CuPy)": _LABELS[REFERENCE]})


def plot_spec(res) -> PlotSpec:
    n = numbers(res.records, res.meta)
    if not any(r["where"] == "L2" for r in res.records):
        raise ValueError("the plot draws the L2-resident reads, and this part of the sweep "
                         "has none (it has the DRAM cases only)")
    title = ("L2-resident read" + (f": l2_read {n['l2_read_tbs']:.2f} TB/s"
                                   if n["l2_read_tbs"] else ""))
    if n["reference_tbs"] and n["l2_read_tbs"]:
        title += f" ({n['l2_read_tbs'] / n['reference_tbs']:.3f}x the reference)"
    if n["drop"]:
        title += f"; past {n['drop'][0]:g} MiB it reads partly from DRAM"
    return PlotSpec(x="size_mib", y=["tbs"], hue="kernel", logx=True, labels=_LABELS,
                    vlines={n["l2_mib"]: f"L2 {n['l2_mib']:g} MiB"} if n["l2_mib"] else None,
                    xlabel="L2-resident data set, MiB", ylabel="read bandwidth, TB/s",
                    title=title, where={"where": "L2"})
