"""What watching costs the program, measured in it: the summary's ``watching`` (the switches'
work and the recorded blocks' wall beyond the rests' rate, the hooks, what the arms tried cost),
whether walls per unit can be compared at all under the program's mix, and the correction the
pace (process/pace.py) scales its model of a cycle's cost by, from the same measure over its
newest cycles.
"""
from __future__ import annotations

import statistics

from .. import _core
from .part import Part
from .summary import WALL_SPREAD_MAX, _relative_spread

#: The pace's model of a cycle's cost is scaled by what its newest cycles measured, at most
#: this much, and only once this many pairs exist (one early stall among three pairs would
#: size the next rests for four times the cost: Costs.correction).
CORRECTION_MAX = 4.0
CORRECTION_PAIRS = 8
#: What the summary's figures cover (its ``covers``): where the unit is the clock's tick, only
#: the watcher's own time (Costs.ticks); else the records' cost on the program's pace too.
COVERS_TICKS = "the watcher's time"
COVERS_ALL = "records and switches"


class Costs(Part):
    """What watching and exploring cost, over the watcher's blocks."""

    def correction(self, pairs: list, switch_s: float, rest_s: float, block_s: float,
                   recorded: int) -> float:
        """What the newest cycles measured watching to add (the summary's measure, over the
        same cycles: Costs.added) over what the pace's model says for them (a median switch,
        and the recorded units' median cost beyond the rests' median rate), from 1 up to
        CORRECTION_MAX. The bound is on the totals, and a median misses what comes now and
        then (a switch that stalls on a collection or a peer): on two H200s `ddp`'s summary
        measured 1.5-1.6 times the bound the pace sized its rests for (0.40 % against 0.25 % at
        3f61e5f, 0.74-0.78 % against about 0.5 % at 77cefa3; whether the rests stopped at their
        cap was not kept). The core then sizes the rest from the model scaled by it
        (l2p_live_rest_units: its switch and the blocks' excess over the rests' rate)."""
        model = len(pairs) * (switch_s + recorded * max(0.0, block_s - rest_s)) * 1e9
        if not model > 0 or not self.comparable(pairs)["comparable"]:
            return 1.0      # (the program's mix moves its walls: the summary measures none)
        added, _wall = self.added(pairs, self.w.switch_work_ms[-len(pairs):])
        return min(max(added / model, 1.0), CORRECTION_MAX)

    def ticks(self) -> bool:
        """Whether the search's unit is the clock's tick (a program with no call of its own to
        count: process/clock.py). A tick's wall is the clock's period whether the program ran
        fast or slow in it, so walls per unit say nothing of the program's own pace: what the
        records cost its launches (and what an arm tried cost it) cannot be seen that way. A
        block longer than its ticks' period is still time the watcher took (its switch, its
        synchronizations), and is still counted."""
        return tuple(getattr(self.w, "unit", None) or ()) == ("tick",)

    @staticmethod
    def added(blocks: list, work_ms: list) -> tuple[float, float]:
        """What watching added over these blocks' cycles (ns), and their wall (ns): the
        switches' work (``work_ms``), and the recorded blocks' and settles' wall beyond what
        their units take unrecorded at the rests' rate (the rests' total wall per unit: a
        total, as the share is one; a median would count a program's occasional slow unit, an
        eager prefill, as watching's). The rests' wall is the whole of each, an unhooked one's
        too."""
        rested = [b for b in blocks if b.rest_units]
        unrec = sum(b.rest_ns for b in rested) / sum(b.rest_units for b in rested)  # ns/unit
        work = sum(work_ms) * 1e6
        # the settles are recorded too: watched time, counted with the blocks
        recorded_ns = sum(b.end - b.start + b.settle_ns for b in blocks)
        units = sum(b.units + b.settle_units for b in blocks)
        wall = work + recorded_ns + sum(b.rest_wall_ns or b.rest_ns for b in rested)
        return work + recorded_ns - unrec * units, wall

    def watching(self) -> dict:
        """What watching cost the program during the search, measured in it: the switches' work,
        and the recorded blocks' (and settles') wall beyond what their units take unrecorded
        (the rests' total wall per unit: a total, as the share is one; a median would count a
        program's occasional slow unit, an eager prefill, as watching's), as a share of the
        search's wall time (switches, rests, settles and blocks). record_cost compares the
        medians per unit (a typical unit, recorded against not)."""
        w = self.w
        done = [b for b in w.blocks if b.end and b.units]
        rested = [b for b in done if b.rest_units]
        out = {"max_overhead": (w.o.max_overhead if w.o.max_overhead is not None
                                else _core.live_defaults()["max_overhead"]),
               "rest_units": w.rest_units, "rests": len(rested),
               "rests_capped": w.rests_capped,
               "max_rest_ratio": (statistics.median(w.rest_ratios[-16:]) if w.rest_ratios
                                  else _core.live_defaults()["max_rest_ratio"]),
               "pace_correction": (statistics.median(w.pace_corrections[-16:])
                                   if w.pace_corrections else None),
               "recorded_units": sum(b.units for b in done),
               "switch_work_ms_median": (statistics.median(w.switch_work_ms)
                                         if w.switch_work_ms else None),
               "install_ms_median": (statistics.median(w.install_ms)
                                     if w.install_ms else None),
               "windows_ms_median": (statistics.median(w.windows_ms)
                                     if w.windows_ms else None),
               "ahead_ms_median": (statistics.median(w.ahead_ms) if w.ahead_ms else None),
               "ahead": len(w.ahead_ms), "ahead_hidden": w.ahead_hidden,
               "record_cost": None, "added_share": None, "hooks_share": None,
               "observing_share": None, "exploring_share": None, "exploring_worst": None,
               "covers": None}
        # an unhooked rest counted only its tail: its units estimated at the tail's rate
        out["rest_units_total"] = round(sum(
            b.rest_units * max(1.0, (b.rest_wall_ns or b.rest_ns) / b.rest_ns)
            for b in rested if b.rest_ns))
        out["rests_unhooked"] = sum(1 for b in rested if b.rest_unhooked)
        counted = out["recorded_units"] + out["rest_units_total"]
        out["recorded_share"] = out["recorded_units"] / counted if counted else None
        if not rested:
            return out
        unrec = sum(b.rest_ns for b in rested) / sum(b.rest_units for b in rested)  # ns/unit
        med_unrec = statistics.median(b.rest_ns / b.rest_units for b in rested)
        rec = statistics.median((b.end - b.start) / b.units for b in rested)
        ticks = self.ticks()
        added, wall = self.added(done, w.switch_work_ms)
        # the hooks' own time on the calls that switched nothing, paid in rests and blocks
        # alike: not in added_share; observing_share is the two together (what the search's
        # observing costs the program, but for the hooks' outer frames and CUPTI attached,
        # which tools/investigations/search-cost measures against the program run plain)
        hooks = w.hook_ns / wall
        out.update(self.exploring(done, wall))
        out.update(record_cost=rec / med_unrec - 1, added_share=max(0.0, added) / wall,
                   hooks_share=hooks, hook_us_per_call=(w.hook_ns / w.hook_calls / 1e3
                                                        if w.hook_calls else None),
                   # of those calls, the replays and syncs that only counted, in the hook
                   # (fastcount.py)
                   hook_calls=w.hook_calls, fast_calls=w.counting.calls,
                   fast_us_per_call=w.counting.ns / 1e3 if w.counting.ns else None,
                   observing_share=max(0.0, added) / wall + hooks,
                   unrecorded_ms_per_unit=unrec / 1e6,
                   settle_units=sum(b.settle_units for b in done),
                   spanning_records=w.spanning)
        out.update(self.comparable(rested))
        # what the figures cover: the records' cost on the program's own pace, or only the
        # watcher's own time (its switches, its blocks beyond their ticks' period) where the
        # unit is the clock's tick (advise --placebo, fixed work timed against plain runs,
        # measures the rest: at 0cc5875 on an H200, three of the four tick programs' advise
        # loops ran 1.12-1.19x their plain runs, one pair each, where this figure said
        # 0.8-1.0 %)
        out["covers"] = COVERS_TICKS if ticks else COVERS_ALL
        if ticks:
            out.update(record_cost=None, exploring_share=None, exploring_worst=None)
        if not out["comparable"]:
            # every figure above but the hooks' (timed directly) compares walls per unit
            # across rests and blocks: under a request mix they measure the mix (the H200
            # zoo's server at 1011bb0: recording "-36.9 %" per unit, exploring "-269 %")
            out.update(record_cost=None, added_share=None, observing_share=None,
                       exploring_share=None, exploring_worst=None)
        return out

    @staticmethod
    def comparable(rested: list) -> dict:
        """Whether walls per unit can be compared at all: the baselines' newest sixteen rests
        (all arms' where the baselines have fewer than two) spread at most WALL_SPREAD_MAX,
        as the summary's watching ratio asks of one arm's blocks. Each rest is unrecorded and
        runs one arm, and is set against its own arm's median (limit 0 and the default, or a
        costly arm, may differ by more than that and are no mix), so what moves the pooled
        figures from rest to rest is the program's own mix of work."""
        base = [b for b in rested if b.arm in (0, 1)]
        pick = (base if len(base) >= 2 else rested)[-16:]
        by_arm: dict[int, list] = {}
        for b in pick:
            by_arm.setdefault(b.arm, []).append(b.rest_ns / b.rest_units)
        pooled = [x / statistics.median(xs) for xs in by_arm.values() for x in xs]
        spread = _relative_spread(pooled)
        return {"rest_spread": spread, "comparable": spread <= WALL_SPREAD_MAX}

    @staticmethod
    def exploring(done: list, wall: float) -> dict:
        """What the arms tried cost the program beyond its own pace, which observing does not
        count: the wall per unit of each arm's unrecorded rests against the two baselines'
        rests, applied to all the wall the arm ran (its rests, settles and blocks). A set-aside
        that taxes the program's other kernels makes every unit under it slower (the server's
        37.5 MiB arms' rests: about 12 % over the baselines', H200 5d07e18), and the program
        pays that while the arm is tried. Net of the arms that ran faster; wall time, so read
        it as a size: `exploring_share` of the search's wall (None until some candidate arm
        has rested), and `exploring_worst`, the costliest arm's ratio among those with two
        rests or more (one rest's median is one sample)."""
        rates: dict[int, list] = {}
        walls: dict[int, float] = {}
        for b in done:
            if b.rest_units and b.rest_ns:
                rates.setdefault(b.arm, []).append(b.rest_ns / b.rest_units)
            walls[b.arm] = walls.get(b.arm, 0.0) + (b.rest_wall_ns or b.rest_ns) \
                + (b.end - b.start) + b.settle_ns
        base = rates.get(0, []) + rates.get(1, [])
        tried = [a for a in rates if a not in (0, 1)]
        if not base or not tried or not wall > 0:
            return {"exploring_share": None, "exploring_worst": None}
        pace = statistics.median(base)
        over = {a: statistics.median(rates[a]) / pace for a in tried}
        # the wall each arm ran, less what its units take at the baselines' pace
        extra = sum(walls[a] * (1 - 1 / over[a]) for a in tried)
        worst = max((over[a] for a in tried if len(rates[a]) >= 2), default=None)
        return {"exploring_share": extra / wall, "exploring_worst": worst}
