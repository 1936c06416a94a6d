"""Sweep launch shapes and load flavours of the L2-resident read (l2persist.kernels.l2_read)
and print the best configurations per flavour, with the share of the bytes that the L2 (not
L1) served, from the counters. A tuning aid for benchmarks/bandwidth.py."""
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
    print(f"{dev.properties.name}, {mib} MiB x{reps}: best per load flavour (TB/s, load, "
          "unroll, threads, blocks/SM, share of bytes read from L2)")
    for load in ("cg", "cv", "cs", "nc"):
        for tbs, ld, u, th, b in [r for r in rows if r[1] == load][:2]:
            c = l2persist.measure(lambda: K.l2_read(buf, 10, load=ld, unroll=u, threads=th,
                                                    blocks=b * sms), ["l2_read_sectors"],
                                  warmup=lambda: K.l2_read(buf, 1))
            share = c["l2_read_sectors"] * 32 / (buf.nbytes * 10)
            print(f"{tbs:.2f} {ld} {u} {th} {b} {share:.3f}")
