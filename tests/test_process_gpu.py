"""l2persist.process on the GPU: discovery of kernels launched on a stream of their own (a
capture sees nothing: the launch log does), timing that refuses a stream the work does not run
on (eager PyTorch work on its current stream, a CuPy kernel on a stream of its own), and the
hooks through which the binding reaches the package. Results are checked against NumPy."""

import types

import numpy as np
import pytest

import l2persist
from l2persist import _core, foreign
from l2persist.process import discover as D
from l2persist.pytest_plugin import need
from l2persist.tune import timed_stream

pytestmark = pytest.mark.gpu

AXPY = r"""
extern "C" __global__ void axpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

SMALL = dict(repeat=3, max_evals=6, confirm_rounds=1, recheck_rounds=0, tax=False)


def _axpy_on_its_own_stream(rng, n=1 << 20):
    """y = 2 x + y by a CuPy RawKernel called with stream= a CuPy stream of its own (neither
    PyTorch's current stream nor one a capture begins on): the step, its arrays, their host
    copies, the stream, and the runs so far (every run executes: a capture elsewhere does not
    take it)."""
    cp = pytest.importorskip("cupy")
    k = cp.RawKernel(AXPY, "axpy")
    hx, hy = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    w = types.SimpleNamespace(cp=cp, x=cp.asarray(hx), y=cp.asarray(hy), hx=hx, hy=hy,
                              own=cp.cuda.Stream(non_blocking=True), runs=[])
    cp.cuda.runtime.deviceSynchronize()

    def step():
        k(((n + 255) // 256,), (256,), (np.float32(2.0), w.x, w.y, np.int32(n)), stream=w.own)
        w.runs.append(1)
    w.step = step

    def check():
        """y is hy + 2 x for each run so far (rounded once per run: hundreds of runs under
        tune and advise leave a few float32 ulps)."""
        w.own.synchronize()
        np.testing.assert_allclose(cp.asnumpy(w.y), hy + 2.0 * len(w.runs) * hx, rtol=1e-4)
    w.check = check
    return w


# ---- kernels on a stream of their own: a capture sees nothing, the launch log sees them ----

@pytest.mark.parametrize("capture", ["torch", "l2persist"])
def test_discover_cupy_work_on_a_stream_of_its_own(device, rng, monkeypatch, capture):
    """A CuPy RawKernel called with stream= a stream that is not the capturing one: the
    capture holds nothing (on the H100, through PyTorch's capture, discover, tune and advise
    all raised CudaError "cudaGraphGetNodes failed: cudaErrorInvalidValue"). Discovery goes to
    the launch log instead: x and y are found at the CuPy arrays' addresses, windowed on the
    CuPy stream the kernel ran on; tune() and advise() with no targets run on that stream
    without error and leave the device as they found it; the kernel's results are NumPy's."""
    w = _axpy_on_its_own_stream(rng)
    if capture == "torch":
        torch = need("torch")
        torch.zeros(1, device="cuda")                # PyTorch in use: discovery captures via it
    else:
        monkeypatch.setattr(D, "_torch_in_use", lambda: None)   # l2persist's own capture
    names = {"x": w.x, "y": w.y}
    found = foreign.discover(w.step, candidates=names)
    by = {c.name: c for c in found}
    assert set(by) == {"x", "y"}, found
    for name, arr in names.items():
        c = by[name]
        assert c.address == arr.data.ptr and c.nbytes == arr.nbytes, c
        assert c.buffer.ptr == arr.data.ptr
        assert isinstance(c.carrier, l2persist.Stream) and c.carrier.handle == w.own.ptr, c
        assert c.nodes and all(isinstance(kn, foreign.LaunchedKernel) and kn.stream == w.own.ptr
                               and "axpy" in kn.name for kn in c.nodes), c.nodes
    assert by["x"].carrier is by["y"].carrier              # one stream: one window at a time
    w.check()                                              # fn ran for real each time
    unnamed = foreign.discover(w.step)                     # allocations, named by argument
    for arr in (w.x, w.y):
        assert any(c.address <= arr.data.ptr < c.address + c.nbytes for c in unnamed), unnamed

    before = l2persist.l2_state(device)
    r = l2persist.tune(w.step, candidates=names, **SMALL)
    print("\n" + r.table())
    assert {p["name"] for p in r.placements} == {"x", "y"}, r.placements
    adv = l2persist.advise({"axpy": w.step}, repeat=3, search_repeat=2, confirm_rounds=1,
                           tries=1, recheck_rounds=0)
    print(adv.table())
    assert not adv.workloads["axpy"].note.startswith("no window searched"), adv.workloads
    assert l2persist.l2_state(device) == before
    w.check()


def test_discovery_and_timing_agree_on_the_stream(device, rng):
    """The stream discovery puts the windows on (the launch log's) is the stream the timing
    then accepts: both read it from the same launches."""
    w = _axpy_on_its_own_stream(rng, n=1 << 18)
    carrier = D.discover(w.step, candidates={"y": w.y})[0].carrier
    assert carrier.handle == w.own.ptr
    assert timed_stream(w.step, carrier, device, given=True) is carrier
    work = D.work_streams(w.step, device)
    assert work.log_error is None and work.launch_streams() == [w.own.ptr]
    assert [kn.name for kn in work.launches] == ["axpy"]
    w.check()


def test_a_stream_fn_made_and_destroyed_is_never_used_after(device, rng):
    """fn makes a CuPy stream per call, launches axpy on it and returns, freeing the stream
    (cudaStreamDestroy, through CuPy's runtime). The launch log sees the destroy: its handle is
    among the log's gone streams; discover leaves the buffers out with a warning instead of
    wrapping a destroyed stream, and the timing refuses it, naming the kernel; nothing is
    queued on it after fn. fn's results are NumPy's (every call ran)."""
    cp = pytest.importorskip("cupy")
    w = _axpy_on_its_own_stream(rng, n=1 << 18)
    n = w.x.size
    kernel = cp.RawKernel(AXPY, "axpy")
    handles = []

    def step():
        s = cp.cuda.Stream(non_blocking=True)
        handles.append(s.ptr)
        kernel(((n + 255) // 256,), (256,), (np.float32(2.0), w.x, w.y, np.int32(n)), stream=s)
        w.runs.append(1)                 # s is freed as step returns: its work still runs
    kernels, _, _, gone = _core._launch_log(step, [], None)
    assert [k[-1] for k in kernels] == [handles[-1]] and gone == [handles[-1]], (kernels, gone)
    kept, _, _, none = _core._launch_log(w.step, [], None)      # a stream that lives on
    assert [k[-1] for k in kept] == [w.own.ptr] and none == []
    with pytest.warns(RuntimeWarning, match=r"which fn destroyed before it returned"):
        assert D.discover(step, candidates={"x": w.x, "y": w.y}) == []
    with pytest.raises(ValueError, match=r"ran on stream 0x[0-9a-f]+ \(axpy\), which fn "
                                         r"destroyed before it returned"):
        timed_stream(step, None, device, given=False)
    cp.cuda.runtime.deviceSynchronize()
    w.check()


# ---- timing refuses a stream the work does not run on ---------------------------------------

def _histogram(torch, rng, n_bins=1 << 20, n=1 << 22):
    """An eager index_add_ step on PyTorch's current stream, its tensors, and a check of one
    step from zero against NumPy (discovery's capture queues a run that never executes, so
    the runs so far are not counted)."""
    idx_h = rng.integers(0, n_bins, n)
    vals_h = rng.random(n, dtype=np.float32)
    t = {"acc": torch.zeros(n_bins, device="cuda"), "idx": torch.from_numpy(idx_h).cuda(),
         "vals": torch.from_numpy(vals_h).cuda()}

    def step():
        t["acc"].index_add_(0, t["idx"], t["vals"])

    def check():
        t["acc"].zero_()
        step()
        np.testing.assert_allclose(
            t["acc"].cpu().numpy(),
            np.bincount(idx_h, weights=vals_h.astype(np.float64), minlength=n_bins),
            rtol=1e-4, atol=1e-4)
    return step, t, check


def test_eager_torch_work_timed_on_another_stream_is_refused(device, rng):
    """Measured on the H100: eager PyTorch work on its current stream, tune(fn, stream=s):
    the events on s timed 4.7 us of nothing and the tuner said "does not help", where the
    right window gains 1.69x. Now tune refuses s, naming both streams, before any timing and
    without touching the device's state; fn's results are NumPy's."""
    torch = need("torch")
    step, t, check = _histogram(torch, rng)
    current = torch.cuda.current_stream().cuda_stream
    before = l2persist.l2_state(device)
    with l2persist.Stream() as s:
        with pytest.raises(ValueError) as e:
            l2persist.tune(step, stream=s, candidates={"acc": t["acc"]}, **SMALL)
        text = str(e.value)
        assert f"fn's kernels ran on stream {current:#x} (" in text, text
        assert f"the events go on stream {s.handle:#x}, where they would time nothing" in text
    assert l2persist.l2_state(device) == before
    check()


def test_eager_torch_work_is_timed_where_it_runs(device, rng):
    """The stream the launch log names is PyTorch's own (the default stream's launches match
    PyTorch's handle for it: the driver sees 0 or CU_STREAM_LEGACY), so the stream PyTorch
    runs on is accepted as given, and without stream= it is the one timed; on a side stream
    (torch.cuda.stream) too."""
    torch = need("torch")
    step, t, check = _histogram(torch, rng, n_bins=1 << 16, n=1 << 18)
    cur = l2persist.Stream(wrap=torch.cuda.current_stream())
    assert timed_stream(step, cur, device, given=True) is cur
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = timed_stream(step, None, device, given=False)
        assert isinstance(got, l2persist.Stream) and got.handle == side.cuda_stream
        with pytest.raises(ValueError, match=f"ran on stream {side.cuda_stream:#x}"):
            timed_stream(step, cur, device, given=True)
        r = l2persist.tune(step, candidates={"acc": t["acc"]}, **SMALL)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert "acc" in {p["name"] for p in r.placements}, r.placements
    check()


def test_cupy_work_on_its_own_stream_timed_elsewhere_is_refused(device, rng):
    """A CuPy kernel launched with stream= a stream of its own: tune(fn, stream=s) is refused
    naming both; with the CuPy stream given, or none, the CuPy stream is timed."""
    w = _axpy_on_its_own_stream(rng)
    with l2persist.Stream() as s:
        with pytest.raises(ValueError) as e:
            l2persist.tune(w.step, stream=s, candidates={"x": w.x, "y": w.y}, **SMALL)
        text = str(e.value)
        assert f"fn's kernels ran on stream {w.own.ptr:#x} (axpy)" in text, text
        assert f"the events go on stream {s.handle:#x}" in text
    mine = l2persist.Stream(w.own)
    assert timed_stream(w.step, mine, device, given=True) is mine
    assert timed_stream(w.step, None, device, given=False).handle == w.own.ptr
    w.check()


# ---- the binding's hooks ----------------------------------------------------------------------

def test_the_binding_reaches_the_package_only_through_its_hooks(device, rng):
    """Graph.buffers, Graph.nodes_window, a borrowed graph's owner, Device.set_aside_tax and
    DeviceProperties' repr reach the package through the hooks it registered: the package's
    own objects come back, a hook replaced is the one called, and a hook missing is named."""
    from l2persist import tax
    host = rng.random(1 << 16).astype(np.float32)
    a = l2persist.to_device(host)
    with l2persist.Stream() as s:
        with s.capture() as g:
            l2persist.kernels.scale_shift(a, 2.0, 1.0, stream=s)
        assert isinstance(g.buffers({"a": a}), D.BufferTable)
        assert isinstance(g.nodes_window([0]), D.NodeGroup)
        borrowed = l2persist.as_graph(g.handle)           # owner: the raw handle
        seen = []
        saved = _core._hooks["owner_changed"]
        _core._set_hooks(owner_changed=seen.append)
        try:
            borrowed.set_access_policy_window(None)
            borrowed.kernel_nodes[0].access_policy_window = None
        finally:
            _core._set_hooks(owner_changed=saved)
        assert seen == [borrowed, borrowed]
        g.launch(stream=s)
        s.synchronize()
    np.testing.assert_allclose(a.to_numpy(), host * 2 + 1, rtol=1e-6)
    assert isinstance(device.set_aside_tax(0), tax.TaxPrediction)
    assert repr(device.properties).startswith("DeviceProperties(")
    saved = _core._hooks.pop("record_repr")
    try:
        with pytest.raises(RuntimeError, match="no 'record_repr' hook is registered"):
            repr(device.properties)
    finally:
        _core._hooks["record_repr"] = saved
    assert "l2_cache_size=" in repr(device.properties)
