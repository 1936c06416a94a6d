"""Foreign graphs, discovery and launches without a GPU: argument checking, candidate naming,
the buffer table, and the capture-safe release queue's Python view."""

import contextlib
import sys
import types

import pytest

import l2persist
from l2persist import _core, foreign
from l2persist.process import discover as D
from l2persist.process import torch as torch_hooks


def test_exports():
    assert l2persist.as_graph is foreign.as_graph and l2persist.launch is foreign.launch
    assert callable(foreign.discover) and issubclass(foreign.DiscoveryError, RuntimeError)
    assert "nodes" in l2persist.Graph.set_access_policy_window.__doc__
    for name in ("buffers", "nodes_window", "owner", "handle"):
        assert hasattr(l2persist.Graph, name)
    for name in ("name", "grid", "block", "shared_mem", "graph"):
        assert hasattr(l2persist.KernelNode, name)


def test_release_queue_is_empty_and_drains_without_cuda():
    assert _core._release_pending() == 0
    assert _core._release_drain() == 0


def test_as_graph_refusals():
    with pytest.raises(ValueError, match="cudaGraphExec_t alone"):
        l2persist.as_graph(None, exec=0x1234)
    with pytest.raises(TypeError, match="obj is required"):
        l2persist.as_graph()
    with pytest.raises(TypeError, match="got bool"):
        l2persist.as_graph(True)
    with pytest.raises(TypeError, match="expected a torch.cuda.CUDAGraph"):
        l2persist.as_graph("graph")
    with pytest.raises(ValueError, match="nonzero"):
        l2persist.as_graph(0)

    class CupyGraph:                                   # CuPy keeps only the executable
        graph = 0
        graphExec = 0x5678
    CupyGraph.__module__ = "cupy.cuda.graph"
    with pytest.raises(ValueError, match="keeps only its executable"):
        l2persist.as_graph(CupyGraph())

    class CUgraphExec:
        pass
    with pytest.raises(ValueError, match="cudaGraphExec_t alone"):
        l2persist.as_graph(CUgraphExec())

    class CUDAGraph:                                   # torch without keep_graph=True
        def raw_cuda_graph(self):
            raise RuntimeError("You cannot access the raw cudaGraph_t instance unless ...")
    CUDAGraph.__module__ = "torch.cuda.graphs"
    with pytest.raises(ValueError, match="keeps no raw graph") as e:
        l2persist.as_graph(CUDAGraph())
    # the one error says what to do: capture under keep_graphs, or window the capture
    assert "l2persist.keep_graphs()" in str(e.value)
    assert "l2persist.window_captures(window)" in str(e.value)


def test_launch_refusals_name_the_argument():
    with pytest.raises(TypeError, match="kernel:"):
        l2persist.launch("axpy", 1, 1)
    with pytest.raises(TypeError, match="kernel:"):
        l2persist.launch(True, 1, 1)
    with pytest.raises(ValueError, match=r"grid: 0 is outside \[1, 4294967295\]"):
        l2persist.launch(1, 0, 1)
    with pytest.raises(ValueError, match=r"block: .*outside \[1, 4294967295\]"):
        l2persist.launch(1, 1, (32, 0))           # padded dimensions are checked one by one
    with pytest.raises(ValueError, match="block: 1-3 dimensions"):
        l2persist.launch(1, 1, (1, 1, 1, 1))
    with pytest.raises(TypeError, match="grid: expected an int or a tuple of 1-3 ints"):
        l2persist.launch(1, 1.5, 1)
    with pytest.raises(TypeError, match="grid: expected an int or a tuple of 1-3 ints"):
        l2persist.launch(1, True, 1)
    with pytest.raises(TypeError, match="shared_mem"):
        l2persist.launch(1, 1, 1, shared_mem=1.0)


def test_function_handles_of_each_kind():
    assert foreign._function_of(0xABC) == (0xABC, False)

    class Function:
        ptr = 0x1111
    Function.__module__ = "cupy.cuda.function"
    assert foreign._function_of(Function()) == (0x1111, False)

    class RawKernel:
        kernel = Function()
    RawKernel.__module__ = "cupy._core.raw"
    assert foreign._function_of(RawKernel()) == (0x1111, False)

    class CUkernel(int):
        pass

    class Kernel:
        _handle = CUkernel(0x2222)
    Kernel.__module__ = "cuda.core._module"
    assert foreign._function_of(Kernel()) == (0x2222, True)

    class CompiledKernel:
        function = None

        def _init_handles(self):
            self.function = 0x3333
    CompiledKernel.__module__ = "triton.compiler.compiler"
    assert foreign._function_of(CompiledKernel()) == (0x3333, False)


def test_candidate_names():
    a, b = object(), object()
    assert D._named(None) == []
    assert D._named({"acc": a, 3: b}) == [("acc", a), ("3", b)]
    assert D._named([a, ("weights", b)]) == [("candidates[0]", a), ("weights", b)]
    assert D._named(a) == [("candidate", a)]
    module = types.SimpleNamespace(
        named_parameters=lambda: [("fc.weight", types.SimpleNamespace(is_cuda=True))],
        named_buffers=lambda: [("bn.running_mean", types.SimpleNamespace(is_cuda=False))])
    assert [n for n, _ in D._named(module)] == ["fc.weight"]   # CPU tensors left out
    with pytest.raises(TypeError, match="candidates: 'x' is not a device buffer"):
        D._offers({"x": 42})


def test_buffer_table_text_and_html():
    node = types.SimpleNamespace(position=2, name="void indexFuncLargeIndex<float>(...)")
    rec = foreign.BufferRecord(address=0x7f0000000000, size=36 << 20, name="acc", nodes=(node,),
                               uses=(foreign.BufferUse(2, 0, 16, 0x7f0000000000),))
    raw = foreign.BufferRecord(address=0x7f1000000000, size=2 << 20, name="buffer@0x7f1000000000",
                               nodes=(node,), uses=(), allocation=True)
    t = foreign.BufferTable([rec, raw])
    text = t.table()
    assert text.splitlines()[0].split() == ["name", "address", "size", "nodes", "param@offset"]
    assert "acc" in text and "36 MiB" in text and "2.p0@16" in text and "(allocation)" in text
    html = t._repr_html_()
    assert html.startswith("<table>") and "&lt;float&gt;" in html
    assert str(t) == text and rec.nbytes == 36 << 20


def test_node_group_needs_a_graph():
    with pytest.raises(TypeError, match="graph: expected an l2persist Graph"):
        foreign.NodeGroup(object(), [0])


def test_raw_range_exposes_the_cuda_array_interface():
    r = D._RawRange(0x7f0000000000, 4096)
    cai = r.__cuda_array_interface__
    assert cai["data"] == (0x7f0000000000, False) and cai["shape"] == (4096,)
    assert cai["typestr"] == "|u1" and cai["version"] == 3


@pytest.mark.skipif(l2persist.is_available(), reason="checks the no-GPU path")
def test_discover_without_a_device_says_so():
    with pytest.raises(foreign.DiscoveryError, match="candidates="):
        foreign.discover(lambda: None)


def test_cuda_core_owners():
    class GraphBuilder:
        _mnff = types.SimpleNamespace(graph=None)
    GraphBuilder.__module__ = "cuda.core._graph._graph_builder"
    with pytest.raises(ValueError, match="end_building"):
        l2persist.as_graph(GraphBuilder())

    class Graph:
        pass
    Graph.__module__ = "cuda.core._graph"
    with pytest.raises(ValueError, match="executable"):
        l2persist.as_graph(Graph())


# ---- discovery of eager work that cannot be captured: the launch log (faked here) -----------

A, B = 0x7F0000000000, 0x7F1000000000
EAGER, OWN = 0x5000, 0x6000          # the stream eager fn runs on; a stream of fn's own
SYNC = "Cannot copy between CPU and CUDA tensors during CUDA graph capture"


def _without_torch(monkeypatch):
    """discover takes PyTorch's path (its first run) wherever torch is imported, and
    LaunchStreams adds PyTorch's current stream wherever it is initialised: in a GPU run, a GPU
    test before these put it there (the H200's live part, seed 828140936). These fakes are of
    the path without it (PyTorch itself stays imported: taking it out of sys.modules would
    make any import of it while they run load it a second time)."""
    monkeypatch.setattr(torch_hooks, "imported", lambda: False)
    monkeypatch.setattr(torch_hooks, "current_stream", lambda: None)


def _not_capturable(monkeypatch):
    _without_torch(monkeypatch)

    def capture(fn, stream, device):
        raise RuntimeError(SYNC)
    monkeypatch.setattr(D, "_capture", capture)
    carrier = types.SimpleNamespace(handle=EAGER)          # the stream fn runs on
    monkeypatch.setattr(D, "_eager_stream", lambda stream, device: carrier)
    return carrier


def test_discover_falls_back_to_the_launch_log(monkeypatch):
    """Capture fails: fn runs once more with its launches logged, and the log's tuples (the
    same as Graph._scan's) become Candidates windowed on the stream, their nodes the launches."""
    carrier = _not_capturable(monkeypatch)
    calls = []

    def launch_log(fn, offers, device):
        fn()
        kernels = [(0, "histogram", (80, 1, 1), (256, 1, 1), 0, 4, EAGER),
                   (1, "reduce", (1, 1, 1), (32, 1, 1), 0, 2, EAGER)]
        records = [(A, 4096, -1), (B, 1 << 20, -1)]
        uses = [(0, 0, 0, A, 0), (0, 1, 8, B, 1), (1, 0, 0, B + 64, 1)]
        return kernels, records, uses, []
    monkeypatch.setattr(_core, "_launch_log", launch_log)
    found = foreign.discover(lambda: calls.append(1))
    assert len(calls) == 2                                # the first run, and the logged one
    # largest first, each named by the first argument that points into it (not its address)
    assert [c.name for c in found] == ["histogram@0.p1+8", "histogram@0.p0"]
    big = found[0]
    assert big.carrier is carrier and big.nbytes == 1 << 20 and big.address == B
    assert [(k.position, k.name, k.stream) for k in big.nodes] == [(0, "histogram", EAGER),
                                                                    (1, "reduce", EAGER)]
    assert all(isinstance(k, foreign.LaunchedKernel) for k in big.nodes)
    assert big.nodes[0].grid == (80, 1, 1) and big.nodes[0].num_params == 4
    assert big.record.allocation and {u.offset for u in big.record.uses} == {8, 0}
    assert foreign.node_label(big.nodes[1]) == "1:reduce"   # how tune prints them


def test_discovered_names_stay_when_the_addresses_move(monkeypatch):
    """The next process allocates elsewhere: the same work's buffers get the same names (a
    saved Plan's entries are matched by name), and two buffers never share one."""
    _not_capturable(monkeypatch)
    names = []
    for base in (A, A + (3 << 30)):
        b = base + (B - A)

        def launch_log(fn, offers, device, a=base, b=b):
            fn()
            return ([(0, "k" * 50, (1, 1, 1), (32, 1, 1), 0, 2, EAGER)],
                    [(a, 4096, -1), (b, 8192, -1)],
                    [(0, 0, 0, a, 0), (0, 1, 0, b, 1), (0, 1, 16, a + 64, 0)], [])
        monkeypatch.setattr(_core, "_launch_log", launch_log)
        names.append([c.name for c in foreign.discover(lambda: None)])
    assert names[0] == names[1] == ["k" * 39 + "…@0.p1", "k" * 39 + "…@0.p0"]


def test_discovered_names_across_graphs_are_one_per_buffer():
    """fn replays two graphs: their own-node-0 names would clash, so each graph's discovered
    names get its place in front; an allocation both use keeps the first graph's name; an
    offered (named) buffer is left as the user named it."""
    def cand(name, address, allocation=True):
        rec = foreign.BufferRecord(address=address, size=4096, name=name, nodes=(), uses=(),
                                   allocation=allocation)
        return foreign.Candidate(name=name, nbytes=4096, address=address, nodes=(),
                                 carrier=None, record=rec)
    named = {}
    g0 = D._graph_scoped([cand("gemm@0.p0", A), cand("kv", B, False)], "g0/", named)
    g1 = D._graph_scoped([cand("gemm@0.p0", A + 8192), cand("add@1.p0", A)], "g1/",
                               named)
    names = [c.name for c in g0 + g1]
    assert names == ["g0/gemm@0.p0", "kv", "g1/gemm@0.p0", "g0/gemm@0.p0"]
    assert [c.record.name for c in g0 + g1] == names
    assert D._graph_scoped([cand("gemm@0.p0", A)], "", {})[0].name == "gemm@0.p0"


def test_discovery_error_names_both_reasons(monkeypatch):
    """Neither capture nor the launch log (CUPTI's one subscriber is another tool's): the
    DiscoveryError says both reasons."""
    _not_capturable(monkeypatch)

    def taken(fn, offers, device):
        raise l2persist.NotSupportedError(
            "cuptiSubscribe failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CUPTI takes "
            "one subscriber per process, and another tool holds it")
    monkeypatch.setattr(_core, "_launch_log", taken)
    with pytest.raises(foreign.DiscoveryError) as e:
        foreign.discover(lambda: None)
    text = str(e.value)
    assert SYNC in text and "MULTIPLE_SUBSCRIBERS" in text and "candidates=" in text
    assert "could not be captured" in text and "nor its kernel launches logged" in text


def test_launch_log_without_launches_or_with_fn_failing(monkeypatch):
    _not_capturable(monkeypatch)
    monkeypatch.setattr(_core, "_launch_log",
                        lambda fn, offers, device: (fn(), ([], [], [], []))[1])
    with pytest.raises(foreign.DiscoveryError, match="fn launched no kernel"):
        foreign.discover(lambda: None)
    runs = []

    def fails_the_second_time():
        runs.append(1)
        if len(runs) == 2:
            raise ValueError("fn's own error")
    with pytest.raises(ValueError, match="fn's own error"):   # not taken for the log's failure
        foreign.discover(fails_the_second_time)


# ---- a capture that holds nothing: kernels on a stream of fn's own --------------------------

class _EmptyCapture:
    """What a capture of fn returns when fn launched its kernels on a stream that was not
    capturing (a CuPy RawKernel called with stream=): a graph without kernel nodes, or, as
    PyTorch's kept graph of nothing did on the H100, one whose nodes cannot even be read."""

    def __init__(self, unreadable):
        self.unreadable = unreadable
        self.read = 0

    @property
    def kernel_nodes(self):
        self.read += 1
        if self.unreadable:
            raise l2persist.CudaError("cudaGraphGetNodes failed: cudaErrorInvalidValue: "
                                      "invalid argument")
        return []

    def buffers(self, candidates=None):
        raise AssertionError("an empty capture has no buffers to scan")


class _Wrapped:
    """_core.Stream(wrap=obj, device=None) without a driver: the handle obj's __cuda_stream__
    gives, and the device asked for."""

    def __init__(self, wrap, device=None):
        self.owner = wrap
        self.handle = wrap.__cuda_stream__()[1]
        self.device = device


def _captures_nothing(monkeypatch, unreadable, logged_streams):
    """discover's capture returns an empty graph; the launch log then sees fn's two launches
    (a histogram into A, a reduce of A into B) on `logged_streams`."""
    _without_torch(monkeypatch)
    capture = _EmptyCapture(unreadable)
    monkeypatch.setattr(D, "_capture", lambda fn, stream, device: capture)
    eager = types.SimpleNamespace(handle=EAGER)            # PyTorch's current stream, say
    monkeypatch.setattr(D, "_eager_stream", lambda stream, device: eager)
    monkeypatch.setattr(_core, "Stream", _Wrapped)

    def launch_log(fn, offers, device):
        fn()
        first, second = logged_streams
        kernels = [(0, "histogram", (80, 1, 1), (256, 1, 1), 0, 3, first),
                   (1, "reduce", (1, 1, 1), (32, 1, 1), 0, 2, second)]
        records = [(A, 1 << 20, -1), (B, 4096, -1)]
        uses = [(0, 0, 0, A, 0), (1, 0, 0, A, 0), (1, 1, 0, B, 1)]
        return kernels, records, uses, []
    monkeypatch.setattr(_core, "_launch_log", launch_log)
    return capture, eager


@pytest.mark.parametrize("unreadable", [False, True])
def test_an_empty_capture_goes_to_the_launch_log(monkeypatch, unreadable):
    """fn's kernels went to a stream of its own, so the capture holds nothing (on the H100,
    asking PyTorch's kept graph of nothing for its nodes raised CudaError cudaErrorInvalidValue
    out of discover, tune and advise). Discovery raises no CUDA error: the launch log finds
    the buffers, and each window goes on the stream the kernels really ran on (not the eager
    stream, where a window would never reach them), one Stream per stream."""
    capture, eager = _captures_nothing(monkeypatch, unreadable, [OWN, OWN])
    calls = []
    found = foreign.discover(lambda: calls.append(1))
    assert capture.read == 1 and len(calls) == 2      # the first run, and the logged one
    assert [(c.name, c.address, c.nbytes) for c in found] == [
        ("histogram@0.p0", A, 1 << 20), ("reduce@1.p1", B, 4096)]
    assert all(isinstance(k, foreign.LaunchedKernel) and k.stream == OWN
               for c in found for k in c.nodes)
    carriers = {id(c.carrier) for c in found}
    assert len(carriers) == 1 and found[0].carrier.handle == OWN      # one Stream, fn's own
    assert found[0].carrier is not eager


def test_launches_on_the_eager_stream_keep_its_object(monkeypatch):
    """Launches the log saw on the eager stream (the legacy stream 0 reported as the driver's
    CU_STREAM_LEGACY, 1, too) are windowed on the Stream object the caller holds; a buffer used
    on two streams goes on its first launch's."""
    _, eager = _captures_nothing(monkeypatch, False, [EAGER, OWN])
    found = foreign.discover(lambda: None)
    by = {c.name: c for c in found}
    assert by["histogram@0.p0"].carrier is eager                      # A: first used on EAGER
    assert by["reduce@1.p1"].carrier.handle == OWN
    streams = D.LaunchStreams([types.SimpleNamespace(handle=0)])
    assert streams(1) is streams(0) and streams(0).handle == 0
    assert streams(OWN) is streams(OWN) and streams(2).handle == 2    # per-thread is its own
    # a default stream's handle is the discovery's device's stream, not the current device's
    # (any other stream is wrapped with it too: the core checks that it is on it)
    streams = D.LaunchStreams(device=3)
    assert (streams(1).handle, streams(1).device, streams(2).device) == (1, 3, 3)
    assert streams(OWN).device == 3
    assert [D.stream_key(h) for h in (0, 1, 2, OWN)] == [0, 0, 2, OWN]


def test_buffers_on_a_stream_fn_destroyed_are_left_out(monkeypatch):
    """fn launched a kernel on a stream it made and destroyed before returning (the log saw
    the destroy): that stream's handle is never wrapped (it may be another stream's by now).
    A buffer read there and on a live stream is windowed on the live one; a buffer read only
    there is left out with a warning that names it and the stream. LaunchStreams gives None for a gone handle, even asked twice."""
    _captures_nothing(monkeypatch, False, [OWN, OWN])

    def launch_log(fn, offers, device):     # A first on OWN, then on EAGER; B on OWN only
        fn()
        kernels = [(0, "histogram", (80, 1, 1), (256, 1, 1), 0, 1, OWN),
                   (1, "scale", (80, 1, 1), (256, 1, 1), 0, 1, EAGER),
                   (2, "reduce", (1, 1, 1), (32, 1, 1), 0, 1, OWN)]
        uses = [(0, 0, 0, A, 0), (1, 0, 0, A, 0), (2, 0, 0, B, 1)]
        return kernels, [(A, 1 << 20, -1), (B, 4096, -1)], uses, [OWN]
    monkeypatch.setattr(_core, "_launch_log", launch_log)
    with pytest.warns(RuntimeWarning, match=r"discover: 1 buffer\(s\) \(reduce@2.p0\) "
                      r"are read only by kernels fn launched on stream 0x6000, which fn "
                      r"destroyed before it returned") as said:
        found = foreign.discover(lambda: None)
    assert "pass it as stream=" in str(said[0].message)
    assert [(c.name, c.carrier.handle) for c in found] == [("histogram@0.p0", EAGER)]
    streams = D.LaunchStreams(device=0, gone=[OWN])
    assert streams(OWN) is None and streams(OWN) is None and streams(EAGER).handle == EAGER


def test_an_empty_capture_and_no_log_names_both(monkeypatch):
    """Neither the capture (it holds nothing readable) nor the log (CUPTI taken): a
    DiscoveryError with both reasons, never the CudaError itself."""
    _captures_nothing(monkeypatch, True, [EAGER, EAGER])

    def taken(fn, offers, device):
        raise l2persist.NotSupportedError("cuptiSubscribe failed: another tool holds CUPTI")
    monkeypatch.setattr(_core, "_launch_log", taken)
    with pytest.raises(foreign.DiscoveryError) as e:
        foreign.discover(lambda: None)
    text = str(e.value)
    assert "queued no kernel on the capturing stream" in text and "of its own" in text
    assert "cudaErrorInvalidValue" in text and "another tool holds CUPTI" in text
    assert not isinstance(e.value, l2persist.CudaError)


def test_a_capture_error_that_is_not_cudas_is_not_swallowed(monkeypatch):
    """Only a CUDA error reading the capture counts as an empty capture: a bad candidate still
    names itself."""
    monkeypatch.setattr(D, "_capture", lambda fn, stream, device: types.SimpleNamespace(
        kernel_nodes=[object()], buffers=lambda c: D._offers(c)))
    monkeypatch.setattr(D, "_eager_stream", lambda stream, device: None)
    with pytest.raises(TypeError, match="candidates: 'x' is not a device buffer"):
        foreign.discover(lambda: None, candidates={"x": 42})


def _torch_whose_capture_fails():
    """A stand-in for PyTorch's stream state, default generators and torch.cuda.graph as torch
    writes it (2.5 to 2.11): __exit__ calls capture_end() and only then restores the stream,
    with no try/finally, so a capture_end that raises leaves the capture stream current and
    the generators in capture mode."""
    from types import SimpleNamespace

    class Gen:
        def __init__(self):
            self.state = SimpleNamespace(seed=7, offset=12, capturing=False)

        def clone_state(self):
            return SimpleNamespace(seed=self.state.seed, offset=self.state.offset,
                                   capturing=False)

        def graphsafe_set_state(self, st):
            self.state = st

    cuda = SimpleNamespace(user=SimpleNamespace(cuda_stream=0x1000),
                           side=SimpleNamespace(cuda_stream=0x2000),
                           default_generators=(Gen(), Gen()))
    cuda.current = cuda.user

    class graph:
        def __init__(self, g, stream=None, capture_error_mode="global"):
            self.stream = stream or cuda.side

        def __enter__(self):
            self.prev, cuda.current = cuda.current, self.stream
            for gen in cuda.default_generators:
                gen.state.capturing = True        # capture_prologue

        def __exit__(self, *exc):
            raise RuntimeError("CUDA error: operation failed due to a previous error during "
                               "capture")             # capture_end, before the restores

    cuda.graph = graph
    cuda.CUDAGraph = lambda keep_graph=False: object()
    cuda.ExternalStream = lambda handle: SimpleNamespace(cuda_stream=handle)
    cuda.current_stream = lambda: cuda.current
    cuda.set_stream = lambda s: setattr(cuda, "current", s)
    return SimpleNamespace(cuda=cuda)


@pytest.mark.parametrize("given", [False, True])
def test_a_failed_torch_capture_leaves_torch_as_it_was(monkeypatch, given):
    """discover's capture fails on host-syncing work; afterwards PyTorch's current stream is
    the one it had (not the capture stream: with stream= given, the caller's, which it may
    destroy next) and its default generators are out of capture mode with their seed and
    offset kept (on the H200 torch 2.11 raised "Offset increment outside graph capture
    encountered unexpectedly" at the next randint)."""
    fake = _torch_whose_capture_fails()
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(torch_hooks, "stream_handle", lambda s: 0x3000)
    with pytest.raises(RuntimeError, match="during capture"):
        foreign._capture_torch(lambda: None, object() if given else None)
    assert fake.cuda.current is fake.cuda.user, hex(fake.cuda.current.cuda_stream)
    for gen in fake.cuda.default_generators:
        assert not gen.state.capturing and (gen.state.seed, gen.state.offset) == (7, 12)


def test_the_atlas_torch_graph_capture_leaves_torch_as_it_was(monkeypatch):
    """The atlas study's PyTorch graph workload captures through the same restoring path: a
    failed capture there leaves PyTorch's stream and generators as they were."""
    from types import SimpleNamespace
    from l2persist.studies import atlas
    fake = _torch_whose_capture_fails()
    fake.cuda.stream = lambda st: contextlib.nullcontext()
    fake.cuda.synchronize = lambda: None
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    with pytest.raises(RuntimeError, match="during capture"):
        atlas._torch_graph(fake, SimpleNamespace(handle=0x3000), lambda: None)
    assert fake.cuda.current is fake.cuda.user, hex(fake.cuda.current.cuda_stream)
    for gen in fake.cuda.default_generators:
        assert not gen.state.capturing and (gen.state.seed, gen.state.offset) == (7, 12)


def test_torch_cuda_graph_names_a_bad_argument(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with pytest.raises(TypeError, match="fn: expected a callable to capture, got int"):
        foreign.torch_cuda_graph(3)
    with pytest.raises(RuntimeError, match="PyTorch is not imported"):
        foreign.torch_cuda_graph(lambda: None)


def test_launchlog_diag_reads_exit_codes_and_names_its_rows(tmp_path, monkeypatch):
    """tools/investigations/launchlog-diag (one GPU call checking the launch log against the later-PyTorch
    crash): its verdicts from exit codes (a signal as Python reports it, or as a shell's 128 + n)
    and from an "ok" line wherever it is (the log's counts on stderr follow it); a pytest run
    that skipped a test is not ok; a row that fails is kept with its exit code and log, one past
    the budget is not started, and one past its timeout is killed with its children."""
    import signal
    import time
    import tool_script
    diag = tool_script.load("tools/investigations/launchlog-diag")
    assert diag.verdict(-signal.SIGSEGV, "") == "CRASH SIGSEGV"
    assert diag.verdict(128 + signal.SIGSEGV, "") == "CRASH SIGSEGV"
    assert diag.verdict(-signal.SIGABRT, "") == "CRASH SIGABRT"
    assert diag.verdict(None, "").startswith("TIMEOUT")
    assert diag.verdict(0, "x\nok\n") == "ok"
    assert diag.verdict(0, "log 0: 5 launches\nok\nl2persist launch log 1: driver launches "
                           "seen 5; logged 5, dropped 0\n") == "ok"
    assert diag.verdict(0, "2 passed in 3s") == "ok"
    assert diag.verdict(0, "2 skipped in 1s").startswith("SKIPPED")
    assert diag.verdict(0, "1 passed, 1 skipped in 9s\nok\n").startswith("SKIPPED")
    assert diag.verdict(0, "log 0: 5 launches\n").startswith("ok?")
    assert diag.verdict(1, "Traceback\nValueError: no\n") == "FAIL rc=1: ValueError: no"
    assert set(diag.VARIANTS) == {"control", "capture", "none", "raw", "keep", "finalize",
                                  "2cupti", "full", "full-x20", "discover", "pytest-two",
                                  "pytest-later", "later-t1", "later-t2", "later-trivial",
                                  "torch-leak"}
    compile(diag.WORK, "WORK", "exec")
    compile(diag.LATER, "LATER", "exec")             # pytest.main, then the stress: one process
    assert "pytest.main" in diag.LATER and diag.STRESS in diag.LATER
    assert all(t in diag.LATER for t in diag.TWO)
    for row, tests in (("later-t1", diag.TWO[:1]), ("later-t2", diag.TWO[1:]),
                       ("later-trivial", diag.TRIVIAL), ("torch-leak", [])):
        code = diag.VARIANTS[row][1][1]              # each: its tests only, then the stress
        compile(code, row, "exec")
        assert code.endswith(diag.STRESS) and all(t in code for t in tests)
        assert not any(t in code for t in diag.TWO + diag.TRIVIAL if t not in tests), row
    monkeypatch.setitem(diag.VARIANTS, "fails", ("a row that fails", ["-c", "raise SystemExit(3)"],
                                                 {}, 30))
    name, rc, v, _ = diag.run_variant("fails", tmp_path, time.monotonic() + 60)
    assert (name, rc) == ("fails", 3) and v.startswith("FAIL rc=3"), v
    assert (tmp_path / "fails.log").read_text().count("rc: 3") == 1
    name, rc, v, _ = diag.run_variant("fails", tmp_path, time.monotonic() + 5)
    assert rc is None and v == "not run (budget)"
    t0 = time.monotonic()            # a grandchild holding the pipes does not outlive the limit
    rc, out = diag.run_group(["bash", "-c", "echo started; sleep 30 & sleep 30"], 1)
    assert rc is None and "started" in out and time.monotonic() - t0 < 10


@pytest.mark.parametrize("torch_in_use,log_ok,order,fn_runs", [
    (True, True, ["log"], 1),                 # PyTorch: the one real run is logged
    (True, False, ["log", "capture"], 1),     # no log (CUPTI held): fn plain, then a capture
    (False, True, ["capture"], 1),            # no PyTorch: its capture keeps the addresses
])
def test_eager_discovery_reads_the_calls_own_addresses_under_pytorch(monkeypatch, torch_in_use,
                                                                     log_ok, order, fn_runs):
    """Under PyTorch an output fn allocates per call has another address in a capture (the
    graph's private pool) than in fn's calls: discovery reads the launches of fn's one real run
    there, and fn still runs exactly once for real (a capture runs nothing)."""
    from l2persist.process import discover as d
    calls, runs = [], []

    def capture(fn, stream, candidates, device):
        calls.append("capture")
        return [], None

    def logged(fn, stream, candidates, device):
        calls.append("log")
        if not log_ok:
            return None, "CUPTI's subscriber is taken", False
        fn()
        return [], None, True
    monkeypatch.setattr(d, "_torch_in_use", lambda: object() if torch_in_use else None)
    if torch_in_use:   # PyTorch imported is what decides (fn may be the first to use CUDA)
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace())
    else:
        monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(d, "_from_capture", capture)
    monkeypatch.setattr(d, "_logged_run", logged)
    assert d.discover(lambda: runs.append(1)) == []
    assert calls == order and len(runs) == fn_runs


def test_owner_handle_says_which_graph_a_torch_owner_holds_now():
    """The binding compares this token (its owner_handle hook), read at the borrow, before it
    touches a borrowed graph: a PyTorch CUDAGraph's raw graph as an int (0 once reset()
    destroyed it: raw_cuda_graph() raises RuntimeError there) and its count of resets, so that
    a capture again at the old address is another token; None for an owner that cannot be
    asked (an int, a builder); any other error of the owner's passes through. Counting wraps
    the instance's reset only, holds the graph weakly, and is installed once."""
    import weakref

    from l2persist.process import torch as T

    class CUDAGraph:
        handle = 0x1234

        def raw_cuda_graph(self):
            if self.handle is None:
                raise RuntimeError("CUDAGraph::raw_cuda_graph called on an empty graph")
            if self.handle == -1:
                raise KeyError("not PyTorch's words")
            return self.handle

        def reset(self):
            self.handle = None
    CUDAGraph.__module__ = "torch.cuda.graphs"
    g = CUDAGraph()
    T.count_resets(g)
    T.count_resets(g)                                  # once
    assert T.owner_handle(g) == (0x1234, 0)
    g.reset()
    assert T.owner_handle(g) == (0, 1)
    g.handle = 0x1234                                  # captured again at the same address
    assert T.owner_handle(g) == (0x1234, 1) != (0x1234, 0)
    g.handle = -1
    with pytest.raises(KeyError):
        T.owner_handle(g)
    assert T.owner_handle(0x1234) is None and T.owner_handle(object()) is None
    other = CUDAGraph()
    assert T.owner_handle(other) == (0x1234, 0)       # never counted: the class's reset
    ref = weakref.ref(g)
    del g
    assert ref() is None          # freed at once: the wrapper makes no cycle (nor needs gc)
