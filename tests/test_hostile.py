"""Inputs that cannot hurt (issue 38, item 8): one table of hostile inputs, each row the call
and the named error it must give (the exception type and words that name the argument, the
file or the field). Every row is refused before any device is needed, so the table runs
without a GPU and gives the same answers with one; after each row the process is still
usable.

Adding a row: (id, call(tmp_path), exception type, words its message must hold)."""

import json
import math

import pytest

import l2persist
from l2persist import _core
from l2persist.cli import main as cli_main
from l2persist.results import Results

PLAN = {"format": "l2persist.plan/1", "device": "x", "set_aside": None, "entries": []}
ENTRY = {"kind": "stream", "carrier": "s", "buffer": "b", "nodes": None, "on": True,
         "offset": 0, "num_bytes": 4096, "hit_ratio": 0.5, "hit_prop": 2, "miss_prop": 1}
RESULTS = {"format": 1, "study": "x", "meta": {}, "columns": None, "notes": [], "summary": {},
           "bars": [], "records": [{"size": 4, "efficiency_pct": 12.5}],
           "plot": {"x": "size", "y": ["efficiency_pct"]}}
DEEP = "[" * 100_000 + "]" * 100_000


class FakeBuffer:
    """Device memory by the protocol only: converting it would ask the driver."""
    __cuda_array_interface__ = {"shape": (1024,), "typestr": "<f4", "version": 3,
                                "data": (0x7F0000000000, False)}


def _never():
    raise AssertionError("a workload ran: the options should have been refused first")


def plan(**fields):
    return json.dumps(dict(PLAN, **fields))


def entry(**fields):
    return plan(entries=[dict(ENTRY, **fields)])


def results_file(tmp_path, **fields):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(dict(RESULTS, **fields)))
    return path


def binary_file(tmp_path):
    path = tmp_path / "blob.json"
    path.write_bytes(bytes(range(256)) * 4)
    return path


class CliError(Exception):
    """A CLI usage error: exit status 2 and one line on stderr (its message)."""


def cli(capsys, *args):
    """Run the CLI in this process: a usage error must be exit 2 with one line on stderr, no
    traceback, and no study run (raised as CliError with that line)."""
    try:
        rc = cli_main(list(args))
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, err)
    assert "coalescing:" not in out, "the study ran before the usage error was found"
    raise CliError(lines[0])


def advise(*args, **kw):
    return l2persist.advise(*args, **kw)


# (id, call(tmp_path, capsys), exception, words the message must hold)
HOSTILE = [
    # loaders cap what they read and name the file
    ("Plan.from_json /dev/zero", lambda p, c: l2persist.Plan.from_json("/dev/zero"),
     ValueError, "text_or_path: '/dev/zero' holds more than 64 MiB"),
    ("Results.load /dev/zero", lambda p, c: Results.load("/dev/zero"),
     ValueError, "text_or_path: '/dev/zero' holds more than 64 MiB"),
    ("Advice.from_json /dev/zero", lambda p, c: l2persist.Advice.from_json("/dev/zero"),
     ValueError, "'/dev/zero' holds more than 64 MiB"),
    ("TuneResult.from_json /dev/zero", lambda p, c: l2persist.TuneResult.from_json("/dev/zero"),
     ValueError, "'/dev/zero' holds more than 64 MiB"),
    # JSON text is text, decided by its content, and names the argument
    ("Plan.from_json 'null'", lambda p, c: l2persist.Plan.from_json("null"),
     ValueError, "text_or_path (JSON text): holds null, not a JSON object: not an l2persist plan"),
    ("Results.load 'null'", lambda p, c: Results.load("null"),
     ValueError, "text_or_path (JSON text): holds null"),
    ("Advice.from_json '5'", lambda p, c: l2persist.Advice.from_json("5"),
     ValueError, "text_or_path (JSON text): holds a number"),
    ("TuneResult.from_json 'null'", lambda p, c: l2persist.TuneResult.from_json("null"),
     ValueError, "text_or_path (JSON text): holds null"),
    # a JSON object that is not a saved TuneResult names the fields it lacks or does not know
    ("TuneResult.from_json '{}'", lambda p, c: l2persist.TuneResult.from_json("{}"),
     ValueError, "text_or_path (JSON text): not the JSON of a TuneResult (TuneResult.to_json): "
                 "missing field(s) 'device', 'default_limit'"),
    ("TuneResult.from_json a file of other fields", lambda p, c: l2persist.TuneResult.from_json(
        (p / "tune.json").write_text('{"bogus": 1}') and p / "tune.json"),
     ValueError, "tune.json: not the JSON of a TuneResult (TuneResult.to_json): missing field(s) "
                 "'device'"),
    # a known study's stored plot names a column its code derives (set-aside-tax's 'access'):
    # Results.load derives it as studies.load does; records without what it is derived from
    # leave it out, and the plot names it
    ("Results set-aside-tax records without 'kind'", lambda p, c: Results.load(results_file(
        p, study="set-aside-tax", records=[{"ws_mib": 4, "slowdown": 1.0}],
        plot={"x": "ws_mib", "y": ["slowdown"], "facet": "access"})).plot(),
     ValueError, "the plot's facet column 'access' is in no record"),
    ("Plan.from_json a missing file", lambda p, c: l2persist.Plan.from_json(str(p / "no.json")),
     FileNotFoundError, "text_or_path: '"),
    ("Plan.from_json a directory", lambda p, c: l2persist.Plan.from_json(str(p)),
     IsADirectoryError, "is a directory"),
    ("Plan.from_json bytes", lambda p, c: l2persist.Plan.from_json(b"{}"),
     TypeError, "text_or_path: give a path (str or os.PathLike) or JSON text, not bytes"),
    ("Plan.from_json cut short", lambda p, c: l2persist.Plan.from_json('{"format": '),
     ValueError, "text_or_path (JSON text): not valid JSON"),
    ("Plan.from_json deeply nested", lambda p, c: l2persist.Plan.from_json(DEEP),
     ValueError, "text_or_path (JSON text): JSON nested too deeply"),
    ("Results.load deeply nested", lambda p, c: Results.load(DEEP),
     ValueError, "JSON nested too deeply"),
    ("Plan.from_json a binary file", lambda p, c: l2persist.Plan.from_json(binary_file(p)),
     ValueError, "blob.json' is not UTF-8 text"),
    ("Results.load a binary file", lambda p, c: Results.load(binary_file(p)),
     ValueError, "blob.json' is not UTF-8 text"),
    # a Results file's fields: wrong types, nothing to draw, a column in no record
    ("Results plot 'efficiency_pct': 'lots'", lambda p, c: Results.load(results_file(
        p, records=[{"size": 4, "efficiency_pct": "lots"}])).plot(),
     ValueError, "r.json: record 0's 'efficiency_pct' is 'lots', not a number"),
    ("Results plot x 'four'", lambda p, c: Results.load(results_file(
        p, records=[{"size": "four", "efficiency_pct": 1.0}])).plot(),
     ValueError, "record 0's 'size' is 'four', not a number"),
    ("Results plot no records", lambda p, c: Results.load(results_file(p, records=[])).plot(),
     ValueError, "r.json: there are no records to draw"),
    ("Results plot unknown y column", lambda p, c: Results.load(results_file(
        p, plot={"x": "size", "y": ["nosuch"]})).plot(),
     ValueError, "none of the plot's y columns (nosuch) is in a record"),
    ("Results plot unknown x column", lambda p, c: Results.load(results_file(
        p, plot={"x": "nosuch", "y": ["efficiency_pct"]})).plot(),
     ValueError, "the plot's x column 'nosuch' is in no record"),
    ("Results plot all null", lambda p, c: Results.load(results_file(
        p, records=[{"size": 4, "efficiency_pct": None}])).plot(),
     ValueError, "every value of the plot's y columns (efficiency_pct) is null"),
    # ... and where the study said why (a program that gave no advice), its notes are quoted
    ("Results plot all null, with notes", lambda p, c: Results.load(results_file(
        p, records=[{"size": 4, "efficiency_pct": None}],
        notes=["setup", "eager: advise gave no plan (exit 0: no advice)" + "x" * 400 + "END"])
    ).plot(),
     ValueError, "is null; the study's notes: setup | eager: advise gave no plan (exit 0: no "
                 "advice)" + "x" * 191 + "..."),
    ("Results plot y a string", lambda p, c: Results.load(results_file(
        p, plot={"x": "size", "y": "efficiency_pct"})),
     ValueError, "'plot' is not a plot layout (y: expected a non-empty list"),
    ("Results plot kind 'pie'", lambda p, c: Results.load(results_file(
        p, plot={"x": "size", "y": ["efficiency_pct"], "kind": "pie"})),
     ValueError, "kind: 'pie' is not one of line, scatter, bar, heatmap"),
    ("Results records 'abc'", lambda p, c: Results.load(results_file(p, records="abc")),
     ValueError, "'records' must be a JSON array, not a string"),
    # Plan.from_json's mappings
    ("Plan.from_json buffers=123", lambda p, c: l2persist.Plan.from_json(plan(), buffers=123),
     TypeError, "buffers: expected a mapping of names to a buffer (a dict), got int"),
    ("Plan.from_json carriers=['a']",
     lambda p, c: l2persist.Plan.from_json(plan(), carriers=["a"]),
     TypeError, "carriers: expected a mapping of names to a stream or Graph (a dict), got list"),
    ("Plan.from_json buffers={1: x}",
     lambda p, c: l2persist.Plan.from_json(plan(), buffers={1: FakeBuffer()}),
     TypeError, "buffers: names are str, got the key 1"),
    # everything inside a plan document, named before a device is needed (the core's rule)
    ("plan set_aside -1", lambda p, c: l2persist.Plan.from_json(plan(set_aside=-1)),
     ValueError, "set_aside: -1 is outside [0, 2^63 - 1] (bytes)"),
    ("plan set_aside 1e30", lambda p, c: l2persist.Plan.from_json(plan(set_aside=1e30)),
     TypeError, "set_aside: expected an int (bytes) in [0, 2^63 - 1], got float"),
    ("plan set_aside NaN", lambda p, c: l2persist.Plan.from_json(plan(set_aside=math.nan)),
     TypeError, "set_aside: expected an int (bytes)"),
    ("plan format", lambda p, c: l2persist.Plan.from_json(plan(format="other/1")),
     ValueError, "not an l2persist plan (its format is 'other/1'; expected "
                 "'l2persist.plan/1')"),
    ("plan format live", lambda p, c: l2persist.Plan.from_json(plan(
        format="l2persist-live-plan/1")),
     ValueError, "a plan for a running program (format 'l2persist-live-plan/1', written by "
                 "`python -m l2persist advise -- COMMAND`), not an in-process plan"),
    ("plan entries 'abc'", lambda p, c: l2persist.Plan.from_json(plan(entries="abc")),
     TypeError, "text_or_path (JSON text): entries: expected a list of entries, got str"),
    ("plan entries [1]", lambda p, c: l2persist.Plan.from_json(plan(entries=[1])),
     TypeError, "entries[0]: expected an entry (a JSON object), got int"),
    ("plan kind 'bogus'", lambda p, c: l2persist.Plan.from_json(entry(kind="bogus")),
     ValueError, "entries[0]['kind']: 'bogus' is not a carrier kind ('stream', 'nodes' or "
                 "'launch')"),
    ("plan kind 5", lambda p, c: l2persist.Plan.from_json(entry(kind=5)),
     TypeError, "entries[0]['kind']: expected 'stream', 'nodes' or 'launch', got int"),
    ("plan on 'yes'", lambda p, c: l2persist.Plan.from_json(entry(on="yes")),
     TypeError, "entries[0]['on']: expected a bool"),
    ("plan on missing", lambda p, c: l2persist.Plan.from_json(plan(entries=[
        {k: v for k, v in ENTRY.items() if k != "on"}])),
     ValueError, "entries[0]: the key 'on' is missing"),
    ("plan hit_ratio 2", lambda p, c: l2persist.Plan.from_json(entry(hit_ratio=2)),
     ValueError, "entries[0]: hit_ratio: 2 is outside [0, 1]"),
    ("plan hit_ratio NaN", lambda p, c: l2persist.Plan.from_json(entry(hit_ratio=math.nan)),
     ValueError, "entries[0]['hit_ratio']: nan is not a finite number"),
    ("plan hit_prop 99", lambda p, c: l2persist.Plan.from_json(entry(hit_prop=99)),
     ValueError, "entries[0]: hit_prop: 99 is not an AccessProperty"),
    ("plan miss_prop PERSISTING", lambda p, c: l2persist.Plan.from_json(entry(miss_prop=2)),
     ValueError, "entries[0]: miss_prop: PERSISTING is not allowed for misses"),
    ("plan offset -1", lambda p, c: l2persist.Plan.from_json(entry(offset=-1)),
     ValueError, "entries[0]: offset -1 is negative"),
    ("plan num_bytes 1.5", lambda p, c: l2persist.Plan.from_json(entry(num_bytes=1.5)),
     TypeError, "entries[0]['num_bytes']: expected an int, got float"),
    ("plan nodes [-1]", lambda p, c: l2persist.Plan.from_json(entry(kind="nodes", nodes=[-1])),
     ValueError, "entries[0]['nodes'][0]: -1 is outside [0, 2^31 - 1] (a node position)"),
    ("plan carrier 5", lambda p, c: l2persist.Plan.from_json(entry(carrier=5)),
     TypeError, "entries[0]['carrier']: expected a name (a string) or null, got int"),
    ("plan file names itself", lambda p, c: l2persist.Plan.from_json(
        (p / "plan.json").write_text(entry(kind="bogus")) and p / "plan.json"),
     ValueError, "plan.json: entries[0]['kind']: 'bogus'"),
    # a window's own values before its target is asked about
    ("AccessPolicyWindow hit_ratio=2.0",
     lambda p, c: l2persist.AccessPolicyWindow(FakeBuffer(), hit_ratio=2.0, hit_prop=99),
     ValueError, "hit_ratio: 2 is outside [0, 1]"),
    ("AccessPolicyWindow hit_prop=99",
     lambda p, c: l2persist.AccessPolicyWindow(FakeBuffer(), hit_prop=99),
     ValueError, "hit_prop: 99 is not an AccessProperty (NORMAL=0, STREAMING=1, PERSISTING=2)"),
    ("AccessPolicyWindow miss_prop=PERSISTING",
     lambda p, c: l2persist.AccessPolicyWindow(FakeBuffer(), miss_prop=2),
     ValueError, "miss_prop: PERSISTING is not allowed"),
    # advise's options and workloads, before any device is needed or any workload runs
    ("advise hold_us=-1", lambda p, c: advise({"a": _never}, hold_us=-1),
     ValueError, "hold_us: -1 is outside [0, 1e6]"),
    ("advise warmup=-1", lambda p, c: advise({"a": _never}, warmup=-1),
     ValueError, "warmup: -1 is outside [0, 1000000]"),
    ("advise search_repeat=0", lambda p, c: advise({"a": _never}, search_repeat=0),
     ValueError, "search_repeat: 0 is outside [1, 10000]"),
    ("advise tries=17", lambda p, c: advise({"a": _never}, tries=17),
     ValueError, "tries: 17 is outside [0, 16]"),
    ("advise targets=[123]",
     lambda p, c: advise({"a": {"fn": _never, "targets": [123]}}),
     TypeError, "workloads['a']['targets'][0]: expected a DeviceBuffer or an object exposing"),
    ("advise targets=123", lambda p, c: advise({"a": {"fn": _never, "targets": 123}}),
     TypeError, "workloads['a']['targets']: expected a list of buffers or Targets, got int"),
    ("advise candidates=5", lambda p, c: advise({"a": {"fn": _never, "candidates": 5}}),
     TypeError, "workloads['a']['candidates']: expected buffers to discover among"),
    ("advise {'': fn}", lambda p, c: advise({"": _never}),
     ValueError, "workloads: the name '' is empty"),
    ("advise {'a': {'fn': 5}}", lambda p, c: advise({"a": {"fn": 5}}),
     TypeError, "workloads['a']['fn']: expected a callable, got int"),
    ("advise {'a': {}}", lambda p, c: advise({"a": {}}),
     TypeError, "workloads['a']: the dict needs 'fn'"),
    ("advise second workload bad", lambda p, c: advise({"a": {"fn": _never, "targets": [
        FakeBuffer()]}, "b": {"fn": 5}}),
     TypeError, "workloads['b']['fn']: expected a callable"),
    ("WorkloadSet hold_us=NaN", lambda p, c: l2persist.WorkloadSet({"a": _never},
                                                                   hold_us=math.nan),
     ValueError, "hold_us: nan is not a finite number"),
    # the CLI: refused before the study runs, one line, exit 2
    ("run --plot /sys/c.png", lambda p, c: cli(c, "run", "coalescing", "--plot", "/sys/c.png"),
     CliError, "--plot /sys/c.png: "),
    ("run --plot ''", lambda p, c: cli(c, "run", "coalescing", "--plot", ""),
     CliError, "--plot: the path is empty; give a file name"),
    ("run --json ''", lambda p, c: cli(c, "run", "coalescing", "--json", ""),
     CliError, "--json: the path is empty"),
    ("nosuch", lambda p, c: cli(c, "nosuch"),
     CliError, "unknown command 'nosuch'; the commands: list, run, check, advise, apply, verify"),
    ("check --device abc", lambda p, c: cli(c, "check", "--device", "abc"),
     CliError, "check: argument --device: invalid int value: 'abc'"),
    ("run --device abc", lambda p, c: cli(c, "run", "coalescing", "--device", "abc"),
     CliError, "run: argument --device: invalid int value: 'abc'"),
]


@pytest.mark.parametrize("call, error, words", [row[1:] for row in HOSTILE],
                         ids=[row[0] for row in HOSTILE])
def test_hostile_input_is_named(call, error, words, tmp_path, capsys):
    with pytest.raises(error) as info:
        call(tmp_path, capsys)
    assert type(info.value) is error or error is CliError, type(info.value)
    assert words in str(info.value), (words, str(info.value))
    # the process is still usable: the core answers, JSON still loads
    assert _core.plan_hit_ratios([16384, 16384], [1, 1], 16384) == [(16384, 0.5)] * 2
    assert Results.load(json.dumps(RESULTS)).records == RESULTS["records"]


def test_the_table_is_unique_and_covers_issue_38():
    ids = [row[0] for row in HOSTILE]
    assert len(ids) == len(set(ids))
    for need in ("Plan.from_json /dev/zero", "Results.load /dev/zero", "Plan.from_json 'null'",
                 "Plan.from_json deeply nested", "Plan.from_json a binary file",
                 "Results plot 'efficiency_pct': 'lots'", "Results plot no records",
                 "Results plot unknown y column", "Plan.from_json buffers=123",
                 "Plan.from_json carriers=['a']", "advise hold_us=-1", "advise warmup=-1",
                 "advise targets=[123]", "advise candidates=5", "advise {'': fn}",
                 "AccessPolicyWindow hit_ratio=2.0", "AccessPolicyWindow hit_prop=99",
                 "plan set_aside -1", "plan set_aside 1e30", "plan set_aside NaN",
                 "plan entries 'abc'", "plan kind 'bogus'", "advise {'a': {'fn': 5}}",
                 "run --plot /sys/c.png", "run --plot ''", "nosuch", "check --device abc"):
        assert need in ids, need


def test_good_inputs_pass_the_same_checks(tmp_path):
    """The checks refuse only what is wrong: a valid plan document, window values, options
    and Results pass them (and then need a device, or draw)."""
    assert _core.plan_check_document(json.loads(entry()), "x") is None
    assert _core.plan_check_document(json.loads(entry(kind="nodes", nodes=[0, 3])), "x") is None
    assert _core.plan_check_document(json.loads(plan(set_aside=0)), "x") is None
    # a path that is not JSON text is read as a file, and a saved file loads
    path = tmp_path / "p.json"
    path.write_text(json.dumps(RESULTS))
    assert Results.load(str(path)).source == str(path)
    if not l2persist.is_available():
        # valid options get as far as the device
        for kw in (dict(tries=0), dict(search_repeat=1), dict(hold_us=0, warmup=0)):
            with pytest.raises(l2persist.NoDeviceError):
                advise({"a": _never}, **kw)
        with pytest.raises(l2persist.NoDeviceError):
            l2persist.Plan.from_json(entry(), buffers={"b": FakeBuffer()}, carriers={"s": 0})
        with pytest.raises(l2persist.NoDeviceError):
            l2persist.AccessPolicyWindow(FakeBuffer(), hit_ratio=1.0, hit_prop=0, miss_prop=0)


def test_output_check_leaves_no_file_behind(tmp_path, capsys):
    """The CLI tries creating each output before the study runs, and removes what it
    created: a failed run leaves no empty file; an existing file keeps its contents."""
    from l2persist.cli._common import output_problem
    new, old = tmp_path / "new.json", tmp_path / "old.csv"
    old.write_text("kept")
    assert output_problem("--json", str(new)) is None and not new.exists()
    assert output_problem("--csv", str(old)) is None and old.read_text() == "kept"
    assert output_problem("--json", "/dev/null") is None


def test_a_stored_study_plots_from_results_load_as_from_studies_load():
    """Results.load of a study's stored result adds the columns the study derives (its
    stored plot names them), as studies.load does: the same records, and it draws."""
    pytest.importorskip("matplotlib")
    from pathlib import Path

    from l2persist import studies
    path = Path(__file__).resolve().parents[1] / "notebooks" / "results" / "set-aside-tax.json"
    plain, full = Results.load(path), studies.load(path)
    assert plain.records == full.records and all("access" in r for r in plain.records)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.close(plain.plot())
