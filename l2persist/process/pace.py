"""The watcher's pace: the rests between blocks (run unrecorded under the next arm, so that
observing stays within ``max_overhead`` of the program's wall time), an unhooked rest's
counted tail, the settle after a rest, and what watching and exploring cost the program.

One :class:`Pace` per :class:`~l2persist.process.live.Watcher`; its state is the owner's
(``resting``, ``settling``, ``rest_s``, ``rest_units``, ``rests_capped``, ``hook_*``, the
blocks), which the watcher's phases read too.
"""
from __future__ import annotations

import statistics
import threading
import time

from .. import _core
from .part import Part
from .summary import WALL_SPREAD_MAX, _relative_spread

# A rest's gate stays closed this long at most (a rest of the H200's server loop: ~0.3 s).
REST_GATE_MAX_S = 10.0
#: The rest before a block is sized from this many rest-then-block pairs (the newest ones); until
#: that many exist each rest is one block long.
REST_PAIRS = 3
#: The pace's model of a cycle's cost is scaled by what its newest cycles measured, at most
#: this much, and only once this many pairs exist (one early stall among three pairs would
#: size the next rests for four times the cost: Pace.correction).
CORRECTION_MAX = 4.0
CORRECTION_PAIRS = 8


class Pace(Part):
    """Rests, tails and settles between the search's blocks."""

    def rest_length(self) -> int:
        """Units to run unrecorded (CUPTI paused) under the next arm before its block, so that
        observing (the switch and the block's recording, and the hooks on every call) adds at
        most ``max_overhead`` of the program's wall time: the core sizes it
        (l2p_live_rest_units) from the newest rest-then-block pairs, which time the same arm
        unrecorded and recorded, and the hooks' share of the newest sixteen cycles' wall,
        which a rest hides only where it runs with their gate closed."""
        w = self.w
        pairs = []                           # the newest 16, scanned from the end
        for b in reversed(w.blocks):
            if len(pairs) == 16:
                break
            if b.end and b.units and b.rest_units and b.counted:
                pairs.append(b)
        rest_s = block_s = None
        recorded = w.units_per_block      # a cycle's recorded units: its block and settle
        if len(pairs) >= REST_PAIRS:
            rest_s = statistics.median(b.rest_ns / b.rest_units for b in pairs) / 1e9
            w.rest_s = rest_s
            block_s = statistics.median((b.end - b.start + b.settle_ns)
                                        / (b.units + b.settle_units) for b in pairs) / 1e9
            recorded += round(statistics.median(b.settle_units for b in pairs))
        work = w.switch_work_ms[-16:]
        switch_s = statistics.median(work) / 1e3 if work else None
        if rest_s is not None and switch_s is not None and len(pairs) >= CORRECTION_PAIRS:
            k = self.correction(pairs, switch_s, rest_s, block_s, recorded)
            w.pace_corrections.append(k)
            switch_s *= k
            if block_s > rest_s:           # (no excess: nothing the rest hides, as before)
                block_s = rest_s + k * (block_s - rest_s)
        # the hooks' own time over the newest sixteen cycles: the bound is on both;
        # the first rests run hooked until a rate is known, so a share since the start would
        # stay high long after the gate took most of the hooks' cost away
        now = time.perf_counter()
        marks = w.hook_marks
        marks.append((now, w.hook_ns))
        del marks[:-17]
        t0, ns0 = marks[0] if len(marks) > 1 else (w.search_t0, 0)
        hooks = (w.hook_ns - ns0) / 1e9 / (now - t0) if w.hook_calls and now > t0 \
            else None
        # the cap: twenty blocks' worth, more where the budget's time left allows (the core's
        # l2p_live_rest_ratio), so that the bound is met wherever the budget leaves room
        ratio = None
        if w.o.budget_s and w.search_t0:
            ratio = _core.live_rest_ratio(w.o.budget_s - (now - w.search_t0),
                                          _core.live_blocks_left(), recorded,
                                          switch_s=switch_s, rest_s=rest_s, block_s=block_s)
            w.rest_ratios.append(ratio)
        units, capped = _core.live_rest_units(recorded, switch_s, rest_s, block_s,
                                              max_overhead=w.o.max_overhead,
                                              max_rest_ratio=ratio,
                                              cycle=len(w.blocks),
                                              hooks_share=min(hooks, 1.0) if hooks else None)
        # the bound needed more than the cap: the summary says so rather than let it read as met
        w.rests_capped += capped
        return units

    def correction(self, pairs: list, switch_s: float, rest_s: float, block_s: float,
                   recorded: int) -> float:
        """What the newest cycles measured watching to add (the summary's measure, over the
        same cycles: Pace.added) over what the pace's model says for them (a median switch,
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

    def begin_rest(self, arm: int, units: int):
        """The rest also lets the new arm settle (its lines fill) before it is timed."""
        w = self.w
        w.steps += 1
        if not w.paused:
            _core.activity_record(False)
            w.paused = True
        w.resting = {"arm": arm, "start": _core.activity_now(), "units": units}
        w.units_now = 0
        self.rest_unhooked(w.resting)

    def rest_unhooked(self, r: dict):
        """The rest's units but its last block's worth run with the per-call hooks' gate
        closed (the hooks cost a host-bound program ~3 us a call in the watcher, H200 server
        loop at 495cdaa and a4a7db0: 2.7 % of the search's wall, and a rest is most of it):
        for the time those units took in the newest rests; then a timer opens the gate, and at
        the program's next call the GPU is drained and the last block's worth is counted and
        timed as every rest was (the per-unit rate the pace and the shares use). Alone only
        (ranks count the same calls), and only once a rate is known."""
        w = self.w
        tail = w.units_per_block
        if (w.rest_hooks is None or w.team is not None or not w.rest_s
                or r["units"] < 3 * tail):
            return
        # a program slower in the newest rests (idle) than now would keep the gate closed
        # long past its units: at most REST_GATE_MAX_S, then counted as any rest
        off_s = min((r["units"] - tail) * w.rest_s, REST_GATE_MAX_S)
        r.update(units=tail, unhooked=True)
        w.rest_hooks[0]()
        t = threading.Timer(off_s, self.rehook_rest, args=(r,))
        t.daemon = True     # a program that ends mid-rest is not kept waiting for it
        w.rest_timer = t
        t.start()
        if getattr(w, "clock", None) is not None:
            w.clock.hold(off_s)    # its ticks are not counted while the gate is closed

    def rehook_rest(self, r: dict):
        """On the timer's thread: the gate open; nothing else (the tail begins on the
        program's thread, between its calls)."""
        w = self.w
        with w.lock:
            if w.resting is r and w.state == "search":
                self.open_gate(r)

    def open_gate(self, r: dict):
        """Under the lock: an unhooked rest's gate open again, its counted tail due (the
        timer's end, or a capture beginning mid-rest), and the clock's hold over (the tail
        may begin at its next tick that finds the lock free: within a period)."""
        w = self.w
        r["tail_due"] = True
        w.rest_hooks[1]()
        if getattr(w, "clock", None) is not None:
            w.clock.hold(0)

    def begin_tail(self, r: dict) -> bool:
        """An unhooked rest's counted tail begins at this call, once the timer has opened the
        gate and no capture is open: the GPU drained (the tail is timed from there, as whole
        rests were from the block's end)."""
        w = self.w
        if not r.get("tail_due") or w.gate.capture_open():
            return False
        w.steps += 1              # this call waits on the GPU: not the hooks' own time
        w.device.synchronize()
        r["tail_t0"] = _core.activity_now()
        w.units_now = 0
        return True

    def end_rest(self, kind=None, torch_graph=None, starts: bool = True):
        """Records on again, then a settle before the block: CUPTI's record of the first launch
        of a graph after the pause is wrong (it starts at the graph's last launch recorded
        before the pause: as long as the pause, H200), so the block begins once every graph
        the last block replayed has been launched again (at most a block's units later), and
        records that outlive their block are dropped (l2p_activity_blocks' spanning)."""
        w = self.w
        w.steps += 1
        r, units = w.resting, w.units_now
        w.device.synchronize()           # the rest's work is done: the block times its own
        end = _core.activity_now()
        w.resting = None
        w._resume()
        # an unhooked rest counted its units from the hooks' return only (its tail): the rate
        # per unit is the tail's, the rest's wall its whole
        counted_from = r.get("tail_t0") or r["start"]
        # (graphs timed by events need no settle: the short records are the nodes')
        need = set(w.replayed) if w.timing == "nodes" else set()
        if r.get("unhooked") and w.timing == "nodes":
            # graphs replayed while the gate was closed were not seen: those left stale
            # (their executable not made again) must launch again before the block too
            need |= {id(g.ref()) for g in w.graphs.values()
                     if g.renew_failed and g.ref() is not None}
        st = {"arm": r["arm"], "rest_ns": end - counted_from, "rest_units": units,
              "rest_wall_ns": end - r["start"], "unhooked": bool(r.get("unhooked")),
              "t0": _core.activity_now(), "need": need, "pre_ns": 0, "pre_units": 0}
        if r.get("recorded"):   # a capture turned the records on mid-rest: no unrecorded time
            st.update(rest_ns=0, rest_units=0, rest_wall_ns=0, pre_ns=end - counted_from,
                      pre_units=units)
        w.settling = st
        w.replayed = set()
        w.units_now = 0
        self.settle(kind, torch_graph, starts)     # this call's launch comes after: in the settle

    def team_settle_units(self) -> int | None:
        """The units a team's settle runs to (Pace.settle), None alone (a settle then ends
        when the last block's graphs have launched again)."""
        w = self.w
        return max(1, w.units_per_block // 4) if w.team is not None else None

    def settle(self, kind, torch_graph, starts: bool = True):
        """Alone: until every graph of the last block has launched again (a block's units at
        most). In a team the ranks must begin their blocks at the same count of their calls, and
        their graphs are their own: a fixed quarter block, with the spanning records dropped.
        It ends only at a call a block may begin at (``starts``: Phases.starts_block)."""
        w = self.w
        st = w.settling
        if w.team is not None:
            waiting = w.units_now < self.team_settle_units()
        else:
            waiting = bool(st["need"]) and w.units_now < w.units_per_block
        if waiting or not starts or w.gate.capture_open():
            if kind == "replay":           # this launch comes after this call: in the settle
                st["need"].discard(id(torch_graph))
            return
        units = w.units_now
        if units:
            w.device.synchronize()      # the settle's queued kernels must not run in the block
        now = _core.activity_now()
        w.settling = None
        w.search.next_block(now, st["arm"])
        b = w.blocks[-1]
        b.rest_ns, b.rest_units = st["rest_ns"], st["rest_units"]
        b.rest_wall_ns, b.rest_unhooked = st["rest_wall_ns"], st["unhooked"]
        b.settle_ns, b.settle_units = now - st["t0"] + st["pre_ns"], units + st["pre_units"]

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
               "observing_share": None, "exploring_share": None, "exploring_worst": None}
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
