"""The race between a capture that begins on another thread and a switch in progress, on the
simulator, with the core's lock protocol played by threads (issue 50 item 3).

The core (csrc/core/l2p_capture.h) counts a capture open at its begin's entry, after waiting
out a switch in progress, and refuses a switch while one is open. Here the fixture's switch
lock is replaced by that protocol on a threading.Condition, and another library's thread
opens and closes captures as fast as it can while the program's thread replays its graphs
(point-driven switches), or launches eager kernels while the watcher's clock ticks
(clock-driven switches). Every device call the
simulated GPU sees while a capture is open is recorded (World.violations). The watcher must
finish its search with none: it takes the switch lock where it asks whether a capture is
open, and holds it until its call ends. Dropping that (asking the count alone) lets a capture
begin between the question and the switch, and this test fails.
"""
import threading
import time

import pytest

from l2persist import _core
from l2persist.process import clock, live

from test_live_sim_cpu import MIB, World, _watcher, world  # noqa: F401
from test_live_sim_mix_cpu import Simple, decode_graph, use


class Protocol:
    """l2p_capture's protocol: a begin waits while a switch is in, then counts the capture;
    a switch is entered only while none is open (a re-entry from the switching thread is an
    error, as in the core)."""

    def __init__(self, w: World):
        self.w = w
        self.cv = threading.Condition()
        self.switching = None          # the thread inside a switch
        self.switches = self.begins = self.waited = 0

    def enter(self):
        with self.cv:
            if self.switching == threading.get_ident():
                raise ValueError("switch_enter: this thread is inside a switch already")
            while self.switching is not None:
                self.cv.wait()
            if self.w.captures_open:
                return False
            self.switching = threading.get_ident()
            self.switches += 1
            return True

    def leave(self):
        with self.cv:
            if self.switching != threading.get_ident():
                raise ValueError("switch_leave: not inside a switch")
            self.switching = None
            self.cv.notify_all()

    def begin(self):
        with self.cv:
            if self.switching is not None:
                self.waited += 1
            while self.switching is not None:
                self.cv.wait()
            self.w.captures_open += 1
            self.begins += 1

    def end(self):
        with self.cv:
            self.w.captures_open -= 1


def _library(p: Protocol, stop: threading.Event):
    """Another library's thread: captures of ~0.2 ms, one after another."""
    while not stop.is_set():
        p.begin()
        t = time.perf_counter() + 2e-4
        while time.perf_counter() < t:
            pass
        p.end()
        time.sleep(5e-4)


@pytest.mark.parametrize("driver", ["calls", "tick"])
def test_a_capture_never_begins_inside_a_switch(world, monkeypatch, driver):
    p = Protocol(world)
    monkeypatch.setattr(_core, "switch_enter", p.enter, raising=False)
    monkeypatch.setattr(_core, "switch_leave", p.leave, raising=False)
    monkeypatch.setattr(clock, "_capturing", lambda: False)  # PyTorch's own check: not it
    use(world, Simple(world, 1.10), 7)
    # blocks long enough that the other thread's captures keep coming over a whole search on
    # a loaded machine (20 units a block gave 13 captures once, with the full suite running)
    w = _watcher(budget_s=6.0, block_units=40, max_overhead=0.0)
    # driven by the program's replays of its graphs, or (an eager program: the clock never
    # acts while the program has graphs) by the clock
    graphs = [decode_graph(b) for b in (1, 4, 8)] if driver == "calls" else []
    for g in graphs:
        w.capture_begin()
        w.capture_end(g)
    stop = threading.Event()
    lib = threading.Thread(target=_library, args=(p, stop), daemon=True)
    lib.start()
    try:
        for i in range(2_000_000):
            if driver == "calls":
                g = graphs[i % 3]
                w.point("replay", g)
                world.replay(g)
            else:
                if i % 8 == 0:
                    w.tick()
                world.eager(0)
            if w.state in ("done", "off"):
                break
    finally:
        stop.set()
        lib.join()
    assert world.violations == [], world.violations[:5]
    assert w.state == "done" and w.result is not None, w.notes
    # the race was tried: captures began while the watcher switched, some waited for it
    assert p.begins > 20 and p.switches > 20 and p.waited > 0, (p.begins, p.switches, p.waited)
