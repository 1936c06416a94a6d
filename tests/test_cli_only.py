"""`run STUDY --only AXIS=V,...` for every study, without a GPU: a wrong axis or value is
refused before the study runs (its run() replaced by one that records being called), with
the study's axes and their values named by label; every declared value is accepted; the
table's columns are headed by the axis names; a part of a stored sweep draws its plot or
says in words why not."""

import importlib
import pathlib
import re
import types

import pytest

import l2persist
from l2persist import _core, studies
from l2persist.results import Results

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the recording run() below sweeps nothing: the runner's note that --only was not applied
# (and on a part of the sweep, findings or bars that need the rest are left out with a warning)
pytestmark = [pytest.mark.filterwarnings("ignore:--only .* was not applied:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:(findings|bars) left out:RuntimeWarning")]
MIB = 1 << 20


class FakeProperties:
    name = "NVIDIA fake H100"
    compute_capability = (9, 0)
    multiprocessor_count = 132
    l2_cache_size = 50 * MIB
    persisting_l2_cache_max_size = 32768000      # the H100's: 10 granules of 3.125 MiB
    access_policy_max_window_size = 128 * MIB
    peak_memory_bandwidth = 3.35e12


class FakeDevice:
    """What axes(ctx) and the runner read of a device (an H100's figures)."""

    def __init__(self, index=0):
        self.index = index
        self.properties = FakeProperties()
        self.persisting_l2_granule = 3276800
        self.default_persisting_l2_limit = 3 * 3276800
        self.persisting_l2_limit = self.default_persisting_l2_limit
        self.persisting_l2_source = "process"


@pytest.fixture
def offline(monkeypatch):
    """Every study's needs met, a fake device, and each study's run() replaced by one that
    records its context: {study: [ctx, ...]}."""
    ran = {}
    monkeypatch.setattr(studies, "missing", lambda need: None)
    monkeypatch.setattr(l2persist, "Device", FakeDevice)
    monkeypatch.setattr(_core, "restore_persisting_l2", lambda dev, limit: None)
    for name in studies.study_names():
        mod = studies._module(name)

        def run(ctx, name=name):
            ran.setdefault(name, []).append(ctx)
            return ctx.results([])
        monkeypatch.setattr(mod, "run", run)
    return ran


def declared(name, quick):
    """The study's axes as its axes(ctx) gives them on the fake device ({} without axes)."""
    mod = studies._module(name)
    if not hasattr(mod, "axes"):
        return {}
    ctx = studies.Context(name, FakeDevice(), quick, False)
    ctx.declare(mod.axes(ctx))
    return ctx.axes


def with_axes():
    return [n for n in studies.study_names() if hasattr(studies._module(n), "axes")]


def clean(line):
    """No internal reprs in a message: no function or object addresses, no tuples."""
    assert "lambda" not in line and " at 0x" not in line and "<" not in line, line
    assert not re.search(r"\('[^']*', ", line), line


def test_every_study_that_sweeps_declares_its_axes():
    """A study whose run() sweeps (ctx.sweep, ctx.values) declares axes(ctx); the studies
    that run as one measurement declare none, and refuse --only (below)."""
    for name in studies.study_names():
        mod = studies._module(name)
        text = pathlib.Path(mod.__file__).read_text()
        sweeps = "ctx.sweep(" in text or "ctx.values(" in text
        assert sweeps == hasattr(mod, "axes"), name
    assert set(studies.study_names()) - set(with_axes()) == {
        "guide-example", "model-vs-hardware", "timing-agreement", "set-aside-counters"}


@pytest.mark.parametrize("name", studies.study_names())
@pytest.mark.parametrize("quick", [False, True])
def test_an_unknown_axis_is_refused_before_the_run(offline, name, quick):
    with pytest.raises(ValueError) as e:
        studies.run(name, quick=quick, progress=False, only={"colour": "red"})
    assert name not in offline, "the study ran before its --only was checked"
    line = str(e.value)
    clean(line)
    axes = declared(name, quick)
    if not axes:
        assert line == (f"only colour=red: the {name} study has no axes to pick from: it runs "
                        "as one measurement (leave out --only)")
        return
    assert line.startswith(f"only colour=red: the {name} study sweeps no such axis; its axes: ")
    for axis, values in axes.items():
        assert f"{axis} ({', '.join(studies.axis_labels(values))})" in line


@pytest.mark.parametrize("name", with_axes())
def test_an_unknown_value_is_refused_before_the_run(offline, name):
    for quick in (False, True):
        for axis, values in declared(name, quick).items():
            with pytest.raises(ValueError) as e:
                studies.run(name, quick=quick, progress=False, only={axis: "no-such-value"})
            assert name not in offline, "the study ran before its --only was checked"
            line = str(e.value)
            clean(line)
            assert line == (f"only {axis}=no-such-value: 'no-such-value' is not one of the "
                            f"{name} study's {axis} values{' (quick)' if quick else ''}: "
                            + ", ".join(studies.axis_labels(values)))


@pytest.mark.parametrize("name", with_axes())
def test_every_declared_value_is_accepted(offline, name):
    """Each label of each axis, as --only gives it (text), runs the study with that value
    alone kept; the labels are what the error messages list."""
    for quick in (False, True):
        for axis, values in declared(name, quick).items():
            labels = studies.axis_labels(values)
            for value, label in zip(values, labels):
                assert "," not in label and label == label.strip(), (name, axis, label)
                studies.run(name, quick=quick, progress=False, only={axis: [label]})
                ctx = offline[name].pop()
                assert ctx.values(axis) == [value], (name, axis, label)
                assert ctx.meta["only"] == {axis: [label]}
            # all of them at once, as one --only AXIS=V,V,...
            studies.run(name, quick=quick, progress=False, only={axis: labels})
            assert offline[name].pop().values(axis) == list(values)


@pytest.mark.parametrize("name", studies.study_names())
def test_cli_refuses_a_wrong_only_before_the_run(offline, name, capsys):
    """Through the CLI: exit 2, one line on stderr naming the axes, the study never run."""
    from l2persist.__main__ import main
    assert main(["run", name, "--only", "colour=red"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f" run {name}: --only colour=red: the {name} study " in err[0], err
    for axis in declared(name, False):
        assert f"; {axis} (" in err[0] or f"its axes: {axis} (" in err[0], (axis, err[0])
    assert name not in offline
    for axis, values in declared(name, False).items():
        label = studies.axis_labels(values)[0]
        assert main(["run", name, "--only", f"{axis}={label},nope"]) == 2
        err = capsys.readouterr().err.strip()
        assert f"'nope' is not one of the {name} study's {axis} values" in err
        assert name not in offline
        assert main(["run", name, "--only", f"{axis}={label}"]) != 2  # 1: a bar unmet
        assert offline.pop(name)[0].values(axis) == [values[0]]


@pytest.mark.parametrize("name", with_axes())
def test_the_table_heads_each_axis_column_with_its_name(name):
    """The column of each axis is headed by the name --only takes (a unit may follow in
    parentheses: `size (bytes)`), and stored results hold the axis as a field."""
    mod = studies._module(name)
    heads = dict(mod.COLUMNS)
    for axis in declared(name, False):
        assert axis in heads, (name, axis, heads)
        assert heads[axis] == axis or heads[axis].startswith(axis + " ("), (name, axis, heads)
    stored = ROOT / "notebooks" / "results" / f"{name}.json"
    if stored.exists():
        res = studies.load(stored)
        assert res.columns == list(mod.COLUMNS)  # stored results shown as a live run
        for axis in declared(name, False):
            assert all(axis in r for r in res.records), (name, axis)


def stored_parts():
    """(study, axis, label) for up to three values of each axis that a stored result holds."""
    out = []
    for path in sorted((ROOT / "notebooks" / "results").glob("*.json")):
        name = path.stem
        if name not in with_axes():
            continue
        res = Results.load(path)
        for axis, values in declared(name, bool(res.meta.get("quick"))).items():
            labels = studies.axis_labels(values)
            have = [lab for v, lab in zip(values, labels)
                    if any(r.get(axis) is not None and studies._same(v, lab, str(r[axis]))
                           for r in res.records)]
            picks = list(dict.fromkeys([have[0], have[len(have) // 2], have[-1]])) if have else []
            out += [(name, path, axis, lab) for lab in picks]
    return out


@pytest.mark.parametrize("name, path, axis, label", stored_parts(),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_a_part_of_a_stored_sweep_draws_its_plot_or_says_why(name, path, axis, label, tmp_path):
    """The records of one value of one axis, as an --only run of it would hold them: the
    plot is drawn from what is there, or the reason is words (no exception's name)."""
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    whole = Results.load(path)
    records = [r for r in whole.records if r.get(axis) is not None
               and studies._same(r[axis], str(r[axis]), label)]
    assert records
    part = Results(name, records, dict(whole.meta, only={axis: [label]}),
                   summary=dict(whole.summary))
    part = studies.refresh(part)
    assert part.notes and part.notes[0] == f"a part of the sweep (only {axis}={label})"
    if part.plot_spec is None:
        why = part.plot_missing
        assert why.startswith(f"left out for this part of the sweep (--only {axis}={label}): ")
        assert not re.search(r"Error|NoneType|object|\bKey\b|'[a-z_]+'$", why), why
        with pytest.raises(ValueError, match="left out for this part"):
            part.plot(tmp_path / "p.png")
    else:
        import matplotlib.pyplot as plt
        plt.close(part.plot(tmp_path / "p.png"))
        assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
        title = part.plot_spec.title or ""
        assert not re.search(r"\bnan|None|\(\)|: \)|\bof 0 MiB", title), title
