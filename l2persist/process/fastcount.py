"""The replays that only count, counted without the watcher.

While a block or a rest runs, most of the program's calls do nothing in the watcher but count
one unit: a replay of the unit's graph on the counting thread, far from the block's end. The
watcher's call costs a program about 1.6 us (Watcher.point: its lock, its phases, the graph's
flags; measured on the CPU simulator, and read on two H200s at 3f61e5f as 2.89 % of `ddp`'s
wall at 18,000 steps a second). Under torchrun that is paid on every call of the search: the
ranks must count the same calls, so their rests keep the hooks on (Pace.rest_unhooked is for
a rank alone).

So after such a call the watcher *arms* a count (:meth:`Counting.arm`): the next ``left``
replays of that graph on that thread return at once from the bootstrap's hook
(``bootstrap._on_replay``, a few attribute tests), adding one to :data:`COUNT`'s ``done``; the
call that would reach the block's (or rest's) end is left to the watcher, as is any other
call: a synchronization, another graph's replay, another thread's. The watcher's next call on
the counting thread first takes the count (:meth:`Counting.take`), so every figure it reads
(units, the graph's replays, the points) is what it would have counted itself. A call that
could switch never goes by here: the count stops one short of the end, and every state change
(a rest's begin, a settle, a pause, a switch) happens inside a watcher's call, which takes the
count first and arms again only where the same rules hold.
"""
from __future__ import annotations

import threading
import time

from .part import Part

#: Calls of the hook's branch timed once, for the hooks' own figure (hook_ns).
COST_CALLS = 2000


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
    if count.left and count.ref() is graph and threading.get_ident() == count.thread:
        count.left -= 1
        count.done += 1
        return True
    return False


def cost_ns() -> float:
    """What the hook's branch costs a call here (ns): COST_CALLS calls on a count of their
    own, timed once."""
    class Probe:
        pass
    g, c = Probe(), FastCount()
    c.arm(COST_CALLS, lambda: g, threading.get_ident(), None)
    t0 = time.perf_counter_ns()
    for _ in range(COST_CALLS):
        counted(g, c)
    return (time.perf_counter_ns() - t0) / COST_CALLS


class Counting(Part):
    """The watcher's side: takes the count before its own call reads anything, and arms it
    after a call that only counted, where the next calls can only count too."""

    def __init__(self, owner, count: FastCount = COUNT):
        super().__init__(owner)
        self.count = count
        self.ns = None              # cost_ns(), once first armed
        self.calls = 0              # calls counted here, in all

    def take(self) -> None:
        """On the counting thread, before the watcher's call reads any count: what the armed
        count took is added as the watcher would have counted it (a unit each, the graph's
        replays, the replay points; the hooks' figure at the branch's measured cost)."""
        if not self.count.left and not self.count.done:
            return
        done, seen = self.count.disarm()
        if not done:
            return
        w = self.w
        w.units_now += done
        w.points["replay"] += done
        if seen is not None:
            seen.replays += done
        w.hook_calls += done
        w.hook_ns += done * (self.ns or 0.0)
        self.calls += done

    def arm(self, kind: str, torch_graph, seen, me: int) -> None:
        """After a call that switched nothing (under the lock): arm the count for the next
        replays of the same graph on the same thread, up to one short of the block's or the
        rest's end, where each of them would only count a unit."""
        if not self.only_counting(kind, torch_graph, seen, me):
            return
        w = self.w
        r = w.resting
        end = r["units"] if r is not None else w.units_per_block
        left = end - w.units_now - 1
        if left < 1:
            return
        if self.ns is None:
            self.ns = cost_ns()
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
