"""The replays that only count, counted without the watcher.

While a block or a rest runs, most of the program's calls do nothing in the watcher but count
one unit: a replay of the unit's graph on the counting thread, far from the block's end. The
watcher's call costs a program 1.6-2.1 us (Watcher.point: its lock, its phases, the graph's
flags; measured on the CPU simulator, and read on two H200s at 3f61e5f as 2.89 % of `ddp`'s
wall at 18,000 steps a second). Under torchrun that is paid on every call of the search: the
ranks must count the same calls, so their rests keep the hooks on (Pace.rest_unhooked is for
a rank alone).

So after such a call the watcher *arms* a count (:meth:`Counting.arm`): the next ``left``
replays of that graph on that thread return at once from the bootstrap's hook
(``bootstrap._on_replay``, a few attribute tests), adding one to :data:`COUNT`'s ``done``; the
call that would reach the block's (or rest's) end is left to the watcher, as is any other
call: a synchronization, another graph's replay, another thread's. The watcher's next call,
and a capture's begin and end, first take the count (:meth:`Counting.take`), so every figure
it reads (units, the graph's replays, the points) is what it would have counted itself. A call
that could switch never goes by here: the count stops one short of the end, and every state
change (a rest's begin, a settle, a pause, a switch, a capture) happens inside one of those,
which takes the count first; the watcher arms again only where the same rules hold.

Where the count keeps coming back empty (a program whose replays alternate with syncs or other
graphs: the zoo's `server` and `decode_big` rotate their graphs), arming is the cost, so it
backs off: after IDLE_ARMS empty counts in a row it skips its next SKIP_FIRST chances, then
twice as many each time, up to SKIP_MAX, until a count comes back with calls in it. Arming
never changes a count, only who counts it, so ranks in lockstep stay in step whatever each
one's count does.
"""
from __future__ import annotations

import threading
import time

from .part import Part

#: Calls of the hook's branch timed (COST_BATCHES batches, the fastest kept), when the
#: watcher is made: the estimate of what each call the hook counts costs (hook_ns).
COST_CALLS = 400
COST_BATCHES = 5
#: The back-off of arming where counts come back empty (above).
IDLE_ARMS = 4
SKIP_FIRST = 16
SKIP_MAX = 4096


def _dead():
    return None


class FastCount:
    """The armed count, read by the bootstrap's hook on every replay: ``left`` calls still to
    count (0: disarmed), the graph (``ref()`` gives it while alive) and thread they must be of;
    ``done`` counted so far, and the watcher's record of the graph (``seen``)."""

    __slots__ = ("left", "ref", "thread", "done", "seen")

    def __init__(self):
        self.left, self.ref, self.thread, self.done, self.seen = 0, _dead, None, 0, None

    def arm(self, left: int, ref, thread: int, seen) -> None:
        self.disarm()
        self.ref, self.thread, self.seen, self.done = ref, thread, seen, 0
        self.left = left            # last: the hook reads it first

    def disarm(self) -> tuple:
        """(calls counted, the graph's record); nothing armed from here."""
        self.left = 0               # first: the hook stops counting
        done, seen = self.done, self.seen
        self.ref, self.thread, self.done, self.seen = _dead, None, 0, None
        return done, seen


#: The process's one count (the bootstrap's hook reads it; one watcher per process).
COUNT = FastCount()


def counted(graph, count: FastCount = COUNT) -> bool:
    """The hook's branch: whether this replay is one the armed count takes (then counted)."""
    # Under the GIL a take on another thread (finish at exit) can only come before the test's
    # last call (get_ident), so `count.thread` is read after it: a disarm there fails the
    # test. Without a GIL it could come between the test and the increments, leaving left -1
    # and done 1 with the graph gone: hence left > 0, not truthy, and Counting.take adds a
    # done that a disarmed count still holds.
    if count.left > 0 and count.ref() is graph and threading.get_ident() == count.thread:
        count.left -= 1
        count.done += 1
        return True
    return False


def cost_ns() -> float:
    """What the hook's branch costs a call here (ns), estimated: COST_BATCHES batches of
    COST_CALLS calls on a count of their own, the fastest batch (a preemption or a collection
    in one would inflate the figure for the whole run)."""
    class Probe:
        pass
    g, c, me = Probe(), FastCount(), threading.get_ident()
    best = None
    for _ in range(COST_BATCHES):
        c.arm(COST_CALLS, lambda: g, me, None)
        t0 = time.perf_counter_ns()
        for _ in range(COST_CALLS):
            counted(g, c)
        ns = (time.perf_counter_ns() - t0) / COST_CALLS
        best = ns if best is None else min(best, ns)
    c.disarm()
    return best


class Counting(Part):
    """The watcher's side: takes the count before its own call reads anything, and arms it
    after a call that only counted, where the next calls can only count too."""

    def __init__(self, owner, count: FastCount = COUNT):
        super().__init__(owner)
        self.count = count
        # estimated once, before the program's calls (apply never searches: nothing to count)
        self.ns = cost_ns() if getattr(owner.o, "mode", None) != "apply" else 0.0
        self.calls = 0              # calls counted here in this search (Search.restart: 0)
        self.arms = 0               # counts armed, in all
        self.idle = 0               # empty counts in a row
        self.skip = SKIP_FIRST      # chances the next back-off skips
        self.wait = 0               # chances still to skip

    def take(self) -> None:
        """Under the watcher's lock, before anything reads a count: what the armed count took
        is added as the watcher would have counted it (a unit each, the graph's replays, the
        replay points; the hooks' figure at the branch's estimated cost)."""
        if self.count.ref is _dead and not self.count.done:
            return                  # nothing armed, nothing counted
        done, seen = self.count.disarm()
        self.back_off(done)
        if done <= 0:
            return
        w = self.w
        w.units_now += done
        w.points["replay"] += done
        if seen is not None:
            seen.replays += done
        w.hook_calls += done
        w.hook_ns += done * self.ns
        self.calls += done

    def back_off(self, done: int) -> None:
        if done > 0:
            self.idle, self.skip = 0, SKIP_FIRST
            return
        self.idle += 1
        if self.idle >= IDLE_ARMS:
            self.idle, self.wait, self.skip = 0, self.skip, min(2 * self.skip, SKIP_MAX)

    def arm(self, kind: str, torch_graph, seen, me: int) -> None:
        """After a call that switched nothing (under the lock): arm the count for the next
        replays of the same graph on the same thread, up to one short of the block's or the
        rest's end, where each of them would only count a unit."""
        if self.wait:
            self.wait -= 1
            return
        if not self.only_counting(kind, torch_graph, seen, me):
            return
        w = self.w
        r = w.resting
        left = (r["units"] if r is not None else w.units_per_block) - w.units_now - 1
        if left >= 1:
            self.arms += 1
            self.count.arm(left, seen.ref, me, seen)

    def only_counting(self, kind: str, torch_graph, seen, me: int) -> bool:
        """Whether the next such calls would only count a unit (Phases.search_point): the
        search under way on this thread's replays of the unit's graph, and none of what makes
        a call do more (a settle, a rest whose hooks are off, the first block or the clock's
        loss waiting, the ranks not met, events timing each replay in the hook); alone, no
        other thread's calls (they count units too, and would read the count short)."""
        w = self.w
        if kind != "replay" or seen is None or me != w.thread or w.state != "search":
            return False
        if (w.other_threads and w.team is None) or w.team_pending or w.team_gave_up:
            return False
        if w._clock_lost or w._first_block_due or w.settling is not None:
            return False
        r = w.resting
        if w.replay_events.on or (r is not None and r.get("unhooked")):
            return False
        return w.phases.is_unit(kind, seen) and seen.ref() is torch_graph
