"""The edges of `advise`, `apply` and `verify` (issue 51 items 1-3, issue 50 items 5-6): no GPU
is one line and exit 2 before the program starts, the help gives each command's exit
statuses, plan paths are named for what they are and never read unbounded, non-finite numbers
anywhere in a plan are refused by name, and verify's verdict maps to its exit status through
one function, run on the core's own results and end to end through verify_main."""
import json
import os
import random
import subprocess
import sys
import types

import pytest

import l2persist
from l2persist import _core
from l2persist.cli import live
from l2persist.process import bootstrap, plan_doc
from l2persist.process.live import load_plan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD = {"format": _core.live_plan_format(), "device": {"name": "NVIDIA H100 80GB HBM3"},
        "verdict": "helps", "speedup": 1.05, "ci": [1.03, 1.07], "set_aside": 3932160,
        "windows": [{"graph": "k12-0123456789abcdef", "node": 3, "param": 1, "offset": 0,
                     "delta": -256, "bytes": 1 << 24, "hit_ratio": 0.5,
                     "hit_prop": "persisting", "miss_prop": "streaming", "nodes": [3, 5]}]}
MIN_GAIN = _core.live_defaults()["min_gain"]


def cli(*args, timeout=60):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "l2persist", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=timeout)


def one_line(p, code=2):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def write(tmp_path, doc, name="plan.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def marker_program(tmp_path):
    """A program that leaves a file behind when it runs: (its command, the file)."""
    mark = tmp_path / "ran"
    return [sys.executable, "-c", f"open({str(mark)!r}, 'w').close()"], mark


# ---- 1. no GPU, no answer -------------------------------------------------------------------

needs_no_gpu = pytest.mark.skipif(l2persist.is_available(), reason="a GPU is here")


@needs_no_gpu
@pytest.mark.parametrize("cmd", ["advise", "verify"])
def test_no_gpu_is_one_line_exit_2_before_the_program_starts(cmd, tmp_path):
    command, mark = marker_program(tmp_path)
    plan = [write(tmp_path, GOOD)] if cmd == "verify" else []
    line = one_line(cli(cmd, *plan, "--", *command))
    why = _core.no_device_reason()
    assert "no usable CUDA device" in line and why[2] in line and why[1] in line, line
    assert not mark.exists(), "the program started"


@needs_no_gpu
def test_apply_without_a_gpu_runs_the_program_and_says_so(tmp_path):
    command, mark = marker_program(tmp_path)
    p = cli("apply", write(tmp_path, GOOD), "--", *command)
    assert p.returncode == 0 and mark.exists(), p.stderr
    assert "plan not applied: no usable CUDA device" in p.stderr, p.stderr
    assert "the program runs without the plan" in p.stderr and "cudaGetDevice" not in p.stderr


# ---- 2. help, usage -------------------------------------------------------------------------

def test_each_command_describes_itself_and_its_exit_statuses():
    for cmd in ("advise", "apply", "verify"):
        p = cli(cmd, "--help")
        assert p.returncode == 0, p.stderr
        description, epilog = live.HELP[cmd]
        assert description.split()[0] in p.stdout and "exit status:" in p.stdout
        assert epilog in p.stdout, cmd
    verify = cli("verify", "--help").stdout
    for code, words in (("0", "the plan still holds"), ("1", "it no longer helps"),
                        ("2", "no usable CUDA device"), ("3", "inconclusive")):
        assert f"  {code}  " in verify and words in verify, (code, words)
    assert "for the search" not in verify and "the check" in verify
    assert "prints\nthe two exports" in cli("apply", "--help").stdout or \
        "prints the two exports" in " ".join(cli("apply", "--help").stdout.split())


def test_json_takes_path_as_in_run():
    for cmd in ("advise", "verify", "run"):
        assert "--json PATH" in cli(cmd, "--help").stdout, cmd


@pytest.mark.parametrize("cmd", ["advise", "verify"])
def test_a_program_without_the_separator_gets_a_hint(cmd, tmp_path):
    command, mark = marker_program(tmp_path)
    plan = [write(tmp_path, GOOD)] if cmd == "verify" else []
    line = one_line(cli(cmd, *plan, *command))
    assert "after '--'" in line and f"{cmd} [options]" in line, line
    assert not mark.exists()


@pytest.mark.parametrize("cmd", ["advise", "verify", "apply"])
def test_an_unknown_option_is_named_as_one(cmd, tmp_path):
    command, mark = marker_program(tmp_path)
    plan = [write(tmp_path, GOOD)] if cmd != "advise" else []
    line = one_line(cli(cmd, "--bogus", *plan, "--", *command))
    assert f"unknown option --bogus (see python -m l2persist {cmd} --help)" in line, line
    assert "after '--'" not in line and not mark.exists()


def test_apply_refuses_a_device_past_the_machines_gpus(monkeypatch, tmp_path, capsys):
    """apply runs the program without the plan where no GPU is (as documented); a --device
    past the GPUs there are is a typo: exit 2, the program not started."""
    monkeypatch.setattr(_core, "device_count", lambda: 2)
    plan = write(tmp_path, GOOD)
    args, command, rc = live._parse(["--device", "2", plan, "--", sys.executable], "apply",
                                    plan=True, search=False)
    assert args is None and rc == 2
    err = capsys.readouterr().err
    assert "--device 2: expected a GPU index in [0, 1] (this machine has 2 CUDA device(s)); " \
           "the program was not started" in err, err
    args, command, rc = live._parse(["--device", "1", plan, "--", sys.executable], "apply",
                                    plan=True, search=False)
    assert args is not None and args.device == 1 and command == [sys.executable]
    monkeypatch.setattr(_core, "device_count", lambda: 0)     # no GPU: runs plainly, as said
    args, command, rc = live._parse(["--device", "2", plan, "--", sys.executable], "apply",
                                    plan=True, search=False)
    assert args is not None


def test_a_bad_number_names_its_option_once():
    line = one_line(cli("advise", "--budget", "abc", "--", sys.executable))
    assert line.count("--budget") == 1 and "'abc'" in line, line


@pytest.mark.parametrize("where, value, field", [
    (("set_aside",), 1e30, "set_aside"),
    (("windows", 0, "hit_ratio"), 5, "windows[0].hit_ratio"),
    (("verdict",), "maybe", "verdict: expected one of 'helps', 'dont', got 'maybe'"),
])
def test_apply_plan_alone_checks_the_plan_before_printing_exports(where, value, field,
                                                                  tmp_path):
    doc = json.loads(json.dumps(GOOD))
    at = doc
    for k in where[:-1]:
        at = at[k]
    at[where[-1]] = value
    p = cli("apply", write(tmp_path, doc))
    assert field in one_line(p) and "export" not in p.stdout
    good = cli("apply", write(tmp_path, GOOD, "good.json"))
    assert good.returncode == 0 and "export L2PERSIST_PLAN=" in good.stdout


# ---- 3. plan paths and numbers ---------------------------------------------------------------

@pytest.mark.parametrize("kind", ["directory", "/dev/null", "/dev/zero", "fifo"])
def test_a_plan_path_that_is_not_a_file_is_named_for_what_it_is(kind, tmp_path):
    if kind == "directory":
        path, words = str(tmp_path), "a directory, not a regular file"
    elif kind == "fifo":
        path, words = str(tmp_path / "plan.fifo"), "a FIFO (named pipe), not a regular file"
        os.mkfifo(path)             # no writer: a blocking open or read would hang
    else:
        path, words = kind, "a character device, not a regular file"
    for args in (["apply", path], ["verify", path, "--", sys.executable]):
        line = one_line(cli(*args, timeout=30))
        assert words in line, line


def test_a_plan_is_read_only_up_to_its_cap(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate((1 << 24) + 1)
    with pytest.raises(ValueError, match="larger than 16 MiB"):
        load_plan(str(big))


@pytest.mark.parametrize("text, field, shown", [
    ('"speedup": NaN', "speedup", "nan"),
    ('"ci": [1.0, Infinity]', "ci[1]", "inf"),
    ('"ci": [1.0, 1e999]', "ci[1]", "inf"),
    ('"extra": {"deep": [{"x": -Infinity}]}', "extra.deep[0].x", "-inf"),
])
def test_non_finite_numbers_anywhere_are_refused_by_name(text, field, shown, tmp_path):
    doc = dict(GOOD)
    doc.pop("speedup")
    doc.pop("ci")
    raw = json.dumps(doc)[:-1] + ", " + text + "}"
    path = tmp_path / "plan.json"
    path.write_text(raw)
    with pytest.raises(ValueError, match=rf"{field.replace('[', '.').replace(']', '.')}: "
                                         rf"expected a finite number, got {shown}"):
        load_plan(str(path))
    line = one_line(cli("apply", str(path)))
    assert f"{field}: expected a finite number, got {shown}" in line
    bad = json.loads(json.dumps(GOOD))
    bad["windows"][0]["hit_ratio"] = float("nan")
    with pytest.raises(ValueError, match=r"windows\[0\]\.hit_ratio: expected a finite"):
        plan_doc.check_plan(bad)
    plan_doc.check_plan(json.loads(json.dumps(GOOD)))     # finite numbers pass


# ---- 4. verify's verdict -> exit status ------------------------------------------------------

def core_result(ratio, noise, max_rounds=None, confirm_only=True, seed=1):
    """A result of the core's own live search (the rule is the core's): arms 0 and 1 take
    1.0 and 1.02 ms a unit, arm 2 (the plan) 1/ratio, each block with Gaussian noise."""
    _core.live_begin(3, confirm_only=confirm_only, min_gain=MIN_GAIN, seed=seed,
                     max_confirm_rounds=max_rounds)
    rng, pending = random.Random(seed), []
    while True:
        arm = _core.live_next()
        if arm == -1:
            return _core.live_result()
        if arm != -2:
            pending.append(arm)
            continue
        for a in pending:
            base = 1.02 if a == 1 else 1.0
            _core.live_record(base / (ratio if a == 2 else 1.0) * (1 + noise * rng.gauss(0, 1)))
        pending.clear()


ARMS = [{"set_aside": 0, "windows": []}, {"set_aside": None, "windows": []},
        {"set_aside": 1 << 22, "windows": []}]


def result_doc(res):
    """The watcher's result document around a core result (the parts the CLI reads)."""
    return {"mode": "verify", "state": "done", "device": {"name": GOOD["device"]["name"]},
            "unit": ["sync"], "units_per_block": 4, "per_arm": {}, "result": res,
            "arms": ARMS, "notes": [], "search_s": 1.0}


def dont(doc=GOOD):
    return dict(doc, verdict="dont", windows=[], set_aside=None)


CASES = [  # (plan, the plan arm's true ratio, noise, confirmation rounds at most, exit status)
    ("helps", 1.05, 0.01, None, 0),
    ("helps", 1.0, 0.01, None, 1),      # no gain that counts
    ("helps", 0.95, 0.01, None, 1),     # slower now
    ("helps", 1.01, 0.3, 6, 3),         # the interval reaches both sides
    ("dont", 1.05, 0.01, None, 1),      # an arm helps now
    ("dont", 1.0, 0.01, None, 0),
    ("dont", 1.01, 0.3, 6, 3),
]


@pytest.mark.parametrize("verdict, ratio, noise, rounds, code", CASES)
def test_verify_outcome_maps_the_cores_result_to_the_exit_status(verdict, ratio, noise,
                                                                  rounds, code):
    res = core_result(ratio, noise, rounds, confirm_only=verdict == "helps")
    plan = GOOD if verdict == "helps" else dont()
    status, line = live.verify_outcome(result_doc(res), plan, MIN_GAIN)
    assert status == code, (line, res)
    assert "\n" not in line and f"{res['ci_low']:.4f}-{res['ci_high']:.4f}" in line
    assert line.startswith({0: "still holds", 1: "no longer holds", 3: "inconclusive"}[code])
    if verdict == "dont" and code == 1:
        assert "set-aside 4.00 MiB" in line       # the arm that helps, named
    if code == 3:
        # ended by the confirmation's cap, not the budget: a longer --budget would not help
        assert res["capped"] and "the check reached its cap of 6 rounds" in line and \
            "--budget" not in line, (line, res)
    # the summary's verdict agrees with the line, in words (no Python bool)
    from l2persist.process.report import verdict_line
    r = dict(result_doc(res), verify_of="baseline" if verdict == "dont" else "plan")
    said = verdict_line(r)
    assert "True" not in said and "False" not in said, said
    if verdict == "dont":
        assert said.startswith("\"don't\" plan: the best other plan tried gives"), said
        if code in (0, 1):
            assert said.endswith("it helps now" if code == 1 else "none helps"), said
    elif code in (0, 1):
        assert said.endswith(": it helps" if code == 0 else ": it does not help"), said
    if code == 3:                      # the summary says what the exit status says
        assert said.endswith(": inconclusive"), said


def test_verify_without_a_result_is_inconclusive():
    assert live.verify_outcome(None, GOOD, MIN_GAIN)[0] == 3
    assert live.verify_outcome({"state": "warmup", "result": None}, GOOD, MIN_GAIN)[0] == 3
    # the program exited during the check: the core's result has no interval (all zero)
    cut = {"state": "done", "result": {"winner": -1, "helps": 0, "decided": 0, "speedup": 0.0,
                                       "ci_low": 0.0, "ci_high": 0.0}}
    for plan in (GOOD, dont()):
        status, line = live.verify_outcome(cut, plan, MIN_GAIN)
        assert status == 3 and "ended before the check reached a verdict" in line, line


def test_verify_of_a_dont_plan_with_only_the_baselines_to_try_holds():
    """A "don't" plan where no window reaches the program (cupy_only, jax_program: their own
    streams): the core's search has the two baselines only, decides between them and compares
    no arm. Nothing helps now, so the plan holds (exit 0); the H200 zoo at 1011bb0 got
    "inconclusive" here. A "helps" plan cannot come to this (its own arm is there)."""
    _core.live_begin(2, confirm_only=False, min_gain=MIN_GAIN, seed=3)
    rng, pending = random.Random(3), []
    for _ in range(100000):
        arm = _core.live_next()
        if arm == -1:
            break
        if arm != -2:
            pending.append(arm)
            continue
        for a in pending:
            _core.live_record((1.02 if a == 1 else 1.0) * (1 + 0.01 * rng.gauss(0, 1)))
        pending.clear()
    res = _core.live_result()
    assert res["decided"] and res["winner"] == -1 and res["ci_high"] == 0, res
    doc = dict(result_doc(res), arms=ARMS[:2])
    status, line = live.verify_outcome(doc, dont(dict(GOOD, speedup=None)), MIN_GAIN)
    assert status == 0 and line.startswith("still holds: only the two baselines"), line
    assert line.endswith("as when advised")         # the plan compared no arm either
    # advise compared arms, verify's probe found none: said, not passed off as "as advised"
    status, line = live.verify_outcome(doc, dont(dict(GOOD, speedup=1.004)), MIN_GAIN)
    assert status == 0 and "run advise again" in line and "as when advised" not in line
    # the report's verdict line gives no 0.0000x for it
    from l2persist.process.report import verdict_line
    said = verdict_line(dict(doc, result=dict(res, baseline_decided=1)))
    assert "only the two baselines" in said and "0.0000" not in said, said
    # the same result for a plan with an arm of its own is not a verdict on that arm
    assert live.verify_outcome(doc, GOOD, MIN_GAIN)[0] == 3


def _stub_program(tmp_path, doc):
    """A program that writes `doc` where the watcher's result goes, and leaves before the
    watcher's own exit handler could write over it."""
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(doc))
    src = tmp_path / "stub.py"
    src.write_text("import os, shutil\n"
                   f"shutil.copy({str(stub)!r}, os.environ['L2PERSIST_RESULT'])\n"
                   "os._exit(0)\n")
    return [sys.executable, str(src)]


@pytest.mark.parametrize("verdict, ratio, noise, rounds, code",
                         [c for c in CASES if c[0] == "helps"] + [CASES[4]])
def test_verify_main_end_to_end_returns_the_mapped_status(verdict, ratio, noise, rounds, code,
                                                          tmp_path, monkeypatch, capfd):
    """verify_main itself, the program a real subprocess: only the device checks are
    answered (no GPU here), the rest is what a user runs."""
    monkeypatch.setattr(live, "no_device_problem", lambda device: None)
    monkeypatch.setattr(live, "_model_problem", lambda doc, args: None)
    res = core_result(ratio, noise, rounds, confirm_only=verdict == "helps")
    plan = write(tmp_path, GOOD if verdict == "helps" else dont())
    out = tmp_path / "result.json"
    status = live.verify_main([plan, "--json", str(out), "--",
                               *_stub_program(tmp_path, result_doc(res))])
    err = capfd.readouterr().err
    assert status == code, err
    assert json.loads(out.read_text())["result"]["ci_low"] == res["ci_low"]
    last = err.strip().splitlines()[-1]
    assert last == "l2persist verify: " + live.verify_outcome(result_doc(res), json.loads(
        open(plan).read()), MIN_GAIN)[1]


def test_verify_refuses_a_plan_from_another_gpu_model(tmp_path, monkeypatch, capfd):
    """As apply refuses it: one line, exit 2, the program not started."""
    monkeypatch.setattr(live, "no_device_problem", lambda device: None)

    class Device:
        def __init__(self, index):
            self.properties = types.SimpleNamespace(name="NVIDIA H200")
    monkeypatch.setattr(l2persist, "Device", Device)
    command, mark = marker_program(tmp_path)
    assert live.verify_main([write(tmp_path, GOOD), "--", *command]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "found on NVIDIA H100 80GB HBM3" in err[0] and \
        "NVIDIA H200" in err[0], err
    assert not mark.exists()


@pytest.mark.parametrize("state", ["idle", "warmup", "probe", "search", "off", "done", None])
def test_no_result_says_what_happened_without_internal_names(state):
    r = None if state is None else {"state": state, "result": None, "notes": []}
    msg = live._nothing_measured(r, 0, types.SimpleNamespace(warmup=2.0))
    assert "phase" not in msg and "(no note)" not in msg and f"in the {state}" not in msg, msg
    assert ":" in msg and "the program (exit 0) ended" in msg


def budget_ended(res):
    """A core result as live_finish leaves it when the --budget ends the confirmation before
    its cap (finish's verdict is never the cap's)."""
    return dict(res, decided=0, capped=0, helps=0)


def test_an_advise_whose_search_stopped_says_that_not_the_budget():
    res = budget_ended(core_result(1.01, 0.3, 6, confirm_only=False))
    r = dict(result_doc(res), mode="advise",
             notes=["search stopped: a block of 4 units had no kernel records"])
    msg = live._undecided(r, types.SimpleNamespace(budget=60.0, min_gain=MIN_GAIN))
    assert "--budget" not in msg and "had no kernel records" in msg and "baseline" in msg, msg
    # any stop the watcher records, whatever its words (the H200 zoo's training step stopped
    # when graphs came after a search on the clock, and was told its budget ran out)
    clock = ("the program began capturing CUDA graphs after the search had begun on the "
             "watcher's clock, which never acts beside graphs: the search stopped here")
    r = dict(result_doc(res), mode="advise", notes=[clock], stopped=clock)
    msg = live._undecided(r, types.SimpleNamespace(budget=10.0, min_gain=MIN_GAIN))
    assert "--budget" not in msg and msg.startswith("undecided: the program began capturing")


def test_a_program_whose_probes_saw_no_kernel_is_told_so():
    # as the watcher writes it at the program's end: "done", with the phase it ended in
    r = {"state": "done", "ended_in": "probe", "result": None, "notes": [], "empty_probes": 7}
    msg = live._nothing_measured(r, 0, types.SimpleNamespace(warmup=2.0))
    assert "7 probe(s) recorded none" in msg and "cannot be advised" in msg, msg
    r["ended_in"] = "warmup"               # the phase's own words, not "without a result"
    assert "in the first 2 s of watching" in live._nothing_measured(
        r, 0, types.SimpleNamespace(warmup=2.0))
    r["ended_in"] = "probe"
    r["empty_probes"] = 0                  # the probe under way: the usual words
    assert "probe(s)" not in live._nothing_measured(r, 0, types.SimpleNamespace(warmup=2.0))


def test_an_undecided_advise_says_why_and_what_would_decide_it():
    res = budget_ended(core_result(1.01, 0.3, 6, confirm_only=False))
    r = dict(result_doc(res), mode="advise")
    msg = live._undecided(r, types.SimpleNamespace(budget=60.0, min_gain=MIN_GAIN))
    assert msg.startswith("undecided: the search used its --budget of 60 s") and \
        "a longer --budget would narrow it" in msg and "--min-gain" in msg, msg
    assert " arm" not in msg and "block" not in msg, msg       # no internal words
    r["notes"] = ["the program ended before the search decided"]
    r["search_s"] = 0.3
    ended = live._undecided(r, types.SimpleNamespace(budget=60.0, min_gain=MIN_GAIN))
    assert "the program ended 0.3 s into the search" in ended and \
        "run the program for longer" in ended, ended
    # the summary's verdict gives the same reason, not "the budget ran out"
    from l2persist.process.report import verdict_line
    said = verdict_line(dict(r, result=dict(res, decided=0)))
    assert said.startswith("don't: undecided: the program ended 0.3 s into the search"), said
    r["stopped"] = "search stopped: a block of 4 units had no kernel records"
    assert live._undecided(r, types.SimpleNamespace(budget=60.0, min_gain=MIN_GAIN)) \
        .startswith("undecided: search stopped: a block of 4 units")
    assert verdict_line(dict(r, result=dict(res, decided=0))).startswith(
        "don't: undecided: the search stopped")


def test_an_advise_at_the_confirmations_cap_with_a_wide_interval_is_undecided_not_dont():
    """ddp on two H200s at f7a980d: the confirmation ran to its cap with the best plan at
    1.017x (0.992-1.030) and said "don't". An interval holding both the least gain and none at
    the cap is undecided (the core's `capped`), said as such, with what would decide it."""
    from l2persist.process.report import summary_text, verdict_line
    res = core_result(1.01, 0.3, 6, confirm_only=False)
    assert res["capped"] and not res["decided"] and not res["helps"], res
    assert res["ci_low"] < 1 + MIN_GAIN <= res["ci_high"]
    r = dict(result_doc(res), mode="advise")
    msg = live._undecided(r, types.SimpleNamespace(budget=60.0, min_gain=MIN_GAIN))
    assert msg.startswith("undecided: the confirmation reached its cap of 6 rounds while the "
                          "best plan tried measured"), msg
    assert "--min-gain" in msg and "--budget" not in msg and "ranks" not in msg, msg
    assert verdict_line(r).startswith("don't: undecided: the confirmation reached its cap")
    # an interval wholly above 1 but reaching below the least gain: capped, and said so
    # truly (no "and none")
    small = core_result(1.006, 0.012, 40, confirm_only=False)
    assert small["capped"] and 1 < small["ci_low"] < 1 + MIN_GAIN <= small["ci_high"], small
    said = live._undecided(dict(result_doc(small), mode="advise"),
                           types.SimpleNamespace(budget=60.0, min_gain=MIN_GAIN))
    assert "reaches both above and below 1.01x, the least gain that counts" in said, said
    # a clear gain and a tight "no gain" settle before the cap
    assert not core_result(1.10, 0.01, 6, confirm_only=False)["capped"]
    flat = core_result(1.0, 0.001, 6, confirm_only=False)
    assert flat["decided"] and not flat["capped"]
    # on two ranks: the other rank's notes are printed, and the words point at them
    row = {"device": "NVIDIA H200", "lockstep": True}
    r["ranks"] = [dict(row, rank=0, notes=[]),
                  dict(row, rank=1, notes=["of rank 0's 9 buffers ... (rank 1 lacks 4)"])]
    msg = live._undecided(r, types.SimpleNamespace(budget=60.0, min_gain=MIN_GAIN))
    assert "see whether the ranks agree" in msg, msg
    with open(os.path.join(os.path.dirname(__file__), "data", "live",
                           "result-server-H200.json")) as f:
        doc = json.load(f)
    doc["ranks"] = r["ranks"] + [dict(row, rank=2, notes=doc["notes"][:1])]
    text = summary_text(doc)
    assert "  note (rank 1): of rank 0's 9 buffers ... (rank 1 lacks 4)" in text
    assert "note (rank 0)" not in text and "note (rank 2)" not in text


def test_apply_of_a_dont_plan_calls_no_graph_unknown():
    graphs = [types.SimpleNamespace(signature=f"k3-{i:016x}", windows_applied=0)
              for i in range(3)]
    w = types.SimpleNamespace(plan_doc=dont(), all_graphs=lambda: graphs, eager=[],
                              restored=None)
    text = bootstrap.apply_report(w)
    assert "does not know" not in text and "new shape" not in text
    assert "\"don't\" plan" in text and "3 graph(s)" in text
    assert text.startswith("l2persist apply: set-aside the default;"), text
    w.plan_doc = dict(GOOD, windows=[], set_aside=6553600)   # windows dropped, a set-aside kept
    text = bootstrap.apply_report(w)
    assert text.startswith("l2persist apply: set-aside 6553600 bytes (6.25 MiB); a set-aside "
                           "only"), text
    assert "don't" not in text and "does not know" not in text
    w.plan_doc = GOOD                       # a plan with windows still names the others
    assert "3 graph(s) captured that no window of the plan names, left as captured" in \
        bootstrap.apply_report(w)


# ---- 5. the binding's item rows ---------------------------------------------------------------

def test_scan_tuples_go_through_rows_with_their_place_named():
    kernel = (0, "k", (1, 1, 1), (32, 1, 1), 0, 3)
    assert _core.graph_signature([kernel]) == _core.graph_signature([kernel[:5]])
    for bad, words in (([(0, "k", (1, 1), (32, 1, 1), 0)], "kernels[0].grid: "),
                       ([(0, "k", (1, -1, 1), (32, 1, 1), 0)], "kernels[0].grid: y: -1 is "
                                                                "outside"),
                       ([kernel, [0, "k", (1, 1, 1), (1, 1, 1), 0]], "kernels[1]: expected a "
                                                                     "tuple"),
                       ([(0, 5, (1, 1, 1), (32, 1, 1), 0)], "kernels[0]: name: expected a "
                                                            "str")):
        with pytest.raises((TypeError, ValueError)) as e:
            _core.graph_signature(bad)
        assert words in str(e.value), str(e.value)
    use = (0, 1, 0, 4096, 4096, 100)
    assert _core.live_locate([use], 0, 1, 0, 0, 100) == (4096, 100)
    for bad, words in (([use[:5]], "uses[0]: use() missing required argument 'range_size'"),
                       ([(0, 1, 0, -1, 4096, 100)], "uses[0]: word: -1 is outside"),
                       ([use, (0, 1.5, 0, 1, 1, 1)], "uses[1]: param: expected an int")):
        with pytest.raises((TypeError, ValueError)) as e:
            _core.live_locate(bad, 0, 1, 0, 0, 100)
        assert words in str(e.value), str(e.value)
