"""Other libraries' CUDA graphs and kernels: borrow them, find their buffers, window their nodes.

``as_graph(obj)`` gives an l2persist :class:`~l2persist.Graph` over a graph another library
owns (never destroying it), whose kernel nodes carry per-node access policy windows.
``Graph.buffers(candidates=...)`` lists the buffers its kernels use (the scan is the C core's:
``csrc/core/l2p_graphscan.h``). ``discover(fn)`` finds, for the tuner, the buffers a callable's
kernels use and a carrier per buffer on which a window reaches those kernels.

Where a window set on a borrowed graph takes effect (measured on the H100, driver 580, torch
2.11; the GPU tests in tests/test_foreign_gpu.py check it):

* **PyTorch** ``torch.cuda.CUDAGraph(keep_graph=True)``: the window is set on the raw graph's
  nodes (``raw_cuda_graph()``), then l2persist calls the owner's ``instantiate()``, which
  destroys PyTorch's executable and instantiates the raw graph again: the owner's next
  ``g.replay()`` runs with the window (0.869 ms against 1.679 ms without; setting it to None the
  same way removes it). Without ``keep_graph=True`` PyTorch keeps no raw graph: ``as_graph``
  says so. Setting an attribute after instantiation and calling ``cuGraphExecUpdate`` reports
  success and changes nothing, so l2persist never relies on it.
* **CuPy** ``cupy.cuda.Graph``: CuPy destroys the ``cudaGraph_t`` right after instantiating
  it and keeps only the executable, whose nodes the driver can neither list nor window:
  ``as_graph`` refuses and says to capture the CuPy calls on an l2persist stream instead.
* **cuda.core** ``GraphBuilder``: after ``end_building()`` the builder holds the
  ``CUgraph``; ``as_graph(builder)`` borrows it, and every ``builder.complete()`` made after
  the windows were set instantiates them (a ``cuda.core`` ``Graph`` already completed is an
  executable and is refused like one). Not yet measured on a GPU.
* **Raw handles**: an int (or a cuda.bindings ``CUgraph``) is taken as a ``cudaGraph_t`` that
  the caller vouches for. Windows are set on its nodes; an executable made *after* that (by the
  caller, or by ``Graph.launch``) has them; one made before does not.
* A bare ``cudaGraphExec_t`` cannot be windowed at all: the driver gives no way back from an
  executable to its nodes' attributes.

Persisting lines outlive the graph that made them until ``l2persist.reset_persisting_l2()``:
reset between trials.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from . import _core
from ._core import Graph
from ._format import human_bytes, node_label, short_text as _short

__all__ = ["as_graph", "discover", "launch", "keep_graphs", "window_captures", "BufferRecord",
           "BufferTable", "NodeGroup", "Candidate", "DiscoveryError", "torch_cuda_graph"]


class DiscoveryError(RuntimeError):
    """fn could not be captured into a CUDA graph, so its buffers cannot be found."""


# ---- owners -------------------------------------------------------------------------------

def _module_of(obj: Any) -> str:
    return type(obj).__module__ or ""


def _is_torch_graph(obj: Any) -> bool:
    return _module_of(obj).startswith("torch") and hasattr(obj, "raw_cuda_graph")


def _torch_device(device):
    if device is not None:
        return device
    torch = sys.modules.get("torch")
    return torch.cuda.current_device() if torch is not None else None


def as_graph(obj: Any = None, *, exec: Any = None, device: Any = None) -> Graph:
    """An l2persist Graph over another library's CUDA graph, borrowed (never destroyed).

    ``obj``: a ``torch.cuda.CUDAGraph`` made with ``keep_graph=True`` after its capture ended;
    a ``cudaGraph_t`` as an int or a cuda.bindings ``CUgraph``; an l2persist Graph (returned as
    is). ``exec=``: a ``cudaGraphExec_t`` alone is refused (its nodes cannot be windowed).
    The Graph lists ``kernel_nodes`` (name, grid, block), reads and sets per-node windows
    (``node.access_policy_window``, ``set_access_policy_window(w, nodes=...)``,
    ``nodes_window(nodes)``), and ``buffers()``. For a PyTorch owner each change re-instantiates
    the owner so that its own ``replay()`` has the windows; see the module's docstring for the
    other owners.
    """
    if isinstance(obj, Graph):
        return obj
    if obj is None:
        if exec is not None:
            raise ValueError(
                "as_graph: a cudaGraphExec_t alone cannot carry windows: the driver can neither "
                "list an executable graph's nodes nor set their attributes (and cuGraphExecUpdate "
                "was measured to apply no window). Pass the cudaGraph_t it was instantiated from "
                "and instantiate again after setting windows")
        raise TypeError("as_graph: obj is required (a torch.cuda.CUDAGraph, a cudaGraph_t int)")
    if _is_torch_graph(obj):
        try:
            handle = int(obj.raw_cuda_graph())
        except RuntimeError as e:
            raise ValueError(
                "as_graph: this torch.cuda.CUDAGraph keeps no raw graph, so its nodes cannot "
                "be windowed after capture. Capture it inside `with l2persist.keep_graphs():` "
                "(every torch.cuda.CUDAGraph made there, by torch.cuda.graph, "
                "make_graphed_callables or torch.compile(mode='reduce-overhead'), keeps its "
                "raw graph), or put the window on while it is captured with "
                f"`with l2persist.window_captures(window):` ({e})") from e
        return _core._borrow_graph(handle, _torch_device(device), obj)
    mod, name = _module_of(obj), type(obj).__name__
    if mod.startswith("cupy"):
        handle = int(getattr(obj, "graph", 0) or 0)
        if not handle:
            raise ValueError(
                "as_graph: this CuPy graph keeps only its executable (CuPy destroys the "
                "cudaGraph_t after instantiating it), whose nodes cannot be windowed. Capture "
                "the same calls with l2persist instead: `with s.capture() as g:` on an "
                "l2persist.Stream s, running them inside `with cupy.cuda.Stream.from_external(s):`")
        return _core._borrow_graph(handle, device, obj)
    if mod.startswith("cuda.core") and name == "GraphBuilder":
        mnff = getattr(obj, "_mnff", None)
        handle = getattr(mnff, "graph", None)
        if not handle:
            raise ValueError("as_graph: this cuda.core GraphBuilder holds no graph yet: call "
                             "end_building() first (and complete() after setting windows)")
        return _core._borrow_graph(int(handle), device, obj)
    if mod.startswith("cuda.core") and name == "Graph":
        raise ValueError(
            "as_graph: a cuda.core Graph is an executable (cudaGraphExec_t), whose nodes cannot "
            "be windowed: borrow its GraphBuilder after end_building() with as_graph(builder), "
            "set the windows, then call builder.complete() for an executable that has them")
    if "Exec" in name:
        return as_graph(None, exec=obj)
    if isinstance(obj, bool):
        raise TypeError("as_graph: expected a graph, got bool")
    if isinstance(obj, int) or name in ("CUgraph", "cudaGraph_t"):
        return _core._borrow_graph(int(obj), device, obj)
    raise TypeError(
        f"as_graph: expected a torch.cuda.CUDAGraph(keep_graph=True), a cudaGraph_t (int or "
        f"CUgraph) or an l2persist Graph, got {mod}.{name}")


def _torch_graph_class():
    torch = sys.modules.get("torch")
    if torch is None:
        import torch  # noqa: F811 - the caller asked for PyTorch's graphs
    return torch, torch.cuda.CUDAGraph


@contextlib.contextmanager
def keep_graphs():
    """Every ``torch.cuda.CUDAGraph`` made in the block keeps its raw graph, as if made with
    ``keep_graph=True``: the default ``torch.cuda.CUDAGraph()``, ``torch.cuda.graph``,
    ``torch.cuda.make_graphed_callables`` and ``torch.compile(mode="reduce-overhead")`` all
    make theirs through that class. ``as_graph``, discovery, ``tune``, ``advise`` and Plans
    can then window their kernel nodes after capture (PyTorch instantiates a kept graph at its
    first replay). Servers capture at start: wrap the warm-up / capture phase in it."""
    _, cls = _torch_graph_class()
    # PyTorch passes keep_graph through __new__ (its Python class) and the pybind base takes
    # it in __init__: both see True here, whatever the caller passed.
    saved = {k: cls.__dict__[k] for k in ("__new__", "__init__") if k in cls.__dict__}
    make, init = cls.__new__, cls.__init__

    def __new__(klass, keep_graph=False, *args, **kwargs):
        return make(klass, True, *args, **kwargs)

    def __init__(self, keep_graph=False, *args, **kwargs):
        init(self, True, *args, **kwargs)
    cls.__new__ = staticmethod(__new__)
    cls.__init__ = __init__
    try:
        yield
    finally:
        for k in ("__new__", "__init__"):
            if k in saved:
                setattr(cls, k, saved[k])
            else:
                delattr(cls, k)


@contextlib.contextmanager
def window_captures(window):
    """Every PyTorch CUDA graph captured in the block gets ``window`` (an AccessPolicyWindow)
    on its kernel nodes: the window is put on the capture stream right before the capture
    begins, where the driver copies it into each captured kernel node (measured on the
    H200), and the stream's own window is put back when the capture ends. It covers the
    default ``torch.cuda.CUDAGraph()`` (which keeps no raw graph to window later),
    ``make_graphed_callables`` and ``torch.compile(mode="reduce-overhead")``. The window
    persists lines under whatever set-aside is installed when the graph replays (a Plan, or
    ``Device.persisting_l2``)."""
    torch, cls = _torch_graph_class()
    begin, end = cls.capture_begin, cls.capture_end
    active = {}

    def capture_begin(self, *a, **k):
        stream = _core.Stream(wrap=torch.cuda.current_stream())  # the capture stream
        scope = stream.access_policy(window)
        scope.__enter__()
        active[id(self)] = scope
        try:
            return begin(self, *a, **k)
        except BaseException:
            active.pop(id(self)).__exit__(None, None, None)
            raise

    def capture_end(self, *a, **k):
        try:
            return end(self, *a, **k)
        finally:
            scope = active.pop(id(self), None)
            if scope is not None:
                scope.__exit__(None, None, None)
    cls.capture_begin, cls.capture_end = capture_begin, capture_end
    try:
        yield window
    finally:
        cls.capture_begin, cls.capture_end = begin, end
        for scope in active.values():  # a capture left open by an exception
            scope.__exit__(None, None, None)


def _owner_changed(graph: Graph) -> None:
    """A window on a borrowed graph's node changed: make the owner's next replay see it.

    Called by the C layer after every change. PyTorch: instantiate() again (it destroys its
    executable and instantiates the raw graph, attributes included). Other owners: nothing can
    reach their executable; l2persist's own launch() instantiates afresh."""
    owner = graph.owner
    if owner is not None and _is_torch_graph(owner):
        owner.instantiate()


def owner_sees_windows(graph: Graph) -> bool:
    """Whether windows set on `graph`'s nodes reach its owner's own replay (True for PyTorch
    and for graphs l2persist captured; False for raw handles, whose executable is the
    caller's)."""
    owner = graph.owner
    return owner is None or _is_torch_graph(owner)


# ---- candidates offered by the caller -----------------------------------------------------

@dataclass
class _Offer:
    name: str
    obj: Any
    ptr: int
    nbytes: int


def _address_of(obj: Any) -> tuple[int, int]:
    """(ptr, nbytes) of a buffer-like object, through l2persist's own import."""
    if isinstance(obj, _core.DeviceBuffer):
        return obj.ptr, obj.nbytes
    b = _core.as_buffer(obj)
    return b.ptr, b.nbytes


def _plain_tensor(t: Any) -> Any:
    """A tensor that requires grad refuses __cuda_array_interface__; its detached view has the
    same memory (a model's parameters are the usual candidates)."""
    return t.detach() if getattr(t, "requires_grad", False) else t


def late_bound(fn: Callable[[], Any]) -> Callable[[], Any]:
    """fn, or for a bound ``CUDAGraph.replay`` (``g.replay`` passed as is) a callable that
    looks the method up at each call, so that a replay noted by patching the class is seen."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and getattr(fn, "__name__", "") == "replay" and _is_torch_graph(owner):
        return lambda: type(owner).replay(owner)
    return fn


def _named(candidates: Any) -> list[tuple[str, Any]]:
    if candidates is None:
        return []
    if isinstance(candidates, dict):
        return [(str(k), _plain_tensor(v)) for k, v in candidates.items()]
    if hasattr(candidates, "named_parameters") and hasattr(candidates, "named_buffers"):
        pairs = list(candidates.named_parameters()) + list(candidates.named_buffers())
        return [(n, _plain_tensor(t)) for n, t in pairs if getattr(t, "is_cuda", True)]
    if isinstance(candidates, (list, tuple)):
        out = []
        for i, c in enumerate(candidates):
            if isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str):
                out.append(c)
            else:
                out.append((f"candidates[{i}]", c))
        return out
    return [("candidate", candidates)]


def _offers(candidates: Any) -> list[_Offer]:
    """Normalise candidates= (tensors, a module's parameters and buffers, a dict name ->
    tensor, l2persist buffers, (name, tensor) pairs) into named address ranges."""
    offers = []
    for name, obj in _named(candidates):
        try:
            ptr, nbytes = _address_of(obj)
        except (TypeError, ValueError) as e:
            raise TypeError(f"candidates: {name!r} is not a device buffer ({e})") from e
        if nbytes:
            offers.append(_Offer(name, obj, ptr, nbytes))
    return offers


class _RawRange:
    """A device address range as a CUDA-array-interface object (bytes), for l2persist's view."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}


# ---- buffers of a graph -------------------------------------------------------------------

@dataclass(frozen=True)
class BufferUse:
    node: int        # kernel node position
    param: int       # parameter index
    offset: int      # byte offset of the pointer inside that parameter
    address: int     # the address found there


@dataclass
class BufferRecord:
    """One buffer the graph's kernels use: an offered tensor, or an allocation no offer
    covers (then the whole allocation, which may hold several tensors)."""
    address: int
    size: int
    name: str
    nodes: tuple          # KernelNode objects that use it
    uses: tuple           # BufferUse records
    source: Any = None    # the offered object, or None
    allocation: bool = False
    _view: Any = field(default=None, repr=False)

    @property
    def nbytes(self) -> int:
        return self.size

    @property
    def buffer(self):
        """An l2persist DeviceBuffer over the range (borrowed), for AccessPolicyWindow."""
        if self._view is None:
            src = self.source
            if isinstance(src, _core.DeviceBuffer):
                self._view = src
            elif src is not None:
                self._view = _core.as_buffer(src)
            else:
                self._view = _core.as_buffer(_RawRange(self.address, self.size))
        return self._view


class BufferTable(list):
    """BufferRecords with a text table and an HTML view."""

    _HEAD = ("name", "address", "size", "nodes", "param@offset")

    def _rows(self):
        for r in self:
            nodes = ", ".join(node_label(n) for n in r.nodes)
            where = ", ".join(sorted({f"{u.node}.p{u.param}@{u.offset}" for u in r.uses}))
            yield (r.name + (" (allocation)" if r.allocation else ""), f"0x{r.address:x}",
                   human_bytes(r.size), nodes, where)

    def table(self) -> str:
        rows = [self._HEAD, *self._rows()]
        widths = [max(len(str(row[i])) for row in rows) for i in range(len(self._HEAD))]
        return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
                         for row in rows)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        import html
        head = "".join(f"<th>{h}</th>" for h in self._HEAD)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                       for row in self._rows())
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _discovered_name(nodes, uses, address: int) -> str:
    """A name for a buffer no offer names: the first kernel argument that points into it,
    ``kernel@node.pParam`` (``+offset`` inside a struct argument). Unlike its address, it is the
    same in the next process for the same work, so a saved Plan's entries can be matched by
    discovering again."""
    if not uses:
        return f"buffer@0x{address:x}"
    node, param, offset = min(u[:3] for u in uses)
    kernel = _short(nodes[node].name or "kernel", 40) if node < len(nodes) else "kernel"
    return f"{kernel}@{node}.p{param}" + (f"+{offset}" if offset else "")


def _graph_buffers(graph: Graph, candidates: Any = None) -> BufferTable:
    """Graph.buffers(): the C scan, named and grouped for people."""
    offers = _offers(candidates)
    kernels, records, uses = graph._scan([(o.ptr, o.nbytes) for o in offers])
    nodes = graph.kernel_nodes
    table = BufferTable()
    for index, (address, size, offer) in enumerate(records):
        mine = [u for u in uses if u[4] == index]
        positions = sorted({u[0] for u in mine})
        o = offers[offer] if offer >= 0 else None
        table.append(BufferRecord(
            address=address, size=size,
            name=o.name if o else _discovered_name(nodes, mine, address),
            nodes=tuple(nodes[p] for p in positions),
            uses=tuple(BufferUse(u[0], u[1], u[2], u[3]) for u in mine),
            source=o.obj if o else None, allocation=o is None))
    return table


# ---- carriers -----------------------------------------------------------------------------

class NodeGroup:
    """A group of a graph's kernel nodes carrying one window: the tuner's per-node carrier.

    Setting ``access_policy_window`` sets it on every node of the group (None disables) and
    makes it effective for the owner's next replay where the owner allows (see
    ``owner_sees_windows``)."""

    def __init__(self, graph: Graph, nodes: Iterable):
        if not isinstance(graph, Graph):
            raise TypeError(f"graph: expected an l2persist Graph, got {type(graph).__name__}")
        self.graph = graph
        if not isinstance(nodes, (list, tuple)):
            try:
                nodes = list(nodes)
            except TypeError:
                raise TypeError(f"nodes: expected a sequence of KernelNode or int positions, "
                                f"got {type(nodes).__name__}") from None
        self.nodes = tuple(graph._select_nodes(nodes))  # the one check: graph.c's

    @property
    def access_policy_window(self):
        """The window of the group's first node (they are set together); None when off."""
        return self.nodes[0].access_policy_window

    @access_policy_window.setter
    def access_policy_window(self, window) -> None:
        self.graph.set_access_policy_window(window, nodes=[n.position for n in self.nodes])

    @property
    def effective_on_owner(self) -> bool:
        return owner_sees_windows(self.graph)

    def __repr__(self) -> str:
        names = ", ".join(node_label(n, 24) for n in self.nodes)
        return f"NodeGroup([{names}])"


# ---- discovery for the tuner --------------------------------------------------------------

@dataclass
class Candidate:
    """A buffer worth considering for a window, and where a window on it goes.

    ``carrier``: where its window goes. For the nodes of a PyTorch graph that fn replays, a
    NodeGroup on that graph (the owner's own replay sees it). For eager work (fn launches
    kernels itself), the Stream fn's kernels run on: a window on a stream reaches every kernel
    launched on it afterwards, while a window on the nodes of a private capture would never
    reach fn's own launches. ``nodes`` then names the kernels that use the buffer (from the
    capture), which all get the stream's one window. Either way the window reaches fn's
    own work, so fn itself is what the tuner times."""
    name: str
    nbytes: int
    address: int
    nodes: tuple
    carrier: Any  # a NodeGroup, or a Stream
    record: BufferRecord | None = None
    source: Any = None

    @property
    def buffer(self):
        if self.record is not None:
            return self.record.buffer
        src = self.source
        return src if isinstance(src, _core.DeviceBuffer) else _core.as_buffer(src)


def _replayed_torch_graphs(fn: Callable[[], Any]) -> list:
    """Run fn once for real, noting the torch CUDAGraphs it replays (a replay cannot be
    captured: PyTorch refuses, and leaves a raw capture active)."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch.cuda, "CUDAGraph"):
        fn()
        return []
    cls = torch.cuda.CUDAGraph
    original = cls.replay
    seen: dict[int, Any] = {}
    fn = late_bound(fn)

    def replay(self, *a, **k):
        seen.setdefault(id(self), self)
        return original(self, *a, **k)

    cls.replay = replay
    try:
        fn()
    finally:
        cls.replay = original
    torch.cuda.synchronize()
    return list(seen.values())


def _foreign_stream_contexts(handle: int):
    """Make CuPy's current stream the capturing one, where CuPy is in use."""
    import contextlib
    stack = contextlib.ExitStack()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        from .studies import cupy_stream
        stack.enter_context(cupy_stream(cupy, handle))
    return stack


def _stream_handle(stream) -> int:
    return stream.handle if isinstance(stream, _core.Stream) else _core.Stream(wrap=stream).handle


def _capture_torch(fn, stream):
    return as_graph(torch_cuda_graph(fn, stream))


def torch_cuda_graph(fn, stream=None):
    """fn captured into a torch.cuda.CUDAGraph(keep_graph=True) (on stream, or PyTorch's own
    capture stream for None), with PyTorch's current stream and CUDA generators put back as
    they were when the capture fails. Returns the CUDAGraph."""
    if not callable(fn):
        raise TypeError(f"fn: expected a callable to capture, got {type(fn).__name__}")
    torch = sys.modules.get("torch")
    if torch is None:
        raise RuntimeError("torch_cuda_graph: PyTorch is not imported (import torch first)")
    tg = torch.cuda.CUDAGraph(keep_graph=True)
    side = torch.cuda.ExternalStream(_stream_handle(stream)) if stream is not None else None
    before = torch.cuda.current_stream()
    try:
        with torch.cuda.graph(tg, stream=side, capture_error_mode="relaxed"):
            with _foreign_stream_contexts(torch.cuda.current_stream().cuda_stream):
                fn()
    except BaseException:
        _unstick_torch_rng(torch)
        raise
    finally:
        # torch.cuda.graph's __exit__ calls capture_end() and only then restores the stream,
        # without try/finally (torch 2.5 to 2.11): a failed capture (the usual case here: fn
        # syncs with the host) left the capture stream PyTorch's current one. With stream=
        # that is the caller's stream, which it may destroy next (an l2persist Stream closed):
        # every later PyTorch launch then went to a destroyed stream (on the H200: "CUDA
        # error: context is destroyed" in the next torch.rand, or SIGSEGV in torch.randint).
        torch.cuda.set_stream(before)
    return tg


def _unstick_torch_rng(torch):
    """After a failed capture: capture_end() raised before it took PyTorch's default CUDA
    generators out of capture mode, so their next offset increment outside a capture failed
    ("Offset increment outside graph capture encountered unexpectedly", seen on the H200 with
    torch 2.11). A clone of a generator's state keeps its seed and offset and no capture
    bookkeeping; installing it puts the generator back as it was before the capture."""
    for gen in getattr(torch.cuda, "default_generators", ()):
        try:
            gen.graphsafe_set_state(gen.clone_state())
        except (AttributeError, RuntimeError):
            pass  # a torch without graph-safe states: nothing to put back


def _capture_l2persist(fn, stream, device):
    s = stream if stream is not None else _core.Stream(device)
    _core._capture_begin_relaxed(s)
    failure = None
    try:
        with _foreign_stream_contexts(_stream_handle(s)):
            fn()
    except BaseException as e:  # the capture must end whatever fn did
        failure = e
    g = _core._capture_end(s, [s])
    if failure is not None:
        g.close()
        raise failure
    return g


def _torch_in_use():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch
    return None


def _capture(fn, stream, device):
    if _torch_in_use() is not None:
        return _capture_torch(fn, stream)
    return _capture_l2persist(fn, stream, device)


def _eager_stream(stream, device):
    """The stream an eager fn launches on: `stream` when given; else PyTorch's current stream
    where PyTorch is in use; else the legacy default stream. (A window set there reaches the
    kernels fn launches from now on.)"""
    if isinstance(stream, _core.Stream):
        return stream
    if stream is not None:
        return _core.Stream(wrap=stream)
    torch = _torch_in_use()
    # PyTorch's stream object, not its int handle: a bare int other than 0 / 1 / 2 is refused
    # (it cannot be checked)
    return _core.Stream(wrap=torch.cuda.current_stream() if torch is not None else 0)


def _graph_scoped(found: list[Candidate], prefix: str, named: dict) -> list[Candidate]:
    """Discovered names across several graphs: each graph's ``kernel@node.pParam`` names count
    from its own node 0, so they get the graph's place (``g1/``) in front; an allocation an
    earlier graph already named keeps that name (one buffer, one name)."""
    out = []
    for c in found:
        if c.record is not None and c.record.allocation:
            name = named.setdefault(c.address, prefix + c.name)
            c = replace(c, name=name)
            c.record.name = name
        out.append(c)
    return out


def _from_graph(graph: Graph, candidates, carrier=None) -> list[Candidate]:
    """The graph's buffers; each windowed on its own nodes, or on `carrier` (a stream) when
    the graph is a private capture of eager work."""
    out = []
    for r in graph.buffers(candidates):
        if not r.nodes or not r.size:
            continue
        out.append(Candidate(name=r.name, nbytes=r.size, address=r.address, nodes=r.nodes,
                             carrier=carrier or NodeGroup(graph, r.nodes), record=r,
                             source=r.source))
    return out


@dataclass(frozen=True)
class LaunchedKernel:
    """A kernel launch the launch log saw: for eager work that could not be captured, a
    Candidate's ``nodes`` name the launches (in fn's order) whose arguments point into it."""
    position: int       # the launch's place among fn's logged launches
    name: str           # the kernel's (mangled) name; "" when the driver cannot say
    grid: tuple
    block: tuple
    shared_mem: int
    num_params: int


class _LaunchLog:
    """fn's kernel launches, logged while fn runs once more for real (CUPTI's callback API:
    ``_core._launch_log``), in the shape of a Graph that ``_from_graph`` and ``_graph_buffers``
    read: ``_scan`` gives the same tuples, one kernel per launch."""

    def __init__(self, fn: Callable[[], Any], device):
        self._fn, self._device = fn, device
        self.kernel_nodes: list[LaunchedKernel] = []
        self.fn_raised: BaseException | None = None   # fn's own failure, not the log's

    def _run(self):
        try:
            return self._fn()
        except BaseException as e:
            self.fn_raised = e
            raise

    def _scan(self, offers):
        kernels, records, uses = _core._launch_log(self._run, offers, self._device)
        self.kernel_nodes = [LaunchedKernel(*k) for k in kernels]
        return kernels, records, uses

    def buffers(self, candidates=None) -> BufferTable:
        return _graph_buffers(self, candidates)


def _from_launch_log(fn, stream, candidates, device):
    """(candidates, None) from fn's logged launches, windowed on the stream fn runs on; or
    (None, why) where no log could be made (CUPTI missing, or another tool holds its one
    subscriber) or fn launched no kernel. fn's own exceptions propagate."""
    torch_device = _torch_device(device) if _torch_in_use() is not None else device
    log = _LaunchLog(late_bound(fn), torch_device)
    try:
        found = _from_graph(log, candidates, _eager_stream(stream, device))
    except Exception as e:  # noqa: BLE001 - any failure of the log means: no log
        if log.fn_raised is not None:
            raise
        return None, e
    if not log.kernel_nodes:
        return None, "fn launched no kernel on the device"
    return found, None


def discover(fn: Callable[[], Any], *, stream=None, candidates=None, device=None) -> list[Candidate]:
    """The buffers fn's kernels use, each with a carrier for a window: the tuner's targets.

    fn is run once for real. If it replays PyTorch CUDA graphs (made with keep_graph=True),
    those graphs are borrowed and scanned, and windows on their nodes reach fn's own replays.
    Otherwise (eager work) fn is captured once (relaxed mode) on `stream` (or a private one;
    through PyTorch's graph capture when PyTorch is in use, with CuPy's current stream pointed
    at it) only to find its kernels' buffers; the windows then go on the stream its kernels
    run on (``stream``, else PyTorch's current stream, else the legacy stream). Eager work that
    cannot be captured (it syncs with the host: ``torch.bincount``, ``.item()``) is run once
    more for real with its kernel launches logged through CUPTI's callback API, and their
    argument bytes are scanned the same way; its candidates' ``nodes`` are then
    ``LaunchedKernel`` records, and their windows go on that same stream. Either way fn itself
    is timed. candidates= names the buffers (else ``kernel@node.pParam``: the first kernel
    argument pointing into it, the same from one process to the next; with several replayed
    graphs, the graph's place in front, ``g1/``). Sorted largest first.

    Raises DiscoveryError, naming both reasons, when fn can neither be captured nor its
    launches logged (CUPTI missing, or another tool such as a profiler holding CUPTI's one
    subscriber) and no candidates= were given; with candidates= it then warns with the reasons
    and returns them without nodes, windowed on that stream.
    """
    graphs = _replayed_torch_graphs(fn)
    found: list[Candidate] = []
    if graphs:
        named: dict[int, str] = {}
        for i, tg in enumerate(graphs):
            found += _graph_scoped(_from_graph(as_graph(tg, device=device), candidates),
                                   f"g{i}/" if len(graphs) > 1 else "", named)
    else:
        try:
            graph = _capture(fn, stream, device)
        except Exception as e:  # noqa: BLE001 - any failure means: not capturable
            graph, why = None, e
        if graph is not None and not graph.kernel_nodes:
            graph, why = None, "fn queued no kernel on the capturing stream"
        if graph is not None:
            found = _from_graph(graph, candidates, _eager_stream(stream, device))
        else:
            found, log_why = _from_launch_log(fn, stream, candidates, device)
        if found is None:
            reasons = (f"fn could not be captured into a CUDA graph ({why}), nor its kernel "
                       f"launches logged ({log_why})")
            if candidates is None:
                raise DiscoveryError(
                    f"discover: {reasons}; pass candidates= (tensors, a module, a dict name -> "
                    "tensor, l2persist buffers) to name the buffers to try") from (
                        why if isinstance(why, BaseException) else None)
            warnings.warn(f"discover: {reasons}; each candidate is tried as a window on the "
                          "stream", RuntimeWarning, stacklevel=2)
            carrier = _eager_stream(stream, device)
            return [Candidate(name=o.name, nbytes=o.nbytes, address=o.ptr, nodes=(),
                              carrier=carrier, source=o.obj)
                    for o in _offers(candidates)]
    found.sort(key=lambda c: c.nbytes, reverse=True)
    return found


# ---- foreign launches ---------------------------------------------------------------------

def _function_of(kernel: Any) -> tuple[int, bool]:
    """(handle, is_kernel) for the kinds of kernel objects l2persist.launch takes."""
    if isinstance(kernel, bool):
        raise TypeError("kernel: expected a kernel object or a CUfunction int, got bool")
    if isinstance(kernel, int):
        return kernel, False
    mod, name = _module_of(kernel), type(kernel).__name__
    if name == "CUfunction":                      # cuda.bindings
        return int(kernel), False
    if name == "CUkernel":
        return int(kernel), True
    if mod.startswith("cupy"):
        fn = kernel.kernel if hasattr(kernel, "kernel") else kernel   # RawKernel -> Function
        return int(fn.ptr), False
    if mod.startswith("cuda.core"):               # a cuda.core Kernel holds a CUkernel
        h = getattr(kernel, "handle", None) or getattr(kernel, "_handle", None)
        if h is not None:
            return int(h), type(h).__name__ != "CUfunction"
    if mod.startswith("triton"):
        if getattr(kernel, "function", None) is None and hasattr(kernel, "_init_handles"):
            kernel._init_handles()
        f = getattr(kernel, "function", None)
        if f is not None:
            return int(f), False
    raise TypeError(
        f"kernel: expected a cuda.core Kernel, a CuPy RawKernel or RawModule function, a Triton "
        f"compiled kernel or a CUfunction int, got {mod}.{name}")


def launch(kernel: Any, grid: Any, block: Any, args: Iterable = (), *, stream=None, window=None,
           shared_mem: int = 0, device=None) -> None:
    """Launch another library's kernel through cuLaunchKernelEx, with an access policy window
    on this one launch.

    kernel: a cuda.core ``Kernel``, a CuPy ``RawKernel`` or ``RawModule.get_function(...)``,
    a Triton compiled kernel, or a ``CUfunction`` int. grid, block: an int or 1-3 ints.
    args: buffers (DeviceBuffer, CuPy / PyTorch arrays: their device address), ints, floats,
    NumPy scalars, each written at the width of the kernel's parameter (cuFuncGetParamInfo);
    the count must match. window: an AccessPolicyWindow or None. stream: an l2persist Stream,
    a foreign stream, or None (the legacy default stream on `device`).
    """
    handle, is_kernel = _function_of(kernel)
    if not isinstance(shared_mem, int) or isinstance(shared_mem, bool):
        raise TypeError(f"shared_mem: expected an int, got {type(shared_mem).__name__}")
    _core._launch_ex(handle, is_kernel, grid, block, list(args),
                     stream, window, shared_mem, device)
