#!/usr/bin/env python3
"""Captures made every way a program makes them, counted three ways: what this script made,
what capture-interpose's library counted (no CUPTI), and what the core's CUPTI tracking counted.
Run under the library (`run` does: LD_PRELOAD) on one GPU; prints one JSON line.

    captures.py LINKED_SO [--jax] [--rounds N]

The ways, each N times: PyTorch's ``torch.cuda.graph``; CuPy's ``Stream.begin_capture``;
cuda.bindings' driver calls (cuda-python takes the driver's functions through
cuGetProcAddress); ctypes on libcuda.so.1 (dlsym on libcuda's handle); a library linked
against libcuda (LINKED_SO, ``linked.c``: the driver's exports called directly), which also
makes a capture into an existing graph, one that a prohibited call invalidates, and a begin
that fails. ``--jax`` runs a jit step instead (XLA's command buffers, where it captures): what
each counter sees there, with nothing expected."""
import ctypes
import json
import os
import sys


def interposer_counts():
    try:
        f = ctypes.CDLL(None).l2p_interpose_counts
    except AttributeError:
        return None
    out = (ctypes.c_long * 8)()
    f(out)
    keys = ("begun", "failed", "ended", "open", "unmatched", "wrapped", "unwrapped", "full")
    return dict(zip(keys, out))


def torch_way(rounds):
    import torch
    x = torch.rand(1 << 16, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):          # warm the kernel outside the capture
        y = x * 2
    torch.cuda.synchronize()
    graphs = []
    for _ in range(rounds):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * 2
        graphs.append(g)
    for g in graphs:
        g.replay()
    torch.cuda.synchronize()
    return {"begun": rounds, "ended": rounds, "check": bool((y == x * 2).all())}


def cupy_way(rounds):
    import cupy as cp
    x = cp.arange(1 << 16, dtype=cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        y = x * 2                      # warm
        for _ in range(rounds):
            s.begin_capture()
            y = x * 2
            g = s.end_capture()
            g.launch(s)
    s.synchronize()
    return {"begun": rounds, "ended": rounds, "check": bool((y == x * 2).all())}


def _ok(res):
    err = res[0] if isinstance(res, tuple) else res
    if int(err) != 0:
        raise SystemExit(f"captures.py: a driver call returned {err}")
    return res[1:] if isinstance(res, tuple) else ()


def bindings_way(rounds):
    from cuda.bindings import driver
    import torch
    torch.cuda.init()                   # the primary context, current on this thread
    torch.zeros(1, device="cuda")
    (stream,) = _ok(driver.cuStreamCreate(1))       # non-blocking
    for _ in range(rounds):
        _ok(driver.cuStreamBeginCapture(stream,
                                        driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
        (g,) = _ok(driver.cuStreamEndCapture(stream))
        _ok(driver.cuGraphDestroy(g))
    _ok(driver.cuStreamDestroy(stream))
    return {"begun": rounds, "ended": rounds}


def ctypes_way(rounds):
    import torch
    cuda = ctypes.CDLL("libcuda.so.1")
    s = torch.cuda.Stream()
    for _ in range(rounds):
        g = ctypes.c_void_p()
        rc = cuda.cuStreamBeginCapture_v2(ctypes.c_void_p(s.cuda_stream), 0)
        rc = rc or cuda.cuStreamEndCapture(ctypes.c_void_p(s.cuda_stream), ctypes.byref(g))
        if rc:
            raise SystemExit(f"captures.py: ctypes' capture returned {rc}")
        cuda.cuGraphDestroy(g)
    return {"begun": rounds, "ended": rounds}


def linked_way(rounds, path):
    import torch
    lib = ctypes.CDLL(path)
    s = torch.cuda.Stream()
    for _ in range(rounds):
        rc = lib.l2p_linked_captures(ctypes.c_void_p(s.cuda_stream))
        if rc:
            raise SystemExit(f"captures.py: the linked library's captures returned {rc}")
    inv = lib.l2p_linked_invalidated(ctypes.c_void_p(s.cuda_stream))
    failed = lib.l2p_linked_failed_begin()
    torch.cuda.synchronize()
    return {"begun": 2 * rounds + 2, "ended": 2 * rounds + 1, "failed": 1,
            "invalidated_end": inv, "failed_begin": failed}


def jax_way(rounds):
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(t, i):
        return (t.at[i].add(1.0) * 0.5).sum()

    t = jnp.zeros(1 << 20)
    i = jnp.arange(4096) * 7 % (1 << 20)
    v = None
    for _ in range(50 * rounds):
        v = step(t, i)
    v.block_until_ready()
    return {"begun": None, "ended": None}


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("linked")
    ap.add_argument("--jax", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    if not a.jax:
        import torch
        torch.zeros(1, device="cuda")
    from l2persist import _core
    _core.capture_watch_begin(0)
    made = {}
    ways = ({"jax": lambda: jax_way(a.rounds)} if a.jax else
            {"torch": lambda: torch_way(a.rounds), "cupy": lambda: cupy_way(a.rounds),
             "bindings": lambda: bindings_way(a.rounds), "ctypes": lambda: ctypes_way(a.rounds),
             "linked": lambda: linked_way(a.rounds, a.linked)})
    for name, way in ways.items():
        before = (interposer_counts(), _core._capture_counts())
        try:
            made[name] = way()
        except Exception as e:   # a way this machine lacks (a library not installed)
            made[name] = {"error": f"{type(e).__name__}: {e}"}
        after = (interposer_counts(), _core._capture_counts())
        made[name]["interposer"] = ({k: after[0][k] - before[0][k] for k in after[0]}
                                    if after[0] else None)
        made[name]["cupti"] = {k: after[1][k] - before[1].get(k, 0) for k in after[1]}
    print(json.dumps({"made": made, "interposer": interposer_counts(),
                      "cupti": _core._capture_counts(),
                      "captures_open": _core.captures_open()}), flush=True)
    _core.capture_watch_end()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
