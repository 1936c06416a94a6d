#!/usr/bin/env python3
"""Write notebooks/*.ipynb (without outputs) from the texts below: one notebook per study plus
a tour of the API. tools/gpu-check (NOTEBOOKS=1) executes them on a GPU; the executed copies,
outputs included, are what the repository keeps.

    python tools/make_notebooks.py          # (re)write the sources
"""

import os

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(HERE, "notebooks")

SETUP = '''# Run live on a GPU, or show the results stored beside this notebook.
import os
import l2persist
from l2persist import studies
from l2persist.results import Results

STUDY = "{study}"
LIVE = l2persist.is_available()
QUICK = os.environ.get("L2P_NOTEBOOK_QUICK") == "1"   # the test suite's short run
if LIVE:
    res = studies.run(STUDY, quick=QUICK, progress=False)
    if not QUICK:
        os.makedirs("results", exist_ok=True)
        res.to_json(f"results/{{STUDY}}.json")          # what a GPU-less reader loads
else:
    print("No usable CUDA GPU here:", l2persist.no_device_reason())
    print("Showing the results stored from a run on a real GPU instead;")
    print("on a machine with a GPU this cell runs the study itself.")
    res = Results.load(f"results/{{STUDY}}.json")
print(res.header())'''

CPU_SETUP = '''import l2persist
from l2persist import studies

res = studies.run("{study}", progress=False)   # a model: no GPU needed
print(res.header())'''

TABLE = "res   # the records, as a table (res.to_pandas() gives a DataFrame)"
PLOT = "fig = res.plot()"
NOTES = 'for note in res.notes:\n    print("-", note)'
META = ('{k: v for k, v in res.meta.items() if k in ("device_name", "compute_capability", '
        '"driver_supports", "cuda_runtime", "l2_cache_size", "persisting_l2_limit_before", '
        '"persisting_l2_limit_after", "git_revision", "date")}')

STUDIES = {
    "guide_example": ("guide-example", """# The CUDA guide's persistence example, measured honestly

**The source.** The CUDA C++ Programming Guide's L2 persistence example reserves
`min(0.75 x L2, persistingL2CacheMaxSize)` for persisting accesses, puts `data1` in an access
policy window with `hitRatio = 0.6`, runs kernel A ten times and kernel B on `data1`, then
disables the window, resets persisting lines and runs kernel C on `data2`. The guide implies
that A and B get faster.

**What we measure.** The same sequence under four configurations: (a) persisting limit 0 and
no window — what a user has without any of this; (b) the device's default limit, no window;
(c) the guide's set-aside without the window; (d) the guide's recipe. Every speedup is against
the better of (a) and (b), measured in the same run.""",
        """**Why.** On Hopper the set-aside is not free: carving it out of the L2 lowers the L2
throughput available to normal (read-write) lines, so (c) is slower than (a), and the window in
(d) only wins back part of that. Kernel A is a read-modify-write pass over a `data1` that
already fits in the L2, so there is little for persistence to keep that the L2 would not keep
anyway. The `tune` notebook asks which settings, if any, help this workload."""),
    "persistence": ("persistence", """# Hot/cold persistence: which settings beat doing nothing?

**The source.** The CUDA Best Practices Guide's example kernel updates a small hot region and
a large cold stream; with the hot region in a persisting window (hitRatio
`min(1, set-aside / hot bytes)`) it reports a speedup — measured against the *same set-aside
without a window*.

**What we measure.** A 1 GiB cold stream with a hot region of 4-64 MiB, read-write and
read-only, over set-aside levels x hitRatio, each against the better of (a) limit 0 and (b) the
default limit without a window; `tune`'s pick for each case is measured in the same run.""",
        """**Why.** Two effects pull against each other. A window keeps the hot lines in the L2 while
the cold stream passes (fewer DRAM reads), but the set-aside itself slows read-write traffic
(the counters in `tools/explain_set_aside.py` show the same sector counts with half the L2
throughput). Read-only work does not pay that price, which is why the read-only rows can gain
where read-write rows lose. Quoting the window against "same set-aside, no window" hides the
cost; the table above does not."""),
    "gather": ("gather", """# Gather through the plain, read-only and texture paths

**The source.** A study on a K20X (cc 3.5): `out[i] = in[map[i]]` with a random map, plain
pointers vs `const __restrict__` (the read-only data cache, `__ldg`) vs texture fetches, N =
2^0..2^27, 10 iterations each. Its findings: the read-only and texture paths helped most
between 32 KiB and 4 MiB, and texture fetches had a fixed cost of about 7 ns per launch.

**What we measure.** The same sweep with texture *objects* (texture references are gone since
CUDA 12), data and maps generated on the device, every variant checked against NumPy, and the
L1/texture hit rate from the counters at three sizes.""",
        """**Why.** Since Volta the L1 and the texture cache are one unit, and ordinary global loads
are cached in it. The read-only path no longer reaches a separate cache, so `restrict` and
`texture` mostly match `plain`; the hit rates above show the same L1 serving all three. The
texture path still costs a little per launch (descriptor fetch and its setup), visible only
at tiny N."""),
    "granularity": ("granularity", """# L1/L2 load and store granularity

**The source.** A K80 study read `gld_efficiency` with nvprof for warps where 1, 9, 17 or 25
threads load 4 bytes (12.5, 56.25, 70.83, 78.12 %), a warp offset by one element (5 sectors,
80 %), stores, and `C[x] = A[3] + B[x]` (82.5 %).

**What we measure.** The same cases with CUPTI's range profiler
(`smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct` and friends), beside the
coalescing model's `sectors` rule and the published figures.""",
        """**Why.** Efficiency is bytes requested over bytes moved in 32-byte sectors: 1 thread asks
4 of 32 bytes (12.5 %), 9 threads 36 of 64, and an offset warp touches 5 sectors for 128
bytes. The rule has not changed from Kepler's non-caching loads to Hopper, so the model, the
hardware and the decade-old figures agree."""),
    "coalescing": ("coalescing", """# Coalescing rules on the Kepler article's patterns

**The source.** NVIDIA's Kepler GK110 article: global memory is served in 32-byte segments and
128-byte lines; a warp's accesses cost 1, 2 or 4 segments when aligned and contiguous, more
when offset, strided or scattered; caching loads (128-byte lines through L1) waste more than
non-caching ones (32-byte segments) on scattered addresses.

**What we compute.** The model (`l2persist.coalescing`, in C) under three rules —
`kepler_caching`, `kepler_noncaching` and `sectors` (today's GPUs) — for contiguous, offset,
strided, broadcast, permuted and scattered warps of 4-, 8- and 16-byte accesses. No GPU is
needed; the `granularity` notebook checks the `sectors` rule against the hardware.""",
        """**Why.** With 128-byte lines a warp whose 32 addresses are spread one per line moves 32 x 128
bytes for 128 useful ones (3.1 %); with 32-byte sectors it moves 32 x 32 (12.5 %). Aligned
contiguous warps are 100 % efficient under every rule; a one-element offset costs one extra
line or sector."""),
    "bandwidth": ("bandwidth", """# Streaming and L2-resident bandwidth

**What we measure.** cudaMemcpy device-to-device (read + write counted) against STREAM-style
read / write / copy / triad with each load and store flavour, and the L2-resident read: our
`l2_read` (8- and 16-byte loads), the bulk copy engine (`bulk_read`), and — with CuPy installed
— a reference kernel built on te42kyfo/gpu-benches' L2 scheme (1024 threads, 64 independent
8-byte loads each, 512 KB per block, 100000 blocks), same buffer, same stream.""",
        """**Why.** An L2-resident read is limited by how many loads each SM keeps in flight. Blocks
whose footprint exceeds the L1 and that never read a word twice keep the L1 out of the way
(the counters show every requested sector served by the L2, tests/test_counters_gpu.py), and
many short blocks keep every SM's queue full to the end."""),
    "hints": ("hints", """# Cache hints: which one keeps the hot set in L2?

**What we measure.** A 24 MiB hot set re-read while a 1 GiB cold stream passes through
(`kernels.hot_cold_read`), with every load flavour for the hot set against every flavour for
the cold stream: cache operators (`cg`, `cs`, `lu`, `nc`) and the L2 eviction-priority hints
(`evict_first`, `evict_last`, `evict_normal`). Each cell is the speed against default/default.

**The source.** The PTX ISA's cache operators and `L2::cache_hint` policies; DESIGN.md measured
1.4x with `__ldcs` / `evict_first` on the cold stream.""",
        """**Why.** Marking the cold stream evict-first (or streaming, `cs`) lets its lines leave
the L2 before the hot set's, without reserving anything: no set-aside, so no throughput cost
for the rest of the program. It is the first thing to try before persistence."""),
    "tune": ("tune", """# `tune`: does persistence help *this* workload, and with which settings?

`l2persist.tune(fn, targets)` searches set-aside levels, windows on/off, hitRatio and the hit
and miss properties (in C), confirms the pick against (a) limit 0, (b) the default limit and
(c) the set-aside alone in interleaved rounds, and recommends it only when the bootstrap
interval of the speedup lies above 1 and the gain is at least 1 %.

**What we measure.** The guide's hot/cold kernel (read-write and read-only) and the guide's
worked example, each tuned from scratch.""",
        """**Reading the verdicts.** A "does not help" is an answer, not a failure: the honest
baseline is the device as it comes. The foreign workloads in `l2persist.workloads` (PyTorch
embedding lookups, SpMV, an MLP) get the same treatment below when PyTorch is installed."""),
}

TUNE_FOREIGN = '''# Workloads from other libraries (PyTorch): tune them the same way.
try:
    import torch
    from l2persist import workloads
    HAVE_TORCH = LIVE and torch.cuda.is_available()
except ImportError:
    HAVE_TORCH = False
if HAVE_TORCH:
    for name, build in workloads.WORKLOADS.items():
        w = build()
        r = l2persist.tune(w.fn, w.targets, stream=w.stream, repeat=7)
        print(f"{name} ({w.description}); results still right: {w.check()}")
        print("   ", r.verdict())
else:
    print("PyTorch with a GPU is needed to tune its workloads here.")'''

TOUR = [
    new_markdown_cell("""# A tour of l2persist

The device's L2 facts, the persisting-L2 set-aside, access policy windows on a stream, a
graph's kernel nodes and a single launch, timing and counters. Every cell needs a GPU; the
first says so plainly where there is none, and the others then do nothing."""),
    new_code_cell('''import numpy as np
import l2persist as l2p
from l2persist import AccessPolicyWindow, kernels as K

LIVE = l2p.is_available()
if not LIVE:
    print("No usable CUDA GPU here:", l2p.no_device_reason())
    print("The outputs stored in this notebook come from a run on a real GPU.")
else:
    dev = l2p.Device(0)
    print(dev.properties.name, "- L2", l2p.human_bytes(dev.properties.l2_cache_size))'''),
    new_code_cell('''if LIVE:
    display(dev.properties)
    print("persisting limit now", l2p.human_bytes(dev.persisting_l2_limit),
          "- default", l2p.human_bytes(dev.default_persisting_l2_limit),
          "- granule", l2p.human_bytes(dev.persisting_l2_granule))
    # Under MPS the set-aside is the MPS server's, fixed at its start: l2persist reads its
    # size and refuses other values (the driver would accept them, the hardware ignore them).
    print("set-aside decided by:", dev.persisting_l2_source, "- MPS client:", dev.mps)'''),
    new_markdown_cell("""The set-aside is a context manager: it restores the limit it found, even when an
exception passes through. The driver rounds requests up to a granule; the value you get back
is what you have."""),
    new_code_cell('''if LIVE:
    with dev.persisting_l2(fraction=0.5) as granted:
        print("granted", l2p.human_bytes(granted))
    print("restored to", l2p.human_bytes(dev.persisting_l2_limit))'''),
    new_markdown_cell("""A window on a stream, on one launch only, and on a captured graph's kernel nodes; each
timed against no set-aside at all (limit 0)."""),
    new_code_cell('''if LIVE:
    rng = np.random.default_rng()
    hot = l2p.to_device(rng.integers(0, 9, (16 << 20) // 4, dtype=np.int32))
    cold = l2p.to_device(rng.integers(0, 9, (512 << 20) // 4, dtype=np.int32))
    with l2p.Stream() as s:
        run = lambda **kw: K.hot_cold(hot, cold, stream=s, **kw)
        with dev.persisting_l2(0):
            base = l2p.benchmark(run, stream=s).median
        with dev.persisting_l2():
            w = AccessPolicyWindow(hot, hit_ratio=1.0)
            with s.access_policy(w, reset=True):
                on_stream = l2p.benchmark(run, stream=s).median
            per_launch = l2p.benchmark(lambda: run(window=w), stream=s).median
            with s.capture() as g:
                run()
            g.set_access_policy_window(w)
            graph = l2p.benchmark(lambda: g.launch(s), stream=s).median
            g.close()
    print(f"limit 0, no window {base:.3f} ms; window on the stream {on_stream:.3f} ms; "
          f"per launch {per_launch:.3f} ms; on the graph's nodes {graph:.3f} ms")
    hot.close(); cold.close()'''),
    new_markdown_cell("""Counters explain the times: here the L2 hit rate and DRAM bytes of one launch."""),
    new_code_cell('''if LIVE and l2p.counters_available()[0]:
    with l2p.zeros((8 << 20) // 4, np.int32) as a:
        c = l2p.measure(lambda: K.l2_read(a, 4), ["l2_hit_rate", "dram_bytes_read", "l1_hit_rate"],
                        warmup=lambda: K.l2_read(a, 1))
    print(dict(c))'''),
]


def study_notebook(name, study, intro, why, cpu=False):
    cells = [new_markdown_cell(intro),
             new_code_cell((CPU_SETUP if cpu else SETUP).format(study=study)),
             new_code_cell(TABLE), new_code_cell(PLOT),
             new_markdown_cell("**What we found** (computed from the records above):"),
             new_code_cell(NOTES), new_markdown_cell(why),
             new_markdown_cell("Where and with what this ran (the Results metadata):"),
             new_code_cell(META)]
    if name == "tune":
        cells.insert(-2, new_code_cell(TUNE_FOREIGN))
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def main():
    os.makedirs(OUT, exist_ok=True)
    for i, (name, (study, intro, why)) in enumerate(STUDIES.items(), start=1):
        nb = study_notebook(name, study, intro, why, cpu=study == "coalescing")
        nbformat.write(nb, os.path.join(OUT, f"{i:02d}_{name}.ipynb"))
    tour = new_notebook(cells=TOUR)
    tour.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(tour, os.path.join(OUT, "00_tour.ipynb"))
    print(f"wrote {len(STUDIES) + 1} notebooks to {OUT}")


if __name__ == "__main__":
    main()
