"""A server-like loop that l2persist does not call into (run under `advise --` by the tests).

Decode steps for three batch sizes, each a CUDA graph captured the default way
(torch.cuda.CUDAGraph(), no keep_graph): an embedding gather, a matmul over weights, and an
int64 histogram of token ids in a table of about 60 % of L2 (index_add_ on integers:
deterministic, unlike floats); an eager prefill phase every few steps; a CuPy kernel upserting
counts into a table of its own, when CuPy is installed. It writes what it computed (a digest of
every token and both tables) to argv[1], so a run under l2persist can be compared bit for bit
with a plain run.

It prints one line to stderr, `loop: N iterations in S s`: its own loop's time (the live study
reads its throughput there); the digest is the same whatever the time.

usage: server.py OUT [--iters N]
"""
import argparse
import hashlib
import json
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--table-frac", type=float, default=0.6)
    a = ap.parse_args()
    torch.manual_seed(1234)
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    vocab, dim = 4096, 1024
    emb = torch.randn(vocab, dim, device=dev, dtype=torch.float16)
    w = torch.randn(dim, vocab, device=dev, dtype=torch.float16) / 32
    table_len = int(l2 * a.table_frac) // 8
    hist = torch.zeros(table_len, dtype=torch.int64, device=dev)
    stream_buf = torch.randn(int(l2 * 1.5) // 4, device=dev)   # traffic streaming past
    graphs, static = {}, {}
    for bs in (1, 4, 8):
        ids = torch.randint(0, vocab, (bs,), device=dev)
        keys = torch.randint(0, table_len, (bs * 32768,), device=dev)
        ones = torch.ones(bs * 32768, dtype=torch.int64, device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):           # warm-up before capture, as PyTorch asks
            for _ in range(2):
                _ = emb[ids] @ w
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        out = {"ids": ids, "keys": keys, "ones": ones}
        with torch.cuda.graph(g):
            h = emb[out["ids"]] @ w
            out["tok"] = h.argmax(dim=1)
            hist.index_add_(0, out["keys"], out["ones"])
            out["sum"] = stream_buf.sum()
        graphs[bs], static[bs] = g, out
    cp = None
    try:
        import cupy as cp
        upsert = cp.RawKernel(r'''
        extern "C" __global__ void upsert(const long long *k, long long n, long long *t,
                                          long long m) {
            long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
            if (i < n) atomicAdd((unsigned long long *)&t[(k[i] * 2654435761ll) % m], 1ull);
        }''', "upsert")
        ctable = cp.zeros(int(l2 * 0.2) // 8, dtype=cp.int64)
    except Exception:
        cp = None
    tokens = torch.zeros(a.iters, 8, dtype=torch.int64, device=dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(99)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for it in range(a.iters):
        bs = (1, 4, 8)[it % 3]
        st = static[bs]
        st["ids"].copy_(torch.randint(0, vocab, (bs,), device=dev, generator=gen))
        st["keys"].copy_(torch.randint(0, table_len, (bs * 32768,), device=dev, generator=gen))
        graphs[bs].replay()
        tokens[it, :bs] = st["tok"]
        if it % 10 == 0:                      # an eager prefill
            p = emb[torch.randint(0, vocab, (64,), device=dev, generator=gen)] @ w
            tokens[it, 7] = p.argmax()
        if cp is not None and it % 3 == 0:
            k = cp.asarray(st["keys"])
            upsert(((k.size + 255) // 256,), (256,), (k, cp.int64(k.size), ctable,
                                                      cp.int64(ctable.size)))
        if it % 50 == 49:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"loop: {a.iters} iterations in {time.perf_counter() - t0:.4f} s", file=sys.stderr)
    digest = {"tokens": hashlib.sha256(tokens.cpu().numpy().tobytes()).hexdigest(),
              "hist": hashlib.sha256(hist.cpu().numpy().tobytes()).hexdigest(),
              "hist_total": int(hist.sum()),
              "cupy": None if cp is None else hashlib.sha256(ctable.get().tobytes()).hexdigest()}
    with open(a.out, "w") as f:
        json.dump(digest, f)


if __name__ == "__main__":
    main()
