"""l2persist.process without a GPU: one home per library (PyTorch's patches in process/torch.py,
CuPy in process/cupy.py, discovery in process/discover.py, re-exported from l2persist.foreign
under the names it always had), and the hooks through which the binding reaches the package
without importing it."""

import re
import sys
import types
from pathlib import Path

import pytest

import l2persist
from l2persist import _core, foreign, tax
from l2persist import _format
from l2persist.process import cupy as cupy_hooks
from l2persist.process import discover as D
from l2persist.process import torch as torch_hooks

ROOT = Path(__file__).resolve().parent.parent


# ---- the binding imports nothing from the package ------------------------------------------

def test_the_binding_imports_nothing_from_the_package():
    """No C file of the extension imports a module of the package: what it needs from it comes
    through the hooks the package registers (a graph.c -> foreign and device.c -> tax call
    tied the binding to the package's layout)."""
    imports = re.compile(r'PyImport_\w+\(\s*"l2persist')
    found = [f"{p.name}:{i + 1}" for p in sorted((ROOT / "csrc" / "py").glob("*.[ch]"))
             for i, line in enumerate(p.read_text().splitlines()) if imports.search(line)]
    assert found == []


def test_the_package_registers_every_hook_at_import():
    hooks = _core._hooks
    assert hooks == {"owner_changed": foreign._owner_changed,
                     "owner_handle": foreign._torch.owner_handle,
                     "graph_buffers": D.graph_buffers, "node_group": D.NodeGroup,
                     "set_aside_tax": tax.set_aside_tax, "record_repr": _format.record_repr,
                     "record_html": _format.record_html}


def test_set_hooks_checks_every_hook_before_keeping_any():
    before = dict(_core._hooks)
    with pytest.raises(TypeError, match="record_html: expected a callable or None, got int"):
        _core._set_hooks(owner_changed=print, record_html=5)
    assert _core._hooks == before                    # the good one was not kept either
    with pytest.raises(TypeError, match="unexpected keyword|no_such"):
        _core._set_hooks(no_such=print)
    with pytest.raises(TypeError):
        _core._set_hooks(print)                      # keyword-only
    _core._set_hooks()                               # None everywhere: nothing changes
    assert _core._hooks == before
    try:
        _core._set_hooks(owner_changed=print)
        assert _core._hooks["owner_changed"] is print
        assert {k: v for k, v in _core._hooks.items() if k != "owner_changed"} == {
            k: v for k, v in before.items() if k != "owner_changed"}
    finally:
        _core._set_hooks(owner_changed=before["owner_changed"])
    assert _core._hooks == before


# ---- one home per library, the old names kept -------------------------------------------------

def test_foreign_re_exports_the_process_names():
    for name in ("discover", "DiscoveryError", "BufferRecord", "BufferTable", "BufferUse",
                 "NodeGroup", "Candidate", "LaunchedKernel", "owner_sees_windows"):
        assert getattr(foreign, name) is getattr(D, name), name
    for name in ("keep_graphs", "window_captures", "torch_cuda_graph", "late_bound"):
        assert getattr(foreign, name) is getattr(torch_hooks, name), name
    assert l2persist.keep_graphs is torch_hooks.keep_graphs
    assert l2persist.window_captures is torch_hooks.window_captures
    assert foreign._graph_buffers is D.graph_buffers           # tools and older callers
    assert foreign._capture_torch is D._capture_torch
    from l2persist import studies
    assert studies.cupy_stream is cupy_hooks.cupy_stream       # its old home
    assert set(l2persist.process.__all__) == {"cupy", "discover", "torch"}


def test_no_patch_of_pytorch_outside_the_process_package():
    """What touches PyTorch has one home: no module outside l2persist/process/ assigns to
    CUDAGraph's methods (foreign.py and tune.py patched it four times between them)."""
    patch = re.compile(r"\.(replay|capture_begin|capture_end|__new__|__init__)\s*=(?!=)")
    offenders = []
    for p in sorted((ROOT / "l2persist").rglob("*.py")):
        if "process" in p.relative_to(ROOT / "l2persist").parts or \
                "CUDAGraph" not in p.read_text():
            continue
        offenders += [f"{p.relative_to(ROOT)}:{i + 1}"
                      for i, line in enumerate(p.read_text().splitlines()) if patch.search(line)]
    assert offenders == []


# ---- PyTorch's patches, on a stand-in for torch -----------------------------------------------

def _fake_torch(monkeypatch, stream=0x7000):
    class CUDAGraph:
        made = []

        def __new__(cls, keep_graph=False):
            self = object.__new__(cls)
            cls.made.append(("new", keep_graph))
            return self

        def __init__(self, keep_graph=False):
            type(self).made.append(("init", keep_graph))

        def replay(self):
            return "replayed"

        def raw_cuda_graph(self):
            return 0x1234
    CUDAGraph.__module__ = "torch.cuda.graphs"
    cuda = types.SimpleNamespace(CUDAGraph=CUDAGraph,
                                 current_stream=lambda: types.SimpleNamespace(cuda_stream=stream))
    fake = types.SimpleNamespace(cuda=cuda)
    monkeypatch.setitem(sys.modules, "torch", fake)
    return CUDAGraph


def test_keep_graphs_forces_keep_graph_and_restores_the_class(monkeypatch):
    cls = _fake_torch(monkeypatch)
    new, init = cls.__dict__["__new__"], cls.__dict__["__init__"]
    with torch_hooks.keep_graphs():
        cls()
        cls(keep_graph=False)
    assert cls.made == [("new", True), ("init", True)] * 2
    assert cls.__dict__["__new__"] is new and cls.__dict__["__init__"] is init
    cls.made.clear()
    cls()
    assert cls.made == [("new", False), ("init", False)]


def test_replays_noted_sees_bound_replays_and_restores(monkeypatch):
    cls = _fake_torch(monkeypatch, stream=0xABC0)
    g = cls()
    original = cls.replay
    with torch_hooks.replays_noted() as seen:
        assert torch_hooks.late_bound(g.replay)() == "replayed"   # bound before the patch
        g.replay()
    assert [(graph is g, s.cuda_stream) for graph, s in seen] == [(True, 0xABC0)] * 2
    assert cls.replay is original
    with pytest.raises(KeyError):                          # restored on an exception too
        with torch_hooks.replays_noted():
            raise KeyError("fn")
    assert cls.replay is original
    monkeypatch.delitem(sys.modules, "torch")
    with torch_hooks.replays_noted() as seen:              # no PyTorch: nothing patched
        pass
    assert seen == []


def test_torch_owner_helpers(monkeypatch):
    cls = _fake_torch(monkeypatch)
    g = cls()
    assert torch_hooks.is_torch_graph(g) and not torch_hooks.is_torch_graph(object())
    instantiated = []
    g.instantiate = lambda: instantiated.append(1)
    assert torch_hooks.reinstantiate(g) and instantiated == [1]
    assert not torch_hooks.reinstantiate(0x1234)                  # a raw handle: nothing
    graph = types.SimpleNamespace(owner=g)
    assert D.owner_sees_windows(graph) and D.owner_sees_windows(types.SimpleNamespace(owner=None))
    assert not D.owner_sees_windows(types.SimpleNamespace(owner=0x1234))
    foreign._owner_changed(graph)                                  # the hook: instantiate again
    assert instantiated == [1, 1]

    class NoRawGraph(cls):
        def raw_cuda_graph(self):
            raise RuntimeError("You cannot access the raw cudaGraph_t instance unless ...")
    with pytest.raises(ValueError, match="keeps no raw graph.*keep_graphs"):
        torch_hooks.borrow(NoRawGraph())


# ---- CuPy's, on a stand-in for cupy -----------------------------------------------------------

def test_cupy_helpers(monkeypatch):
    h = cupy_hooks.StreamHandle(0xBEEF)
    assert h.__cuda_stream__() == (0, 0xBEEF) and "0xbeef" in repr(h)
    made = []

    class Stream:
        @staticmethod
        def from_external(obj):
            made.append(obj.__cuda_stream__()[1])
            return _Ctx(made)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=Stream))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with cupy_hooks.on_stream(0x4000):
        assert made == [0x4000, "entered"]
    assert made == [0x4000, "entered", "exited"]
    monkeypatch.delitem(sys.modules, "cupy")
    with cupy_hooks.on_stream(0x4000):                    # no CuPy in use: nothing
        pass
    assert len(made) == 3

    class Graph:
        graph = 0
    Graph.__module__ = "cupy.cuda.graph"
    assert cupy_hooks.is_cupy(Graph()) and not cupy_hooks.is_cupy(h)
    with pytest.raises(ValueError, match="keeps only its executable"):
        cupy_hooks.graph_handle(Graph())
    Graph.graph = 0x77
    assert cupy_hooks.graph_handle(Graph()) == 0x77

    class Function:
        ptr = 0x1111

    class RawKernel:
        kernel = Function()
    assert cupy_hooks.function_handle(RawKernel()) == 0x1111
    assert cupy_hooks.function_handle(Function()) == 0x1111


class _Ctx:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("entered")

    def __exit__(self, *exc):
        self.log.append("exited")
        return False


# ---- where fn's work ran, as the timing reads it ----------------------------------------------

def test_work_streams_from_the_launch_log_and_the_replays(monkeypatch):
    """One run of fn gives both: the replays' PyTorch streams and each launch's stream, with
    the kernels' names for messages; the legacy stream as the driver names it (1) is 0."""
    cls = _fake_torch(monkeypatch, stream=0xABC0)
    g = cls()
    runs = []

    def fn():
        runs.append(1)
        g.replay()

    def launch_log(run, offers, device):
        assert offers == []                               # nothing to name: streams only
        run()
        return ([(0, "k" * 60, (1, 1, 1), (32, 1, 1), 0, 1, 1),
                 (1, "b", (1, 1, 1), (1, 1, 1), 0, 1, 0x9000),
                 (2, "c", (1, 1, 1), (1, 1, 1), 0, 1, 0)], [], [], [0x9000])
    monkeypatch.setattr(_core, "_launch_log", launch_log)
    w = D.work_streams(fn, None)
    assert runs == [1] and w.log_error is None
    assert [s.cuda_stream for s in w.replays] == [0xABC0]
    assert w.launch_streams() == [0, 0x9000] and w.gone == {0x9000}   # fn destroyed it
    assert w.kernels_on(0) == "k" * 39 + "…, c" and w.kernels_on(0x9000) == "b"


def test_work_streams_without_a_log(monkeypatch):
    """The log cannot be made (CUPTI taken): fn runs once all the same, and says why; a log
    that fails after fn ran does not run fn again; fn's own error passes through."""
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    runs = []

    def taken(run, offers, device):
        raise l2persist.NotSupportedError("cuptiSubscribe failed: another tool holds CUPTI")
    monkeypatch.setattr(_core, "_launch_log", taken)
    w = D.work_streams(lambda: runs.append(1), None)
    assert runs == [1] and w.launches == [] and "another tool" in str(w.log_error)

    def scan_fails(run, offers, device):
        run()
        raise l2persist.CudaError("cuPointerGetAttribute failed")
    monkeypatch.setattr(_core, "_launch_log", scan_fails)
    w = D.work_streams(lambda: runs.append(2), None)
    assert runs == [1, 2] and isinstance(w.log_error, l2persist.CudaError)

    def log(run, offers, device):
        run()
        return [], [], [], []
    monkeypatch.setattr(_core, "_launch_log", log)

    def fails():
        runs.append(3)
        raise ZeroDivisionError("fn's own")
    with pytest.raises(ZeroDivisionError, match="fn's own"):
        D.work_streams(fails, None)
    assert runs == [1, 2, 3]
