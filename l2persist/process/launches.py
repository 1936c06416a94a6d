"""The watcher's eager launches: the launch log (the probe's, and apply's until its stream
windows matched), grouped into the recurring launches on streams known to live
(``streams.launch_groups``), and apply's per-call matching of the plan's stream windows.

One :class:`Launches` per :class:`~l2persist.process.live.Watcher`; its state is the owner's
(``logging``, ``log_cut``, ``eager``, ``unknown_streams``, ``apply_log``, ``_stream_plan``).
"""
from __future__ import annotations

import time

from .. import _core
from . import streams as _streams
from .part import Part
from .probe import UNGRAPHED_NOTE

#: apply logs launches this long a try, this many tries at most, to match its stream windows.
APPLY_LOG_S = 0.5
APPLY_TRIES = 3
#: ... from this long after its first watched call (not advise's --warmup, 2 s by default: a
#: program of a few seconds ended before its log began, H200 8cce687).
APPLY_WARMUP_S = 0.25


class Launches(Part):
    """The launch log and what it finds."""

    def begin(self) -> bool:
        """Log the program's kernel launches from here (the probe; apply: until its stream
        windows matched): their streams and argument words, which the activity records lack.
        The log's CUPTI calls (enabling callbacks on the subscriber the capture count shares)
        are made outside the switch lock: a capture's begin may be waiting inside CUPTI's
        callback for that lock. Whatever this call switches after it asks again."""
        w = self.w
        w.gate.release()
        if w.o.mode == "apply" and w.o.apply_release and \
                w.clock_tracking is None:
            self.track_captures()
        try:
            _core._launch_log_begin(w.o.device)
            w.logging = True
        except Exception as e:     # another CUPTI subscriber (a profiler), no CUPTI
            w.notes.append(f"eager launches not logged (no stream windows): {e}")
        return w.logging

    def track_captures(self):
        """apply --release-cupti (experimental: not yet run on a GPU). apply runs no clock, so
        nothing counts captures for it; its launch log attaches CUPTI. Captures are counted
        from just before (the core's capture tracking), so that once the stream windows
        matched CUPTI can be let go where the program made no CUDA graph
        (SwitchGate.graphs_under_cupti: replays of graphs made under CUPTI fail once it is
        finalized). Attached it costs every launch for the program's life; without the flag
        it stays, as before."""
        w = self.w
        if w.tracking_ended or w.cupti_release is not None:
            return             # stopped (a failure) or let go already: never attached again
        w.gate.begin_tracking("CUPTI stays attached after the launch log")

    def take(self) -> list:
        """Stop the log; the recurring eager launches it saw, grouped (streams.launch_groups)."""
        w = self.w
        if not w.logging:
            return []
        w.gate.release()     # outside the switch lock, as begin says
        w.logging = False
        kernels, records, uses, dropped = _core._launch_log_take([])
        del dropped                # a full log still holds every recurring launch many times
        return _streams.launch_groups(kernels, records, uses)

    def stop(self):
        w = self.w
        if w.logging:
            w.gate.release()     # outside the switch lock, as begin says
            w.logging = False
            try:
                _core._launch_log_take(None, discard=True)
            except Exception:
                pass

    def apply_point(self):
        """apply, with stream windows in the plan: the launch log runs from the first watched
        call until each of them matched a launch (APPLY_LOG_S of launches a try, APPLY_TRIES
        tries), the windows are set on the launches' streams at the call that took the log, and
        the call hooks come off: from there apply adds nothing to a call or a launch."""
        w = self.w
        a = w.apply_log
        if a is None or a.get("over"):
            return
        now = time.perf_counter()
        if "pending" in a:         # taken at a call that then found a capture open
            if w.gate.capture_open():
                return
            groups = a.pop("pending")
        elif not w.logging:
            if a.setdefault("since", now) > now - APPLY_WARMUP_S or w.gate.capture_open():
                return             # the program's first calls (loading, compiling): no sample
            if a["tries"] >= APPLY_TRIES or not self.begin():
                self.apply_over()
                return
            a["tries"] += 1
            a["t0"] = time.perf_counter()
            return
        else:
            if now - a["t0"] < APPLY_LOG_S or w.gate.capture_open():
                return             # captures asked only where it acts: this runs every call
            groups = self.take()  # outside the switch lock: asked again before windows
            if w.gate.capture_open():
                a["pending"] = groups
                return
        for g in groups:
            if _streams.known(g.stream):
                w.switcher.apply_plan_windows(g, install=True)
                if g.windows_applied:
                    w.eager.append(g)
        if w._stream_plan:
            w.switcher.set_stream_windows(w._stream_plan)
        if all(e.get("_applied") or e.get("_superseded")
               for e in w.plan_doc["windows"] if e.get("stream")):
            self.apply_over()

    def apply_over(self):
        w = self.w
        w.apply_log["over"] = True
        self.stop()
        w._unhook()
        # --release-cupti: CUPTI let go where the program made no CUDA graph
        # (track_captures); kept where it did, where captures were not counted, or under the
        # program's profiler (clock.SwitchGate.release_cupti). Without it CUPTI stays, as
        # before: apply counts no captures then
        if w.clock_tracking is not None:
            w.gate.end_tracking(release=True)

    def from_log(self):
        """The probe's eager launches: those on streams known to live become places for
        windows; the GPU time of those on other streams is noted (no window is set there).
        A kernel's warm-up time is per name, so each name counts once: XLA's kernels, one name
        in several groups, read 147 % of the warm-up on the H200 (c67a953) when counted per
        group."""
        w = self.w
        groups = self.take()
        ns = w.kernel_ns_warmup
        names_on: dict[int, set] = {}
        for g in groups:
            if _streams.known(g.stream):
                w.eager.append(g)
            else:
                names_on.setdefault(g.stream, set()).update(g.names)
        w.unknown_streams = {s: sum(ns.get(n, 0.0) for n in names)
                             for s, names in names_on.items()}
        if w.unknown_streams and w.o.mode == "advise":
            total = sum(ns.values()) or 1.0
            share = sum(ns.get(n, 0.0) for n in set().union(*names_on.values())) / total
            if share >= UNGRAPHED_NOTE:
                w.notes.append(f"{100 * share:.0f} % of the warm-up's GPU time ran in eager "
                               f"kernels on {self.unknown_streams_said()}")

    def unknown_streams_said(self) -> str:
        w = self.w
        made = [s for s in w.unknown_streams if s != _streams.PER_THREAD]
        said = []
        if made:
            said.append(f"{len(made)} stream(s) the program made itself (not PyTorch's pool or "
                        f"a default stream): it may destroy them")
        if _streams.PER_THREAD in w.unknown_streams:
            said.append("a per-thread default stream: each thread has its own, and the "
                        "watcher's thread is not the one that launched them")
        return " and on ".join(said) + ", so no window is set there"
