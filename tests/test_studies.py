"""The experiments framework without a GPU: declared needs and their reasons, ctx.measure's
repeat-until-quiet rule (over a fake timer), bars that make the CLI exit 1, the study
interface other modules are written against, and metadata declared once."""

import sys
import types

import pytest

import l2persist
from l2persist import studies, timing
from l2persist.results import Results


def fake_module(name, run, **attrs):
    mod = types.ModuleType(f"l2persist.studies.{name}")
    mod.TITLE, mod.NEEDS_GPU, mod.SOURCE, mod.run = f"fake {name}", False, "a test", run
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


@pytest.fixture
def register(monkeypatch):
    """Add a study module under a name, for this test only."""
    def add(name, mod):
        monkeypatch.setitem(studies._MODULES, name, name.replace("-", "_"))
        monkeypatch.setitem(sys.modules, mod.__name__.rsplit(".", 1)[0] + "."
                            + name.replace("-", "_"), mod)
    return add


def test_every_study_declares_its_metadata_once():
    for s in studies.list_studies():
        assert s.title and s.source and s.row, s.name
        if studies.notebook_file(s.name):  # a notebook's prose
            assert s.intro and s.why, s.name
        assert set(s.needs) <= set(studies.NEED_NAMES)
        assert ("gpu" in s.needs) == s.needs_gpu, s.name
    assert [s.name for s in studies.list_studies() if not s.needs] == ["coalescing"]


def test_readme_table_has_every_study_and_its_needs():
    table = studies.readme_table()
    for s in studies.list_studies():
        line = next(l for l in table.splitlines() if l.startswith(f"| `{s.name}` |"))
        assert s.row in line and (", ".join(s.needs) or "nothing") in line


def test_missing_needs_give_reasons():
    with pytest.raises(ValueError, match="need.*'fpga'.*gpu"):
        studies.missing("fpga")
    if not l2persist.is_available():
        assert "needs a CUDA GPU" in studies.missing("gpu")
        assert "needs a CUDA GPU" in studies.missing("counters")
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert "cupy" in studies.missing("cupy")


def test_a_study_with_a_missing_need_is_unavailable_with_the_reason(register):
    ran = []
    register("needy", fake_module("needy", lambda ctx: ran.append(1), NEEDS=("ncu",),
                                  NEEDS_GPU=False))
    if studies.missing("ncu") is None:
        pytest.skip("ncu is installed here")
    with pytest.raises(studies.Unavailable, match="needy study cannot run here.*ncu"):
        studies.run("needy")
    assert not ran
    assert issubclass(studies.Unavailable, studies.GpuRequired) or \
        studies.Unavailable is studies.GpuRequired


def test_unknown_need_is_refused(register):
    register("odd", fake_module("odd", lambda ctx: None, NEEDS=("fpga",)))
    with pytest.raises(ValueError, match="NEEDS.*fpga"):
        studies.info("odd")


def test_the_smallest_interface_runs(register):
    """A module with only TITLE, NEEDS_GPU, SOURCE, axes(ctx) and run(ctx) sweeping its axes
    through ctx.sweep / ctx.results runs, lists and saves."""
    def run(ctx):
        recs = ctx.sweep(ctx.axes, lambda a, b: {"y": a * 10})
        return ctx.results(recs, notes=["n"], summary={"s": 1})
    register("plain", fake_module("plain", run, axes=lambda ctx: {"a": [1, 2], "b": ["x"]}))
    res = studies.run("plain", progress=False)
    assert [r["y"] for r in res] == [10, 20] and res.notes == ["n"] and res.bars == []
    assert "plain" in studies.study_names()
    info = studies.info("plain")
    assert info.needs == () and info.row == info.title == "fake plain"
    assert Results.from_json(res.to_json()) == res


def test_a_sweep_of_an_undeclared_axis_or_value_is_the_studys_mistake(register):
    """ctx.sweep takes only declared axes and values: a study's --only is checked before it
    runs, so what it sweeps must be what it declared."""
    register("undeclared", fake_module("undeclared", lambda ctx: ctx.sweep(
        {"a": [1]}, lambda a: {})))
    with pytest.raises(RuntimeError, match=r"sweeps 'a', which its axes\(\) does not declare "
                                           r"\(it declares none\)"):
        studies.run("undeclared", progress=False)
    register("stray", fake_module("stray", lambda ctx: ctx.sweep({"a": [1, 3]}, lambda a: {}),
                                  axes=lambda ctx: {"a": [1, 2]}))
    with pytest.raises(RuntimeError, match="sweeps a=3, which its axes"):
        studies.run("stray", progress=False)
    with pytest.raises(RuntimeError, match="before its axes were declared"):
        context().sweep({"a": [1]}, lambda a: {})


def test_an_only_axis_the_run_never_swept_is_said(register):
    """A study that declares an axis but does not take its sweep from it would ignore --only:
    the run's records are kept, and the notes and a warning say --only was not applied."""
    register("deaf", fake_module("deaf", lambda ctx: ctx.results([{"x": 1}, {"x": 2}]),
                                 axes=lambda ctx: {"x": [1, 2]}))
    with pytest.warns(RuntimeWarning, match="--only x= was not applied"):
        res = studies.run("deaf", progress=False, only={"x": 1})
    assert res.notes[0] == ("--only x= was not applied: the deaf study declares the axis but "
                            "its run did not sweep it")
    assert len(res.records) == 2


@pytest.mark.parametrize("values, why", [
    (["a,b", "c"], "'a,b' cannot be named"),
    ([" a", "b"], "' a' cannot be named"),
    ([("x", 1), ("x", 1)], "'x 1 #0' cannot be named"),
    ([], "needs a text name and at least one value"),
])
def test_axis_labels_must_be_nameable_after_only(register, values, why):
    """A label --only could not name (a comma: the CLI splits values there; spaces at its
    ends: stripped; two values with one label) is refused when the axes are declared."""
    register("odd-axes", fake_module("odd_axes", lambda ctx: ctx.results([]),
                                     axes=lambda ctx: {"v": values}))
    with pytest.raises(RuntimeError, match=f"odd-axes study's axis.*{why}|{why}"):
        studies.run("odd-axes", progress=False)


def test_findings_plot_and_bars_come_from_the_module(register):
    def run(ctx):
        return ctx.results(ctx.sweep(ctx.axes, lambda x: {"ms": float(x)}))
    register("declared", fake_module(
        "declared", run, axes=lambda ctx: {"x": [1, 2, 3]}, findings=lambda res: [f"{len(res.records)} points"],
        derive=lambda recs: [r.setdefault("double", 2 * r["ms"]) for r in recs],
        plot_spec=lambda res: studies.PlotSpec(x="x", y=["double"]),
        bars=lambda res: [("ours at or below theirs", False), ("fits", True)]))
    res = studies.run("declared", progress=False)
    assert res.notes == ["3 points"] and res.records[2]["double"] == 6.0
    assert res.plot_spec.y == ["double"]
    assert res.unmet_bars() == ["ours at or below theirs"]
    back = studies.refresh(Results.from_json(res.to_json()))
    assert back.notes == res.notes and back.bars == res.bars


def test_cli_exits_1_with_one_line_when_a_bar_is_unmet(register, capsys):
    from l2persist.__main__ import main

    def run(ctx):
        return ctx.results([{"x": 1}])
    register("barred", fake_module("barred", run, bars=lambda res: [
        ("l2persist's launch at or under cuda.core's (5.3 us vs 5.1 us)", False)]))
    assert main(["run", "barred"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["python -m l2persist run barred: bar not met: l2persist's launch at or under "
                   "cuda.core's (5.3 us vs 5.1 us)"] or (len(err) == 1 and "bar not met" in err[0])
    register("fine", fake_module("fine", run, bars=lambda res: [("ok", True)]))
    assert main(["run", "fine"]) == 0


class FakeTimer:
    """benchmark() stand-in: hands out the given sample rounds in turn."""

    def __init__(self, rounds):
        self.rounds, self.calls = list(rounds), []

    def __call__(self, fn, *, stream=None, warmup=3, repeat=20, **kw):
        self.calls.append(repeat)
        samples = self.rounds.pop(0)[:repeat]
        return timing.Timing.from_samples(samples)


def context():
    return studies.Context("fake", None, quick=False, progress=False)


def test_measure_stops_when_quiet(monkeypatch):
    fake = FakeTimer([[1.0, 1.001, 0.999, 1.0, 1.0]])
    monkeypatch.setattr(timing, "benchmark", fake)
    out = context().measure(lambda: None, stream=None, repeat=5, bytes_moved=10**9)
    assert fake.calls == [5] and out["samples"] == 5
    assert out["ms"] == 1.0 and out["q1_ms"] <= out["ms"] <= out["q3_ms"]
    assert out["tbs"] == pytest.approx(1.0) and out["pct_of_peak"] is None  # no device: no peak


def test_measure_repeats_while_noisy_and_keeps_the_spread(monkeypatch):
    noisy = [1.0, 1.5, 0.7, 1.3, 0.9]
    quiet = [1.0, 1.002, 0.998, 1.001, 0.999]
    fake = FakeTimer([noisy, quiet, quiet])
    monkeypatch.setattr(timing, "benchmark", fake)
    out = context().measure(lambda: None, stream=None, repeat=5)
    assert fake.calls == [5, 5] and out["samples"] == 10
    assert 0 < out["iqr_rel"] <= studies.Context.NOISE
    assert out["q1_ms"] < out["ms"] < out["q3_ms"]


def test_measure_stops_at_the_cap(monkeypatch):
    fake = FakeTimer([[1.0, 2.0, 3.0, 4.0]] * 10)
    monkeypatch.setattr(timing, "benchmark", fake)
    out = context().measure(lambda: None, stream=None, repeat=4, max_samples=10)
    assert sum(fake.calls) == 10 and out["samples"] == 10 and out["iqr_rel"] > 0.02


# ---- the benchmarks, as studies: their findings, bars and plots on made-up records ----

def synthetic(study, records, summary=None, **meta):
    res = Results(study, records, dict({"device_name": "NVIDIA test", "l2_cache_size": 60 << 20},
                                       **meta), summary=dict(summary or {}))
    return studies.refresh(res)


def launch_records(ours, cuda_core):
    return [{"launcher": "l2persist.kernels.noop", "us": ours, "q1_us": ours - .1,
             "q3_us": ours + .1, "samples": 31},
            {"launcher": "cuda.core launch()", "us": cuda_core, "q1_us": cuda_core - .1,
             "q3_us": cuda_core + .1, "samples": 31}]


def test_launch_overhead_bar_is_l2persist_at_or_under_cuda_core(tmp_path):
    slow = synthetic("launch-overhead", launch_records(5.31, 5.12))
    assert len(slow.unmet_bars()) == 1 and "5.31 us" in slow.unmet_bars()[0]
    assert "1.037x" in slow.notes[-1]
    fast = synthetic("launch-overhead", launch_records(5.12, 5.31))
    assert fast.unmet_bars() == [] and fast.bars[0]["met"]
    pytest.importorskip("matplotlib")
    fast.plot(tmp_path / "l.png")


def test_launch_overhead_takes_its_samples_in_rotated_rounds(monkeypatch):
    """Each launcher gets one sample per round; each round starts one launcher later than the
    one before (a drift of the host falls on all alike); every sample is 200 warm-up launches,
    a spin on the launcher's own stream, then COUNT timed launches, inside its context (entered
    once per sample, as PyTorch's and CuPy's context managers allow)."""
    from types import SimpleNamespace
    from l2persist.studies import launch_overhead as lo
    log = []
    monkeypatch.setattr(lo, "K", SimpleNamespace(
        spin=lambda ns, stream: log.append(("spin", stream, ns))))

    class Where:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            log.append(("enter", self.name))

        def __exit__(self, *exc):
            log.append(("exit", self.name))

    names, trials = ["a", "b", "c"], 5
    setups = {n: ((lambda n=n: log.append(("launch", n))), f"{n}-stream",
                  (lambda n=n: log.append(("sync", n))), Where(n)) for n in names}
    out = lo._interleaved(setups, trials)
    assert {n: len(v) for n, v in out.items()} == {n: trials for n in names}
    assert all(us > 0 for v in out.values() for us in v)
    enters = [e[1] for e in log if e[0] == "enter"]
    assert enters == [names[(t + i) % 3] for t in range(trials) for i in range(3)]
    one = {n: [("enter", n)] + [("launch", n)] * 200 + [("sync", n), ("spin", f"{n}-stream",
               lo.SPIN_NS)] + [("launch", n)] * lo.COUNT + [("sync", n), ("exit", n)]
           for n in names}
    assert log == [e for t in range(trials) for i in range(3) for e in one[names[(t + i) % 3]]]
    assert lo._interleaved({}, trials) == {}


def test_timing_agreement_bar_is_three_percent():
    recs = [{"method": "l2persist.benchmark", "ms": 1.0}, {"method": "ncu", "ms": 1.04}]
    for r in recs:
        r["vs_benchmark"] = r["ms"]
    assert synthetic("timing-agreement", recs).unmet_bars()
    recs[1]["ms"] = recs[1]["vs_benchmark"] = 1.02
    res = synthetic("timing-agreement", recs)
    assert not res.unmet_bars() and "2.00 %" in res.notes[-1]
    assert synthetic("timing-agreement", recs[:1]).bars == []  # one timer: nothing to compare


def test_model_vs_hardware_bar_is_every_pattern():
    recs = [{"pattern": f"p{i}", "predicted_load_sectors": i, "measured_load_sectors": i,
             "match": True} for i in range(5)]
    assert synthetic("model-vs-hardware", recs).notes[0].startswith("sectors rule: 5 of 5")
    recs[2]["match"] = False
    res = synthetic("model-vs-hardware", recs)
    assert res.unmet_bars() and "differs: p2" in res.notes


def test_tune_grid_bars():
    rec = {"case": "c", "pick": "x", "grid_best": "y", "grid_best_vs_base": 1.1,
           "pick_vs_grid": 1.01, "evals": 10, "grid_evals": 100, "tune_s": 1.0}
    assert synthetic("tune-grid", [rec]).unmet_bars() == []
    assert len(synthetic("tune-grid", [dict(rec, pick_vs_grid=1.03, evals=30)])
               .unmet_bars()) == 2


def test_counter_studies_findings(tmp_path):
    s = {"stream_dram_read_ratio": 1.0, "stream_sm_sectors_ratio": 1.0,
         "stream_l2_sectors_ratio": 1.5, "reread_l2_hit_rate": 99.9,
         "lookups_per_sm_sector": 1.5, "fabric_sectors": 10, "reread_tbs": 9.5,
         "set_aside": 37.5 * (1 << 20)}
    recs = [{"hot_mib": h, "window": w, "gpu_time_ns": 1e6, "l2_hit_rate": 50.0,
             "dram_bytes_read": 1 << 28} for h in (8, 16) for w in ("none", "hitRatio 1")]
    res = synthetic("counter-tables", recs, s)
    assert "set-aside 37.5 MiB" in res.notes[2]
    recs = [{"metric": "ms", "limit0": 1.16, "max_nowin": 2.61, "max_win1": 2.0,
             "max_vs_limit0": 2.61 / 1.16},
            {"metric": "lts__throughput", "limit0": 73, "max_nowin": 34, "max_win1": 40,
             "max_vs_limit0": 34 / 73}]
    res = synthetic("set-aside-counters", recs)
    assert "1.160 to 2.610 ms (2.25x)" in res.notes[0]
    pytest.importorskip("matplotlib")
    res.plot(tmp_path / "s.png")


def test_foreign_workloads_bar_is_correct_results():
    rec = {"workload": "spmv", "what": "w", "verdict": "does not help", "correct": True,
           "speedup": 1.0, "ci_low": 0.99, "ci_high": 1.01, "helps": False}
    assert synthetic("foreign-workloads", [rec]).unmet_bars() == []
    assert synthetic("foreign-workloads", [dict(rec, correct=False)]).unmet_bars()


def test_benchmarks_have_no_notebook_and_a_readme_row():
    for name in ("launch-overhead", "timing-agreement", "model-vs-hardware", "counter-tables",
                 "foreign-workloads", "tune-grid", "set-aside-counters"):
        assert studies.notebook_file(name) is None
        assert f"| `{name}` |" in studies.readme_table()
    assert studies.notebook_file("tune") == "08_tune.ipynb"


def test_a_study_without_prose_gets_no_notebook(register):
    register("prose-less", fake_module("prose_less", lambda ctx: ctx.results([])))
    assert studies.notebook_file("prose-less") is None
    register("with-prose", fake_module("with_prose", lambda ctx: ctx.results([]), INTRO="# x",
                                       WHY="y", NOTEBOOK=False))
    assert studies.notebook_file("with-prose") is None


def test_header_says_when_there_is_no_driver():
    res = Results("x", [], {"cuda_runtime": "13.0", "driver_supports": None})
    assert "no NVIDIA driver" in res.header() and "driver None" not in res.header()
    res.meta["driver_supports"] = "13.0"
    assert "driver supports CUDA 13.0" in res.header()


def test_a_part_skipped_at_several_points_is_noted_once(register):
    def run(ctx):
        for _ in range(3):
            ctx.has("ncu", "ncu's times")
        return ctx.results([{"x": 1}])
    register("skips", fake_module("skips", run))
    if studies.missing("ncu") is None:
        pytest.skip("ncu is installed here")
    res = studies.run("skips")
    assert [n for n in res.notes if n.startswith("skipped ncu's times: ")] == res.notes
    assert len(res.notes) == 1 and res.summary["skipped"][0][0] == "ncu's times"


def test_atlas_plot_and_findings_from_records(tmp_path):
    """The atlas draws speedup against size / L2, one panel per workload, each method its own
    marker, from stored records alone (as an H100 quick run wrote them)."""
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")

    def rec(workload, grid, right, level=28.125):
        return {"workload": workload, "size_mib": 30.0, "size_over_l2": 0.6,
                "limit0_ms": 0.35, "default_ms": 0.351, "grid_speedup": grid,
                "grid_level_mib": level, "grid_hit_ratio": 1.0, "right_speedup": right,
                "right_helps": right > 1, "right_evals": 16, "auto_speedup": None,
                "auto_helps": None, "auto_evals": None, "auto_s": None}
    res = studies.refresh(Results("atlas", [rec("histogram", 1.426, 1.496, 9.375),
                                            rec("embedding", 1.001, 1.0)],
                                  {"device_name": "NVIDIA H100 80GB HBM3"},
                                  summary={"skipped": {"spmv": "CuPy is not installed"}}))
    assert res.notes[0] == "spmv skipped: CuPy is not installed"
    assert "auto columns empty" in res.notes[1]
    assert "grid best 1.426x (set-aside 9.375 MiB, hit ratio 1.0)" in res.notes[2]
    assert "embedding at 0.60 x L2 (30.0 MiB): grid best 1.001x - persistence does not pay" \
        in res.notes[3]
    spec = res.plot_spec
    assert spec.facet == "workload" and spec.hline == 1.0
    assert spec.y == ["grid_speedup", "right_speedup"]  # no no-target runs: not drawn
    assert "histogram 1.43x" in spec.title and "not for embedding" in spec.title
    fig = res.plot(tmp_path / "atlas.png")
    panels = [a for a in fig.axes if a.get_visible()]
    assert len(panels) == 2
    assert all(len(a.get_lines()) == 3 for a in panels)  # two methods and the 1.0 line


def test_run_only_takes_a_value_or_values_and_refuses_the_rest():
    """studies.run(only=...): one value or a list per axis; anything but a dict is a TypeError
    naming the argument; a wrong value is a ValueError naming the study's values."""
    one = studies.run("coalescing", quick=True, progress=False, only={"rule": "sectors"})
    assert {r["rule"] for r in one.records} == {"sectors"}
    two = studies.run("coalescing", quick=True, progress=False,
                      only={"rule": ["sectors", "kepler_caching"]})
    assert {r["rule"] for r in two.records} == {"sectors", "kepler_caching"}
    with pytest.raises(TypeError, match="only: expected a dict"):
        studies.run("coalescing", quick=True, progress=False, only=["rule=sectors"])
    with pytest.raises(ValueError, match="kepler_noncaching"):
        studies.run("coalescing", quick=True, progress=False, only={"rule": "nope"})
