"""An eager program on a PyTorch pool stream whose only host synchronizations are implicit;
l2persist nowhere in it.

Everything runs under ``with torch.cuda.stream(s)`` on a ``torch.cuda.Stream()``: an int64
histogram (``index_add_`` on integers: deterministic) of random keys into a table of 70 % of
the L2 (sized from ``torch.cuda.get_device_properties(0).L2_cache_size``), with a buffer of
1.5 x L2 streaming past (an integer sum), where a persisting window pays. The program never
calls ``torch.cuda.synchronize()`` or ``Stream.synchronize()``: the host waits only where
PyTorch must read a value back, in ``torch.bincount`` (which reads its input's range to size
its output) every iteration and in ``.item()`` every 25 iterations.

It writes a digest (the table, the streamed sums, the bincounts, the values read back) to OUT,
the same for the same seed and iteration count whatever the timing. It prints one line to
stderr, ``loop: N iterations in S s``: the live study reads its throughput there.

usage: eager_implicit.py OUT [--iters N] [--seed S]
"""
import argparse
import hashlib
import json
import sys
import time

import torch

KEYS = 1 << 16
BINS = 64


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    pool = torch.cuda.Stream()
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)
    read_back = []
    with torch.cuda.stream(pool):
        table = torch.zeros(int(l2 * 0.7) // 8, dtype=torch.int64, device=dev)
        past = torch.arange(int(l2 * 1.5) // 8, dtype=torch.int64, device=dev)
        ones = torch.ones(KEYS, dtype=torch.int64, device=dev)
        acc = torch.zeros((), dtype=torch.int64, device=dev)
        bins = torch.zeros(BINS, dtype=torch.int64, device=dev)
        t0 = time.perf_counter()
        for it in range(a.iters):
            keys = torch.randint(0, table.numel(), (KEYS,), device=dev, generator=gen)
            table.index_add_(0, keys, ones)
            acc += past.sum()
            b = torch.bincount(keys & (BINS - 1))   # reads keys' max on the host: a sync
            bins[:b.numel()] += b
            if it % 25 == 24:
                read_back.append(int(table[keys[:8]].sum().item()))    # .item(): a sync
        # the last read back: what the host waits on before the loop's time is taken
        read_back.append(int(acc.item()))
        print(f"loop: {a.iters} iterations in {time.perf_counter() - t0:.4f} s",
              file=sys.stderr)
    digest = {"table": hashlib.sha256(table.cpu().numpy().tobytes()).hexdigest(),
              "table_total": int(table.sum()), "bins": bins.cpu().tolist(),
              "read_back": hashlib.sha256(json.dumps(read_back).encode()).hexdigest()}
    with open(a.out, "w") as f:
        json.dump(digest, f)


if __name__ == "__main__":
    main()
