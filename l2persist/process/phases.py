"""The watcher's phases: what each of the program's switch points does in the phase the
watcher is in (idle, warm-up, probe, search, done, off). The first call starts the watching
(the device, CUPTI's activity records, the ranks); the warm-up and the probe end by the clock
(in a team, by the leader's, at a call the ranks agree on); in the search a call counts units
of work and ends a rest, a settle or a block; after the decision it times the final arm.

One :class:`Phases` per :class:`~l2persist.process.live.Watcher`, called under its lock from
``point`` and ``tick``; its state is the owner's (``state``, ``t0``, ``probe_t``, ``unit``,
``units_now``, ``units_per_block``, ``points``, ``probe_counts``; the team's ``team_pending``,
``team_points``).
"""
from __future__ import annotations

import sys
import threading
import time

from .. import _core
from . import team as _team
from .part import Part
from .recorder import _NoRecords


MAX_RESTARTS = 3       # searches begun again (Search.restart), per cause, before one stops
# After graphs came in a search on the clock: how long the program's other calls (a sync after
# the capture, a graph the watcher does not know) may come before a known graph's replay, at
# which the search begins again; past it the search stops. The zoo's graphed training step
# syncs once between its capture and its first replay (H200, c67a953: it stopped there).
LOST_WAIT_S = 2.0


def _makes_own_graphs() -> bool:
    """A library that captures and instantiates CUDA graphs of its own is loaded (XLA)."""
    return any(m in sys.modules for m in ("jax", "jaxlib"))


class Phases(Part):
    """The phase state machine at each switch point."""

    def point(self, kind, torch_graph, seen=None):
        w = self.w
        if w.team_gave_up and sum(w.points.values()) % 256 == 0:
            w.ranks.release_peers()  # peers that met in time learn that this rank is not coming
        if seen is not None:
            seen.replays += 1
        w.points[kind] += 1
        if w.state == "search":        # before every replay while searching: first
            self.search_point(kind, torch_graph, seen)
            return
        if w.o.mode == "apply":
            w.launches.apply_point()
            return
        if w.state == "off":
            return
        if w.state == "done":
            if w._after is not None:
                w.search.count_after(kind, seen)
            return
        if w.state == "idle":
            self.start()
            if w.state == "off":
                return
            w.state = "warmup"
            w.t0 = time.perf_counter()
            return
        if self.is_unit(kind, seen):
            w.units_now += 1
        if w.state == "probe":
            key = (kind, w.known.sig(torch_graph)) if kind == "replay" else (kind,)
            w.probe_counts[key] = w.probe_counts.get(key, 0) + 1
        # Whether a capture is open is asked only where something could switch (a phase's or
        # a block's end): asking PyTorch costs a call, and this runs before every replay.
        if w.state in ("warmup", "probe"):
            if self.phase_over(None, kind):
                if w.state == "warmup":
                    w.probe.begin_probe()
                else:
                    w.probe.begin(kind, seen)

    def search_point(self, kind, torch_graph, seen):
        w = self.w
        if w._clock_lost:
            if w.gate.capture_open():
                return
            if kind == "replay" and seen is not None and w.restarts["graphs"] < MAX_RESTARTS:
                # the graphs' replays are the switch points from here (the clock never acts
                # beside graphs): begin again at one, where no capture is open
                w._clock_lost = False
                w.search.restart("the program began capturing CUDA graphs after the search had "
                                 "begun on the watcher's clock (a setup longer than --warmup): "
                                 "the search began again at its graphs' replays", "graphs")
            elif (kind == "replay" and seen is not None) or \
                    time.perf_counter() - w._clock_lost > LOST_WAIT_S:
                # restarted enough, or no replay of a graph it knows reaches the watcher: the
                # clock can no longer switch, so the search ends with what it has
                w._clock_lost = False
                self.stop_search("the program began capturing CUDA graphs after the search "
                                 "had begun on the watcher's clock, which never acts beside "
                                 "graphs: the search stopped here; a longer --warmup lets "
                                 "the graphs come first")
            return
        if w._first_block_due:
            if self.starts_block(kind, seen) and not w.gate.capture_open():
                w._first_block_due = False
                # what was launched since the probe drained (this call's or another graph's
                # replays) must not run in the block, as end_block and the settle drain
                w.device.synchronize()
                w.search.next_block(_core.activity_now())
            return
        r = w.resting
        if r is not None and r.get("unhooked") and "tail_t0" not in r \
                and not w.pace.begin_tail(r):
            # a call that reached the watcher with the gate closed (a capture's, one in
            # flight as it closed): not counted, its graph noted for the settle
            if kind == "replay":
                w.replayed.add(id(torch_graph))
            return
        if self.is_unit(kind, seen):
            w.units_now += 1
        if kind == "replay":    # a rest's replays too: their first launch after it settles
            w.replayed.add(id(torch_graph))
        if r is not None:
            if w.units_now >= r["units"] and not w.gate.capture_open():
                w.pace.end_rest(kind, torch_graph, self.starts_block(kind, seen))
            return
        if w.settling is not None:
            w.pace.settle(kind, torch_graph, self.starts_block(kind, seen))
            return
        if w.units_now >= w.units_per_block:
            if w.gate.capture_open():
                return             # never switch while a capture is open
            try:
                w.search.end_block()
            except _NoRecords as e:
                # the program's work changed after the probe (its setup's kernels were probed,
                # then its steady work ran in others: the H200 zoo's JAX program at 3dd46d2):
                # the search begins again a few times, alone, before it stops
                if w.team is None and w.restarts["work"] < MAX_RESTARTS:
                    w.search.restart(f"the search began again: {e} (the program's work "
                                     f"changed after the probe)", "work")
                    return
                self.stop_search(f"search stopped: {e} (the program's work changed after "
                                 f"l2persist first looked at its kernels, or another tool took "
                                 f"CUDA's activity records): run advise over the program's "
                                 f"steady work; a longer --warmup skips its setup")

    def stop_search(self, note: str):
        """The search ends here with the blocks it has, ``note`` saying why."""
        w = self.w
        w.notes.append(note)
        w.stopped = note           # the CLI says this, not the budget, for an undecided search
        w.result = _core.live_finish()
        w.search.decide()

    def phase_over(self, capturing: bool | None, kind: str = "replay") -> bool:
        """Whether the warm-up (or the probe) ends at this call. Alone: by this process's clock,
        never while a capture is open. In a team: every TEAM_EVERY-th call, by the leader's
        clock, where no rank is capturing (ranks count the same calls, so they agree at the
        same one). capturing None: asked here, only when it decides."""
        w = self.w
        if w.team_pending:
            if threading.get_ident() == w.thread:      # ranks count the same thread's calls
                w.ranks.join()
                if w.team is not None:
                    return False   # this call met the team: decisions count from the next
            elif time.perf_counter() - w.team_wait_t0 >= _team.TEAM_WAIT_S:
                w.ranks.give_up()      # the counting thread went quiet: no lockstep to keep
            if w.team_pending:
                return False       # the ranks have not met yet: nobody moves on alone
        now = time.perf_counter()
        if w.state == "warmup":
            due = now - w.t0 >= w.o.warmup_s
        else:
            due = w.probe.over(now - w.probe_t)
        if w.team is None:
            return due and not (w.gate.capture_open() if capturing is None else capturing)
        if kind == "sync" and (w.points["replay"] or w.points["mark"]):
            return False           # a rank's own syncs (logging on rank 0) are not shared
        w.team_points += 1
        if w.team_points % _team.TEAM_EVERY:
            return False
        if capturing is None:
            capturing = w.gate.capture_open()
        docs = w.team.gather({"due": due, "capturing": capturing})
        return bool(docs[0]["due"]) and not any(d["capturing"] for d in docs)

    def starts_block(self, kind, seen) -> bool:
        """Whether a block may begin at this call. Where the unit is a graph's replay, only at
        one: its launch comes after the block's start, as the launch of the call that ends a
        block (its last unit) comes after the block's end, so the block holds as many of the
        unit's launches as it counts units. Begun at a sync, it held one fewer: the first
        block where the probe ended at a sync (1/262 of `ddp`'s), and any block whose settle
        ended at one (on the CPU simulator, where the program syncs every seventh replay,
        some blocks in every run)."""
        unit = self.w.unit
        return unit is None or unit[0] != "replay" or self.is_unit(kind, seen)

    def is_unit(self, kind, seen) -> bool:
        """``seen``: the replayed graph as seen (None: not one the watcher knows)."""
        unit = self.w.unit
        if unit is None or unit[0] != kind:
            return False
        return kind != "replay" or (seen is not None and seen.signature == unit[1])

    def quiet(self) -> bool:
        """No call of the program is needed any more: decided (or stopped) with the watcher's
        own cost timed, and no peer left to tell that this rank went on alone."""
        w = self.w
        return (w.o.mode != "apply" and not w.o.keep_hooks and w.state in ("done", "off")
                and w._after is None and not w.team_gave_up)

    def start(self):
        """The first watched call: the device, its set-aside as found, CUPTI's activity
        records (paused while no graph exists), and the ranks under torchrun."""
        w = self.w
        if w.device is not None:
            return
        from .. import Device
        w.device = Device(w.o.device)
        w.default_limit = w.device.default_persisting_l2_limit
        w.limit_before = w.device.persisting_l2_limit
        try:
            _core.activity_begin(w.o.device)
            w.activity = True
            # Nothing reads the warm-up's records (the probe cuts its own stretch), and
            # recording costs the program's launches (an 8-kernel graph's replay +3.7-10.6 us
            # recording, +0.3-1.1 us paused, H200): while the program has made no graph, the
            # records wait for the probe. Not once a graph exists or is coming: whether CUPTI
            # records the nodes of an executable graph made while paused was not measured
            # (one made before CUPTI started is recorded once resumed, H200).
            # Nor beside XLA (JAX), whose kernels run in CUDA graphs it makes itself, which the
            # watcher cannot make again (H200 zoo at 6bbbe74: paused in the warm-up, the JAX
            # program's probe recorded no kernel at all).
            if not w.captures_begun and not _makes_own_graphs():
                _core.activity_record(False)
                w.paused = True
        except Exception as e:
            if w.activity:
                _core.activity_end()
                w.activity = False
            w.notes.append(f"activity records unavailable: {e}")
            w.state = "off"
        if w.o.world > 1 and w.o.mode != "apply" and w.state != "off":
            w.team_wait_t0 = time.perf_counter()
            w.ranks.join()
