"""The graphs the watcher knows: each ``torch.cuda.CUDAGraph`` (or other owner) the program
captured, scanned once its capture ends and named by its signature (:class:`GraphSeen`, kept by
a weak reference: the watcher never keeps a graph the program dropped alive), the captures open
now (nothing switches while one is), and which graphs were launched with CUPTI recording.

One :class:`Graphs` per :class:`~l2persist.process.live.Watcher` (its ``known``); its state is
the owner's (``graphs``, ``graphs_gone``, ``captures``, ``captures_begun``; around a capture the
launch log's ``log_cut``, the stream windows and a rest under way).
"""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from .. import _core
from .part import Part


@dataclass
class GraphSeen:
    """One graph the program captured: a weak reference to it (the watcher never keeps a graph
    the program dropped, nor its memory pool, alive), its stable name and what the scan found."""
    ref: Any                       # weakref.ref to the program's torch.cuda.CUDAGraph
    signature: str
    names: list
    records: list                  # (address, size, offer) per buffer (allocation)
    uses: list                     # (node, param, offset, word, record) per pointer word
    replays: int = 0
    windows_applied: int = 0
    # replayed with CUPTI recording since its executable was made: after a pause its records
    # would read short (Switcher.install's fresh executables)
    recorded_exec: bool = False
    renew_failed: bool = False     # its owner could not be made to instantiate it again
    # where each target lies in this graph (Switcher.find_targets): the index in `uses` of its
    # anchor word -> the nodes whose words point into the target
    spans: dict = field(default_factory=dict)
    eager = False                  # a graph's windows go on its nodes (streams.LaunchSeen: True)

    def borrow(self):
        """An l2persist Graph over the program's graph, made per use (it holds its owner: kept,
        it would keep the graph alive), or None once the program has dropped the graph."""
        owner = self.ref()
        if owner is None:
            return None
        from ..foreign import as_graph
        try:
            return as_graph(owner)
        except (ValueError, RuntimeError):
            return None            # reset() by the program: it keeps no raw graph now

    def change_windows(self, changes: list, fresh: bool = False) -> bool:
        """Set (window or None, nodes) pairs on the program's graph, then make its next replay
        see them with one re-instantiation (a PyTorch graph's; not one per window); ``fresh``:
        re-instantiate it even where no window changes (see Switcher.install). False when
        the program has dropped the graph or keeps no raw graph now."""
        owner = self.ref()
        if owner is None:
            return False
        if not changes and not fresh:
            return True
        from . import torch as _torch
        if changes:
            try:
                if _torch.is_torch_graph(owner):
                    graph = _torch.borrow(owner, quiet=True)
                else:
                    from ..foreign import as_graph
                    graph = as_graph(owner)
            except (ValueError, RuntimeError):
                return False       # reset() by the program: it keeps no raw graph now
            for w, nodes in changes:
                graph.set_access_policy_window(w, nodes=nodes)
        try:
            renewed = _torch.reinstantiate(owner)
        except (ValueError, RuntimeError):
            # reset() by the program (it keeps the object, not the graph): nothing to renew,
            # and no graph left to window
            self.recorded_exec = False
            return False
        if renewed:
            self.recorded_exec = False
        elif fresh:
            self.renew_failed = True
        return True

    def nodes_of(self, at: int) -> list:
        """The nodes a window on the target anchored at uses[at] goes on: those whose words
        point into it, not every node of the graph."""
        return self.spans.get(at, [])

    def anchor(self, at: int):
        """The target's anchor word, one of the words inside it: (node, param, offset, word)."""
        u = self.uses[at]
        return u[0], u[1], u[2], u[3]


class Graphs(Part):
    """The program's captures and the graphs they made."""

    def capture_begin(self):
        w = self.w
        with w.lock:
            w.counting.take()     # a capture changes what a replay is: counted before it
            w.captures += 1
            w.captures_begun += 1
            if w.o.graph_records and w.captures_begun == 1:
                self.graph_records_first()
            if w.stream_windows is not None:
                w.stream_windows.suspend()  # a captured node would copy its stream's window
            if w.logging:          # a capture's launches are no eager work: the log starts over
                w.launches.stop()
                w.log_cut = True
            if w.resting is not None and w.paused:
                w.resting["recorded"] = True       # no longer an unrecorded rest
                if w.resting.get("unhooked") and "tail_t0" not in w.resting:
                    w.pace.open_gate(w.resting)       # counted from here on
            w._resume()

    def graph_records_first(self):
        """Experimental (advise --graph-records; issue 50 item 2): CUPTI's graph-level records,
        one per replay instead of one per kernel node, turned on here, before the program's
        first capture begins, so that no executable graph made without them exists: turning
        them on while one existed crashed its next launch (H200, c844b7f). Only at PyTorch's
        first capture, with CUPTI not yet begun and no capture the core saw before (another
        library's, or one before the watcher's hooks; a graph built node by node, without a
        capture, is not seen and is the known hole); anything else leaves them off with a
        note. Once on they stay on to the end (whether turning them off and on again with
        graphs alive is safe was not measured): pauses and rests pause the kernel records only.
        Not measured on a GPU yet (tools/investigations/graph-records)."""
        w = self.w
        # this hook runs before PyTorch begins the capture: the core has not counted it yet
        counts = _core._capture_counts() if w.clock_tracking else None
        # begun: captures counted since tracking began; unmatched: ends of captures begun
        # before it (the clock arms a tick after the driver loads: a capture may straddle it)
        if counts is None or counts["begun"] > 0 or counts.get("unmatched", 0) > 0:
            w.notes.append("graph records not turned on: captures were not counted from the "
                           "program's start, or one came before PyTorch's first; kernel "
                           "records instead")
            return
        w.phases.start()
        if not w.activity:
            return
        try:
            _core.activity_graphs(True)
            w.graph_records = True
        except Exception as e:
            w.notes.append(f"graph records not turned on ({e}); kernel records instead")

    def capture_end(self, torch_graph):
        w = self.w
        with w.lock:
            w.counting.take()     # the graph captured may be the counted one, made again
            w.captures = max(0, w.captures - 1)
            try:
                self.remember(torch_graph)
            except Exception as e:  # a graph we cannot read is reported, never raised
                w.notes.append(f"a captured graph could not be read: {e}")
            if w.state == "search" and w.unit == ("tick",) and w.graphs:
                # the clock never acts beside graphs (see Watcher.tick): from the latest
                # capture, for Phases.search_point's wait for a known graph's replay (a setup
                # that captures several graphs, syncing between them, is not cut short)
                w._clock_lost = time.perf_counter()
            self.capture_closed()

    def capture_failed(self):
        """The program's capture_begin raised: no capture is open for it."""
        w = self.w
        with w.lock:
            w.captures = max(0, w.captures - 1)
            self.capture_closed()

    def capture_closed(self):
        w = self.w
        if w.captures:
            return
        if w.stream_windows is not None:
            w.stream_windows.resume()
        if w.log_cut:
            w.log_cut = False
            if w.state == "probe":
                w.launches.begin()

    def remember(self, torch_graph):
        w = self.w
        from ..foreign import as_graph
        self.forget_dropped()
        kernels, records, uses = as_graph(torch_graph)._scan([])
        names = [k[1] for k in kernels]
        try:
            ref = weakref.ref(torch_graph)
        except TypeError:          # an owner that cannot be weakly referenced is kept
            ref = lambda owner=torch_graph: owner  # noqa: E731
        seen = GraphSeen(ref, _core.graph_signature(kernels), names, list(records), list(uses))
        seen.ordinal = sum(g.signature == seen.signature for g in self.all_graphs())
        w.graphs[id(torch_graph)] = seen
        if w.o.mode in ("apply", "verify") and w.plan_doc is not None:
            w.switcher.apply_plan_windows(seen, install=w.o.mode == "apply")

    def seen(self, torch_graph):
        """The program's graph as seen, by identity (an id of a dropped graph can be reused)."""
        seen = self.w.graphs.get(id(torch_graph))
        return seen if seen is not None and seen.ref() is torch_graph else None

    def forget_dropped(self):
        w = self.w
        for k in [k for k, g in w.graphs.items() if g.ref() is None]:
            w.graphs_gone.append(w.graphs.pop(k))

    def all_graphs(self) -> list:
        return self.w.graphs_gone + list(self.w.graphs.values())

    def sig(self, torch_graph):
        seen = self.seen(torch_graph)
        return seen.signature if seen is not None else None

    def flag_recorded(self, kind, torch_graph, seen=False):
        """The graph about to be replayed is launched with CUPTI recording: after a pause its
        executable must be made again before it is recorded (Switcher.install's fresh). Read
        without the lock on other threads' calls: a flag set once too often costs one
        re-instantiation, one missed would let short records into a block. ``seen``: the
        graph already looked up (False: not yet)."""
        w = self.w
        if kind == "replay" and torch_graph is not None and w.activity and not w.paused \
                and w.timing == "nodes":       # events: the nodes' records time nothing
            if seen is False:
                seen = self.seen(torch_graph)
            if seen is not None:
                seen.recorded_exec = True
