"""Discovery: which buffers a callable's kernels use, where a window on each reaches them, and
which streams its work runs on. One home for the record step; the scans are the C core's
(``csrc/core/l2p_graphscan.h`` for graphs, ``csrc/core/l2p_launchlog.h`` for launches).

``discover(fn)`` runs fn once for real. If it replays PyTorch CUDA graphs, those are borrowed
and scanned. Otherwise fn is captured once only to read its kernels' arguments; where the
capture fails (fn syncs with the host) or holds no kernel (fn launched its kernels on a stream
of its own, which a capture does not see: a CuPy ``RawKernel`` called with ``stream=``), fn runs
once more with its launches logged (CUPTI's callback API), and each launch says which stream
it went to. Where PyTorch is in use, the one real run is itself logged and read instead of a
capture (PyTorch's capture allocates from a private pool: outputs made per call have other
addresses there). Discovery never raises a CUDA error for work it cannot capture.

``work_streams(fn, device)`` runs fn once, noting the streams its graph replays and kernel
launches went to: the timing checks that its events bracket them (``l2persist.tune``).
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from .. import _core
from .._format import human_bytes, kernel_label, node_label, short_text as _short
from . import cupy as _cupy
from . import torch as _torch

__all__ = ["discover", "work_streams", "WorkStreams", "stream_key", "LaunchStreams", "BufferUse",
           "BufferRecord", "BufferTable", "NodeGroup", "Candidate", "LaunchedKernel",
           "DiscoveryError", "owner_sees_windows"]


class DiscoveryError(RuntimeError):
    """fn could not be captured into a CUDA graph, so its buffers cannot be found."""


def owner_sees_windows(graph) -> bool:
    """Whether windows set on `graph`'s nodes reach its owner's own replay (True for PyTorch
    and for graphs l2persist captured; False for raw handles, whose executable is the
    caller's)."""
    owner = graph.owner
    return owner is None or _torch.is_torch_graph(owner)


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


def graph_buffers(graph, candidates: Any = None) -> BufferTable:
    """Graph.buffers(): the C scan, named and grouped for people (the binding's graph_buffers
    hook)."""
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
    """A group of a graph's kernel nodes carrying one window: the tuner's per-node carrier
    (also ``Graph.nodes_window(nodes)``, the binding's node_group hook).

    Setting ``access_policy_window`` sets it on every node of the group (None disables) and
    makes it effective for the owner's next replay where the owner allows (see
    ``owner_sees_windows``)."""

    def __init__(self, graph, nodes: Iterable):
        if not isinstance(graph, _core.Graph):
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


def stream_key(handle: int) -> int:
    """A stream handle as one key per stream: the legacy default stream is 0 to the runtime and
    CU_STREAM_LEGACY (1) to the driver, and a launch reports it as it was given."""
    return 0 if handle in (0, 1) else int(handle)


class LaunchStreams:
    """An l2persist Stream per stream a launch went to: one the caller already holds where its
    handle is the launch's (so that the window goes on the object the caller holds), else
    PyTorch's current stream where it is that one, else a wrap of the handle the launch gave
    (the driver's own word: the stream was alive when it took the launch), wrapped with
    ``device``: a default stream's handle (0, 1, 2) names that device's stream. None for a
    handle in ``gone``: a stream fn destroyed after launching on it (the launch log saw the
    destroy), whose handle must never be used again (it may already be another stream's)."""

    def __init__(self, known: Iterable = (), device=None, gone: Iterable[int] = ()):
        self._device = device
        self._gone = frozenset(stream_key(h) for h in gone)
        self._by: dict[int, Any] = {}
        for s in (*known, _torch.current_stream()):
            if s is not None:
                self._by.setdefault(stream_key(s.handle), s)

    def __call__(self, handle: int):
        key = stream_key(handle)
        if key not in self._by:
            if key in self._gone:
                return None
            self._by[key] = _core.Stream(wrap=_cupy.StreamHandle(handle), device=self._device)
        return self._by[key]


class _LazyStreams:
    """LaunchStreams made at the first call, once the log ran and knows which streams fn
    destroyed (graph_buffers runs the log, then asks for carriers)."""

    def __init__(self, known, device, log):
        self._args, self._log, self._streams = (known, device), log, None

    def __call__(self, handle: int):
        if self._streams is None:
            self._streams = LaunchStreams(*self._args, gone=self._log.gone)
        return self._streams(handle)


# ---- discovery for the tuner --------------------------------------------------------------

@dataclass
class Candidate:
    """A buffer worth considering for a window, and where a window on it goes.

    ``carrier``: where its window goes. For the nodes of a PyTorch graph that fn replays, a
    NodeGroup on that graph (the owner's own replay sees it). For eager work (fn launches
    kernels itself), the Stream fn's kernels run on: a window on a stream reaches every kernel
    launched on it afterwards, while a window on the nodes of a private capture would never
    reach fn's own launches. ``nodes`` then names the kernels that use the buffer (from the
    capture, or the launch log), which all get the stream's one window. Either way the window
    reaches fn's own work, so fn itself is what the tuner times."""
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
    stream: int = 0     # the cudaStream_t it was queued on (0: the legacy default stream)


class _LaunchLog:
    """fn's kernel launches, logged while fn runs once more for real (CUPTI's callback API:
    ``_core._launch_log``), in the shape of a Graph that ``_from_graph`` and ``graph_buffers``
    read: ``_scan`` gives the same tuples, one kernel per launch."""

    def __init__(self, fn: Callable[[], Any], device):
        self._fn, self._device = fn, device
        self.kernel_nodes: list[LaunchedKernel] = []
        self.ran = False                              # whether fn was called
        self.fn_raised: BaseException | None = None   # fn's own failure, not the log's
        self.gone: frozenset = frozenset()            # streams fn destroyed after launching

    def _run(self):
        self.ran = True
        try:
            return self._fn()
        except BaseException as e:
            self.fn_raised = e
            raise

    def _scan(self, offers):
        kernels, records, uses, gone = _core._launch_log(self._run, offers, self._device)
        self.kernel_nodes = [LaunchedKernel(*k) for k in kernels]   # each ends with its stream
        self.gone = frozenset(stream_key(h) for h in gone)
        return kernels, records, uses

    def buffers(self, candidates=None) -> BufferTable:
        return graph_buffers(self, candidates)


def _replayed_torch_graphs(fn: Callable[[], Any]) -> list:
    """Run fn once for real, noting the torch CUDAGraphs it replays (a replay cannot be
    captured: PyTorch refuses, and leaves a raw capture active)."""
    with _torch.replays_noted() as seen:
        _torch.late_bound(fn)()
    graphs = list({id(g): g for g, _ in seen}.values())
    if graphs:
        sys.modules["torch"].cuda.synchronize()
    return graphs


def _stream_handle(stream) -> int:
    return _torch.stream_handle(stream)


def _capture_torch(fn, stream):
    # An empty capture (fn's kernels went to a stream of their own) is the usual case that
    # discovery handles itself, through the launch log: PyTorch's warning about it would only
    # tell the user what discovery already knows.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
        return _torch.borrow(_torch.torch_cuda_graph(fn, stream))


def _capture_l2persist(fn, stream, device):
    s = stream if stream is not None else _core.Stream(device)
    _core._capture_begin_relaxed(s)
    failure = None
    try:
        with _cupy.on_stream(_stream_handle(s)):
            fn()
    except BaseException as e:  # the capture must end whatever fn did
        failure = e
    g = _core._capture_end(s, [s])
    if failure is not None:
        g.close()
        raise failure
    return g


def _torch_in_use():
    return _torch.in_use()


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
        return _core.Stream(wrap=stream, device=device)
    torch_stream = _torch.current_stream()
    return torch_stream if torch_stream is not None else _core.Stream(wrap=0, device=device)


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


def _from_graph(graph, candidates, carrier_of=None) -> list[Candidate]:
    """The graph's buffers; each windowed on its own nodes, or on ``carrier_of(record)`` (a
    stream) when the graph is a private capture of eager work or the launch log. A buffer whose
    carrier is None (its launches' stream is gone) is left out, said in one warning."""
    out, left = [], []
    for r in graph.buffers(candidates):
        if not r.nodes or not r.size:
            continue
        carrier = carrier_of(r) if carrier_of is not None else NodeGroup(graph, r.nodes)
        if carrier is None:
            left.append(r)
            continue
        out.append(Candidate(name=r.name, nbytes=r.size, address=r.address, nodes=r.nodes,
                             carrier=carrier, record=r, source=r.source))
    if left:
        _warn_gone(left)
    return out


def _warn_gone(left) -> None:
    streams = sorted({stream_key(k.stream) for r in left for k in r.nodes})
    names = ", ".join(r.name for r in left[:4]) + (", ..." if len(left) > 4 else "")
    warnings.warn(
        f"discover: {len(left)} buffer(s) ({names}) are read only by kernels fn launched on "
        f"stream{'s' if len(streams) > 1 else ''} {', '.join(hex(h) for h in streams)}, which "
        f"fn destroyed before it returned (a stream made per call): a window there would go on "
        f"a stream that no longer exists, so they are left out. Launch them on a stream that "
        f"outlives fn and pass it as stream=", RuntimeWarning, stacklevel=3)


EMPTY_CAPTURE = ("fn queued no kernel on the capturing stream (it launched its kernels on a "
                 "stream of its own, which a capture does not see, or none at all)")


def _from_capture(fn, stream, candidates, device):
    """(candidates, None) from fn captured once, each windowed on the stream eager fn runs on;
    (None, why) where the capture failed (fn syncs with the host), or holds no kernel. A CUDA
    error reading the capture counts as an empty one: asking the graph PyTorch kept from a
    capture of nothing for its nodes raised cudaErrorInvalidValue (H100, a CuPy RawKernel
    launched with stream= a stream of its own). fn's own errors are the log's to report (it
    runs fn again)."""
    try:
        graph = _capture(fn, stream, device)
    except Exception as e:  # noqa: BLE001 - any failure means: not capturable
        return None, e
    try:
        if not graph.kernel_nodes:
            return None, EMPTY_CAPTURE
        eager = _eager_stream(stream, device)
        return _from_graph(graph, candidates, lambda r: eager), None
    except _core.CudaError as e:
        return None, f"{EMPTY_CAPTURE}: reading the capture gave {e}"


def _from_launch_log(fn, stream, candidates, device):
    """(candidates, None) from fn's logged launches, each windowed on the stream its first
    launch went to (the launch's own word; the caller's stream= object where it is that one),
    passing over streams fn destroyed before it returned (a buffer read only there is left
    out, with a warning);
    or (None, why) where no log could be made (CUPTI missing, or another tool holds its one
    subscriber) or fn launched no kernel. fn's own exceptions propagate."""
    found, why, _ran = _logged_run(fn, stream, candidates, device)
    return found, why


def _logged_run(fn, stream, candidates, device):
    """_from_launch_log's (found, why) and whether fn ran (it does not where no log could be
    made)."""
    torch_device = _torch.device_of(device) if _torch_in_use() is not None else device
    log = _LaunchLog(_torch.late_bound(fn), torch_device)
    try:
        streams = _LazyStreams([_eager_stream(stream, device)], device, log)
        found = _from_graph(log, candidates, lambda r: next(
            (s for s in map(streams, (k.stream for k in r.nodes)) if s is not None), None))
    except Exception as e:  # noqa: BLE001 - any failure of the log means: no log
        if log.fn_raised is not None:
            raise
        return None, e, log.ran
    if not log.kernel_nodes:
        return None, "fn launched no kernel on the device", log.ran
    return found, None, log.ran


def _first_run(fn, stream, candidates, device):
    """Under PyTorch, fn's one real run, with its graph replays noted and its kernel launches
    logged: (replayed graphs, eager candidates or None, why not). The eager work's buffers are
    read from its own launches, not from a capture: PyTorch's capture allocates from the graph's
    private pool, so an output fn makes on every call has one address in a capture and another
    in fn's calls, and a window over the capture's misses them (H100, tune on a histogram whose
    accumulator torch.zeros makes per call: no gain in 5 of 10 runs, even for a grid over the
    discovered target, where a window over the calls' own address gave 1.34-1.50x). Where no
    log can be made, fn runs plain and the caller captures it (a capture runs nothing)."""
    with _torch.replays_noted() as seen, warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        found, why, ran = _logged_run(fn, stream, candidates, device)
        if not ran:
            _torch.late_bound(fn)()
    graphs = list({id(g): g for g, _ in seen}.values())
    for w in said:   # the log's notes speak of eager buffers: only where those are used
        if not (graphs and str(w.message).startswith(("launch log:", "discover: "))):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if graphs:
        sys.modules["torch"].cuda.synchronize()
        return graphs, None, None
    return [], found, why


def discover(fn: Callable[[], Any], *, stream=None, candidates=None, device=None) -> list[Candidate]:
    """The buffers fn's kernels use, each with a carrier for a window: the tuner's targets.

    fn is run once for real. If it replays PyTorch CUDA graphs (made with keep_graph=True),
    those graphs are borrowed and scanned, and windows on their nodes reach fn's own replays.
    Otherwise (eager work) fn is captured once (relaxed mode) on `stream` (or a private one,
    with CuPy's current stream pointed at it) only to find its kernels' buffers; the windows
    then go on the stream its kernels run on (``stream``, else PyTorch's current stream, else
    the legacy stream). Eager work that cannot be captured (it syncs with the host:
    ``torch.bincount``, ``.item()``) or that the capture does not see (kernels launched on a
    stream of their own: a CuPy ``RawKernel`` called with ``stream=``) is run once more for
    real with its kernel launches logged through CUPTI's callback API, and their argument bytes
    are scanned the same way. Where PyTorch is in use, fn's one real run is itself logged and
    its eager work's buffers come from those launches (PyTorch's capture allocates from a
    private pool: an output made per call has another address there); the capture is used only
    where no log can be made. Logged candidates' ``nodes`` are ``LaunchedKernel`` records, and
    each window goes on the stream the launches that use the buffer went to (the first one's,
    where they went to several).
    Either way fn itself is timed. candidates= names the buffers (else ``kernel@node.pParam``:
    the first kernel argument pointing into it, the same from one process to the next; with
    several replayed graphs, the graph's place in front, ``g1/``). Sorted largest first.

    Raises DiscoveryError, naming both reasons, when fn can neither be captured nor its
    launches logged (CUPTI missing, or another tool such as a profiler holding CUPTI's one
    subscriber) and no candidates= were given; with candidates= it then warns with the reasons
    and returns them without nodes, windowed on that stream. A CUDA error is never raised for
    work discovery cannot capture.
    """
    found: list[Candidate] = []
    why = log_why = None
    # PyTorch imported is enough: fn may be what first touches CUDA through it, and a capture
    # after that would go through PyTorch's private pool.
    if _torch.imported():
        graphs, eager, log_why = _first_run(fn, stream, candidates, device)
    else:
        graphs, eager = _replayed_torch_graphs(fn), None
    if graphs:
        named: dict[int, str] = {}
        for i, tg in enumerate(graphs):
            found += _graph_scoped(_from_graph(_torch.borrow(tg, device), candidates),
                                   f"g{i}/" if len(graphs) > 1 else "", named)
    else:
        found = eager
        if found is None:
            found, why = _from_capture(fn, stream, candidates, device)
        if found is None and log_why is None:
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


# ---- where fn's work runs, for the timing ------------------------------------------------

@dataclass
class WorkStreams:
    """Where fn's work went while it ran once for real: ``replays``, the PyTorch stream each
    CUDA graph replay ran on (in order; PyTorch's stream objects); ``launches``, the
    ``LaunchedKernel`` of each kernel launch the launch log saw (``stream`` is where it went),
    empty when fn launched none or no log could be made (``log_error`` then says why: CUPTI
    missing, or another tool holding its one subscriber)."""
    replays: list
    launches: list
    log_error: Any = None
    gone: frozenset = frozenset()   # stream_keys fn destroyed after launching on them

    def launch_streams(self) -> list[int]:
        """The distinct streams the launches went to (``stream_key``s), in launch order."""
        return list(dict.fromkeys(stream_key(k.stream) for k in self.launches))

    def kernels_on(self, key: int, n: int = 2) -> str:
        """The first n distinct kernel names launched on the stream ``key``, for messages."""
        names = dict.fromkeys(kernel_label(k.name or "kernel", 40) for k in self.launches
                              if stream_key(k.stream) == key)
        return ", ".join(list(names)[:n])


def work_streams(fn: Callable[[], Any], device) -> WorkStreams:
    """Run fn once for real, noting the stream of each PyTorch graph replay (``replays_noted``)
    and, through the launch log, of each kernel launch. Where no log can be made, fn still runs
    once, and only its replays are known. fn's own exceptions propagate."""
    log = _LaunchLog(_torch.late_bound(fn), device)
    error = None
    with _torch.replays_noted() as seen, warnings.catch_warnings():
        # the log's note about launches past its caps speaks of buffers, which this run
        # does not look for
        warnings.filterwarnings("ignore", message="launch log:", category=RuntimeWarning)
        try:
            log._scan([])
        except Exception as e:  # noqa: BLE001 - any failure of the log means: no log
            if log.fn_raised is not None:
                raise
            error = e
            if not log.ran:
                log._run()
    return WorkStreams(replays=[s for _, s in seen], launches=list(log.kernel_nodes),
                       log_error=error, gone=log.gone)
