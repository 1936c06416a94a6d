"""The CLI checks what it will write before a study runs, and a user's mistake is one line on
stderr with exit status 2, never a traceback (subprocesses, as a user runs it)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, block_matplotlib=False, cwd=None):
    """Run `python -m l2persist ARGS`; with block_matplotlib, as if it were not installed."""
    code = ("import sys\n"
            + ("sys.modules['matplotlib'] = None\n" if block_matplotlib else "")
            + "from l2persist.__main__ import main\nsys.exit(main(sys.argv[1:]))")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=cwd or ROOT, timeout=120)


def one_line_error(p, *words):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def ran(p):
    """Whether the study ran: its header and table reach stdout."""
    return "coalescing:" in p.stdout


def test_missing_json_directory_fails_before_running():
    p = cli("run", "coalescing", "--json", "/nonexistent/dir/x.json")
    one_line_error(p, "--json", "/nonexistent/dir", "does not exist")
    assert not ran(p)


def test_unknown_plot_format_fails_before_running():
    pytest.importorskip("matplotlib")
    p = cli("run", "coalescing", "--plot", "x.xyz")
    one_line_error(p, "--plot", "'xyz'", ".png")
    assert not ran(p)


def test_csv_to_a_directory_fails_before_running(tmp_path):
    p = cli("run", "coalescing", "--csv", str(tmp_path))
    one_line_error(p, "--csv", "is a directory")
    assert not ran(p)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_unwritable_directory_fails_before_running(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        p = cli("run", "coalescing", "--json", str(ro / "x.json"))
    finally:
        ro.chmod(0o700)
    one_line_error(p, "--json", "not writable")
    assert not ran(p)


def test_readonly_file_fails_before_running(tmp_path):
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root writes read-only files")
    f = tmp_path / "x.csv"
    f.write_text("old")
    f.chmod(0o400)
    one_line_error(cli("run", "coalescing", "--csv", str(f)), "--csv", "not writable")
    assert f.read_text() == "old"


def test_plot_without_matplotlib_is_one_line():
    p = cli("run", "coalescing", "--plot", "c.svg", block_matplotlib=True)
    one_line_error(p, "--plot", "matplotlib", "pip install")
    assert not ran(p)


def test_unknown_study_is_one_line_naming_the_studies():
    line = one_line_error(cli("run", "nosuch"), "'nosuch'", "coalescing", "gather")
    assert "usage" not in line


def test_usage_errors_are_one_line():
    one_line_error(cli("run", "coalescing", "--bogus"), "--bogus")
    one_line_error(cli("run"), "study")
    one_line_error(cli("--device", "x"), "--device")


def test_gpu_study_without_gpu_is_one_line():
    import l2persist
    if l2persist.is_available():
        pytest.skip("a GPU is here: the study would run")
    one_line_error(cli("run", "gather", "--quick"), "gather", "needs a CUDA GPU", "coalescing")


def test_run_writes_every_output(tmp_path):
    pytest.importorskip("matplotlib")
    j, c, g = tmp_path / "c.json", tmp_path / "c.csv", tmp_path / "c.png"
    p = cli("run", "coalescing", "--quick", "--json", str(j), "--csv", str(c), "--plot", str(g))
    assert p.returncode == 0, p.stderr
    assert ran(p) and "wrote" in p.stdout
    assert json.loads(j.read_text())["study"] == "coalescing"
    assert c.read_text().splitlines()[0].startswith("size,rule,")
    assert g.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_list_columns_are_aligned():
    p = cli("list")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) >= 8
    # the title column starts at the same offset on every line
    import l2persist.studies as S
    titles = [s.title for s in S.list_studies()]
    starts = {l.index(t) for l, t in zip(lines, titles)}
    assert len(starts) == 1, lines


def test_check_subcommand_calls_the_state_checker_or_says_it_is_missing():
    p = cli("check")
    try:
        import l2persist.state  # noqa: F401
    except ModuleNotFoundError:
        one_line_error(p, "check", "l2persist.state")
    else:
        assert "Traceback" not in p.stderr


def test_only_runs_a_part_of_the_sweep(tmp_path):
    """--only AXIS=V,...: the records hold only those values, the metadata and the notes say
    it was a part; a wrong axis or value is one line naming what the study has."""
    j = tmp_path / "part.json"
    p = cli("run", "coalescing", "--quick", "--only", "rule=sectors,kepler_caching",
            "--json", str(j))
    assert p.returncode == 0, p.stderr
    doc = json.loads(j.read_text())
    assert {r["rule"] for r in doc["records"]} == {"sectors", "kepler_caching"}
    assert doc["meta"]["only"] == {"rule": ["sectors", "kepler_caching"]}
    assert "a part of the sweep (only rule=sectors,kepler_caching)" in p.stdout
    full = json.loads(cli("run", "coalescing", "--quick", "--json", str(tmp_path / "f.json"))
                      .stdout and (tmp_path / "f.json").read_text())
    assert len(doc["records"]) == 2 * len(full["records"]) // 3
    one_line_error(cli("run", "coalescing", "--only", "rule=nope"),
                   "--only rule=nope", "kepler_caching, kepler_noncaching, sectors")
    one_line_error(cli("run", "coalescing", "--only", "colour=red"), "--only colour",
                   "no such axis")
    one_line_error(cli("run", "coalescing", "--only", "rule"), "AXIS=VALUE")


def test_only_is_checked_before_the_study_runs():
    """A wrong axis or value is refused before any work, naming the study's axes and their
    values by label (never a tuple with a function's address)."""
    p = cli("run", "coalescing", "--only", "colour=red")
    line = one_line_error(p, "--only colour=red", "no such axis",
                          "size (4, 8, 16)", "rule (kepler_caching, kepler_noncaching, sectors)",
                          "pattern (offset 0, ", "stride 32", "random over 4096 elements")
    assert not ran(p)
    p = cli("run", "coalescing", "--only", "pattern=stride")
    line = one_line_error(p, "--only pattern=stride", "'stride' is not one of", "stride 1, ")
    assert "lambda" not in line and "0x" not in line and "(" not in line.split("values")[-1]
    assert not ran(p)


def test_only_by_label_runs_those_patterns():
    p = cli("run", "coalescing", "--quick", "--only", "pattern=stride 32,one address")
    assert p.returncode == 0, p.stderr
    rows = [l for l in p.stdout.splitlines() if l.startswith("| 4 |")]
    assert {r.split("|")[4].strip() for r in rows} == {"stride 32", "one address"}


def test_the_size_axis_is_the_size_column():
    """The table's column of the `size` axis is headed by the axis's name (it said `bytes`)."""
    p = cli("run", "coalescing", "--quick")
    assert p.returncode == 0, p.stderr
    header = next(l for l in p.stdout.splitlines() if l.startswith("| "))
    assert header.split("|")[1].strip() == "size (bytes)"
    import l2persist.studies as S
    res = S.run("coalescing", quick=True, progress=False)
    heads = [h for _, h in res.columns]
    for axis in ("size", "rule", "pattern"):
        assert any(h.split(" ")[0] == axis for h in heads), (axis, heads)


@pytest.mark.parametrize("args", [("run", "coalescing", "--device", "-1"),
                                  ("run", "coalescing", "--device", "99"),
                                  ("--device", "-1"), ("check", "--device", "-1"),
                                  ("check", "--device", "99")])
def test_device_out_of_range_is_a_usage_error(args):
    from l2persist import _core
    n = _core.device_count()
    one_line_error(cli(*args), f"--device {args[-1]}",
                   f"expected a GPU index in [0, {n - 1}]" if n else "has no CUDA device")


def test_partial_plot_draws_what_it_has_or_says_why(tmp_path):
    pytest.importorskip("matplotlib")
    g = tmp_path / "part.png"
    p = cli("run", "coalescing", "--only", "size=8", "--plot", str(g))
    assert p.returncode == 0 and "Error" not in p.stderr, p.stderr
    assert g.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    p = cli("run", "coalescing", "--only", "pattern=one address", "--plot", str(tmp_path / "x.png"))
    assert p.returncode == 0, p.stderr
    assert "Error" not in p.stderr and "NoneType" not in p.stderr, p.stderr
    assert "plot: left out for this part of the sweep (--only pattern=one address): the plot " \
           "draws strided warps against their stride, and this part of the sweep has none" \
           in p.stderr
    assert not (tmp_path / "x.png").exists()


def test_random_patterns_are_drawn_once_per_size():
    """The scattered and permuted rows compare the same addresses under every rule, and a run
    of a part of the sweep gets the rows of the whole sweep."""
    import l2persist.studies as S
    full = S.run("coalescing", progress=False)
    part = S.run("coalescing", progress=False,
                 only={"rule": "sectors", "pattern": ["random over 4096 elements"]})
    key = lambda r: (r["size"], r["rule"], r["pattern"])  # noqa: E731
    whole = {key(r): r for r in full.records}
    assert part.records and all(whole[key(r)] == r for r in part.records)
    for size in (4, 8, 16):
        for pattern in ("random over 4096 elements", "within one line"):
            # both 32-byte rules move the sectors the addresses touch: equal when equal addresses
            a, b = (whole[(size, rule, pattern)] for rule in ("kepler_noncaching", "sectors"))
            assert a["sectors"] == b["sectors"], (size, pattern)


@pytest.mark.parametrize("only, err, match", [
    ({"rule": None}, TypeError, r"^only: 'rule' takes a value or a list of values"),
    ({"rule": []}, ValueError, r"^only: 'rule' has no values"),
    ({"rule": [object()]}, TypeError, r"^only: 'rule' takes a value"),
    ({3: "x"}, TypeError, r"^only: axis names are text"),
])
def test_run_only_names_only(only, err, match):
    import l2persist.studies as S
    with pytest.raises(err, match=match):
        S.run("coalescing", quick=True, progress=False, only=only)


def test_cupy_stream_prefers_from_external():
    """CuPy 14 deprecates ExternalStream: Stream.from_external where CuPy has it."""
    import types
    from l2persist.studies import cupy_stream

    made = []
    old = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Stream=type("Stream", (), {}),
        ExternalStream=lambda h: made.append(("ExternalStream", h)) or "ext"))
    assert cupy_stream(old, 7) == "ext" and made == [("ExternalStream", 7)]

    class Stream:
        @staticmethod
        def from_external(h):
            made.append(("from_external", h))
            return "new"

    new = types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=Stream,
                                                           ExternalStream=old.cuda.ExternalStream))
    # from_external takes an object of the CUDA stream protocol, not an int (CuPy 14 refused
    # the int on the H200)
    assert cupy_stream(new, 9) == "new" and made[-1][0] == "from_external"
    assert made[-1][1].__cuda_stream__() == (0, 9)


def test_no_study_file_calls_external_stream_directly():
    import pathlib
    for name in ("atlas.py", "bandwidth.py"):
        text = (pathlib.Path(ROOT) / "l2persist" / "studies" / name).read_text()
        assert "cuda.ExternalStream(" not in text.replace("torch.cuda.ExternalStream(", ""), name


def test_unknown_command_names_the_commands():
    line = one_line_error(cli("nosuch"), "unknown command 'nosuch'")
    for name in ("list", "run", "check", "advise", "apply", "verify"):
        assert name in line, (name, line)
    assert "unrecognized arguments" not in line


def test_check_device_not_an_int_is_one_line():
    """As `run --device abc`: one line, no usage text."""
    one_line_error(cli("check", "--device", "abc"), "check", "--device", "'abc'")
    one_line_error(cli("run", "coalescing", "--device", "abc"), "run", "--device", "'abc'")


def test_empty_output_paths_are_refused_before_running():
    for option in ("--plot", "--json", "--csv"):
        p = cli("run", "coalescing", option, "")
        one_line_error(p, f"{option}: the path is empty")
        assert not ran(p)


@pytest.mark.skipif(not (hasattr(os, "geteuid") and os.geteuid() == 0 and os.path.isdir("/sys")),
                    reason="as root, permission bits say /sys is writable")
def test_output_the_file_system_refuses_fails_before_running_as_root():
    """Root passes every permission check on /sys, and the write fails: the file is tried
    before the study runs."""
    p = cli("run", "coalescing", "--plot", "/sys/c.png")
    one_line_error(p, "--plot /sys/c.png", "cannot be written")
    assert not ran(p)


def test_the_report_ends_by_naming_what_to_run_next():
    p = cli()
    assert p.returncode == 0, p.stderr
    tail = p.stdout.rstrip().splitlines()[-2:]
    assert tail[0].startswith("Next: python -m l2persist run "), tail
    assert "python -m l2persist advise -- python your_program.py" in tail[1], tail
    assert len(p.stdout.rstrip().splitlines()[-3].strip()) == 0  # set apart by a blank line


def test_the_study_table_labels_each_figure_with_its_rule():
    """The published figure sits beside the rule it was measured under, and each model
    column is headed by its rule (it showed `efficiency 3.12` beside `12.50 %` under a
    column named `sectors`, without saying which rule each was)."""
    p = cli()
    head = next(line for line in p.stdout.splitlines() if line.startswith("| case |"))
    assert head == ("| case | study (published) | study's rule | model: kepler_caching | "
                    "model: kepler_noncaching | model: sectors |")
    row = next(line for line in p.stdout.splitlines() if line.startswith("| 1 thread, caching"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "efficiency 3.12" and cells[2] == "kepler_caching"
    assert cells[3].endswith("*") and not cells[5].endswith("*")  # the study's own rule marked
    assert "(tr)" in p.stdout and "(sec)" in p.stdout  # the abbreviations are spelled out


def test_advise_apply_verify_go_to_live_with_the_rest_of_the_line(monkeypatch):
    """The three commands call l2persist.cli.live's functions with everything after the
    command (the program's own arguments included) and return their exit status."""
    import l2persist.cli as C
    import l2persist.cli.live as live
    seen = []
    for i, name in enumerate(("advise", "apply", "verify")):
        monkeypatch.setattr(live, f"{name}_main", lambda argv, i=i: seen.append(argv) or 10 + i)
    rest = ["--out", "plan.json", "--", "python", "my.py", "--device", "x"]
    assert C.main(["advise", *rest]) == 10
    assert C.main(["apply", "plan.json", "--", "python", "my.py"]) == 11
    assert C.main(["verify", "plan.json", "--", "python", "-c", "pass"]) == 12
    assert seen == [rest, ["plan.json", "--", "python", "my.py"],
                    ["plan.json", "--", "python", "-c", "pass"]]


def test_the_cli_imports_live_only_when_asked():
    code = ("import sys, l2persist.cli as C\n"
            "C.main(['list'])\n"
            "assert 'l2persist.cli.live' not in sys.modules, 'live imported eagerly'\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr


def test_one_entry_point_for_both_ways_in():
    """`python -m l2persist` is a thin entry, and the console script names the same main."""
    import tomllib
    import l2persist.__main__ as M
    import l2persist.cli as C
    assert M.main is C.main
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        target = tomllib.load(f)["project"]["scripts"]["l2persist"]
    module, _, name = target.partition(":")
    import importlib
    assert getattr(importlib.import_module(module), name) is C.main
