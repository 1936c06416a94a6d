"""The zoo of programs nobody wrote around l2persist (issue 50 item 7), without a GPU: every
program in l2persist/studies/programs/ parses, imports no l2persist, follows the live study's
conventions (``prog.py OUT --iters N``, a fixed-count loop, the ``loop: N iterations in S s``
line on stderr, a digest written to OUT), declares the libraries it imports, and is registered
in the live study; the study's wiring for the zoo (torchrun for several ranks, one digest per
rank, GPUs and libraries missing: left out with the reason) works with the subprocesses
replaced."""
import ast
import json
import os
import pathlib
import re
import sys

import pytest

from l2persist import studies
from l2persist.process import plan_doc
from l2persist.studies import live

ROOT = pathlib.Path(__file__).resolve().parents[1]

PROGRAM_DIR = live.PROGRAM_DIR
FILES = sorted(f for f in os.listdir(PROGRAM_DIR) if f.endswith(".py") and not f.startswith("_"))
NEW = ("server_mix", "decode_big", "compile_graphs", "hf_generate", "eager_implicit",
       "cupy_only", "triton_kernels", "jax_program")


def tree_of(name):
    path = os.path.join(PROGRAM_DIR, live.PROGRAMS[name])
    with open(path) as f:
        return ast.parse(f.read(), filename=path)


def imported_roots(tree, top_only=False):
    """The root modules a program imports (its module level only, or anywhere)."""
    nodes = tree.body if top_only else list(ast.walk(tree))
    out = []
    for n in nodes:
        if isinstance(n, ast.Import):
            out += [a.name.split(".")[0] for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            out.append(n.module.split(".")[0])
    return out


def calls(tree, attr):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == attr]


def test_every_program_file_is_registered_and_every_registration_has_its_file():
    assert sorted(set(live.PROGRAMS.values())) == FILES
    assert set(live.ZOO_SHAPES) <= set(live.ZOO) and len(set(live.ZOO_SHAPES)) == 10
    assert set(NEW) <= set(live.ZOO_SHAPES)


def test_the_live_study_sweeps_the_zoo():
    ctx = studies.Context("live", None, True, False, None)
    ctx.declare(live.axes(ctx))
    values = ctx.values("program")
    assert values[:3] == ["server", "train", "eager"]     # the study's first three, first
    assert set(values) == set(live.ZOO)
    ctx = studies.Context("live", None, True, False, {"program": ["jax_program", "ddp"]})
    ctx.declare(live.axes(ctx))
    assert ctx.values("program") == ["jax_program", "ddp"]


@pytest.mark.parametrize("name", sorted(live.ZOO))
def test_program_parses_and_imports_no_l2persist(name):
    tree = tree_of(name)
    assert "l2persist" not in imported_roots(tree), f"{name} imports l2persist"
    for c in ast.walk(tree):      # nor through importlib / __import__
        if isinstance(c, ast.Call) and c.args and isinstance(c.args[0], ast.Constant) \
                and isinstance(c.args[0].value, str):
            fn = c.func.attr if isinstance(c.func, ast.Attribute) else \
                getattr(c.func, "id", "")
            if fn in ("import_module", "__import__"):
                assert not c.args[0].value.startswith("l2persist"), name


@pytest.mark.parametrize("name", sorted(live.ZOO))
def test_program_declares_the_libraries_it_imports(name):
    """The libraries a program imports at its module level are the ones the study checks
    before running it (a missing one: the program is left out with the reason)."""
    tree = tree_of(name)
    third = {m for m in imported_roots(tree, top_only=True) if m not in sys.stdlib_module_names}
    assert third == set(live.ZOO[name].modules), (name, third)


@pytest.mark.parametrize("name", sorted(live.ZOO))
def test_program_follows_the_study_conventions(name):
    """OUT positional, --iters N (an int), a loop over range(args.iters) (the count fixed by an
    argument, never by time), the loop line on stderr, a JSON digest written."""
    tree = tree_of(name)
    args = {}
    for c in calls(tree, "add_argument"):
        if c.args and isinstance(c.args[0], ast.Constant):
            args[c.args[0].value] = {k.arg: k.value for k in c.keywords}
    assert "out" in args and "--iters" in args, (name, list(args))
    assert isinstance(args["--iters"].get("type"), ast.Name) and \
        args["--iters"]["type"].id == "int"
    assert isinstance(args["--iters"].get("default"), ast.Constant)
    ranges = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
              getattr(n.func, "id", None) == "range" and n.args and
              isinstance(n.args[-1], ast.Attribute) and n.args[-1].attr == "iters"]
    assert ranges, f"{name}: no loop over range(args.iters)"
    prints = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
              getattr(n.func, "id", None) == "print" and n.args and
              isinstance(n.args[0], ast.JoinedStr)]
    loop = [p for p in prints if [v.value for v in p.args[0].values
                                  if isinstance(v, ast.Constant)][:3]
            == ["loop: ", " iterations in ", " s"]]
    assert loop, f"{name}: no `loop: N iterations in S s` line"
    kw = {k.arg: k.value for k in loop[0].keywords}
    assert isinstance(kw.get("file"), ast.Attribute) and kw["file"].attr == "stderr"
    assert calls(tree, "dump"), f"{name}: writes no JSON digest"


@pytest.mark.parametrize("name", NEW)
def test_new_programs_take_a_fixed_seed(name):
    tree = tree_of(name)
    seed = [c for c in calls(tree, "add_argument")
            if c.args and isinstance(c.args[0], ast.Constant) and c.args[0].value == "--seed"]
    assert seed, f"{name}: no --seed"
    kw = {k.arg: k.value for k in seed[0].keywords}
    assert isinstance(kw.get("default"), ast.Constant) and isinstance(kw["default"].value, int)


def test_jax_program_turns_preallocation_off_before_importing_jax():
    tree = tree_of("jax_program")
    first_jax = min(n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                    and "jax" in imported_roots(ast.Module(body=[n], type_ignores=[])))
    sets = [n.lineno for n in tree.body if isinstance(n, ast.Assign) and
            "XLA_PYTHON_CLIENT_PREALLOCATE" in ast.dump(n)]
    assert sets and sets[0] < first_jax
    doc = ast.get_docstring(tree)
    assert "can and cannot see" in doc and "block_until_ready" in doc


def test_eager_implicit_has_no_explicit_sync():
    """Its only host waits are implicit (bincount, .item()): no synchronize() anywhere."""
    tree = tree_of("eager_implicit")
    assert not calls(tree, "synchronize")
    assert calls(tree, "bincount") and calls(tree, "item") and calls(tree, "stream")


def test_missing_libraries_and_gpus_are_reasons(monkeypatch):
    monkeypatch.setitem(live.ZOO, "jax_program",
                        live.Program("jax_program.py", "x", ("jax", "no_such_module_l2p")))
    why = live.missing_for("jax_program")
    assert why is not None and ("no_such_module_l2p" in why or "jax" in why)
    monkeypatch.setitem(live.ZOO, "ddp", live.Program("ddp.py", "x", ("json",), ranks=2))
    why = live.missing_for("ddp", 0, lambda: 1)
    # the words tools/gpu-check allows for a skip on a machine with one GPU
    allowed = re.search(r"ALLOWED_SKIPS='([^']*)'", (ROOT / "tools" / "gpu-check").read_text())
    assert "needs 2 GPUs" in why and re.search(allowed.group(1), why), why
    assert "from GPU 1" in live.missing_for("ddp", 1, lambda: 2)
    assert live.missing_for("ddp", 0, lambda: 2) is None


def test_commands_one_rank_and_torchrun():
    one = live.program_command("cupy_only", "/tmp/o.json", 50)
    assert one == [sys.executable, os.path.join(PROGRAM_DIR, "cupy_only.py"), "/tmp/o.json",
                   "--iters", "50"]
    two = live.program_command("ddp", "/tmp/o.json", 50)
    assert two[:6] == [sys.executable, "-m", "torch.distributed.run", "--standalone",
                       "--nproc-per-node", "2"]
    assert two[6:] == [os.path.join(PROGRAM_DIR, "ddp.py"), "/tmp/o.json", "--iters", "50"]


def test_digest_of_several_ranks(tmp_path):
    out = str(tmp_path / "d.json")
    assert live.read_digest("ddp", out) is None
    with open(out + ".rank0", "w") as f:
        json.dump({"hist": "a"}, f)
    assert live.read_digest("ddp", out) is None           # a rank's digest missing: none
    with open(out + ".rank1", "w") as f:
        json.dump({"hist": "b"}, f)
    assert live.read_digest("ddp", out) == {"rank0": {"hist": "a"}, "rank1": {"hist": "b"}}


def test_env_gives_a_program_of_several_ranks_its_gpus(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert "CUDA_VISIBLE_DEVICES" not in live._env(0)
    assert live._env(0, 2)["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert live._env(1, 2)["CUDA_VISIBLE_DEVICES"] == "1,2"
    assert live._env(2)["CUDA_VISIBLE_DEVICES"] == "2"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")
    assert live._env(1, 2)["CUDA_VISIBLE_DEVICES"] == "5,7"
    assert live._env(0)["CUDA_VISIBLE_DEVICES"] == "3"


def test_run_program_reads_every_rank_and_the_loop_line(monkeypatch, tmp_path):
    """The subprocess plumbing for a program of several ranks, on a stand-in launcher that
    needs no GPU: the study's torchrun command line is replaced by one that writes what two
    ranks would."""
    fake = tmp_path / "fake_ddp.py"
    fake.write_text("import json, sys\n"
                    "for r in (0, 1):\n"
                    "    json.dump({'rank': r, 'n': int(sys.argv[3])}, "
                    "open(sys.argv[1] + '.rank%d' % r, 'w'))\n"
                    "print('loop: %s iterations in 0.5000 s' % sys.argv[3], file=sys.stderr)\n")
    monkeypatch.setattr(live, "program_command",
                        lambda prog, out, iters: [sys.executable, str(fake), out, "--iters",
                                                  str(iters)])
    p = live.run_program("ddp", 40, str(tmp_path), "plain", live._env(0), 60)
    assert p["rc"] == 0 and p["loop_s"] == 0.5 and live.rate_of(p) == 80.0
    assert p["digest"] == {"rank0": {"rank": 0, "n": 40}, "rank1": {"rank": 1, "n": 40}}


class _Ctx:
    device = None
    quick = True


def _summary():
    arms = [{"set_aside": 0, "windows": []}, {"set_aside": None, "windows": []},
            {"set_aside": 9 << 20, "windows": []}]
    plan = {"format": "l2persist-live-plan/1",
            "device": {"name": "NVIDIA H100", "cc": [9, 0], "l2_bytes": 50 << 20},
            "l2persist": "0.1.0", "verdict": "dont", "speedup": 1.0, "ci": [0.99, 1.01],
            "set_aside": None, "windows": []}
    return {"mode": "advise", "state": "done", "arms": arms, "plan": plan,
            "result": {"done": 1, "decided": 1, "winner": -1, "helps": 0, "baseline": 1,
                       "speedup": 1.0, "ci_low": 0.99, "ci_high": 1.01,
                       "search_median": [1.0, 1.0, 1.01]}}


def test_program_sequence_for_torchrun(monkeypatch):
    """Under torchrun each rank takes its LOCAL_RANK's GPU: advise, verify, apply and the
    grid's verify runs get no --device 0 (which would put both ranks on one GPU), and both
    GPUs are visible; a one-rank program still names its GPU."""
    calls_ = []
    s = _summary()

    def fake(prog, iters, work, tag, env, timeout, cli=None):
        calls_.append((tag, None if cli is None else list(cli), env.get("CUDA_VISIBLE_DEVICES")))
        if cli and cli[0] == "advise":
            with open(cli[cli.index("--out") + 1], "w") as f:
                json.dump(s["plan"], f)
            return {"rc": 0, "wall_s": 5.0, "iters": iters, "loop_s": iters / 1000.0,
                    "digest": {"rank0": {"h": 1}, "rank1": {"h": 2}}, "result": s,
                    "stderr": ""}
        if cli and cli[0] == "verify":
            plan_doc.check_plan(json.load(open(cli[1])))
            return {"rc": 0, "wall_s": 5.0, "iters": iters, "loop_s": iters / 1000.0,
                    "digest": {"rank0": {"h": 1}, "rank1": {"h": 2}},
                    "result": {"result": {"decided": 1, "helps": 0, "speedup": 1.0,
                                          "ci_low": 0.99, "ci_high": 1.01}}, "stderr": ""}
        return {"rc": 0, "wall_s": 5.0, "iters": iters, "loop_s": iters / 1000.0,
                "digest": {"rank0": {"h": 1}, "rank1": {"h": 2}}, "result": None,
                "stderr": ""}

    monkeypatch.setattr(live, "run_program", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    r = live._program(_Ctx(), live.QUICK, "ddp")
    assert [c[0] for c in calls_][:5] == ["calibrate", "advise", "verify", "plain0", "apply0"]
    for tag, cli, visible in calls_:
        assert visible == "0,1", tag                     # both GPUs, for both ranks
        assert cli is None or "--device" not in cli, (tag, cli)
    assert r["deterministic"] and r["advise_digest_same"] and r["apply_digest_same"]
    # a one-rank program still names its GPU
    calls_.clear()
    live._program(_Ctx(), live.QUICK, "cupy_only")
    assert all(cli is None or cli[1:3] == ["--device", "0"] or cli[2:4] == ["--device", "0"]
               for _, cli, _ in calls_), calls_


def test_run_leaves_out_what_cannot_run_with_the_reason(monkeypatch):
    ran = []
    monkeypatch.setattr(live, "_program",
                        lambda ctx, cfg, program: ran.append(program) or {"error": None})
    monkeypatch.setattr(live, "missing_for",
                        lambda program, index=0, device_count=None:
                        "the jax_program program needs jax, which is not installed"
                        if program == "jax_program" else None)
    ctx = studies.Context("live", None, True, False, {"program": ["cupy_only", "jax_program"]})
    ctx.declare(live.axes(ctx))
    res = live.run(ctx)
    assert ran == ["cupy_only"]
    assert [r["program"] for r in res.records] == ["cupy_only"]
    assert ("program jax_program", "the jax_program program needs jax, which is not "
            "installed") in ctx.skipped


def test_the_gpu_parts_of_the_zoo_are_the_whole_zoo_once():
    from test_zoo_graphs_gpu import GRAPHS
    from test_zoo_libs_gpu import LIBS
    from test_zoo_torch_gpu import TORCH
    assert sorted(GRAPHS + TORCH + LIBS) == sorted(live.ZOO_SHAPES)


@pytest.mark.parametrize("notebook", ["1", ""])
def test_the_notebooks_run_of_the_live_study_is_one_short_program(monkeypatch, notebook):
    """The GPU suite executes the live notebook (L2P_NOTEBOOK_QUICK=1): one program at the
    NOTEBOOK lengths, every one shorter than QUICK's; a quick run otherwise is QUICK's."""
    monkeypatch.setenv("L2P_NOTEBOOK_QUICK", notebook)
    seen = []

    class Ctx:
        quick, device, skipped = True, None, []

        def values(self, axis):
            return live.axes(self)[axis]

        def has(self, *a):
            pass

        def sweep(self, axes, fn, desc=""):
            return [fn(p) for p in axes["program"]]

        def results(self, records, **kw):
            return records
    monkeypatch.setattr(live, "missing_for", lambda program, index: None)
    monkeypatch.setattr(live, "_program", lambda ctx, cfg, program: seen.append((program, cfg)))
    live.run(Ctx())
    if notebook:
        assert seen == [("eager", live.NOTEBOOK)]
        for f in ("loop_s", "grid_loop_s", "budget", "top"):
            assert getattr(live.NOTEBOOK, f) < getattr(live.QUICK, f), f
    else:
        assert {cfg for _, cfg in seen} == {live.QUICK} and len(seen) == len(live.PROGRAMS)


@pytest.mark.parametrize("unit,units,probe_s,ok", [
    (["replay", "k225"], 512, 0.26, True),      # fast: ended at its 256th unit
    (["replay", "k225"], 1024, 0.50, False),    # fast, yet probed for the whole length
    (["replay", "k16"], 150, 0.50, True),       # slow: the whole length
    (["tick"], 5000, 0.50, True),               # a tick is no unit the rule counts
    (["mark"], 600, 0.30, True),
    (["replay", "k225"], 100, 0.20, False),     # shorter than the least
])
def test_the_zoo_check_holds_the_probe_to_its_rule(unit, units, probe_s, ok):
    """tests/zoo_check.py's probe check on the GPU (Probe.over): a unit that came fast enough
    ends the probe before its whole length; none ends before PROBE_MIN_S."""
    import zoo_check
    result = {"unit": unit, "timing": {"probe_s": probe_s, "probe_units": units}}
    if ok:
        zoo_check._check_probe("p", result)
    else:
        with pytest.raises(AssertionError):
            zoo_check._check_probe("p", result)
    zoo_check._check_probe("p", {"timing": {"probe_s": None}})   # no probe: nothing to hold
