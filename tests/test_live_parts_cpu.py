"""The watcher's parts, each driven alone (issue 50 item 8): the recorder, the pace, the
switcher, the report, the search driver, the eager launches, the switch gate, the ranks, the
graphs it knows, the phases and the ending, each over a small fake owner that holds only the
attributes the part reads, with the C core faked where the part calls it. The whole watcher runs
over them in tests/test_live_sim_cpu.py; here a part's own rule is checked without the others.
"""
import collections
import gc
import json
import os
import statistics
import sys
import threading
import time
import types

import pytest

import l2persist
from l2persist import _core, foreign
from l2persist.process import (clock, costs, ending, graphs, landing, launches, live, pace,
                               phases, probe, recorder, report, search, summary, switcher, team)
from l2persist.process.recorder import Block


def _ns(**kw):
    return types.SimpleNamespace(**kw)


# ---- the recorder ------------------------------------------------------------------------------

def _recorder_owner(**kw):
    o = _ns(blocks=[], recorded=0, spanning=0, mix_ref={7: ([1000.0], [2])}, mix_units=2,
            key_sums={}, team=None, landing=_ns(read=lambda done, bounds: None),
            timing="nodes", replay_events=_ns(harvest=lambda: None))
    o.__dict__.update(kw)
    return o


def _fake_blocks_core(calls):
    """activity_blocks over two blocks: key 7 ran twice in each, key 9 once in the second;
    live_mix prices each bound's stretch at 0.5 ms and shares of 1.0."""
    def activity_blocks(bounds, timing="nodes"):
        calls.append(("blocks", list(bounds)))
        return {"gpu_ns": [1000, 0, 1400],
                "by_name": {"k": [1000, 0, 1000], "j": [0, 0, 400]},
                "by_key": {7: ([1000.0, 0.0, 1000.0], [2, 0, 2]),
                           9: ([0.0, 0.0, 400.0], [0, 0, 1])},
                "spanning": 1}

    def live_mix(ref, by_key, n, units):
        calls.append(("mix", n, units))
        return [0.5] * n, [1.0] * n
    return _ns(activity_blocks=activity_blocks, live_mix=live_mix,
               activity_flush=lambda: calls.append("flush"),
               live_record=lambda v: calls.append(("record", v)),
               activity_trim=lambda stamp: calls.append(("trim", stamp)))


def test_recorder_samples_and_key_sums_from_the_blocks_records(monkeypatch):
    calls = []
    monkeypatch.setattr(recorder, "_core", _fake_blocks_core(calls))
    # back to back: the second block starts where the first ended (made increasing)
    a, b = Block(arm=0, start=100, end=200, units=2), Block(arm=3, start=200, end=300, units=2)
    w = _recorder_owner(blocks=[a, b, Block(arm=1, start=300)])   # the third still running
    r = recorder.Recorder(w)
    r.record_pending()
    assert ("blocks", [100, 200, 201, 300]) in calls and ("mix", 3, 2) in calls
    assert [c for c in calls if c[0] == "record"] == [("record", 0.5), ("record", 0.5)]
    assert w.recorded == 2 and w.spanning == 1
    assert calls[-1] == ("trim", 300)                # from the running block's start on
    assert a.gpu_ns == 1000 and b.gpu_ns == 1400 and b.by_name == {"k": 1000, "j": 400}
    assert a.sample == b.sample == 0.5 and a.share == 1.0
    # each arm's launch keys: ns and launches of its blocks only
    assert w.key_sums == {0: {7: [1000.0, 2]}, 3: {7: [1000.0, 2], 9: [400.0, 1]}}


def test_recorder_refuses_a_block_without_records_and_a_probe_without_kernels(monkeypatch):
    calls = []
    monkeypatch.setattr(recorder, "_core", _fake_blocks_core(calls))
    w = _recorder_owner(blocks=[Block(arm=0, start=100, end=200, units=2)], mix_ref={})
    with pytest.raises(recorder._NoRecords, match="probe recorded no kernel"):
        recorder.Recorder(w).record_pending()
    assert w.recorded == 0 and not [c for c in calls if c[0] == "record"]
    assert recorder._increasing([5, 5, 5, 9]) == [5, 6, 7, 9]
    assert live._NoRecords is recorder._NoRecords and live.Block is Block


# ---- the pace ----------------------------------------------------------------------------------

def _pace_owner(blocks, **kw):
    o = _ns(blocks=blocks, units_per_block=4, switch_work_ms=[2.0, 4.0, 3.0], hook_marks=[],
            hook_ns=0, hook_calls=0, search_t0=0.0, o=_ns(max_overhead=0.01, budget_s=0),
            rest_s=None, rests_capped=0, rest_ratios=[], counting=_ns(calls=0, ns=None),
            pace_corrections=[])
    o.__dict__.update(kw)
    o.costs = costs.Costs(o)
    return o


def test_pace_rest_length_from_the_newest_rest_then_block_pairs(monkeypatch):
    asked = []

    def rest_units(recorded, switch_s, rest_s, block_s, **kw):
        asked.append((recorded, switch_s, rest_s, block_s, kw))
        return 40, True
    monkeypatch.setattr(pace, "_core", _ns(live_rest_units=rest_units))
    # three blocks after rests: 1, 2 and 3 us a unit unrecorded; 10 us a unit recorded with
    # their settles; a block without a rest is not a pair
    blocks = [Block(0, start=0, end=4000, units=4, rest_ns=4000 * k, rest_units=4,
                    settle_ns=1000 * k, settle_units=k) for k in (1, 2, 3)]
    blocks.insert(0, Block(1, start=0, end=9000, units=4))
    w = _pace_owner(blocks)
    assert pace.Pace(w).rest_length() == 40
    (recorded, switch_s, rest_s, block_s, kw), = asked
    assert recorded == 4 + 2                          # a block and the median settle
    assert switch_s == pytest.approx(3e-3)            # the switches' median work
    assert rest_s == pytest.approx(2e-6) and w.rest_s == rest_s
    assert block_s == pytest.approx(statistics.median(
        [(4000 + 1000 * k) / (4 + k) for k in (1, 2, 3)]) / 1e9)
    assert kw["max_overhead"] == 0.01 and kw["cycle"] == 4 and kw["hooks_share"] is None
    assert w.rests_capped == 1
    assert kw["max_rest_ratio"] is None and w.rest_ratios == []   # no budget: the default
    # fewer than REST_PAIRS pairs: nothing known yet, one block's worth recorded
    asked.clear()
    pace.Pace(_pace_owner(blocks[:3])).rest_length()
    assert asked[0][:4] == (4, pytest.approx(3e-3), None, None)


@pytest.mark.parametrize("stall_ms, k", [(0.0, 1.0), (20.0, 2.5), (1000.0, costs.CORRECTION_MAX)])
def test_pace_scales_its_model_by_what_the_same_cycles_measured(monkeypatch, stall_ms, k):
    """Costs.correction: the summary's measure over the pairs' cycles (their switches' whole
    work, the blocks' and settles' wall beyond their units at the rests' total rate) over the
    model's (a median switch, the recorded units' median excess), from 1 up to CORRECTION_MAX;
    the core is asked with the switch and the blocks' excess over the rests scaled by it. A
    model that overestimates is kept (k 1); rests whose walls move with a mix measure
    nothing, so nothing is scaled."""
    asked = []

    def rest_units(recorded, switch_s, rest_s, block_s, **kw):
        asked.append((recorded, switch_s, rest_s, block_s))
        return 40, False
    monkeypatch.setattr(pace, "_core", _ns(live_rest_units=rest_units))
    # eight cycles (CORRECTION_PAIRS): rests at 1 us a unit, blocks at 2 us a unit (4 units,
    # no settle); the switches 4 ms median, two of the eight stalled stall_ms more
    blocks = [Block(0, start=0, end=8000, units=4, rest_ns=4000, rest_units=4)
              for _ in range(costs.CORRECTION_PAIRS)]
    work = [4.0] * 6 + [4.0 + stall_ms] * 2
    w = _pace_owner(blocks, switch_work_ms=work)
    model = 8 * (4e-3 + 4 * 1e-6) * 1e9                  # ns: a median switch and the excess
    measured = sum(work) * 1e6 + 8 * 8000 - 1000 * 32
    assert w.costs.correction(blocks, 4e-3, 1e-6, 2e-6, 4) == pytest.approx(
        min(max(measured / model, 1.0), costs.CORRECTION_MAX))
    pace.Pace(w).rest_length()
    got = w.pace_corrections[-1]
    assert got == pytest.approx(k, rel=0.01) if stall_ms != 20.0 else 2.0 < got < 2.5
    (_rec, switch_s, rest_s, block_s), = asked[-1:]
    assert switch_s == pytest.approx(4e-3 * got) and rest_s == pytest.approx(1e-6)
    assert block_s == pytest.approx(1e-6 + got * 1e-6)
    # fewer pairs than CORRECTION_PAIRS: the model as it is
    w2 = _pace_owner(blocks[:costs.CORRECTION_PAIRS - 1], switch_work_ms=work)
    pace.Pace(w2).rest_length()
    assert w2.pace_corrections == [] and asked[-1][1] == pytest.approx(4e-3)
    # a mix: the rests' walls per unit move 3x from rest to rest: not scaled
    mixed = [Block(0, start=0, end=8000, units=4, rest_ns=4000 * m, rest_units=4)
             for m in (1, 3, 1, 3)]
    assert w.costs.correction(mixed, 4e-3, 1e-6, 2e-6, 4) == 1.0


@pytest.mark.parametrize("timing, waits", [("nodes", True), ("events", False)])
def test_pace_settles_for_the_graphs_only_where_their_nodes_time_them(monkeypatch, timing,
                                                                       waits):
    """After a rest the block waits for the last block's graphs to launch again (CUPTI's first
    record of a graph after a pause is wrong); where events time the graphs no node's record is
    summed, so the block begins at once."""
    monkeypatch.setattr(pace, "_core", _ns(activity_now=lambda: 500))
    begun = []
    w = _pace_owner([], timing=timing, resting={"arm": 3, "start": 100, "units": 9},
                    units_now=0, replayed={11, 12}, graphs={}, paused=False, team=None,
                    steps=0,
                    device=_ns(synchronize=lambda: None), _resume=lambda: None,
                    gate=_ns(capture_open=lambda: False),
                    search=_ns(next_block=lambda now, arm: begun.append(arm)
                               or w.blocks.append(Block(arm, now))))
    pace.Pace(w).end_rest()
    assert (w.settling is not None) is waits and begun == ([] if waits else [3])


def test_pace_caps_the_rests_at_what_the_budgets_time_left_allows(monkeypatch):
    """With a budget, the rests' cap is the core's live_rest_ratio of the time left and the
    search's blocks left, handed to live_rest_units (and kept for the summary)."""
    asked = []

    def rest_ratio(time_left, blocks_left, units, **kw):
        asked.append(("ratio", time_left, blocks_left, units, kw))
        return 37
    monkeypatch.setattr(pace, "_core", _ns(
        live_rest_units=lambda *a, **kw: asked.append(("units", kw)) or (5, False),
        live_rest_ratio=rest_ratio, live_blocks_left=lambda: 44,
        live_defaults=lambda: {"max_overhead": 0.01, "max_rest_ratio": 20}))
    blocks = [Block(0, start=0, end=4000, units=4, rest_ns=4000, rest_units=4) for _ in range(3)]
    w = _pace_owner(blocks, o=_ns(max_overhead=0.01, budget_s=55.0),
                    search_t0=time.perf_counter() - 10)
    assert pace.Pace(w).rest_length() == 5
    (_, left, blocks_left, units, kw), (_, ukw) = asked
    assert 44.0 < left <= 45.0 and blocks_left == 44 and units == 4
    assert kw["rest_s"] == pytest.approx(1e-6) and kw["switch_s"] == pytest.approx(3e-3)
    assert ukw["max_rest_ratio"] == 37 and w.rest_ratios == [37]


def test_pace_exploring_prices_each_arms_wall_at_the_baselines_pace():
    def rested(arm, per_unit):
        return Block(arm, start=0, end=1000, units=10, rest_ns=per_unit * 10, rest_units=10,
                     rest_wall_ns=per_unit * 10)
    done = [rested(0, 100), rested(1, 100), rested(2, 120), rested(2, 120)]
    out = costs.Costs.exploring(done, wall=10_000.0)
    # arm 2 ran 2 x (1200 + 1000) ns at 1.2x the baselines' pace: 1/6 of it is the arm's cost
    assert out["exploring_worst"] == pytest.approx(1.2)
    assert out["exploring_share"] == pytest.approx(4400 * (1 - 1 / 1.2) / 10_000)
    assert costs.Costs.exploring(done[:2], 1.0) == {"exploring_share": None,
                                                  "exploring_worst": None}


def test_pace_compares_walls_only_where_the_baselines_rests_hold_still():
    """The in-process figures of watching (recording cost, what watching added, exploring)
    compare walls per unit across rests and blocks. Where the baselines' unrecorded rests
    spread more than WALL_SPREAD_MAX from rest to rest, the program's mix moves them (the H200
    zoo's server at 1011bb0 read recording "-36.9 %", exploring "-269 %"): none is given."""
    def rested(arm, per_unit):
        return Block(arm, start=0, end=1000, units=10, rest_ns=per_unit * 10, rest_units=10)
    steady = [rested(0, 100), rested(1, 104), rested(0, 98), rested(1, 101), rested(2, 300)]
    out = costs.Costs.comparable(steady)
    assert out["comparable"] and out["rest_spread"] < 0.03      # arm 2's slow rests not in it
    mixed = [rested(0, 100), rested(1, 200), rested(0, 60), rested(1, 150)]
    out = costs.Costs.comparable(mixed)
    assert not out["comparable"] and out["rest_spread"] > 0.15
    # limit 0 and the default 25 % apart, each steady: two arms, not a mix
    apart = [rested(0, 100), rested(1, 125), rested(0, 101), rested(1, 124), rested(0, 99)]
    assert costs.Costs.comparable(apart)["comparable"]
    # fewer than two baseline rests: all arms' rests are what there is, each against its own
    assert costs.Costs.comparable([rested(0, 100), rested(2, 200), rested(2, 202)])["comparable"]
    assert not costs.Costs.comparable([rested(0, 100), rested(2, 200), rested(2, 120)])[
        "comparable"]
    # the watching figures follow: none of the wall comparisons under the mix, the hooks kept
    for blocks, want in ((steady, True), (mixed, False)):
        w = _pace_owner(blocks, hook_ns=500, hook_calls=10, rest_units=10, rests_capped=0,
                        spanning=0, install_ms=[1.0], windows_ms=[0.5],
                        ahead_ms=[], ahead_hidden=0)
        got = w.costs.watching()
        assert got["comparable"] is want
        assert (got["record_cost"] is not None) is want
        assert (got["added_share"] is not None) is want
        assert (got["observing_share"] is not None) is want
        assert got["hooks_share"] > 0


@pytest.mark.parametrize("unit", [("tick",), ("replay", "g1")])
def test_a_tick_units_figures_say_they_hold_the_watchers_time_only(unit):
    """Where the search's unit is the clock's tick, a unit's wall is the clock's period, not the
    program's pace: what the records cost the program's launches, and what an arm tried cost
    it, do not show in walls per tick. The figures say so (``covers``) and give no recording
    cost or exploring; what watching added is the watcher's own time (the switches, the blocks
    beyond their ticks), counted as for any unit. A program's own calls as the unit keep all."""
    # rests at 1-3 us a unit (arm 2's the slowest: exploring), blocks at 20 us a unit; 3 ms
    # switches
    blocks = [Block(a, start=0, end=80_000, units=4, rest_ns=4000 * (1 + a), rest_units=4)
              for a in (0, 1, 2, 2, 0, 1, 2, 2)]
    w = _pace_owner(blocks, unit=unit, hook_ns=0, hook_calls=0, rest_units=4,
                    rests_capped=0, spanning=0, install_ms=[1.0], windows_ms=[0.5],
                    ahead_ms=[], ahead_hidden=0, switch_work_ms=[3.0] * 8)
    got = w.costs.watching()
    work = 8 * 3e6
    rests = sum(b.rest_ns for b in blocks)
    wall = work + 8 * 80_000 + rests
    ticks = unit == ("tick",)
    assert got["covers"] == ("the watcher's time" if ticks else "records and switches")
    assert got["added_share"] == pytest.approx((work + 8 * 80_000 - rests) / wall)
    assert got["observing_share"] == pytest.approx(got["added_share"])     # no hooks here
    assert (got["record_cost"] is None) is ticks
    assert (got["exploring_share"] is None) is ticks
    assert not ticks or got["exploring_worst"] is None


# ---- the switcher ------------------------------------------------------------------------------

class _Graph:
    eager = False

    def __init__(self, spans):
        self.spans = spans

    def nodes_of(self, at):
        return self.spans.get(at, [])


class _Group:
    eager = True

    def __init__(self, stream):
        self.stream = stream

    def nodes_of(self, at):
        return [0]


def test_switcher_places_a_window_on_the_nodes_of_each_target_and_one_per_stream():
    g1, g2 = _Graph({0: [1, 3], 5: [2]}), _Graph({2: [0]})
    e1, e2 = _Group(stream=11), _Group(stream=11)          # the same stream: one window
    hot = switcher.Target(0x1000, 4096, 3.0, places=[(g1, 0), (g2, 2), (e1, 0)])
    cold = switcher.Target(0x9000, 512, 1.0, places=[(g1, 5), (e2, 1)])
    w = _ns(targets=[hot, cold])
    arm = {"set_aside": 1 << 20, "windows": [(0, 1.0, "persisting", "streaming"),
                                             (1, 0.5, "persisting", "normal")]}
    got = switcher.Switcher(w).placements(arm)
    assert [(p[0], p[1], p[2], p[3], p[4], p[7]) for p in got] == [
        (g1, [1, 3], 0x1000, 4096, 1.0, 0), (g2, [0], 0x1000, 4096, 1.0, 2),
        (e1, [0], 0x1000, 4096, 1.0, 0),
        (g1, [2], 0x9000, 512, 0.5, 5)]               # e2: its stream holds hot's window


def test_switcher_baseline_of_a_plans_arm():
    s = switcher.Switcher(_ns(default_limit=3 << 20))
    assert s.baseline_of({"windows": [], "set_aside": 0}) == 0
    assert s.baseline_of({"windows": [], "set_aside": None}) == 1
    assert s.baseline_of({"windows": [], "set_aside": 3 << 20}) == 1
    assert s.baseline_of({"windows": [], "set_aside": 1 << 20}) is None
    assert s.baseline_of({"windows": [(0, 1.0, "persisting", "streaming")],
                          "set_aside": None}) is None


def test_switcher_sets_only_the_windows_that_change():
    changed = []

    class G:
        def change_windows(self, changes, fresh=False):
            changed.append((changes, fresh))
            return True
    g, s = G(), switcher.Switcher(_ns())
    a, b = (("a",), "win-a"), (("b",), "win-b")
    s.set_graph_windows(g, {0: a, 1: a, 2: b})
    assert changed[-1] == ([("win-a", [0, 1]), ("win-b", [2])], False)
    s.set_graph_windows(g, {0: a, 2: b}, fresh=True)      # node 1's taken off, the rest kept
    assert changed[-1] == ([(None, [1])], True)


def _install_owner(placebo, windows=True):
    dev = _ns(persisting_l2_limit=3 << 20)
    g = _Graph({0: [1, 3]})
    hot = switcher.Target(0x1000, 4096, 3.0, places=[(g, 0)])
    arms = [{"set_aside": 0, "windows": []}, {"set_aside": None, "windows": []},
            {"set_aside": 1 << 20, "windows": [(0, 0.25, "persisting", "streaming")]},
            {"set_aside": 2 << 20, "windows": [(0, 0.5, "persisting", "streaming")]}]
    return _ns(arms=arms, targets=[hot], device=dev, default_limit=3 << 20,
               o=_ns(placebo=placebo, placebo_windows=windows), stream_windows=None), g


def _install_arms(monkeypatch, placebo, windows=True):
    """Arms 2, 3 and 0 installed in turn on _install_owner's graph: each install's node windows
    and the set-aside after it."""
    monkeypatch.setattr(switcher, "_core", _ns(reset_persisting_l2=lambda dev: None))
    w, g = _install_owner(placebo, windows)
    s = switcher.Switcher(w)
    set_windows, limits = [], []
    monkeypatch.setattr(s, "windowed_graphs", lambda: [g])
    monkeypatch.setattr(s, "set_graph_windows",
                        lambda graph, want, fresh: set_windows.append(dict(want)) or True)
    for arm in (2, 3, 0):
        s.install(arm)
        limits.append(w.device.persisting_l2_limit)
    return set_windows, limits


@pytest.mark.parametrize("placebo", [False, True])
def test_switcher_placebo_installs_each_arms_windows_with_no_effect(monkeypatch, placebo):
    """advise --placebo: the same windows on the same nodes, arm by arm (so the switches do the
    same work), but with normal hit and miss properties, and the device's default set-aside:
    the program runs as under no plan while observing costs what it does."""
    made = []
    monkeypatch.setattr(switcher, "_window", lambda *key: made.append(key) or key)
    set_windows, limits = _install_arms(monkeypatch, placebo)
    props = {(k[2], k[3], k[4]) for k in made}
    if placebo:
        assert limits == [3 << 20] * 3                       # the default, always
        assert props == {(0.25, "normal", "normal"), (0.5, "normal", "normal")}
    else:
        assert limits == [1 << 20, 2 << 20, 0]
        assert props == {(0.25, "persisting", "streaming"), (0.5, "persisting", "streaming")}
    # the same nodes windowed, and the arms' windows differ (a switch changes them)
    assert [sorted(d) for d in set_windows] == [[1, 3], [1, 3], []]
    assert set_windows[0][1][0] != set_windows[1][1][0]


def test_a_placebo_without_windows_sets_none(monkeypatch):
    """L2PERSIST_PLACEBO_WINDOWS=0 (a diagnostic beside advise --placebo): every arm installs
    no window on any node or stream, the set-aside stays the default: the records, rests and
    switches alone, to tell their cost from the windows'. Without --placebo it changes
    nothing."""
    assert live.Options.from_env({"L2PERSIST_PLACEBO": "1",
                                  "L2PERSIST_PLACEBO_WINDOWS": "0"}).placebo_windows is False
    assert live.Options.from_env({"L2PERSIST_PLACEBO": "1"}).placebo_windows is True
    monkeypatch.setattr(switcher, "_window", lambda *key: key)
    for placebo, want_nodes in ((True, [[], [], []]), (False, [[1, 3], [1, 3], []])):
        set_windows, limits = _install_arms(monkeypatch, placebo, windows=False)
        assert [sorted(d) for d in set_windows] == want_nodes
        assert limits == ([3 << 20] * 3 if placebo else [1 << 20, 2 << 20, 0])


class _Renewable(_Graph):
    """A graph whose window changes and re-instantiations are logged."""

    def __init__(self, spans, log):
        super().__init__(spans)
        self.log, self.recorded_exec, self.renew_failed = log, False, False

    def ref(self):
        return self

    def change_windows(self, changes, fresh=False):
        if changes or fresh:               # as GraphSeen's: nothing to do otherwise
            self.log.append(("graph", [(w if w is None else w[2], n) for w, n in changes],
                             fresh))
            self.recorded_exec = False     # made again
        return True


def test_switcher_ready_sets_the_next_arms_graph_windows_and_install_only_the_rest(monkeypatch):
    """Before a block's synchronization only the graphs' windows change (each changed graph
    made again once); the limit and the streams are left for install, which then finds the
    graphs as the arm wants them and changes none of them again."""
    log = []
    monkeypatch.setattr(switcher, "_window", lambda *key: key)
    monkeypatch.setattr(switcher, "_core", _ns(
        reset_persisting_l2=lambda dev: log.append("reset")))
    w, _ = _install_owner(False)
    g = _Renewable({0: [1, 3]}, log)
    w.targets[0].places = [(g, 0)]
    w.graphs = {1: g}
    s = switcher.Switcher(w)
    assert s.windowed_graphs() == [g]
    assert s.ready(2) is not None
    assert log == [("graph", [(0.25, [1, 3])], False)]
    assert w.device.persisting_l2_limit == 3 << 20               # untouched before the sync
    assert s.ready(2) is None and len(log) == 1        # nothing to change: nothing readied
    s.install(2)
    assert log[1:] == ["reset"] and w.device.persisting_l2_limit == 1 << 20
    # a graph replayed with records on since: ready renews it where install would (fresh)
    log.clear()
    g.recorded_exec = True
    s.ready(2, fresh=True)
    assert log == [("graph", [], True)] and not g.recorded_exec
    s.install(2, fresh=True)
    assert log[1:] == ["reset"]
    # another arm than the one readied: install changes what ready did not
    log.clear()
    s.ready(3)
    s.install(0)
    assert log == [("graph", [(0.5, [1, 3])], False), "reset", ("graph", [(None, [1, 3])], False)]
    assert w.device.persisting_l2_limit == 0


def _ending_block_owner(log, peek=3, next_arm=3, sync_s=0.002, ready_s=0.0, **kw):
    """A watcher at a block's end: the core's next arm known ahead (peek) or not."""
    def synchronize():
        log.append("sync")
        time.sleep(sync_s)              # the GPU still running the block's queued work
    core = _ns(live_peek=lambda: peek, live_next=lambda: next_arm, activity_now=lambda: 50,
               live_rest_ratio=lambda *a, **k: 10)
    o = _ns(ready_ahead=True, budget_s=60.0, max_overhead=None)
    for k in list(kw):
        if hasattr(o, k):
            setattr(o, k, kw.pop(k))
    w = _ns(o=o, team=None, other_threads=False, device=_ns(synchronize=synchronize),
            blocks=[Block(1, 10)],
            units_now=4, search_t0=time.perf_counter(), rest_units=2,
            ahead_ms=[], ahead_hidden=0, windows_ms=[], switch_work_ms=[], install_ms=[],
            switch_ms=[], steps=0, replayed=set(), pace_corrections=[], rests_capped=0,
            rest_ratios=[],
            pace=_ns(rest_length=lambda: 0, begin_rest=lambda arm, n: None),
            switcher=_ns(windowed_graphs=lambda: ["g"],
                         ready=lambda arm, fresh=False: log.append(("ready", arm, fresh))
                         or time.sleep(ready_s) or 1.5,
                         install=lambda arm, fresh=False: log.append(("install", arm)) or 0.1),
            landing=_ns(before_block=lambda arm: False), records_in_block=lambda attrs: None,
            recorder=_ns(record_pending=lambda: None))
    for k, v in kw.items():
        setattr(w, k, v)
    return w, core


def test_search_end_block_readies_the_known_next_arm_before_its_synchronization(monkeypatch):
    log = []
    w, core = _ending_block_owner(log)
    monkeypatch.setattr(search, "_core", core)
    search.Search(w).end_block()
    # the guess at `fresh` is the last cycle's: a rest came before (rest_units 2)
    assert log == [("ready", 3, True), "sync", ("install", 3)]
    assert w.ahead_ms == [1.5] and w.ahead_hidden == 1       # the sync waited: GPU busy
    assert w.blocks[-1].arm == 3
    # the GPU was idle as the sync came: readied, not hidden (the bar raised so that no pause
    # of this host's can read as a busy GPU)
    log.clear()
    w, core = _ending_block_owner(log, sync_s=0)
    monkeypatch.setattr(search, "_core", core)
    monkeypatch.setattr(search, "AHEAD_HIDDEN_MS", 1e3)
    search.Search(w).end_block()
    assert log[0] == ("ready", 3, True) and w.ahead_ms == [1.5] and w.ahead_hidden == 0


@pytest.mark.parametrize("readied", [True, False])
def test_a_switch_counts_as_its_work_only_what_follows_the_synchronization(monkeypatch,
                                                                          readied):
    """The pace sizes the rests by a switch's own work past the synchronization; the readying
    ahead comes before it and so is in the block's wall, whose end is stamped after both
    (counted in the work too at 94f3501, it was counted twice)."""
    log = []
    w, core = _ending_block_owner(log, sync_s=0.08, ready_s=0.05,
                                  **({} if readied else {"ready_ahead": False}))
    stamps = iter(range(1000, 2000))
    core.activity_now = lambda: next(stamps)
    monkeypatch.setattr(search, "_core", core)
    t0 = time.perf_counter()
    search.Search(w).end_block()
    (work,) = w.switch_work_ms
    assert work < 50                                  # neither the readying nor the wait
    assert w.switch_ms[0] >= 80 + (50 if readied else 0)
    assert (time.perf_counter() - t0) * 1e3 >= w.switch_ms[0]


@pytest.mark.parametrize("why", ["unknown", "off", "team", "other thread", "no graphs",
                                 "over budget", "nothing changes"])
def test_search_end_block_readies_nothing_it_cannot_know_or_may_not(monkeypatch, why):
    """No arm known ahead (a round or a decision due), L2PERSIST_READY_AHEAD=0, a team (ranks
    switch together, after their gather), watched calls from another thread (its replays go on
    meanwhile), no graph to window, the budget spent (a decision comes, not the peeked arm):
    the synchronization first, as before. Where the switcher changed no graph, nothing is
    counted as readied."""
    log = []
    kw = {"unknown": {"peek": -2}, "off": {"ready_ahead": False},
          "team": {"team": _ns(gather=lambda d: [d])}, "other thread": {"other_threads": True},
          "over budget": {"search_t0": time.perf_counter() - 120}}.get(why, {})
    w, core = _ending_block_owner(log, **kw)
    if why == "no graphs":
        w.switcher.windowed_graphs = lambda: []
    if why == "nothing changes":       # asked, but no graph changed: not counted as readied
        w.switcher.ready = lambda arm, fresh=False: log.append("asked") or None
    if why == "over budget":
        w.notes = []
        w.recorder = _ns(record_pending=lambda: log.append("pending"))
        core.live_finish = lambda: {}
        monkeypatch.setattr(search.Search, "decide", lambda self: log.append("decide"))
    monkeypatch.setattr(search, "_core", core)
    search.Search(w).end_block()
    assert log[0] == ("asked" if why == "nothing changes" else "sync")
    assert not any(x[0] == "ready" for x in log if isinstance(x, tuple))
    assert w.ahead_ms == [] and w.ahead_hidden == 0


def _sizing_pace(w, k=1.5, ratio=30, rest=7):
    """A pace whose rest_length adds a correction, a cap and a capped rest, as Pace's does."""
    def rest_length():
        w.pace_corrections.append(k)
        w.rest_ratios.append(ratio)
        w.rests_capped += 1
        return rest
    w.pace.rest_length = rest_length


@pytest.mark.parametrize("end", ["switch", "over budget", "decided"])
def test_a_rest_the_search_never_runs_leaves_no_pace_figures(monkeypatch, end):
    """The last block's end sizes a rest before it knows the search ends (the budget spent,
    the core decided): that rest never runs, so its correction, cap and capped count are not
    the summary's (which says what sized the rests that ran). A switch keeps them."""
    log = []
    kw = {"over budget": {"search_t0": time.perf_counter() - 120},
          "decided": {"next_arm": -1}}.get(end, {})
    w, core = _ending_block_owner(log, peek=-2, **kw)
    _sizing_pace(w)
    w.notes = []
    core.live_finish = core.live_result = lambda: {}
    monkeypatch.setattr(search.Search, "decide", lambda self: log.append("decide"))
    monkeypatch.setattr(search, "_core", core)
    search.Search(w).end_block()
    spent = end == "switch"
    assert ("decide" in log) is not spent
    assert (w.pace_corrections, w.rest_ratios, w.rests_capped) == \
        (([1.5], [30], 1) if spent else ([], [], 0))


def test_every_rank_takes_the_leaders_pace_with_the_figures_that_sized_it(monkeypatch):
    """In a team each rank sizes a rest, but all rest as long as the leader said: each rank's
    figures become the leader's (its correction, cap and capped count), and a leader's doc
    without them (another version) leaves none rather than failing."""
    sent = []
    lead = {"over": False, "rest": 9, "k": [2.25], "ratio": [40], "capped": 0}

    def gather(doc):
        sent.append(json.loads(json.dumps(doc)))      # what travels: JSON
        return [json.loads(json.dumps(lead)), doc]
    log = []
    w, core = _ending_block_owner(log, team=_ns(gather=gather))
    w.pace_corrections, w.rest_ratios, w.rests_capped = [1.1], [20], 3   # earlier cycles
    _sizing_pace(w)
    monkeypatch.setattr(search, "_core", core)
    search.Search(w).end_block()
    assert sent == [{"over": False, "rest": 7, "k": [1.5], "ratio": [30], "capped": 1}]
    assert (w.pace_corrections, w.rest_ratios, w.rests_capped) == ([1.1, 2.25], [20, 40], 3)
    assert w.rest_units == 9
    lead = {"over": False, "rest": 4}
    search.Search(w).end_block()
    assert (w.pace_corrections, w.rest_ratios, w.rests_capped) == ([1.1, 2.25], [20, 40], 3)
    assert w.rest_units == 4


# ---- the report --------------------------------------------------------------------------------

def test_report_per_key_from_the_arms_key_sums(monkeypatch):
    monkeypatch.setattr(summary, "_core", _ns(
        activity_keys=lambda: [("k_gather", (128, 1, 1), (256, 1, 1)),
                               ("k_other", (64, 1, 1), (128, 1, 1))],
        kernel_name=lambda name: name))
    w = _ns(result={"baseline": 1, "winner": 4}, final_arm=4,
            mix_ref={0: ([300.0], [3]), 1: ([100.0], [1]), 2: ([0.0], [0])},
            key_sums={4: {0: [8000.0, 100], 1: [2000.0, 20]},
                      1: {0: [10000.0, 100], 1: [2000.0, 20]}})
    pk = summary.Report(w).per_key()
    assert pk["arm"] == 4 and pk["baseline"] == 1
    g, o = pk["keys"]              # the probe's heaviest first; key 2 never ran
    assert g["kernel"] == "k_gather" and g["share"] == pytest.approx(0.75)
    assert g["arm_us"] == pytest.approx(0.08) and g["baseline_us"] == pytest.approx(0.1)
    assert g["ratio"] == pytest.approx(1.25) and g["grid"] == [128, 1, 1]
    assert o["ratio"] == pytest.approx(1.0) and o["arm_launches"] == 20
    # the final arm a baseline: the best arm tried; no arm beside the baseline: nothing
    w.final_arm = 1
    assert summary.Report(w).per_key()["arm"] == 4
    w.result = {"baseline": 1, "winner": -1}
    assert summary.Report(w).per_key() is None


def test_report_baselines_at_the_programs_mix_and_their_wall_only_where_it_holds_still():
    """The baseline lines give the search's own figure (GPU time per unit at the program's
    mix), not each block's GPU time over its units; on the H200 zoo's server the two read 2.05
    and 1.15 ms/unit (and walls of 6.31 and 3.09) for the same work, beside a verdict of
    "within noise"."""
    steady = {"samples": [1.10, 1.12, 1.11], "gpu_ms_per_unit": [2.0, 1.0, 3.0],
              "wall_ms_per_unit": [3.0, 3.1, 3.05], "wall_spread": 0.013}
    line = report._arm_line("limit 0", steady)
    assert "GPU 1.1100 ms/unit at the program's mix" in line and "wall 3.0500" in line
    assert line.endswith("(3 blocks)")
    mixed = dict(steady, wall_ms_per_unit=[0.4, 5.4, 2.4], wall_spread=0.8)
    line = report._arm_line("default", mixed)
    assert "wall 2.4" not in line and "moved 80 % from block to block" in line, line
    old = {"gpu_ms_per_unit": [2.0, 1.0, 3.0], "wall_ms_per_unit": [3.0, 3.1, 3.05]}
    assert "GPU 2.0000 ms/unit, wall" in report._arm_line("default", old)   # older documents
    assert summary._relative_spread([3.0, 3.0]) == 0.0
    assert summary._relative_spread([1.0]) == 0.0


def test_html_report_plots_gpu_per_unit_at_the_programs_mix_where_the_document_has_it(
        tmp_path):
    with open(os.path.join(os.path.dirname(__file__), "data", "live",
                           "result-server-H200.json")) as f:
        doc = json.load(f)
    for d in doc["per_arm"].values():      # the search's samples: here half each block's own
        d["samples"] = [x / 2 for x in d["gpu_ms_per_unit"]]
    out = tmp_path / "r.html"
    report.write_report(doc, str(out))
    page = out.read_text()
    assert "GPU time per unit of work at the program&#x27;s mix, by arm" in page   # escaped
    d0 = doc["per_arm"]["0"] if "0" in doc["per_arm"] else doc["per_arm"][0]
    assert f"<td>{statistics.median(d0['samples']):.4f}</td>" in page


def test_report_says_a_switchs_own_work_apart_from_the_wait_and_the_readying(tmp_path):
    """switch_ms runs from the block's end, through the next arm's graphs readied and the
    synchronization's wait for the GPU's queued work, to the next arm installed; on the H200's
    decode_big (a0a4b97) that read 10.6 ms median for 0.48 ms of the switch's own work, and on
    server_mix the readying (2.8 ms, 2 of 48 hidden) was most of it. Both reports say the work
    apart, and the readying with its count, where the document has them; an older document
    without the work keeps the one figure."""
    r = {"switch_ms": [10.0, 12.0, 30.0], "switch_work_ms": [0.5, 0.4, 0.9]}
    said = report.switch_said(r)
    assert said.startswith("switching 12.00 ms median, 30.00 ms max"), said
    assert "its own work after the synchronization 0.50 ms median, 0.90 ms max" in said
    assert "the wait for the block's queued work)" in said and "readied" not in said
    r["watching"] = {"ahead": 48, "ahead_ms_median": 2.82, "ahead_hidden": 2}
    said = report.switch_said(r)
    assert "at 48 switches, the next arm's graphs readied (2.82 ms median, 2 of them while " \
           "the GPU still ran the block))" in said, said
    assert report.switch_said({"switch_ms": [2.0]}) == "switching 2.00 ms median, 2.00 ms max"
    assert report.switch_said(r, capital=True).startswith("Switching 12.00")
    with open(os.path.join(os.path.dirname(__file__), "data", "live",
                           "result-server-H200.json")) as f:
        doc = json.load(f)
    doc["switch_ms"], doc["switch_work_ms"] = [9.0, 11.0], [0.25, 0.75]
    text = report.summary_text(doc)
    assert "switching 10.00 ms median, 11.00 ms max (its own work after the synchronization " \
           "0.50 ms median" in text
    out = tmp_path / "r.html"
    report.write_report(doc, str(out))
    assert "Switching 10.00 ms median, 11.00 ms max (its own work after the synchronization " \
           "0.50 ms" in out.read_text()


def test_report_a_dont_with_no_candidate_says_no_window_can_reach_any_buffer():
    r = {"mode": "advise", "arms": [{}, {}],
         "result": {"baseline": 1, "baseline_decided": 0, "helps": 0, "winner": -1,
                    "decided": 1}}
    line = report.verdict_line(r)
    assert line.startswith("don't: no candidate: no buffer a window can reach") and \
        "eager launches on a stream known to live" in line, line
    assert line.endswith("keep the device default (limit 0 was within noise of it)"), line
    # a helping arm over a default that limit 0 matched: one level of parentheses, not
    # "(the device default (limit 0 and the default within noise: the default kept))"
    r["arms"] = [{}, {}, {"set_aside": 8 << 20, "windows": []}]
    r["result"].update(helps=1, winner=2, speedup=1.0835, ci_low=1.0818, ci_high=1.0858)
    line = report.verdict_line(r)
    assert line.startswith("helps: 1.0835x the better baseline, the device default (limit 0 "
                           "was within noise of it); 95 % interval 1.0818-1.0858: "), line
    assert "((" not in line and "))" not in line


def test_report_watch_cost_is_the_final_arms_recorded_wall_over_the_after_decision():
    w = _ns(final_arm=2, after_decision={"units": 64, "wall_ms_per_unit": 2.0})
    per_arm = {2: {"wall_ms_per_unit": [2.0, 2.2, 2.1]}}
    cost = summary.Report(w).watch_cost(per_arm)
    assert cost["recorded_wall_ms_per_unit"] == pytest.approx(2.1)
    assert cost["ratio"] == pytest.approx(1.05) and cost["recorded_blocks"] == 3
    assert cost["comparable"] and cost["spread"] == pytest.approx(0.0816 / 2.1, rel=1e-2)
    line = report.watch_cost_lines(cost)
    assert line and "1.050x" in line[0], line
    # a request mix: one arm's walls per unit move from block to block with the requests that
    # land in them (the H200 zoo's server read 0.879x): not a cost, and the words say so
    mixed = {2: {"wall_ms_per_unit": [0.43, 1.36, 2.38, 3.3, 4.3, 5.4, 0.44]}}
    cost = summary.Report(w).watch_cost(mixed)
    assert not cost["comparable"] and cost["spread"] > summary.WALL_SPREAD_MAX
    line = report.watch_cost_lines(cost)
    assert line and "say nothing of what watching costs" in line[0], line
    w.after_decision = None
    assert summary.Report(w).watch_cost(per_arm) is None
    assert summary.PLAN_FORMAT == live.PLAN_FORMAT == _core.live_plan_format()


def test_report_plan_says_not_measured_where_no_arm_was_compared(monkeypatch):
    """A "don't" where no arm was compared with a baseline (no window reaches the kernels: the
    H200 zoo's JAX program; a search that stopped before its first comparison) has no speedup:
    the C search's zeros are not written as a 0x plan with a [0, 0] interval."""
    monkeypatch.setattr(summary, "_core", _ns(driver_version=lambda: (13, 0),
                                              live_defaults=_core.live_defaults))
    props = _ns(name="GPU", compute_capability=(9, 0), l2_cache_size=50 << 20)
    arms = [{"set_aside": 0, "windows": []}, {"set_aside": None, "windows": []},
            {"set_aside": 8 << 20, "windows": []}]
    seen = [_ns(signature=s, eager=False) for s in ("k2-bb", "k2-aa", "k2-bb")]
    w = _ns(arms=arms, device=_ns(properties=props), all_graphs=lambda: seen,
            result={"helps": 0, "winner": -1, "baseline": 1, "speedup": 0.0, "ci_low": 0.0,
                    "ci_high": 0.0})
    rep = summary.Report(w)
    rep.window_docs = lambda arm: []
    plan = rep.make_plan()
    assert plan["verdict"] == "dont" and plan["speedup"] is None and plan["ci"] is None
    assert plan["set_aside"] is None                    # the device's default (arm 1)
    assert plan["graphs"] == [{"graph": "k2-aa"}, {"graph": "k2-bb"}]   # each seen, once
    w.result = {"helps": 1, "winner": 2, "baseline": 1, "speedup": 1.05, "ci_low": 1.02,
                "ci_high": 1.08}
    plan = rep.make_plan()
    assert plan["verdict"] == "helps" and plan["speedup"] == 1.05
    assert plan["ci"] == [1.02, 1.08] and plan["set_aside"] == 8 << 20
    _core.live_plan_check(json.loads(json.dumps(plan)), "plan.json")   # both are valid plans


# ---- the search driver -------------------------------------------------------------------------

def test_search_unit_of_work_from_the_probes_counts():
    w = _ns(o=_ns(block_s=0.02), probe_counts={})
    s = probe.Probe(w)
    w.probe_counts = {("replay", "a"): 30, ("replay", "b"): 90, ("sync",): 200}
    assert s.choose_unit(1.0) == ("replay", "b")             # the busiest graph's replay
    w.probe_counts[("mark",)] = 10
    assert s.choose_unit(1.0) == ("mark",)                   # a mark first
    w.probe_counts = {("replay", None): 500, ("sync",): 3}   # a graph not known: not a unit
    assert s.choose_unit(1.0) == ("sync",)
    # the clock's tick where the unit comes less than once a block
    w.probe_counts = {("sync",): 3, ("tick",): 400}
    assert s.choose_unit(1.0) == ("tick",)
    w.probe_counts = {("sync",): 3000, ("tick",): 400}
    assert s.choose_unit(1.0) == ("sync",)


def test_search_next_block_installs_the_cores_next_arm(monkeypatch):
    installed = []
    monkeypatch.setattr(search, "_core", _ns(live_next=lambda: 5, activity_now=lambda: 777))
    asked = []
    records = []
    w = _ns(steps=0, blocks=[], units_now=9, replayed={1},
            switcher=_ns(install=lambda arm: installed.append(arm)),
            landing=_ns(before_block=lambda arm: asked.append(arm) or arm == 5),
            records_in_block=records.append, records_off=False)
    search.Search(w).next_block(0)
    assert installed == [5] and w.steps == 1 and w.units_now == 0 and w.replayed == set()
    (b,) = w.blocks
    assert (b.arm, b.start, b.attrs, b.counted) == (5, 777, True, True)
    search.Search(w).next_block(900, arm=2)                  # after a rest: its arm, its stamp
    assert installed == [5] and (w.blocks[-1].arm, w.blocks[-1].start) == (2, 900)
    assert asked == [5, 2] and w.blocks[-1].attrs is False   # asked as each block began
    assert records == [True, False]        # each block's records follow its landing check


def _issuing_owner(records_off, log):
    """A watcher whose landing check wants each arm's first block; the core issues arm 5."""
    checked = set()

    def before_block(arm):
        first = arm not in checked
        checked.add(arm)
        return first
    w = _ns(steps=0, blocks=[], units_now=0, replayed=set(), records_off=records_off,
            switcher=_ns(install=lambda arm: log.append(("install", arm))),
            landing=_ns(before_block=before_block),
            records_in_block=lambda on: log.append(("records", on)),
            device=_ns(synchronize=lambda: log.append("sync")))
    core = _ns(live_next=lambda: log.append("next") or 5, activity_now=lambda: 100 + len(log))
    return w, core


def test_a_landing_block_is_not_given_to_the_search_where_the_records_are_off(monkeypatch):
    """Events time the graphs and the records are off in the blocks: an arm's landing block
    (records on) would read its records' own GPU time inside the event pairs (6.6-36 % slower,
    H200 94f3501), so it is not issued by the search: the arm's issued block follows it at
    once, with no switch, the GPU drained between them, and the records off."""
    log = []
    w, core = _issuing_owner(True, log)
    monkeypatch.setattr(search, "_core", core)
    s = search.Search(w)
    s.next_block(0)
    land = w.blocks[-1]
    assert land.arm == 5 and land.attrs and not land.counted
    assert log == ["next", ("install", 5), ("records", True)]
    w.units_now = 7
    s.end_block()                                 # the landing block ends: no switch
    assert log[3:] == ["sync", ("records", False)]
    assert (land.units, land.end) == (7, w.blocks[-1].start) and land.end > 0
    issued = w.blocks[-1]
    assert issued.arm == 5 and issued.counted and not issued.attrs and w.units_now == 0
    # the rest before the landing block and the landing block itself (as its settle) are the
    # issued block's: the pace pairs that rest with it
    log.clear()
    w, core = _issuing_owner(True, log)
    monkeypatch.setattr(search, "_core", core)
    s = search.Search(w)
    s.next_block(0)
    land = w.blocks[-1]
    land.rest_ns, land.rest_units, land.rest_wall_ns, land.rest_unhooked = 800, 8, 900, True
    land.settle_ns, land.settle_units = 30, 1
    w.units_now = 4
    s.end_block()
    issued = w.blocks[-1]
    assert (issued.rest_ns, issued.rest_units, issued.rest_wall_ns, issued.rest_unhooked) == \
        (800, 8, 900, True)
    assert (land.rest_ns, land.rest_units, land.rest_wall_ns, land.rest_unhooked) == \
        (0, 0, 0, False)
    assert issued.settle_ns == 30 + land.end - land.start and issued.settle_units == 1 + 4
    # the records on in every block (the nodes time the graphs): the landing block counts
    log.clear()
    w, core = _issuing_owner(False, log)
    monkeypatch.setattr(search, "_core", core)
    search.Search(w).next_block(0)
    assert w.blocks[-1].attrs and w.blocks[-1].counted


def test_recorder_gives_no_sample_of_a_landing_block_the_search_never_issued(monkeypatch):
    calls = []
    monkeypatch.setattr(recorder, "_core", _fake_blocks_core(calls))
    read = []
    land = Block(arm=3, start=100, end=200, units=2, attrs=True, counted=False)
    issued = Block(arm=3, start=200, end=300, units=2)
    w = _recorder_owner(blocks=[land, issued],
                        landing=_ns(read=lambda done, bounds: read.append(list(done))))
    recorder.Recorder(w).record_pending()
    assert [c for c in calls if c[0] == "record"] == [("record", 0.5)]   # the issued one only
    assert w.recorded == 2                   # both read: the next call starts past them
    assert read == [[land, issued]]          # the landing block's windows are still read
    assert w.key_sums == {3: {7: [1000.0, 2], 9: [400.0, 1]}}   # the issued block's keys only


def test_summary_per_arm_leaves_out_a_landing_block_the_search_never_issued():
    land = Block(arm=3, start=0, end=4000, units=4, attrs=True, counted=False)
    issued = Block(arm=3, start=4000, end=6000, units=4)
    land.sample, issued.sample = 9.0, 0.5
    land.share = issued.share = 1.0
    w = _ns(blocks=[land, issued, Block(arm=4, start=6000)], recorded=2)
    per = summary.Report(w).per_arm()
    assert list(per) == [3] and per[3]["samples"] == [0.5]
    assert per[3]["wall_ms_per_unit"] == [pytest.approx(0.0005)]
    land.counted = True
    assert summary.Report(w).per_arm()[3]["samples"] == [9.0, 0.5]


def test_pace_pairs_no_rest_with_a_landing_block_the_search_never_issued(monkeypatch):
    """The rest before an arm's first block precedes its landing block, whose records are on
    where they are off in the others: not a rest-then-block pair of the pace's."""
    asked = []
    monkeypatch.setattr(pace, "_core", _ns(live_rest_units=lambda recorded, switch_s, rest_s,
                                           block_s, **kw: asked.append(rest_s) or (0, False)))
    blocks = [Block(0, start=0, end=4000, units=4, rest_ns=4000 * k, rest_units=4)
              for k in (1, 2, 3)]
    land = Block(1, start=0, end=90000, units=4, rest_ns=90000, rest_units=4, attrs=True,
                 counted=False)
    pace.Pace(_pace_owner(blocks + [land])).rest_length()
    assert asked == [pytest.approx(2e-6)]          # the three issued blocks' median only
    land.counted = True                            # (counted, it would move the median)
    pace.Pace(_pace_owner(blocks + [land])).rest_length()
    assert asked[1] == pytest.approx(2.5e-6)


# ---- the replays' events (advise --replay-events) ------------------------------------------------

def _events_core(graph_nodes, replays=3, eager_ns=0.0, replay_ns=3000.0):
    """activity_blocks over the probe: `replays` replays of graph k2-aa timed by events
    (`replay_ns` in all), `eager_ns` of an eager kernel, and `graph_nodes` nodes' records left
    out under timing="events"; under "nodes" the nodes' own records instead."""
    asked = []

    def activity_blocks(bounds, timing="nodes"):
        asked.append(timing)
        if timing == "events":
            return {"gpu_ns": [replay_ns + eager_ns],
                    "by_name": {"replay:k2-aa": [replay_ns], "eager": [eager_ns]},
                    "by_key": {1: ([replay_ns], [replays]), 2: ([eager_ns], [1])},
                    "graph_nodes": [graph_nodes]}
        return {"gpu_ns": [4000.0 + eager_ns], "by_name": {"node": [4000.0]},
                "by_key": {3: ([4000.0], [graph_nodes])}, "graph_nodes": [0]}
    keys = [("", (0, 0, 0), (0, 0, 0)), ("replay:k2-aa", (0, 0, 0), (0, 0, 0)),
            ("eager", (1, 1, 1), (32, 1, 1))]
    return _ns(activity_blocks=activity_blocks, activity_keys=lambda: keys), asked


def _events_owner():
    g = _ns(signature="k2-aa", names=["a", "b"])
    return _ns(o=_ns(replay_events=True), team=None, timing="nodes", timing_why=None,
               records_off=False, eager_share=None, known=_ns(all_graphs=lambda: [g]))


def test_replay_events_time_the_graphs_where_they_cover_every_node(monkeypatch):
    fake, asked = _events_core(graph_nodes=6)         # 3 replays x 2 kernel nodes
    monkeypatch.setattr(recorder, "_core", fake)
    w = _events_owner()
    ev = recorder.ReplayEvents(w)
    ev.on = True
    probe = ev.decide([1, 2])
    assert asked == ["events", "nodes"] and w.timing == "events" and w.timing_why is None
    assert probe["by_key"][1] == ([3000.0], [3])     # the blocks are priced per replay
    assert probe["by_name"] == {"node": [4000.0]}   # the targets weighed by their kernels
    assert w.records_off is True and w.eager_share == 0.0


def test_replay_events_keep_the_records_on_beside_eager_work(monkeypatch):
    fake, _ = _events_core(graph_nodes=6, eager_ns=300.0)   # eager: 300 of 3300 ns, 9 %
    monkeypatch.setattr(recorder, "_core", fake)
    w = _events_owner()
    ev = recorder.ReplayEvents(w)
    ev.on = True
    ev.decide([1, 2])
    assert w.timing == "events" and w.records_off is False
    assert w.eager_share == pytest.approx(300 / 3300)


@pytest.mark.parametrize("nodes", [0, 5, 9])
def test_replay_events_give_way_to_the_nodes_where_some_graph_was_not_timed(monkeypatch, nodes):
    # 0: a CUPTI that does not mark graph nodes; 5 or 9 of 6: graphs outside the hooked replays
    fake, asked = _events_core(graph_nodes=nodes)
    monkeypatch.setattr(recorder, "_core", fake)
    from l2persist.process import bootstrap
    monkeypatch.setattr(bootstrap, "_replay_timer", "set")
    w = _events_owner()
    ev = recorder.ReplayEvents(w)
    ev.on = True
    probe = ev.decide([1, 2])
    assert asked == ["events", "nodes"] and w.timing == "nodes" and not w.records_off
    assert "graph-node kernels" in w.timing_why and probe["by_key"] == {3: ([4000.0], [nodes])}
    assert ev.on is False and bootstrap._replay_timer is None     # the events stop


def test_replay_events_time_only_while_recording_and_only_known_graphs(monkeypatch):
    begun = []
    monkeypatch.setattr(recorder, "_core", _ns(
        replay_label=lambda text: 4 if text == "replay:k2-aa" else 9,
        replay_begin=lambda stream, label: begun.append((stream, label)) or 11))
    graph = types.SimpleNamespace()
    seen = _ns(signature="k2-aa", ref=lambda: graph)
    w = _ns(paused=False, activity=True, graphs={id(graph): seen})
    ev = recorder.ReplayEvents(w)
    ev.raw_stream = lambda: 0x77
    assert ev.begin(graph) == (11, 0x77) and begun == [(0x77, 4)]
    assert ev.labels == {"k2-aa": 4}
    assert ev.begin(types.SimpleNamespace()) is None            # a graph not seen
    w.paused = True
    assert ev.begin(graph) is None and len(begun) == 1          # a rest: nothing timed


@pytest.mark.parametrize("cmd, argv, want", [
    ("advise", [], None), ("advise", ["--replay-events"], "1"),
    ("verify", ["plan.json"], None), ("verify", ["plan.json", "--replay-events"], "1")])
def test_replay_events_only_where_asked(monkeypatch, cmd, argv, want):
    """advise and verify time the graphs by their nodes' records unless --replay-events asks
    for events (their intervals were 1.7-7x wider on the zoo's graph programs, H200 94f3501)."""
    import l2persist.cli.live as cli_live
    monkeypatch.delenv("L2PERSIST_REPLAY_EVENTS", raising=False)
    args = cli_live._parser(cmd, cmd == "verify", True).parse_args(argv)
    env = cli_live._env(args, cmd, "r.json")
    assert env.get("L2PERSIST_REPLAY_EVENTS") == want
    assert live.Options.from_env(env).replay_events is (want == "1")
    assert live.Options.from_env({}).replay_events is False and not live.Options().replay_events


@pytest.mark.parametrize("argv, want", [(["plan.json"], None),
                                         (["plan.json", "--release-cupti"], "1")])
def test_apply_release_cupti_only_where_asked(monkeypatch, argv, want):
    """apply keeps CUPTI after its launch log unless --release-cupti asks (experimental: not
    yet run on a GPU); advise and verify have no such flag (they let it go once decided)."""
    import l2persist.cli.live as cli_live
    monkeypatch.delenv("L2PERSIST_APPLY_RELEASE", raising=False)
    args = cli_live._parser("apply", True, False).parse_args(argv)
    env = cli_live._env(args, "apply", "r.json")
    assert env.get("L2PERSIST_APPLY_RELEASE") == want
    assert live.Options.from_env(env).apply_release is (want == "1")
    assert not live.Options().apply_release
    with pytest.raises(SystemExit):
        cli_live._parser("advise", False, True).parse_args(["--release-cupti"])


def test_replay_events_do_not_start_without_pytorch(monkeypatch):
    """A program that never loaded PyTorch (CuPy, Triton, JAX) has no hooked replay: the
    events stay off and the summary says why, with nothing patched."""
    from l2persist.process import bootstrap
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(bootstrap, "set_replay_timer",
                        lambda *a: pytest.fail("the replay timer was set"))
    w = _ns(o=_ns(replay_events=True, device=0), team=None, timing_why=None)
    ev = recorder.ReplayEvents(w)
    ev.start()
    assert ev.on is False and w.timing_why == "PyTorch is not loaded: no hooked replay to time"


def test_records_follow_each_block_only_where_they_stay_off(monkeypatch):
    switched = []
    monkeypatch.setattr(live, "_core", _ns(activity_record=switched.append))
    w = live.Watcher(live.Options())
    w.activity, w.paused = True, True
    w.records_off = True
    w._resume()
    assert switched == [] and w.paused is False      # the events resume, not the records
    w.records_in_block(True)
    w.records_in_block(False)
    assert switched == [True, False]                 # a landing block records, others do not
    w.records_off, w.paused = False, True
    w._resume()
    w.records_in_block(False)                        # not records_off: the block leaves them
    assert switched == [True, False, True]


# ---- the eager launches ------------------------------------------------------------------------

def test_launches_from_the_log_keep_known_streams_and_note_the_others(monkeypatch):
    def group(stream, *names):
        return _ns(stream=stream, names=list(names))
    pool, mine = group(0, "k_pool"), group(0x7f00, "k_mine")
    # the same kernel in other groups, on that stream and another: its time counts once (the
    # H200 zoo's JAX program read 147 % of the warm-up counted per group)
    again, other = group(0x7f00, "k_mine"), group(0x7e00, "k_mine", "k_graph")
    monkeypatch.setattr(launches._streams, "known", lambda handle: handle == 0)
    w = _ns(kernel_ns_warmup={"k_pool": 10.0, "k_mine": 30.0, "k_graph": 60.0}, eager=[],
            unknown_streams={}, o=_ns(mode="advise"), notes=[])
    part = launches.Launches(w)
    part.take = lambda: [pool, mine]                         # the log's groups
    part.from_log()
    assert w.eager == [pool] and w.unknown_streams == {0x7f00: 30.0}
    (note,) = w.notes
    assert note.startswith("30 % of the warm-up's GPU time ran in eager kernels on 1 "
                           "stream(s) the program made itself"), note
    assert note.endswith("so no window is set there")
    w.eager, w.notes = [], []
    part.take = lambda: [pool, mine, again, other]           # a probe again: not added up
    part.from_log()
    assert w.unknown_streams == {0x7f00: 30.0, 0x7e00: 90.0}
    (note,) = w.notes
    assert note.startswith("90 % of the warm-up's GPU time ran in eager kernels on 2 "
                           "stream(s)"), note


def test_launches_log_is_taken_outside_the_switch_lock(monkeypatch):
    calls = []
    monkeypatch.setattr(launches, "_core", _ns(
        _launch_log_begin=lambda dev: calls.append(("begin", dev)),
        _launch_log_take=lambda out, discard=False: calls.append(("take", discard))))
    w = _ns(o=_ns(device=3, mode="advise", apply_release=True), logging=False, notes=[],
            clock_tracking=None, tracking_ended=False, cupti_release=None,
            gate=_ns(release=lambda: calls.append("release"),
                     begin_tracking=lambda without: calls.append("track")))
    part = launches.Launches(w)
    assert part.begin() and w.logging
    part.stop()
    assert not w.logging
    assert calls == ["release", ("begin", 3), "release", ("take", True)]
    part.stop()                                              # not logging: nothing asked
    assert len(calls) == 4
    # apply (no clock): captures counted from before the log attaches CUPTI, once, where
    # --release-cupti asked for it (experimental)
    calls.clear()
    w.o.mode = "apply"
    w.o.apply_release = False
    assert part.begin() and calls == ["release", ("begin", 3)]
    part.stop()
    calls.clear()
    w.o.apply_release = True
    assert part.begin()
    assert calls == ["release", "track", ("begin", 3)]
    part.stop()
    w.clock_tracking = True
    calls.clear()
    assert part.begin() and calls == ["release", ("begin", 3)]
    part.stop()
    # stopped (a failure ended tracking) or let go already: tracking never begins again
    for stopped in ({"tracking_ended": True}, {"cupti_release": ("releasing", None)}):
        w.clock_tracking, w.tracking_ended, w.cupti_release = None, False, None
        w.__dict__.update(stopped)
        calls.clear()
        part.begin()
        assert "track" not in calls, stopped
        part.stop()


# ---- PyTorch's hooks (process/torch.py, for the bootstrap and window_captures alike) -----------

def test_torch_capture_and_after_hooks_in_one_home():
    from l2persist.process import torch as process_torch
    seen = []

    class Graph:
        def capture_begin(self, fail=False):
            if fail:
                raise RuntimeError("begin failed")
            seen.append("begin")

        def capture_end(self):
            seen.append("end")

        def synchronize(self):
            return "synced"
    begin, end = Graph.capture_begin, Graph.capture_end
    undo = process_torch.patch_capture(Graph, lambda g: seen.append("on_begin"),
                                       lambda g, failed: seen.append(("on_end", failed)))
    g = Graph()
    g.capture_begin()
    g.capture_end()
    with pytest.raises(RuntimeError):
        g.capture_begin(fail=True)
    assert seen == ["on_begin", "begin", "end", ("on_end", False), "on_begin", ("on_end", True)]
    undo()
    assert (Graph.capture_begin, Graph.capture_end) == (begin, end)
    # after a method returns; off() puts the original back, but not over another's wrapper
    original = Graph.synchronize
    hook = process_torch.patch_after(Graph, "synchronize", lambda: seen.append("after"),
                                     "Graph.synchronize")
    assert g.synchronize() == "synced" and seen[-1] == "after"
    assert hook.off() and Graph.synchronize is original
    hook = process_torch.patch_after(Graph, "synchronize", lambda: None, "Graph.synchronize")
    ours = Graph.synchronize
    Graph.synchronize = lambda self: ("theirs", ours(self))
    assert not hook.off() and g.synchronize() == ("theirs", "synced")


# ---- the switch gate (process/clock.py) --------------------------------------------------------

def test_gate_takes_the_switch_lock_once_where_no_capture_is_open(monkeypatch):
    calls = []
    free = [True]
    monkeypatch.setattr(clock, "_core", _ns(switch_enter=lambda: calls.append("enter") or free[0],
                                            switch_leave=lambda: calls.append("leave"),
                                            capture_watch_end=lambda: calls.append("end")))
    monkeypatch.setattr(clock, "_capturing", lambda: False)
    w = _ns(captures=0, tracking_ended=False, _switch_held=None, clock_tracking=True)
    g = clock.SwitchGate(w)
    assert not g.capture_open() and not g.capture_open()    # held by this thread: asked once
    assert calls == ["enter"]
    g.release()
    g.release()                                              # not held: nothing
    assert calls == ["enter", "leave"] and w._switch_held is None
    w.captures = 1                                           # PyTorch's capture: no lock asked
    assert g.capture_open() and calls == ["enter", "leave"]
    w.captures, free[0] = 0, False                           # one the core counts
    assert g.capture_open() and w._switch_held is None
    g.end_tracking()                                         # the count off, once
    g.end_tracking()
    assert calls.count("end") == 1 and w.tracking_ended
    assert not g.capture_open()                              # PyTorch's check only from here


def test_gate_lets_cupti_go_once_when_decided_never_at_exit_nor_under_a_profiler(monkeypatch):
    """end_tracking(release=True) (decided and timed, or stopped mid-run) asks the core to let
    CUPTI go, once, only with the records ended, and with the capture count handed over in the
    same call (the core reads the count under its lock: a capture begun between an end of
    tracking and a later request would be seen by neither); tracking is ended after it. The
    exit's end_tracking() does not ask (no program call would come for it), and once tracking
    ended so, a later request keeps CUPTI (captures since are unknown); the program's own
    profiler on keeps CUPTI, unasked."""
    import sys
    import types
    calls = []
    monkeypatch.setattr(clock, "_core", _ns(
        switch_leave=lambda: None, capture_watch_end=lambda: calls.append("end"),
        cupti_release=lambda **kw: calls.append(("release", kw)) or ("releasing", None)))
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    exits = []
    monkeypatch.setattr(clock.atexit, "register", lambda fn: exits.append(fn))

    def gate(**kw):
        w = _ns(**{"tracking_ended": False, "_switch_held": None, "clock_tracking": True,
                   "activity": False, "cupti_release": None, **kw})
        return w, clock.SwitchGate(w)

    w, g = gate()
    g.end_tracking(release=True)                             # decided: asked, handed over
    g.end_tracking(release=True)
    assert calls == [("release", {"hand_captures": True}), "end"], calls
    assert w.cupti_release == ("releasing", None)
    # withdrawn first at exit, before the program's own exit handlers' CUDA calls
    assert exits == [g.withdraw_release]
    calls.clear()
    w, g = gate()
    g.end_tracking()                                         # at exit: the count off only
    assert calls == ["end"] and w.cupti_release is None
    g.end_tracking(release=True)                             # captures since: not known
    assert calls == ["end"] and w.cupti_release[0] == "held", w.cupti_release
    assert "no longer tracked" in w.cupti_release[1]
    calls.clear()
    w, g = gate(activity=True)                               # records still on: not asked
    g.end_tracking(release=True)
    assert calls == ["end"] and w.cupti_release is None
    calls.clear()
    # CUDA graphs made while CUPTI was attached fail once it goes: seen by PyTorch's hooks or
    # XLA loaded (the core's count of any library's captures: decided in the core, the C
    # test's); untracked: not known
    for kw, mod in (({"captures_begun": 1}, None), ({}, "jax"), ({"clock_tracking": None}, None)):
        if mod:
            monkeypatch.setitem(sys.modules, mod, types.ModuleType(mod))
        w, g = gate(**kw)
        g.end_tracking(release=True)
        assert not any(isinstance(c, tuple) for c in calls), (kw, mod)
        assert w.cupti_release[0] == "held" and "graph" in w.cupti_release[1], w.cupti_release
        if mod:
            monkeypatch.delitem(sys.modules, mod)
    calls.clear()
    w, g = gate()
    profiler = [True]
    fake = types.SimpleNamespace(autograd=types.SimpleNamespace(
        _profiler_enabled=lambda: profiler[0]))
    monkeypatch.setitem(sys.modules, "torch", fake)
    g.end_tracking(release=True)
    assert calls == ["end"]
    assert w.cupti_release == ("held", "the program's profiler is on")
    # torch.profiler's process-wide flag, where this thread's autograd profiler says off
    profiler[0] = False
    monkeypatch.setitem(sys.modules, "torch.autograd.profiler",
                        types.SimpleNamespace(_is_profiler_enabled=True))
    w, g = gate()
    g.end_tracking(release=True)
    assert calls == ["end", "end"] and w.cupti_release[1] == "the program's profiler is on"
    monkeypatch.delitem(sys.modules, "torch.autograd.profiler")
    w, g = gate()
    profiler[0] = False
    monkeypatch.setattr(clock, "_core", _ns(
        switch_leave=lambda: None, capture_watch_end=lambda: calls.append("end"),
        cupti_release=lambda **kw: (_ for _ in ()).throw(RuntimeError("no CUPTI here"))))
    g.end_tracking(release=True)                             # the core's refusal is kept
    assert w.cupti_release == ("held", "no CUPTI here") and calls[-1] == "end"


def test_gate_never_switches_where_cuda_python_begins_captures_holding_the_gil(monkeypatch):
    """cuda-python before 12.9.1 calls its capture begin with the GIL held: such a begin during
    a switch waits for the switch, which needs the GIL to end. Where it is loaded, the gate
    says a capture is open (no switch at all) and notes why once; from 12.9.1 (and 13.x), or
    without it, the switch lock is asked as before."""
    import sys
    import types
    from importlib import metadata
    entered = []
    monkeypatch.setattr(clock, "_core", _ns(switch_enter=lambda: entered.append(1) or True,
                                            switch_leave=lambda: None))
    for name in clock._CUDA_PYTHON:
        monkeypatch.delitem(sys.modules, name, raising=False)
    versions = {}

    def version(dist):
        if dist not in versions:
            raise metadata.PackageNotFoundError(dist)
        return versions[dist]
    monkeypatch.setattr(metadata, "version", version)

    def gate():
        monkeypatch.setattr(clock, "_gil_verdict", [])
        w = _ns(captures=0, notes=[], tracking_ended=False, _switch_held=None)
        return w, clock.SwitchGate(w)
    w, g = gate()
    assert g.capture_open() is False and entered == [1]          # not loaded: asked
    g.release()
    for mod, dist, v, holds in (("cuda.bindings", "cuda-bindings", "12.8.0", True),
                                ("cuda.cudart", "cuda-python", "11.8.7", True),
                                ("cuda.bindings", "cuda-bindings", None, True),
                                ("cuda.bindings", "cuda-bindings", "12.9.1", False),
                                ("cuda.bindings", "cuda-bindings", "13.0.0rc1", False)):
        versions.clear()
        if v:
            versions[dist] = v
        monkeypatch.setitem(sys.modules, mod, types.ModuleType(mod))
        entered.clear()
        w, g = gate()
        assert g.capture_open() is holds, (mod, v)
        assert bool(entered) is not holds
        g.release()
        if holds:
            assert len(w.notes) == 1 and "hold the GIL" in w.notes[0] and "12.9.1" in w.notes[0]
            g.capture_open()
            assert len(w.notes) == 1                                  # said once
        else:
            assert w.notes == []
        monkeypatch.delitem(sys.modules, mod)
    assert clock._version_tuple("12.9.1.post2") == (12, 9, 1)
    assert clock._version_tuple("13.0.0rc1") == (13, 0, 0)


def test_gate_settles_a_release_a_capture_withdrew_soon_not_only_at_exit(monkeypatch):
    """The request's subscriber stays on every call after a capture withdrew it: the timer
    the request started takes it off (the core's reclaim), once; while the request is still
    pending it looks again, the waits doubling to a cap; one carried out is left alone. A
    request the core answered "withdrawn" at once gets the timer and the exit hook too."""
    state, calls, timers, exits = ["releasing"], [], [], []
    answer = [("releasing", None)]
    monkeypatch.setattr(clock, "_core", _ns(
        cupti_state=lambda: state[0],
        cupti_reclaim=lambda: calls.append("reclaim") or state[0],
        cupti_release=lambda **kw: answer[0], capture_watch_end=lambda: None,
        switch_leave=lambda: None))
    monkeypatch.setattr(clock.atexit, "register", lambda fn: exits.append(fn))

    class Timer:
        def __init__(self, delay, fn, kwargs=None):
            timers.append((delay, fn, kwargs))
            self.daemon = False

        def start(self):
            assert self.daemon            # never keeps the program from exiting
    monkeypatch.setattr(clock.threading, "Timer", Timer)

    def gate():
        w = _ns(tracking_ended=False, _switch_held=None, clock_tracking=True, activity=False,
                cupti_release=None)
        g = clock.SwitchGate(w)
        monkeypatch.setattr(g, "graphs_under_cupti", lambda: None)
        return w, g
    w, g = gate()
    g.end_tracking(release=True)
    assert [(t[0], t[1]) for t in timers] == [(clock.SETTLE_S, g.settle_release)]
    assert exits == [g.withdraw_release]
    g.settle_release(delay=clock.SETTLE_S)     # still pending: looked at again, later
    assert calls == [] and w.cupti_release == ("releasing", None)
    assert timers[-1][0] == 2 * clock.SETTLE_S and timers[-1][2] == {"delay": 2 * clock.SETTLE_S}
    g.settle_release(delay=clock.SETTLE_MAX_S)
    assert timers[-1][0] == clock.SETTLE_MAX_S  # capped
    n = len(timers)
    state[0] = "withdrawn"
    g.settle_release()
    assert calls == ["reclaim"] and len(timers) == n
    assert w.cupti_release == ("withdrawn", "a capture began as CUPTI was being let go")
    state[0] = "held"                         # taken back
    g.settle_release()                        # once
    assert calls == ["reclaim"] and len(timers) == n
    w.cupti_release, state[0] = ("releasing", None), "released"
    g.settle_release()                        # carried out: nothing to take off
    assert calls == ["reclaim"] and len(timers) == n
    # withdrawn before the request's answer was read: the same timer and exit hook
    timers.clear(), exits.clear()
    answer[0], state[0] = ("withdrawn", None), "withdrawn"
    w, g = gate()
    g.end_tracking(release=True)
    assert timers and exits == [g.withdraw_release]
    g.settle_release()
    assert calls[-1] == "reclaim" and w.cupti_release[0] == "withdrawn"


def test_gate_withdraws_at_exit_only_a_release_no_call_carried_out(monkeypatch):
    state, calls = ["releasing"], []
    found = [None]                         # what the reclaim finds: the state, unless set

    def reclaim():                         # as the core: held after, the state found returned
        calls.append("reclaim")
        was, state[0] = found[0] or state[0], "held"
        return was
    monkeypatch.setattr(clock, "_core", _ns(cupti_state=lambda: state[0],
                                            cupti_reclaim=reclaim))
    w = _ns(cupti_release=("releasing", None))
    g = clock.SwitchGate(w)
    state[0] = "released"                  # a call carried it out: nothing to withdraw
    g.withdraw_release()
    assert calls == [] and w.cupti_release == ("releasing", None)
    state[0] = "releasing"
    g.withdraw_release()
    assert calls == ["reclaim"] and w.cupti_release[0] == "withdrawn"
    assert "ended before" in w.cupti_release[1]
    g.withdraw_release()                   # once: held since
    w.cupti_release, state[0] = ("held", "capture tracking"), "releasing"
    g.withdraw_release()                   # never asked here: nothing done
    assert calls == ["reclaim"]
    # a capture withdrew it in the core: its subscriber (on every call) is taken off at exit
    w.cupti_release, state[0] = ("releasing", None), "withdrawn"
    g.withdraw_release()
    assert calls == ["reclaim", "reclaim"]
    assert w.cupti_release == ("withdrawn", "a capture began as CUPTI was being let go")
    # asked in the core, not yet recorded here (a signal came between): withdrawn all the same
    w.cupti_release, state[0] = None, "releasing"
    g.withdraw_release()
    assert calls == ["reclaim"] * 3 and w.cupti_release[0] == "withdrawn"
    w.cupti_release, state[0] = None, "held"            # nothing asked: nothing done
    g.withdraw_release()
    assert calls == ["reclaim"] * 3 and w.cupti_release is None
    # a finalize landed between the state read and the reclaim: carried out, not withdrawn
    w.cupti_release, state[0], found[0] = ("releasing", None), "releasing", "released"
    g.withdraw_release()
    assert calls == ["reclaim"] * 4 and w.cupti_release == ("releasing", None)


def test_summary_says_whether_cupti_was_asked_to_go_and_where_it_is_now(monkeypatch):
    monkeypatch.setattr(summary, "_core", _ns(cupti_state=lambda: "released"))
    assert summary.Report(_ns(cupti_release=None)).cupti() == {
        "asked": False, "state": None, "why_held": None, "now": None}
    assert summary.Report(_ns(cupti_release=("releasing", None))).cupti() == {
        "asked": True, "state": "releasing", "why_held": None, "now": "released"}
    held = summary.Report(_ns(cupti_release=("held", "capture tracking"))).cupti()
    assert held["state"] == "held" and held["why_held"] == "capture tracking"


# ---- the ranks (process/team.py) ---------------------------------------------------------------

def test_ranks_wait_for_the_store_then_give_up_alone(monkeypatch):
    ready = [False]
    monkeypatch.setattr(team, "store_ready", lambda: ready[0])
    met = []
    monkeypatch.setattr(team, "from_env",
                        lambda rank, world: met.append((rank, world)) or ("the team", "a note"))
    w = _ns(team=None, team_pending=False, team_gave_up=False, notes=[],
            team_wait_t0=team.time.perf_counter(), o=_ns(rank=1, world=2))
    r = team.Ranks(w)
    r.join()                                         # no store yet: the warm-up goes on
    assert w.team_pending and w.team is None and not w.team_gave_up
    ready[0] = True
    r.join()                                         # met
    assert not w.team_pending and w.team == "the team" and w.notes == ["a note"]
    assert met == [(1, 2)]                           # the rank and world the options read
    w.team, ready[0], w.team_wait_t0 = None, False, w.team_wait_t0 - team.TEAM_WAIT_S
    r.join()                                         # waited past TEAM_WAIT_S: alone
    assert w.team_gave_up and not w.team_pending and "each rank advised alone" in w.notes[-1]


# ---- the graphs the watcher knows (process/graphs.py) -----------------------------------------

def _graphs_owner(calls, **kw):
    o = _ns(lock=threading.RLock(), graphs={}, graphs_gone=[], captures=0, captures_begun=0,
            stream_windows=_ns(suspend=lambda: calls.append("suspend"),
                               resume=lambda: calls.append("resume")),
            logging=True, log_cut=False, resting=None, paused=False, state="probe", unit=None,
            notes=[], o=_ns(mode="advise", graph_records=False), plan_doc=None,
            _clock_lost=False, activity=True,
            _resume=lambda: calls.append("resume records"), counting=_ns(take=lambda: None))
    o.launches = _ns(stop=lambda: calls.append("log stop") or setattr(o, "logging", False),
                     begin=lambda: calls.append("log begin") or setattr(o, "logging", True))
    o.__dict__.update(kw)
    return o


def test_graphs_nested_captures_hold_the_stream_windows_and_the_log_until_the_last_closes():
    calls = []
    w = _graphs_owner(calls)
    g = graphs.Graphs(w)
    g.capture_begin()
    g.capture_begin()                      # nested (another thread's): one log cut, counted
    assert w.captures == 2 and w.captures_begun == 2 and w.log_cut and not w.logging
    assert calls == ["suspend", "log stop", "resume records", "suspend", "resume records"]
    calls.clear()
    g.capture_failed()                     # the inner one's begin raised: one still open
    assert w.captures == 1 and calls == [] and w.log_cut
    g.capture_failed()                     # the last: windows back, the probe's log again
    assert w.captures == 0 and calls == ["resume", "log begin"] and not w.log_cut
    g.capture_failed()                     # never below zero
    assert w.captures == 0
    # in the search the log is not begun again; a rest's unhooked stretch is counted from here
    calls.clear()
    hooks = []
    w = _graphs_owner(calls, state="search", paused=True,
                      resting={"unhooked": True}, rest_hooks=(None, lambda: hooks.append(1)))
    w.pace = pace.Pace(w)
    held = []
    w.clock = _ns(hold=held.append)
    g = graphs.Graphs(w)
    g.capture_begin()
    assert w.resting == {"unhooked": True, "recorded": True, "tail_due": True} and hooks == [1]
    assert held == [0]                     # the clock's hold over: the tail is counted now
    g.capture_failed()
    assert "log begin" not in calls


def _records_owner(calls, **kw):
    """An owner for graph_records_first: not started, captures counted from the start."""
    kw = {"clock_tracking": True, **kw}
    w = _graphs_owner(calls, o=_ns(mode="advise", graph_records=True), device=None,
                      activity=False, graph_records=False, **kw)

    def start():
        calls.append("start")
        w.device, w.activity = object(), True
    w.phases = _ns(start=start)
    return w


@pytest.mark.parametrize("case", ["first", "counted_before", "straddled", "not_counted", "off",
                                  "refused"])
def test_graph_records_go_on_only_before_the_first_capture_of_the_process(monkeypatch, case):
    """--graph-records: CUPTI's per-replay records are turned on at PyTorch's first capture,
    before it begins, and only where the core counted no capture before it (an executable
    graph made without them crashes its next launch once they go on); else a note."""
    calls = []
    w = _records_owner(calls, clock_tracking=None if case == "not_counted" else True)
    if case == "off":
        w.o.graph_records = False
    begun = 1 if case == "counted_before" else 0
    unmatched = 1 if case == "straddled" else 0      # began before tracking, ended after
    monkeypatch.setattr(graphs._core, "_capture_counts",
                        lambda: {"begun": begun, "unmatched": unmatched})

    def graphs_on(on):
        if case == "refused":
            raise ValueError("CUPTI said no")
        calls.append(("graphs", on))
    monkeypatch.setattr(graphs._core, "activity_graphs", graphs_on, raising=False)
    g = graphs.Graphs(w)
    g.capture_begin()
    g.capture_failed()
    g.capture_begin()                      # a second capture never turns anything on
    on = [c for c in calls if isinstance(c, tuple)]
    if case == "first":
        assert calls.index("start") < calls.index(("graphs", True)) and on == [("graphs", True)]
        assert w.graph_records and not w.notes
        return
    assert not w.graph_records and on == []
    if case == "off":
        assert "start" not in calls and not w.notes
    elif case == "refused":
        assert "start" in calls and "CUPTI said no" in w.notes[0]
    else:
        assert "start" not in calls and "graph records not turned on" in w.notes[0]
        assert len(w.notes) == 1


def test_graphs_remembered_by_identity_and_signature_dropped_ones_kept_aside(monkeypatch):
    class Scanned:
        def __init__(self, owner):
            self.owner = owner

        def _scan(self, _):
            if self.owner.kernels is None:
                raise ValueError("no raw graph")
            return self.owner.kernels, [(0x1000, 4096, 1)], [(0, 0, 0, 0x1000, 0)]

    class ProgramGraph:
        def __init__(self, *names):
            self.kernels = None if not names else [(0, n) for n in names]

    monkeypatch.setattr(foreign, "as_graph", Scanned)
    monkeypatch.setattr(graphs, "_core", _ns(
        graph_signature=lambda kernels: "+".join(k[1] for k in kernels)))
    calls = []
    w = _graphs_owner(calls, logging=False)
    g = graphs.Graphs(w)
    a1, b, a2 = ProgramGraph("k1", "k2"), ProgramGraph("k3"), ProgramGraph("k1", "k2")
    for pg in (a1, b, a2):
        g.capture_begin()
        g.capture_end(pg)
    assert [(s.signature, s.ordinal) for s in g.all_graphs()] == [
        ("k1+k2", 0), ("k3", 0), ("k1+k2", 1)]
    assert g.seen(a2) is w.graphs[id(a2)] and g.sig(b) == "k3"
    assert g.seen(ProgramGraph("k1", "k2")) is None and g.sig(ProgramGraph()) is None
    # an id reused by another object is not the graph seen under it
    impostor = ProgramGraph("k1", "k2")
    w.graphs[id(impostor)] = w.graphs[id(a1)]
    assert g.seen(impostor) is None
    del w.graphs[id(impostor)], impostor
    # the program drops a1: its record goes aside at the next capture, its signature counted
    del a1
    gc.collect()
    a3 = ProgramGraph("k1", "k2")
    g.capture_begin()
    g.capture_end(a3)
    assert len(w.graphs_gone) == 1 and w.graphs_gone[0].ref() is None
    assert g.seen(a3).ordinal == 2 and len(w.graphs) == 3
    assert g.all_graphs()[0] is w.graphs_gone[0]
    # a graph that cannot be read is noted, never raised, and its capture is closed
    g.capture_begin()
    g.capture_end(ProgramGraph())
    assert w.captures == 0 and w.notes == ["a captured graph could not be read: no raw graph"]
    # the search on the clock's unit: a graph coming now stops it (see Watcher.tick)
    w.state, w.unit = "search", ("tick",)
    g.capture_begin()
    g.capture_end(ProgramGraph("k4"))
    assert w._clock_lost
    # from the latest capture: Phases' wait for a known replay is not cut short by a setup
    # that captures graphs over more than its wait
    w._clock_lost -= 100.0
    g.capture_begin()
    g.capture_end(ProgramGraph("k5"))
    assert time.perf_counter() - w._clock_lost < 50.0


def test_graphs_flag_a_replay_recorded_only_while_records_are_on():
    w = _graphs_owner([], activity=True, paused=True, timing="events")
    g = graphs.Graphs(w)

    class ProgramGraph:
        pass
    pg = ProgramGraph()
    seen = live.GraphSeen(lambda: pg, "sig", [], [], [])
    w.graphs[id(pg)] = seen
    g.flag_recorded("replay", pg)                    # paused (the warm-up): not recorded
    assert not seen.recorded_exec
    w.paused = False
    g.flag_recorded("replay", pg)                    # events time the graphs: no short
    assert not seen.recorded_exec                    # nodes' records to avoid
    w.timing = "nodes"
    g.flag_recorded("sync", pg)                      # not a replay
    assert not seen.recorded_exec
    g.flag_recorded("replay", pg, seen=None)         # looked up already: not one it knows
    assert not seen.recorded_exec
    g.flag_recorded("replay", pg)                    # looked up here
    assert seen.recorded_exec


# ---- the phases (process/phases.py) ------------------------------------------------------------

def _phases_owner(calls, **kw):
    o = _ns(team_gave_up=False, team_pending=False, team=None, points=dict.fromkeys(
                ("replay", "sync", "mark", "tick"), 0),
            state="idle", o=_ns(mode="advise", device=0, warmup_s=0.0, world=1, full_probe=False),
            _after=None,
            device=None, captures_begun=0, activity=False, paused=False, notes=[], t0=None,
            unit=None, units_now=0, units_per_block=4, probe_counts={}, _clock_lost=False,
            _first_block_due=False, resting=None, settling=None, replayed=set(), result=None,
            known=_ns(sig=lambda g: getattr(g, "sig", None)))
    o.capture = [False]
    o.gate = _ns(capture_open=lambda: calls.append("asked") or o.capture[0])

    def begin_probe():
        calls.append("probe")
        o.state, o.probe_t = "probe", phases.time.perf_counter()

    def begin(kind=None, seen=None):
        calls.append("search")
        o.state, o.unit = "search", ("replay", "a")
    from l2persist.process.probe import Probe       # when the probe is over: its own rule
    o.probe = _ns(begin_probe=begin_probe, begin=begin,
                  over=lambda elapsed: Probe(o).over(elapsed))
    o.search = _ns(end_block=lambda: calls.append("end"),
                   decide=lambda: calls.append("decide"),
                   count_after=lambda kind, seen: calls.append(("after", kind)))
    o.__dict__.update(kw)
    return o


def test_phases_start_at_the_first_call_then_warmup_probe_and_search(monkeypatch):
    calls = []
    monkeypatch.setattr(phases, "_core", _ns(
        activity_begin=lambda dev: calls.append(("begin", dev)),
        activity_record=lambda on: calls.append(("record", on))))
    dev = _ns(default_persisting_l2_limit=4, persisting_l2_limit=2)
    monkeypatch.setattr(l2persist, "Device", lambda index: dev)
    w = _phases_owner(calls, o=_ns(mode="advise", device=3, warmup_s=1e9, world=1))
    p = phases.Phases(w)
    p.point("sync", None)                  # the first call: the device and its records, paused
    assert w.state == "warmup" and w.device is dev and w.limit_before == 2
    assert w.default_limit == 4 and w.activity and w.paused
    assert calls == [("begin", 3), ("record", False)]
    for _ in range(50):
        p.point("replay", None)            # not due: the gate is never asked (the hot path)
    assert w.state == "warmup" and calls == [("begin", 3), ("record", False)]
    w.o.warmup_s = 0.0
    w.capture[0] = True
    p.point("sync", None)                  # due, but a capture is open: not now
    assert w.state == "warmup" and calls[-1] == "asked"
    w.capture[0] = False
    p.point("sync", None)
    assert w.state == "probe" and calls[-2:] == ["asked", "probe"]
    # the probe counts each kind of call, a replay by its graph's signature
    w.probe_t = phases.time.perf_counter() + 1e9      # not due
    p.point("replay", _ns(sig="a"))
    p.point("replay", _ns(sig="a"))
    p.point("mark", None)
    assert w.probe_counts == {("replay", "a"): 2, ("mark",): 1}
    assert w.units_now == 0                # no unit chosen yet: none counted
    w.probe_t = 0.0
    p.point("mark", None)
    assert w.state == "search" and calls[-1] == "search"
    assert w.points == {"replay": 52, "sync": 3, "mark": 2, "tick": 0}
    # a program with a graph before the first call is never paused
    calls.clear()
    w = _phases_owner(calls, captures_begun=1)
    phases.Phases(w).point("sync", None)
    assert calls == [("begin", 0)] and not w.paused and w.state == "warmup"


def test_search_begins_the_probe_again_where_it_recorded_no_kernel(monkeypatch):
    """A probe over a stretch with no kernel (the program still setting up: a compile, a
    capture) starts no search: the H200 zoo's graphed programs stopped at their first block
    with nothing to price it at. The probe begins again, the launch log with it."""
    calls = []
    blocks = {"by_key": {}, "by_name": {}}
    monkeypatch.setattr(probe, "_core", _ns(
        activity_now=lambda: 2000, activity_flush=lambda: None,
        activity_blocks=lambda b: calls.append(("blocks", tuple(b))) or blocks,
        activity_record=lambda on: calls.append(("record", on))))
    now = probe.time.perf_counter()
    w = _ns(device=_ns(synchronize=lambda: calls.append("sync")), _warm_ns=1000,
            probe_t=now, state="probe", empty_probes=0, paused=False, team=None, t0=now,
            probe_counts={("tick",): 40},
            o=_ns(block_s=0.02, block_units=0, mode="advise", warmup_s=2.0, budget_s=60.0),
            launches=_ns(take=lambda: calls.append("take") or [],
                         begin=lambda: calls.append("log")),
            replay_events=_ns(harvest=lambda: None, start=lambda: None,
                              decide=lambda span: probe._core.activity_blocks(span)))
    w._resume = lambda: calls.append("resume")
    s = probe.Probe(w)
    s.begin()
    assert w.state == "probe" and w.empty_probes == 1 and w.probe_counts == {}
    assert calls == ["sync", ("blocks", (1000, 2000)), "take", "sync", "resume", "log"]
    assert w._warm_ns == 2000                  # the new probe's stretch starts now
    assert not hasattr(w, "unit") and not hasattr(w, "arms")   # no search begun
    # not for ever: once the empty probes outlast the warm-up and the budget, the search
    # begins as before (and stops at its first block); nor in a team (ranks must agree)
    assert s.may_probe_again()
    w.t0 = now - 62.5
    assert not s.may_probe_again()
    w.t0, w.team = now, object()
    assert not s.may_probe_again()


def test_search_restart_goes_back_to_the_warmup_with_the_default_and_no_rest(monkeypatch):
    """Graphs came after a search began on the clock: the search begins again at the graphs'
    replays, from the warm-up, under the device's default (arm 1), a rest under way ended."""
    calls = []
    timer = _ns(cancel=lambda: calls.append("timer off"))
    w = _ns(resting={"unhooked": True, "units": 9}, rest_timer=timer,
            notes=["before", "probe: no window reaches", "probe: own streams", "after"],
            probe_notes=(1, 3), restarts=collections.Counter(work=2),
            rest_hooks=(lambda: calls.append("gate shut"), lambda: calls.append("gate open")),
            switcher=_ns(install=lambda arm: calls.append(("install", arm)),
                         forget_arms=lambda: calls.append("forget arms")),
            blocks=[Block(3, 10, 20)], recorded=1, key_sums={3: {}}, mix_ref={7: 1},
            units_now=4, settling={"arm": 2}, replayed={5}, unit=("tick",), targets=[1],
            arms=[{}, {}, {}], probe_counts={("tick",): 9}, _first_block_due=True,
            eager=["setup's launches"], unknown_streams={9: 0.5}, switch_ms=[5.0],
            switch_work_ms=[4.0], install_ms=[3.0], windows_ms=[2.0], ahead_ms=[1.5],
            ahead_hidden=1, hook_ns=7, hook_calls=3, counting=_ns(calls=3),
            hook_marks=[(1.0, 7)], rests_capped=2, spanning=1, rest_s=0.1, rest_units=8,
            state="search", t0=0.0, search_t0=5.0, ungraphed={"share": 0.5},
            rest_ratios=[30], pace_corrections=[2.0], landed_on=True, landed_why=None,
            landed_blocks={2: 1},
            landed_seen={2: {1: 5}}, landed_table={1: (0x1000, 64)},
            replay_events=_ns(stop=lambda: calls.append("events off")), timing="events",
            records_off=True, activity=False, paused=True,
            letgo=_ns(reattach=lambda: calls.append("reattach")))
    w._resume = lambda: calls.append("resume")
    w.landing = landing.Landing(w)
    monkeypatch.setattr(landing, "_core", _ns(
        activity_attributes=lambda on: calls.append(("attributes", on))))
    search.Search(w).restart("graphs came", "graphs")
    assert calls == ["timer off", "gate open", "events off", "reattach", "resume", ("install", 1),
                     "forget arms", ("attributes", False)]
    assert (w.timing, w.records_off) == ("nodes", False)   # the next probe decides again
    # the windows seen were the abandoned arms' (arm indices name new arms now)
    assert (w.landed_on, w.landed_blocks, w.landed_seen, w.landed_table) == (False, {}, {}, {})
    assert w.rest_ratios == [] and w.pace_corrections == []
    assert w.search_t0 is None and w.ungraphed is None        # the new search's, later
    assert w.state == "warmup" and w.t0 > 0 and w.restarts == {"work": 2, "graphs": 1}
    # what the abandoned probe said of its kernels is dropped: not the program advised now
    assert w.notes == ["before", "after", "graphs came"] and w.probe_notes is None
    assert w.rest_timer is None
    assert (w.blocks, w.recorded, w.key_sums, w.mix_ref) == ([], 0, {}, {})
    assert (w.resting, w.settling, w.unit, w.units_now, w.replayed) == (None, None, None, 0,
                                                                           set())
    assert w.arms == [] and w.targets == [] and w.probe_counts == {}
    assert w.eager == [] and w.unknown_streams == {}      # the next probe finds them again
    # what watching cost is the new search's alone
    assert (w.switch_ms, w.switch_work_ms, w.install_ms, w.windows_ms) == ([], [], [], [])
    assert (w.ahead_ms, w.ahead_hidden) == ([], 0)
    assert (w.hook_ns, w.hook_calls, w.hook_marks, w.counting.calls) == (0, 0, [], 0)
    assert (w.rests_capped, w.spanning, w.rest_s, w.rest_units) == (0, 0, None, 0)
    assert not w._first_block_due


def test_switcher_finds_the_windowed_graphs_again_once_the_arms_are_made_again(monkeypatch):
    """After a restart the new arms window graphs the old ones did not (a search begun on the
    clock had no graph): the list of graphs an install touches is made again."""
    g1, g2 = _ns(eager=False), _ns(eager=False)
    w = _ns(arms=[{"on": [g1]}])
    sw = switcher.Switcher(w)
    monkeypatch.setattr(sw, "placements", lambda a: [(g, [0], 0, 0, 0, 0, 0, 0)
                                                     for g in a["on"]])
    assert sw.windowed_graphs() == [g1]
    w.arms = [{"on": []}, {"on": [g2]}]
    assert sw.windowed_graphs() == [g1]                # kept while the arms are the same
    sw.forget_arms()
    assert sw.windowed_graphs() == [g2]


def test_phases_graphs_after_a_clock_search_restart_it_once_no_capture_is_open(monkeypatch):
    calls = []
    monkeypatch.setattr(phases, "_core", _ns(live_finish=lambda: {"verdict": "cut"}))
    w = _phases_owner(calls, state="search", unit=("tick",), _clock_lost=time.perf_counter(),
                      restarts=collections.Counter(work=phases.MAX_RESTARTS))
    w.search.restart = lambda why, cause: calls.append(("restart", why, cause))
    p = phases.Phases(w)
    seen = _ns(signature="g", replays=0)
    w.capture[0] = True
    p.point("replay", "g", seen)            # a capture is still open: not yet
    assert calls == ["asked"] and w._clock_lost
    w.capture[0] = False
    p.point("replay", "g", seen)
    # the work's restarts (blocks of torch.compile's setup) were spent: the graphs have their own
    assert calls[-1][0] == "restart" and "began again" in calls[-1][1]
    assert calls[-1][2] == "graphs"
    assert not w._clock_lost and w.result is None      # no verdict: the search goes on
    # other calls (a sync after the capture: the zoo's graphed training step; a graph it does
    # not know) wait a while for a known graph's replay, then the search stops (the clock never
    # acts beside graphs: the warm-up begun there could never end)
    for kind, known in (("sync", None), ("replay", None)):
        calls.clear()
        w._clock_lost, w.notes, w.result = time.perf_counter(), [], None
        p.point(kind, "g", known)
        assert calls == ["asked"] and w._clock_lost and w.result is None     # it waits
        w._clock_lost -= phases.LOST_WAIT_S + 0.1                           # and waits no more
        p.point(kind, "g", known)
        assert "decide" in calls and not any(c[0] == "restart" for c in calls
                                             if isinstance(c, tuple)), calls
        assert "search stopped here" in w.notes[0] and w.result == {"verdict": "cut"}
    # a sync, then the replay: the search begins again
    calls.clear()
    w._clock_lost, w.notes, w.result = time.perf_counter(), [], None
    p.point("sync", None, None)
    p.point("replay", "g", seen)
    assert calls[-1][0] == "restart" and w.result is None and not w._clock_lost
    # restarted enough: it stops too
    calls.clear()
    w._clock_lost, w.notes = time.perf_counter(), []
    w.restarts["graphs"] = phases.MAX_RESTARTS
    p.point("replay", "g", seen)
    assert "decide" in calls and "search stopped here" in w.notes[0]
    assert w.stopped == w.notes[0]            # what the CLI says instead of the budget


def test_phases_do_not_pause_records_in_the_warmup_beside_xla(monkeypatch):
    """XLA (JAX) makes CUDA graphs of its own, which the watcher cannot make again: a graph
    made while the records were paused was never recorded (the H200 zoo's JAX program)."""
    for jax_loaded in (False, True):
        calls = []
        monkeypatch.setattr(phases, "_core", _ns(
            activity_begin=lambda dev: calls.append("begin"),
            activity_record=lambda on: calls.append(("record", on))))
        monkeypatch.setattr(l2persist, "Device", lambda index: _ns(
            default_persisting_l2_limit=4, persisting_l2_limit=2))
        if jax_loaded:
            monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))
        else:
            monkeypatch.delitem(sys.modules, "jax", raising=False)
            monkeypatch.delitem(sys.modules, "jaxlib", raising=False)
        w = _phases_owner(calls, o=_ns(mode="advise", device=0, warmup_s=1e9, world=1))
        phases.Phases(w).point("sync", None)
        assert w.state == "warmup" and w.activity
        assert w.paused is not jax_loaded
        assert calls == (["begin"] if jax_loaded else ["begin", ("record", False)])


def test_phases_a_deferred_first_block_begins_at_the_units_replay_on_a_drained_gpu(monkeypatch):
    """The probe ended at a call no block may begin at (a sync, another graph's replay): the
    first block begins at the unit's next replay, after the GPU has drained what was launched
    since the probe's own drain (a review of b6d5bfc: that work ran in the block)."""
    calls = []
    monkeypatch.setattr(phases, "_core", _ns(activity_now=lambda: 77))
    w = _phases_owner(calls, state="search", unit=("replay", "a"), _first_block_due=True)
    w.device = _ns(synchronize=lambda: calls.append("drained"))
    w.search.next_block = lambda stamp: calls.append(("block", stamp))
    p = phases.Phases(w)
    a, b = _ns(signature="a", replays=0), _ns(signature="b", replays=0)
    p.point("sync", None)
    p.point("replay", "g-b", b)
    assert w._first_block_due and calls == []
    p.point("replay", "g-a", a)
    assert calls == ["asked", "drained", ("block", 77)] and not w._first_block_due


def test_phases_search_counts_units_and_ends_a_block_only_where_no_capture_is_open(monkeypatch):
    calls = []
    monkeypatch.setattr(phases, "_core", _ns(live_finish=lambda: {"verdict": "cut"}))
    w = _phases_owner(calls, state="search", unit=("replay", "a"), units_per_block=2)
    p = phases.Phases(w)
    a, b = _ns(signature="a", replays=0), _ns(signature="b", replays=0)
    p.point("replay", "g-b", b)            # another graph's replay: not a unit
    p.point("sync", None)                  # nor a sync
    p.point("replay", "g-a", a)
    assert w.units_now == 1 and calls == [] and w.replayed == {id("g-b"), id("g-a")}
    assert a.replays == 1 and b.replays == 1
    w.capture[0] = True
    p.point("replay", "g-a", a)            # the block is full, but a capture is open
    assert w.units_now == 2 and calls == ["asked"]
    w.capture[0] = False
    p.point("replay", "g-a", a)
    assert calls == ["asked", "asked", "end"]
    # a rest ends at its units; a settle takes the calls after it
    calls.clear()
    w.units_now, w.resting = 0, {"units": 1}
    w.pace = _ns(end_rest=lambda kind, g, starts: calls.append(("rest over", kind, starts)),
                 settle=lambda kind, g, starts: calls.append(("settle", kind, starts)))
    p.point("sync", None)
    assert calls == []
    p.point("replay", "g-a", a)
    assert calls == ["asked", ("rest over", "replay", True)]
    w.resting, w.settling = None, {}
    # a block may begin only at the unit's replay (Phases.starts_block): not at a sync, nor
    # at another graph's replay, whose calls the settle still takes
    p.point("sync", None)
    assert calls[-1] == ("settle", "sync", False)
    p.point("replay", "g-b", b)
    assert calls[-1] == ("settle", "replay", False)
    p.point("replay", "g-a", a)
    assert calls[-1] == ("settle", "replay", True)
    w.unit = ("sync",)                       # a unit that is not a replay: any call
    p.point("replay", "g-b", b)
    assert calls[-1] == ("settle", "replay", True)
    w.unit = ("replay", "a")
    # a block without records: the search stops with the blocks it has
    calls.clear()

    def no_records():
        raise recorder._NoRecords("the block holds no record")
    w.settling, w.units_now, w.search.end_block = None, 5, no_records
    w.restarts = collections.Counter(graphs=phases.MAX_RESTARTS)   # not the work's to spend
    w.search.restart = lambda why, cause: (calls.append(("restart", why)),
                                           w.restarts.update([cause]))
    for k in range(phases.MAX_RESTARTS):     # the work changed: the search begins again
        p.point("replay", "g-a", a)
        assert calls[-1][0] == "restart" and "the block holds no record" in calls[-1][1]
        assert w.result is None and w.notes == []
    p.point("replay", "g-a", a)              # a few times, then it stops, saying what to do
    assert len(w.notes) == 1 and w.notes[0].startswith(
        "search stopped: the block holds no record (the program's work changed"), w.notes
    assert "run advise over the program's steady work" in w.notes[0]
    assert w.result == {"verdict": "cut"} and calls[-1] == "decide"
    # in a team the ranks would have to restart together: it stops at once
    calls.clear()
    w.notes, w.result, w.restarts, w.team = [], None, collections.Counter(), object()
    p.point("replay", "g-a", a)
    assert calls[-1] == "decide" and w.notes[0].startswith(
        "search stopped: the block holds no record")


def test_phases_unit_and_when_the_calls_are_no_longer_needed():
    w = _phases_owner([], unit=("replay", "a"), state="done",
                      o=_ns(mode="advise", keep_hooks=False))
    p = phases.Phases(w)
    assert p.is_unit("replay", _ns(signature="a"))
    assert not p.is_unit("replay", _ns(signature="b")) and not p.is_unit("replay", None)
    assert not p.is_unit("sync", None)
    w.unit = ("sync",)
    assert p.is_unit("sync", None) and not p.is_unit("mark", None)
    assert p.quiet()
    for change in ({"_after": {}}, {"team_gave_up": True}, {"state": "search"},
                   {"o": _ns(mode="apply", keep_hooks=False)},
                   {"o": _ns(mode="advise", keep_hooks=True)}):
        w2 = _phases_owner([], state="done", o=_ns(mode="advise", keep_hooks=False))
        w2.__dict__.update(change)
        assert not phases.Phases(w2).quiet(), change


# ---- the ending (process/ending.py) ------------------------------------------------------------

def _ending_owner(calls, **kw):
    o = _ns(lock=threading.RLock(), rest_timer=None, clock=None, state="search", blocks=[],
            recorded=0, units_now=0, notes=[], result=None, stream_windows=None, device=None,
            limit_before=None, restored=None, streams_restored=None, o=_ns(mode="advise"),
            team=None, team_gave_up=False, _after={"calls": 1}, paused=True, activity=True,
            apply_log=None, _unhook=lambda: calls.append("unhook"))
    o.launches = _ns(stop=lambda: calls.append("log stop"))
    o.gate = _ns(capture_open=lambda: calls.append("gate") or False,
                 end_tracking=lambda release=False: calls.append("end tracking"),
                 withdraw_release=lambda: calls.append("withdraw"))
    o.report = _ns(write_result=lambda: calls.append("write"))
    o.recorder = _ns(record_pending=lambda alone=False: calls.append(("record", alone)))
    o.counting = _ns(take=lambda: calls.append("take"))
    o.__dict__.update(kw)
    return o


def _ending_core(calls, monkeypatch):
    monkeypatch.setattr(ending, "_core", _ns(
        activity_now=lambda: 900, live_finish=lambda: {"verdict": "finished"},
        activity_end=lambda: calls.append("activity end"),
        reset_persisting_l2=lambda dev: calls.append("reset")))


class _Limit:
    def __init__(self, calls, limit):
        self.calls, self.limit = calls, limit

    @property
    def persisting_l2_limit(self):
        return self.limit

    @persisting_l2_limit.setter
    def persisting_l2_limit(self, v):
        self.calls.append(("limit", v))
        self.limit = v


def test_ending_restore_puts_back_the_limit_found_and_notes_what_failed(monkeypatch):
    calls = []
    _ending_core(calls, monkeypatch)
    dev = _Limit(calls, 8)
    w = _ending_owner(calls, device=dev, limit_before=2, stream_windows=_ns(
        restore=lambda: calls.append("streams") or ["stream 7: invalid handle"]))
    e = ending.Ending(w)
    e.restore()
    assert calls == ["log stop", "streams", ("limit", 2), "reset"]
    assert w.restored == 2 and w.streams_restored is False
    assert w.notes == ["restoring a stream's window failed: stream 7: invalid handle"]
    calls.clear()
    e.restore()                                      # the limit already back: only the reset
    assert calls == ["log stop", "streams", "reset"]
    # never started (no device): nothing to put back; a failing reset is noted
    w = _ending_owner(calls)
    ending.Ending(w).restore()
    assert w.restored is None and w.notes == []

    def refused(dev):
        raise RuntimeError("reset refused")
    monkeypatch.setattr(ending._core, "reset_persisting_l2", refused)
    w = _ending_owner(calls, device=_Limit(calls, 2), limit_before=2)
    ending.Ending(w).restore()
    assert w.restored is None and w.notes == ["restoring the set-aside failed: reset refused"]


def test_ending_finish_ends_a_running_search_with_the_blocks_it_has(monkeypatch):
    calls = []
    _ending_core(calls, monkeypatch)
    ran = Block(arm=0, start=100, end=200, units=4)
    late = Block(arm=2, start=300)                   # begun just before the exit: nothing ran
    w = _ending_owner(calls, blocks=[ran, late], recorded=0, units_now=0,
                      rest_timer=_ns(cancel=lambda: calls.append("timer")),
                      clock=_ns(stop=lambda: calls.append("clock")))
    w.team, w.team_gave_up = _ns(leave=lambda: calls.append("leave")), True
    w.ranks = _ns(release_peers=lambda: calls.append("peers"))
    ending.Ending(w).finish()
    assert w.blocks == [ran] and late.end == 900     # closed, then dropped: no units
    assert w.state == "done" and w.result == {"verdict": "finished"}
    assert w.ended_in == "search"                    # the words say what was under way
    assert w.notes == ["the program ended before the search decided"]
    assert calls == ["timer", "clock", "take", ("record", True), "withdraw", "log stop", "gate",
                     "log stop", "end tracking", "activity end", "write", "leave", "peers"]
    # the last block holds no record of the probe's work: finished with the blocks before it

    def no_records(alone=False):
        raise recorder._NoRecords("no record")
    calls.clear()
    short = Block(arm=1, start=300)
    w = _ending_owner(calls, blocks=[ran, short], recorded=1, units_now=3,
                      o=_ns(mode="apply"))
    w.recorder.record_pending = no_records
    ending.Ending(w).finish()
    assert w.blocks == [ran] and short.units == 3 and w.state == "done"
    assert "write" not in calls                      # apply writes no result
    # blocks that ended before it, not yet given (the core asks at a round's end): given now
    calls.clear()
    given = []

    def but_the_last(alone=False):
        if short in w.blocks:
            raise recorder._NoRecords("no record")
        given.extend(w.blocks[w.recorded:])
        w.recorded = len(w.blocks)
    early = Block(arm=3, start=200, end=250, units=4)
    w = _ending_owner(calls, blocks=[ran, early, short], recorded=0, units_now=3,
                      o=_ns(mode="apply"))
    w.recorder.record_pending = but_the_last
    ending.Ending(w).finish()
    assert given == [ran, early] and w.blocks == [ran, early] and w.recorded == 2
    # a watcher already decided is only put back
    calls.clear()
    w = _ending_owner(calls, state="done")
    ending.Ending(w).finish()
    assert w.notes == [] and w.result is None and "write" in calls
    # one still probing ends there: no result, and the phase it ended in kept
    calls.clear()
    w = _ending_owner(calls, state="probe")
    ending.Ending(w).finish()
    assert w.state == "done" and w.result is None and w.ended_in == "probe"


def test_ending_fail_stops_a_search_but_not_a_decision(monkeypatch):
    calls = []
    _ending_core(calls, monkeypatch)
    w = _ending_owner(calls, stream_windows=_ns(restore=lambda: calls.append("streams") or []))
    w.team = _ns(leave=lambda: calls.append("leave"))
    e = ending.Ending(w)
    e.fail("replay", RuntimeError("boom"))
    assert w.state == "off" and w._after is None and not w.paused and not w.activity
    assert w.notes[0].startswith("watching stopped at a graph replay: an internal error in "
                                 "l2persist (RuntimeError: boom); the program ran on"), w.notes
    assert calls == ["log stop", "gate", "streams", "log stop", "streams", "activity end",
                     "end tracking", "leave"]
    calls.clear()
    w = _ending_owner(calls, state="done")           # decided: the decision's arm stays
    ending.Ending(w).fail("sync", ValueError("x"))
    assert w.state == "done" and w.activity and calls == ["log stop", "gate", "end tracking"]
    # apply while matching its stream windows: it stops matching too (else the next call
    # would begin its launch log again, attaching CUPTI anew), and its hooks come off
    calls.clear()
    w = _ending_owner(calls, state="applied", o=_ns(mode="apply"), apply_log={"tries": 1})
    ending.Ending(w).fail("sync", ValueError("x"))
    assert w.apply_log["over"] and calls == ["log stop", "gate", "end tracking", "unhook"]
    calls.clear()
    ending.Ending(w).fail("sync", ValueError("again"))      # over already: not unhooked again
    assert "unhook" not in calls


# ---- did the windows land ----------------------------------------------------------------------

def _landing_owner(**kw):
    o = _ns(landed_on=False, landed_why=None, landed_blocks={}, landed_seen={}, landed_table={})
    o.__dict__.update(kw)
    return o


def test_landing_collects_attributes_in_each_arms_first_block_only(monkeypatch):
    switched = []
    monkeypatch.setattr(landing, "_core", _ns(activity_attributes=switched.append))
    w = _landing_owner()
    part = landing.Landing(w)
    got = [part.before_block(a) for a in (0, 1, 3, 0, 1, 3, 5)]
    assert got == [True, True, True, False, False, False, True]
    assert switched == [True, False, True]            # toggled only where the want changed
    assert w.landed_blocks == {0: 1, 1: 1, 3: 1, 5: 1} and w.landed_on is True


def test_landing_without_the_cupti_call_says_why_and_stops_asking(monkeypatch):
    def refuse(on):
        raise RuntimeError("CUPTI at x cannot record launch attributes")
    monkeypatch.setattr(landing, "_core", _ns(activity_attributes=refuse))
    w = _landing_owner()
    part = landing.Landing(w)
    assert part.before_block(0) is False and part.before_block(1) is False
    assert "cannot record launch attributes" in w.landed_why and not w.landed_blocks
    assert part.summary() == {"checked": False, "why": w.landed_why, "arms": [],
                              "from": "records"}


def test_landing_reads_checked_blocks_and_the_core_judges_each_arm(monkeypatch):
    """Only blocks recorded with attributes are counted, per arm; the judgement is the core's
    (live_landed), on the windows the switcher installs for the arm."""
    win = {1: (0x1000, 4096), 2: (0x9000, 512), 64: None}
    fake = _ns(activity_windows=lambda bounds: {
        "windows": win, "counts": [{1: 5, 0: 2}, {}, {2: 3}, {}, {0: 4, 1: 1}, {}]},
        live_landed=_core.live_landed)
    monkeypatch.setattr(landing, "_core", fake)
    arms = [{"windows": []}, {"windows": []}, {"windows": ["t1"]}]
    placed = {0: [], 1: [], 2: [("g", [0], 0x1000, 8192, 1.0, "persisting", "streaming", 0)]}
    w = _landing_owner(arms=arms)
    w.switcher = _ns(placements=lambda a: placed[arms.index(a)], windowless=lambda: False)
    blocks = [Block(arm=2, start=0, attrs=True), Block(arm=2, start=1, attrs=False),
              Block(arm=1, start=2, attrs=True)]
    part = landing.Landing(w)
    part.read(blocks, list(range(6)))
    # the unchecked block's window (id 2) is not counted
    assert w.landed_seen == {2: {1: 5, 0: 2}, 1: {0: 4, 1: 1}}
    part.read([Block(arm=0, start=3, attrs=False)], [0, 1])   # no checked block: not read
    s = part.summary()
    by_arm = {a["arm"]: a for a in s["arms"]}
    assert s["checked"] and set(by_arm) == {1, 2}
    # arm 2's window (cut to 4 KiB by the driver) on 5 of 7 kernels, nothing else
    assert by_arm[2] == {"kernels": 7, "meant": 5, "foreign": 0, "missing": 0, "arm": 2,
                         "blocks": 0, "windows": 1, "as_meant": True}
    w.landed_table = {}                  # a window past the table: not the arm's
    assert [a["foreign"] for a in part.summary()["arms"]] == [1, 5]
    w.arms = arms[:2]                    # arms made again, fewer: the old counts are no arm's
    assert [a["arm"] for a in part.summary()["arms"]] == [1]
    # the default baseline's kernels carried a window: not as meant
    assert by_arm[1]["kernels"] == 5 and by_arm[1]["foreign"] == 1
    assert by_arm[1]["as_meant"] is False


def test_landed_lines_say_which_arms_missed_and_why_not_checked():
    ok = {"arm": 2, "as_meant": True, "kernels": 9, "meant": 9, "foreign": 0, "missing": 0,
          "windows": 1}
    bad = {"arm": 1, "as_meant": False, "kernels": 5, "meant": 0, "foreign": 5, "missing": 0,
           "windows": 0}
    lines = report.landed_lines({"checked": True, "why": None, "arms": [ok, bad]})
    assert lines[0].startswith("  windows landed: 1 of 2 arms as meant")
    assert lines[1] == ("    default: 0 of 5 kernels under its windows, 5 under windows it did "
                        "not set, 0 of its 0 windows on no kernel")
    assert report.landed_lines({"checked": False, "why": "old CUPTI", "arms": []}) == [
        "  windows: not checked on the kernels: old CUPTI"]
    assert report.landed_lines(None) == []
    html_doc = report._landed_html({"windows_landed": {"checked": True, "arms": [ok, bad]}})
    assert html_doc.count("<tr>") == 3 and "<b>no</b>" in html_doc
    assert "launch attributes" in lines[0] and "launch attributes" in html_doc
    # once CUPTI was let go the windows were read from the graphs' nodes: said so
    back = {"checked": True, "why": None, "arms": [ok], "from": "nodes"}
    assert "kernel nodes, read back once CUPTI was let go" in report.landed_lines(back)[0]
    html_back = report._landed_html({"windows_landed": back})
    assert "read back" in html_back and "launch attributes" not in html_back


def test_placebo_is_advises_alone_reaches_the_watcher_and_writes_no_plan(monkeypatch, tmp_path,
                                                                         capsys):
    import l2persist.cli.live as cli_live
    args = cli_live._parser("advise", False, True).parse_args(["--placebo"])
    env = cli_live._env(args, "advise", str(tmp_path / "r.json"))
    assert env["L2PERSIST_PLACEBO"] == "1" and live.Options.from_env(env).placebo is True
    plain = cli_live._parser("advise", False, True).parse_args([])
    assert "L2PERSIST_PLACEBO" not in cli_live._env(plain, "advise", "r") or \
        os.environ.get("L2PERSIST_PLACEBO")
    with pytest.raises(SystemExit):            # verify measures a plan: no placebo there
        cli_live._parser("verify", True, True).parse_args(["plan.json", "--placebo"])
    out = tmp_path / "plan.json"
    args = cli_live._parser("advise", False, True).parse_args(["--placebo", "--out", str(out)])
    monkeypatch.setattr(cli_live, "_parse", lambda argv, cmd: (args, ["prog"], None))
    doc = {"result": {"decided": 1, "helps": 0}, "placebo": True, "plan": None}
    monkeypatch.setattr(cli_live, "_watch", lambda a, command, mode: (0, doc))
    assert cli_live.advise_main(["--placebo", "--", "prog"]) == 0
    assert not out.exists() and "no plan written" in capsys.readouterr().err


# ---- fastcount: the replays that only count, counted in the hook ----------------------------

class _G:
    """A program's graph (weakly referenceable, as PyTorch's CUDAGraph is)."""


def _counting_owner(graph, **kw):
    import weakref
    seen = _ns(ref=weakref.ref(graph), signature="s", replays=0)
    o = _ns(thread=7, state="search", other_threads=False, team=None, team_pending=False,
            team_gave_up=False, _clock_lost=False, _first_block_due=False, settling=None,
            replay_events=_ns(on=False), resting=None, units_per_block=10, units_now=3,
            unit=("replay", "s"), points={"replay": 0, "sync": 0}, hook_calls=0, hook_ns=0,
            o=_ns(mode="advise"))
    o.phases = phases.Phases(o)
    o.__dict__.update(kw)
    return o, seen


_REFUSED = {"a sync": dict(kind="sync"), "an unknown graph": dict(seen=None),
            "another thread": dict(me=8), "the probe": dict(state="probe"),
            "alone, with other threads' calls": dict(other_threads=True),
            "ranks not met yet": dict(team_pending=True), "gone alone": dict(team_gave_up=True),
            "the clock lost": dict(_clock_lost=1.0), "the first block due":
            dict(_first_block_due=True), "a settle": dict(settling={}),
            "replays timed by events": dict(replay_events=_ns(on=True)),
            "not the unit": dict(unit=("replay", "other")),
            "a rest with its hooks off": dict(resting={"units": 50, "unhooked": True}),
            "the block's last call next": dict(units_now=9)}


@pytest.mark.parametrize("why", list(_REFUSED) + [None])
def test_counting_arms_only_where_the_next_calls_can_only_count(why):
    """The count is armed after a call that only counted, for the same graph and thread, one
    short of the block's end; every state in which a call may do more than count refuses."""
    from l2persist.process import fastcount
    g = _G()
    kw = dict(_REFUSED.get(why, {}))
    call = {k: kw.pop(k) for k in ("kind", "seen", "me") if k in kw}
    w, seen = _counting_owner(g, **kw)
    count = _core.ReplayCount()
    c = fastcount.Counting(w, count)
    c.arm(call.get("kind", "replay"), g, call.get("seen", seen), call.get("me", 7))
    if why is not None:
        assert count.left == 0, why
        return
    assert count.left == 10 - 3 - 1 and count.thread == 7 and count.seen is seen
    # in a rest the end is the rest's; a team's other threads never count, so they do not refuse
    w.resting, w.team, w.other_threads = {"units": 50}, object(), True
    c.arm("replay", g, seen, 7)
    assert count.left == 50 - 3 - 1
    # a team's settle runs to a quarter block (Pace.team_settle_units): its end is the count's
    w.resting, w.settling, w.units_per_block, w.units_now = None, {}, 40, 2
    w.pace = pace.Pace(w)
    c.arm("replay", g, seen, 7)
    assert count.left == 40 // 4 - 2 - 1


def test_counting_never_arms_for_a_graph_held_without_a_weak_reference():
    """Graphs.remember holds a graph that takes no weak reference in a closure: the count
    (a weak reference, never keeping a graph alive) is not armed for it; its calls all go to
    the watcher, which goes on (a review of d8f40ad: the arm raised, and watching stopped)."""
    from l2persist.process import fastcount
    g = _G()
    w, seen = _counting_owner(g)
    seen.ref = lambda: g
    count = _core.ReplayCount()
    fastcount.Counting(w, count).arm("replay", g, seen, 7)
    assert not count.armed and count.left == 0


def test_the_hook_counts_the_armed_graph_on_its_thread_and_the_watcher_takes_it():
    import threading
    from l2persist.process import fastcount
    g, other = _G(), _G()
    w, seen = _counting_owner(g, thread=threading.get_ident())
    count = _core.ReplayCount()
    c = fastcount.Counting(w, count)
    c.arm("replay", g, seen, threading.get_ident())
    assert count.left == 6
    assert not count.counts(other)                          # another graph: the watcher's
    elsewhere = []
    t = threading.Thread(target=lambda: elsewhere.append(count.counts(g)))
    t.start()
    t.join()
    assert elsewhere == [False]                             # another thread: the watcher's
    assert [count.counts(g) for _ in range(8)] == [True] * 6 + [False] * 2
    c.ns = 250.0
    c.take()                                                # as if the watcher saw each call
    assert (w.units_now, w.points["replay"], seen.replays, w.hook_calls, w.hook_ns) == \
        (3 + 6, 6, 6, 6, 6 * 250.0)
    assert count.left == count.done == 0 and c.calls == 6
    c.take()                                                # nothing armed: nothing added
    assert w.units_now == 9 and c.calls == 6
    del g
    import gc
    gc.collect()
    assert not count.counts(_G())                           # a dead graph counts nothing
    assert count.left == 0 and not count.armed


def test_the_counted_replay_is_a_method_that_counts_in_c_and_hands_the_rest_to_python():
    """_core.CountedReplay, installed as a class's replay: from the class it is itself, from an
    instance a method of it; a call the count is armed for (its graph, its thread) is taken
    from the count and goes to the original with its arguments, any other call to the Python
    hook; what either returns or raises reaches the caller."""
    import threading
    import weakref

    class Graph:
        def replay(self, *a, **k):
            if k.get("fail"):
                raise RuntimeError("the original failed")
            return ("original", self, a, k)
    original = Graph.replay
    slow_calls = []

    def slow(self, *a, **k):
        slow_calls.append((self, a, k))
        return original(self, *a, **k)
    count = _core.ReplayCount()
    Graph.replay = _core.CountedReplay(count, original, slow)
    g, other = Graph(), Graph()
    hook = Graph.__dict__["replay"]
    assert Graph.replay is hook and hook.count is count and hook.slow is slow
    assert hook.original is original
    assert g.replay(1, x=2) == ("original", g, (1,), {"x": 2}) and len(slow_calls) == 1
    count.arm(3, weakref.ref(g), threading.get_ident(), "seen")
    assert (count.left, count.armed, count.thread, count.seen) == \
        (3, True, threading.get_ident(), "seen")
    assert g.replay(5) == ("original", g, (5,), {})       # counted: Python not reached
    assert Graph.replay(g, 6) == ("original", g, (6,), {})  # called through the class
    bound = g.replay
    assert bound(y=1) == ("original", g, (), {"y": 1})
    assert other.replay() and len(slow_calls) == 2        # another graph: the hook's
    res = []
    t = threading.Thread(target=lambda: res.append(g.replay()))
    t.start()
    t.join()
    assert res and len(slow_calls) == 3                   # another thread: the hook's
    assert (count.left, count.done) == (0, 3)
    assert g.replay() and len(slow_calls) == 4            # the count spent: the hook's
    count.arm(2, weakref.ref(g), threading.get_ident(), None)
    with pytest.raises(RuntimeError, match="the original failed"):
        g.replay(fail=True)                               # counted, and the failure passes
    assert count.done == 1 and count.disarm() == (1, 0, None) and not count.armed
    with pytest.raises(RuntimeError, match="the original failed"):
        g.replay(fail=True)                               # through the hook, the same
    assert len(slow_calls) == 5


def test_the_counted_sync_counts_where_armed_on_its_thread_and_calls_after_otherwise():
    """_core.CountedSync, installed over a synchronization (a module's function, or a class's
    method as Stream.synchronize is): the original first, with its arguments; once it returned,
    the call adds one to the count's syncs where the count is still armed on this thread (it
    takes no replay), and the Python hook (``after``) is called otherwise, as patch_after's
    wrapper calls it: not where the sync raised; what the hook raises reaches the caller."""
    import threading
    import weakref
    calls, after_calls = [], []
    count = _core.ReplayCount()

    def original(*a, **k):
        calls.append((a, k))
        if k.get("fail"):
            raise RuntimeError("the sync failed")
        if k.get("taken"):
            count.disarm()      # another thread's call took the count while this one waited
        return "synced"
    sync = _core.CountedSync(count, original, lambda: after_calls.append(1))
    assert sync.count is count and sync.original is original and callable(sync.after)
    assert sync(1, device=0) == "synced" and calls[-1] == ((1,), {"device": 0})
    assert len(after_calls) == 1                              # nothing armed: the hook's
    g = _G()
    count.arm(3, weakref.ref(g), threading.get_ident(), "seen")
    assert sync() == sync() == "synced" and len(after_calls) == 1   # counted: Python not reached
    assert (count.syncs, count.left, count.done) == (2, 3, 0)
    res = []
    t = threading.Thread(target=lambda: res.append(sync()))
    t.start()
    t.join()
    assert res == ["synced"] and len(after_calls) == 2 and count.syncs == 2   # another thread
    with pytest.raises(RuntimeError, match="the sync failed"):
        sync(fail=True)
    assert count.syncs == 2 and len(after_calls) == 2        # neither counted nor hooked
    assert count.disarm() == (0, 2, "seen") and count.syncs == 0
    count.arm(3, weakref.ref(g), threading.get_ident(), None)
    assert sync(taken=True) == "synced" and len(after_calls) == 3    # taken meanwhile
    count.arm(1, weakref.ref(g), threading.get_ident(), None)
    assert count.counts(g) and count.left == 0
    assert sync() == "synced" and len(after_calls) == 4      # the count spent: the hook's
    assert count.disarm() == (1, 0, None)

    class Stream:                                            # as a class's method: bound
        def synchronize(self, *a):
            return ("synced", self, a)
    Stream.synchronize = _core.CountedSync(count, Stream.synchronize,
                                           lambda: after_calls.append(2))
    st = Stream()
    assert st.synchronize(4) == ("synced", st, (4,)) and after_calls[-1] == 2
    count.arm(2, weakref.ref(g), threading.get_ident(), None)
    assert st.synchronize() == ("synced", st, ()) and count.syncs == 1 and len(after_calls) == 5
    count.disarm()
    bad = _core.CountedSync(count, original, lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        bad()                                                # the hook's failure: the caller's
    with pytest.raises(TypeError, match="after"):
        _core.CountedSync(count, original, None)
    with pytest.raises(TypeError, match="count: a ReplayCount"):
        _core.CountedSync(object(), original, original)


def test_the_watcher_takes_the_counted_syncs_as_sync_points():
    """Syncs counted between counted replays leave the count armed (the replays after them are
    counted too), and the watcher adds them as it would have counted each: a sync point, a
    hooked call at the estimated cost, no unit."""
    import threading
    from l2persist.process import fastcount
    g = _G()
    me = threading.get_ident()
    w, seen = _counting_owner(g, thread=me)
    count = _core.ReplayCount()
    c = fastcount.Counting(w, count)
    c.ns = 100.0
    c.arm("replay", g, seen, me)
    sync = _core.CountedSync(count, lambda: None, lambda: pytest.fail("reached the watcher"))
    for _ in range(3):
        assert count.counts(g)
        sync()
    c.take()
    assert (w.units_now, w.points, seen.replays, w.hook_calls, w.hook_ns, c.calls) == \
        (3 + 3, {"replay": 3, "sync": 3}, 3, 6, 600.0, 6)
    assert not count.armed


def test_patch_after_with_a_count_installs_the_c_sync_and_its_hook_comes_off():
    import threading
    import types
    import weakref
    from l2persist.process import torch as ptorch

    def synchronize(device=None):
        """Waits for the device."""
        return ("synced", device)
    cuda = types.SimpleNamespace(synchronize=synchronize)
    hits = []
    count = _core.ReplayCount()
    hook = ptorch.patch_after(cuda, "synchronize", lambda: hits.append(1), "cuda.synchronize",
                              count=count)
    assert isinstance(cuda.synchronize, _core.CountedSync)
    assert (cuda.synchronize.__name__, cuda.synchronize.__doc__) == \
        ("synchronize", "Waits for the device.") and cuda.synchronize.__wrapped__ is synchronize
    assert cuda.synchronize(device=1) == ("synced", 1) and hits == [1]
    g = _G()
    count.arm(5, weakref.ref(g), threading.get_ident(), None)
    assert cuda.synchronize() == ("synced", None) and hits == [1] and count.syncs == 1
    count.disarm()
    assert hook.off() and cuda.synchronize is synchronize


def test_the_counted_replay_refuses_bad_arguments_by_name_and_is_collected():
    import gc
    import weakref
    count = _core.ReplayCount()
    f = lambda self: None                                  # noqa: E731
    with pytest.raises(TypeError, match="count: a ReplayCount"):
        _core.CountedReplay(object(), f, f)
    with pytest.raises(TypeError, match="original"):
        _core.CountedReplay(count, 3, f)
    with pytest.raises(TypeError, match="slow"):
        _core.CountedReplay(count, f, None)
    g = _G()
    with pytest.raises(TypeError, match="ref: a weak reference"):
        count.arm(1, g, 1, None)
    with pytest.raises(ValueError, match=r"left: -1 is outside \[0, "):
        count.arm(-1, weakref.ref(g), 1, None)
    with pytest.raises(ValueError, match=r"thread: a thread identifier .*not -2"):
        count.arm(1, weakref.ref(g), -2, None)
    with pytest.raises(ValueError, match=r"thread: a thread identifier .*not 'main'"):
        count.arm(1, weakref.ref(g), "main", None)
    assert not count.armed and count.left == 0          # a refused arm changed nothing
    count.arm(1, weakref.ref(g), 2 ** 63 + 5, None)      # a C unsigned long: all of it
    assert count.thread == 2 ** 63 + 5
    count.disarm()
    # a record whose release arms the count again (its __del__): the last arm wins, whole
    class Rearms:
        def __del__(self):
            count.arm(1, weakref.ref(g), 1, "armed from the release")
    count.arm(3, weakref.ref(g), 1, Rearms())
    count.arm(2, weakref.ref(g), 1, "armed")
    assert (count.left, count.seen) == (1, "armed from the release")
    count.disarm()
    # cycles through the hook (its Python path holding what holds it) and through a count
    # (the record it hands back holding the count) are collected
    class Holder:
        pass
    holder = Holder()
    holder.hook = _core.CountedReplay(count, f, lambda self, h=holder: h)
    holder.count = _core.ReplayCount()
    holder.count.arm(1, weakref.ref(g), 1, holder)
    gone = weakref.ref(holder)
    del holder
    gc.collect()
    assert gone() is None


def _tp_clear(obj):
    """What a collection does to an object in cyclic garbage: its type's tp_clear, called
    directly (PyType_GetSlot; Py_tp_clear is slot 51)."""
    import ctypes
    get_slot = ctypes.pythonapi["PyType_GetSlot"]      # a fresh one: its types are ours alone
    get_slot.restype, get_slot.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_int]
    clear = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object)(get_slot(type(obj), 51))
    assert clear(obj) == 0


def test_the_hooks_and_the_count_read_none_once_cleared():
    """A finalizer in the same garbage may reach a hook or a count after the collection
    cleared it: each field then reads None (not a dangling pointer), a call says it was
    cleared, a cleared count reads disarmed, and each still deallocates once."""
    import weakref
    g = _G()
    count = _core.ReplayCount()
    count.arm(4, weakref.ref(g), threading.get_ident(), "the record")
    refs = sys.getrefcount(count)
    replay = _core.CountedReplay(count, lambda self: "replayed", lambda self: "slow")
    sync = _core.CountedSync(count, lambda: "synced", lambda: None)
    assert replay.count is count and sync.original() == "synced"
    held = [weakref.ref(f) for f in (replay.original, replay.slow, sync.original, sync.after)]
    for hook, other in ((replay, "slow"), (sync, "after")):
        _tp_clear(hook)
        assert (hook.count, hook.original, getattr(hook, other)) == (None, None, None)
    assert [r() for r in held] == [None] * 4                  # what they held, let go
    with pytest.raises(RuntimeError, match="CountedReplay: called after it was cleared"):
        replay(g)
    with pytest.raises(RuntimeError, match="CountedSync: called after it was cleared"):
        sync()
    assert (count.left, count.seen) == (4, "the record")     # the count itself untouched
    assert sys.getrefcount(count) == refs                   # the hooks let it go
    _tp_clear(count)
    assert (count.armed, count.thread, count.seen, count.left) == (False, None, None, 0)
    assert count.disarm() == (0, 0, None)
    gone = [weakref.ref(o) for o in (replay, sync)]
    del replay, sync, count, hook
    gc.collect()
    assert [r() for r in gone] == [None, None]


def test_the_cost_estimate_uses_a_count_of_its_own():
    """fastcount.cost_ns() times a counted call on a count of its own: the process's count,
    armed meanwhile, is left as it was, and the estimate is a finite, positive figure (a
    counted call is never free: see the next test)."""
    import math
    import threading
    import weakref
    from l2persist.process import fastcount as fc
    g = _G()
    fc.COUNT.arm(5, weakref.ref(g), threading.get_ident(), "the record")
    try:
        ns = fc.cost_ns()
        assert math.isfinite(ns) and ns > 0.0
        assert (fc.COUNT.left, fc.COUNT.done, fc.COUNT.seen) == (5, 0, "the record")
    finally:
        fc.COUNT.disarm()


def test_a_cost_estimate_lost_in_noise_is_measured_again_then_bounded_from_above(monkeypatch):
    """The counted call does all the plain one does and more, so a difference of zero or less
    is the machine's noise (a loaded two-core machine read 0, and the hooks' share of watching
    with it): cost_ns measures again, up to its tries, and where the difference never comes
    out positive takes the counted call's whole time, an upper bound."""
    from l2persist.process import fastcount as fc
    batches = iter([(80.0, 70.0), (80.0, 80.0), (60.0, 95.0)])   # (plain, counted) ns a call
    monkeypatch.setattr(fc, "_fastest", lambda: next(batches))
    assert fc.cost_ns() == 35.0                  # the third try resolved it
    batches = iter([(80.0, 70.0)] * 3)
    monkeypatch.setattr(fc, "_fastest", lambda: next(batches))
    assert fc.cost_ns() == 70.0                  # never resolved: the counted call's whole time
    with pytest.raises(StopIteration):           # three tries, no more
        fc.cost_ns()
    batches = iter([(50.0, 90.0), (80.0, 70.0)])
    monkeypatch.setattr(fc, "_fastest", lambda: next(batches))
    assert fc.cost_ns() == 40.0 and next(batches) == (80.0, 70.0)   # resolved: no more tries


def test_patch_replay_with_a_count_installs_the_c_method_and_the_undo_removes_it(monkeypatch):
    import threading
    import types
    import weakref
    from l2persist.process import torch as ptorch
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace())

    class Graph:
        def replay(self):
            return "replayed"
    original = Graph.__dict__["replay"]
    seen = []
    count = _core.ReplayCount()
    undo = ptorch.patch_replay(Graph, lambda graph, stream: seen.append(graph), stream=False,
                               count=count)
    g = Graph()
    assert isinstance(Graph.__dict__["replay"], _core.CountedReplay)
    assert g.replay() == "replayed" and seen == [g]
    # named and signed as the original, weakly referenceable as a function is
    import inspect
    assert (Graph.replay.__name__, Graph.replay.__qualname__) == \
        ("replay", original.__qualname__) and Graph.replay.__wrapped__ is original
    assert str(inspect.signature(g.replay)) == "()"
    assert weakref.WeakMethod(g.replay)() == g.replay
    count.arm(1, weakref.ref(g), threading.get_ident(), None)
    assert g.replay() == "replayed" and seen == [g] and count.done == 1
    undo()
    assert Graph.__dict__["replay"] is original


def test_counting_backs_off_after_empty_counts_and_a_full_one_resets_it():
    """Arming where the counts come back empty (replays alternating with syncs) is the cost:
    after IDLE_ARMS empty counts in a row the next SKIP_FIRST chances are skipped, then twice
    as many, up to SKIP_MAX; a count with calls in it starts over."""
    import threading
    from l2persist.process import fastcount as fc
    g = _G()
    me = threading.get_ident()
    w, seen = _counting_owner(g, thread=me, units_per_block=10 ** 9)
    count = _core.ReplayCount()
    c = fc.Counting(w, count)

    def empty_round():
        c.arm("replay", g, seen, me)
        c.take()
    for _ in range(fc.IDLE_ARMS):
        empty_round()
    assert c.wait == fc.SKIP_FIRST and c.skip == 2 * fc.SKIP_FIRST
    arms = c.arms
    for _ in range(fc.SKIP_FIRST):
        c.arm("replay", g, seen, me)                  # skipped: nothing armed
    assert c.arms == arms and count.left == 0
    for _ in range(fc.IDLE_ARMS):
        empty_round()
    assert c.wait == 2 * fc.SKIP_FIRST
    c.wait = 0
    c.skip = fc.SKIP_MAX
    for _ in range(fc.IDLE_ARMS):
        empty_round()
    assert c.wait == fc.SKIP_MAX and c.skip == fc.SKIP_MAX     # no further than the cap
    c.wait = 0
    c.arm("replay", g, seen, me)
    assert count.counts(g)
    c.take()                                          # calls in it: the back-off starts over
    assert (c.idle, c.skip, c.wait) == (0, fc.SKIP_FIRST, 0)


# ---- CUPTI let go after the probe (letgo.py) ------------------------------------------------

class _Owned:
    """A graph's owner; renewable or not."""
    def __init__(self, renewable=True):
        self.renewable = renewable


def _letgo_owner(**kw):
    g = _Owned()
    seen = _ns(ref=lambda: g, renewed=0)

    def change_windows(changes, fresh=False):
        seen.renewed += 1
        return True
    seen.change_windows = change_windows
    o = _ns(o=_ns(replay_events=True, keep_cupti=False, device=0), timing="events",
            records_off=True,
            activity=True, team=None, graph_records=False, unit=("replay", "k2-aa"),
            other_threads=False, captures=0, graphs={1: seen}, cupti_after_probe=None,
            graphs_renewed=0, landed_read_back=False, calls=[], cupti_release=None,
            clock_tracking=True, captures_begun=1, tracking_ended=False, notes=[],
            letgo_ms=None)
    o.device = _ns(synchronize=lambda: o.calls.append("sync"))

    def request_release(hand_captures):
        o.calls.append(("release", hand_captures))
        o.cupti_release = ("releasing", None)

    def end_tracking():
        o.calls.append("end_tracking")
        o.tracking_ended = True
    o.gate = _ns(end_tracking=end_tracking, request_release=request_release,
                 _take_back=lambda: o.calls.append("take_back"))
    o.__dict__.update(kw)
    return o


@pytest.fixture
def letgo_core(monkeypatch):
    from l2persist.process import letgo, torch as process_torch
    state = {"cupti": "attached"}
    calls = []

    def detach():
        calls.append("detach")
        if state.get("refuse"):
            raise RuntimeError("activity: not collecting with CUPTI")

    def cupti_state():
        return state["cupti"]
    state["counts"] = {"begun": 1, "unmatched": 0}     # PyTorch's one capture, as its hooks
    monkeypatch.setattr(letgo, "_core", _ns(
        activity_detach=detach, cupti_state=cupti_state,
        _capture_counts=lambda: dict(state["counts"]),
        activity_detached=lambda: "detach" in calls and "end" not in calls,
        activity_end=lambda: calls.append("end"),
        activity_begin=lambda device: calls.append("begin"),
        activity_record=lambda on: calls.append(("record", on))))
    monkeypatch.setattr(process_torch, "renewable", lambda owner: owner.renewable)
    monkeypatch.setattr(clock, "_profiler_on", lambda: False)
    monkeypatch.setattr(phases, "_makes_own_graphs", lambda: False)
    monkeypatch.setattr(letgo, "OTHER_CAPTURERS", ("l2p_test_capturer",))
    return letgo, state, calls


def test_letgo_detaches_ends_tracking_releases_then_renews_each_graph(letgo_core):
    letgo, state, calls = letgo_core
    w = _letgo_owner()
    w.device.synchronize = lambda: (w.calls.append("sync"), state.update(cupti="released"))
    letgo.LetGo(w).after_probe()
    assert calls == ["detach"]
    # tracking ends before the request (its subscriber would hold CUPTI), the request goes
    # without the capture count, and the watcher's own synchronization carries it out
    assert w.calls == ["end_tracking", ("release", False), "sync"], w.calls
    assert w.cupti_after_probe == ("released", None) and w.graphs_renewed == 1
    assert w.graphs[1].renewed == 1 and w.landed_read_back is True


@pytest.mark.parametrize("now", ["releasing", "withdrawn", "held"])
def test_letgo_undoes_itself_where_the_release_was_not_carried_out(letgo_core, now):
    """Refused (held), withdrawn by a capture, or not carried out by the synchronization: no
    graph made again, a pending request taken back, the log collecting with CUPTI again with
    its records off (as the search's blocks keep them), the capture count on again (the
    clock begins it: clock_tracking None), and the decision's release free to try."""
    letgo, state, calls = letgo_core
    state["cupti"] = now
    w = _letgo_owner()
    if now == "held":
        w.gate.request_release = lambda hand_captures: setattr(
            w, "cupti_release", ("held", "another subscriber"))
    letgo.LetGo(w).after_probe()
    assert w.cupti_after_probe == ("kept", f"the release was not carried out ({now})")
    assert w.graphs_renewed == 0 and w.graphs[1].renewed == 0
    assert ("take_back" in w.calls) == (now != "held")
    assert calls == ["detach", "end", "begin", ("record", False)]
    assert w.cupti_release is None and w.landed_read_back is False
    assert w.tracking_ended is False and w.clock_tracking is None


def test_letgo_renews_after_a_synchronization_that_raised_once_cupti_is_gone(letgo_core):
    """The synchronization raises (an asynchronous error of the program's) after its exit
    carried the release out: the graphs are still made again, then the error goes on."""
    letgo, state, calls = letgo_core

    def bad_sync():
        state["cupti"] = "released"
        raise RuntimeError("an illegal address")
    w = _letgo_owner()
    w.device.synchronize = bad_sync
    with pytest.raises(RuntimeError, match="illegal address"):
        letgo.LetGo(w).after_probe()
    assert w.graphs_renewed == 1 and w.cupti_after_probe == ("released", None)
    assert w.letgo_ms is not None


def test_letgo_leaves_the_graphs_where_another_thread_came_during_it(letgo_core):
    """Another thread's first watched call during the let-go (its steps let the GIL go): the
    graphs are not made again under its replays, and a note says so."""
    letgo, state, calls = letgo_core
    w = _letgo_owner()

    def sync():
        state["cupti"] = "released"
        w.other_threads = True
    w.device.synchronize = sync
    letgo.LetGo(w).after_probe()
    assert w.cupti_after_probe[0] == "released" and w.graphs_renewed == 0
    assert w.graphs[1].renewed == 0 and "another thread" in w.notes[-1]


@pytest.mark.parametrize("change, why", [
    (dict(o=_ns(replay_events=True, keep_cupti=True)), "L2PERSIST_KEEP_CUPTI=1"),
    (dict(team=object()), "ranks in lockstep"),
    (dict(graph_records=True), "graph records"),
    (dict(unit=("tick",)), "clock is the unit"),
    (dict(other_threads=True), "another thread"),
    (dict(captures=1), "a capture is open"),
    ("capturer", "l2p_test_capturer loaded"),
    (dict(clock_tracking=False), "captures were not tracked"),
    (dict(clock_tracking=None), "captures were not tracked"),
    ("unseen", "1 capture(s) PyTorch's hooks did not see"),
    ("unmatched", "1 capture(s) PyTorch's hooks did not see"),
    ("unrenewable", "cannot make again"),
    ("profiler", "profiler is on"),
    ("refuse", "could not go on without CUPTI"),
])
def test_letgo_keeps_cupti_where_anything_may_still_need_it(letgo_core, monkeypatch, change,
                                                            why):
    letgo, state, calls = letgo_core
    w = _letgo_owner(**(change if isinstance(change, dict) else {}))
    if change == "capturer":
        monkeypatch.setitem(sys.modules, "l2p_test_capturer", types.ModuleType("x"))
    elif change == "unrenewable":
        bad = _Owned(renewable=False)
        w.graphs[2] = _ns(ref=lambda: bad)
    elif change == "profiler":
        monkeypatch.setattr(clock, "_profiler_on", lambda: True)
    elif change == "refuse":
        state["refuse"] = True
    elif change == "unseen":               # a capture by a library no module name gives away
        state["counts"]["begun"] = 2
    elif change == "unmatched":            # one begun before the count, ended under it
        state["counts"]["unmatched"] = 1
    letgo.LetGo(w).after_probe()
    assert w.cupti_after_probe[0] == "kept" and why in w.cupti_after_probe[1], w.cupti_after_probe
    assert w.calls == [] and w.landed_read_back is False
    assert calls == (["detach"] if change == "refuse" else [])


@pytest.mark.parametrize("change", [dict(timing="nodes"), dict(records_off=False),
                                    dict(o=_ns(replay_events=False, keep_cupti=False))])
def test_letgo_asks_nothing_where_the_records_still_time_the_search(letgo_core, change):
    letgo, state, calls = letgo_core
    w = _letgo_owner(**change)
    letgo.LetGo(w).after_probe()
    assert w.cupti_after_probe is None and calls == [] and w.calls == []


@pytest.mark.parametrize("detached", [True, False])
def test_letgo_reattach_begins_cuptis_records_again_only_where_detached(monkeypatch, detached):
    """A restart after the let-go: the detached log ended, CUPTI begun again and every graph
    made again under it, the capture count on again (the clock begins it), the let-go's
    figures cleared; a log never detached is left alone."""
    from l2persist.process import letgo
    calls = []
    monkeypatch.setattr(letgo, "_core", _ns(
        activity_detached=lambda: detached, activity_end=lambda: calls.append("end"),
        activity_begin=lambda device: calls.append(("begin", device))))
    w = _letgo_owner(o=_ns(device=3), cupti_after_probe=("released", None), graphs_renewed=1,
                     letgo_ms=5.0, tracking_ended=True, clock_tracking=True)
    part = letgo.LetGo(w)
    part.ended_tracking = detached
    part.reattach()
    assert calls == (["end", ("begin", 3)] if detached else [])
    assert w.graphs[1].renewed == (1 if detached else 0)
    assert (w.cupti_after_probe, w.graphs_renewed, w.letgo_ms) == (None, 0, None)
    assert (w.tracking_ended, w.clock_tracking) == ((False, None) if detached else (True, True))


def test_letgo_reattach_that_cupti_refuses_goes_on_without_records(monkeypatch):
    """CUPTI cannot be begun again (a profiler the program started since): the search goes on
    without kernel records, with a note, instead of failing the restart."""
    from l2persist.process import letgo

    def refuse(device):
        raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
    monkeypatch.setattr(letgo, "_core", _ns(activity_detached=lambda: True,
                                            activity_end=lambda: None, activity_begin=refuse))
    w = _letgo_owner()
    letgo.LetGo(w).reattach()
    assert w.activity is False and w.graphs[1].renewed == 0
    assert "could not be attached again" in w.notes[-1]


def test_landing_reads_the_windows_back_from_the_graphs_nodes_once_cupti_is_gone():
    """Once CUPTI was let go (letgo.py) each arm's first block reads every known graph's
    kernel nodes: a node counts once under its window (ids shared across arms), or under none;
    a graph dropped or reset is left out; later blocks of the arm read nothing."""
    def node(win):
        return _ns(access_policy_window=None if win is None else
                   _ns(base_ptr=win[0], num_bytes=win[1]))

    class Reset:
        @property
        def kernel_nodes(self):
            raise RuntimeError("the graph was reset")
    nodes = {"a": [node((0x1000, 64)), node(None), node((0x1000, 64))],
             "b": [node((0x9000, 32))]}
    graphs = {1: _ns(borrow=lambda: _ns(kernel_nodes=nodes["a"])),
              2: _ns(borrow=lambda: _ns(kernel_nodes=nodes["b"])),
              3: _ns(borrow=lambda: None), 4: _ns(borrow=lambda: Reset())}
    w = _ns(landed_read_back=True, landed_why=None, landed_on=False, landed_blocks={},
            landed_seen={}, landed_table={}, graphs=graphs)
    lg = landing.Landing(w)
    assert lg.before_block(2) is False            # no launch attribute, no landing block
    assert w.landed_table == {1: (0x1000, 64), 2: (0x9000, 32)}
    assert w.landed_seen == {2: {1: 2, 0: 1, 2: 1}} and w.landed_blocks == {2: 1}
    nodes["b"] = [node((0x1000, 64))]
    lg.before_block(2)                            # checked already: not read again
    assert w.landed_seen[2] == {1: 2, 0: 1, 2: 1}
    lg.before_block(3)
    assert w.landed_seen[3] == {1: 3, 0: 1} and len(w.landed_table) == 2
    # every graph dropped or reset: the arm stays unchecked (read again at its next block),
    # not counted as checked over no kernel
    kept = dict(graphs)
    for k in (1, 2):
        del graphs[k]
    lg.before_block(4)
    assert 4 not in w.landed_seen and 4 not in w.landed_blocks
    graphs.update(kept)
    lg.before_block(4)
    assert w.landed_seen[4] == {1: 3, 0: 1} and w.landed_blocks[4] == 1
