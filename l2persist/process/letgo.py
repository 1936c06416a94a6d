"""CUPTI let go after the probe (issue 50 item 2: observing under 1 %).

Where events time the program's graphs and the kernel records stay off in the search's blocks
(``--replay-events`` on a graph-only program: :class:`~l2persist.process.recorder.ReplayEvents`),
the search needs CUPTI for its probe only: the nodes' records weigh the targets and show that
the events cover every graph launched. Attached after that, CUPTI costs every launch of the
program, recording or not, for the rest of its run (``decode_big``'s placebo search with events:
1.0166x the plain run with CUPTI kept, 1.0122x with it let go here, in one run; H200,
ddb1aef). So once the probe has decided, the log goes on with the host's clock and the event
pairs alone (``_core.activity_detach``), capture tracking ends (PyTorch's hooks know its
captures), CUPTI is let go (``_core.cupti_release``: a CUDA call of ours carries it out) and
every graph the program made is instantiated again, so that no executable made while CUPTI was
attached is launched once it is gone.

Graphs captured and instantiated while CUPTI recorded replayed with their outputs right once it
was let go, made again or not (H200, 810cde9, ``tools/investigations/cupti-states`` sequences
``renew`` and ``stale``); at 161093c, which let CUPTI go at a call's exit on whichever thread
with the program's work in flight, the zoo's graph programs' replays failed afterwards. Here
the release is carried out by the first CUDA call to return after the request: the watcher's
own synchronization on the program's thread, with its work done, unless another thread's call
returns first; the graphs are made again after it. A release refused, withdrawn or not carried
out leaves CUPTI as it was (LetGo.undo).

Kept where anything else may need CUPTI or may capture unseen: another thread makes watched
calls, captures were not tracked or the core counted captures PyTorch's hooks did not see, a
library other than PyTorch that begins captures is loaded (theirs are known only through
CUPTI's callbacks), XLA's own graphs, a graph l2persist cannot make again, the clock's
ticks are the unit (the clock switches beside captures it knows through CUPTI), a team, the
program's profiler, graph records, or ``L2PERSIST_KEEP_CUPTI=1`` (a diagnostic:
``tools/investigations/zoo-advise --keep-cupti``). What was done is the summary's
``timing.cupti_after_probe``. Without CUPTI the arms' windows are read back from the graphs'
kernel nodes, not from the kernels' launch attributes (landing.Landing.read_back).
"""
from __future__ import annotations

import sys
import time

from .. import _core
from .part import Part

#: Modules whose captures the watcher would know only through CUPTI's callbacks (PyTorch's come
#: through its hooks): where one is loaded, CUPTI stays.
OTHER_CAPTURERS = ("cupy", "jax", "jaxlib", "numba", "cuda.bindings", "cuda.cudart",
                   "cuda.cuda", "cuda.core", "tensorflow", "paddle", "mxnet")


class LetGo(Part):
    """CUPTI detached from the program at the probe's end, where nothing after needs it."""

    def applies(self) -> bool:
        """Whether the search after the probe is timed by events alone: the question of
        letting go arises only there."""
        w = self.w
        return bool(w.o.replay_events and w.timing == "events" and w.records_off
                    and w.activity)

    def why_kept(self) -> str | None:
        """Why CUPTI stays attached after the probe (None: it may go)."""
        w = self.w
        from .clock import _profiler_on
        from .phases import _makes_own_graphs
        from . import torch as _torch
        if w.o.keep_cupti:
            return "L2PERSIST_KEEP_CUPTI=1"
        if w.team is not None:
            return "ranks in lockstep"
        if w.graph_records:
            return "CUPTI's graph records are on"
        if w.unit is None or w.unit[0] == "tick":
            return ("the watcher's clock is the unit (it switches beside captures known "
                    "through CUPTI's callbacks)")
        if w.other_threads:
            return ("another thread makes watched calls (a capture there could begin while "
                    "CUPTI is let go)")
        if w.captures:
            return "a capture is open"
        if not w.clock_tracking:
            return ("captures were not tracked (a graph another library made under CUPTI "
                    "would not be known)")
        unseen = self.unseen_captures()
        if unseen:
            return (f"{unseen} capture(s) PyTorch's hooks did not see (another library's "
                    f"graph, made under CUPTI, cannot be made again)")
        loaded = sorted(m for m in OTHER_CAPTURERS if m in sys.modules)
        if loaded:
            return (f"{', '.join(loaded)} loaded (its captures are known only through "
                    f"CUPTI's callbacks)")
        if _makes_own_graphs():
            return "XLA's own graphs (l2persist cannot make them again)"
        if any(g.ref() is not None and not _torch.renewable(g.ref())
               for g in w.graphs.values()):
            return "a graph l2persist cannot make again"
        if _profiler_on():
            return "the program's profiler is on"
        return None

    def unseen_captures(self) -> int:
        """Captures the core's count saw (every library's, through CUDA's callbacks) beyond
        those PyTorch's hooks saw: a library the module list does not name (ONNX Runtime,
        ggml, Warp, a raw driver call) captures too. The count's ends of captures begun before
        it (unmatched) are captures too."""
        w = self.w
        try:
            c = _core._capture_counts()
        except Exception:
            return 1               # not known: counted as one, so CUPTI stays
        return max(0, c["begun"] + c.get("unmatched", 0) - w.captures_begun)

    def after_probe(self):
        """At the probe's end (Probe.begin: on the program's thread, the device synchronized,
        the probe's records summed): where it applies and nothing keeps it, the log detached,
        tracking ended, CUPTI let go and the program's graphs made again. Sets
        ``w.cupti_after_probe`` to (what happened, why) where it applies."""
        w = self.w
        if not self.applies():
            return
        why = self.why_kept()
        if why is None:
            try:
                _core.activity_detach()
            except Exception as e:         # not collecting with CUPTI: it stays as it is
                why = f"the log could not go on without CUPTI ({e})"
        if why is not None:
            w.cupti_after_probe = ("kept", why)
            return
        t0 = time.perf_counter()
        w.landed_read_back = True          # the arms' windows read from the graphs' nodes
        w.gate.end_tracking()              # PyTorch's hooks know its captures from here
        self.ended_tracking = True
        w.gate.request_release(hand_captures=False)
        state, renewed = None, 0
        try:
            if w.cupti_release[0] == "releasing":
                # the first CUDA call to return carries the release out: this one, on the
                # program's thread with its work done, unless another thread's came first
                w.device.synchronize()
        finally:
            # whatever the synchronization did, the state decides: released, the graphs made
            # again (none made under CUPTI is launched without it); else CUPTI kept as before
            state = _core.cupti_state()
            if state == "released":
                renewed = self.renew()
            else:
                self.undo(state)
            w.cupti_after_probe = (state if state == "released" else "kept",
                                   w.cupti_release[1] if state == "released"
                                   else f"the release was not carried out ({state})")
            w.graphs_renewed = renewed
            # the program's thread waits for all of it (the finalize at the synchronization's
            # exit, each graph made again): the summary's timing.letgo_ms
            w.letgo_ms = (time.perf_counter() - t0) * 1e3

    def renew(self) -> int:
        """Every graph the program holds made again once CUPTI is gone; none where another
        thread has made watched calls meanwhile (the steps above let the GIL go: its replay
        could be launching the executable a renewal destroys; a graph made under CUPTI and
        left alone replayed right, 810cde9's ``stale``). Returns how many were made again."""
        w = self.w
        if w.other_threads:
            w.notes.append("CUPTI was let go after the probe, but another thread made watched "
                           "calls meanwhile: the graphs were left as they were made")
            return 0
        renewed = 0
        for g in list(w.graphs.values()):
            if g.ref() is not None and g.change_windows([], fresh=True):
                renewed += 1
        return renewed

    def undo(self, state):
        """The release refused, withdrawn or not carried out: CUPTI stays attached as it was
        before the let-go: a request still pending taken back, the log collecting with CUPTI
        again (its records off, as the search's blocks keep them), the capture count on again,
        and the decision's own release free to try (Clock.release_cupti)."""
        w = self.w
        if state in ("releasing", "withdrawn"):
            try:
                w.gate._take_back()
            except Exception:
                pass
        w.cupti_release = None
        self.reattach(renew=False)
        if w.activity:
            try:
                _core.activity_record(False)
            except Exception:
                pass

    def reattach(self, renew: bool = True):
        """A search begun again (Search.restart) probes with the nodes' records: the detached
        log ended and CUPTI's begun again (it attaches again: a new generation), the graphs
        made again under it (whether CUPTI records the nodes of an executable made while it was
        gone was not measured), the capture count on again where the let-go ended it, and the
        let-go's figures cleared (they describe the search abandoned). Where CUPTI cannot be
        begun again (a profiler the program started since), the search goes on without
        records, as where CUPTI was never there."""
        w = self.w
        w.landed_read_back = False
        w.cupti_after_probe, w.graphs_renewed, w.letgo_ms = None, 0, None
        if w.activity and _core.activity_detached():
            _core.activity_end()
            try:
                _core.activity_begin(w.o.device)
            except Exception as e:
                w.activity = False
                w.notes.append(f"CUPTI could not be attached again after it was let go ({e}): "
                               f"the search goes on without kernel records")
            if w.activity and renew:
                self.renew()
        if getattr(self, "ended_tracking", False):
            self.ended_tracking = False
            w.tracking_ended = False
            w.clock_tracking = None        # the clock begins the count again (clock.armed)
