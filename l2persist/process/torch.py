"""PyTorch: every hook l2persist puts on PyTorch, in one file.

PyTorch is never imported here unless the caller asked for its graphs (``keep_graphs``,
``window_captures``, ``torch_cuda_graph``); everything else looks at ``sys.modules`` and
does nothing where PyTorch is not in use. The patches, each undone when its block ends:

* ``keep_graphs`` (``patch_keep_graph``): ``torch.cuda.CUDAGraph`` made with
  ``keep_graph=True`` whatever the caller passed (``__new__`` and ``__init__``), so that its
  raw graph can be windowed after capture;
* ``window_captures``: ``capture_begin`` / ``capture_end`` put a window on the capture stream
  while a graph is captured (the driver copies it into each captured kernel node);
* ``replays_noted`` (``patch_replay``): ``replay`` notes each graph replayed and the stream it
  ran on (PyTorch's current stream), for discovery (which graphs fn replays) and for timing
  (where they run).

The watched program's hooks (``process/bootstrap.py`` says what each calls in the watcher;
the patching is here): ``patch_keep_graph``, ``patch_capture`` (every capture's begin and end,
a failed begin too), ``patch_replay``, ``patch_after`` (``torch.cuda.synchronize`` and the
streams' and events' ``synchronize``) and ``note_pool_streams``; the per-call ones are
:class:`Hook` objects whose ``off()`` leaves a wrapper installed over them since.

A window set on a borrowed PyTorch graph reaches the owner's next ``replay()`` only after the
owner instantiates the raw graph again (``reinstantiate``, measured on the H100 and H200:
setting an attribute after instantiation and calling ``cuGraphExecUpdate`` reports success and
changes nothing).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import weakref
from typing import Any, Callable

from .. import _core
from . import cupy as _cupy

__all__ = ["is_torch_graph", "renewable", "imported", "in_use", "device_of", "borrow", "reinstantiate", "keep_graphs",
           "patch_keep_graph", "window_captures", "replays_noted", "patch_replay", "late_bound",
           "torch_cuda_graph", "current_stream", "stream_handle", "patch_capture", "patch_after",
           "Hook", "note_pool_streams"]

KEEP_GRAPH_HINT = (
    "Capture it inside `with l2persist.keep_graphs():` (every torch.cuda.CUDAGraph made there, "
    "by torch.cuda.graph, make_graphed_callables or torch.compile(mode='reduce-overhead'), "
    "keeps its raw graph), or put the window on while it is captured with "
    "`with l2persist.window_captures(window):`")


def is_torch_graph(obj: Any) -> bool:
    """Whether obj is a ``torch.cuda.CUDAGraph`` (by its module and its raw-graph method, so
    that PyTorch need not be imported to ask)."""
    return (type(obj).__module__ or "").startswith("torch") and hasattr(obj, "raw_cuda_graph")


def renewable(owner: Any) -> bool:
    """Whether :func:`reinstantiate` can make the owner's executable again (PyTorch's graphs;
    nothing can reach another owner's executable)."""
    return is_torch_graph(owner)


def imported() -> bool:
    """Whether PyTorch is imported in this process (never imports it)."""
    return "torch" in sys.modules


def in_use():
    """The torch module where PyTorch is imported and has initialised CUDA, else None."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch
    return None


def device_of(device):
    """`device`, or PyTorch's current device where PyTorch is imported (None otherwise)."""
    if device is not None:
        return device
    torch = sys.modules.get("torch")
    return torch.cuda.current_device() if torch is not None else None


def current_stream():
    """PyTorch's current stream as an l2persist Stream where PyTorch is in use, else None."""
    torch = in_use()
    # PyTorch's stream object, not its int handle: a bare int other than 0 / 1 / 2 is refused
    # (it cannot be checked)
    return _core.Stream(wrap=torch.cuda.current_stream()) if torch is not None else None


def borrow(graph: Any, device=None, *, quiet: bool = False):
    """An l2persist Graph over a ``torch.cuda.CUDAGraph(keep_graph=True)`` whose capture
    ended (never destroyed by l2persist); ValueError, saying what to do, for one that keeps no
    raw graph. ``quiet``: window changes do not re-instantiate the owner each (the caller
    changes several, then calls :func:`reinstantiate` once: each instantiation costs as much
    as the graph is large)."""
    try:
        handle = int(graph.raw_cuda_graph())
    except RuntimeError as e:
        raise ValueError(f"as_graph: this torch.cuda.CUDAGraph keeps no raw graph, so its nodes "
                         f"cannot be windowed after capture. {KEEP_GRAPH_HINT} ({e})") from e
    if not quiet:
        count_resets(graph)
    return _core._borrow_graph(handle, device_of(device), None if quiet else graph)


def count_resets(graph: Any) -> None:
    """Count this CUDAGraph's ``reset()`` calls (its own instance's method wraps the class's;
    the graph held weakly, so nothing keeps it alive): a reset and a capture again can give the
    new graph the old one's address, and only the count tells them apart. An instance that
    takes no attribute is left as it is (its resets are seen by the handle alone)."""
    if "_l2p_resets" in getattr(graph, "__dict__", {}):
        return
    reset, ref = type(graph).reset, weakref.ref(graph)

    def counted(*args, **kwargs):
        g = ref()
        if g is not None:
            g._l2p_resets += 1
        return reset(g, *args, **kwargs)
    try:
        graph._l2p_resets = 0
        graph.reset = counted
    except (AttributeError, TypeError):
        pass


def owner_handle(owner: Any) -> tuple | None:
    """Which graph a borrowed graph's owner holds now, as a token the binding compares with
    the one it read at the borrow: a PyTorch CUDAGraph's raw graph (0 once ``reset()``
    destroyed it: ``raw_cuda_graph()`` then raises) and its count of resets; None for any
    other owner (nothing to ask)."""
    if not is_torch_graph(owner):
        return None
    try:
        handle = int(owner.raw_cuda_graph())
    except RuntimeError:
        handle = 0
    return handle, getattr(owner, "_l2p_resets", 0)


def reinstantiate(owner: Any) -> bool:
    """After a window changed on a borrowed graph's node: make the owner's next replay see it.
    PyTorch: ``instantiate()`` again (it destroys its executable and instantiates the raw graph,
    attributes included); True. Other owners: False (nothing can reach their executable)."""
    if renewable(owner):
        owner.instantiate()
        return True
    return False


def _graph_class():
    torch = sys.modules.get("torch")
    if torch is None:
        import torch  # noqa: F811 - the caller asked for PyTorch's graphs
    return torch, torch.cuda.CUDAGraph


def patch_keep_graph(cls) -> Callable[[], None]:
    """Make every ``cls`` (``torch.cuda.CUDAGraph``) made from now on keep its raw graph, as if
    made with ``keep_graph=True``; returns the undo. (``keep_graphs`` for a block; a program
    watched from its start keeps it patched.)"""
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

    def undo():
        for k in ("__new__", "__init__"):
            if k in saved:
                setattr(cls, k, saved[k])
            else:
                delattr(cls, k)
    return undo


def patch_replay(cls, on_replay: Callable[[Any, Any], Any],
                 stream: bool = True,
                 after: Callable[[Any], None] | None = None,
                 count=None) -> Callable[[], None]:
    """Call ``on_replay(graph, stream)`` before every ``cls.replay`` (``torch.cuda.CUDAGraph``),
    with PyTorch's current stream, where ``replay`` launches the graph (``stream=False``: None,
    for a hook that needs no stream: asking PyTorch for it makes a Stream object per replay);
    with ``after``, whatever ``on_replay`` returned, unless None, is given to ``after`` once the
    replay has returned or raised (the watcher's events around a replay). With ``count`` (a
    ``_core.ReplayCount``), a replay the count is armed for is counted in C and goes straight
    to the original, without ``on_replay`` (process/fastcount.py). Returns the undo."""
    torch = sys.modules.get("torch")      # only where the stream is asked for
    original = cls.replay

    if after is not None:
        def replay(self, *a, **k):
            token = on_replay(self, torch.cuda.current_stream() if stream else None)
            if token is None:
                return original(self, *a, **k)
            try:
                return original(self, *a, **k)
            finally:
                after(token)
    elif stream:
        def replay(self, *a, **k):
            on_replay(self, torch.cuda.current_stream())
            return original(self, *a, **k)
    else:
        def replay(self, *a, **k):
            on_replay(self, None)
            return original(self, *a, **k)
    if count is not None:
        # named and signed as the original, as a function wrapper would be
        replay = functools.update_wrapper(_core.CountedReplay(count, original, replay), original)
    cls.replay = replay

    def undo():
        cls.replay = original
    return undo


def patch_capture(cls, on_begin: Callable[[Any], None],
                  on_end: Callable[[Any, bool], None]) -> Callable[[], None]:
    """Call ``on_begin(graph)`` before every ``cls.capture_begin`` and ``on_end(graph, failed)``
    once its ``capture_end`` returns or raises (failed False), or where ``capture_begin`` raised
    (failed True: no capture is open for it); returns the undo."""
    begin, end = cls.capture_begin, cls.capture_end

    def capture_begin(self, *a, **k):
        on_begin(self)
        try:
            return begin(self, *a, **k)
        except BaseException:
            on_end(self, True)
            raise

    def capture_end(self, *a, **k):
        try:
            return end(self, *a, **k)
        finally:
            on_end(self, False)
    cls.capture_begin, cls.capture_end = capture_begin, capture_end

    def undo():
        cls.capture_begin, cls.capture_end = begin, end
    return undo


class Hook:
    """A hook installed as ``owner.attr`` over ``original``. off() puts the original back only
    where the hook is still there: a wrapper installed over it since (by the program, a
    profiler, or l2persist's own ``replays_noted``) stays as it is. Returns whether the
    original is there now."""

    def __init__(self, owner, attr: str, ours, original, name: str):
        self.owner, self.attr, self.ours, self.original, self.name = \
            owner, attr, ours, original, name

    def _now(self):
        return getattr(self.owner, "__dict__", {}).get(self.attr)

    def off(self) -> bool:
        now = self._now()
        if now is self.ours:
            setattr(self.owner, self.attr, self.original)
            return True
        return now is self.original


def patch_after(owner, attr: str, after: Callable[[], None], name: str, count=None) -> Hook:
    """Call ``after()`` once ``owner.attr`` returned (a module's function such as
    ``torch.cuda.synchronize``, or a class's method such as ``Stream.synchronize``); returns
    its :class:`Hook` (``off()``: the undo). With ``count`` (a ``_core.ReplayCount``), a call
    made while the count is armed on its thread is counted in C instead (``_core.CountedSync``;
    process/fastcount.py)."""
    orig = getattr(owner, attr)

    if count is not None:
        # named and signed as the original, as a function wrapper would be
        wrapped = functools.update_wrapper(_core.CountedSync(count, orig, after), orig)
    else:
        def wrapped(*a, **k):
            r = orig(*a, **k)
            after()
            return r
    setattr(owner, attr, wrapped)
    return Hook(owner, attr, wrapped, orig, name)


def note_pool_streams(torch) -> None:
    """Note each stream PyTorch hands out from its pool (``torch.cuda.Stream()`` without a
    handle or id of the caller's: PyTorch never destroys those), the streams besides the
    default ones that a stream window may be set on (streams.py). Wrappers of existing
    streams (``current_stream()``, ``ExternalStream``) pass a stream_id or stream_ptr."""
    from .streams import note_stream
    klass = torch.cuda.Stream
    make = klass.__new__

    def __new__(cls, *a, **k):
        s = make(cls, *a, **k)
        if cls is klass and "stream_ptr" not in k and "stream_id" not in k:
            note_stream(s)
        return s
    klass.__new__ = staticmethod(__new__)


@contextlib.contextmanager
def keep_graphs():
    """Every ``torch.cuda.CUDAGraph`` made in the block keeps its raw graph, as if made with
    ``keep_graph=True``: the default ``torch.cuda.CUDAGraph()``, ``torch.cuda.graph``,
    ``torch.cuda.make_graphed_callables`` and ``torch.compile(mode="reduce-overhead")`` all
    make theirs through that class. ``as_graph``, discovery, ``tune``, ``advise`` and Plans
    can then window their kernel nodes after capture (PyTorch instantiates a kept graph at its
    first replay). Servers capture at start: wrap the warm-up / capture phase in it."""
    _, cls = _graph_class()
    undo = patch_keep_graph(cls)
    try:
        yield
    finally:
        undo()


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
    torch, cls = _graph_class()
    active = {}

    def on_begin(graph):
        stream = _core.Stream(wrap=torch.cuda.current_stream())  # the capture stream
        scope = stream.access_policy(window)
        scope.__enter__()
        active[id(graph)] = scope

    def on_end(graph, _failed):
        scope = active.pop(id(graph), None)
        if scope is not None:
            scope.__exit__(None, None, None)
    undo = patch_capture(cls, on_begin, on_end)
    try:
        yield window
    finally:
        undo()
        for scope in active.values():  # a capture left open by an exception
            scope.__exit__(None, None, None)


def late_bound(fn: Callable[[], Any]) -> Callable[[], Any]:
    """fn, or for a bound ``CUDAGraph.replay`` (``g.replay`` passed as is) a callable that
    looks the method up at each call, so that a replay noted by patching the class is seen."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and getattr(fn, "__name__", "") == "replay" and is_torch_graph(owner):
        return lambda: type(owner).replay(owner)
    return fn


@contextlib.contextmanager
def replays_noted():
    """Within the block, every ``torch.cuda.CUDAGraph.replay`` is noted as (graph, stream):
    the graph and PyTorch's current stream, where ``replay`` launches it. Yields the list
    (empty, and nothing patched, where PyTorch is not imported). Call the work through
    ``late_bound`` so that a bound ``g.replay`` is seen."""
    seen: list = []
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "cuda") or not hasattr(torch.cuda, "CUDAGraph"):
        yield seen
        return
    undo = patch_replay(torch.cuda.CUDAGraph, lambda graph, stream: seen.append((graph, stream)))
    try:
        yield seen
    finally:
        undo()


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
    side = torch.cuda.ExternalStream(stream_handle(stream)) if stream is not None else None
    before = torch.cuda.current_stream()
    try:
        with torch.cuda.graph(tg, stream=side, capture_error_mode="relaxed"):
            with _cupy.on_stream(torch.cuda.current_stream().cuda_stream):
                fn()
    except BaseException:
        _unstick_rng(torch)
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


def stream_handle(stream) -> int:
    """The cudaStream_t of an l2persist Stream or of anything Stream(wrap=) takes."""
    return stream.handle if isinstance(stream, _core.Stream) else _core.Stream(wrap=stream).handle


def _unstick_rng(torch):
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
