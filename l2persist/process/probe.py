"""The watcher's probe: after the warm-up, a short steady stretch that says what a unit of work
is, how many units a block holds, the mix the blocks are priced at, which kernels take the
GPU's time (the targets' weights), and so the arms the search tries (process/search.py runs
them). A team's ranks take the leader's unit, blocks and targets.

One :class:`Probe` per :class:`~l2persist.process.live.Watcher`, whose phase state machine
calls it; its state is the owner's (``probe_counts``, ``unit``, ``units_per_block``,
``mix_ref``, ``targets``, ``arms``, ``ungraphed``).
"""
from __future__ import annotations

import time

from .. import _core
from .._format import kernel_label
from . import clock as _clock
from .part import Part

#: advise notes the share of the warm-up's GPU time in kernels no captured graph holds from this
#: share on (their buffers get no window: see Probe.note_ungraphed).
UNGRAPHED_NOTE = 0.05
#: The probe lasts max(PROBE_MIN_S, warmup / 2) at most, and ends sooner, after PROBE_MIN_S at
#: least, once the program's unit of work (its mark, else its busiest graph's replay) has come
#: PROBE_UNITS times: what it measures (the unit's rate, each launch key's launches per unit,
#: the kernels' weights) is steady by then on a program that replays that fast, and its records
#: cost a recorded replay 15-20 % of a 250-node graph's time (H200, `observing-parts`'
#: `cupti_on`, 6d60da2): `decode_big`'s 1 s probe held about 2,000 replays.
#: L2PERSIST_FULL_PROBE=1 keeps the whole length (Options.full_probe; zoo-advise --full-probe).
PROBE_MIN_S = 0.25
PROBE_UNITS = 256


class Probe(Part):
    """The probe after the warm-up, and the arms it makes."""

    def begin_probe(self):
        """After the warm-up (imports, compiles, captures settle): a short steady stretch that
        says what a unit of work is, how many units a block holds, and which kernels take the
        GPU's time (the targets' weights)."""
        w = self.w
        w.probe_counts = {}               # (kind, signature) -> calls in the probe
        w.device.synchronize()
        w._resume()                 # kernels launched from here on are recorded
        # graphs recorded in the warm-up, then paused (Watcher.warm_records): made again,
        # recording, so that the probe's records of them are whole
        if getattr(w, "warm_paused", False):
            w.warm_paused = False
            for g in list(w.graphs.values()):
                if g.recorded_exec and g.ref() is not None:
                    g.change_windows([], fresh=True)
        w.replay_events.start()     # --replay-events: and the hooked replays timed by events
        w.launches.begin()
        w._warm_ns = _core.activity_now()
        w.probe_t = time.perf_counter()
        w.state = "probe"

    def over(self, elapsed: float) -> bool:
        """Whether the probe has seen enough after ``elapsed`` seconds (PROBE_UNITS)."""
        w = self.w
        if elapsed >= max(PROBE_MIN_S, w.o.warmup_s / 2):
            return True
        if elapsed < PROBE_MIN_S or w.o.full_probe:
            return False
        unit = self.program_unit()
        return unit != ("sync",) and w.probe_counts.get(unit, 0) >= PROBE_UNITS

    def program_unit(self):
        """The program's own unit so far: a mark, else the busiest graph's replay, else a
        sync."""
        c = self.w.probe_counts
        replays = {k: v for k, v in c.items() if k[0] == "replay" and k[1] is not None}
        if c.get(("mark",)):
            return ("mark",)
        return max(replays, key=replays.get) if replays else ("sync",)

    def choose_unit(self, elapsed: float):
        """A mark, else the busiest graph's replay, else a sync; the clock's tick where that
        comes less than once a block (a program whose syncs are implicit makes none)."""
        w = self.w
        c = w.probe_counts
        unit = self.program_unit()
        if c.get(("tick",)) and c.get(unit, 0) / elapsed * w.o.block_s < 1:
            unit = ("tick",)
        return unit

    def begin(self, kind=None, seen=None):
        """The probe ends at this call (``kind``, ``seen``: the call's, None: any): the unit
        and the arms are chosen, and the search's first block begins here or at the next call
        it may begin at."""
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
        w.probe_s = elapsed
        w.unit = self.choose_unit(elapsed)
        if w.unit != ("tick",):
            _clock.quiet(w)        # the program's own calls are every switch point now
        units = w.probe_counts.get(w.unit, 0)
        w.probe_units = units
        # the reference the blocks are priced at: each launch key's launches in the probe
        # (the program's own mix, under the device's default) per unit of work (l2p_live_mix)
        w.mix_ref, w.mix_units = probe.get("by_key", {}), max(1, units)
        if w.o.block_units:
            w.units_per_block = w.o.block_units
        else:
            w.units_per_block = max(1, round(units / elapsed * w.o.block_s))
        w.kernel_ns_warmup = {k: v[0] for k, v in by_name.items()}
        said = len(w.notes)        # the probe's own notes from here (a restart drops them)
        w.probe_keys = w.mix_ref   # all of them, for the per-launch table
        w.mix_ref = self.priced_keys(w.mix_ref)
        w.launches.from_log()
        # the events alone time the search from here: CUPTI is let go where nothing needs it
        # (after the launch log is taken: it is CUPTI's)
        w.letgo.after_probe()
        if w.o.mode == "verify" and w.plan_doc is not None:
            for g in w.eager:
                w.switcher.apply_plan_windows(g, install=False)
        w.targets = w.switcher.find_targets(w.kernel_ns_warmup)
        self.note_ungraphed()
        w.probe_notes = (said, len(w.notes))   # notes are only appended: a slice of them
        weights = [t.weight for t in w.targets]
        if w.team is not None:
            weights = self.follow_leader()
            if w.team is not None:   # in lockstep: its note is the probe's, said again after
                w.probe_notes = (said, len(w.notes))   # a restart (going alone is for good)
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
        # asked again: taking the launch log let the lock go; and a block begins only at a call
        # it may begin at (Phases.starts_block)
        if (kind is not None and not w.phases.starts_block(kind, seen)) or \
                w.gate.capture_open():
            w._first_block_due = True   # it begins at the next such call with no capture open
            return
        w.search.next_block(now)

    def priced_keys(self, by_key: dict) -> dict:
        """The probe's launch keys the blocks are priced at: all but the kernels that wait on
        other ranks (a collective's time on one rank is its wait for the slowest peer:
        l2p_live_waits_on_peers), unless nothing else ran. Says what was left out."""
        names = _core.activity_keys()
        waits = {k for k in by_key
                 if 0 <= k < len(names) and _core.kernel_waits_on_peers(names[k][0])}
        kept = {k: v for k, v in by_key.items() if k not in waits}
        if not waits or not kept:
            return by_key
        share = (sum(by_key[k][0][0] for k in waits)
                 / max(1e-9, sum(v[0][0] for v in by_key.values())))
        self.w.notes.append(f"the collectives' kernels ({100 * share:.0f} % of the probe's GPU "
                            f"time, {len(waits)} launch shape(s)) are left out of each block's "
                            f"time: on one rank they mostly wait for the slowest peer")
        return kept

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
        from .team import adopt_targets, shared_weights, target_key
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
        w.targets, _missing = adopt_targets(w.targets, lead["targets"])
        weights, lacking = shared_weights(docs)
        if lacking:
            said = ", ".join(f"rank {r} lacks {n}" for r, n in sorted(lacking.items()))
            w.notes.append(f"of rank 0's {len(weights)} buffers a window can reach, some are "
                           f"not in every rank's graphs at the same place and size ({said}): "
                           f"no plan tried windows those, so that every rank runs the plan "
                           f"it is timed under")
        return weights

    @property
    def warm_stamp(self):
        return getattr(self.w, "_warm_ns", None)
