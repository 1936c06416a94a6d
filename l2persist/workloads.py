"""Workloads from other libraries where L2 persistence plausibly helps, ready for ``tune()``.

Each builder returns a ``Workload``: ``fn`` (enqueues one step on ``stream``), the ``targets``
worth a window, the ``stream`` (a PyTorch stream: l2persist wraps it), and ``check()`` (the
step's result against a reference). They need PyTorch with CUDA::

    w = l2persist.workloads.embedding_lookup()
    r = l2persist.tune(w.fn, w.targets, stream=w.stream)
    print(r.table())          # the honest answer: does a window help, and with which settings

- ``embedding_lookup``: a table larger than L2 read at Zipf-skewed rows; the hot rows (the
  low ids) are the target.
- ``spmv``: y = A x with a CSR matrix streamed from memory and x (the target) re-read at
  random columns.
- ``mlp_inference``: a small MLP whose weights (the target) are reused by every batch while
  the batches stream through from a pool larger than L2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Workload", "embedding_lookup", "spmv", "mlp_inference", "WORKLOADS"]

MIB = 1 << 20


@dataclass
class Workload:
    name: str
    fn: object
    targets: list
    stream: object
    check: object
    description: str


def _torch():
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("the workloads need PyTorch with a CUDA device")
    return torch


def _on(stream, fn):
    torch = _torch()

    def step():
        with torch.cuda.stream(stream):
            return fn()
    return step


def embedding_lookup(table_mib: int = 512, dim: int = 64, lookups: int = 1 << 20,
                     hot_mib: int = 24, zipf: float = 1.1, seed: int = 0) -> Workload:
    """out = table[idx] (F.embedding) with Zipf-distributed ids; the first hot_mib of the table
    (the most frequent rows) is the target."""
    torch = _torch()
    rng = np.random.default_rng(seed)
    rows = table_mib * MIB // (4 * dim)
    ids = (rng.zipf(zipf, lookups) - 1) % rows
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        table = torch.randn(rows, dim, device="cuda")
        idx = torch.as_tensor(ids, device="cuda")
    s.synchronize()
    hot_rows = hot_mib * MIB // (4 * dim)
    fn = _on(s, lambda: torch.nn.functional.embedding(idx, table))

    def check():
        out = fn()
        s.synchronize()
        pick = torch.as_tensor(rng.integers(0, lookups, 1000), device="cuda")
        return bool(torch.equal(out[pick], table[idx[pick]]))
    share = float(np.mean(ids < hot_rows))
    return Workload("embedding_lookup", fn, [table[:hot_rows]], s, check,
                    f"{lookups} lookups of {dim} float32 into a {table_mib} MiB table, Zipf "
                    f"{zipf}: the hot {hot_mib} MiB take {share:.0%} of the lookups")


def spmv(x_mib: int = 32, nnz_per_row: int = 16, rows: int = 1 << 22, seed: int = 0) -> Workload:
    """y = A @ x (PyTorch CSR) with random columns: A streams, x (the target) is re-read."""
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = x_mib * MIB // 4
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        crow = torch.arange(0, rows + 1, device="cuda", dtype=torch.int32) * nnz_per_row
        col = torch.randint(0, n, (rows * nnz_per_row,), device="cuda", generator=g,
                            dtype=torch.int32)
        val = torch.rand(rows * nnz_per_row, device="cuda", generator=g)
        a = torch.sparse_csr_tensor(crow, col, val, size=(rows, n))
        x = torch.rand(n, device="cuda", generator=g)
    s.synchronize()
    fn = _on(s, lambda: torch.mv(a, x))

    def check():
        y = fn()
        s.synchronize()
        r = int(torch.randint(0, rows, (1,), generator=g, device="cuda"))
        lo, hi = r * nnz_per_row, (r + 1) * nnz_per_row
        ref = (val[lo:hi].double() * x[col[lo:hi].long()].double()).sum()
        return bool(torch.isclose(y[r].double(), ref, rtol=1e-4))
    return Workload("spmv", fn, [x], s, check,
                    f"CSR {rows} x {n}, {nnz_per_row} nnz per row "
                    f"({rows * nnz_per_row * 8 / MIB:.0f} MiB of matrix), x {x_mib} MiB")


def mlp_inference(width: int = 2048, layers: int = 3, batch: int = 2048,
                  pool_batches: int = 64, seed: int = 0) -> Workload:
    """A ReLU MLP in float16 whose weights (one flat buffer, the target) serve batches that
    stream in from a pool larger than L2, one new batch per step."""
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(seed)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        flat = (torch.randn(layers * width * width, device="cuda", generator=g) /
                width ** 0.5).half()
        weights = [flat[i * width * width:(i + 1) * width * width].view(width, width)
                   for i in range(layers)]
        pool = torch.randn(pool_batches, batch, width, device="cuda", generator=g).half()
    s.synchronize()
    step_no = [0]

    def forward():
        x = pool[step_no[0] % pool_batches]
        step_no[0] += 1
        for w in weights:
            x = torch.relu(x @ w)
        return x
    fn = _on(s, forward)

    def check():
        i = step_no[0] % pool_batches
        y = fn()
        s.synchronize()
        ref = pool[i, :4].float()
        for w in weights:
            ref = torch.relu(ref @ w.float())
        return bool(torch.allclose(y[:4].float(), ref, rtol=2e-2, atol=2e-2))
    return Workload("mlp_inference", fn, [flat], s, check,
                    f"{layers} layers of {width}x{width} fp16 ({flat.numel() * 2 / MIB:.0f} MiB "
                    f"of weights), batches of {batch} from a "
                    f"{pool.numel() * 2 / MIB:.0f} MiB pool")


WORKLOADS = {"embedding_lookup": embedding_lookup, "spmv": spmv, "mlp_inference": mlp_inference}
