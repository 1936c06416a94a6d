"""Capture safety: no release by l2persist may invalidate a capture in
progress on any stream. Each case runs in a FRESH process (a capture failure can leave the
process's capture state odd), and each checks that the other capture completes and that its
graph replays correctly against a NumPy reference, on poisoned outputs.

Before the fix, each case failed with cudaErrorStreamCaptureInvalidated (H200): in the default
global capture mode a cudaFree / cudaGraphExecDestroy / cudaGraphDestroy from any thread while a
stream captures invalidates that capture. Every release of the core now goes through
l2p_release (csrc/core/l2p_release.h), which relaxes the calling thread's capture mode around
the call and defers what is still refused."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from l2persist.pytest_plugin import need

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
import threading
import numpy as np
import l2persist as l2p
from l2persist import _core, kernels as K
rng = np.random.default_rng()

def fresh_f32(n):
    host = rng.random(n).astype(np.float32)
    return host, l2p.to_device(host)

def check_steps(buf, host, steps):
    ref = host.copy()
    for _ in range(steps):
        ref = ref * np.float32(2.0) + np.float32(1.0)
    got = buf.to_numpy()
    assert np.allclose(got, ref, rtol=1e-6, atol=0), (got[:4], ref[:4])

def torch_setup(n=1 << 20):
    import torch
    x = torch.from_numpy(rng.random(n).astype(np.float32)).cuda()
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    return torch, x, y

def torch_check(torch, g, x, y):
    y.fill_(float("nan"))               # poison: the replay must write every element
    g.replay()
    torch.cuda.synchronize()
    ref = x.cpu().numpy() * np.float32(3.0) + np.float32(1.0)
    assert np.allclose(y.cpu().numpy(), ref, rtol=1e-6), "the foreign graph replayed wrong"

def drained():
    assert _core._release_drain() == 0, "releases still deferred after the captures ended"
"""


def run_fresh(body: str) -> None:
    code = textwrap.dedent(PRELUDE) + textwrap.dedent(body) + "\nprint('ok')\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_rebinding_loop_alone():
    """`with s.capture() as g:` in a loop: the old g (graph + exec) dies during the new capture
    on the same thread."""
    run_fresh("""
        host, buf = fresh_f32(1 << 16)
        with l2p.Stream() as s:
            g = None
            for _ in range(4):
                with s.capture() as g:
                    K.scale_shift(buf, 2.0, 1.0, stream=s)
                g.launch(stream=s)
            s.synchronize()
        check_steps(buf, host, 4)
        drained()
    """)


def test_rebinding_loop_while_torch_captures():
    """The rebinding loop inside a PyTorch capture (global mode) on another stream: the torch
    capture completes and replays right, and the last l2persist graph launches right."""
    need("torch")
    run_fresh("""
        torch, x, y = torch_setup()
        host, buf = fresh_f32(1 << 16)
        s = l2p.Stream()
        tg = torch.cuda.CUDAGraph()
        g = None
        with torch.cuda.graph(tg):
            y.copy_(x * 3 + 1)
            for _ in range(3):
                with s.capture() as g:       # the previous g dies here
                    K.scale_shift(buf, 2.0, 1.0, stream=s)
        torch_check(torch, tg, x, y)
        g.launch(stream=s)
        s.synchronize()
        check_steps(buf, host, 1)
        s.close()
        drained()
    """)


def test_free_inside_another_streams_capture():
    """Closing and dropping l2persist buffers (cudaFree) inside a PyTorch capture, and inside
    an l2persist capture of another stream."""
    need("torch")
    run_fresh("""
        torch, x, y = torch_setup()
        a = l2p.zeros(1 << 20, np.float32)
        b = l2p.zeros(1 << 20, np.float32)
        c = l2p.zeros(1 << 18, np.float32)
        tg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(tg):
            y.copy_(x * 3 + 1)
            a.close()                        # explicit close
            del b                            # the last reference goes
        torch_check(torch, tg, x, y)
        host, buf = fresh_f32(1 << 16)
        with l2p.Stream() as s:
            with s.capture() as g:
                K.scale_shift(buf, 2.0, 1.0, stream=s)
                c.close()                    # freed inside this thread's own capture
            g.launch(stream=s)
            s.synchronize()
        check_steps(buf, host, 1)
        drained()
        with l2p.zeros(1 << 20, np.float32) as z:   # the context is healthy
            assert float(z.to_numpy().sum()) == 0.0
    """)


def test_torch_capture_while_l2persist_objects_die():
    """While PyTorch captures (global mode), l2persist objects die: a launched Graph (exec +
    graph), an owned Stream, a buffer with a texture object, on the capturing thread and on
    another thread."""
    need("torch")
    run_fresh("""
        torch, x, y = torch_setup()

        def make_objects():
            host, buf = fresh_f32(1 << 16)
            s = l2p.Stream()
            with s.capture() as g:
                K.scale_shift(buf, 2.0, 1.0, stream=s)
            g.launch(stream=s)
            s.synchronize()
            src = l2p.zeros(1 << 16, np.float32)
            m = l2p.zeros(1 << 16, np.int32)
            out = l2p.zeros(1 << 16, np.float32)
            K.gather(out, src, m, "texture", stream=s)   # caches a texture object on src
            s.synchronize()
            return [g, s, buf, src, m, out]

        here = make_objects()
        there = make_objects()
        tg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(tg):
            y.copy_(x * 3 + 1)
            here.clear()                     # dies on the capturing thread
            t = threading.Thread(target=there.clear)
            t.start(); t.join()              # dies on another thread
        torch_check(torch, tg, x, y)
        drained()
    """)


def test_cupy_capture_while_a_graph_dies():
    """The same with a CuPy capture (global mode by default)."""
    need("cupy")
    run_fresh("""
        import cupy as cp
        host, buf = fresh_f32(1 << 16)
        with l2p.Stream() as s:
            with s.capture() as g:
                K.scale_shift(buf, 2.0, 1.0, stream=s)
            g.launch(stream=s)
            s.synchronize()
        x = cp.asarray(rng.random(1 << 20).astype(np.float32))
        y = cp.empty_like(x)
        cs = cp.cuda.Stream(non_blocking=True)
        with cs:
            # global mode where CuPy names it (its default may be relaxed)
            cs.begin_capture(getattr(cp.cuda.runtime, "streamCaptureModeGlobal", None))
            cp.multiply(x, 3, out=y); y += 1
            g.close()                        # exec + graph destroyed during the CuPy capture
            del buf
            cg = cs.end_capture()
        y.fill(float("nan"))
        cg.launch(cs); cs.synchronize()
        assert np.allclose(cp.asnumpy(y), cp.asnumpy(x) * np.float32(3) + np.float32(1), rtol=1e-6)
        drained()
    """)


def test_a_collection_cannot_run_foreign_finalizers_inside_our_capture():
    """A PyTorch CUDAGraph in a reference cycle, collected during our capture, destroys its
    graph there (an unsafe call in a capture of this thread): a full random-order run on an
    H200 failed so at cudaStreamEndCapture. Python's cyclic GC is off inside our captures
    (benchmark(graph=True) included), back on after, and left off if the caller had it off."""
    need("torch")
    run_fresh("""
        import gc
        torch, x, y = torch_setup()
        host, buf = fresh_f32(1 << 16)

        def doomed_graph():
            tg = torch.cuda.CUDAGraph()
            with torch.cuda.graph(tg):
                y.copy_(x * 3 + 1)
            torch_check(torch, tg, x, y)
            cycle = [tg]
            cycle.append(cycle)          # only the cyclic GC frees it

        gc.collect()
        gc.set_threshold(50)             # a collection every 50 new containers
        with l2p.Stream() as s:
            for _ in range(3):
                doomed_graph()
                with s.capture() as g:
                    assert not gc.isenabled()
                    junk = [[i] for i in range(5000)]  # would trigger collections
                    K.scale_shift(buf, 2.0, 1.0, stream=s)
                assert gc.isenabled()
                g.launch(stream=s)
                s.synchronize()
                g.close()
            check_steps(buf, host, 3)
            doomed_graph()
            t = l2p.benchmark(lambda: K.scale_shift(buf, 2.0, 1.0, stream=s), stream=s,
                              graph=True, warmup=1, repeat=3)
            assert len(t.samples) == 3 and gc.isenabled()
            gc.disable()
            with s.capture() as g:
                K.scale_shift(buf, 2.0, 1.0, stream=s)
            assert not gc.isenabled()    # the caller's choice stands
            g.close()
        gc.enable()
        gc.collect()
        drained()
    """)
