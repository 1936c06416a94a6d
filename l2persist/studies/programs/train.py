"""A training loop whose step is one CUDA graph with its optimizer (not idempotent: every
replay moves the weights), l2persist nowhere in it. Writes a digest of the final weights and
the losses to argv[1].

It prints one line to stderr, `loop: N iterations in S s`: its own loop's time (the live study
reads its throughput there); the digest is the same whatever the time.

usage: train.py OUT [--iters N] [--optimizer capturable|fused]

--optimizer fused: Adam's fused kernels (fused=True, capturable), as a training job that wants
the fewest launches would run it; capturable (the default): the multi-tensor Adam.
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
    ap.add_argument("--optimizer", choices=("capturable", "fused"), default="capturable")
    a = ap.parse_args()
    torch.manual_seed(4321)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, capturable=True,
                           fused=a.optimizer == "fused")
    x = torch.randn(256, 1024, device=dev)
    y = torch.randn(256, 1024, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                 # warm-up steps, then capture the whole step
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    losses = torch.zeros(a.iters, device=dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(7)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for it in range(a.iters):
        x.copy_(torch.randn(x.shape, device=dev, generator=gen))
        g.replay()
        losses[it] = loss.detach()
    torch.cuda.synchronize()
    print(f"loop: {a.iters} iterations in {time.perf_counter() - t0:.4f} s", file=sys.stderr)
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    with open(a.out, "w") as f:
        json.dump({"weights": h.hexdigest(),
                   "losses": hashlib.sha256(losses.cpu().numpy().tobytes()).hexdigest()}, f)


if __name__ == "__main__":
    main()
