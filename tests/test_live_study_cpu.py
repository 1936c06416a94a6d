"""The live study's logic without a GPU: its records and bars computed from made-up outputs of
advise / verify / apply (the watcher's --json document, the programs' digests), each bar met
and each one failing, the grid's plan documents and its quick-mode choice, the whole per-program
sequence with the subprocesses replaced, and its registration (`list` says it needs a GPU)."""
import copy
import json
import math
import os
import subprocess
import sys

import pytest

import l2persist
from l2persist import studies
from l2persist.process import plan_doc
from l2persist.results import Results
from l2persist.studies import live

MIB = 1 << 20
SIG = "k9-0123456789abcdef"
WIN = {"graph": SIG, "node": 2, "param": 1, "offset": 0, "delta": 0, "bytes": 36 * MIB,
       "hit_ratio": 0.5, "hit_prop": "persisting", "miss_prop": "streaming", "nodes": [2, 5]}


def arms_doc(n=6):
    out = [{"set_aside": 0, "windows": []}, {"set_aside": None, "windows": []}]
    for i in range(n - 2):
        out.append({"set_aside": (i + 1) * 9 * MIB,
                    "windows": [dict(WIN, hit_ratio=min(1.0, (i + 1) / 4))]})
    return out


def summary(speedup=1.05, ci=(1.045, 1.055), decided=True, helps=True, winner=3, baseline=1,
            n_arms=6, medians=None, blocks_ms=5000.0, added=0.012, hooks=0.005):
    """The watcher's --json document, as advise writes it (the fields the study reads)."""
    arms = arms_doc(n_arms)
    medians = medians if medians is not None else [1.0, 0.99] + [0.97 - 0.01 * i
                                                                 for i in range(n_arms - 2)]
    chosen = arms[winner] if helps else arms[baseline]
    plan = {"format": "l2persist-live-plan/1",
            "device": {"name": "NVIDIA H200", "cc": [9, 0], "l2_bytes": 60 * MIB},
            "l2persist": "0.1.0", "verdict": "helps" if helps else "dont",
            "speedup": speedup, "ci": list(ci), "set_aside": chosen["set_aside"],
            "windows": chosen["windows"]}
    upb = 10
    per_unit = blocks_ms / upb / 20   # 20 blocks of upb units make blocks_ms
    return {"mode": "advise", "state": "done", "device": {"name": "NVIDIA H200"},
            "unit": ["replay", SIG], "units_per_block": upb,
            "per_arm": {"0": {"gpu_ms_per_unit": [0.1] * 10, "wall_ms_per_unit": [per_unit] * 10},
                        "1": {"gpu_ms_per_unit": [0.1] * 10, "wall_ms_per_unit": [per_unit] * 10}},
            "switch_ms": [0.5, 0.6, 0.7, 3.0], "switch_work_ms": [0.2, 0.3, 0.1, 0.4],
            "blocks": 20, "arms": arms,
            "graphs": [{"signature": SIG, "kernels": 9, "replays": 9000}],
            "result": {"done": 1, "decided": int(decided), "winner": winner if helps else -1,
                       "helps": int(helps), "baseline": baseline, "speedup": speedup,
                       "ci_low": ci[0], "ci_high": ci[1], "search_blocks": 120,
                       "confirm_blocks": 18, "search_median": medians},
            "notes": [], "search_s": 40.0, "plan": plan,
            "watch_cost": {"recorded_wall_ms_per_unit": 0.26, "recorded_blocks": 18,
                           "unrecorded_wall_ms_per_unit": 0.25, "unrecorded_units": 80,
                           "ratio": 1.04},
            "watching": {"max_overhead": 0.015, "rest_units": 60, "rests": 100,
                         "recorded_units": 1380, "rest_units_total": 5520, "recorded_share": 0.2,
                         "switch_work_ms_median": 0.4, "record_cost": 0.05, "added_share": added,
                         "hooks_share": hooks,
                         "observing_share": (None if added is None or hooks is None
                                             else added + hooks),
                         "unrecorded_ms_per_unit": 0.25, "rests_capped": 3,
                         "pace_correction": 1.4}}


def verify_doc(speedup, ci=None, decided=True):
    ci = ci or (speedup - 0.004, speedup + 0.004)
    return {"mode": "verify", "result": {"decided": int(decided), "helps": int(speedup > 1.01),
                                         "winner": 2, "speedup": speedup, "ci_low": ci[0],
                                         "ci_high": ci[1]}}


DIGEST = {"tokens": "ab" * 32, "hist": "cd" * 32}


def run_(wall=10.0, loop=8.0, iters=40000, digest=DIGEST, result=None, rc=0):
    return {"rc": rc, "wall_s": wall, "iters": iters, "loop_s": loop,
            "digest": copy.deepcopy(digest), "result": result}


def grid(speeds, summ=None):
    summ = summ or summary()
    return [live.grid_point(i, summ["arms"][i], summ, run_(result=verify_doc(s)))
            for i, s in enumerate(speeds)]


def record(advise_summary=None, verify_speed=1.048, grid_speeds=(1.0, 0.998, 1.02, 1.05, 1.03,
                                                                  1.01),
           plain_digests=(DIGEST, DIGEST), advise_digest=DIGEST, apply_digest=DIGEST,
           verify_digest=DIGEST, advise_wall=10.5, apply_wall=10.05):
    summ = advise_summary or summary()
    plain = [run_(digest=d) for d in plain_digests]
    return live.program_record(
        "server", 40000, plain, run_(wall=advise_wall, loop=8.4, digest=advise_digest,
                                     result=summ),
        run_(digest=verify_digest, result=verify_doc(verify_speed)),
        [run_(wall=apply_wall, digest=apply_digest)] * 2, grid(grid_speeds, summ),
        warmup_s=1.0)


def bars_of(rec):
    return {k: met for k, _, met in live.program_bars(rec)}


def synthetic(records):
    res = Results("live", records, {"device_name": "NVIDIA test", "l2_cache_size": 60 << 20})
    return studies.refresh(res)


# ---- the record -------------------------------------------------------------------------------

def test_record_from_outputs():
    r = record()
    assert r["verdict"] == "helps" and r["advised_gain"] == pytest.approx(1.05)
    assert r["plan_arm"] == 3 and r["plan"] == "18 MiB; persisting 36 MiB x0.5"
    assert r["deterministic"] and r["advise_digest_same"] and r["apply_digest_same"]
    assert r["verify_digest_same"]
    assert r["verify_diff"] == pytest.approx(0.002)
    assert r["grid_best"] == pytest.approx(1.05) and r["grid_gain"] == pytest.approx(1.05)
    assert r["vs_grid"] == pytest.approx(1.048 / 1.05)
    assert r["grid_best_arm"] == live.describe_arm(arms_doc()[3])
    assert r["switch_ms_median"] == pytest.approx(0.65) and r["switch_ms_max"] == 3.0
    assert r["switch_work_ms_median"] == pytest.approx(0.25)
    assert r["switches"] == 4 and r["arms"] == 6 and r["graphs"] == 1 and r["unit"] == "replay"
    assert r["advise_overhead"] == pytest.approx(1.05)
    assert r["apply_overhead"] == pytest.approx(1.005)
    assert r["advise_loop_overhead"] == pytest.approx(8.4 / 8.0)
    assert r["watch_cost"] == pytest.approx(1.04)          # measured in the program
    assert r["watch_added"] == pytest.approx(0.012) and r["record_cost"] == pytest.approx(0.05)
    assert r["recorded_share"] == pytest.approx(0.2)
    # the decision time: warm-up, probe and the recorded blocks' spans (not search_s, which
    # the watcher writes again at the program's exit)
    assert r["advice_s"] == pytest.approx(1.0 + 0.5 + 5.0 + 4.8e-3)
    assert r["search_s"] == 40.0
    json.dumps(r)  # a Results record


def test_all_bars_met():
    r = record()
    assert all(bars_of(r).values()), live.program_bars(r)
    res = synthetic([r])
    assert res.unmet_bars() == []
    assert len(res.bars) == 6
    assert res.records[0]["bars_met"] == "6 of 6"
    assert all(res.records[0][k] is True for k in live.BAR_KEYS)


@pytest.mark.parametrize("change, bar", [
    (dict(advise_digest={"tokens": "x"}), "bar_outputs"),
    (dict(apply_digest={"tokens": "x"}), "bar_outputs"),
    (dict(verify_digest={"tokens": "x"}), "bar_outputs"),
    (dict(plain_digests=(DIGEST, {"tokens": "x"})), "bar_outputs"),  # not deterministic
    (dict(advise_summary=summary(decided=False)), "bar_advice_s"),
    (dict(advise_summary=summary(blocks_ms=60000.0)), "bar_advice_s"),
    (dict(advise_summary=summary(added=0.021)), "bar_overhead"),
    (dict(advise_summary=summary(added=0.012, hooks=0.009)), "bar_overhead"),  # 2.1 % in all
    (dict(advise_summary=summary(added=None)), "bar_overhead"),     # not measured: not met
    (dict(verify_speed=1.035), "bar_verify_within"),     # 1.5 points under advise's 1.05
    (dict(verify_speed=1.065), "bar_verify_within"),
    (dict(advise_summary=summary(speedup=0.985, ci=(0.98, 0.99)), verify_speed=0.985,
          grid_speeds=(1.0, 0.99, 0.985, 0.97, 0.98, 0.95)), "bar_verify_floor"),
    (dict(verify_speed=1.0, grid_speeds=(1.0, 0.99, 1.0, 1.06, 1.0, 1.0),
          advise_summary=summary(speedup=1.005)), "bar_grid"),  # 1.0 / 1.06 < 95 %
])
def test_each_bar_can_fail(change, bar):
    r = record(**change)
    met = bars_of(r)
    assert met[bar] is False, live.program_bars(r)
    res = synthetic([r])
    assert any(b.startswith("server:") for b in res.unmet_bars())
    assert res.records[0][bar] is False


def test_dont_where_the_grid_gains_under_2_percent():
    """The grid's best under 1.02: the advice must be "don't"; its gain is then 1.0 (the plan
    is the better baseline), and verify of it ~1.0 is within 1 %."""
    flat = (1.0, 0.999, 1.01, 0.97, 1.005, 0.99)
    dont = record(advise_summary=summary(speedup=1.004, helps=False), verify_speed=0.998,
                  grid_speeds=flat)
    assert dont["verdict"] == "dont" and dont["advised_gain"] == 1.0
    assert dont["plan_arm"] == 1 and dont["plan"] == "default"
    assert all(bars_of(dont).values()), live.program_bars(dont)
    helps = record(advise_summary=summary(speedup=1.012), verify_speed=1.01, grid_speeds=flat)
    assert bars_of(helps)["bar_grid"] is False
    assert "says don't" in dict((k, t) for k, t, _ in live.program_bars(helps))["bar_grid"]


def test_a_dont_with_no_arm_to_compare_has_no_speedup_and_no_verify_bar():
    """cupy_only on the H200 at 1011bb0: no window reaches its kernels, so advise and verify
    compared no arm (the core's interval is 0-0). The study read that as a speedup of 0.000x
    and failed both verify bars; there is no figure, and verify held (exit 0), so the verify
    bars do not apply. An inconclusive verify (exit 3) with no figure still fails them."""
    none = summary(speedup=0.0, ci=(0.0, 0.0), helps=False, n_arms=2, medians=[1.0, 0.99])
    flat = (1.0, 0.999)

    def rec(rc):
        summ = copy.deepcopy(none)
        plain = [run_(), run_()]
        v = run_(rc=rc, result={"mode": "verify", "result": {
            "decided": int(rc == 0), "helps": 0, "winner": -1, "speedup": 0.0,
            "ci_low": 0.0, "ci_high": 0.0}})
        return live.program_record("cupy_only", 40000, plain, run_(result=summ), v,
                                   [run_()], grid(flat, summ), warmup_s=1.0)

    held = rec(0)
    assert held["advise_speedup"] is None and held["advise_ci_low"] is None
    assert held["verify_speedup"] is None and held["verify_diff"] is None
    met = bars_of(held)
    assert met["bar_verify_within"] is None and met["bar_verify_floor"] is None, met
    assert met["bar_grid"] is True and met["bar_outputs"] is True
    text = " ".join(live.findings(synthetic([held])))
    assert "no arm compared" in text and "0.000x" not in text
    open_ = bars_of(rec(3))
    assert open_["bar_verify_within"] is False and open_["bar_verify_floor"] is False
    assert "no figure (no verdict)" in " ".join(live.findings(synthetic([rec(3)])))
    # a search of many arms cut off before its verdict (ddp at 1011bb0) is not "no arm"
    cut = summary(speedup=0.0, ci=(0.0, 0.0), decided=False, helps=False)
    r = live.program_record("ddp", 40000, [run_(), run_()], run_(result=cut), None, [],
                            grid(flat, cut), warmup_s=1.0)
    text = " ".join(live.findings(synthetic([r])))
    assert "no candidate confirmed (the search ended first)" in text and "no arm compared" \
        not in text


def test_a_grid_of_the_baselines_alone_is_not_judged():
    """cupy_only and jax_program on the H200 at cbba7ed: no window reaches their kernels, so
    the plan space is the two baselines and the grid's verify runs have nothing to compare
    (no speedup). The grid bar does not apply there; a grid with no figure where advise had
    arms still fails it."""
    none = summary(speedup=0.0, ci=(0.0, 0.0), helps=False, n_arms=2, medians=[1.0, 0.99])
    r = record(advise_summary=none, grid_speeds=(1.0, 1.0))
    r["grid_gain"] = None                       # as verify of a baseline plan gives none
    assert r["arms"] == 2
    bar = dict((k, (t, met)) for k, t, met in live.program_bars(r))["bar_grid"]
    assert bar[1] is None and "only the baselines" in bar[0]
    armed = record()
    armed["grid_gain"] = None
    assert bars_of(armed)["bar_grid"] is False


def test_observing_under_a_mix_is_not_judged():
    """The pace says its wall comparisons do not hold (comparable False: a request mix moved
    the rests' walls per unit): no observing figure, and the bar is not applicable rather
    than met or failed."""
    summ = summary(added=None, hooks=0.004)
    summ["watching"]["comparable"] = False
    r = record(advise_summary=summ)
    assert r["observing_comparable"] is False and r["observing_share"] is None
    assert bars_of(r)["bar_overhead"] is None
    assert "not measurable" in dict((k, t) for k, t, _ in live.program_bars(r))["bar_overhead"]
    assert bars_of(record(advise_summary=summary(added=None)))["bar_overhead"] is False


def test_observing_in_ticks_is_not_judged_and_its_text_gives_no_recording_cost():
    """Where the unit is the clock's tick the watcher's figure is its own time only (covers
    "the watcher's time"): the bar is not applicable rather than met on a figure that cannot
    see the records' cost, the row keeps what it covers, and the findings' text gives no
    recording cost per unit. Another unit's figure is judged as before."""
    summ = summary(hooks=0.0)
    summ["watching"].update(covers="the watcher's time", record_cost=None)
    r = record(advise_summary=summ)
    assert r["observing_covers"] == "the watcher's time" and r["observing_share"] is not None
    assert bars_of(r)["bar_overhead"] is None
    words = dict((k, t) for k, t, _ in live.program_bars(r))["bar_overhead"]
    assert "clock's tick" in words and "advise --placebo" in words
    text = live._watching_text(r)
    assert "recording" not in text and "the watcher's own time only" in text, text
    summ["watching"]["covers"] = "records and switches"
    r = record(advise_summary=summ)
    assert bars_of(r)["bar_overhead"] is not None
    assert "recording" in live._watching_text(r)


def test_a_record_stored_before_the_overhead_bar_is_not_judged_on_it():
    r = record()
    assert r["observing_share"] == pytest.approx(0.017) and bars_of(r)["bar_overhead"]
    assert (r["rests_capped"], r["pace_correction"]) == (3, 1.4)     # the pace, kept
    del r["observing_share"]             # stored before the hooks were measured: watching alone
    assert bars_of(r)["bar_overhead"] is True
    assert "not measured then" in dict((k, t) for k, t, _ in live.program_bars(r))["bar_overhead"]
    del r["watch_added"]
    assert bars_of(r)["bar_overhead"] is None
    res = synthetic([r])
    assert res.records[0]["bars_met"] == "5 of 5" and "watching added" not in res.notes[0]


def test_grid_between_the_bars_judges_nothing():
    r = record(advise_summary=summary(speedup=1.025), verify_speed=1.02,
               grid_speeds=(1.0, 1.0, 1.025, 1.0, 1.0, 1.0))
    assert bars_of(r)["bar_grid"] is None
    res = synthetic([r])
    assert len(res.bars) == 5 and res.records[0]["bars_met"] == "5 of 5"


def test_no_plan_fails_every_bar_without_raising():
    """advise gave nothing (the program ended before the watcher could judge)."""
    r = live.program_record("train", 500, [run_()], run_(rc=1), None, [], [], warmup_s=1.0)
    assert r["verdict"] is None and r["grid_gain"] is None
    assert all(met is False for _, _, met in live.program_bars(r))
    res = synthetic([r])
    assert "advise gave no plan (exit 1: " in " ".join(res.notes)
    err = live.program_record("eager", 0, [run_(rc=1)], None, None, [], [],
                              error="the plain run failed: boom")
    assert "eager: the plain run failed: boom" in synthetic([err]).notes


def test_watcher_decision_time_when_given():
    s = summary()
    s["decision_s"] = 12.5
    assert live.advice_seconds(s, 1.0) == 12.5


# ---- the grid -------------------------------------------------------------------------------

def test_grid_arms_all_or_baselines_and_the_top_three():
    s = summary(n_arms=8, medians=[1.0, 0.99, 0.95, float("nan"), 0.90, 0.97, 0.93, 1.2])
    assert live.grid_arms(s, None) == list(range(8))
    assert live.grid_arms(s, 3) == [0, 1, 2, 4, 6]
    # an arm never sampled (NaN) comes after every sampled one
    s = summary(n_arms=5, medians=[1.0, 1.0, float("nan"), 0.9, float("nan")])
    assert live.grid_arms(s, 3) == [0, 1, 2, 3, 4]
    assert live.grid_arms({"arms": [], "result": {}}, 3) == []


def test_each_arm_becomes_a_plan_document_the_cli_accepts():
    s = summary()
    for i, arm in enumerate(s["arms"]):
        doc = live.arm_plan(s["plan"], arm, i)
        plan_doc.check_plan(json.loads(json.dumps(doc)))
        assert doc["device"] == s["plan"]["device"] and doc["set_aside"] == arm["set_aside"]
        assert doc["windows"] == arm["windows"] and doc["grid_arm"] == i


def test_describe_arm():
    assert live.describe_arm({"set_aside": 0, "windows": []}) == "limit 0"
    assert live.describe_arm({"set_aside": None, "windows": []}) == "default"
    two = {"set_aside": 18 * MIB, "windows": [WIN, dict(WIN, graph="k3-ffffffffffffffff"),
                                              dict(WIN, bytes=MIB, hit_prop="streaming",
                                                   hit_ratio=1.0)]}
    assert live.describe_arm(two) == ("18 MiB; persisting 36 MiB x0.5 on 2 graphs, "
                                      "streaming 1 MiB x1")
    eager = {"set_aside": 0, "windows": [dict(WIN, bytes=75 * MIB, hit_prop="streaming",
                                              hit_ratio=1.0, stream="launch"),
                                         dict(WIN, graph="k1-00000000000000aa", bytes=75 * MIB,
                                              hit_prop="streaming", hit_ratio=1.0,
                                              stream="launch")]}
    assert live.describe_arm(eager) == "0 MiB; streaming 75 MiB x1 on a stream on 2 launches"


# ---- presentation -----------------------------------------------------------------------------

def test_findings_tables_and_plots(tmp_path):
    recs = [record(), dict(record(verify_speed=1.02), program="train")]
    res = synthetic(recs)
    assert len(res.notes) == 2 and res.notes[0].startswith("server: advise says helps")
    assert "bars met: 6 of 6" in res.notes[0] and "bars met: 5 of 6" in res.notes[1]
    assert "switch 0.65 ms median, 3.00 ms max; its own work after the synchronization 0.25 " \
           "ms median (before it: the readying ahead" in res.notes[0]
    assert "watching added 1.20% to the wall time while searching (20% of its units " \
           "recorded, recording +5.0% per unit)" in res.notes[0]
    t = live.bar_table(res)
    assert t.splitlines()[2].startswith("| server | yes |")
    assert "| yes (1.70%) |" in t.splitlines()[2]
    assert "NO (0.0300)" in t.splitlines()[3]
    g = live.grid_table(res)
    assert "(advised)" in g and len(g.splitlines()) == 2 + 12
    assert "| program |" in res.table()
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    res.plot(tmp_path / "live.png")
    live.plot_grid(res, tmp_path / "grid.png")
    assert (tmp_path / "live.png").stat().st_size and (tmp_path / "grid.png").stat().st_size
    res.to_json(tmp_path / "r.json")
    stored = studies.load(tmp_path / "r.json")
    assert stored.notes == res.notes and stored.bars == res.bars


# ---- the sequence, with the subprocesses replaced ---------------------------------------------

class _Ctx:
    quick = True
    device = None


def test_program_sequence_with_fake_runs(monkeypatch, tmp_path):
    """calibrate -> advise -> verify -> plain / apply interleaved -> the grid's verify runs:
    iterations from the calibration's throughput, the plan advise wrote is the one verified
    and applied, every grid plan document passes the CLI's check."""
    calls = []
    s = summary(n_arms=7, medians=[1.0, 0.99, 0.97, 0.90, 0.96, 0.95, 0.98])

    def fake(prog, iters, work, tag, env, timeout, cli=None):
        calls.append((tag, iters, None if cli is None else list(cli)))
        if tag == "calibrate":
            return run_(iters=iters, loop=iters / 5000.0)   # 5000 it/s
        if cli and cli[0] == "advise":
            with open(cli[cli.index("--out") + 1], "w") as f:
                json.dump(s["plan"], f)
            return run_(iters=iters, result=s)
        if cli and cli[0] == "verify":
            doc = plan_doc.check_plan(json.load(open(cli[1])))
            speed = 1.05 if doc.get("grid_arm", 3) == 3 else 1.0
            return run_(iters=iters, result=verify_doc(speed))
        return run_(iters=iters)

    monkeypatch.setattr(live, "run_program", fake)
    cfg = live.QUICK
    r = live._program(_Ctx(), cfg, "server")
    tags = [c[0] for c in calls]
    assert tags[:3] == ["calibrate", "advise", "verify"]
    assert tags[3:5] == ["plain0", "apply0"]
    assert tags[5:] == ["grid0", "grid1", "grid3", "grid4", "grid5"]  # baselines + top 3
    assert calls[1][1] == int(5000 * cfg.loop_s) and calls[5][1] == int(5000 * cfg.grid_loop_s)
    assert calls[1][2][:2] == ["advise", "--device"] and "--budget" in calls[1][2]
    assert calls[4][2][0] == "apply" and calls[4][2][1] == calls[2][2][1]
    assert r["grid_points"] == 5 and r["grid_best"] == 1.05 and r["vs_grid"] == 1.0
    assert all(bars_of(r).values()), live.program_bars(r)


def test_run_program_reads_loop_line_and_digest(monkeypatch, tmp_path):
    """The real subprocess plumbing, on a stand-in program that needs no GPU: plain (its loop
    line and digest), and under advise: without a usable GPU the CLI refuses before the
    program starts (exit 2, one line, no digest, no result); with one, the program runs (its
    digest as plain), never uses CUDA, and advise says it ended with nothing measured (exit 1)."""
    fake = tmp_path / "fake.py"
    fake.write_text("import json, sys\n"
                    "json.dump({'n': int(sys.argv[3])}, open(sys.argv[1], 'w'))\n"
                    "print('loop: %s iterations in 0.2500 s' % sys.argv[3], file=sys.stderr)\n")
    monkeypatch.setattr(live, "PROGRAM_DIR", str(tmp_path))
    monkeypatch.setitem(live.PROGRAMS, "server", "fake.py")
    env = live._env(0)
    assert not any(k.startswith("L2PERSIST_") for k in env)
    p = live.run_program("server", 50, str(tmp_path), "plain", env, 60)
    assert p["rc"] == 0 and p["digest"] == {"n": 50} and p["loop_s"] == 0.25
    assert live.rate_of(p) == 200.0 and p["result"] is None
    a = live.run_program("server", 50, str(tmp_path), "adv", env, 120,
                         ["advise", "--warmup", "0.5", "--out", str(tmp_path / "p.json")])
    if l2persist.is_available():
        assert a["rc"] == 1 and a["digest"] == {"n": 50}, a
        assert "the program (exit 0) ended" in a["stderr"], a["stderr"]
        return
    assert a["rc"] == 2 and a["digest"] is None and a["result"] is None, a
    assert "no usable CUDA device" in a["stderr"] and "not started" in a["stderr"]


# ---- registration -----------------------------------------------------------------------------

def test_list_shows_live_needing_a_gpu():
    p = subprocess.run([sys.executable, "-m", "l2persist", "list"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.split()[:1] == ["live"])
    assert "needs a GPU" in line
    info = studies.info("live")
    assert info.needs_gpu and "gpu" in info.needs and "torch" in info.needs
    assert studies.notebook_file("live") == "12_live.ipynb"


def test_the_programs_ship_with_the_package():
    for name in live.PROGRAMS.values():
        assert os.path.isfile(os.path.join(live.PROGRAM_DIR, name))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = open(os.path.join(root, "pyproject.toml")).read()
    assert '"studies/programs/*.py"' in text
    assert not os.path.exists(os.path.join(root, "tests", "programs"))


def test_axes_and_only():
    ctx = studies.Context("live", None, True, False, {"program": ["train"]})
    ctx.declare(live.axes(ctx))
    assert ctx.values("program") == ["train"]
    with pytest.raises(ValueError, match="server, train, eager"):
        studies.Context("live", None, True, False, {"program": "nope"}).declare(live.axes(ctx))
    assert not math.isnan(live.BAR_GRID)


def test_merge_study_joins_parts_and_recomputes_the_bars(tmp_path):
    """tools/merge-study: two stored H100 parts of the live study (server + training at 160237b,
    server at 6b3602a) become one result whose bars are the study's own, recomputed from the
    joined records (six per program); a part of another study is refused with exit 2."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tool = os.path.join(root, "tools", "merge-study")
    a = os.path.join(root, "docs", "data", "live-study-H100-160237b.json")
    b = os.path.join(root, "docs", "data", "live-server-H100-6b3602a.json")
    out = tmp_path / "merged.json"
    p = subprocess.run([sys.executable, tool, str(out), a, b], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert [r["program"] for r in doc["records"]] == ["server", "train", "server"]
    assert len(doc["bars"]) == 18
    met = sum(bool(x["met"]) for x in doc["bars"])
    assert f"bars met {met} of 18" in p.stdout
    assert "only" not in doc["meta"] and len(doc["meta"]["merged_parts"]) == 2
    other = os.path.join(root, "docs", "data", "advisor-H100-775a64e.json")
    p = subprocess.run([sys.executable, tool, str(out), a, other], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "differs" in p.stderr
