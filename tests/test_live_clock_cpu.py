"""The watcher's clock runs only while the program needs it (process/clock.py: start, quiet).

A tick costs the program's thread the GIL 200 times a second. Where the probe finds that the
program's own calls (its replays, syncs, marks) come often enough to be the unit, every switch
point is one of them and the clock's thread stops; where the ticks are the unit (implicit
syncs only) it keeps ticking; a search that begins again starts a stopped clock again. Driven on
the simulator of tests/test_live_sim_cpu.py, with a real clock thread whose ticks do nothing
(the simulator's ticks are driven by hand)."""
import time
import types

from l2persist.process import clock

from test_live_sim_cpu import ProgramGraph, _watcher, run_program, world  # noqa: F401
from test_live_sim_mix_cpu import Simple, use


def _idle_clock(period_s=0.001):
    return clock.Clock(lambda: True, period_s).start()


def _ended(c, timeout=10.0):
    c.thread.join(timeout)
    return not c.thread.is_alive()


def _until(cond, timeout=10.0):
    """Poll for `cond` (a loaded CI host may run a 2 ms clock at a tenth of its pace)."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            return False
        time.sleep(0.002)
    return True


def test_the_clock_stops_once_the_programs_replays_are_the_unit(world):  # noqa: F811
    world.gain = 1.25
    w = _watcher()
    w.clock = _idle_clock()
    run_program(world, w)
    assert w.unit[0] == "replay" and w.state == "done", (w.unit, w.notes)
    assert w.clock_quiet and not w.clock.running and _ended(w.clock)
    s = w.summary()
    assert s["clock"]["quiet"] is True and s["clock"]["ticks"] > 0, s["clock"]


def test_the_clock_keeps_ticking_where_its_ticks_are_the_unit(world):  # noqa: F811
    use(world, Simple(world, 1.10), 7)
    w = _watcher(budget_s=3.0, block_units=20, max_overhead=0.0)
    w.clock = _idle_clock()
    try:
        t0, i = time.perf_counter(), 0
        while time.perf_counter() - t0 < 20 and w.state != "search":
            if i % 8 == 0:
                w.tick()
            world.eager(0)
            i += 1
        assert w.state == "search" and w.unit == ("tick",), (w.state, w.unit, w.notes)
        assert not w.clock_quiet and w.clock.running and w.clock.thread.is_alive()
    finally:
        w.clock.stop()


def _owner(world=1, mode="advise"):  # noqa: F811
    return types.SimpleNamespace(clock=None, clock_quiet=False, tick=lambda: True,
                                 o=types.SimpleNamespace(world=world, mode=mode))


def test_a_quiet_clock_starts_again_with_its_ticks_and_period(monkeypatch):
    monkeypatch.setattr(clock, "tracking", lambda: True)
    w = _owner()
    clock.start(w)
    first = w.clock
    assert first is not None and first.running
    clock.start(w)                              # idempotent
    assert w.clock is first
    assert _until(lambda: first.ticks > 0)
    first.hold(5.0)
    first.hold(0)
    clock.quiet(w)
    assert w.clock_quiet and _ended(first)
    ticks, held = first.ticks, first.held_s
    clock.start(w, again=True)                  # a search that begins again
    try:
        assert w.clock is not first and w.clock.running and not w.clock_quiet
        assert w.clock.ticks >= ticks and w.clock.held_s == held
        assert w.clock.period_s == first.period_s
    finally:
        w.clock.stop()


def test_a_search_begun_again_starts_its_quiet_clock_and_ends_its_hold(world):  # noqa: F811
    world.gain = 1.25
    w = _watcher()
    w.clock = _idle_clock()
    g = ProgramGraph()
    w.capture_begin()
    w.capture_end(g)
    t0 = time.monotonic()
    while w.state != "search" and time.monotonic() - t0 < 20:
        w.point("replay", g)
        world.replay(g)
    assert w.state == "search" and w.clock_quiet and _ended(w.clock)
    w.tick = lambda: True          # the restarted clock's ticks: nothing (the test drives)
    arms, targets = list(w.arms), list(w.targets)
    w.search.restart("the program's work changed", "work")
    try:
        assert w.state == "warmup" and w.clock.running and not w.clock_quiet
        assert _until(lambda: w.clock.ticks > 0)
    finally:
        w.clock.stop()
    # a rest's hold under way ends with a restart (its timer cancelled)
    held = []
    w.clock = types.SimpleNamespace(hold=held.append, running=True)
    w.arms, w.targets, w.state = arms, targets, "search"
    w.rest_timer = types.SimpleNamespace(cancel=lambda: None)
    w.search.restart("again", "work")
    assert held == [0] and w.rest_timer is None


def test_no_clock_where_none_may_run_and_none_made_again(monkeypatch):
    monkeypatch.setattr(clock, "tracking", lambda: True)
    for w in (_owner(world=2), _owner(mode="apply")):
        clock.start(w)
        assert w.clock is None                  # ranks switch together; apply never switches
    monkeypatch.setattr(clock, "tracking", lambda: False)
    w = _owner()
    clock.start(w)
    assert w.clock is None                      # a core that does not count captures
    monkeypatch.setattr(clock, "tracking", lambda: True)
    clock.quiet(w)                              # a watcher driven by hand: nothing to stop
    clock.start(w, again=True)
    assert w.clock is None and not w.clock_quiet   # no clock went quiet: none ran


def test_a_hold_skips_the_ticks_of_its_stretch_and_ends_early_on_request():
    ticks = []
    c = clock.Clock(lambda: ticks.append(time.monotonic()), period_s=0.002).start()
    try:
        assert _until(lambda: len(ticks) >= 3)      # ticking
        c.hold(30.0)
        t0 = time.monotonic()
        time.sleep(0.2)
        during = [t for t in ticks if t > t0 + 0.05]
        assert during == [], during             # none in the hold (a tick under way aside)
        n = len(ticks)
        c.hold(0)                               # over early: ticks again
        t1 = time.monotonic()
        assert _until(lambda: len(ticks) > n + 2)
        assert 0 < c.held_s <= time.monotonic() - t0   # only the time actually held
        c.hold(30.0)
        t2 = time.monotonic()
        c.stop()                                # a stop ends a hold under way at once
        assert time.monotonic() - t2 < 5.0 and not c.thread.is_alive()
        assert t1 > t0
    finally:
        c.stop()


def test_an_unhooked_rest_holds_the_clock_until_its_gate_opens(world, monkeypatch):  # noqa: F811
    from l2persist.process import pace as _pace
    monkeypatch.setattr(_pace, "REST_GATE_MAX_S", 60.0)
    timers = []

    class Timer:                   # the rest's timer, fired by the test (never by itself)
        def __init__(self, secs, fn, args=()):
            self.secs, self.fn, self.args, self.daemon = secs, fn, args, True
            timers.append(self)

        def start(self):
            pass

        def cancel(self):
            pass
    monkeypatch.setattr(_pace.threading, "Timer", Timer)
    w = _watcher(block_units=20)
    w.rest_hooks = (lambda: None, lambda: None)
    w.rest_s, w.state = 0.05, "search"
    w.clock = _idle_clock(period_s=0.002)
    try:
        r = {"units": 400}
        w.resting = r
        t0 = time.monotonic()
        w.pace.rest_unhooked(r)
        off = timers[0].secs
        assert r.get("unhooked") and off > 5
        assert w.clock._hold_until >= t0 + off - 0.5    # held for the gate's closed time
        ticks = w.clock.ticks
        time.sleep(0.1)
        assert w.clock.ticks <= ticks + 1          # held (a tick under way aside)
        timers[0].fn(*timers[0].args)              # the timer's end: the gate open, ticks on
        assert r["tail_due"] and w.clock._hold_until == 0.0
        assert _until(lambda: w.clock.ticks >= ticks + 3)
    finally:
        w.clock.stop()


def test_a_stopped_clock_holds_nothing_and_counts_no_held_time():
    c = clock.Clock(lambda: True, period_s=0.002).start()
    c.stop()
    c.hold(3.0)
    assert c.held_s == 0.0 and c._hold_until == 0.0
