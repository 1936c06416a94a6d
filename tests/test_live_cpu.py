"""The program-watching workflow's parts that need no GPU: the CLI's refusals (exit 2, the
argument named), the plan document's check, the bootstrap's start-up (a program runs whatever
happens, its output and exit status pass through), the post-import hook and the chained
sitecustomize. The GPU half is tests/test_live_gpu.py."""
import copy
import json
import os
import subprocess
import sys
import time

import pytest

from l2persist.cli.live import BOOT
from l2persist.process import bootstrap, plan_doc
from l2persist.process.live import Options, Watcher, _increasing

GOOD = {"format": "l2persist-live-plan/1", "device": {"name": "NVIDIA H100 80GB HBM3"},
        "set_aside": 3932160,
        "windows": [{"graph": "k12-0123456789abcdef", "node": 3, "param": 1, "offset": 0,
                     "delta": -256, "bytes": 1 << 24, "hit_ratio": 0.5,
                     "hit_prop": "persisting", "miss_prop": "streaming", "nodes": [3, 5]}]}


def _cli(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "l2persist", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("args, words", [
    (["advise"], "no program given"),
    (["advise", "--budget", "0", "--", "python"], "--budget"),
    (["advise", "--warmup", "x", "--", "python"], "--warmup"),
    (["advise", "--min-gain", "0.9", "--", "python"], "--min-gain"),
    (["advise", "--block-units", "-3", "--", "python"], "--block-units"),
    (["advise", "--max-overhead", "60", "--", "python"], "--max-overhead: expected [0, 50]"),
    (["advise", "--max-overhead", "nan", "--", "python"], "--max-overhead"),
    (["verify", "--max-overhead", "-1", "p.json", "--", "python"], "--max-overhead"),
    (["advise", "--out", "/nonexistent-dir/p.json", "--", "python"], "--out"),
    (["verify", "--", "python"], "plan"),
    (["verify", "/nonexistent.json", "--", "python"], "no such file"),
    (["apply", "/nonexistent.json", "--", "python"], "no such file"),
])
def test_cli_refusals(args, words):
    p = _cli(*args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert words in p.stderr


@pytest.mark.parametrize("path, value, words", [
    (("format",), "l2persist-plan/9", "format"),
    (("device",), None, "device.name"),
    (("set_aside",), -1, "set_aside"),
    (("set_aside",), 1e30, "set_aside"),
    (("set_aside",), True, "set_aside"),
    (("windows",), "abc", "windows"),
    (("windows", 0, "graph"), 5, "windows[0].graph"),
    (("windows", 0, "node"), -1, "windows[0].node"),
    (("windows", 0, "bytes"), 0, "windows[0].bytes"),
    (("windows", 0, "hit_ratio"), float("nan"), "windows[0].hit_ratio"),
    (("windows", 0, "hit_ratio"), 2.0, "windows[0].hit_ratio"),
    (("windows", 0, "hit_prop"), "bogus", "windows[0].hit_prop"),
    (("windows", 0, "nodes"), [], "windows[0].nodes"),
    (("windows", 0, "nodes"), [1, "x"], "windows[0].nodes[1]"),
    (("windows", 0, "stream"), "pool", "windows[0].stream: expected 'launch', got 'pool'"),
    (("windows", 0, "stream"), 7, "windows[0].stream"),
    (("verdict",), "maybe", "verdict: expected one of 'helps', 'dont', got 'maybe'"),
    (("graphs",), "abc", "graphs: expected a list of at most 65536 graphs"),
    (("graphs",), [{"graph": "k2-aa"}, {"graph": 5}], "graphs[1].graph"),
    (("graphs",), [{"graph": "x"}], "graphs[0].graph: expected a graph signature"),
    (("graphs",), [{"graph": "k2-aa"}] * 65537, "graphs: expected a list of at most"),
    (("verdict",), "help", "verdict"),
    (("verdict",), 1, "verdict"),
])
def test_plan_document_fields_are_named(path, value, words):
    doc = copy.deepcopy(GOOD)
    at = doc
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = value
    with pytest.raises(ValueError, match=r"plan .*" + words.replace("[", r"\[").replace("]", r"\]")):
        plan_doc.check_plan(doc)
    assert plan_doc.check_plan(copy.deepcopy(GOOD))["set_aside"] == 3932160
    eager = copy.deepcopy(GOOD)                 # a stream window's mark, and null, are good
    eager["windows"][0]["stream"] = "launch"
    assert plan_doc.check_plan(eager)["windows"][0]["stream"] == "launch"
    eager["windows"][0]["stream"] = None
    plan_doc.check_plan(eager)


def test_verify_refuses_a_bad_document(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(GOOD, set_aside="lots")))
    p = _cli("verify", str(bad), "--", sys.executable, "-c", "print('ran')")
    assert p.returncode == 2 and "set_aside" in p.stderr and "ran" not in p.stdout
    bad.write_bytes(b"\xff\xfe\x00garbage")
    p = _cli("apply", str(bad), "--", sys.executable, "-c", "print('ran')")
    assert p.returncode == 2 and "is not UTF-8 text: not a plan document" in p.stderr
    # truncated: where the JSON broke; empty: said so
    bad.write_text(json.dumps(GOOD)[:40])
    p = _cli("apply", str(bad), "--", sys.executable, "-c", "print('ran')")
    assert p.returncode == 2 and "is not valid JSON (line 1, column " in p.stderr, p.stderr
    assert "Error)" not in p.stderr and "ran" not in p.stdout
    bad.write_text("  \n")
    p = _cli("apply", str(bad), "--", sys.executable, "-c", "print('ran')")
    assert p.returncode == 2 and "is empty: give the JSON file that advise wrote" in p.stderr
    bad.write_text("[" * 100000)
    p = _cli("apply", str(bad))
    assert p.returncode == 2 and "nested too deeply" in p.stderr and "Traceback" not in p.stderr


def test_advise_runs_the_program_and_passes_its_status_through(tmp_path):
    """The program runs, prints what it prints and exits as it exits; l2persist says it has
    no advice and why. (Without a GPU advise does not start it: test_cli_edges.py.)"""
    if not __import__("l2persist").is_available():
        pytest.skip("no GPU: advise refuses before the program starts (test_cli_edges.py)")
    prog = tmp_path / "p.py"
    prog.write_text("import sys\nprint('hello from the program')\nsys.exit(3)\n")
    p = _cli("advise", "--", sys.executable, str(prog))
    assert "hello from the program" in p.stdout
    assert p.returncode == 3
    assert "no advice" in p.stderr


def test_apply_without_a_gpu_runs_the_program_unchanged(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(GOOD))
    prog = tmp_path / "p.py"
    prog.write_text("print('still runs')\n")
    p = _cli("apply", str(plan), "--", sys.executable, str(prog))
    assert p.returncode == 0 and "still runs" in p.stdout
    if not __import__("l2persist").is_available():
        assert "plan not applied" in p.stderr


def test_apply_prints_the_environment_for_launchers(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(GOOD))
    p = _cli("apply", str(plan))
    assert p.returncode == 0
    assert f"L2PERSIST_PLAN={plan}" in p.stdout and BOOT in p.stdout


def test_sitecustomize_chains_to_the_one_it_shadows(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([BOOT, str(other)]))
    env.pop("L2PERSIST_MODE", None)
    env.pop("L2PERSIST_PLAN", None)
    p = subprocess.run([sys.executable, "-c", "import os, sys; print(os.environ.get('CHAINED'),"
                        " 'l2persist.process.bootstrap' in sys.modules)"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["yes", "True"]


def test_after_import_hook_runs_after_the_programs_own_import(tmp_path, monkeypatch):
    (tmp_path / "fakemod_l2p.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    hook = bootstrap._AfterImport("fakemod_l2p", lambda m: seen.append(m.VALUE + 1))
    sys.meta_path.insert(0, hook)
    try:
        assert "fakemod_l2p" not in sys.modules and not seen  # nothing imported by the hook
        import fakemod_l2p
        assert fakemod_l2p.VALUE == 41 and seen == [42]
        assert hook not in sys.meta_path                       # once
    finally:
        sys.modules.pop("fakemod_l2p", None)
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)


def test_a_hook_that_fails_never_reaches_the_program():
    w = Watcher(Options())

    def boom(*a):
        raise RuntimeError("inside the watcher")
    w.point = boom
    saved = bootstrap._watcher
    bootstrap._watcher = w
    try:
        bootstrap.mark()           # the program's call goes on
        assert any("inside the watcher" in n for n in w.notes)
    finally:
        bootstrap._watcher = saved


def test_mark_is_a_no_op_when_not_watched():
    assert bootstrap.watcher() is None or True
    saved = bootstrap._watcher
    bootstrap._watcher = None
    try:
        assert bootstrap.mark() is None
    finally:
        bootstrap._watcher = saved


def test_options_from_the_environment():
    o = Options.from_env({"L2PERSIST_MODE": "verify", "L2PERSIST_BUDGET": "12.5",
                          "L2PERSIST_BLOCK_UNITS": "8", "LOCAL_RANK": "1",
                          "L2PERSIST_EXIT_AFTER": "1"})
    assert (o.mode, o.budget_s, o.block_units, o.device, o.exit_after) == \
        ("verify", 12.5, 8, 1, True)


def test_block_bounds_made_increasing():
    assert _increasing([5, 9, 9, 12, 12]) == [5, 9, 10, 12, 13]


def test_apply_report_says_what_matched_and_what_was_put_back():
    """The line apply prints at exit (normal exit, an exception, SIGTERM): graphs windowed,
    graphs no window of the plan names, plan windows that found nothing, the set-aside put back
    and what the watcher noted (a graph it could not read...)."""
    from types import SimpleNamespace as NS
    doc = {"set_aside": 3 << 20, "windows": [{"graph": "k2-aa", "_applied": 1},
                                             {"graph": "k9-zz"}]}
    # the first k2-aa graph was dropped by the program (the watcher keeps it in all_graphs)
    graphs = [NS(signature="k2-aa", windows_applied=1), NS(signature="k2-aa", windows_applied=1),
              NS(signature="k4-new", windows_applied=0)]
    w = NS(plan_doc=doc, all_graphs=lambda: graphs, restored=None)
    text = bootstrap.apply_report(w)
    assert "set-aside 3145728 bytes (3.00 MiB); 2 graph(s) windowed (2 window(s))" in text
    assert "1 graph(s) captured that no window of the plan names" in text and "k4-new" in text
    assert "note:" not in text                         # nothing noted: no note line
    assert "1 plan window(s) found no graph or launch: k9-zz" in text
    assert "put back" not in text                      # nothing restored: not said
    w.restored = 0
    assert "set-aside put back to 0 bytes, as the program found it" in bootstrap.apply_report(w)
    w.notes = ["a captured graph could not be read: CudaError x\n  a second line", ""]
    lines = bootstrap.apply_report(w).splitlines()
    assert lines[-1] == "  note: a captured graph could not be read: CudaError x", lines
    # a plan that lists the graphs advise saw: a graph advise left alone is said as advised,
    # one advise never saw is a new shape (and a "don't" plan says so too)
    w.notes = []
    doc["graphs"] = [{"graph": "k2-aa"}, {"graph": "k4-new"}]
    text = bootstrap.apply_report(w)
    assert "1 graph(s) captured that no window of the plan names, left as captured, as " \
           "advised: k4-new" in text and "did not see" not in text, text
    graphs.append(NS(signature="k7-odd", windows_applied=0))
    text = bootstrap.apply_report(w)
    assert "1 graph(s) of a shape advise did not see, left as captured (run advise again " \
           "where they matter): k7-odd" in text, text
    w.plan_doc = dict(doc, windows=[], set_aside=None, verdict="dont")
    text = bootstrap.apply_report(w)
    assert "\"don't\" plan (no windows): 4 graph(s) left as captured" in text and \
        "did not see" in text and "k7-odd" in text, text


def test_pausing_the_records_when_not_collecting_is_a_named_error():
    """activity_record (the watcher's warm-up pause) needs a collecting log: without one it is
    refused with the reason, before any CUDA or CUPTI is touched (this runs without a GPU)."""
    from l2persist import _core
    with pytest.raises(ValueError, match="not collecting"):
        _core.activity_record(False)
    with pytest.raises(TypeError, match="on"):
        _core.activity_record()


def test_the_watcher_keeps_no_graph_of_the_program_alive(monkeypatch):
    """A server that drops a graph (a batch size it no longer serves) gets its memory back
    under advise and apply: the watcher holds its graphs weakly and borrows one only while it
    sets windows. A dropped graph is kept in the summary, its windows are left alone, and a
    new graph that reuses its id is not taken for it."""
    import gc
    import weakref

    from l2persist import foreign
    from l2persist.process import live

    borrowed = []

    class Borrowed:                  # what as_graph gives: it holds its owner, as the real one
        def __init__(self, owner):
            self.owner, self.windows = owner, []

        def _scan(self, _):
            return [(0, "k0"), (1, "k1")], [(0x1000, 4096, 1)], [(0, 0, 0, 0, 0), (1, 0, 0, 0, 0)]

        def set_access_policy_window(self, w, nodes):
            self.windows.append((w, nodes))

    def as_graph(owner):
        borrowed.append(Borrowed(owner))
        return borrowed[-1]

    class ProgramGraph:
        pass

    monkeypatch.setattr(foreign, "as_graph", as_graph)
    monkeypatch.setattr(live._core, "graph_signature", lambda kernels: "sig")
    w = live.Watcher(live.Options(mode="advise"))
    g = ProgramGraph()
    alive = weakref.ref(g)
    w.capture_begin()
    w.capture_end(g)
    seen = w.known.seen(g)
    assert seen is not None and seen.signature == "sig" and w.notes == []
    win = object()
    kw = (("key",), win)
    w.switcher.set_graph_windows(seen, {0: kw, 1: kw})
    assert borrowed[-1].windows == [(win, [0, 1])] and borrowed[-1].owner is g
    n = len(borrowed)
    w.switcher.set_graph_windows(seen, {0: kw, 1: kw})   # the same windows again: nothing set
    assert len(borrowed) == n
    w.switcher.set_graph_windows(seen, {0: kw})          # node 1's window taken off, node 0 kept
    assert borrowed[-1].windows == [(None, [1])]
    borrowed.clear()
    del g
    gc.collect()
    assert alive() is None, "the watcher kept the program's graph alive"
    w.switcher.set_graph_windows(seen, {})          # dropped: nothing borrowed, nothing raised
    assert borrowed == []
    g2 = ProgramGraph()
    assert w.known.seen(g2) is None
    w.capture_begin()
    w.capture_end(g2)
    assert len(w.graphs_gone) == 1 and w.known.seen(g2) is not None
    assert [d["signature"] for d in w.summary()["graphs"]] == ["sig", "sig"]
    assert w.known.seen(g2).ordinal == 1    # the second capture of its signature


def test_the_warmup_pauses_the_records_only_while_no_graph_exists(monkeypatch):
    """Kernel records wait for the probe while the program has made no graph; a capture or a
    replay (whose first instantiates the graph) resumes them first, and a program that made
    its graphs before the first watched call is never paused (that CUPTI records the nodes of
    a graph made while paused was not measured). Syncs do not resume."""
    import types

    import l2persist
    from l2persist.process import live

    calls = []
    monkeypatch.setattr(live._core, "activity_begin", lambda dev: calls.append("begin"))
    monkeypatch.setattr(live._core, "activity_record", lambda on: calls.append(on))
    dev = types.SimpleNamespace(default_persisting_l2_limit=0, persisting_l2_limit=0)
    monkeypatch.setattr(l2persist, "Device", lambda index: dev)

    def watcher():
        w = live.Watcher(live.Options(mode="advise", warmup_s=1e9))
        return w

    w = watcher()
    w.point("sync")                      # the first watched call: start, paused
    assert calls == ["begin", False] and w.paused and w.state == "warmup"
    w.point("sync")
    assert calls == ["begin", False]
    w.point("replay", None)              # resumed before the replay runs
    assert calls == ["begin", False, True] and not w.paused
    calls.clear()
    w = watcher()
    w.point("sync")
    w.capture_begin()                    # a capture: recording before its graph is made
    assert calls == ["begin", False, True] and not w.paused
    calls.clear()
    w = watcher()
    w.capture_begin()                    # a graph made before the first watched call
    w.captures = 0                       # (its capture ended, and could not be read)
    w.point("sync")
    assert calls == ["begin"] and not w.paused


def test_rest_units_binding():
    """The pace's one home is the core (l2p_live_rest_units): the binding passes None as a time
    not known yet, takes the defaults from live_defaults(), and names a bad argument."""
    from l2persist import _core
    d = _core.live_defaults()
    assert d["max_overhead"] == 0.01 and d["max_rest_ratio"] == 20
    aim = d["overhead_aim"] * d["max_overhead"]                 # aimed under the bound
    assert 0.5 * 0.01 < aim < 0.01
    assert _core.live_rest_units(50) == (50, False)             # nothing known: one block
    assert _core.live_rest_units(50, 0.0, 1e-4, 1e-4) == (0, False)  # watching costs nothing
    r, capped = _core.live_rest_units(50, 5e-4, 1e-4, 1.05e-4)  # 5 % recording, 0.5 ms switch
    added, cycle = 5e-4 + 50 * 5e-6, 5e-4 + r * 1e-4 + 50 * 1.05e-4
    assert not capped and 0 < r < 20 * 50 and added / cycle <= aim
    assert (added / (cycle - 1e-4)) > aim                       # the fewest that do
    # a 1 ms switch and 10 % recording need more than the cap: out of reach, said
    assert _core.live_rest_units(50, 1e-3, 1e-4, 1.1e-4) == (20 * 50, True)
    assert _core.live_rest_units(50, 1e-3, 1e-4, 1.1e-4, max_overhead=0.0) == (0, False)
    assert _core.live_rest_units(50, 1e-3, 1e-4, 1.1e-4, max_rest_ratio=2) == (100, True)
    # the hooks' share comes off the bound: longer rests, as for a bound that much lower
    hooked = _core.live_rest_units(50, 5e-4, 1e-4, 1.05e-4, hooks_share=0.004)
    same = _core.live_rest_units(50, 5e-4, 1e-4, 1.05e-4,
                                 max_overhead=0.01 - 0.004 / d["overhead_aim"])
    assert abs(hooked[0] - same[0]) <= 1 and hooked[0] > r
    for kw, words in (({"units": 0}, "units"), ({"units": 5, "max_overhead": 0.6},
                                                 "max_overhead"),
                      ({"units": 5, "max_rest_ratio": 65}, "max_rest_ratio"),
                      ({"units": 5, "rest_s": float("nan")}, "rest_s"),
                      ({"units": 5, "hooks_share": -0.1}, "hooks_share")):
        with pytest.raises(ValueError, match=words):
            _core.live_rest_units(**kw)


def test_apply_names_an_in_process_plan_for_what_it_is(tmp_path):
    """The two plan documents: apply given Plan.to_json's says what that one is and how it is
    loaded, before any program starts."""
    from l2persist import _core
    doc = tmp_path / "inproc.json"
    doc.write_text(json.dumps({"format": _core.PLAN_FORMAT, "device": "X", "set_aside": 0,
                               "entries": []}))
    p = _cli("apply", str(doc), "--", sys.executable, "-c", "raise SystemExit(7)")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "is an in-process plan" in p.stderr and "Plan.from_json(path" in p.stderr, p.stderr


def _fake_torch(monkeypatch, w):
    """A torch module with the parts the bootstrap hooks (a graph class that counts its
    replays, Stream / Event / device synchronize that say who answered), in sys.modules, and
    the bootstrap's watcher set to ``w`` and hooks not yet installed."""
    import types

    class CUDAGraph:
        def __new__(cls, keep_graph=False):
            return object.__new__(cls)

        def __init__(self, keep_graph=False):
            self.replays = 0

        def replay(self):
            self.replays += 1

        def capture_begin(self):
            pass

        def capture_end(self):
            pass

    class Stream:
        def synchronize(self):
            return "stream"

    class Event:
        def synchronize(self):
            return "event"

    def synchronize():
        return "device"

    cuda = types.SimpleNamespace(CUDAGraph=CUDAGraph, Stream=Stream, Event=Event,
                                 synchronize=synchronize)
    fake = types.SimpleNamespace(cuda=cuda)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(bootstrap, "_watcher", w)
    monkeypatch.setattr(bootstrap, "_patched", False)
    return fake


def test_the_bootstrap_takes_its_call_hooks_off_and_puts_the_originals_back(monkeypatch):
    """advise hooks PyTorch's replay and synchronizations (the capture hooks are separate);
    the undo it gives the watcher puts back the very functions it found, and a decided
    watcher with its own cost timed calls it from the next call on: later calls of the
    program no longer reach l2persist at all."""
    w = Watcher(Options(mode="advise"))
    w.state, w._after = "done", {"need": 10, "units": 0, "t0": None,      # still timing
                                 "since": time.perf_counter(), "calls": 0}
    fake = _fake_torch(monkeypatch, w)
    cuda = fake.cuda
    CUDAGraph, Stream, Event = cuda.CUDAGraph, cuda.Stream, cuda.Event
    originals = (CUDAGraph.replay, Stream.synchronize, Event.synchronize, cuda.synchronize)
    bootstrap._patch_torch(fake)
    g = CUDAGraph()
    assert CUDAGraph.replay is not originals[0] and cuda.synchronize is not originals[3]
    # the replay's hook: the count's C method in front of the Python hook (fastcount.py)
    from l2persist import _core
    assert isinstance(CUDAGraph.__dict__["replay"], _core.CountedReplay)
    assert CUDAGraph.replay.count is bootstrap._COUNT and CUDAGraph.replay.__name__ == "replay"
    # and the syncs': the same count's C call, the Python hook after it (fastcount.py)
    for sync in (cuda.synchronize, Stream.__dict__["synchronize"],
                 Event.__dict__["synchronize"]):
        assert isinstance(sync, _core.CountedSync) and sync.count is bootstrap._COUNT
    g.replay()
    assert cuda.synchronize() == "device" and Stream().synchronize() == "stream"
    assert w.points["replay"] == 1 and w.points["sync"] == 2 and g.replays == 1
    assert w.unhook_calls is not None                  # the timing is not done: hooked
    w._after = None                                    # ... now it is
    g.replay()
    assert w.unhook_calls is None and w.points["replay"] == 2
    assert (CUDAGraph.replay, Stream.synchronize, Event.synchronize,
            cuda.synchronize) == originals
    g.replay()
    assert Event().synchronize() == "event" and g.replays == 3
    assert w.points["replay"] == 2 and w.points["sync"] == 2   # l2persist not reached
    assert w.calls_unhooked and not any("came off but" in n for n in w.notes)


def test_a_wrapper_over_a_hook_is_left_in_place(monkeypatch):
    """Something wrapped torch.cuda.synchronize after the bootstrap hooked it (a profiler, the
    program): taking the hooks off leaves that wrapper (and the hook inside it, which answers
    at once) rather than drop the other tool's; the note names it. The rest come off."""
    w = Watcher(Options(mode="advise"))
    w.state = "done"
    fake = _fake_torch(monkeypatch, w)
    cuda = fake.cuda
    original_replay = cuda.CUDAGraph.replay
    bootstrap._patch_torch(fake)
    hooked = cuda.synchronize
    cuda.synchronize = lambda: ("profiler", hooked())    # another tool's wrapper over ours
    cuda.CUDAGraph().replay()                             # decided, nothing to time: off
    assert w.unhook_calls is None and w.calls_unhooked
    assert cuda.CUDAGraph.replay is original_replay       # ours: put back
    assert cuda.synchronize() == ("profiler", "device")   # theirs: left as it is
    assert any("torch.cuda.synchronize" in n and "came off but" in n for n in w.notes), w.notes


def test_the_after_decision_timing_gives_up_when_the_unit_stops_coming(monkeypatch):
    """A unit that no longer comes after the decision (a new shape captured, the program
    idle) must not keep the hooks on for good: past a bound of calls the timing ends with a
    note, and the hooks come off."""
    from l2persist.process import search
    w = Watcher(Options(mode="advise"))
    w.unit = ("replay", "k1-none")
    w.state, w._after = "done", {"need": 10, "units": 0, "t0": None,
                                 "since": time.perf_counter(), "calls": 0}
    undone = []
    w.unhook_calls = lambda: undone.append(1) or []
    monkeypatch.setattr(search, "AFTER_CALLS_MAX", 50)
    for _ in range(50):
        w.point("sync")
    assert w._after is not None and not undone            # still waiting for the unit
    w.point("sync")
    assert w._after is None and undone == [1]
    assert any("not timed" in n for n in w.notes)


def test_a_watched_call_from_another_thread_is_noted(monkeypatch):
    """The switcher readies no graph ahead of a block's end once another thread has made
    watched calls (Search.ready_ahead): the watcher notes the first such call."""
    import threading
    w = Watcher(Options(mode="advise"))
    monkeypatch.setattr(w.phases, "point", lambda kind, graph, seen: None)
    w.point("sync")
    w.point("sync")
    assert w.other_threads is False
    t = threading.Thread(target=w.point, args=("sync",))
    t.start()
    t.join()
    assert w.other_threads is True


@pytest.mark.parametrize("key, value, words", [
    ("L2PERSIST_DEVICE", "abc", "L2PERSIST_DEVICE='abc': expected an integer >= 0"),
    ("L2PERSIST_DEVICE", "-2", "L2PERSIST_DEVICE='-2': expected an integer >= 0"),
    ("L2PERSIST_BUDGET", "soon", "L2PERSIST_BUDGET='soon': expected a number"),
    ("WORLD_SIZE", "0", "WORLD_SIZE='0': expected an integer >= 1"),
])
def test_a_launchers_bad_variable_is_named_and_the_program_runs_without_the_plan(
        key, value, words, tmp_path):
    """A launcher that sets L2PERSIST_PLAN itself (no CLI to check its values) and a variable
    l2persist cannot read: one line naming the variable and what it takes, and the program runs
    as written, without the plan (its output and status its own)."""
    import l2persist.process
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(GOOD))
    boot = os.path.join(os.path.dirname(l2persist.process.__file__), "_boot")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([boot, os.environ.get("PYTHONPATH", "")]),
           "L2PERSIST_PLAN": str(plan), key: value}
    env.pop("L2PERSIST_MODE", None)
    p = subprocess.run([sys.executable, "-c", "print('ran'); raise SystemExit(7)"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 7 and p.stdout == "ran\n", (p.stdout, p.stderr)
    assert f"l2persist: could not start, the program runs without the plan: {words}" in \
        p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "invalid literal" not in p.stderr
