"""Stream windows: the program's eager kernels, windowed through the stream they run on.

Windows on graph kernels go on the graph's nodes; an eager kernel has no node, only the stream
it is launched on, whose access policy window every later launch on it carries. The watcher
reads the eager launches with the launch log (``_core._launch_log_begin`` / ``_take``, CUPTI's
callback API: each launch's function, stream and argument bytes, scanned for buffers as a
graph's nodes are), groups the recurring ones here (:func:`launch_groups`: each group has a
graph's face, a signature, records and uses, so targets, arms, the plan document and
``l2p_live_locate`` treat it as a one-node graph), and sets windows as stream attributes
through :class:`StreamWindows`, which puts each stream's own window back.

Only streams known to live for the whole run are touched: the legacy default stream (handles 0 and 1) and PyTorch's pooled streams (``torch.cuda.Stream()`` made without a
handle of the caller's: PyTorch never destroys them), recorded at creation by the bootstrap's
hook (:func:`note_stream`). A stream the program made itself and may destroy is not windowed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _core

#: PyTorch's pooled streams made since the bootstrap hooked torch.cuda.Stream: handle -> the
#: program's Stream object (a pooled stream outlives it anyway).
POOL: dict[int, Any] = {}
#: The legacy default stream's handles (0 and cudaStreamLegacy). Not the per-thread default
#: stream (2): each thread has its own, and the watcher's thread is not the launching one.
DEFAULT_STREAMS = (0, 1)
#: The per-thread default stream's handle (CU_STREAM_PER_THREAD), as the launch log gives a
#: _ptsz launch's NULL stream.
PER_THREAD = 2


def note_stream(stream) -> None:
    """Called by the bootstrap's hook for each ``torch.cuda.Stream()`` made from the pool."""
    try:
        POOL[int(stream.cuda_stream)] = stream
    except Exception:
        pass


def known(handle: int) -> bool:
    return handle in DEFAULT_STREAMS or handle in POOL


@dataclass
class LaunchSeen:
    """Eager launches of one kernel with one launch shape on one stream with the same buffers
    (by allocation), seen in the launch log: a one-node graph to the rest of the watcher."""
    signature: str
    names: list
    records: list                  # (address, size, offer) of the allocations it uses
    uses: list                     # (0, param, offset, word, record) of the group's first launch
    stream: int
    launches: int = 0
    windows_applied: int = 0
    ordinal: int = 0               # among the log's groups of its signature, by first launch
    eager = True

    @property
    def replays(self) -> int:      # a graph's "replayed": it recurs
        return self.launches

    def ref(self):                 # never dropped by the program
        return self

    def nodes_of(self, record: int) -> list:
        return [0] if any(u[4] == record for u in self.uses) else []

    def anchor(self, record: int):
        for u in self.uses:
            if u[4] == record:
                return u[0], u[1], u[2], u[3]
        return None


def launch_groups(kernels: list, records: list, uses: list) -> list:
    """The log's launches (one kernel tuple per launch, its stream last) grouped: by kernel,
    launch shape, stream and the allocations its pointer words point into. Groups launched
    once are left out (set-up work: no window would be worth a switch)."""
    by_node: dict[int, list] = {}
    for u in uses:
        by_node.setdefault(u[0], []).append(u)
    sigs: dict[tuple, str] = {}
    groups: dict[tuple, LaunchSeen] = {}
    for k in kernels:
        node, name, stream = k[0], k[1], int(k[-1])
        shape = (name, tuple(k[2]), tuple(k[3]))
        sig = sigs.get(shape)
        if sig is None:
            sig = sigs[shape] = _core.graph_signature([k[:-1]])
        mine = by_node.get(node, [])
        key = (sig, stream, tuple(sorted((u[1], u[2], records[u[4]][0]) for u in mine)))
        g = groups.get(key)
        if g is None:
            ordinal = sum(1 for k in groups if k[0] == sig)  # as a graph's: which of its sig
            # its own records (those its words point into), as a graph's are its own
            mine_recs = sorted({u[4] for u in mine})
            local = {r: i for i, r in enumerate(mine_recs)}
            g = groups[key] = LaunchSeen(sig, [name], [records[r] for r in mine_recs],
                                         [(0, u[1], u[2], u[3], local[u[4]]) for u in mine],
                                         stream)
            g.ordinal = ordinal
        g.launches += 1
    return [g for g in groups.values() if g.launches > 1]


class StreamWindows:
    """The windows set as stream attributes on ``device``, each stream's own window kept from
    before the first change and put back by :meth:`restore` (idempotent). :meth:`suspend` puts them back
    while a capture is open (a captured kernel node copies its stream's window), :meth:`resume`
    sets them again."""

    def __init__(self, device: int = 0):
        self.device = device               # the watched device: every stream here is its
        self.wrapped: dict[int, Any] = {}
        self.before: dict[int, Any] = {}
        self.now: dict[int, tuple] = {}    # handle -> (key, window)
        self.held: dict[int, tuple] | None = None
        self.wrapped_ever: set = set()     # every stream whose window was touched

    def _stream(self, handle: int):
        s = self.wrapped.get(handle)
        if s is None:
            # wrapped with the watched device: a default stream's handle names the current
            # device's stream, so it is set and put back there whichever GPU the program's
            # thread has current at the call; any other stream must be on it (the core's rule)
            s = _core.Stream(wrap=POOL.get(handle, handle), device=self.device)
            self.wrapped[handle] = s
            self.before[handle] = s.access_policy_window
            self.wrapped_ever.add(handle)
        return s

    def set(self, want: dict) -> None:
        """Each stream in ``want`` (handle -> (key, window)) gets that window; streams set
        before and not wanted now get their own back. A stream whose window is unchanged is
        not touched."""
        if self.held is not None:      # a capture is open: set at resume
            self.held = dict(want)
            return
        for h in [h for h in self.now if h not in want]:
            self._stream(h).access_policy_window = self.before[h]
            del self.now[h]
        for h, (key, w) in want.items():
            if h in self.now and self.now[h][0] == key:
                continue
            self._stream(h).access_policy_window = w
            self.now[h] = (key, w)

    def suspend(self) -> None:
        if self.held is None and self.now:
            held = dict(self.now)
            self.set({})
            self.held = held

    def resume(self) -> None:
        if self.held is not None:
            held, self.held = self.held, None
            self.set(held)

    def restore(self) -> list:
        """Every stream's own window back; returns what failed (as text)."""
        failed = []
        self.held = None
        for h in list(self.now):
            try:
                self._stream(h).access_policy_window = self.before[h]
            except Exception as e:  # noqa: BLE001 - reported by the caller
                failed.append(f"stream {h:#x}: {e}")
        self.now.clear()
        for s in self.wrapped.values():
            try:
                s.close()
            except Exception:      # noqa: BLE001 - a borrowed handle: nothing of ours to free
                pass
        self.wrapped.clear()
        return failed
