"""The L1/L2 granularity study's cases measured on this GPU: 1 / 9 / 17 / 25 / 32 threads of
a warp loading 4 bytes each, a warp offset by one element (load and store), stores, and
C[x] = A[3] + B[x]; the counters (load/store efficiency, sectors, requests) beside the
coalescing model's sectors rule and beside the figures the study published."""

from __future__ import annotations

import numpy as np

from .. import _core, kernels as K
from .. import coalescing as C
from ..counters import measure
from ..results import PlotSpec

TITLE = "L1/L2 load and store granularity: hardware vs model vs the study"
NEEDS_GPU = True
NEEDS = ("gpu", "counters")
SOURCE = ("A K80 study with nvprof gld_efficiency: 1, 9, 17, 25 threads loading 4 B -> 12.5, "
          "56.25, 70.83, 78.12 %; a warp offset by one -> 5 sectors, 80 %; stores likewise; "
          "C[x] = A[3] + B[x] -> 82.5 %.")
NAMES = ["global_load_efficiency", "global_load_sectors", "global_load_requests",
         "global_store_efficiency", "global_store_sectors"]
ROW = "the L1/L2 study's cases: counters vs the model vs the published figures"
INTRO = """# L1/L2 load and store granularity

**The source.** A K80 study read `gld_efficiency` with nvprof for warps where 1, 9, 17 or 25
threads load 4 bytes (12.5, 56.25, 70.83, 78.12 %), a warp offset by one element (5 sectors,
80 %), stores, and `C[x] = A[3] + B[x]` (82.5 %).

**What we measure.** The same cases with CUPTI's range profiler
(`smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct` and friends), beside the
coalescing model's `sectors` rule and the published figures."""
WHY = """**Why.** Efficiency is bytes requested over bytes moved in 32-byte sectors: 1 thread asks
4 of 32 bytes (12.5 %), 9 threads 36 of 64, and an offset warp touches 5 sectors for 128
bytes. The rule has not changed from Kepler's non-caching loads to Hopper, so the model, the
hardware and the decade-old figures agree."""

CASES = [
    # label (what --only case= names: no commas), kernel arguments, published efficiency,
    # kind
    ("1 thread", dict(threads=1), 12.5, "load"),
    ("9 threads", dict(threads=9), 56.25, "load"),
    ("17 threads", dict(threads=17), 70.83, "load"),
    ("25 threads", dict(threads=25), 78.12, "load"),
    ("32 threads", dict(threads=32), 100.0, "load"),
    ("offset by one", dict(threads=32, load_offset=1, store_offset=1), 80.0, "load"),
    ("store: 1 thread", dict(threads=1), 12.5, "store"),
    ("store: offset by one", dict(threads=32, load_offset=1, store_offset=1), 80.0, "store"),
    ("C[x] = A[3] + B[x]", dict(threads=32, src2=True, broadcast_index=3), 82.5, "load"),
]


def _model(kw, kind):
    threads = kw["threads"]
    if kind == "store":
        return C.analyze(C.contiguous(threads, offset=kw.get("store_offset", 0)), store=True)
    a = C.analyze(C.contiguous(threads, offset=kw.get("load_offset", 0)))
    if kw.get("src2"):
        a = a + C.analyze(C.broadcast(element=kw["broadcast_index"], base=1 << 20))
    return a


def run(ctx):
    dev = ctx.device
    with _core.to_device(np.random.default_rng().integers(0, 1 << 30, 4096, dtype=np.uint32),
                         dev) as a, _core.zeros(4096, np.uint32, dev) as out:
        by_label = {c[0]: c for c in CASES}

        def point(case):
            label, kw, published, kind = by_label[case]
            args = {k: (a if k == "src2" else v) for k, v in kw.items()}
            c = measure(lambda: K.pattern(a, out, **args), NAMES, device=dev)
            m = _model(kw, kind)
            eff = c[f"global_{kind}_efficiency"]
            return {"case": label, "kind": kind, "published_pct": published,
                    "model_pct": round(m.efficiency, 2), "measured_pct": round(eff, 2),
                    "model_sectors": int(m.sectors),
                    "measured_sectors": int(c[f"global_{kind}_sectors"]),
                    "measured_requests": int(c["global_load_requests"]),
                    "agree": abs(eff - m.efficiency) < 0.01 and abs(eff - published) < 0.01}

        records = ctx.sweep(ctx.axes, point)
    return ctx.results(records, columns=COLUMNS)


def axes(ctx) -> dict:
    return {"case": [c[0] for c in CASES]}


COLUMNS = [("case", "case"), ("kind", "kind"), ("published_pct", "study %"),
           ("model_pct", "model %"), ("measured_pct", "measured %"),
           ("model_sectors", "model sectors"), ("measured_sectors", "measured sectors"),
           ("agree", "all agree")]


def findings(res) -> list:
    records = res.records
    agree = sum(r["agree"] for r in records)
    res.summary.update(agree=agree, cases=len(records))
    notes = [f"{agree} of {len(records)} cases: hardware = model = the study's figure",
             "the efficiencies are the same on Hopper as on the K80: 32-byte sectors decide"]
    return notes + [f"differs: {r['case']} published {r['published_pct']}, model "
                    f"{r['model_pct']}, measured {r['measured_pct']}"
                    for r in records if not r["agree"]]


def plot_spec(res) -> PlotSpec:
    agree = sum(r["agree"] for r in res.records)
    return PlotSpec(x="case", y=["published_pct", "model_pct", "measured_pct"], kind="bar",
                    labels={"published_pct": "the study (K80, nvprof)",
                            "model_pct": "model (sectors rule)",
                            "measured_pct": "this GPU (CUPTI counters)"},
                    xlabel="case", ylabel="load / store efficiency, %",
                    title=f"Granularity: study, model and this GPU agree in {agree} of "
                          f"{len(res.records)} cases")
