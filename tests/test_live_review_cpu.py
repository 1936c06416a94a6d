"""Regressions found by review of the watcher's clock and switch lock, on the simulator.

- after the decision, the after-decision timing's synchronizations still ask the core's
  capture count (ending the count at the decision let one run inside another library's
  capture);
- a graph captured once and dropped does not keep the clock from acting for good;
- at an exit during the probe (the launch log on), the set-aside is put back inside the switch
  lock (stopping the log let it go before the put-back).
"""
import gc
import time

from l2persist import _core
from l2persist.process import clock

from test_live_sim_cpu import ProgramGraph, _watcher, world  # noqa: F401
from test_live_sim_mix_cpu import Simple, decode_graph, use


def test_the_after_decision_timing_waits_for_another_librarys_capture(world, monkeypatch):
    monkeypatch.setattr(clock, "_capturing", lambda: False)   # not PyTorch's: the core's count
    use(world, Simple(world, 1.10), 7)
    w = _watcher(budget_s=6.0, block_units=20, max_overhead=0.0)
    w.clock_tracking = True        # the clock armed: captures counted by the core
    graphs = [decode_graph(b) for b in (1, 4, 8)]
    for g in graphs:
        w.capture_begin()
        w.capture_end(g)
    i = 0
    while w.state not in ("done", "off"):
        g = graphs[i % 3]
        i += 1
        w.point("replay", g)
        world.replay(g)
    assert w.state == "done" and w._after is not None and not w.tracking_ended
    world.captures_open = 1        # another thread's capture (CuPy's, XLA's) opens now
    for j in range(400):
        g = graphs[(i + j) % 3]
        w.point("replay", g)
        world.replay(g)
    assert world.violations == [], world.violations[:3]
    world.captures_open = 0        # closed: the timing ends, and then the count
    for j in range(2000):
        if w._after is None:
            break
        g = graphs[j % 3]
        w.point("replay", g)
        world.replay(g)
    assert w._after is None and w.tracking_ended and w.after_decision, w.notes


def test_a_dropped_graph_does_not_stop_the_clock(world):
    use(world, Simple(world, 1.10), 7)
    w = _watcher(budget_s=3.0, block_units=20, max_overhead=0.0)
    g = decode_graph(1)            # captured once at start-up (a warm-up check), then dropped
    w.capture_begin()
    w.capture_end(g)
    del g
    gc.collect()
    t0, i = time.perf_counter(), 0
    while time.perf_counter() - t0 < 20 and w.state not in ("done", "off"):
        if i % 8 == 0:
            w.tick()
        world.eager(0)
        i += 1
    assert w.state == "done" and w.points["tick"] > 0, (w.state, w.points, w.notes)


def test_an_exit_in_the_probe_puts_back_inside_the_switch_lock(world, monkeypatch):
    seen = []
    monkeypatch.setattr(_core, "reset_persisting_l2", lambda dev: seen.append(world.switching))
    w = _watcher(warmup_s=0.01)
    g = ProgramGraph()
    w.capture_begin()
    w.capture_end(g)
    while w.state != "probe":
        w.point("replay", g)
        world.replay(g)
    w.point("replay", g)
    world.replay(g)
    assert w.logging               # the launch log is on: stopping it lets the lock go
    w.finish()
    assert seen and all(seen), seen
    assert not world.switching     # and it is given back
