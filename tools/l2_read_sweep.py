"""Sweep launch shapes and load flavours of the L2-resident read (l2persist.kernels.l2_read)
and print the best configurations. A tuning aid for benchmarks/bandwidth.py."""
import itertools
import sys

import numpy as np

import l2persist
from l2persist import kernels as K

mib = int(sys.argv[1]) if len(sys.argv) > 1 else 48
dev = l2persist.Device(0)
sms = dev.properties.multiprocessor_count
reps = 100
rows = []
with l2persist.zeros(mib << 18, np.float32) as buf, l2persist.Stream() as s:
    K.l2_read(buf, 1, stream=s)
    for load, unroll, threads, per_sm in itertools.product(
            ("cg", "cv", "nc", "cs"), (4, 8, 16), (128, 256, 512, 1024), (1, 2, 4, 8, 16)):
        if threads * per_sm > 2048:
            continue
        t = l2persist.benchmark(lambda: K.l2_read(buf, reps, load=load, unroll=unroll,
                                                  threads=threads, blocks=per_sm * sms, stream=s),
                                stream=s, warmup=2, repeat=7)
        rows.append((buf.nbytes * reps / t.median / 1e9, load, unroll, threads, per_sm))
rows.sort(reverse=True)
print(f"{dev.properties.name}, {mib} MiB x{reps}: best L2-resident reads per load flavour "
      "(TB/s, load, unroll, threads, blocks/SM); nc may be served by L1, see its hit counters")
for load in ("cg", "cv", "cs", "nc"):
    for r in [r for r in rows if r[1] == load][:3]:
        print("%.2f %s %d %d %d" % r)
best = next(r for r in rows if r[1] == "cg")
c = l2persist.measure(lambda: K.l2_read(buf, 10, load="cg", unroll=best[2], threads=best[3],
                                        blocks=best[4] * sms),
                      ["l2_read_sectors", "l2_read_hit_sectors", "gpu_time_ns"],
                      warmup=lambda: K.l2_read(buf, 1)) if False else None
