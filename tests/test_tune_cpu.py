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
    assert r["evals"] == len(r["trials"]) <= 16
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
    with pytest.raises(RuntimeError, match="apply"):
        with back.apply():
            pass
