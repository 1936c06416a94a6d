"""A data-parallel loop under torchrun that l2persist does not call into (run under
``advise -- torchrun`` by the tests and the live study).

Each rank replays one CUDA graph per step, captured the default way: an int64 histogram of
keys into a table of about 60 % of L2 (``index_add_`` on integers: deterministic) and a sum
over a buffer larger than L2 streaming past. Every 20 steps the ranks all-reduce a checksum of
their tables (an eager NCCL collective on the current stream: the ranks wait on each other
there), and every 100 steps the host synchronizes. Each rank writes a digest of its table and
of every all-reduced checksum to ``OUT.rankN``, so a run under l2persist can be compared bit for
bit with a plain one, rank by rank.

Rank 0 prints ``loop: N iterations in S s`` to stderr.

usage: torchrun --nproc-per-node 2 ddp.py OUT [--iters N]
"""
import argparse
import hashlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=4000)
    a = ap.parse_args()
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    dev = torch.device("cuda", local)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    table_len = int(l2 * 0.6) // 8
    hist = torch.zeros(table_len, dtype=torch.int64, device=dev)
    keys = torch.zeros(262144, dtype=torch.int64, device=dev)
    ones = torch.ones(262144, dtype=torch.int64, device=dev)
    stream_buf = torch.ones(int(l2 * 1.5) // 4, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                     # warm-up before capture, as PyTorch asks
        _ = stream_buf.sum()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        hist.index_add_(0, keys, ones)
        total = stream_buf.sum()
    checks = torch.zeros(a.iters // 20 + 1, dtype=torch.int64, device=dev)
    check = torch.zeros(1, dtype=torch.int64, device=dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(99 + rank)
    # NCCL sets its communicator up at the first collective (about a second): once here, so
    # that the loop's time is the loop's (the live study's short calibration run read 1/7 of
    # the true rate with the set-up inside it, and gave advise an 8.5 s loop, not 60 s)
    warm = torch.zeros(1, dtype=torch.int64, device=dev)
    dist.all_reduce(warm)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for it in range(a.iters):
        keys.copy_(torch.randint(0, table_len, keys.shape, device=dev, generator=gen))
        g.replay()
        if it % 20 == 19:
            check.copy_(hist[:4096].sum().view(1))
            dist.all_reduce(check)
            checks[it // 20] = check[0]
        if it % 100 == 99:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    if rank == 0:
        print(f"loop: {a.iters} iterations in {time.perf_counter() - t0:.4f} s",
              file=sys.stderr)
    digest = {"hist": hashlib.sha256(hist.cpu().numpy().tobytes()).hexdigest(),
              "hist_total": int(hist.sum()), "checks": checks.cpu().tolist(),
              "streamed": float(total)}
    with open(f"{a.out}.rank{rank}", "w") as f:
        json.dump(digest, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
