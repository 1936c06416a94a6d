"""Foreign graphs and kernels on the GPU: discovery of a graph's buffers, windows on a
PyTorch graph's nodes that its own replay() sees (by counters: exactly the windowed nodes),
l2persist.launch with a window for CuPy and cuda.core kernels, and foreign.discover.
Results are checked against NumPy references on poisoned outputs."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import l2persist
from l2persist import AccessPolicyWindow, AccessProperty, foreign
from l2persist import kernels as K
from l2persist.pytest_plugin import need

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
PERSIST = ["l2_persisting_requests"]


def _counters_or_skip():
    ok, why = l2persist.counters_available()
    if not ok:
        pytest.skip(f"CUPTI: {why}")


def _window(buf):
    return AccessPolicyWindow(buf, hit_ratio=1.0, hit_prop=AccessProperty.PERSISTING,
                              miss_prop=AccessProperty.STREAMING)


# ---- l2persist's own graph: discovery without PyTorch --------------------------------------

def test_buffers_of_an_l2persist_graph(rng):
    host = rng.random(1 << 16).astype(np.float32)
    data = l2persist.to_device(host)
    src = l2persist.to_device(rng.random(1 << 16).astype(np.float32))
    mp = l2persist.to_device(rng.integers(0, 1 << 16, 1 << 16).astype(np.int32))
    out = l2persist.zeros(1 << 16, np.float32)
    other = l2persist.zeros(1 << 10, np.float32)         # offered, never used by the graph
    with l2persist.Stream() as s:
        with s.capture() as g:
            K.scale_shift(data, 2.0, 1.0, stream=s)
            K.gather(out, src, mp, check=False, stream=s)
        nodes = g.kernel_nodes
        assert len(nodes) == 2
        assert all(n.name and min(n.grid) >= 1 and min(n.block) >= 1 for n in nodes)
        table = g.buffers({"data": data, "src": src, "map": mp, "out": out, "other": other})
        by = {r.name: r for r in table}
        assert {"data", "src", "map", "out"} <= set(by) and "other" not in by
        assert [n.position for n in by["data"].nodes] == [0]
        assert {n.position for n in by["out"].nodes} == {1}
        assert by["data"].address == data.ptr and by["data"].size == data.nbytes
        assert "data" in table.table() and "<table>" in table._repr_html_()
        unnamed = g.buffers()           # allocations, named by the first argument into each
        for r in unnamed:
            first = min(r.uses, key=lambda u: (u.node, u.param, u.offset))
            at = f"@{first.node}.p{first.param}" + (f"+{first.offset}" if first.offset else "")
            kernel = nodes[first.node].name
            kernel = kernel if len(kernel) <= 40 else kernel[:39] + "…"
            assert r.allocation and r.name == kernel + at, (r.name, at)
        assert len({r.name for r in unnamed}) == len(unnamed)
        assert any(r.address <= data.ptr < r.address + r.size for r in unnamed)
        out.fill_bytes(0xFF)                                # poison, then run the graph
        g.launch(stream=s)
        s.synchronize()
    np.testing.assert_allclose(data.to_numpy(), host * 2 + 1, rtol=1e-6)
    np.testing.assert_array_equal(out.to_numpy(), src.to_numpy()[mp.to_numpy()])


def test_node_group_sets_only_its_nodes(rng):
    a = l2persist.zeros(1 << 16, np.float32)
    b = l2persist.zeros(1 << 16, np.float32)
    with l2persist.Stream() as s:
        with s.capture() as g:
            K.scale_shift(a, 1.0, 1.0, stream=s)
            K.scale_shift(b, 1.0, 2.0, stream=s)
        group = g.nodes_window([1])
        group.access_policy_window = _window(b)
        w0, w1 = (n.access_policy_window for n in g.kernel_nodes)
        assert w0 is None and w1 is not None and w1.base_ptr == b.ptr
        assert group.effective_on_owner
        with pytest.raises(ValueError, match="nodes"):
            g.nodes_window([5])
        with pytest.raises(ValueError, match="nodes"):
            g.set_access_policy_window(None, nodes=[7])
        assert g.kernel_nodes[1].access_policy_window is not None   # unchanged by the refusal
        g.launch(stream=s)
        s.synchronize()
    assert (a.to_numpy() == 1).all() and (b.to_numpy() == 2).all()


def test_child_graph_kernels_are_listed_and_scanned(rng):
    """A graph embedding another as a child-graph node (a library's sub-graph): its kernels
    are the parent's, for listing, discovery and windows."""
    rt = pytest.importorskip("cuda.bindings.runtime")
    host = rng.random(1 << 16).astype(np.float32)
    data = l2persist.to_device(host)
    with l2persist.Stream() as s:
        with s.capture() as child:
            K.scale_shift(data, 2.0, 1.0, stream=s)
        err, parent = rt.cudaGraphCreate(0)
        assert err == rt.cudaError_t.cudaSuccess
        err, _ = rt.cudaGraphAddChildGraphNode(parent, None, 0, child.handle)
        assert err == rt.cudaError_t.cudaSuccess
        try:
            G = l2persist.as_graph(int(parent))
            assert G.owner == int(parent) and len(G.kernel_nodes) == 1
            assert G.kernel_nodes[0].name == child.kernel_nodes[0].name
            by = {r.name: r for r in G.buffers({"data": data})}
            assert "data" in by and by["data"].nodes[0].position == 0
            G.nodes_window([0]).access_policy_window = _window(data)
            assert G.kernel_nodes[0].access_policy_window.base_ptr == data.ptr
            G.launch(stream=s)
            s.synchronize()
            G.close()
        finally:
            rt.cudaGraphDestroy(parent)
    np.testing.assert_allclose(data.to_numpy(), host * 2 + 1, rtol=1e-6)


# ---- PyTorch ---------------------------------------------------------------------------------

def _torch_graph(torch, acc_elems=1 << 21, n=1 << 22):
    """A two-kernel-family step: index_add_ into acc, and y = 2 x (no shared buffers)."""
    gen = torch.Generator(device="cuda").manual_seed(int(np.random.default_rng().integers(1 << 30)))
    acc = torch.zeros(acc_elems, device="cuda")
    idx = torch.randint(0, acc_elems, (n,), device="cuda", generator=gen)
    vals = torch.rand(n, device="cuda", generator=gen)
    x = torch.rand(1 << 20, device="cuda", generator=gen)
    y = torch.empty_like(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                       # warm-up, as PyTorch asks
        acc.index_add_(0, idx, vals)
        torch.mul(x, 2, out=y)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        acc.index_add_(0, idx, vals)
        torch.mul(x, 2, out=y)
    names = {"acc": acc, "idx": idx, "vals": vals, "x": x, "y": y}
    return g, names


def _torch_check(torch, g, t):
    t["acc"].zero_()
    t["y"].fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    ref = np.zeros(t["acc"].numel(), np.float64)
    np.add.at(ref, t["idx"].cpu().numpy(), t["vals"].cpu().numpy())
    np.testing.assert_allclose(t["acc"].cpu().numpy(), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(t["y"].cpu().numpy(), t["x"].cpu().numpy() * 2, rtol=1e-6)


def test_as_graph_of_a_torch_graph_lists_and_names():
    torch = need("torch")
    g, t = _torch_graph(torch)
    G = l2persist.as_graph(g)
    assert G.owner is g and G.handle == g.raw_cuda_graph()
    nodes = G.kernel_nodes
    assert len(nodes) >= 2 and all(n.name for n in nodes)
    by = {r.name: r for r in G.buffers(t)}
    assert {"acc", "idx", "vals", "x", "y"} <= set(by), G.buffers(t).table()
    acc_nodes = {n.position for n in by["acc"].nodes}
    assert acc_nodes and not acc_nodes & {n.position for n in by["x"].nodes}
    assert by["acc"].buffer.ptr == t["acc"].data_ptr()
    G.close()                                  # borrowed: PyTorch's graph lives on
    _torch_check(torch, g, t)
    plain = torch.cuda.CUDAGraph()
    with torch.cuda.graph(plain):
        t["y"].add_(1)
    with pytest.raises(ValueError, match=r"keeps no raw graph.*keep_graphs\(\)"):
        l2persist.as_graph(plain)


def test_windows_on_a_torch_graph_reach_its_own_replay(device):
    """The bar: windows set through as_graph change the persisting-request counters of exactly
    the windowed nodes, in the owner's own g.replay()."""
    torch = need("torch")
    _counters_or_skip()
    g, t = _torch_graph(torch)
    G = l2persist.as_graph(g)
    by = {r.name: r for r in G.buffers(t)}
    w_acc = _window(by["acc"].buffer)
    w_x = _window(by["x"].buffer)
    measure = lambda: l2persist.measure(lambda: g.replay(), PERSIST)[PERSIST[0]]  # noqa: E731
    with device.persisting_l2():
        off = measure()
        G.nodes_window(by["acc"].nodes).access_policy_window = w_acc
        on_acc = measure()
        _torch_check(torch, g, t)                     # still right with the window
        G.set_access_policy_window(None)
        cleared = measure()
        G.nodes_window(by["x"].nodes).access_policy_window = w_acc  # nodes that never touch acc
        wrong_nodes = measure()
        G.nodes_window(by["x"].nodes).access_policy_window = w_x
        on_x = measure()
        # Per-kernel ranges over a graph replay are not an option: the range profiler's stop
        # failed with CUPTI_ERROR_UNKNOWN there (H100, CUDA 13.0). Windowing each node group in
        # turn (above) tells the nodes apart instead.
        G.set_access_policy_window(None)
    l2persist.reset_persisting_l2()
    n = t["idx"].numel()
    print(f"\npersisting requests: off {off} acc {on_acc} cleared {cleared} "
          f"wrong-nodes {wrong_nodes} x {on_x}")
    assert on_acc > n / 4                              # index_add_'s atomics on acc persist
    assert off < on_acc / 100 and cleared < on_acc / 100 and wrong_nodes < on_acc / 100
    assert on_x > 10 * max(off, 1)                     # the mul's loads of x persist now


def test_tune_without_targets_names_the_buffer_and_its_nodes(device):
    """tune(lambda: g.replay()) with no targets on a histogram graph whose accumulator is 60 %
    of L2 (measured 1.5x on the H100): it discovers, names the accumulator and the
    index_add_ node that got the window, prints its table, leaves the graph's results right
    and the device's state as it found it."""
    torch = need("torch")
    acc_elems = int(0.6 * device.properties.l2_cache_size) // 4
    g, t = _torch_graph(torch, acc_elems=acc_elems, n=1 << 24)
    before = l2persist.l2_state(device)
    r = l2persist.tune(lambda: g.replay(), candidates=t, repeat=5)
    print("\n" + r.table())
    assert l2persist.l2_state(device) == before
    by = {p["name"]: p for p in r.placements}
    assert set(by) <= set(t) and "acc" in by
    add = [n for n in by["acc"]["nodes"]]
    assert add and all(isinstance(n, str) and ":" in n for n in add)
    assert r.persistence_helps and by["acc"]["window"] is not None, r.table()
    assert "| acc | " in r.table()
    from l2persist.tune import TuneResult
    back = TuneResult.from_json(r.to_json())
    assert back.placements == r.placements
    _torch_check(torch, g, t)


def test_discover_a_torch_replay_and_an_eager_step():
    torch = need("torch")
    g, t = _torch_graph(torch)
    found = foreign.discover(lambda: g.replay(), candidates=t)
    by = {c.name: c for c in found}
    assert {"acc", "x", "y"} <= set(by)
    c = by["acc"]
    assert c.carrier.graph.owner is g and c.nbytes == t["acc"].nbytes
    assert c.buffer.ptr == t["acc"].data_ptr()
    assert [c.nbytes for c in found] == sorted((c.nbytes for c in found), reverse=True)
    # an eager step: under PyTorch its one real run is logged and its buffers read from its own
    # launches (a capture's private pool would give outputs made per call other addresses);
    # its windows go on the stream it runs on (PyTorch's current stream), fn itself is timed,
    # and it ran exactly once for real
    acc, idx, vals = t["acc"], t["idx"], t["vals"]
    acc.zero_()
    found = foreign.discover(lambda: acc.index_add_(0, idx, vals), candidates=t)
    torch.cuda.synchronize()
    by = {c.name: c for c in found}
    assert "acc" in by and by["acc"].nodes
    carrier = by["acc"].carrier
    assert isinstance(carrier, l2persist.Stream)
    assert carrier.handle == torch.cuda.current_stream().cuda_stream
    assert all(c.carrier is carrier for c in found)   # one stream window: alternatives
    ref = np.zeros(acc.numel(), np.float64)
    np.add.at(ref, idx.cpu().numpy(), vals.cpu().numpy())
    np.testing.assert_allclose(acc.cpu().numpy(), ref, rtol=1e-4, atol=1e-4)


def test_discover_l2persist_work_on_the_tune_stream(rng):
    host = rng.random(1 << 16).astype(np.float32)
    buf = l2persist.to_device(host)
    with l2persist.Stream() as s:
        found = foreign.discover(lambda: K.scale_shift(buf, 2.0, 1.0, stream=s), stream=s,
                                 candidates={"buf": buf})
        assert [c.name for c in found] == ["buf"] and found[0].buffer.ptr == buf.ptr
        assert found[0].carrier is s
        s.synchronize()
        np.testing.assert_allclose(buf.to_numpy(), host * 2 + 1, rtol=1e-6)  # ran once



# The output is the kernel's last parameter, a bare pointer: its one word is both the last word
# of its parameter and of the argument buffer, where an off-by-one in the scan would stop.
AXPY_OUT_LAST = r"""
extern "C" __global__ void axpy_out_last(int n, float a, const float *x, const float *y,
                                         float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""


def test_discovery_finds_the_last_parameter(rng):
    """A CuPy kernel whose output is its last parameter: the graph's scan and foreign.discover
    both name it, with the node that writes it."""
    cp = need("cupy")
    k = cp.RawKernel(AXPY_OUT_LAST, "axpy_out_last")
    n = 1 << 16
    a = np.float32(rng.uniform(0.5, 4.0))
    hx, hy = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    x, y = l2persist.to_device(hx), l2persist.to_device(hy)
    out = l2persist.zeros(n, np.float32)
    bufs = {"x": x, "y": y, "out": out}

    def step(s):
        l2persist.launch(k, (n + 255) // 256, 256, [n, a, x, y, out], stream=s)

    with l2persist.Stream() as s:
        with s.capture() as g:
            step(s)
        by = {r.name: r for r in g.buffers(bufs)}
        assert set(by) == {"x", "y", "out"}, g.buffers(bufs).table()
        assert by["out"].address == out.ptr and by["out"].size == out.nbytes
        assert [nd.position for nd in by["out"].nodes] == [0]
        out.fill_bytes(0xFF)                                 # poison (NaN), then run the graph
        g.launch(stream=s)
        s.synchronize()
        np.testing.assert_allclose(out.to_numpy(), a * hx + hy, rtol=1e-6)
        out.fill_bytes(0xFF)
        found = foreign.discover(lambda: step(s), stream=s, candidates=bufs)
        s.synchronize()
        by = {c.name: c for c in found}
        assert set(by) == {"x", "y", "out"}, found
        assert by["out"].buffer.ptr == out.ptr and by["out"].nodes and by["out"].carrier is s
    np.testing.assert_allclose(out.to_numpy(), a * hx + hy, rtol=1e-6)   # fn ran for real


def test_discover_without_torch_captures_on_the_stream_and_leaves_it_usable():
    """In a fresh process without PyTorch (l2persist's own capture): eager l2persist work and
    a CuPy kernel are discovered on the tune stream, the stream is not left capturing, and
    tune() with no targets then runs on it (the atlas's streaming and Bloom workloads failed
    here with cudaErrorStreamCaptureInvalidated on the H100)."""
    code = textwrap.dedent("""
        import sys, warnings
        import numpy as np, l2persist
        from l2persist import foreign, kernels as K
        warnings.simplefilter("error")                  # a silent fallback would warn
        host = np.random.default_rng().random(1 << 20).astype(np.float32)
        buf = l2persist.to_device(host)
        with l2persist.Stream() as s:
            found = foreign.discover(lambda: K.scale_shift(buf, 2.0, 1.0, stream=s), stream=s,
                                     candidates={"buf": buf})
            by = {c.name: c for c in found}
            assert "buf" in by and by["buf"].carrier is s and by["buf"].nodes, found
            s.synchronize()
            assert s.access_policy_window is None       # not capturing any more
            r = l2persist.tune(lambda: K.stream_read(buf, stream=s), candidates={"buf": buf},
                               stream=s, repeat=3, max_evals=6, confirm_rounds=1, tax=False)
            # buf, and any allocation the kernel's parameters reach that no candidate names
            assert "buf" in [p["name"] for p in r.placements], r.placements
        np.testing.assert_allclose(buf.to_numpy(), host * 2 + 1, rtol=1e-6)
        assert "torch" not in sys.modules
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_discover_refuses_what_cannot_be_captured():
    """In a fresh process: a failed capture must leave nothing behind. The launch log then finds
    the buffers; where CUPTI's one subscriber is taken (here by an outer launch log),
    DiscoveryError names both reasons, and candidates= are tried on the stream."""
    need("torch")
    code = textwrap.dedent("""
        import warnings
        import torch, l2persist
        from l2persist import _core, foreign
        a = torch.rand(1 << 20, device="cuda")
        fn = lambda: float(a.sum())                  # a host sync: not capturable
        found = foreign.discover(fn, candidates={"a": a})        # the launch log
        by = {c.name: c for c in found}
        assert "a" in by and by["a"].nodes, found
        assert all(isinstance(n, foreign.LaunchedKernel) for n in by["a"].nodes), found
        assert by["a"].carrier.handle == torch.cuda.current_stream().cuda_stream

        def refuses():
            try:
                foreign.discover(fn)
            except foreign.DiscoveryError as e:
                text = str(e)
                assert "candidates=" in text and "could not be captured" in text, e
                assert "nor its kernel launches logged" in text and "one subscriber" in text, e
            else:
                raise AssertionError("no DiscoveryError")

        def warns():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                found = foreign.discover(fn, candidates={"a": a})
            assert any("could not be captured" in str(w.message) and
                       "nor its kernel launches logged" in str(w.message) for w in caught), caught
            assert [c.name for c in found] == ["a"] and not found[0].nodes
            assert found[0].carrier.handle == torch.cuda.current_stream().cuda_stream

        _core._launch_log(refuses, [], None)         # CUPTI's one subscriber is held here
        _core._launch_log(warns, [], None)
        b = torch.ones(4, device="cuda") * 3         # the process still works
        assert float(b.sum()) == 12.0
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_a_failed_capture_leaves_torchs_stream_and_rng_usable():
    """In a fresh process, work that breaks the capture at the CUDA level (an l2persist stream
    synchronised inside it) on the caller's own stream: discover raises, PyTorch's current
    stream is the one from before (the caller then closes its stream: every later launch went
    to a destroyed stream, "context is destroyed" on the H200), and PyTorch's default RNG
    works (it had been left in capture mode: "Offset increment outside graph capture").
    Results are checked against NumPy."""
    need("torch")
    code = textwrap.dedent("""
        import numpy as np, torch, l2persist
        from l2persist import foreign
        torch.rand(4, device="cuda")                 # PyTorch in use: discover captures via it
        before = torch.cuda.current_stream().cuda_stream
        host = np.random.default_rng().random(1 << 16).astype(np.float32)
        buf = l2persist.to_device(host)
        with l2persist.Stream() as s:
            def fn():
                l2persist.kernels.scale_shift(buf, 2.0, 1.0, stream=s)
                s.synchronize()                      # breaks the capture in the driver
            try:
                foreign.discover(fn, stream=s)
            except foreign.DiscoveryError:
                pass
            assert torch.cuda.current_stream().cuda_stream == before
        r = torch.randint(0, 1000, (1 << 16,), device="cuda")
        h = r.cpu().numpy()
        assert h.min() >= 0 and h.max() < 1000 and len(np.unique(h)) > 900
        x = torch.rand(256, 256, device="cuda")
        np.testing.assert_allclose((x @ x).cpu().numpy(), x.cpu().numpy() @ x.cpu().numpy(),
                                   rtol=1e-3, atol=1e-3)
        torch.cuda.synchronize()
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


# ---- foreign launches --------------------------------------------------------------------

AXPY = r"""
extern "C" __global__ void axpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def _launch_and_count(kernel, x, y, n, window, stream=None):
    args = [np.float32(2.0), x, y, n]
    return l2persist.measure(
        lambda: l2persist.launch(kernel, (n + 255) // 256, 256, args, window=window,
                                 stream=stream), PERSIST)[PERSIST[0]]


def test_launch_cupy_raw_kernel_with_a_window(device, rng):
    cp = need("cupy")
    _counters_or_skip()
    n = 1 << 20
    k = cp.RawKernel(AXPY, "axpy")
    hx, hy = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    x, y = cp.asarray(hx), cp.asarray(hy)
    l2persist.launch(k, (n + 255) // 256, 256, [np.float32(2.0), x, y, n])
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(cp.asnumpy(y), 2 * hx + hy, rtol=1e-6)
    yb = l2persist.as_buffer(y)
    with device.persisting_l2():
        off = _launch_and_count(k, x, y, n, None)
        on = _launch_and_count(k, x, y, n, _window(yb))
    l2persist.reset_persisting_l2()
    print(f"\nCuPy axpy persisting requests: off {off} on {on}")
    assert on >= n / 32 and off < on / 100       # y's loads and stores are tagged
    with pytest.raises(ValueError, match="takes 4 parameters"):
        l2persist.launch(k, 1, 32, [x, y])
    with pytest.raises(TypeError, match=r"args\[1\]"):
        l2persist.launch(k, 1, 32, [1.0, "x", y, n])
    with pytest.raises(TypeError, match=r"args\[0\]"):
        l2persist.launch(k, 1, 32, [x, x, y, n])     # a buffer for the float parameter
    mod = cp.RawModule(code=AXPY)
    f = mod.get_function("axpy")
    y[:] = cp.asarray(hy)
    l2persist.launch(f, (n + 255) // 256, (256,), [2.0, x, y, np.int32(n)],
                     stream=l2persist.Stream(cp.cuda.Stream(non_blocking=True)))
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(cp.asnumpy(y), 2 * hx + hy, rtol=1e-6)


def test_launch_cuda_core_kernel_with_a_window(device, rng):
    pytest.importorskip("cuda.core")
    _counters_or_skip()
    try:
        from cuda.core import Device, Program, ProgramOptions
    except ImportError:
        from cuda.core.experimental import Device, Program, ProgramOptions
    dev = Device(0)
    dev.set_current()
    cc = dev.compute_capability
    prog = Program(AXPY, code_type="c++", options=ProgramOptions(arch=f"sm_{cc[0]}{cc[1]}"))
    kernel = prog.compile("cubin").get_kernel("axpy")
    n = 1 << 20
    hx, hy = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    x, y = l2persist.to_device(hx), l2persist.to_device(hy)
    with l2persist.Stream() as s:
        l2persist.launch(kernel, (n + 255) // 256, 256, [np.float32(2.0), x, y, n], stream=s)
        s.synchronize()
        np.testing.assert_allclose(y.to_numpy(), 2 * hx + hy, rtol=1e-6)
        with device.persisting_l2():
            off = _launch_and_count(kernel, x, y, n, None, stream=s)
            on = _launch_and_count(kernel, x, y, n, _window(y), stream=s)
        l2persist.reset_persisting_l2()
    print(f"\ncuda.core axpy persisting requests: off {off} on {on}")
    assert on >= n / 32 and off < on / 100


# ---- eager work that syncs with the host: the launch log ----------------------------------

def test_discover_host_syncing_torch_work_with_the_launch_log(device):
    """torch.bincount reads its input's maximum on the host, so it cannot be captured
    (measured: DiscoveryError "Cannot copy between CPU and CUDA tensors during CUDA graph
    capture"). Discovery logs the launches of a second real run instead: the histogram's input
    and the tensor it accumulates into are found by name, windowed on PyTorch's current
    stream; tune() with no targets then runs on it and leaves the results right."""
    torch = need("torch")
    rng = np.random.default_rng()
    n_bins, n = 1 << 20, 1 << 22
    host_idx = rng.integers(0, n_bins, n)
    t = {"idx": torch.from_numpy(host_idx).cuda(),
         "hist": torch.zeros(n_bins, dtype=torch.int64, device="cuda"),
         "unused": torch.zeros(1 << 10, device="cuda")}

    def step():
        t["hist"].add_(torch.bincount(t["idx"], minlength=n_bins))

    own = torch.cuda.current_stream().cuda_stream
    found = foreign.discover(step, candidates=t)
    torch.cuda.synchronize()
    # the failed capture must not leave torch.cuda.graph's capture stream current
    assert torch.cuda.current_stream().cuda_stream == own
    by = {c.name: c for c in found}
    assert {"idx", "hist"} <= set(by) and "unused" not in by, found
    for name in ("idx", "hist"):
        c = by[name]
        assert c.nodes and all(isinstance(k, foreign.LaunchedKernel) for k in c.nodes), c
        assert all(k.name and k.num_params >= 1 for k in c.nodes), c.nodes
        assert c.buffer.ptr == t[name].data_ptr() and c.nbytes == t[name].nbytes
        assert isinstance(c.carrier, l2persist.Stream)
        assert c.carrier.handle == torch.cuda.current_stream().cuda_stream
    before = l2persist.l2_state(device)
    r = l2persist.tune(step, candidates=t, repeat=3, max_evals=6, confirm_rounds=1, tax=False)
    print("\n" + r.table())
    assert l2persist.l2_state(device) == before
    assert {p["name"] for p in r.placements} & {"idx", "hist"}, r.placements
    t["hist"].zero_()                                   # poison-free check: one run from zero
    step()
    np.testing.assert_array_equal(t["hist"].cpu().numpy(),
                                  np.bincount(host_idx, minlength=n_bins))


def test_discover_l2persist_work_that_syncs_with_the_host(rng):
    """l2persist's own kernels (its static runtime) between host syncs: the launch log finds the
    buffer on the stream they run on."""
    host = rng.random(1 << 16).astype(np.float32)
    buf = l2persist.to_device(host)
    with l2persist.Stream() as s:
        def step():
            K.scale_shift(buf, 2.0, 1.0, stream=s)
            s.synchronize()                             # a host sync: not capturable
        found = foreign.discover(step, stream=s, candidates={"buf": buf})
        by = {c.name: c for c in found}
        assert "buf" in by and by["buf"].carrier is s, found
        assert by["buf"].nodes and isinstance(by["buf"].nodes[0], foreign.LaunchedKernel)
        buf.copy_from(host)
        step()
    np.testing.assert_allclose(buf.to_numpy(), host * 2 + 1, rtol=1e-6)


def test_the_launch_log_leaves_out_launches_into_a_capture(rng):
    """A launch on a capturing stream runs nothing (it becomes a node of the graph): the log,
    which stands for eager work, leaves it out, and keeps the eager launch beside it with its
    stream; the captured graph then runs the kernel on its own replay."""
    from l2persist import _core
    host = rng.random(1 << 16).astype(np.float32)
    a, b = l2persist.to_device(host), l2persist.to_device(host)
    with l2persist.Stream() as cap, l2persist.Stream() as s:
        graphs = []

        def fn():
            with cap.capture() as g:
                K.scale_shift(a, 2.0, 1.0, stream=cap)
            graphs.append(g)
            K.scale_shift(b, 3.0, 0.5, stream=s)
            s.synchronize()

        kernels, records, uses, _ = _core._launch_log(fn, [(a.ptr, a.nbytes), (b.ptr, b.nbytes)],
                                                   None)
        assert [k[-1] for k in kernels] == [s.handle], kernels
        assert {records[u[4]][2] for u in uses} == {1}, (records, uses)   # b's offer only
        np.testing.assert_array_equal(a.to_numpy(), host)        # the capture ran nothing
        np.testing.assert_allclose(b.to_numpy(), host * 3 + 0.5, rtol=1e-6)
        with graphs[0] as g:
            g.launch(stream=cap)
            cap.synchronize()
    np.testing.assert_allclose(a.to_numpy(), host * 2 + 1, rtol=1e-6)


def test_pytorch_launches_after_the_launch_log_still_work():
    """In a fresh process: three launch logs (discover on host-syncing work), then some hundreds
    of PyTorch launches of kernels the logs saw and did not see (randint, bincount, matmul),
    each result checked against the host. Two full GPU runs crashed in a later torch.randint
    after the in-process launch-log tests (tools/investigations/launchlog-diag isolates that)."""
    need("torch")
    code = textwrap.dedent("""
        import numpy as np, torch
        from l2persist import foreign
        n_bins = 1 << 12
        idx = torch.randint(0, n_bins, (1 << 16,), device="cuda")
        hist = torch.zeros(n_bins, dtype=torch.int64, device="cuda")
        step = lambda: hist.add_(torch.bincount(idx, minlength=n_bins))
        for _ in range(3):
            found = foreign.discover(step, candidates={"idx": idx, "hist": hist})
            assert {"idx", "hist"} <= {c.name for c in found}, found
        gen = torch.Generator(device="cuda").manual_seed(7)
        a = torch.rand(64, 64, device="cuda", generator=gen)
        for i in range(100):
            r = torch.randint(0, 1000 + i, (4096,), device="cuda", generator=gen)
            b = torch.bincount(r, minlength=1000 + i)
            m = a @ a
            rh = r.cpu().numpy()
            assert rh.min() >= 0 and rh.max() < 1000 + i
            assert (b.cpu().numpy() == np.bincount(rh, minlength=1000 + i)).all()
            np.testing.assert_allclose(m.cpu().numpy(), a.cpu().numpy() @ a.cpu().numpy(),
                                       rtol=1e-3, atol=1e-3)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stderr[-3000:])


# A kernel from a module loaded at run time (PTX for sm_90, `nvcc -ptx -arch=compute_90`), the
# name's NAME and the added 1.0 per launch.
_UNLOADED_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry l2p_unloaded_NAME(.param .u64 p0, .param .u32 p1)
{
    .reg .pred %p<2>;
    .reg .f32 %f<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p0];
    ld.param.u32 %r2, [p1];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.f32 %f2, %f1, 0f3F800000;
    st.global.f32 [%rd4], %f2;
DONE:
    ret;
}
"""

# Both scripts' start: the PTX and the round count from argv, the driver, its checked calls.
_CU_PROLOGUE = r'''
import ctypes, json, sys
ptx, rounds = sys.argv[1], int(sys.argv[2])
cu = ctypes.CDLL("libcuda.so.1")
def ok(r, what):
    if r != 0:
        raise SystemExit(f"{what}: CUresult {r}")
'''

_UNLOADED_SCRIPT = _CU_PROLOGUE + r'''
from l2persist import _core
ok(cu.cuInit(0), "cuInit")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
n = 4096
x = ctypes.c_uint64()
ok(cu.cuMemAlloc_v2(ctypes.byref(x), ctypes.c_size_t(n * 4)), "cuMemAlloc")
ok(cu.cuMemsetD32_v2(x, 0, ctypes.c_size_t(n)), "cuMemsetD32")    # each launch adds 1.0
def work():
    """As XLA's autotuning does: load a module, launch its kernel, unload it; many times."""
    for k in range(rounds):
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        name = f"l2p_unloaded_{k}".encode()
        ok(cu.cuModuleLoadData(ctypes.byref(mod), ptx.replace("NAME", str(k)).encode()), "load")
        ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name), "cuModuleGetFunction")
        a0, a1 = ctypes.c_uint64(x.value), ctypes.c_int(n)
        params = (ctypes.c_void_p * 2)(ctypes.addressof(a0), ctypes.addressof(a1))
        ok(cu.cuLaunchKernel(fn, n // 256, 1, 1, 256, 1, 1, 0, None, params, None), "launch")
        ok(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        ok(cu.cuModuleUnload(mod), "cuModuleUnload")
kernels, records, uses, _ = _core._launch_log(work, [(x.value, n * 4)], None)
host = (ctypes.c_float * n)()
ok(cu.cuMemcpyDtoH_v2(host, x, ctypes.c_size_t(n * 4)), "cuMemcpyDtoH")
print(json.dumps({"names": [k[1] for k in kernels], "params": [k[5] for k in kernels],
                  "found": [any(u[0] == i and x.value in u[1:] for u in uses)
                            for i in range(len(kernels))],
                  "x": x.value, "values": sorted(set(host))}))
'''


def test_the_launch_log_keeps_launches_whose_module_was_unloaded(tmp_path):
    """XLA's autotuning loads a module, launches its kernel and unloads it, many times, while a
    jitted step compiles: with the launch log on, the log read each function after its module
    was gone and crashed the program (jax_program under advise, H200, 7e4cbd1: SIGSEGV in
    _launch_log_take). Each launch now keeps its name and layout from its own call: every one of
    forty launches of forty unloaded modules is named right and has its buffer found, in a
    process of its own (a crash is a failure here, not the end of the suite)."""
    rounds = 40
    r = subprocess.run([sys.executable, "-c", _UNLOADED_SCRIPT, _UNLOADED_PTX, str(rounds)],
                       capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "PYTHONFAULTHANDLER": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    got = __import__("json").loads(r.stdout.strip().splitlines()[-1])
    assert got["names"] == [f"l2p_unloaded_{k}" for k in range(rounds)], got["names"]
    assert got["params"] == [2] * rounds
    assert all(got["found"]), got
    assert got["values"] == [float(rounds)]                 # every launch ran, once


_UNLOADED_GRAPH_SCRIPT = _CU_PROLOGUE + r'''
import l2persist
s = l2persist.Stream()                    # the runtime's primary context, current from here
n = 4096
x = ctypes.c_uint64()
ok(cu.cuMemAlloc_v2(ctypes.byref(x), ctypes.c_size_t(n * 4)), "cuMemAlloc")
mods, fns = [], []
for k in range(rounds):
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    ok(cu.cuModuleLoadData(ctypes.byref(mod), ptx.replace("NAME", str(k)).encode()), "load")
    ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, f"l2p_unloaded_{k}".encode()), "function")
    mods.append(mod)
    fns.append(fn)
a0, a1 = ctypes.c_uint64(x.value), ctypes.c_int(n)
params = (ctypes.c_void_p * 2)(ctypes.addressof(a0), ctypes.addressof(a1))
with s.capture() as g:
    for k, fn in enumerate(fns):
        grid = n // 256 // (1 + k % 2)
        ok(cu.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, ctypes.c_void_p(s.handle), params,
                             None), "launch")
nodes = g.kernel_nodes                    # listed, so described, while the modules are loaded
before = [[k.name, list(k.grid), list(k.block)] for k in nodes]
for mod in mods:                          # as XLA, CuPy's RawModule or numba may
    ok(cu.cuModuleUnload(mod), "cuModuleUnload")
after = [[k.name, list(k.grid), list(k.block)] for k in nodes]
again = [k.name for k in g.kernel_nodes]
kernels, records, uses = g._scan([(x.value, n * 4)])
print(json.dumps({"before": before, "after": after, "again": again,
                  "scanned": [k[1] for k in kernels], "params": [k[5] for k in kernels],
                  "found": [any(u[0] == i and x.value in u[1:] for u in uses)
                            for i in range(len(kernels))]}), flush=True)
'''


def test_graph_nodes_are_described_once_so_an_unloaded_module_is_never_asked():
    """A graph's kernel nodes whose modules are unloaded after the graph listed them (P3 of the
    handle review: the names, shapes and parameter layouts were asked of each node's function
    again at every read and scan, a driver call on a function its module's unload freed). They
    keep what the listing described: names, grids and blocks as before the unload, a second
    listing and a scan name each of the twelve kernels and find its buffer, in a process of
    its own (a crash is a failure here)."""
    rounds = 12
    r = subprocess.run([sys.executable, "-c", _UNLOADED_GRAPH_SCRIPT, _UNLOADED_PTX,
                        str(rounds)], capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "PYTHONFAULTHANDLER": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    got = __import__("json").loads(r.stdout.strip().splitlines()[-1])
    names = [f"l2p_unloaded_{k}" for k in range(rounds)]
    assert [b[0] for b in got["before"]] == names, got["before"]
    assert [b[1][0] for b in got["before"]] == [16 // (1 + k % 2) for k in range(rounds)]
    assert got["after"] == got["before"]
    assert got["again"] == names and got["scanned"] == names, got
    assert got["params"] == [2] * rounds and all(got["found"]), got


_RELISTED_GRAPH_SCRIPT = _CU_PROLOGUE + r'''
import l2persist
s = l2persist.Stream()
n = 4096
x = ctypes.c_uint64()
ok(cu.cuMemAlloc_v2(ctypes.byref(x), ctypes.c_size_t(n * 4)), "cuMemAlloc")
fns = []
for k in range(rounds):
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    ok(cu.cuModuleLoadData(ctypes.byref(mod), ptx.replace("NAME", str(k)).encode()), "load")
    ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, f"l2p_unloaded_{k}".encode()), "function")
    fns.append(fn)
a0, a1 = ctypes.c_uint64(x.value), ctypes.c_int(n)
params = (ctypes.c_void_p * 2)(ctypes.addressof(a0), ctypes.addressof(a1))
with s.capture() as g:
    for fn in fns[:3]:
        ok(cu.cuLaunchKernel(fn, n // 256, 1, 1, 256, 1, 1, 0, ctypes.c_void_p(s.handle), params,
                             None), "launch")
old = g.kernel_nodes
first = [k.name for k in old]
# The graph changed by the driver after its listing: its first kernel node destroyed, a node
# of another kernel added (the driver's node order is the capture's: three kernel nodes only).
count = ctypes.c_size_t(0)
ok(cu.cuGraphGetNodes(ctypes.c_void_p(g.handle), None, ctypes.byref(count)), "cuGraphGetNodes")
handles = (ctypes.c_void_p * count.value)()
ok(cu.cuGraphGetNodes(ctypes.c_void_p(g.handle), handles, ctypes.byref(count)), "cuGraphGetNodes")
ok(cu.cuGraphDestroyNode(ctypes.c_void_p(handles[0])), "cuGraphDestroyNode")
class Params(ctypes.Structure):            # CUDA_KERNEL_NODE_PARAMS (v1)
    _fields_ = [("func", ctypes.c_void_p)] + [(f, ctypes.c_uint) for f in (
        "gx", "gy", "gz", "bx", "by", "bz", "shared")] + [
        ("kernelParams", ctypes.c_void_p), ("extra", ctypes.c_void_p)]
p = Params(fns[3], n // 512, 1, 1, 128, 1, 1, 0, ctypes.cast(params, ctypes.c_void_p), None)
node = ctypes.c_void_p()
ok(cu.cuGraphAddKernelNode(ctypes.byref(node), ctypes.c_void_p(g.handle), None,
                           ctypes.c_size_t(0), ctypes.byref(p)), "cuGraphAddKernelNode")
kept = [k.name for k in old]                # not listed again yet: the listing's copy
new = g.kernel_nodes
stale = []
for k in old:
    try:
        stale.append(k.name)
    except ValueError as e:
        stale.append(str(e))
kernels, records, uses = g._scan([(x.value, n * 4)])
print(json.dumps({"first": first, "kept": kept, "stale": stale,
                  "again": [[k.name, list(k.grid), list(k.block)] for k in new],
                  "scanned": [k[1] for k in kernels],
                  "found": [any(u[0] == i and x.value in u[1:] for u in uses)
                            for i in range(len(kernels))]}), flush=True)
'''


def test_a_graph_changed_after_its_listing_is_described_again_and_its_old_nodes_refused():
    """A graph whose kernel nodes the driver changed after l2persist listed them (finding 3 of
    the handle review: the first listing's description was kept for good). Listing again
    describes the graph as it now is (the added kernel's name and shape, the destroyed one
    gone, the scan naming the new list); a KernelNode of the old list is refused by name
    (ValueError), never read from a description that no longer holds it."""
    r = subprocess.run([sys.executable, "-c", _RELISTED_GRAPH_SCRIPT, _UNLOADED_PTX, "4"],
                       capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "PYTHONFAULTHANDLER": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    got = __import__("json").loads(r.stdout.strip().splitlines()[-1])
    assert got["first"] == [f"l2p_unloaded_{k}" for k in range(3)], got
    assert got["kept"] == got["first"], got        # read from the first listing's copy
    assert all("no longer its graph's" in s for s in got["stale"]), got["stale"]
    assert got["again"] == [["l2p_unloaded_1", [16, 1, 1], [256, 1, 1]],
                            ["l2p_unloaded_2", [16, 1, 1], [256, 1, 1]],
                            ["l2p_unloaded_3", [8, 1, 1], [128, 1, 1]]], got["again"]
    assert got["scanned"] == ["l2p_unloaded_1", "l2p_unloaded_2", "l2p_unloaded_3"], got
    assert all(got["found"]) and len(got["found"]) == 3, got
