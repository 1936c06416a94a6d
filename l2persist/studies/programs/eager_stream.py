"""An eager program whose kernels run on a stream of its own (not PyTorch's current one), with a
host synchronization of that stream once per iteration; l2persist nowhere in it. Writes a digest
of its results to argv[1].

It prints one line to stderr, `loop: N iterations in S s`: its own loop's time (the live study
reads its throughput there); the digest is the same whatever the time.

usage: eager_stream.py OUT [--iters N]
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
    ap.add_argument("--iters", type=int, default=2000)
    a = ap.parse_args()
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    side = torch.cuda.Stream()
    gen = torch.Generator(device=dev)
    gen.manual_seed(3)
    with torch.cuda.stream(side):
        table = torch.zeros(int(l2 * 0.6) // 8, dtype=torch.int64, device=dev)
        past = torch.arange(int(l2 * 1.5) // 8, dtype=torch.int64, device=dev)
        acc = torch.zeros((), dtype=torch.int64, device=dev)
        side.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            keys = torch.randint(0, table.numel(), (1 << 16,), device=dev, generator=gen)
            table.index_add_(0, keys, torch.ones_like(keys))
            acc += past.sum()
            side.synchronize()
        print(f"loop: {a.iters} iterations in {time.perf_counter() - t0:.4f} s", file=sys.stderr)
    with open(a.out, "w") as f:
        json.dump({"table": hashlib.sha256(table.cpu().numpy().tobytes()).hexdigest(),
                   "acc": int(acc)}, f)


if __name__ == "__main__":
    main()
