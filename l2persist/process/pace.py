"""The watcher's pace: the rests between blocks (run unrecorded under the next arm, so that
observing stays within ``max_overhead`` of the program's wall time), an unhooked rest's
counted tail and the settle after a rest.

One :class:`Pace` per :class:`~l2persist.process.live.Watcher`; its state is the owner's
(``resting``, ``settling``, ``rest_s``, ``rest_units``, ``rests_capped``, ``hook_*``, the
blocks), which the watcher's phases read too. What watching costs, and the correction the
rests are sized by, are measured in process/costs.py.
"""
from __future__ import annotations

import statistics
import threading
import time

from .. import _core
from .costs import CORRECTION_PAIRS
from .part import Part

# A rest's gate stays closed this long at most (a rest of the H200's server loop: ~0.3 s).
REST_GATE_MAX_S = 10.0
#: The rest before a block is sized from this many rest-then-block pairs (the newest ones); until
#: that many exist each rest is one block long.
REST_PAIRS = 3


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
            k = w.costs.correction(pairs, switch_s, rest_s, block_s, recorded)
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
