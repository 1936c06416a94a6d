"""A server whose requests draw a batch size at random; l2persist nowhere in it (issue 50's
request-mix server, rebuilt as a plain program for the zoo).

Each request draws a batch size (1, 4 or 8) and a number of decode steps (2 to 6) from a seeded
Python RNG, then:

- an eager prefill: the prompt (16 tokens a sequence) through the whole layer stack, eagerly;
- its decode steps: replays of that batch size's CUDA graph (``torch.cuda.CUDAGraph()``,
  captured the default way), each a stack of 72 small layers (``addmm`` + GELU + residual add
  over one flat fp16 weight tensor viewed per layer, as inference engines keep their weights),
  the logits, the greedy token fed back in the graph, and an int64 histogram of hashed keys
  into a table of half the L2 (``index_add_`` on integers: deterministic): 200+ kernel nodes
  a graph;
- a hash upsert (atomicCAS probing + atomicAdd, a CuPy ``RawKernel``) into a table of its own,
  on a CuPy stream of its own;
- one host synchronization (``torch.cuda.synchronize()``) at its end.

It writes a digest of what it computed (the histogram, the tokens' histogram, the last tokens,
and the CuPy table's (key, count) pairs sorted by key: where racing inserts land is not
deterministic, which keys hold which counts is) to OUT, the same for the same seed and
iteration count whatever the timing.

It prints one line to stderr, ``loop: N iterations in S s`` (N requests): the live study reads
its throughput there.

usage: server_mix.py OUT [--iters N] [--seed S]
"""
import argparse
import hashlib
import json
import random
import sys
import time

import cupy as cp
import numpy as np
import torch

LAYERS, DIM, VOCAB = 72, 512, 8192
BATCHES = (1, 4, 8)
PROMPT = 16
KEYS_PER_SEQ = 16384           # histogram updates per sequence per decode step
UPSERTS_PER_SEQ = 8192         # CuPy upserts per sequence per request

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


def table_digest(keys, counts) -> str:
    """The table's (key, count) pairs sorted by key: independent of where racing inserts
    landed."""
    used = keys != 0
    k, c = keys[used], counts[used]
    order = cp.argsort(k)
    h = hashlib.sha256()
    h.update(cp.asnumpy(k[order]).tobytes())
    h.update(cp.asnumpy(c[order]).tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=600, help="requests")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    f16 = torch.float16
    # One flat weight tensor, viewed per layer; small weights keep the residual stack finite.
    flat = torch.randn(LAYERS * DIM * DIM, device=dev, dtype=f16) / (10 * DIM ** 0.5)
    ws = [flat[i * DIM * DIM:(i + 1) * DIM * DIM].view(DIM, DIM) for i in range(LAYERS)]
    bias = torch.randn(LAYERS, DIM, device=dev, dtype=f16) / 16
    emb = torch.randn(VOCAB, DIM, device=dev, dtype=f16)
    head = torch.randn(DIM, VOCAB, device=dev, dtype=f16) / DIM ** 0.5
    table_len = int(l2 * 0.5) // 8
    hist = torch.zeros(table_len, dtype=torch.int64, device=dev)
    tokhist = torch.zeros(VOCAB, dtype=torch.int64, device=dev)

    def stack(h):
        for i in range(LAYERS):
            h = h + torch.nn.functional.gelu(torch.addmm(bias[i], h, ws[i]))
        return h

    def decode(st):
        h = stack(emb[st["ids"]])
        tok = (h @ head).argmax(dim=1)
        tokhist.index_add_(0, tok, st["ones_bs"])
        st["ids"].copy_(tok)                                 # fed back: the next step's input
        st["keys"].mul_(6364136223846793005).add_(1442695040888963407)   # int64 LCG, wraps
        hist.index_add_(0, torch.remainder(st["keys"] >> 16, table_len), st["ones"])

    graphs, static = {}, {}
    for bs in BATCHES:
        st = {"ids": torch.zeros(bs, dtype=torch.int64, device=dev),
              "keys": torch.zeros(bs * KEYS_PER_SEQ, dtype=torch.int64, device=dev),
              "ones": torch.ones(bs * KEYS_PER_SEQ, dtype=torch.int64, device=dev),
              "ones_bs": torch.ones(bs, dtype=torch.int64, device=dev)}
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):           # warm-up before capture, as PyTorch asks
            for _ in range(2):
                _ = stack(emb[st["ids"]]) @ head
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            decode(st)
        graphs[bs], static[bs] = g, st
    hist.zero_()                  # the capture ran nothing, but say so: the table starts empty
    tokhist.zero_()

    upsert = cp.RawKernel(UPSERT, "upsert")
    cap = int(l2 * 0.25) // 16
    ckeys = cp.zeros(cap, dtype=cp.uint64)
    ccounts = cp.zeros(cap, dtype=cp.uint64)
    cstream = cp.cuda.Stream(non_blocking=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed + 1)
    last = torch.zeros(a.iters, max(BATCHES), dtype=torch.int64, device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for it in range(a.iters):
        bs = rng.choice(BATCHES)
        steps = rng.randint(2, 6)
        st = static[bs]
        # eager prefill: the prompt through the whole stack; its last token starts decoding
        prompt = torch.randint(0, VOCAB, (bs * PROMPT,), device=dev, generator=gen)
        ptok = (stack(emb[prompt]) @ head).argmax(dim=1)
        tokhist.index_add_(0, ptok, torch.ones_like(ptok))
        st["ids"].copy_(ptok.view(bs, PROMPT)[:, -1])
        st["keys"].copy_(torch.randint(0, 1 << 62, (bs * KEYS_PER_SEQ,), device=dev,
                                       generator=gen))
        for _ in range(steps):
            graphs[bs].replay()
        last[it, :bs] = st["ids"]
        n = bs * UPSERTS_PER_SEQ
        with cstream:             # the CuPy table, on its own stream
            upsert(((n + 255) // 256,), (256,),
                   (np.uint64(a.seed * 1000003 + it), np.int64(n), ckeys, ccounts,
                    np.int64(cap), np.uint64(cap // 2)))
        torch.cuda.synchronize()  # one sync per request (the whole device: CuPy's stream too)
    print(f"loop: {a.iters} iterations in {time.perf_counter() - t0:.4f} s", file=sys.stderr)
    digest = {"hist": hashlib.sha256(hist.cpu().numpy().tobytes()).hexdigest(),
              "hist_total": int(hist.sum()),
              "tokens": hashlib.sha256(tokhist.cpu().numpy().tobytes()).hexdigest(),
              "last": hashlib.sha256(last.cpu().numpy().tobytes()).hexdigest(),
              "cupy": table_digest(ckeys, ccounts), "cupy_total": int(ccounts.sum())}
    with open(a.out, "w") as f:
        json.dump(digest, f)


if __name__ == "__main__":
    main()
