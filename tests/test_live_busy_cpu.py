"""The GPU's share of a program's wall time, and what a gain on GPU time can take off the wall
(process/summary.py Report.gpu_busy; report.busy_lines): advice is judged on GPU time, and a
program whose host is what it waits on (the H200 zoo's Triton program: 1.07 ms of GPU time in
4.17 ms of wall a unit) gains less wall time than GPU time."""
import pytest

from l2persist.process import report
from l2persist.process.summary import Report

from test_live_sim_cpu import _watcher, run_program, world  # noqa: F401


def _arm(gpu, rest_wall, wall=None):
    return {"gpu_ms_per_unit": gpu, "rest_wall_ms_per_unit": rest_wall,
            "wall_ms_per_unit": wall or rest_wall}


def test_the_share_is_the_defaults_gpu_time_over_its_unrecorded_wall():
    per = {0: _arm([0.9], [1.0]), 1: _arm([1.0, 1.1, 1.2], [4.0, 4.2, 4.4])}
    b = Report.gpu_busy(per, {"helps": 1, "speedup": 1.059})
    assert b["share"] == pytest.approx(1.1 / 4.2)
    assert b["wall_gain_at_most"] == pytest.approx(1 / (1 - (1.1 / 4.2) * (1 - 1 / 1.059)))
    assert 1.0 < b["wall_gain_at_most"] < 1.059          # less than the GPU time's gain
    # no rests (--max-overhead 0): the recorded blocks' wall; busy past the wall: at most 1
    b = Report.gpu_busy({1: _arm([2.0], [], wall=[1.5])}, {"helps": 1, "speedup": 1.2})
    assert b["share"] == 1.0 and b["wall_gain_at_most"] == pytest.approx(1.2)
    # limit 0 where the default has no blocks; no bound for a verdict that does not help
    b = Report.gpu_busy({0: _arm([1.0], [2.0])}, {"helps": 0, "speedup": 1.3})
    assert b["share"] == 0.5 and b["wall_gain_at_most"] is None
    assert Report.gpu_busy({}, None) == {"share": None, "wall_gain_at_most": None}


def _doc(share, gain):
    return {"gpu_busy": {"share": share, "wall_gain_at_most": gain}}


def test_the_report_says_the_walls_bound_only_where_the_host_holds_the_program_back():
    lines = report.busy_lines(_doc(0.26, 1 / (1 - 0.26 * (1 - 1 / 1.059))))
    assert len(lines) == 1 and "busy 26 %" in lines[0] and "by 1.4 % at most" in lines[0]
    assert report.busy_lines(_doc(0.95, 1.05)) == []        # busy: the GPU's gain is the wall's
    assert report.busy_lines(_doc(0.26, None)) == []         # no gain to bound
    assert report.busy_lines({}) == []                       # a document from before


def test_an_advised_program_carries_its_busy_share(world):  # noqa: F811
    world.gain = 1.25
    w = _watcher()
    run_program(world, w)
    s = w.summary()
    b = s["gpu_busy"]
    assert w.result["helps"] and 0 < b["share"] <= 1, b
    assert 1.0 < b["wall_gain_at_most"] <= w.result["speedup"] + 1e-9, (b, w.result)
    text = report.summary_text(s)
    assert ("wall: the GPU was busy" in text) == (b["share"] < report.BUSY_SAID)


def test_no_wall_bound_where_verify_of_a_dont_plan_found_an_arm_that_helps():
    doc = dict(_doc(0.26, 1.0147), verify_of="baseline")
    assert report.busy_lines(doc) == []             # "helps" there: the plan no longer holds
    assert report.busy_lines(dict(doc, verify_of="plan")) != []


def test_a_document_read_back_from_json_gives_the_same_share():
    import json
    per = {0: _arm([0.9], [1.0]), 1: _arm([1.0, 1.1, 1.2], [4.0, 4.2, 4.4])}
    back = json.loads(json.dumps(per))              # string keys
    res = {"helps": 1, "speedup": 1.059}
    assert Report.gpu_busy(back, res) == Report.gpu_busy(per, res)
