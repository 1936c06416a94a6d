"""One kernel timed three ways: l2persist.benchmark (CUDA events, in C), triton's do_bench
(events, median), and Nsight Compute's gpu__time_duration (hardware, per launch). Target: the
three medians within 3 % of each other."""

import csv
import io
import os
import shutil
import subprocess
import sys

import numpy as np

import l2persist
from l2persist import kernels as K
from _common import device_line, finish, parser, table

NBYTES = 1 << 30  # a 1 GiB copy: long enough that launch gaps do not matter

CHILD = r"""
import numpy as np, l2persist
from l2persist import kernels as K
n = %d // 4
with l2persist.empty(n, np.float32) as a, l2persist.empty(n, np.float32) as b:
    K.stream_write(a)
    for _ in range(%d):
        K.stream_copy(b, a)
    l2persist.Device(0).synchronize()
"""


def ncu_times(launches: int) -> list[float]:
    ncu = shutil.which("ncu")
    if not ncu:
        return []
    cmd = [ncu, "--metrics", "gpu__time_duration.sum", "--clock-control", "none", "--csv",
           "--kernel-name", "regex:l2p_copy_kernel", sys.executable, "-c",
           CHILD % (NBYTES, launches)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=os.getcwd()))
    rows = [line for line in r.stdout.splitlines() if line.startswith('"')]
    out = []
    for rec in csv.DictReader(io.StringIO("\n".join(rows))):
        if rec.get("Metric Name") == "gpu__time_duration.sum":
            v = float(rec["Metric Value"].replace(",", ""))
            unit = rec.get("Metric Unit", "nsecond")
            scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0}.get(unit, 1e-6)
            out.append(v * scale)
    if not out:
        print("ncu gave no times:", r.stderr[-2000:])
    return out


def main():
    p = parser(__doc__)
    p.add_argument("--repeat", type=int, default=50)
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    rows = []
    with l2persist.empty(NBYTES // 4, np.float32, dev) as a, \
            l2persist.empty(NBYTES // 4, np.float32, dev) as b, l2persist.Stream(dev) as s:
        K.stream_write(a, stream=s)
        t = l2persist.benchmark(lambda: K.stream_copy(b, a, stream=s), stream=s,
                                warmup=5, repeat=args.repeat)
        rows.append({"method": "l2persist.benchmark", "median_ms": t.median, "iqr_ms": t.iqr})
        try:
            import torch
            from triton.testing import do_bench
            ts = torch.cuda.Stream()
            with torch.cuda.stream(ts):
                ms = do_bench(lambda: K.stream_copy(b, a, stream=ts.cuda_stream), warmup=25,
                              rep=100, return_mode="median")
            rows.append({"method": "triton.testing.do_bench", "median_ms": float(ms)})
        except Exception as e:  # noqa: BLE001
            print(f"triton: {e!r}")
    ncu = ncu_times(10)
    if ncu:
        rows.append({"method": "ncu gpu__time_duration", "median_ms": float(np.median(ncu)),
                     "iqr_ms": float(np.percentile(ncu, 75) - np.percentile(ncu, 25))})
    ref = rows[0]["median_ms"]
    for r in rows:
        r["vs_benchmark"] = r["median_ms"] / ref
        r["tbs"] = 2 * NBYTES / (r["median_ms"] * 1e-3) / 1e12
    print(table(rows, [("method", "method"), ("median_ms", "median ms"), ("iqr_ms", "IQR ms"),
                       ("tbs", "copy TB/s"), ("vs_benchmark", "/ benchmark()")]))
    spread = max(r["median_ms"] for r in rows) / min(r["median_ms"] for r in rows) - 1
    print(f"\nlargest disagreement: {spread * 100:.2f} % (target < 3 %)")
    finish(args, {"device": device_line(dev), "rows": rows, "spread": spread})


if __name__ == "__main__":
    main()
