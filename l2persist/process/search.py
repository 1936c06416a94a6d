"""The watcher's search driver: the blocks of the C search (``_core.live_*``: ended, the next
arm readied and installed), a search begun again, its decision, and the after-decision timing
of the final arm (the summary's ``watch_cost``). The probe before it, which makes the arms, is
process/probe.py.

One :class:`Search` per :class:`~l2persist.process.live.Watcher`, whose phase state machine
calls it; its state is the owner's (``unit``, ``units_per_block``, ``blocks``, ``arms``,
``targets``, ``result``, ``final_arm``, ``_after``).
"""
from __future__ import annotations

import time

from .. import _core
from . import clock as _clock
from .part import Part
from .recorder import Block

#: After the decision, this many units at least (8 blocks' worth if more) are timed with nothing
#: recorded, for the summary's watch_cost.
AFTER_UNITS = 64
# The after-decision timing gives up past this many of the program's calls or seconds (the
# unit no longer comes): the per-call hooks come off only once it has ended.
AFTER_CALLS_MAX = 200_000
AFTER_S_MAX = 120.0
#: A block's synchronization that waits this long at least after the next arm's graphs were
#: readied found the GPU still busy: the readying hid behind the block's queued work (a
#: synchronization of an idle device returns in tens of microseconds).
AHEAD_HIDDEN_MS = 0.1


class Search(Part):
    """The search's blocks, a search begun again, and its decision."""

    def restart(self, why: str, cause: str):
        """Back to the warm-up, as if watching began now, with ``why`` noted: graphs came after
        a search had begun on the watcher's own clock (which never acts beside graphs, so the
        program's replays are its switch points from here), and the blocks so far timed a
        program that is not the one running now. The device's default is put back (arm 1,
        no window), a rest under way is ended, and the warm-up, the probe and the search run
        again at the program's calls. Each ``cause`` ("graphs", "work") has restarts of its own
        (``phases.MAX_RESTARTS``): a long setup (torch.compile's, on the H200) spends some on
        blocks of a changing work before its graphs come, and must still restart at them."""
        w = self.w
        if w.rest_timer is not None:
            w.rest_timer.cancel()
            w.rest_timer = None
            if getattr(w, "clock", None) is not None:
                w.clock.hold(0)    # no rest holds its ticks back now
        if w.resting is not None:
            if w.resting.get("unhooked") and w.rest_hooks is not None:
                w.rest_hooks[1]()     # the per-call hooks' gate open again
            w.resting = None
        w.replay_events.stop()       # the next probe decides the timing again
        w.letgo.reattach()           # ... from the nodes' records: CUPTI again where let go
        w.timing, w.records_off = "nodes", False
        if w.activity and not w.paused:
            _core.activity_record(True)  # a block may have left them off (records_off)
        w._resume()                  # records on: graphs exist, the warm-up does not pause
        w.switcher.install(1)
        w.switcher.forget_arms()     # the graphs the new arms window are found again
        w.restarts[cause] += 1
        # what the abandoned probe said of its kernels (a compile's, say: "all of the warm-up's
        # GPU time ran in kernels that no window can reach") is not the program advised now
        if w.probe_notes:
            del w.notes[slice(*w.probe_notes)]
        w.probe_notes = None
        w.notes.append(why)
        # what the search measured and found, as at the start: its blocks, samples and keys,
        # the eager launches the probe logged (found again by the next probe), and the
        # figures of what watching cost (the pace divides them by the new search's time)
        w.blocks, w.recorded, w.key_sums, w.mix_ref, w.probe_keys = [], 0, {}, {}, {}
        w.units_now, w.settling, w.replayed = 0, None, set()
        w.unit, w.targets, w.arms, w.probe_counts = None, [], [], {}
        w.eager, w.unknown_streams = [], {}
        w.switch_ms, w.switch_work_ms, w.install_ms, w.windows_ms = [], [], [], []
        w.ahead_ms, w.ahead_hidden = [], 0
        w.hook_ns, w.hook_calls, w.hook_marks = 0, 0, []
        w.counting.calls = 0
        w.rests_capped, w.spanning, w.rest_s, w.rest_units = 0, 0, None, 0
        w.rest_ratios = []
        w.pace_corrections = []
        # the windows seen so far were the abandoned arms' (arm indices name new arms now)
        w.landing.forget()
        w._first_block_due = False
        w.search_t0, w.ungraphed = None, None    # the new search's, when it begins
        w.state = "warmup"
        w.t0 = time.perf_counter()
        _clock.start(w, again=True)   # the new warm-up and probe may need its ticks again

    def end_block(self):
        w = self.w
        if not w.blocks[-1].counted:
            self.end_landing(w.blocks[-1])
            return
        t_switch = time.perf_counter()
        ahead = self.ready_ahead()
        t_sync = time.perf_counter()
        w.device.synchronize()           # nothing launched under this arm runs after now
        end = _core.activity_now()
        t_synced = time.perf_counter()      # from here, the switch's own work
        if ahead is not None:
            w.ahead_ms.append(ahead)
            w.ahead_hidden += (t_synced - t_sync) * 1e3 >= AHEAD_HIDDEN_MS
        b = w.blocks[-1]
        b.end, b.units = end, w.units_now
        over = bool(w.o.budget_s) and time.perf_counter() - w.search_t0 > w.o.budget_s
        pace = self.pace_mark()
        rest = w.pace.rest_length()
        if w.team is not None:     # the leader's clock and pace: ranks switch together
            over, rest = self.leaders_pace(pace, over, rest)
        if over:
            self.pace_unspent(pace)
            w.recorder.record_pending()
            w.result = _core.live_finish()
            w.notes.append(f"the budget ({w.o.budget_s:g} s) ran out before a decision")
            self.decide()
            return
        arm = _core.live_next()
        while arm == -2:
            w.recorder.record_pending()
            arm = _core.live_next()
        if arm == -1:
            self.pace_unspent(pace)
            w.result = _core.live_result()
            self.decide()
            return
        t_install = time.perf_counter()
        w.windows_ms.append(w.switcher.install(arm, fresh=rest > 0))
        done = time.perf_counter()
        # the search's bookkeeping (records flushed and cut, a team's gathers) and the install:
        # what a switch costs the program beyond the synchronization's wait. The readying ahead
        # is not in it: it comes before the synchronization, so the block's wall (its end is
        # stamped after both) carries it already (counted here too at 94f3501, it was counted
        # twice: a review's find)
        w.switch_work_ms.append((done - t_synced) * 1e3)
        w.install_ms.append((done - t_install) * 1e3)
        w.switch_ms.append((done - t_switch) * 1e3)
        w.rest_units = rest
        if rest:
            w.pace.begin_rest(arm, rest)
        else:
            self.next_block(_core.activity_now(), arm)

    def pace_mark(self) -> tuple:
        """Where the pace's figures stand before a rest is sized: Pace.rest_length appends
        a correction and a cap (the budget's ratio) and counts a capped rest."""
        w = self.w
        return len(w.pace_corrections), len(w.rest_ratios), w.rests_capped

    def pace_unspent(self, mark: tuple):
        """The rest sized since ``mark`` never runs (the search ends): its figures are not
        the summary's, which says what sized the rests that ran."""
        w = self.w
        del w.pace_corrections[mark[0]:], w.rest_ratios[mark[1]:]
        w.rests_capped = mark[2]

    def leaders_pace(self, mark: tuple, over: bool, rest: int) -> tuple[bool, int]:
        """A team's ranks switch together: each sends its clock (the budget spent) and the
        rest its pace sized, with the figures that sized it, and every rank takes the
        leader's, figures too, so that each rank's summary says what sized its rests."""
        w = self.w
        lead = w.team.gather({"over": over, "rest": rest,
                              "k": w.pace_corrections[mark[0]:],
                              "ratio": w.rest_ratios[mark[1]:],
                              "capped": w.rests_capped - mark[2]})[0]
        self.pace_unspent(mark)
        w.pace_corrections += [float(k) for k in lead.get("k", [])]
        w.rest_ratios += lead.get("ratio", [])
        w.rests_capped += int(lead.get("capped", 0))
        return bool(lead["over"]), int(lead["rest"])

    def ready_ahead(self) -> float | None:
        """Before the block's synchronization: the next arm's graphs readied
        (Switcher.ready) where the core already knows that arm (inside a round), alone (ranks
        switch together after their gather), where no other thread has made watched calls
        (its replays go on while this one switches: they would launch the next arm's
        executables inside this block) and within the budget; the ms it took, or None where
        nothing was readied.
        Its cost reaches the program only where the GPU's queue ran dry before it ended: it
        then lengthens the block's wall, which the pace counts as watching's."""
        w = self.w
        if not w.o.ready_ahead or w.team is not None or w.other_threads or \
                not w.switcher.windowed_graphs():
            return None
        if w.o.budget_s and time.perf_counter() - w.search_t0 > w.o.budget_s:
            return None
        arm = _core.live_peek()
        if arm < 0:
            return None
        return w.switcher.ready(arm, fresh=w.rest_units > 0)

    def next_block(self, stamp, arm=None):
        w = self.w
        w.steps += 1
        if arm is None:
            arm = _core.live_next()
            w.switcher.install(arm)
            stamp = _core.activity_now()
        attrs = w.landing.before_block(arm)
        # Where events time the graphs and the records are off in the blocks, a landing
        # block (records on, to read its windows from the nodes) is not given to the search:
        # the records' own GPU time falls inside the replays' event pairs, and such blocks
        # read 6.6-8.7 % (decode_big) and 20-36 % (compile_graphs) slower than the arm's
        # other blocks (H200, 94f3501). The arm's counted block follows it (end_landing).
        w.blocks.append(Block(arm, stamp, attrs=attrs, counted=not (attrs and w.records_off)))
        w.records_in_block(attrs)
        w.units_now = 0
        w.replayed = set()

    def end_landing(self, b):
        """A landing block that the search never issued ends: the GPU drained (its kernels,
        recorded, must not run in the counted block), then the block the search issued begins
        under the same arm, with no switch and the records off."""
        w = self.w
        w.steps += 1
        w.device.synchronize()
        b.end, b.units = _core.activity_now(), w.units_now
        self.next_block(b.end, b.arm)
        # the rest before the landing block is the issued block's rest, and the landing block
        # its settle (recorded, uncounted): the pace's rest-then-block pair is the issued block's
        issued = w.blocks[-1]
        issued.rest_ns, issued.rest_units = b.rest_ns, b.rest_units
        issued.rest_wall_ns, issued.rest_unhooked = b.rest_wall_ns, b.rest_unhooked
        b.rest_ns = b.rest_units = b.rest_wall_ns = 0
        b.rest_unhooked = False
        issued.settle_ns = b.settle_ns + b.end - b.start
        issued.settle_units = b.settle_units + b.units

    def decide(self):
        w = self.w
        r = w.result
        if w.o.mode == "verify" and w.verify_base is not None:
            keep = w.verify_base    # the plan's own state: verify changes nothing for good
        elif w.o.mode == "verify":
            keep = 2 if r["helps"] else r["baseline"]
        else:
            keep = r["winner"] if r["helps"] and r["winner"] >= 0 else r["baseline"]
        w.switcher.install(keep)
        w.final_arm = keep
        w.state = "done"
        # What watching cost: the final arm's units are timed again, unrecorded, once decided.
        # (not where the unit is the clock's tick: no program call would time it)
        w._after = {"need": max(AFTER_UNITS, 8 * w.units_per_block), "units": 0,
                    "t0": None, "since": time.perf_counter(), "calls": 0} \
            if w.unit and w.unit[0] != "tick" else None
        w.decision_s = time.perf_counter() - w.t0
        w.replay_events.stop()
        _core.activity_end()    # launch attributes off with the records
        w.landed_on = False
        w.activity = False      # nothing records now: no replay needs a flag (a lookup each)
        if w._after is None:    # else the timing's synchronizations still ask the count
            w.gate.end_tracking(release=not w.o.exit_after)
        w.report.write_result()
        if w.o.exit_after:
            raise SystemExit(0)

    def count_after(self, kind, seen):
        """Wall time per unit of work under the final arm with nothing recorded or switched
        (after the decision), beside the same arm's recorded blocks: the watcher's own cost to
        the program, measured in the program (the summary's ``watch_cost``)."""
        w = self.w
        a = w._after
        a["calls"] += 1
        if a["calls"] > AFTER_CALLS_MAX or time.perf_counter() - a["since"] > AFTER_S_MAX:
            # the unit stopped coming (a new shape captured, the program idle): no figure,
            # and the hooks must not stay on for it
            w._after = None
            w.notes.append("the wall time after the decision was not timed: the unit of "
                           "work did not come often enough")
            w.gate.end_tracking(release=not w.o.exit_after)
            return
        if not w.phases.is_unit(kind, seen):
            return
        if a["t0"] is None:
            # from a unit's boundary on, the GPU drained at both ends as around each block:
            # a GPU-bound program's host runs ahead of its GPU, and host time alone read a
            # training step at 0.30 ms a unit against its blocks' 0.66 (H100, 160237b): the
            # host's launch rate, not the program's throughput
            if not w.gate.capture_open():
                w.device.synchronize()
                a["t0"] = time.perf_counter()
            return
        a["units"] += 1
        if a["units"] >= a["need"] and not w.gate.capture_open():
            w.device.synchronize()
            now = time.perf_counter()
            w.after_decision = {"units": a["units"],
                                "wall_ms_per_unit": (now - a["t0"]) / a["units"] * 1e3}
            w._after = None
            w.gate.end_tracking(release=not w.o.exit_after)

