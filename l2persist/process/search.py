"""The watcher's search driver: the probe after the warm-up (the unit of work, the block's
length, the mix the blocks are priced at, the targets and arms), the blocks of the C search
(``_core.live_*``: begun, ended, the next arm installed), its decision, and the after-decision
timing of the final arm (the summary's ``watch_cost``).

One :class:`Search` per :class:`~l2persist.process.live.Watcher`, whose phase state machine
calls it; its state is the owner's (``unit``, ``units_per_block``, ``blocks``, ``arms``,
``targets``, ``result``, ``final_arm``, ``_after``).
"""
from __future__ import annotations

import time

from .. import _core
from .._format import kernel_label
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
#: advise notes the share of the warm-up's GPU time in kernels no captured graph holds from this
#: share on (their buffers get no window: see Search.note_ungraphed).
UNGRAPHED_NOTE = 0.05
#: A block's synchronization that waits this long at least after the next arm's graphs were
#: readied found the GPU still busy: the readying hid behind the block's queued work (a
#: synchronization of an idle device returns in tens of microseconds).
AHEAD_HIDDEN_MS = 0.1


class Search(Part):
    """The probe, the search's blocks and its decision."""

    def begin_probe(self):
        """After the warm-up (imports, compiles, captures settle): a short steady stretch that
        says what a unit of work is, how many units a block holds, and which kernels take the
        GPU's time (the targets' weights)."""
        w = self.w
        w.probe_counts = {}               # (kind, signature) -> calls in the probe
        w.device.synchronize()
        w._resume()                 # kernels launched from here on are recorded
        w.replay_events.start()     # --replay-events: and the hooked replays timed by events
        w.launches.begin()
        w._warm_ns = _core.activity_now()
        w.probe_t = time.perf_counter()
        w.state = "probe"

    def choose_unit(self, elapsed: float):
        """A mark, else the busiest graph's replay, else a sync; the clock's tick where that
        comes less than once a block (a program whose syncs are implicit makes none)."""
        w = self.w
        c = w.probe_counts
        replays = {k: v for k, v in c.items() if k[0] == "replay" and k[1] is not None}
        if c.get(("mark",)):
            unit = ("mark",)
        elif replays:
            unit = max(replays, key=replays.get)
        else:
            unit = ("sync",)
        if c.get(("tick",)) and c.get(unit, 0) / elapsed * w.o.block_s < 1:
            unit = ("tick",)
        return unit

    def begin(self):
        w = self.w
        dev = w.device
        dev.synchronize()
        now = _core.activity_now()
        w.replay_events.harvest()
        _core.activity_flush()
        warm = self.warm_stamp
        # the timing (nodes' records or events) is chosen here, where --replay-events asked
        probe = w.replay_events.decide([warm, now]) if warm and now > warm else {}
        if not probe.get("by_key") and self.may_probe_again():
            self.probe_again()
            return
        by_name = probe.get("by_name", {})
        elapsed = max(1e-6, time.perf_counter() - w.probe_t)
        w.unit = self.choose_unit(elapsed)
        if w.unit != ("tick",):
            _clock.quiet(w)        # the program's own calls are every switch point now
        units = w.probe_counts.get(w.unit, 0)
        # the reference the blocks are priced at: each launch key's launches in the probe
        # (the program's own mix, under the device's default) per unit of work (l2p_live_mix)
        w.mix_ref, w.mix_units = probe.get("by_key", {}), max(1, units)
        if w.o.block_units:
            w.units_per_block = w.o.block_units
        else:
            w.units_per_block = max(1, round(units / elapsed * w.o.block_s))
        w.kernel_ns_warmup = {k: v[0] for k, v in by_name.items()}
        said = len(w.notes)        # the probe's own notes from here (a restart drops them)
        w.launches.from_log()
        if w.o.mode == "verify" and w.plan_doc is not None:
            for g in w.eager:
                w.switcher.apply_plan_windows(g, install=False)
        w.targets = w.switcher.find_targets(w.kernel_ns_warmup)
        self.note_ungraphed()
        w.probe_notes = (said, len(w.notes))   # notes are only appended: a slice of them
        weights = [t.weight for t in w.targets]
        if w.team is not None:
            weights = self.follow_leader()
        p = dev.properties
        w.verify_base = None
        if w.o.mode == "verify":
            w.arms = w.switcher.verify_arms()
            w.verify_base = w.switcher.baseline_of(w.arms[2])
        if w.o.mode == "verify" and w.verify_base is None:
            _core.live_begin(3, confirm_only=True, min_gain=w.o.min_gain,
                             target_halfwidth=_core.live_defaults()["verify_halfwidth"])
        else:
            # advise, or verify of a plan that is a baseline ("don't"): checking it against
            # itself would always say it holds, so the question becomes whether any arm helps
            # now (a short search over the same arms advise tries)
            w.arms = _core.live_arms([t.size for t in w.targets], weights,
                                     granule=dev.persisting_l2_granule,
                                     persisting_max=p.persisting_l2_cache_max_size,
                                     l2_bytes=p.l2_cache_size)
            _core.live_begin(len(w.arms), min_gain=w.o.min_gain)
        w.state = "search"
        w.search_t0 = time.perf_counter()
        w.hook_marks = [(w.search_t0, w.hook_ns)]
        if w.gate.capture_open():   # asked again: taking the launch log let the lock go
            w._first_block_due = True   # it begins at the next call with no capture open
            return
        self.next_block(now)

    def may_probe_again(self) -> bool:
        """Alone (ranks would have to agree on it: in a team the search begins as before, and
        stops at its first block), and while the empty probes have taken less than the search's
        budget: a program whose kernels never reach CUPTI's records is then searched as before,
        stops at its first block, and its hooks come off."""
        w = self.w
        return w.team is None and time.perf_counter() - w.t0 < w.o.warmup_s + w.o.budget_s

    def probe_again(self):
        """No kernel of the program ran in the probe's stretch: it is still setting up (a
        compile, a capture, a model's load: the clock's ticks came, its work did not). A
        search begun there would have nothing to price its blocks at (the H200 zoo at 6bbbe74:
        a graphed training step and torch.compile's graphs stopped at their first block, "the
        probe recorded no kernel"). The probe begins again; a program whose kernels never
        reach CUPTI's records ends in the probe, and its words say how many probes were empty
        (``empty_probes``)."""
        w = self.w
        w.empty_probes += 1
        w.launches.take()            # the log begins again with the probe
        self.begin_probe()

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
        w.blocks, w.recorded, w.key_sums, w.mix_ref = [], 0, {}, {}
        w.units_now, w.settling, w.replayed = 0, None, set()
        w.unit, w.targets, w.arms, w.probe_counts = None, [], [], {}
        w.eager, w.unknown_streams = [], {}
        w.switch_ms, w.switch_work_ms, w.install_ms, w.windows_ms = [], [], [], []
        w.ahead_ms, w.ahead_hidden = [], 0
        w.hook_ns, w.hook_calls, w.hook_marks = 0, 0, []
        w.rests_capped, w.spanning, w.rest_s, w.rest_units = 0, 0, None, 0
        w.rest_ratios = []
        # the windows seen so far were the abandoned arms' (arm indices name new arms now)
        w.landing.forget()
        w._first_block_due = False
        w.search_t0, w.ungraphed = None, None    # the new search's, when it begins
        w.state = "warmup"
        w.t0 = time.perf_counter()
        _clock.start(w, again=True)   # the new warm-up and probe may need its ticks again

    def note_ungraphed(self):
        """Say how much of the warm-up's GPU time ran in kernels no window reaches: in no
        captured graph, and not among the eager launches logged on streams known to live
        (streams.py). Their buffers are not tried, and a verdict of "don't" says nothing about
        them."""
        w = self.w
        # by name: a kernel launched both eagerly and in a graph counts as the graph's, and
        # kernels past the log's name table (unknown) count in the total only, so the share
        # is a lower bound
        in_graphs = {n for g in w.all_graphs() + w.eager for n in g.names}
        ns = w.kernel_ns_warmup
        total = sum(ns.values())
        if not total > 0:
            w.ungraphed = {"share": None, "heaviest": []}   # no records: nothing to say
            return
        outside = {k: v for k, v in ns.items()
                   if k not in in_graphs and k != "(other kernels)" and v > 0}
        share = sum(outside.values()) / total
        w.ungraphed = {"share": share,
                       "heaviest": sorted(outside, key=outside.get, reverse=True)[:3]}
        if w.o.mode == "advise" and share >= UNGRAPHED_NOTE:
            names = ", ".join(kernel_label(k) for k in w.ungraphed["heaviest"])
            how = "all" if share >= 0.995 else f"at least {100 * share:.0f} %"
            w.notes.append(f"{how} of the warm-up's GPU time ran in kernels that no window "
                           f"can reach (no captured graph holds them, and no launch of "
                           f"theirs on a stream known to live was logged; the heaviest: "
                           f"{names}): their buffers were not tried")

    def follow_leader(self) -> list:
        """Team: the leader's unit of work, block length and targets (in its order, with its
        weights) are every rank's, so the arm table and the blocks are the same on all. Where a
        rank never made the leader's unit of work (ranks run different graphs: pipeline
        stages) or the GPUs differ (arm tables would differ), every rank sees it in the same
        documents and all go on alone, with a note."""
        w = self.w
        from .team import adopt_targets, target_key
        p = w.device.properties
        docs = w.team.gather({"unit": list(w.unit), "units": w.units_per_block,
                              "targets": [target_key(t) for t in w.targets],
                              "weights": [t.weight for t in w.targets],
                              "counts": [[list(k), v] for k, v in w.probe_counts.items()],
                              "facts": [w.device.persisting_l2_granule,
                                        p.persisting_l2_cache_max_size, p.l2_cache_size]})
        lead = docs[0]
        unit = tuple(lead["unit"])
        lacking = [r for r, d in enumerate(docs)
                   if not any(tuple(k) == unit and v for k, v in d["counts"])]
        differ = [r for r, d in enumerate(docs) if d["facts"] != lead["facts"]]
        if lacking or differ:
            why = (f"rank(s) {lacking} never made the leader's unit of work" if lacking else
                   f"rank(s) {differ} have another GPU than rank 0")
            w.notes.append(f"ranks not in lockstep: {why}; each rank advised alone")
            w.team.leave()
            w.team = None
            return [t.weight for t in w.targets]
        w.unit = unit
        w.units_per_block = int(lead["units"])
        w.targets, missing = adopt_targets(w.targets, lead["targets"])
        if missing:
            w.notes.append(f"rank {w.o.rank}: {missing} of the leader's targets are not "
                           "in this rank's graphs; their windows land nowhere here")
        return [float(x) for x in lead["weights"]]

    def end_block(self):
        w = self.w
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
        rest = w.pace.rest_length()
        if w.team is not None:     # the leader's clock and pace: ranks switch together
            lead = w.team.gather({"over": over, "rest": rest})[0]
            over, rest = bool(lead["over"]), int(lead["rest"])
        if over:
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
            w.result = _core.live_result()
            self.decide()
            return
        t_install = time.perf_counter()
        w.windows_ms.append(w.switcher.install(arm, fresh=rest > 0))
        done = time.perf_counter()
        # the search's bookkeeping (records flushed and cut, a team's gathers) and the install:
        # what a switch costs the program beyond the synchronization's wait
        w.switch_work_ms.append((done - t_synced) * 1e3)
        w.install_ms.append((done - t_install) * 1e3)
        w.switch_ms.append((done - t_switch) * 1e3)
        w.rest_units = rest
        if rest:
            w.pace.begin_rest(arm, rest)
        else:
            self.next_block(_core.activity_now(), arm)

    def ready_ahead(self) -> float | None:
        """Before the block's synchronization: the next arm's graphs readied
        (Switcher.ready) where the core already knows that arm (inside a round), alone (ranks
        switch together after their gather) and within the budget; the ms it took, or None.
        Its cost reaches the program only where the GPU's queue ran dry before it ended: it
        then lengthens the block's wall, which the pace counts as watching's."""
        w = self.w
        if not w.o.ready_ahead or w.team is not None or not w.switcher.windowed_graphs():
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
        w.blocks.append(Block(arm, stamp, attrs=w.landing.before_block(arm)))
        w.records_in_block(w.blocks[-1].attrs)
        w.units_now = 0
        w.replayed = set()

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

    @property
    def warm_stamp(self):
        return getattr(self.w, "_warm_ns", None)
