"""A CuPy-only program (no PyTorch); l2persist nowhere in it.

On a CuPy stream of its own (``cupy.cuda.Stream(non_blocking=True)``), each iteration upserts
keys into a hash table of about 65 % of the L2 (a ``RawKernel``: atomicCAS linear probing +
atomicAdd on the counts; keys and counts 8 bytes each) while a buffer of 1.5 x L2 streams past
(an integer sum, CuPy's own reduction kernel). The host synchronizes the stream every 10
iterations. The keys come from a hash of (seed, iteration, thread), so no RNG state is kept.

It writes a digest (the table's (key, count) pairs sorted by key: where racing inserts land is
not deterministic, which keys hold which counts is; the streamed sums) to OUT, the same for the
same seed and iteration count whatever the timing. It prints one line to stderr,
``loop: N iterations in S s``: the live study reads its throughput there.

usage: cupy_only.py OUT [--iters N] [--seed S]
"""
import argparse
import hashlib
import json
import sys
import time

import cupy as cp
import numpy as np

UPSERTS = 1 << 17              # keys upserted per iteration

UPSERT = r'''
__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
extern "C" __global__ void upsert(unsigned long long seed, long long n,
                                  unsigned long long *keys, unsigned long long *counts,
                                  long long cap, unsigned long long universe) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long k = mix(seed * 0x100000001B3ull + (unsigned long long)i) % universe + 1;
    long long h = (long long)(mix(k) % (unsigned long long)cap);
    for (;;) {                 // linear probing; the universe is half the slots: always ends
        unsigned long long prev = atomicCAS(&keys[h], 0ull, k);
        if (prev == 0ull || prev == k) { atomicAdd(&counts[h], 1ull); return; }
        h = (h + 1 == cap) ? 0 : h + 1;
    }
}'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=77)
    a = ap.parse_args()
    l2 = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["l2CacheSize"]
    upsert = cp.RawKernel(UPSERT, "upsert")
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        cap = int(l2 * 0.65) // 16
        keys = cp.zeros(cap, dtype=cp.uint64)
        counts = cp.zeros(cap, dtype=cp.uint64)
        past = cp.arange(int(l2 * 1.5) // 8, dtype=cp.int64)
        acc = cp.zeros((), dtype=cp.int64)
        stream.synchronize()
        t0 = time.perf_counter()
        for it in range(a.iters):
            upsert(((UPSERTS + 255) // 256,), (256,),
                   (np.uint64(a.seed * 1000003 + it), np.int64(UPSERTS), keys, counts,
                    np.int64(cap), np.uint64(cap // 2)))
            acc += past.sum()
            if it % 10 == 9:
                stream.synchronize()
        stream.synchronize()
        print(f"loop: {a.iters} iterations in {time.perf_counter() - t0:.4f} s",
              file=sys.stderr)
        used = keys != 0
        k, c = keys[used], counts[used]
        order = cp.argsort(k)
        h = hashlib.sha256()
        h.update(cp.asnumpy(k[order]).tobytes())
        h.update(cp.asnumpy(c[order]).tobytes())
        digest = {"table": h.hexdigest(), "table_total": int(counts.sum()),
                  "distinct": int(used.sum()), "streamed": int(acc)}
    with open(a.out, "w") as f:
        json.dump(digest, f)


if __name__ == "__main__":
    main()
