"""The tuner's bridge and result without a GPU: the C search driven by a Python evaluate on a
synthetic cost surface (an H200's geometry given as `facts`), exceptions passing through it,
the statistics and the JSON round trip of a result."""

import math

import numpy as np
import pytest

from l2persist import _core
from l2persist.tune import TuneResult

G, PMAX, DEF = 3932160, 39321600, 11796480
MIB = 1 << 20


def hot_cold_surface(hot_bytes, rng, noise=0.01):
    """Set-aside penalty, gain for persisting bytes that fit, thrash beyond."""
    def evaluate(config, n):
        s = config["set_aside"]
        t = 1.0 + 0.4 * s / PMAX
        w = config["windows"][0]
        if w is not None:
            p = w["hit_ratio"] * hot_bytes
            t -= 0.9 * min(p, s) / hot_bytes
            t += 0.6 * max(p - s, 0) / hot_bytes
        return list(t * (1 + noise * rng.uniform(-1, 1, n)))
    return evaluate


def test_search_finds_the_optimum_and_helps():
    rng = np.random.default_rng()
    calls = []
    ev = hot_cold_surface(16 * MIB, rng)
    r = _core.tune_search(lambda c, n: (calls.append(c), ev(c, n))[1], None, [16 * MIB], [0],
                          facts=(G, PMAX, DEF))
    assert r["persistence_helps"] is True
    assert r["evals"] == len(r["trials"]) <= 18  # the default budget: 14 + 4 per target
    assert r["ci_low"] <= r["speedup"] <= r["ci_high"] and r["ci_low"] > 1
    rec = r["recommended"]
    assert rec["windows"][0] is not None
    # the surface's optimum: set-aside just above 16 MiB (5 granules), hitRatio 1
    assert rec["set_aside"] == 5 * G and rec["windows"][0]["hit_ratio"] == pytest.approx(1.0)
    assert r["trials"][0]["config"] == {"set_aside": 0, "windows": [None]}
    assert r["trials"][1]["config"]["set_aside"] == DEF
    assert len(calls) > r["evals"]  # the confirmation re-measures


def test_flat_surface_recommends_no_persistence():
    rng = np.random.default_rng()
    r = _core.tune_search(lambda c, n: list(1 + 0.02 * rng.uniform(-1, 1, n)), None, [8 * MIB],
                          [0], facts=(G, PMAX, DEF))
    assert r["persistence_helps"] is False
    assert r["recommended"]["windows"] == [None]
    assert r["recommended"]["set_aside"] in (0, DEF)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, ZeroDivisionError])
def test_exceptions_pass_through(exc):
    calls = []

    def ev(config, n):
        calls.append(config)
        if len(calls) == 3:
            raise exc("stop")
        return [1.0] * n
    with pytest.raises(exc):
        _core.tune_search(ev, None, [MIB], [0], facts=(G, PMAX, DEF))
    assert len(calls) == 3


def test_bad_evaluate_results_and_arguments():
    with pytest.raises(ValueError, match="evaluate: returned 1 samples, 10"):
        _core.tune_search(lambda c, n: [1.0], None, [MIB], [0], facts=(G, PMAX, DEF))
    with pytest.raises(ValueError, match="samples: sample 0 is nan"):
        _core.tune_search(lambda c, n: [math.nan] * n, None, [MIB], [0], facts=(G, PMAX, DEF))
    with pytest.raises(ValueError, match="hit_ratios"):
        _core.tune_search(lambda c, n: [1.0] * n, None, [MIB], [0], hit_ratios=[0.5, 0.2],
                          facts=(G, PMAX, DEF))
    with pytest.raises(ValueError, match="target_bytes"):
        _core.tune_search(lambda c, n: [1.0] * n, None, [-5], [0], facts=(G, PMAX, DEF))
    with pytest.raises(ValueError, match="targets"):
        _core.tune_search(lambda c, n: [1.0] * n, None, [], [], facts=(G, PMAX, DEF))
    with pytest.raises(ValueError, match="max_evals"):
        _core.tune_search(lambda c, n: [1.0] * n, None, [MIB], [0], max_evals=2,
                          facts=(G, PMAX, DEF))
    with pytest.raises(ValueError, match="facts"):
        _core.tune_search(lambda c, n: [1.0] * n, None, [MIB], [0], facts=(G, PMAX, PMAX + 1))
    with pytest.raises(TypeError, match="evaluate"):
        _core.tune_search(None, None, [MIB], [0], facts=(G, PMAX, DEF))



def test_entry_points_parse_from_their_rows():
    """The rows name each bad argument and its range; seeds take the full 64 bits; the
    verdict's "default" is a keyword like any other; the seed's default is the documented one."""
    ok = lambda c, n: [1.0] * n  # noqa: E731
    f = (G, PMAX, DEF)
    for kw, exc, msg in [(dict(repeat=-1), ValueError, r"repeat: -1 is outside \[0"),
                         (dict(repeat=0), ValueError, r"repeat: 0 is outside \[1, 100000\]"),
                         (dict(confirm_rounds=1.5), TypeError, "confirm_rounds: expected an int"),
                         (dict(seed=-1), ValueError, r"seed: -1 is outside \[0, 2\^64 - 1\]"),
                         (dict(seed=2 ** 64), ValueError, "seed: "),
                         (dict(seed=1.0), TypeError, "seed: expected None or an int"),
                         (dict(phases=-1), ValueError, "phases: -1 is outside"),
                         (dict(min_gain=math.inf), ValueError, "min_gain"),
                         (dict(facts=(G, PMAX)), TypeError, "facts: expected None or a tuple"),
                         (dict(facts=(G, -1, 0)), ValueError, r"facts\[1\] \(persisting_max\)"),
                         (dict(nope=1), TypeError, "unexpected keyword argument 'nope'")]:
        with pytest.raises(exc, match=msg):
            _core.tune_search(ok, None, [MIB], [0], **{"facts": f, **kw})
    with pytest.raises(ValueError, match="groups: -1 is outside"):
        _core.tune_search(ok, None, [MIB], [-1], facts=f)
    a = [1.0, 1.1, 0.9, 1.0] * 5
    c = [x / 1.2 for x in a]
    top = _core.tune_verdict(a, a, c, seed=2 ** 64 - 1)
    assert _core.tune_verdict(a, default=a, candidate=c, seed=2 ** 64 - 1) == top
    assert top["helps"] and top["speedup"] == pytest.approx(1.2)
    assert _core.tune_verdict(a, a, c) == _core.tune_verdict(a, a, c, seed=0x9E3779B97F4A7C15)
    assert _core.speedup_ci(a, c) == _core.speedup_ci(a, c, seed=1)
    with pytest.raises(ValueError, match="rounds: 0 is outside"):
        _core.tune_verdict(a, a, c, rounds=0)
    with pytest.raises(ValueError, match="default: expected a 1-d sequence"):
        _core.tune_verdict(a, [[1.0]], c)
    assert _core.set_aside_levels(granule=G, persisting_max=PMAX, default_limit=DEF) == \
        _core.set_aside_levels(G, PMAX, DEF)
    with pytest.raises(ValueError,
                       match=r"default_limit: -1 is outside \[0, 2\^63 - 1\] \(bytes\)"):
        _core.set_aside_levels(G, PMAX, -1)


def test_one_window_per_stream_group():
    seen_both = []

    def ev(config, n):
        w = config["windows"]
        seen_both.append(w[0] is not None and w[1] is not None)
        return [1.0 - 0.1 * sum(x is not None for x in w)] * n
    _core.tune_search(ev, None, [MIB, 2 * MIB], [7, 7], facts=(G, PMAX, DEF))
    assert seen_both and not any(seen_both)


def test_speedup_ci():
    rng = np.random.default_rng()
    base = 2.0 + 0.01 * rng.standard_normal(40)
    cand = 1.0 + 0.01 * rng.standard_normal(40)
    ratio, lo, hi = _core.speedup_ci(base, cand)
    assert lo <= ratio <= hi and 1.9 < lo and hi < 2.1
    with pytest.raises(ValueError, match="cand"):
        _core.speedup_ci(base, [1.0, float("nan")])
    with pytest.raises(ValueError, match="base"):
        _core.speedup_ci([], cand)


def test_result_json_round_trip(tmp_path):
    rng = np.random.default_rng()
    r = _core.tune_search(hot_cold_surface(8 * MIB, rng), None, [8 * MIB], [0],
                          facts=(G, PMAX, DEF))
    res = TuneResult(device="synthetic", default_limit=DEF, limit0_ms=r["limit0_ms"],
                     default_ms=r["default_ms"], aside_ms=r["aside_ms"], found=r["found"],
                     found_ms=r["found_ms"], recommended=r["recommended"],
                     persistence_helps=r["persistence_helps"], baseline=r["baseline"],
                     speedup=r["speedup"], ci=(r["ci_low"], r["ci_high"]), confidence=0.95,
                     evals=r["evals"], wall_s=0.1, trials=r["trials"],
                     set_aside_levels=r["set_aside_levels"])
    path = tmp_path / "t.json"
    res.to_json(path)
    back = TuneResult.from_json(str(path))
    assert back.to_dict() == res.to_dict()
    assert "(a) limit 0" in back.table() and "(d)" in back.table()
    assert "persistence helps" in back.verdict()
    assert back.rows()[0]["speedup"] == pytest.approx(back.baseline_ms / back.limit0_ms)
    assert "<table>" in back._repr_html_()
    # a configuration names the user's buffers: shown in the notebook's HTML, not parsed
    rows = [{"configuration": "(d) window on <kv & co>", "median_ms": 1.0, "speedup": 1.0}]
    back.rows = lambda: rows
    assert "<td>(d) window on &lt;kv &amp; co&gt;</td>" in back._repr_html_()
    with pytest.raises(RuntimeError, match="apply"):
        with back.apply():
            pass


# ---- the better-baseline rule, the result's report, and tune() end to end on a fake device --

import sys
import types

import l2persist
import l2persist.tune  # noqa: F401 - the module, which l2persist.tune (the function) shadows
from l2persist.process import discover as discovery
tune_mod = sys.modules["l2persist.tune"]
from l2persist.examples import GuideExampleResult
from l2persist.tune import Verdict, describe, verdict


def test_verdict_dataclass_and_line():
    rng = np.random.default_rng(3)
    a = 1.0 + 0.003 * rng.standard_normal(30)
    v = verdict(a, a * 0.99, a * 0.9)
    assert isinstance(v, Verdict) and v.baseline == "default" and v.helps
    assert v.speedup == pytest.approx(0.99 / 0.9, rel=1e-3)
    assert str(v).startswith("helps: 1.1") and "the default limit" in str(v)
    with pytest.raises(AttributeError):
        v.helps = False  # frozen
    assert v.outcome == "helps"
    v = verdict(a, a, a / 1.004)
    assert not v.helps and "does not help beyond noise" in str(v) and ">= 1.010x" in str(v)
    assert v.outcome == "does not help" and v.ci_high >= 1.0
    v = verdict(a, a * 1.01, a * 1.1)  # 10 % slower than limit 0, beyond noise
    assert v.baseline == "limit0" and v.ci_high < 1.0 and v.outcome == "slows the work"
    with pytest.raises(ValueError, match="candidate"):
        verdict(a, a, [])


def test_describe_is_public_and_exact():
    p, s = _core.AccessProperty.PERSISTING, _core.AccessProperty.STREAMING
    assert describe({"set_aside": 0, "windows": [None]}) == "limit 0, no window"
    assert describe({"set_aside": 3 * G, "windows": [None, dict(hit_ratio=0.5, hit_prop=p,
                                                                 miss_prop=s)]}) == \
        "set-aside 11.25 MiB, window 1: hitRatio 0.50 persisting/streaming"


def test_guide_example_result_uses_the_rule():
    runs = {k: {"A": a, "B": 0.03, "C": 0.2, "A_samples": [a] * 5}
            for k, a in (("limit0", 0.031), ("default", 0.030), ("set_aside", 0.046),
                         ("window", 0.025))}
    g = GuideExampleResult("synthetic", 1, 1, 1, 1, 0.6, runs)
    assert g.baseline() == 0.030  # the default is faster: the rule picks it
    assert g.speedup() == pytest.approx(0.030 / 0.025)
    assert g.verdict().helps and g.verdict("A", "set_aside").helps is False
    assert "| (d) guide's set-aside + window |" in g.table()


G4 = 4 * G


class _FakeDevice:
    """A device with an H200's persisting geometry that records its limit."""

    def __init__(self):
        self.index, self.mps, self.default_persisting_l2_limit = 0, False, DEF
        self.properties = types.SimpleNamespace(name="fake H200")
        self.limit, self.sets, self.restored = DEF, [], []

    @property
    def persisting_l2_limit(self):
        return self.limit

    def synchronize(self):
        pass

    @persisting_l2_limit.setter
    def persisting_l2_limit(self, value):
        self.sets.append(value)
        self.limit = value


class _FakeWindow:
    def __init__(self, target, num_bytes=None, *, offset=0, clamp=False, hit_ratio=1.0,
                 hit_prop=None, miss_prop=None):
        max_window = 32 * MIB  # a small accessPolicyMaxWindowSize: windows are clamped
        self.target, self.hit_ratio = target, hit_ratio
        self.num_bytes = min(num_bytes or target.nbytes, max_window if clamp else 1 << 62)
        self.base_ptr = target.ptr + offset


class _Carrier:
    """A group of graph nodes from discovery: it holds one window."""

    def __init__(self):
        self.access_policy_window = None


def _fake_core(dev, acc, carriers):
    """l2persist._core with the device, windows and timing faked; the search is the real one
    (given the device's facts)."""
    real = _core

    def time_calls(fn, *, stream, warmup, repeat, device, hold_us):
        fn()
        w = carriers["acc"].access_policy_window
        t = 1.0 + 0.2 * dev.limit / PMAX  # the set-aside's tax
        if w is not None and w.target is acc:
            t -= 0.5 * min(w.hit_ratio * w.num_bytes, dev.limit) / w.num_bytes
        if carriers["idx"].access_policy_window is not None:  # idx streams: a window hurts
            t *= 1.03
        return [t] * repeat

    def tune_search(evaluate, device, *args, **kw):
        return real.tune_search(evaluate, None, *args, facts=(G, PMAX, DEF), **kw)

    def restore_persisting_l2(d, limit):  # the one restore: reset, then the limit
        d.restored.append(limit)
        d.limit = limit
        return limit

    class Stream:  # never built here: discovery gives carriers
        pass

    class Graph:
        pass

    return types.SimpleNamespace(
        Device=lambda d: dev, Stream=Stream, Graph=Graph, AccessPolicyWindow=_FakeWindow,
        time_calls=time_calls, reset_persisting_l2=lambda d: None, tune_search=tune_search,
        restore_persisting_l2=restore_persisting_l2,
        tune_scope=real.tune_scope, tune_verdict=real.tune_verdict)


class _FakePlan:
    """l2persist.Plan's semantics for the tuner's wiring without a GPU (the real transaction
    is tested in tests/c/test_plan.c): entries off or on, configured(), install / apply /
    restore of the limit and each carrier's window."""
    dev = None

    def __init__(self, device=None, set_aside=None):
        self.set_aside, self._e, self.found = set_aside, [], None

    def add(self, carrier, window=None, *, name=None, carrier_name=None, enabled=True):
        self._e.append(dict(kind="nodes", carrier=carrier, window=window, name=name,
                            carrier_name=carrier_name, nodes=None, graph=None,
                            on=bool(enabled and window is not None)))
        return len(self._e) - 1

    @property
    def entries(self):
        return [dict(e) for e in self._e]

    @property
    def groups(self):
        ids = {}
        return [ids.setdefault(id(e["carrier"]), len(ids)) for e in self._e]

    def configured(self, cfg):
        q = _FakePlan(set_aside=cfg["set_aside"])
        for e, w in zip(self._e, cfg["windows"]):
            win = e["window"]
            if w is not None:
                win = _FakeWindow(win.target, win.num_bytes, hit_ratio=w["hit_ratio"])
            q._e.append(dict(e, on=w is not None, window=win))
        return q

    def install(self):
        self.found, self.saved = self.dev.limit, {}
        return self.apply(self)

    def apply(self, q):
        if q.set_aside is not None and q.set_aside != self.dev.limit:
            self.dev.persisting_l2_limit = q.set_aside
        for e in q._e:
            c = e["carrier"]
            self.saved.setdefault(id(c), (c, c.access_policy_window))
        for e in q._e:
            e["carrier"].access_policy_window = e["window"] if e["on"] else None
        return self.dev.limit

    def restore(self):
        if self.found is not None:
            for c, w in self.saved.values():
                c.access_policy_window = w
            self.dev.restored.append(self.found)
            self.dev.limit, self.found = self.found, None

    def __enter__(self):
        self.install()
        return self

    def __exit__(self, *exc):
        self.restore()
        return False


@pytest.fixture
def fake_world(monkeypatch):
    dev = _FakeDevice()
    monkeypatch.setattr(_FakePlan, "dev", dev)
    import l2persist.plan as plan_mod
    monkeypatch.setattr(plan_mod, "Plan", _FakePlan)
    acc = types.SimpleNamespace(ptr=1 << 40, nbytes=36 * MIB)
    idx = types.SimpleNamespace(ptr=1 << 41, nbytes=8 * MIB)
    carriers = {"acc": _Carrier(), "idx": _Carrier()}
    calls = []

    # discovered nodes are KernelNode-like objects (position, name), not text
    add, gather = (types.SimpleNamespace(position=0, name="index_add_"),
                   types.SimpleNamespace(position=1, name="gather"))

    def discover(fn, *, stream=None, candidates=None):
        calls.append(candidates)
        return [types.SimpleNamespace(buffer=acc, nbytes=acc.nbytes, name="acc",
                                      nodes=(add,), carrier=carriers["acc"]),
                types.SimpleNamespace(buffer=idx, nbytes=idx.nbytes, name="idx",
                                      nodes=(add, gather), carrier=carriers["idx"])]
    monkeypatch.setattr(discovery, "discover", discover)
    # fn's work ran where it is timed (timed_stream's own checks are tested below)
    monkeypatch.setattr(discovery, "work_streams", lambda fn, device: (
        fn(), discovery.WorkStreams(replays=[], launches=[]))[1])
    monkeypatch.setattr(tune_mod, "_core", _fake_core(dev, acc, carriers))
    return types.SimpleNamespace(dev=dev, carriers=carriers, calls=calls)


def _fake_tax(monkeypatch, probes):
    tax = types.ModuleType("l2persist.tax")

    def probe(device, set_aside, *, stream=None):
        probes.append(set_aside)
        return types.SimpleNamespace(slowdown=1.8, base_ms=0.1, at_ms=0.18,
                                     working_set=16 * MIB, predicted=2.5)
    tax.probe = probe
    monkeypatch.setitem(sys.modules, "l2persist.tax", tax)
    monkeypatch.setattr(l2persist, "tax", tax, raising=False)


def test_tune_without_targets_discovers_and_places(fake_world, monkeypatch):
    probes = []
    _fake_tax(monkeypatch, probes)
    names = {"acc": object()}
    r = tune_mod.tune(lambda: None, candidates=names)
    assert fake_world.calls == [names]  # discovery got the candidates
    assert r.persistence_helps and r.recommended["set_aside"] > 0
    # one window per carrier: acc's is on, idx's off; acc (36 MiB) is windowed in part
    acc, idx = r.placements
    assert acc["name"] == "acc" and acc["nodes"] == ["0:index_add_"] and acc["window"] is not None
    assert acc["partial"] and acc["window_bytes"] == 32 * MIB and acc["window_offset"] == 0
    assert idx["window"] is None and not idx["partial"]
    # restored: the carriers' windows and the device's limit
    assert all(c.access_policy_window is None for c in fake_world.carriers.values())
    assert fake_world.dev.limit == DEF and fake_world.dev.restored == [DEF]  # through the one
    # the switch was timed (set and restore) and the scope follows from it
    assert r.switch_ms is not None and r.scope["min_calls"] == 1
    assert "scope: set the limit around each phase" in r.verdict()
    assert "not inside a stream capture" in r.scope_line()
    # the tax was probed once, at the recommended set-aside, and is in the verdict
    assert probes == [r.recommended["set_aside"]]
    assert r.tax["slowdown"] == 1.8 and "tax at set-aside" in r.verdict()
    assert "1.80x slower" in r.tax_line() and "all other work" in r.tax_line()
    # each figure says where it came from; the measurement leads, the model's follows
    line = r.tax_line()
    assert "measured (a write-heavy probe over 16 MiB) 1.80x" in line
    assert line.index("measured") < line.index("the model predicted 2.50x")
    assert "on fn itself measured ((c), no window" in line
    table = r.table()
    assert "| acc | 0:index_add_ | 36" in table and "(in part: max window)" in table
    assert "| idx | 0:index_add_, 1:gather |" in table
    back = tune_mod.TuneResult.from_json(r.to_json())
    assert back.tax == r.tax and back.scope == r.scope and back.placements == r.placements


def test_tune_tax_module_missing_is_a_note(fake_world, monkeypatch):
    monkeypatch.setitem(sys.modules, "l2persist.tax", None)  # import fails
    monkeypatch.delattr(l2persist, "tax", raising=False)
    r = tune_mod.tune(lambda: None)
    assert r.persistence_helps and r.tax is None
    assert "not measured" in r.tax_note and r.tax_note in r.verdict()
    r = tune_mod.tune(lambda: None, tax=False)
    assert r.tax is None and r.tax_note == ""


def test_tune_without_discovery_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "l2persist.process.discover", None)
    monkeypatch.delattr(l2persist.process, "discover", raising=False)
    monkeypatch.setattr(tune_mod, "_core", types.SimpleNamespace(
        Device=lambda d: _FakeDevice(), Stream=type("S", (), {})))
    with pytest.raises(ValueError, match="targets: none given"):
        tune_mod.tune(lambda: None)
    with pytest.raises(ValueError, match="candidates"):
        tune_mod.tune(lambda: None, [object()], candidates=[object()])


def test_scope_rule_from_python():
    s = _core.tune_scope(0.5, 1.2, 1.0)
    assert s["min_calls"] == 20 and s["overhead_ms"] == 1.0 and s["share"] == 0.25
    assert _core.tune_scope(0.5, 1.0, 1.2)["min_calls"] == 0
    with pytest.raises(ValueError, match="switch_ms"):
        _core.tune_scope(-1.0, 1.0, 1.0)


def test_screening_through_the_bridge():
    """Five targets, one worth a window; screen_keep=2 probes each once and searches only the
    one whose probe beat the better baseline."""
    def ev(config, n):
        t = 1.0 + 0.1 * config["set_aside"] / PMAX
        for i, w in enumerate(config["windows"]):
            if w is not None:
                t += -0.4 * w["hit_ratio"] if i == 3 else 0.02
        return [t] * n
    r = _core.tune_search(ev, None, [16 * MIB] * 5, list(range(5)), facts=(G, PMAX, DEF),
                          screen_keep=2)
    assert [s["kept"] for s in r["screen"]].count(True) == 1 and r["screen"][3]["kept"]
    assert sum(t["phase"] == "screen" for t in r["trials"]) == 5
    assert r["persistence_helps"] and r["recommended"]["windows"][3] is not None
    assert _core.tune_search(ev, None, [MIB], [0], facts=(G, PMAX, DEF))["screen"] is None
    with pytest.raises(ValueError, match="screen_keep"):
        _core.tune_search(ev, None, [MIB], [0], facts=(G, PMAX, DEF), screen_keep=-1)


def _guide_records(rng, window_scale):
    """Guide-example records with 10 samples of A x10 + B each; (d) at window_scale x (a)."""
    # One draw of noise, shuffled for each configuration: the configurations differ by their
    # scale only, so the verdict is the scale's (independent draws put two medians of the same
    # distribution 1 % apart for 1 seed in 40, and "within noise" became "slows").
    noise = 0.33 + 0.002 * rng.standard_normal(10)
    out = []
    for key, scale in (("limit0", 1.0), ("default", 1.01), ("set_aside", 1.3),
                       ("window", window_scale)):
        ab = list(scale * rng.permutation(noise))
        out.append({"config": key, "key": key, "A_ms": 0.03 * scale, "B_ms": 0.03 * scale,
                    "C_ms": 0.2 * scale, "AB_samples": ab})
    return out


@pytest.mark.parametrize("scale, word", [(1.0, "does not help"), (0.8, "helps"),
                                         (1.2, "slows the work")])
def test_guide_example_study_judges_with_the_rule(rng, scale, word):
    """The study's verdict and speedups are l2persist.tune.verdict's on the stored samples:
    a recipe within noise of limit 0 "does not help" (the old 2 % threshold is gone)."""
    from l2persist import studies
    from l2persist.results import Results
    recs = _guide_records(rng, scale)
    res = studies.refresh(Results("guide-example", recs, {}, summary={
        "set_aside": 30 * MIB, "default_limit": DEF, "data1_bytes": 30 * MIB, "hit_ratio": 0.6}))
    by = {r["key"]: r for r in res.records}
    v = verdict(by["limit0"]["AB_samples"], by["default"]["AB_samples"],
                by["window"]["AB_samples"])
    assert v.outcome == word
    assert by["window"]["AB_vs_best_baseline"] == v.speedup
    assert any(n.startswith(f"the guide's recipe (d) {word}: ") for n in res.notes), res.notes


def test_studies_import_no_private_names():
    """A study uses other modules' public names only (describe, verdict, LABELS), never
    _describe, _LABELS or _Installer; the extension module _core is the one exception."""
    import ast
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent / "l2persist" / "studies"
    bad = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                bad += [f"{path.name}: {a.name}" for a in node.names
                        if a.name.startswith("_") and a.name != "_core"]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in ("tune", "examples", "tune_mod") \
                    and node.attr.startswith("_"):
                bad.append(f"{path.name}: {node.value.id}.{node.attr}")
    assert not bad, bad


def test_tax_under_mps_is_the_models_word_not_a_probe(monkeypatch):
    """An MPS client cannot set limit 0, so the tax probe (which needs that baseline) must not
    run: the result carries the model's prediction for the server's set-aside instead of
    raising at the end of a finished search (found in review)."""
    from l2persist import tax as tax_mod
    probed = []
    monkeypatch.setattr(tax_mod, "probe", lambda *a, **k: probed.append(a))
    props = {"name": "H200", "compute_capability": (9, 0), "l2_cache_size": 60 << 20,
             "persisting_l2_cache_max_size": 37.5 * (1 << 20), "granule": 3932160}
    props["persisting_l2_cache_max_size"] = int(props["persisting_l2_cache_max_size"])
    res = types.SimpleNamespace(mps_set_aside=30 << 20, default_limit=30 << 20,
                                recommended={"set_aside": 30 << 20}, persistence_helps=True,
                                tax=None, tax_note="")
    tune_mod._probe_tax(res, props, None)
    assert not probed and res.tax is None
    assert "MPS" in res.tax_note and "not measured" in res.tax_note
    assert tax_mod.predict(props, 30 << 20).summary() in res.tax_note


# The install / restore rules the tuner used to test here with fakes (node groups that share
# a kernel node keep the chosen window, each node's own window restored, apply() sets the
# recommended limit after the limit changed) are the C plan's now: tests/c/test_plan.c, and
# tests/test_plan_gpu.py on a GPU.


def test_screen_keep_default_is_the_cores():
    """tune()'s screen_keep default is the core's (L2P_TUNE_SCREEN_KEEP, through the row)."""
    import inspect
    core = inspect.signature(_core.tune_search).parameters["screen_keep"].default
    assert inspect.signature(l2persist.tune).parameters["screen_keep"].default == core == 4


def test_alternatives_on_one_stream_are_screened_and_the_ridge_follows_the_best():
    """Two buffers on one stream (one window at a time), the larger one costly to window: the
    screening probes both, and the pick windows the one that pays."""
    def ev(config, n):
        t = 1.0 + 0.3 * config["set_aside"] / PMAX
        keys, bits = config["windows"]
        if keys is not None:
            t += 0.05
        if bits is not None:
            fit = min(bits["hit_ratio"] * 24 * MIB, config["set_aside"])
            t -= 0.5 * fit / (24 * MIB)
        return [t] * n
    r = _core.tune_search(ev, None, [64 * MIB, 24 * MIB], [0, 0], facts=(G, PMAX, DEF))
    assert [s["kept"] for s in r["screen"]] == [False, True]
    assert r["persistence_helps"] and r["recommended"]["windows"][0] is None
    assert r["recommended"]["windows"][1] is not None and r["speedup"] > 1.2


def _fake_torch(monkeypatch, replay_stream):
    """A torch module whose CUDAGraph.replay runs on `replay_stream` (PyTorch's current)."""
    class CUDAGraph:
        def replay(self):
            pass

        def raw_cuda_graph(self):
            return 0
    CUDAGraph.__module__ = "torch.cuda.graphs"  # what foreign.late_bound recognises
    cuda = types.SimpleNamespace(CUDAGraph=CUDAGraph,
                                 current_stream=lambda: types.SimpleNamespace(
                                     cuda_stream=replay_stream))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    return CUDAGraph()


def _no_launch_log(monkeypatch):
    """CUPTI is taken by another tool: only the replays are known."""
    def taken(fn, offers, device):
        raise l2persist.NotSupportedError("cuptiSubscribe failed: another tool holds CUPTI")
    monkeypatch.setattr(_core, "_launch_log", taken)


def test_timed_stream_refuses_events_on_another_stream_than_the_replay(monkeypatch):
    """Measured: tune(lambda: g.replay(), stream=s) with the replay on PyTorch's current
    stream timed 6 us of nothing and said 1.574x. Now the given stream is refused with both
    streams named, and without stream= the replay's stream is timed."""
    _no_launch_log(monkeypatch)
    g = _fake_torch(monkeypatch, 0xABC0)
    wrapped = []
    wrapped_stream = types.SimpleNamespace(handle=0xABC0)
    fake = types.SimpleNamespace(Stream=lambda wrap: wrapped.append(wrap) or wrapped_stream)
    monkeypatch.setattr(tune_mod, "_core", fake)
    mine = types.SimpleNamespace(handle=0x5150)
    with pytest.raises(ValueError, match=r"stream: .*0xabc0.*0x5150"):
        tune_mod.timed_stream(lambda: g.replay(), mine, _FakeDevice(), given=True)
    assert wrapped == []  # refused: nothing wrapped
    assert tune_mod.timed_stream(lambda: g.replay(), mine, _FakeDevice(),
                                 given=False) is wrapped_stream
    assert wrapped[0].cuda_stream == 0xABC0
    # g.replay passed as is (a bound method) is seen too
    assert tune_mod.timed_stream(g.replay, mine, _FakeDevice(), given=False) is wrapped_stream
    # the replay on the timed stream: accepted as is
    same = types.SimpleNamespace(handle=0xABC0)
    assert tune_mod.timed_stream(lambda: g.replay(), same, _FakeDevice(), given=True) is same


# ---- eager work: the launch log says where its kernels ran (faked here) ---------------------

TORCH_CURRENT, MINE, OTHER = 0x7000, 0x5150, 0x9000


class _Wrapped:
    """_core.Stream(wrap=obj) without a driver: the handle obj's __cuda_stream__ gives."""

    def __init__(self, wrap, device=None):
        self.handle = wrap.__cuda_stream__()[1]


def _launches_on(monkeypatch, streams, names=None, gone=()):
    """fn's kernel launches, as the launch log reports them, went to `streams` (one a launch),
    and fn destroyed the streams in `gone` after launching on them; PyTorch is not imported."""
    names = names or [f"kernel{i}" for i in range(len(streams))]

    def launch_log(fn, offers, device):
        fn()
        kernels = [(i, n, (1, 1, 1), (32, 1, 1), 0, 1, h)
                   for i, (n, h) in enumerate(zip(names, streams))]
        return kernels, [], [], list(gone)
    monkeypatch.setattr(_core, "_launch_log", launch_log)
    monkeypatch.setattr(_core, "Stream", _Wrapped)
    monkeypatch.delitem(sys.modules, "torch", raising=False)


def _timed(fn, stream, given):
    return tune_mod.timed_stream(fn, stream, _FakeDevice(), given=given)


def test_timed_stream_refuses_eager_work_on_another_stream(monkeypatch):
    """Measured (H100): eager PyTorch work on its current stream, tune(fn, stream=s): the
    events on s timed 4.7 us of nothing and the tuner said "does not help", where the right
    window gains 1.69x. The launch log knows where each kernel ran: the given stream is refused
    with both streams and the kernel named, before any timing; fn ran once."""
    _launches_on(monkeypatch, [TORCH_CURRENT, TORCH_CURRENT],
                 ["void at::native::index_add_kernel<float>(...)", "reduce"])
    runs = []
    mine = types.SimpleNamespace(handle=MINE)
    with pytest.raises(ValueError) as e:
        _timed(lambda: runs.append(1), mine, given=True)
    text = str(e.value)
    assert text.startswith("stream: fn's kernels ran on stream 0x7000 (")
    assert "index_add_kernel" in text and "reduce" in text
    assert "the events go on stream 0x5150, where they would time nothing" in text
    assert "torch.cuda.current_stream()" in text and runs == [1]


def test_timed_stream_times_eager_work_where_it_ran(monkeypatch):
    """Without stream=, the stream the kernels ran on is timed (a Stream over the launch's
    handle); the timed stream itself, or the legacy stream as the driver names it (1 for 0),
    is kept as it is."""
    _launches_on(monkeypatch, [OTHER])
    got = _timed(lambda: None, None, given=False)
    assert isinstance(got, _Wrapped) and got.handle == OTHER
    _launches_on(monkeypatch, [MINE])
    mine = types.SimpleNamespace(handle=MINE)
    assert _timed(lambda: None, mine, given=True) is mine
    _launches_on(monkeypatch, [1, 1])                 # CU_STREAM_LEGACY: the legacy stream
    assert _timed(lambda: None, None, given=True) is None


def test_timed_stream_refuses_a_stream_fn_destroyed(monkeypatch):
    """fn made a stream, launched on it and destroyed it before returning (CuPy frees its
    Stream as fn returns): its handle must never be used again (the next call's stream may
    come back at the same address), so nothing is wrapped and the error says what to do,
    given stream= or not. A stream destroyed and made again at that handle before its last
    launch is a live one: timed as before."""
    wrapped = []
    _launches_on(monkeypatch, [OTHER], ["axpy"], gone=[OTHER])
    monkeypatch.setattr(_core, "Stream", lambda **kw: wrapped.append(kw))
    for stream, given in ((None, False), (types.SimpleNamespace(handle=MINE), True)):
        with pytest.raises(ValueError) as e:
            _timed(lambda: None, stream, given=given)
        text = str(e.value)
        assert text.startswith("stream: fn's kernels ran on stream 0x9000 (axpy), which fn "
                               "destroyed before it returned")
        assert "pass it as stream=" in text
    assert wrapped == []
    _launches_on(monkeypatch, [OTHER], gone=[])
    assert _timed(lambda: None, None, given=False).handle == OTHER


def test_timed_stream_with_work_on_several_streams(monkeypatch):
    """Work on several streams: accepted where the timed stream is one of them (fn joins the
    others to it); otherwise refused with every stream named, given or not (which one to
    time cannot be guessed)."""
    _launches_on(monkeypatch, [MINE, OTHER, MINE])
    mine = types.SimpleNamespace(handle=MINE)
    assert _timed(lambda: None, mine, given=True) is mine
    _launches_on(monkeypatch, [TORCH_CURRENT, OTHER])
    for given in (True, False):
        with pytest.raises(ValueError, match=r"ran on streams 0x7000 \(kernel0\); 0x9000 "
                                             r"\(kernel1\), but the events go on stream 0x5150"):
            _timed(lambda: None, mine, given=given)


def test_timed_stream_replay_and_eager_work_elsewhere(monkeypatch):
    """fn replays a graph on PyTorch's current stream and launches a kernel on a stream of its
    own: the replay's stream is taken, and the eager kernel elsewhere is refused."""
    g = _fake_torch(monkeypatch, TORCH_CURRENT)
    torch = sys.modules["torch"]
    _launches_on(monkeypatch, [OTHER])
    monkeypatch.setitem(sys.modules, "torch", torch)   # _launches_on took it away
    fake = types.SimpleNamespace(Stream=lambda wrap: types.SimpleNamespace(
        handle=wrap.cuda_stream))
    monkeypatch.setattr(tune_mod, "_core", fake)
    with pytest.raises(ValueError, match=r"ran on stream 0x9000 \(kernel0\), but the events "
                                         r"go on stream 0x7000"):
        _timed(lambda: g.replay(), None, given=False)


def test_timed_stream_without_a_launch_log_runs_fn_once(monkeypatch):
    """CUPTI taken: the eager check cannot be made; fn still runs exactly once, and the stream
    is kept. fn's own error passes through, and fn is not run a second time for it."""
    _no_launch_log(monkeypatch)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    runs = []
    mine = types.SimpleNamespace(handle=MINE)
    assert _timed(lambda: runs.append(1), mine, given=True) is mine and runs == [1]
    _launches_on(monkeypatch, [MINE])

    def fails():
        runs.append(2)
        raise KeyError("fn's own error")
    with pytest.raises(KeyError, match="fn's own error"):
        _timed(fails, mine, given=True)
    assert runs == [1, 2]


def _gain_128(calls, hiccup=None, fade_from=None):
    """A real 1.28x gain (any persisting window over a set-aside); the call `hiccup` (1-based)
    runs as slow as no window, and from `fade_from` on the gain is gone."""
    rng = np.random.default_rng(5)

    def evaluate(config, n):
        calls.append(config)
        w = config["windows"][0]
        on = w is not None and w["hit_prop"] == 2 and config["set_aside"] > 0
        gone = len(calls) == hiccup or (fade_from is not None and len(calls) >= fade_from)
        t = 1.0 / 1.28 if on and not gone else 1.0
        return list(t * (1 + 0.01 * rng.uniform(-1, 1, n)))
    return evaluate


def test_recheck_is_the_cores_and_a_noisy_round_does_not_veto():
    """tune's recheck of a recommended pick runs in the C core: 3 fresh rounds of (a), (b)
    and the pick; a hiccup in the pick's first fresh round leaves the rule undecided, more
    rounds follow and the 1.28x holds (a single look at 3 rounds dropped it); a gain gone
    after the confirmation is dropped for the better baseline."""
    calls = []
    r = _core.tune_search(_gain_128(calls), None, [16 * MIB], [0], facts=(G, PMAX, DEF))
    assert r["persistence_helps"] and r["recheck"]["held"] and r["recheck"]["rounds"] == 3
    lo, hi = r["recheck"]["ci"]
    assert lo <= r["recheck"]["speedup"] <= hi and lo > 1.2
    total = len(calls)
    again = []
    r = _core.tune_search(_gain_128(again, hiccup=total - 9 + 3), None, [16 * MIB], [0],
                          facts=(G, PMAX, DEF))
    assert r["persistence_helps"] and r["recheck"]["held"] and r["recheck"]["rounds"] > 3
    # the hiccup alone, judged at 3 rounds by the rule: undecided, not "helps"
    slow = [1.0] * 10 + [1 / 1.28] * 20
    v = _core.tune_verdict([1.05] * 30, [1.0] * 30, slow, rounds=3)
    assert v["speedup"] > 1.25 and not v["helps"]
    gone = _core.tune_search(_gain_128([], fade_from=total - 9 + 1), None, [16 * MIB], [0],
                             facts=(G, PMAX, DEF))
    assert not gone["persistence_helps"] and gone["recheck"]["held"] is False
    assert gone["recommended"]["windows"] == [None] and gone["speedup"] > 1.2
    off = _core.tune_search(_gain_128([]), None, [16 * MIB], [0], facts=(G, PMAX, DEF),
                            recheck_rounds=0)
    assert off["persistence_helps"] and off["recheck"] is None
    with pytest.raises(ValueError, match="recheck_rounds"):
        _core.tune_search(_gain_128([]), None, [16 * MIB], [0], facts=(G, PMAX, DEF),
                          recheck_rounds=1001)


def test_recheck_rounds_default_is_the_cores():
    import inspect
    core = inspect.signature(_core.tune_search).parameters["recheck_rounds"].default
    assert inspect.signature(l2persist.tune).parameters["recheck_rounds"].default == core == 3


def test_tune_signature_defaults_are_the_cores():
    """One home for the search's defaults: tune()'s signature reads l2p_tune_options_default."""
    import inspect

    from l2persist import _core
    from l2persist.tune import tune
    core = _core.tune_defaults()
    sig = inspect.signature(tune).parameters
    assert set(core) == {"repeat", "confirm_rounds", "recheck_rounds", "min_gain", "confidence",
                         "seed", "screen_keep"}
    for name, value in core.items():
        assert sig[name].default == value, name
