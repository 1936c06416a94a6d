"""The advisor without a GPU: the C search through its Python bridge on a synthetic process
(a histogram that gains from a window, a step that only pays the set-aside), the bridge's
refusals, advise()'s argument checks, and Advice's JSON."""

import json
import math

import pytest

import l2persist
from l2persist import _core
from l2persist.advise import Advice, WorkloadAdvice

MIB = 1 << 20
G = 3932160
FACTS = (G, 10 * G, 3 * G)


def _world(tax=0.5, gain=0.3, calls=None):
    """Workload 0: 1 ms, a window over its 40 MiB table saves up to `gain`; workload 1: 1 ms
    plus `tax` * (set-aside / max)^2. Deterministic small noise."""
    state = {"i": 0}

    def evaluate(work, config, repeat):
        if calls is not None:
            calls.append(work)
        s = config["set_aside"]
        if work == 0:
            w = config["windows"][0]
            kept = 0.0 if w is None else min(w["hit_ratio"] * 40 * MIB, s) / (40 * MIB)
            t = 1.0 - gain * kept
        else:
            t = 1.0 + tax * (s / (10 * G)) ** 2
        out = []
        for _ in range(repeat):
            state["i"] += 1
            out.append(t * (1 + 0.001 * math.sin(state["i"])))
        return out
    return evaluate


def _search(evaluate, weights, must_not_slow=(False, False), **kw):
    return _core.advise_search(evaluate, None, weights, list(must_not_slow), [0],
                               [40 * MIB], [0], facts=FACTS, **kw)


def test_the_weights_decide_and_each_tax_is_reported():
    heavy = _search(_world(), [10.0, 1.0])
    assert heavy["helps"] and heavy["recommended_set_aside"] > 0
    assert heavy["found"]["windows"][0] is not None
    w0, w1 = heavy["work"]
    assert w0["speedup"] > 1.1 and w0["n_windows"] == 1
    assert w1["tax"] > 1.0 and w1["n_windows"] == 0 and w1["slows"]
    assert heavy["ci_low"] <= heavy["speedup"] <= heavy["ci_high"]
    light = _search(_world(), [0.05, 1.0])
    assert not light["helps"]
    assert light["recommended_set_aside"] in (0, FACTS[2])
    blocked = _search(_world(), [10.0, 1.0], must_not_slow=(False, True))
    assert not blocked["helps"] and blocked["blocked_by"] == 1


def test_the_confirmation_measures_four_arms_per_workload_and_round():
    calls = []
    r = _search(_world(calls=calls), [1.0, 1.0], confirm_rounds=2, repeat=3)
    assert r["evals"] == len(calls)
    rounds = r["confirm_rounds"]
    assert rounds >= 2
    tail = calls[-rounds * 4 * 2:]                  # arms x workloads per round
    assert tail.count(0) == tail.count(1) == rounds * 4


def test_bridge_refusals():
    ev = _world()
    with pytest.raises(ValueError, match="weights: item 0"):
        _core.advise_search(ev, None, [0.0, 1.0], [False, False], [0], [MIB], [0], facts=FACTS)
    with pytest.raises(ValueError, match="must_not_slow: one per workload"):
        _core.advise_search(ev, None, [1.0, 1.0], [False], [0], [MIB], [0], facts=FACTS)
    with pytest.raises(ValueError, match="targets: target 0 belongs to workload 5"):
        _core.advise_search(ev, None, [1.0], [False], [5], [MIB], [0], facts=FACTS)
    with pytest.raises(ValueError, match="repeat"):
        _search(ev, [1.0, 1.0], repeat=1)

    def boom(work, config, repeat):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        _search(boom, [1.0, 1.0])
    with pytest.raises(ValueError, match="evaluate: returned 1 samples"):
        _search(lambda w, c, n: [1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="sample 0 is -1"):
        _search(lambda w, c, n: [-1.0] * n, [1.0, 1.0])


def test_advise_checks_its_arguments_before_the_device():
    with pytest.raises(TypeError, match="workloads: expected a non-empty dict"):
        l2persist.advise({})
    with pytest.raises(ValueError, match="weight_unit"):
        l2persist.advise({"a": lambda: None}, weight_unit="percent")
    with pytest.raises(ValueError, match=r"must_not_slow: \['b'\] are not workloads"):
        l2persist.advise({"a": lambda: None}, must_not_slow=["b"])
    with pytest.raises(ValueError, match=r"workloads\['a'\]: weight -1"):
        l2persist.advise({"a": (lambda: None, -1)})
    with pytest.raises(TypeError, match=r"workloads\['a'\]: unknown keys \['wieght'\]"):
        l2persist.advise({"a": {"fn": lambda: None, "wieght": 2}})
    with pytest.raises(TypeError, match=r"workloads\['a'\]: expected fn"):
        l2persist.advise({"a": 3})
    with pytest.raises(TypeError, match=r"workloads\['a'\]: \(fn, weight\) needs a callable"):
        l2persist.advise({"a": (3, 1)})
    with pytest.raises(TypeError, match=r"workloads\['a'\]\['must_not_slow'\]: expected True"):
        l2persist.advise({"a": {"fn": lambda: None, "must_not_slow": "no"}})
    with pytest.raises(TypeError, match="must_not_slow: expected workload names"):
        l2persist.advise({"a": lambda: None}, must_not_slow=True)
    with pytest.raises(ValueError, match="workloads: 65 workloads, at most 64"):
        l2persist.advise({f"w{i}": lambda: None for i in range(65)})
    with pytest.raises(TypeError, match="interleave"):
        l2persist.advise({"a": lambda: None}, interleave="yes")


@pytest.mark.parametrize("option, value", [("min_gain", 5), ("min_gain", -0.1),
                                           ("confidence", 0.3), ("repeat", 1),
                                           ("search_repeat", 0), ("confirm_rounds", 65),
                                           ("tries", 17), ("recheck_rounds", -1)])
def test_advise_checks_its_options_before_any_workload_runs(option, value):
    """A bad option is refused, named with its range, before discovery or timing runs fn
    (and before the device is asked: this runs without a GPU too)."""
    ran = []
    with pytest.raises(ValueError, match=rf"{option}: .*(outside|in) \["):
        l2persist.advise({"a": lambda: ran.append(1)}, **{option: value})
    assert ran == []


def _mix_world(thrash, offsets=(0.0, 0.0), calls=None):
    """Two gainers (each with a window over its own 40 MiB table); interleaved, each loses
    `thrash` ms while the other's window is on too (their lines evict each other's)."""
    blocks = _world(tax=0.0)

    def evaluate(work, config, repeat):
        cfg = dict(config, windows=[config["windows"][work]])
        return blocks(0, cfg, repeat)

    def mix(config, repeat):
        if calls is not None:
            calls.append(repeat)
        both = all(w is not None for w in config["windows"])
        out = []
        for w in range(2):
            cfg = dict(config, windows=[config["windows"][w]])
            out += [t + (thrash if both else 0.0) + offsets[w] for t in blocks(0, cfg, repeat)]
        return out
    return evaluate, mix


def test_the_confirmation_runs_the_workloads_interleaved():
    """Timed alone, each gainer's window helps; interleaved, their windows evict each other
    and the plan loses: with mix= the confirmation (C core) says "don't"; its samples are the
    mix's, each workload's own, one mix call per arm and round."""
    ev, mix = _mix_world(0.3)
    args = (ev, None, [1.0, 1.0], [False, False], [0, 1], [40 * MIB] * 2, [0, 1])
    alone = _core.advise_search(*args, facts=FACTS)
    assert alone["helps"]
    calls = []
    ev, mix = _mix_world(0.3, calls=calls)
    mixed = _core.advise_search(ev, *args[1:], facts=FACTS, mix=mix, repeat=4)
    assert not mixed["helps"] and mixed["speedup"] < 1.0
    assert calls == [4] * (4 * mixed["confirm_rounds"])
    ev, mix = _mix_world(0.0, offsets=(0.0, 0.25))
    r = _core.advise_search(ev, *args[1:], facts=FACTS, mix=mix, min_gain=0.9)
    assert abs(r["work"][1]["limit0_ms"] - r["work"][0]["limit0_ms"] - 0.25) < 0.01
    with pytest.raises(ValueError, match="mix: returned 3 samples"):
        _core.advise_search(ev, *args[1:], facts=FACTS, mix=lambda c, n: [1.0] * 3)


def test_advice_json_round_trip():
    w = WorkloadAdvice("decode", 0.5, "default", 1.0, 0.9, 0.95, 0.8, 1.125, (1.1, 1.15), 1.05,
                       True, False, False, [{"buffer": "kv", "bytes": MIB, "hit_ratio": 0.6,
                                             "hit_prop": 2, "miss_prop": 1}])
    a = Advice("H200", True, 26 * MIB, 26 * MIB, "default", 1.0, 0.9, 1.11, (1.05, 1.2), None,
               {"decode": w}, [(0, 1.0), (G, 0.95)], 40, 3, 2.5, 0.01, "share")
    b = Advice.from_json(a.to_json())
    assert b.workloads["decode"] == w and b.ci == a.ci and b.levels == a.levels
    assert "persist: set-aside 26" in b.verdict() and "| decode |" in b.table()
    with pytest.raises(RuntimeError, match="plan: this advice was loaded from JSON"):
        b.plan
    # a level the search did not reach has no total: strict JSON (null), NaN again on load
    a.levels.append((2 * G, float("nan")))
    text = a.to_json()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert math.isnan(Advice.from_json(text).levels[-1][1])
    with pytest.raises(ValueError, match="text_or_path: not the JSON of an Advice"):
        Advice.from_json("{}")


def test_advice_html_escapes_the_users_names():
    """A workload's name is the user's text: in a notebook's HTML it is shown, not parsed."""
    name = "<b>kv & co</b>"
    w = WorkloadAdvice(name, 1.0, "default", 1.0, 0.9, 0.95, 0.8, 1.125, (1.1, 1.15), 1.05,
                       True, False, False, [])
    a = Advice("H200", True, 26 * MIB, 26 * MIB, "default", 1.0, 0.9, 1.11, (1.05, 1.2), None,
               {name: w}, [(0, 1.0)], 40, 3, 2.5, 0.01, "share")
    page = a._repr_html_()
    assert "<td>&lt;b&gt;kv &amp; co&lt;/b&gt;</td>" in page and "<b>kv" not in page
    assert name in a.table()  # the text table keeps the name as given


def test_the_recheck_is_the_cores_and_reported():
    """recheck_rounds: a recommended plan measured again in fresh rounds (C core); a gain
    that fades after the confirmation is dropped for the better baseline."""
    held = _search(_world(), [10.0, 1.0], recheck_rounds=2)
    assert held["helps"] and held["recheck"]["held"] and held["recheck"]["rounds"] == 2
    lo, hi = held["recheck"]["ci"]
    assert lo <= held["recheck"]["speedup"] <= hi and held["recheck"]["speedup"] > 1.1
    assert _search(_world(), [10.0, 1.0], recheck_rounds=0)["recheck"] is None  # 0: not run
    # omitted: the core's default rounds (l2p_advise_options_default), as advise()'s default
    default = _core.advise_defaults()["recheck_rounds"]
    assert default > 0 and _search(_world(), [10.0, 1.0])["recheck"]["rounds"] == default
    calls = []
    first = _search(_world(calls=calls), [10.0, 1.0], recheck_rounds=2)
    fade_at = len(calls) - 2 * 4 * 2           # the recheck's evaluations come last
    ev = _world()

    def fading(work, config, repeat):
        fading.n += 1
        if fading.n > fade_at:                  # every configuration alike from here on
            config = {"set_aside": 0, "windows": [None] * len(config["windows"])}
        return ev(work, config, repeat)
    fading.n = 0
    gone = _search(fading, [10.0, 1.0], recheck_rounds=2)
    assert first["helps"] and not gone["helps"] and not gone["recheck"]["held"]
    assert gone["recommended_set_aside"] in (0, FACTS[2])


def test_the_defaults_have_one_home():
    """advise()'s signature, advise_search's omitted options and the C core's
    l2p_advise_options_default are one set of numbers (they once disagreed: min_gain 0.02 in
    Python, 0.01 in the parser and the core; recheck_rounds 3, 0 and 0)."""
    import inspect
    core = _core.advise_defaults()
    assert set(core) == {"tries", "search_repeat", "repeat", "confirm_rounds", "recheck_rounds",
                         "remeasure_levels", "remeasure_rounds", "min_gain", "confidence",
                         "seed"}
    sig = inspect.signature(l2persist.advise).parameters
    assert {k: sig[k].default for k in core} == core
    from l2persist.advise import DEFAULTS
    assert DEFAULTS == core
    # the parser's rows name no number of their own: every option defaults to the core's
    params = dict((p[0], p) for p in _core._signatures["advise_search"][0])
    assert all(params[k][2] == "None" for k in core), params
    # and an omitted option acts as the core's default: the same search, the same answer
    given = _search(_world(), [10.0, 1.0], **core)
    omitted = _search(_world(), [10.0, 1.0])
    assert json.dumps(given, sort_keys=True) == json.dumps(omitted, sort_keys=True)  # NaN too
    assert given["recheck"] is not None


def test_the_level_is_picked_after_a_remeasure():
    """Before the set-aside is picked, the search's best levels (each with its windows) are
    measured again in fresh interleaved rounds (C core, issue 38 item 5; its defaults live in
    l2p_advise_options_default and its effect under noise is tested in tests/c/test_advise.c):
    the result names the levels re-measured, with their totals of pooled medians, beside the
    single pass's pick; in a world without noise the pick does not move."""
    calls = []
    r = _search(_world(calls=calls), [10.0, 1.0])
    assert r["evals"] == len(calls)
    levels = dict(r["levels"])
    assert len(r["remeasured"]) >= 2
    for lv, total in r["remeasured"]:
        assert not math.isnan(levels[lv]) and total > 0        # a searched level
    assert r["pass_set_aside"] == r["found"]["set_aside"]
    assert r["found"]["set_aside"] in dict(r["remeasured"])


def test_the_advisor_studys_grid_best_is_its_best_level_re_measured():
    """The study's reference: the grid's few best levels by one pass, re-measured beside the
    advice; the best of them re-measured is the grid's best (the pass's pick can be noise)."""
    from l2persist.studies import advisor
    grid = {0: 10.0, 1: 9.0, 2: 8.5, 3: 8.7, 4: 9.5}
    top = advisor._grid_candidates(grid)
    assert top == [2, 3, 1] and len(top) == advisor.GRID_RECHECK
    again = {"limit0": 10.0, "default": 10.0, "plan": 9.0, "grid0": 10.0, "grid1": 9.1,
             "grid2": 9.6}
    assert advisor._grid_best(again, top) == (3, 9.1)    # not the pass's pick (level 2)
    assert advisor._grid_candidates({5: 1.0}) == [5]


def test_the_advisor_studys_remeasure_times_one_arm_once():
    """A plan that installs what a baseline installs ("don't", keep the default) is that arm:
    timed once and given the baseline's total, so that the rounds' noise between two copies of
    one arm is not read as the advice losing. Plans that differ are timed apart."""
    import types

    from l2persist.studies import advisor

    class FakePlan:
        def __init__(self, set_aside, window=None, off_window=None):
            entries = [{"on": False, "num_bytes": 4096, "buffer": "b"}] if off_window else []
            if window:
                entries.append({"on": True, "num_bytes": window, "buffer": "a"})
            self.d = {"set_aside": set_aside, "entries": entries}

        def to_dict(self):
            return self.d

    applied = []

    def time_mix(repeat):   # a time that depends on what is installed
        d = applied[-1].to_dict()
        t = 10.0 - d["set_aside"] / 10 - sum(e["num_bytes"] for e in d["entries"] if e["on"]) / 2**21
        return [[t] * repeat, [1.0] * repeat]

    ws = types.SimpleNamespace(
        works=[object(), object()], off=lambda lv: lv,
        union=types.SimpleNamespace(configured=lambda lv: FakePlan(lv)),
        session=types.SimpleNamespace(apply=applied.append),
        time_mix=time_mix)
    plans = {"advice": FakePlan(7, off_window=True),          # the default, an entry off
             "grid0": FakePlan(7, window=1 << 20), "grid1": FakePlan(0),
             # the same window on another entry (another graph's buffer that reads alike)
             "grid2": FakePlan(7, window=1 << 20, off_window=True)}
    got = advisor._remeasure(ws, [1.0, 1.0], plans, 7, rounds=2, repeat=3)
    assert got["advice"] == got["default"] and got["grid1"] == got["limit0"]
    assert got["grid0"] != got["default"]
    timed = {id(p) for p in applied}
    assert len(applied) == 2 * 4 and len(timed) == 4   # limit0, default, grid0, grid2; twice
    assert id(plans["advice"]) not in timed and id(plans["grid1"]) not in timed


def test_the_remeasure_can_be_turned_off_and_is_checked():
    """remeasure_levels / remeasure_rounds reach the core: 0 leaves the pass's pick (no level
    re-measured, fewer evaluations); an out-of-range value is a named error."""
    on = _search(_world(), [10.0, 1.0])
    off = _search(_world(), [10.0, 1.0], remeasure_levels=0)
    assert len(on["remeasured"]) >= 2 and off["remeasured"] == []
    assert off["evals"] < on["evals"]
    with pytest.raises(ValueError, match="remeasure_levels"):
        _search(_world(), [10.0, 1.0], remeasure_levels=17)
    with pytest.raises(ValueError, match="remeasure_rounds"):
        _search(_world(), [10.0, 1.0], remeasure_rounds=-1)
