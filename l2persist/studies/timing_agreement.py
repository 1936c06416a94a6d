"""One kernel timed three ways: l2persist.benchmark (CUDA events, in C), triton's do_bench
(events, median; with PyTorch and Triton installed) and Nsight Compute's gpu__time_duration
(hardware, per launch; with ncu on PATH). The bar: the medians within 3 % of each other."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import numpy as np

from .. import _core, kernels as K
from ..results import PlotSpec

TITLE = "Timing agreement: benchmark() vs triton's do_bench vs ncu on a 1 GiB copy"
NEEDS_GPU = True
NEEDS = ("gpu",)  # ncu and triton add their rows when present, skipped with a reason if not
NOTEBOOK = False
SOURCE = "l2persist's own claim: its event timing agrees with do_bench and ncu within 3 %."
ROW = "a 1 GiB copy timed by `benchmark()`, triton's `do_bench` and ncu; bar: within 3 %"
NBYTES = 1 << 30  # long enough that launch gaps do not matter
BAR = 0.03

_CHILD = r"""
import numpy as np, l2persist
from l2persist import kernels as K
dev = l2persist.Device(%d)
n = %d // 4
with l2persist.empty(n, np.float32, dev) as a, l2persist.empty(n, np.float32, dev) as b:
    K.stream_write(a)
    for _ in range(%d):
        K.stream_copy(b, a)
    dev.synchronize()
"""


def _ncu_ms(index: int, launches: int) -> list:
    """gpu__time_duration of each copy, from ncu run on a child process."""
    import shutil
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [shutil.which("ncu"), "--metrics", "gpu__time_duration.sum", "--clock-control",
           "none", "--csv", "--kernel-name", "regex:l2p_copy_kernel", sys.executable, "-c",
           _CHILD % (index, NBYTES, launches)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=root + os.pathsep
                                + os.environ.get("PYTHONPATH", "")))
    lines = [line for line in r.stdout.splitlines() if line.startswith('"')]
    scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0}
    return [float(rec["Metric Value"].replace(",", "")) * scale.get(rec.get("Metric Unit"), 1e-6)
            for rec in csv.DictReader(io.StringIO("\n".join(lines)))
            if rec.get("Metric Name") == "gpu__time_duration.sum"]


def _do_bench_ms(a, b):
    import torch
    from triton.testing import do_bench
    ts = torch.cuda.Stream()
    with torch.cuda.stream(ts):
        return float(do_bench(lambda: K.stream_copy(b, a, stream=ts.cuda_stream), warmup=25,
                              rep=100, return_mode="median"))


def run(ctx):
    dev = ctx.device
    records = []
    with _core.empty(NBYTES // 4, np.float32, dev) as a, \
            _core.empty(NBYTES // 4, np.float32, dev) as b, _core.Stream(dev) as s:
        K.stream_write(a, stream=s)
        m = ctx.measure(lambda: K.stream_copy(b, a, stream=s), stream=s, warmup=5,
                        repeat=20 if ctx.quick else 50, bytes_moved=2 * NBYTES)
        records.append({"method": "l2persist.benchmark", **m})
        if ctx.has("torch", "triton's do_bench"):
            try:
                records.append({"method": "triton.testing.do_bench", "ms": _do_bench_ms(a, b)})
            except ImportError as e:
                ctx.skipped.append(("triton's do_bench", f"it needs triton ({e})"))
    if ctx.has("ncu", "ncu's gpu__time_duration"):
        ncu = _ncu_ms(dev.index, 10)
        if ncu:
            st = _core.stats(ncu)
            records.append({"method": "ncu gpu__time_duration", "ms": st["median"],
                            "q1_ms": st["q1"], "q3_ms": st["q3"], "samples": st["n"]})
        else:
            ctx.skipped.append(("ncu's gpu__time_duration", "ncu gave no times"))
    for r in records:
        r["vs_benchmark"] = r["ms"] / records[0]["ms"]
        r["tbs"] = 2 * NBYTES / (r["ms"] * 1e-3) / 1e12
    return ctx.results(records, columns=[("method", "method"), ("ms", "median ms"),
                                         ("tbs", "copy TB/s"), ("vs_benchmark", "/ benchmark()")])


def _spread(records) -> float:
    times = [r["ms"] for r in records]
    return max(times) / min(times) - 1


def findings(res) -> list:
    out = [f"{r['method']}: {r['ms']:.4f} ms ({r['vs_benchmark']:.4f}x benchmark())"
           for r in res.records]
    if len(res.records) > 1:
        out.append(f"largest disagreement {_spread(res.records) * 100:.2f} % (bar: under "
                   f"{BAR * 100:g} %)")
    return out


def bars(res) -> list:
    if len(res.records) < 2:
        return []
    spread = _spread(res.records)
    return [(f"the timings agree within {BAR * 100:g} % (largest disagreement "
             f"{spread * 100:.2f} %)", spread < BAR)]


def plot_spec(res) -> PlotSpec:
    return PlotSpec(x="method", y=["vs_benchmark"], kind="bar", hline=1.0,
                    xlabel="timer", ylabel="median time / benchmark()'s",
                    title="Timing agreement on a 1 GiB copy"
                          + (f": within {_spread(res.records) * 100:.2f} %"
                             if len(res.records) > 1 else ""))
