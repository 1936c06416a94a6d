"""Every printed tax says where it came from (issue 38, item 7): the model's prediction is a
prior ("model"), a measurement says so and how ("measured (...)"); where both exist for the
same thing the measurement leads, is the one used, and the model's figure follows as what it
predicted. All from stored data: no GPU."""

import dataclasses
import re
from pathlib import Path

import pytest

from l2persist import _format, studies, tax
from l2persist.advise import Advice, WorkloadAdvice
from l2persist.tune import TuneResult

MIB = 1 << 20
RESULTS = Path(__file__).resolve().parents[1] / "notebooks" / "results"
H100 = {"name": "H100", "compute_capability": (9, 0), "l2_cache_size": 50 * MIB,
        "persisting_l2_cache_max_size": 31 * MIB + MIB // 4}


def _probe(p, slowdown=2.1):
    ws = p.probe_working_set
    return tax.TaxProbe(set_aside=p.set_aside, working_set=ws, base_ms=0.1,
                        at_ms=0.1 * slowdown, predicted=p.slowdown_at(ws))


def _measurement(p, slowdown=1.05):
    return tax.TaxMeasurement(set_aside=p.set_aside, slowdown=slowdown,
                              interval=(slowdown - 0.01, slowdown + 0.01), rounds=5,
                              base_ms=1.0, at_ms=slowdown, converged=True, confidence=0.95,
                              tolerance=0.02)


def test_the_one_helper_labels_and_orders():
    assert _format.tax_source(False) == "model"
    assert _format.tax_source(True, "the probe") == "measured (the probe)"
    both = _format.tax_figure(24, 9.8, fmt="{:g} MiB", how="knee")
    assert both == "measured 24 MiB (knee); the model predicted 9.8 MiB"
    assert _format.tax_figure(None, 2.3) == "2.30x (model, not measured)"
    assert _format.tax_figure(2.1) == "measured 2.10x"


@pytest.mark.parametrize("granules", [3, 5, 8])
def test_a_prediction_alone_is_the_models(granules):
    p = tax.predict(H100, granules * 50 * MIB // 16)
    assert p.source == "model" and p.probe is None and p.measured is None
    assert p.summary().startswith("model: set-aside ") and str(p) == p.summary()
    assert "measured" not in p.summary()
    assert p.slowdown == p.slowdown_at(p.probe_working_set)


def test_a_probe_is_measured_and_names_the_models_figure_after():
    p = tax.predict(H100, 25 * MIB)
    r = _probe(p)
    text = r.summary()
    assert r.source == "measured" and str(r) == text
    assert text.startswith("measured (the write-heavy probe over ")
    assert "2.10x the time at limit 0" in text
    assert text.index("measured") < text.index(f"the model predicted {r.predicted:.2f}x")


def test_a_measurement_on_your_work_is_labelled():
    m = _measurement(tax.predict(H100, 25 * MIB))
    assert m.source == "measured"
    assert m.summary().startswith("measured (on your work, tax.measure: 5 rounds): set-aside 25")


def test_a_result_holding_both_prefers_the_measured_one():
    p = tax.predict(H100, 25 * MIB)
    probed = dataclasses.replace(p, probe=_probe(p, 2.1))
    assert probed.source == "measured" and probed.slowdown == pytest.approx(2.1)
    both = dataclasses.replace(probed, measured=_measurement(p, 1.05))
    assert both.source == "measured" and both.slowdown == 1.05  # your work first
    text = both.summary()
    assert text.startswith("measured (on your work")
    assert (text.index("on your work") < text.index("write-heavy probe")
            < text.index("model: set-aside"))


def test_the_stored_tax_study_says_measured_then_the_model():
    res = studies.load(RESULTS / "set-aside-tax.json")
    knees = next(n for n in res.notes if n.startswith("random-write knees"))
    parts = re.findall(r"s=[\d.]+ MiB: ([^;]+)", knees)
    assert parts and all(re.match(r"measured .*, the model predicted ", x) for x in parts), parts
    assert all(" measured up to " in n for n in res.notes if " at the maximum set-aside " in n)
    assert dict(res.columns)["slowdown"].startswith("measured")
    assert dict(res.columns)["predicted"].startswith("model")


def test_the_stored_tune_study_labels_its_tax():
    res = studies.load(RESULTS / "tune.json")
    taxed = [n for n in res.notes if "tax at set-aside" in n]
    assert taxed and all("measured (a write-heavy probe)" in n for n in taxed)


def test_tune_tax_line_of_a_stored_result_without_the_models_figure():
    """A TuneResult saved before the model's figure was kept: still labelled as measured."""
    r = TuneResult(device="H100", default_limit=9 * MIB, limit0_ms=1.0, default_ms=1.0,
                   aside_ms=1.02, found={"set_aside": 25 * MIB, "windows": []}, found_ms=0.8,
                   recommended={"set_aside": 25 * MIB, "windows": []}, persistence_helps=True,
                   baseline="limit0", speedup=1.25, ci=(1.2, 1.3), confidence=0.95, evals=4,
                   wall_s=1.0, trials=[], set_aside_levels=[0, 25 * MIB],
                   tax={"set_aside": 25 * MIB, "slowdown": 1.9, "base_ms": 0.1, "at_ms": 0.19,
                        "working_set": 30 * MIB})
    back = TuneResult.from_json(r.to_json())
    line = back.tax_line()
    assert "on fn itself measured ((c), no window, against the better baseline) 1.020x" in line
    assert "measured (a write-heavy probe over 30 MiB) 1.90x" in line
    assert "model" not in line
    with_model = dataclasses.replace(back, tax=dict(back.tax, predicted=2.4)).tax_line()
    assert with_model.index("1.90x") < with_model.index("the model predicted 2.40x")


def test_advice_says_its_tax_is_measured():
    w = WorkloadAdvice("decode", 0.5, "default", 1.0, 0.9, 0.95, 0.8, 1.125, (1.1, 1.15), 1.05,
                       True, False, False, [])
    a = Advice("H200", True, 26 * MIB, 26 * MIB, "default", 1.0, 0.9, 1.11, (1.05, 1.2), None,
               {"decode": w}, [(0, 1.0)], 40, 3, 2.5, 0.01, "share")
    assert "own tax at 26 MiB (measured)" in a.table()
    assert "<th>own tax (measured)</th>" in a._repr_html_()


def test_the_readme_leads_with_the_measured_tax():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    para = text[text.index("**What a set-aside costs"):]
    assert para.index("tax.measure(fn, s)") < para.index("tax.predict") < para.index("prior")
