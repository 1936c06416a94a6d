"""The live watcher on simulated programs shaped like the ones it failed on (issue 50, item 9).

tests/test_live_sim_cpu.py's programs all have one fixed shape (one graph, the same kernels in
every block), and its timing model makes most arms equally right. Here, with the same simulated
GPU (World) and the real watcher and C search:

- a server whose requests each draw one of three decode graphs (batch 1 / 4 / 8, GPU time per
  replay 1 : 2.5 : 4, all reading one TABLE) at random, after an eager prefill: a block's GPU
  time per unit then counts the requests that landed in it, not the arm;
- a timing model in which the set-aside taxes the other kernels and a window's hitRatio x
  set-aside short of the table gives part of the gain, so that one arm is best;
- small true gains (1.5-3 % of the program);
- an eager program whose only syncs are implicit (no call the watcher hooks), switched from the
  watcher's own timer (Watcher.tick, called here every few kernels in its stead);
- a capture made by another library (the watcher's capture hooks never hear of it);
- verify's outcomes end to end: holds, no longer holds, a "don't" plan where an arm now helps,
  and a gain too small to call.

Records carry a key (a graph's node, an eager kernel's launch shape) and the blocks' sums come
per key too ("by_key"), for the per-signature objective. Each run is seeded. The sim's budget
is in this host's seconds, with blocks back to back (the search's caps are the core's defaults);
BUDGET_S is what the tests give it, about three times what 120 blocks take here.
"""
import json
import random

import pytest

from l2persist import _core
from l2persist.process import clock, live, switcher

from test_live_sim_cpu import (EAGER_IN, MIB, SMALL, TABLE, ProgramGraph, World,  # noqa: F401
                               _watcher, run_program, world)

BUDGET_S = 6.0                     # the sim's budget (seconds of this host's wall, blocks
                                   # back to back: 120 blocks of the server take ~1.7 s)
REAL_CAPTURING = clock._capturing   # the watcher's own check (the fixture replaces it)
SEEDS = [11, 12, 13, 14, 15]
BATCHES = (1, 4, 8)
SCALE = {1: 1.0, 4: 2.5, 8: 4.0}   # a decode replay's GPU time, relative to batch 1's
GATHER_NS, OTHER_NS = 100_000.0, 40_000.0   # batch 1's two kernels
PREFILL_NS = 200_000.0             # the eager prefill, one a request
STEPS = 4                          # decode replays a request
DRIFT = 0.05                       # the noisy world's per-request drift (relative sd)


def decode_graph(batch, table_bytes=8 * MIB):
    """A decode graph for one batch size: k_gather reads TABLE (shared by all batch sizes),
    k_other a small buffer; launch shapes differ by batch, so each is its own signature."""
    g = ProgramGraph()
    kernels = [(0, "k_gather", (128 * batch, 1, 1), (256, 1, 1), 0, 2),
               (1, "k_other", (64 * batch, 1, 1), (128, 1, 1), 0, 1)]
    records = [(TABLE, table_bytes, 1), (SMALL, MIB, 1)]
    uses = [(0, 0, 0, TABLE, 0), (0, 1, 8, SMALL, 1), (1, 0, 0, SMALL, 1)]
    g.scan, g.kernels, g.batch, g.table_bytes = (kernels, records, uses), kernels, batch, \
        table_bytes
    return g


def program_gain_to_kernel(p):
    """The table kernels' speedup that makes the average request p times faster (the
    request: a prefill and STEPS decode replays of a batch drawn evenly)."""
    steps = STEPS * sum(SCALE.values()) / len(SCALE)
    total = PREFILL_NS + steps * (GATHER_NS + OTHER_NS)
    gather = steps * GATHER_NS
    return gather / (total / p - (total - gather))


class Simple:
    """The old world's rule per graph: the table kernel is `gain` faster with a window over
    the table (any hitRatio) and 8 MiB set aside; nothing else changes."""

    def __init__(self, world, gain):
        self.w, self.gain = world, gain

    def kernel_ns(self, graph, node, name):
        s = SCALE[graph.batch]
        if name != "k_gather":
            return OTHER_NS * s
        win = self.w.graph_windows.get((id(graph), node))
        if (win is not None and self.w.limit >= 8 * MIB and win.hit_ratio > 0
                and win.hit_prop == "persisting" and win.base <= TABLE < win.base + win.nbytes):
            return GATHER_NS * s / self.gain
        return GATHER_NS * s

    def eager_ns(self, stream):
        return PREFILL_NS


class TradeOff:
    """Set-aside and hitRatio trade off: the table (12 MiB) gains `gain` in the share f of it
    that persists, f = min(hitRatio x window bytes over it, set-aside) / table bytes; every
    kernel's part that does not persist pays a tax that grows with the set-aside (`tax` at
    the device's maximum, 30 MiB), as written lines lose L2 to it."""

    def __init__(self, world, gain=1.10, tax=0.08, max_aside=30 * MIB):
        self.w, self.gain, self.tax, self.max_aside = world, gain, tax, max_aside

    def persisting_share(self, limit, wins, table_bytes):
        held = 0.0
        for win in wins:
            if win is None or win.hit_prop != "persisting":
                continue
            lo, hi = max(win.base, TABLE), min(win.base + win.nbytes, TABLE + table_bytes)
            if hi > lo:
                held += win.hit_ratio * (hi - lo)
        return min(1.0, min(held, limit) / table_bytes)

    def times(self, limit, win, batch, table_bytes):
        """(gather ns, other ns) of one replay under set-aside `limit` and table window `win`."""
        s, t = SCALE[batch], self.tax * limit / self.max_aside
        f = self.persisting_share(limit, [win], table_bytes)
        gather = GATHER_NS * s / (1 + (self.gain - 1) * f) * (1 + t * (1 - f))
        return gather, OTHER_NS * s * (1 + t)

    def kernel_ns(self, graph, node, name):
        g, o = self.times(self.w.limit, self.w.graph_windows.get((id(graph), 0)), graph.batch,
                          graph.table_bytes)
        return g if name == "k_gather" else o

    def eager_ns(self, stream):
        return PREFILL_NS * (1 + self.tax * self.w.limit / self.max_aside)

    def request_ns(self, watcher, arm, table_bytes):
        """The model's mean request under one of the watcher's arms, installed as it would."""
        a = watcher.arms[arm]
        limit = watcher.default_limit if a["set_aside"] is None else a["set_aside"]
        win = None
        for ti, hit, hp, mp in a["windows"]:
            t = watcher.targets[ti]
            if t.address == TABLE:
                win = switcher._window(t.address, t.size, hit, hp, mp)
        steps = 0.0
        for b in BATCHES:
            steps += sum(self.times(limit, win, b, table_bytes)) * STEPS / len(BATCHES)
        return PREFILL_NS * (1 + self.tax * limit / self.max_aside) + steps


def use(world, model, seed):
    world.rng = random.Random(seed)
    world.kernel_ns = model.kernel_ns
    world.eager_kernel_ns = model.eager_ns
    return model


def serve(world, w, seed, mix="random", table_bytes=8 * MIB, drift=0.0, requests=3_000_000):
    """The server: capture a decode graph per batch size, then per request an eager prefill,
    STEPS replays of one graph (drawn at random, or in turn), and a sync at its end. drift:
    each request's kernels all run slower or faster by this much (relative sd), as beside a
    neighbour on the device."""
    rng = random.Random(1000 + seed)
    model_ns = world.kernel_ns, world.eager_kernel_ns
    if drift:
        world.kernel_ns = lambda *a: model_ns[0](*a) * world.factor
        world.eager_kernel_ns = lambda *a: model_ns[1](*a) * world.factor
    graphs = [decode_graph(b, table_bytes) for b in BATCHES]
    for g in graphs:
        w.capture_begin()
        world.captures_open += 1
        world.captures_open -= 1
        w.capture_end(g)
    for i in range(requests):
        g = rng.choice(graphs) if mix == "random" else graphs[i % len(graphs)]
        world.factor = 1 + rng.gauss(0, drift) if drift else 1.0
        world.eager(0)                           # the prefill
        for _ in range(STEPS):
            w.point("replay", g)
            world.replay(g)
        w.point("sync")
        world.synchronize()
        if w.state in ("done", "off"):
            break
    return graphs


def covers_table(w, arm):
    return any(w.targets[t].address == TABLE for t, *_ in w.arms[arm]["windows"]) \
        if "_located" not in w.arms[arm] else \
        any(base <= TABLE < base + n for base, n, _ in w.arms[arm]["_located"].values())


def server_watcher(**kw):
    """Blocks of 20 units back to back (max_overhead 0: the pace and its rests are
    test_live_sim_cpu.py's; here the budget is counted in blocks' worth of time)."""
    o = dict(budget_s=BUDGET_S, block_units=20, max_overhead=0.0)
    o.update(kw)
    return _watcher(**o)


# ---- 1. a random request mix --------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_mix_gets_helps_where_the_table_gains(world, seed):
    """Three decode graphs drawn at random per request: a true gain of 1.028x on the table's
    kernels (1.7 % of the program) is found, decided within the budget, with an arm whose
    windows cover the table. (The issue's copy of the simulator: "don't", 5 runs of 5.)"""
    use(world, Simple(world, 1.028), seed)
    w = server_watcher()
    serve(world, w, seed)
    r = w.result
    assert w.state == "done" and r is not None, w.notes
    assert r["helps"] and r["decided"], f"{r} {w.notes}"
    assert covers_table(w, w.final_arm), w.arms[w.final_arm]
    assert 1.01 < r["speedup"] < 1.03, r


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_mix_gets_dont_where_nothing_helps(world, seed):
    """The same server where no arm changes anything: "don't", decided within the budget (not
    the budget's or the confirmation cap's "don't")."""
    use(world, Simple(world, 1.0), seed)
    w = server_watcher()
    serve(world, w, seed)
    r = w.result
    assert w.state == "done" and r is not None, w.notes
    assert not r["helps"] and r["decided"], f"{r} {w.notes}"
    assert w.arms[w.final_arm]["windows"] == []


# ---- 2. set-aside levels and hit ratios trade off: one arm is best ------------------------

@pytest.mark.parametrize("mix", ["fixed", "random"])
def test_the_advice_is_the_best_arm_where_set_aside_and_hit_ratio_trade_off(world, mix):
    """A 12 MiB table: at the smallest set-aside level (8 MiB) its window persists two thirds
    of it; the middle level (15 MiB) holds it whole; the largest (30 MiB) holds it whole and
    taxes every other kernel twice as much; windows over all buffers at once spread the
    hitRatio thin. By the model the middle level's table window is best by 1.5 % over the
    next; the advice is that arm, or within 1 % of it by the model."""
    table = 12 * MIB
    m = use(world, TradeOff(world), 21)
    w = server_watcher()
    serve(world, w, 21, mix=mix, table_bytes=table)
    r = w.result
    assert w.state == "done" and r is not None and r["helps"], f"{r} {w.notes}"
    model = [m.request_ns(w, a, table) for a in range(len(w.arms))]
    best = min(model)
    ranked = sorted(model)
    assert ranked[1] > 1.01 * best, ranked            # the model has one best arm
    assert model[w.final_arm] <= 1.01 * best, (w.arms[w.final_arm], model[w.final_arm], best,
                                               w.arms[model.index(best)])


# ---- 3. small true gains within the budget ------------------------------------------------

@pytest.mark.parametrize("gain", [1.015, 1.02, 1.03])
@pytest.mark.parametrize("mix", ["fixed", "random"])
def test_small_true_gains_are_found_within_the_budget(world, gain, mix):
    """A gain of 1.5-3 % on the whole program (the table's kernels 2-5 % faster): "helps",
    decided within the budget, the speedup within 1 % of the truth."""
    use(world, Simple(world, program_gain_to_kernel(gain)), 31)
    w = server_watcher()
    serve(world, w, 31, mix=mix)
    r = w.result
    assert w.state == "done" and r is not None, w.notes
    assert r["helps"] and r["decided"], f"{r} {w.notes}"
    assert covers_table(w, w.final_arm)
    assert abs(r["speedup"] / gain - 1) < 0.01, (r["speedup"], gain)


# ---- 4. implicit syncs only: the watcher's timer switches ---------------------------------

NO_TICK = not hasattr(live.Watcher, "tick")


def tick_driven(world, w, calls=400_000, every=8, capture=None):
    """An eager program that makes no call the watcher hooks: a kernel, an implicit sync now
    and then (torch.bincount, .item(): the host waits, nothing Python-visible), and the
    watcher's timer in its stead every `every` kernels. capture(i): whether another library
    holds a capture open around kernel i (its kernels are captured, not run)."""
    for i in range(calls):
        inside = capture is not None and capture(i)
        assert not world.switching, "a switch was left open"   # a capture would wait on it
        if inside and not world.captures_open:
            world.captures_open += 1
        elif not inside and world.captures_open:
            world.captures_open -= 1
        if not inside:
            world.eager(0)
            if i % 16 == 15:
                world.synchronize()
        if i % every == 0:
            w.tick()
        if w.state in ("done", "off"):
            break
    world.captures_open = 0


@pytest.mark.xfail(NO_TICK, strict=False, reason="timer switching not yet in")
def test_an_eager_program_with_only_implicit_syncs_gets_advice(world):
    """No replay, no sync, no mark reaches the watcher: its timer (tick) alone starts it,
    ends the warm-up, cuts blocks and switches, and the stream window on the eager kernel's
    input that this world rewards (1.25x) is the advice."""
    world.rng = random.Random(41)
    world.eager_gain = 1.25
    w = _watcher(budget_s=BUDGET_S, max_overhead=0.0)
    tick_driven(world, w)
    r = w.result
    assert not any(w.points.get(k) for k in ("replay", "sync", "mark")), w.points
    assert w.state == "done" and r is not None, w.notes
    assert r["helps"] and r["decided"], f"{r} {w.notes}"
    win = world.stream_win.get(0)
    assert win is not None and win.base == EAGER_IN and win.hit_prop == "streaming"


# ---- 5. a capture another library made -----------------------------------------------------

def foreign_capture(i):
    return i % 400 >= 360          # one kernel in ten, in stretches of 40


@pytest.mark.parametrize("driver", ["calls", "tick"])
def test_nothing_is_switched_while_another_library_captures(world, monkeypatch, driver):
    """Another library (CuPy, XLA, a raw driver call) opens captures the watcher's hooks never
    hear of; the core counts every capture from CUDA's callbacks (_core.captures_open and its
    switch lock, here the world's count: the fixture's), and the watcher's own check is its
    real one (PyTorch's current stream is not the one capturing). While one is open nothing is synchronized, set aside or
    windowed (the sim's device records each such call), whether the watcher is driven by the
    program's calls or by its timer; the search still decides."""
    monkeypatch.setattr(clock, "_capturing", REAL_CAPTURING)   # the fixture's is the world's
    world.rng = random.Random(51)
    if driver == "tick":
        if NO_TICK:
            pytest.xfail("timer switching not yet in")
        world.eager_gain = 1.25
        w = _watcher(budget_s=BUDGET_S, max_overhead=0.0)
        tick_driven(world, w, every=2, capture=foreign_capture)
    else:
        use(world, Simple(world, 1.10), 51)
        w = server_watcher()
        g = decode_graph(1)
        w.capture_begin()
        w.capture_end(g)
        for i in range(3_000_000):
            inside = foreign_capture(i)
            world.captures_open = int(inside)
            w.point("replay", g)           # the program's replays go on beside the capture
            world.replay(g)
            if w.state in ("done", "off"):
                break
        world.captures_open = 0
    assert world.violations == [], world.violations[:5]
    assert not any("failed" in n for n in w.notes), w.notes
    assert w.state == "done" and w.result["helps"], (w.result, w.notes)


# ---- 6. verify's outcomes end to end -----------------------------------------------------

def _exit_of(doc, plan):
    """The CLI's reading of a verify result document, where it is a pure function."""
    from l2persist.cli import live as cli
    fn = getattr(cli, "verify_outcome", None)
    return fn(doc, plan, _core.live_defaults()["min_gain"]) if fn is not None else None


def _advise_plan(world, tmp_path, model, seed):
    """A plan from advise on the fixed mix (where advise decides today)."""
    use(world, model, seed)
    w = server_watcher()
    serve(world, w, seed, mix="fixed")
    assert w.state == "done" and w.result is not None, w.notes
    plan = w.make_plan()
    w.restore()
    world.graph_windows.clear()
    world.windows.clear()
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return plan, path


def _verify(world, tmp_path, path, model, seed, drift=0.0, **kw):
    use(world, model, seed)
    v = server_watcher(mode="verify", result=str(tmp_path / "result.json"), **kw)
    v.load_plan(str(path))
    serve(world, v, seed, drift=drift)         # the random mix
    assert v.state == "done", v.notes
    doc = json.loads((tmp_path / "result.json").read_text())
    return v, doc


def test_verify_says_a_valid_plan_holds_under_a_random_mix(world, tmp_path):
    """A plan that helps (the table's kernels 1.10x, ~6 % of the program), verified on the
    random mix in a fresh watcher: it holds (the issue's copy: "no longer holds", 3 of 3)."""
    plan, path = _advise_plan(world, tmp_path, Simple(world, 1.10), 61)
    assert plan["verdict"] == "helps"
    v, doc = _verify(world, tmp_path, path, Simple(world, 1.10), 62)
    r = doc["result"]
    assert v.applied_sigs and r["helps"] and r["decided"], f"{r} {v.notes}"
    assert 1.03 < r["speedup"] < 1.09, r
    out = _exit_of(doc, plan)
    assert out is None or out[0] == 0, out


def test_verify_says_a_plan_no_longer_holds_where_the_world_changed(world, tmp_path):
    """The same plan, verified where the table no longer gains and the set-aside taxes the
    other kernels (25 % at the maximum, pro rata: the plan's 8-30 MiB costs the program 3-15 %
    even where the table's window spares its kernels): the plan is slower than the better
    baseline, and the result says so."""
    plan, path = _advise_plan(world, tmp_path, Simple(world, 1.10), 63)
    assert plan["verdict"] == "helps"
    v, doc = _verify(world, tmp_path, path, TradeOff(world, gain=1.0, tax=0.25), 64)
    r = doc["result"]
    assert not r["helps"], f"{r} {v.notes}"
    assert r["ci_high"] < 1.0, str(r)
    out = _exit_of(doc, plan)
    assert out is None or out[0] == 1, out


def test_verify_of_a_dont_plan_says_where_an_arm_now_helps(world, tmp_path):
    """A "don't" plan (advised where nothing helped), verified where a window on the table now
    gives the table's kernels 1.25x: the plan is not checked against itself (its arms would
    be limit 0, the default and the default again); verify's short search finds the arm that
    helps, and the result names it."""
    plan, path = _advise_plan(world, tmp_path, Simple(world, 1.0), 65)
    assert plan["verdict"] == "dont"
    v, doc = _verify(world, tmp_path, path, Simple(world, 1.25), 66)
    r = doc["result"]
    assert r["helps"] and r["speedup"] > 1.05, f"{r} {v.notes}"
    assert r["winner"] >= 0 and covers_table(v, r["winner"]), (r, v.arms)
    out = _exit_of(doc, plan)
    assert out is None or out[0] == 1, out


def test_verify_of_a_gain_too_small_to_call_is_inconclusive(world, tmp_path):
    """A valid plan verified where its gain is the smallest worth having (min_gain of the
    program) and each request's GPU time moves by DRIFT (a neighbour on the device): the
    interval at the end holds both "helps" (past 1 + min_gain) and "does not help" (below
    it). The result must neither say that the plan holds nor that it slows the program, and
    its numbers must show the straddle."""
    gain = 1.0 + _core.live_defaults()["min_gain"]
    plan, path = _advise_plan(world, tmp_path, Simple(world, 1.10), 67)
    assert plan["verdict"] == "helps"
    v, doc = _verify(world, tmp_path, path, Simple(world, program_gain_to_kernel(gain)), 68,
                     drift=DRIFT, budget_s=2.0)
    r = doc["result"]
    assert r["ci_low"] < gain < r["ci_high"] and not r["slows"], str(r)
    out = _exit_of(doc, plan)
    if out is None:                 # no CLI reading yet: the core's verdict must not say helps
        assert not r["helps"], str(r)
    else:
        assert out[0] == 3, (out, r)


# ---- 6. a setup that outlasts the warm-up --------------------------------------------------

OWN_STREAM = 0x7F00      # a stream the program made (no window is set on it)


def setup_then_graph(world, w, setup_s, eager_in_setup, replays=3_000_000, until=None,
                     sync_after_capture=False, setup_stream=0):
    """A program whose setup (a compile, a model's load) outlasts the warm-up: one kernel
    first (its context), then for setup_s only the watcher's timer reaches it (with an eager
    kernel now and then where eager_in_setup: a compile's own launches), then it captures its
    graph and replays it, each replay hooked (``until``: the setup ends as soon as it holds).
    (The H200 zoo at 6bbbe74: a graphed training step and torch.compile's graphs stopped with
    "the probe recorded no kernel".)"""
    import time
    world.eager(0)
    t_end, i = time.perf_counter() + setup_s, 0
    while time.perf_counter() < t_end and not (until is not None and until()):
        if eager_in_setup:
            world.eager(setup_stream)
            if i % 16 == 15:
                world.synchronize()
        if i % 8 == 0:
            w.tick()
        i += 1
        time.sleep(0.0002)
    return run_program(world, w, replays,     # test_live_sim_cpu's: capture, then replay
                       sync_after_capture=sync_after_capture)


def test_a_setup_without_kernels_is_probed_again_until_the_graphs_run(world):
    """Empty probes begin again (no search is started on them), and the search begins at the
    graph's replays and finds the table's window the world rewards."""
    world.rng = random.Random(61)
    world.gain = 1.25
    w = _watcher(budget_s=BUDGET_S, max_overhead=0.0)
    setup_then_graph(world, w, 1.2, eager_in_setup=False)
    r = w.result
    assert w.state == "done" and r is not None and r["decided"], w.notes
    assert w.empty_probes >= 2 and not +w.restarts, (w.empty_probes, w.notes)
    assert w.unit[0] == "replay" and r["helps"], (w.unit, r, w.notes)
    assert covers_table(w, w.final_arm) and 0 in world.windows    # installed on the node


@pytest.mark.parametrize("sync_after_capture", [False, True])
def test_graphs_after_a_search_on_the_clock_restart_it_and_get_their_windows(world,
                                                                             sync_after_capture):
    """A setup with kernels of its own: the search begins on the clock's tick, then the
    program captures its graph. The search begins again at the graph's replays (once), and the
    new arms' windows land on the graph's nodes (the switcher finds the graphs again). A sync
    between the capture and the first replay does not stop it (the H200 zoo's graphed training
    step at c67a953 did)."""
    world.rng = random.Random(62)
    world.gain = 1.25
    w = _watcher(budget_s=BUDGET_S, max_overhead=0.0)
    setup_then_graph(world, w, 10.0, eager_in_setup=True,
                     until=lambda: w.state == "search" and w.unit == ("tick",) and
                     len(w.blocks) >= 4, sync_after_capture=sync_after_capture,
                     setup_stream=OWN_STREAM)
    assert w.state != "idle" and w.points["tick"], "the clock never started the watcher"
    # the setup's probe said its kernels ran on a stream of the program's own; that was not
    # the program advised at the end, so the note went with the restart
    assert not any("the program made itself" in n for n in w.notes), w.notes
    r = w.result
    assert w.restarts == {"graphs": 1} and any("began again at its graphs' replays" in n
                                   for n in w.notes), w.notes
    assert w.state == "done" and r is not None and r["decided"], w.notes
    assert w.unit[0] == "replay" and r["helps"], (w.unit, r, w.notes)
    assert covers_table(w, w.final_arm) and 0 in world.windows    # installed on the node
