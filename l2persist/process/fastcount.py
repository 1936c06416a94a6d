"""The replays that only count, counted without the watcher.

While a block or a rest runs, most of the program's calls do nothing in the watcher but count
one unit: a replay of the unit's graph on the counting thread, far from the block's end. The
watcher's call costs a program 1.6-2.1 us (Watcher.point: its lock, its phases, the graph's
flags; measured on the CPU simulator, and read on two H200s at 3f61e5f as 2.89 % of `ddp`'s
wall at 18,000 steps a second). Under torchrun that is paid on every call of the search: the
ranks must count the same calls, so their rests keep the hooks on (Pace.rest_unhooked is for
a rank alone).

So after such a call the watcher *arms* a count (:meth:`Counting.arm`): the next ``left``
replays of that graph on that thread are counted before any Python runs, by the C method
installed as ``CUDAGraph.replay`` (``_core.CountedReplay`` over :data:`COUNT`, a
``_core.ReplayCount``; ``csrc/py/fastcount.c``), which adds one to the count's ``done`` and
calls the original replay. The synchronizations the watcher hooks are counted the same way
while the count is armed on their thread (``_core.CountedSync``: ``syncs``): between two
replays that only count, a sync only counts too, and where it went to the watcher it also
took the count, so the replay after it went there as well (`ddp` syncs every 100 steps: on
two H200s at 77cefa3 about 8,800 of the 9,020 calls that reached the watcher were a sync or
the replay after one, some 0.47 % of the search's wall, nine tenths of the hooks' share). The
call that would reach the block's (or rest's) end is left to the watcher, as is any other
call: another graph's replay, another thread's. The watcher's next call, and a capture's
begin and end, first take the count (:meth:`Counting.take`), so every figure it reads (units,
the graph's replays, the points) is what it would have counted itself. A call that could
switch never goes by here: the count stops one short of the end, and every state change (a
rest's begin, a settle, a pause, a switch, a capture) happens inside one of those, which takes
the count first; the watcher arms again only where the same rules hold.

The count was first kept in Python, in the bootstrap's hook: on two H200s at f0fb25a it took
0.27 us a call by its own clock and its outer frames (the replay wrapper, the hook) about as
much again; in C a counted call costs the program a few tens of nanoseconds (:func:`cost_ns`).

Where the count keeps coming back empty (a program whose replays alternate with other graphs'
replays, or with calls that reach the watcher: the zoo's `server` and `decode_big` rotate
their graphs; a hooked sync no longer empties a count), arming is the cost, so it
backs off: after IDLE_ARMS empty counts in a row it skips its next SKIP_FIRST chances, then
twice as many each time, up to SKIP_MAX, until a count comes back with calls in it. Arming
never changes a count, only who counts it, so ranks in lockstep stay in step whatever each
one's count does.
"""
from __future__ import annotations

import math
import threading
import time
import weakref

from .. import _core
from .part import Part

#: Calls timed (COST_BATCHES batches of each, the fastest kept), when the watcher is made: the
#: estimate of what each call the hook counts costs the program (hook_ns).
COST_CALLS = 1000
COST_BATCHES = 7
#: Estimates made at most (cost_ns): a difference of zero or less is noise, measured again.
COST_TRIES = 3
#: The back-off of arming where counts come back empty (above).
IDLE_ARMS = 4
SKIP_FIRST = 16
SKIP_MAX = 4096

#: The process's one count (the replay hook reads it; one watcher per process).
COUNT = _core.ReplayCount()


class _Base(list):
    """A graph shaped like PyTorch's: its replay a Python method over a C one."""


class _Plain(_Base):
    def replay(self):
        return super().clear()


class _Hooked(_Plain):
    replay = _core.CountedReplay(_core.ReplayCount(), _Plain.replay, _Plain.replay)


def cost_ns(tries: int = COST_TRIES) -> float:
    """What a counted call costs a program here (ns), estimated: a replay shaped like
    PyTorch's (``def replay(self): super().replay()``, a C method under it) called through a
    CountedReplay armed for it, against the same replay called plainly (:func:`_fastest`). The
    call into the original from C costs more the more the original does (a review of d8f40ad:
    about twice as much over PyTorch's shape as over an empty body), hence the shape.

    The counted call does all the plain one does and more, so a difference of zero or less is
    the machine's noise, not a free count: on a loaded machine (two busy processes on this
    project's two-core CI machine) the fastest counted batch came in under the fastest plain
    one, the estimate read 0 and the hooks' share of watching with it. It is measured again,
    ``tries`` times in all; where it never comes out positive, the counted call's whole time
    stands for it: an upper bound (it holds the original replay too), so watching's figure
    errs high, never low."""
    plain = counted = math.inf
    for _ in range(max(1, tries)):
        plain, counted = _fastest()
        if counted > plain:
            return counted - plain
    return counted


def _fastest() -> tuple[float, float]:
    """The plain and the counted replay's fastest batch (ns a call): COST_BATCHES batches of
    COST_CALLS calls each, the two alternating, the fastest of each kept (a preemption or a
    collection in one would inflate the figure for the whole run)."""
    objs = (_Plain(), _Hooked())
    count = _Hooked.__dict__["replay"].count
    best = [math.inf, math.inf]
    count.arm(COST_CALLS * COST_BATCHES, weakref.ref(objs[1]), threading.get_ident(), None)
    try:
        for _ in range(COST_BATCHES):
            for i, obj in enumerate(objs):
                t0 = time.perf_counter_ns()
                for _ in range(COST_CALLS):
                    obj.replay()
                best[i] = min(best[i], (time.perf_counter_ns() - t0) / COST_CALLS)
    finally:
        count.disarm()
    return best[0], best[1]


class Counting(Part):
    """The watcher's side: takes the count before its own call reads anything, and arms it
    after a call that only counted, where the next calls can only count too."""

    def __init__(self, owner, count=COUNT):
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
        replay and sync points; the hooks' figure at the branch's estimated cost)."""
        if not self.count.armed:
            return                  # nothing armed, nothing counted
        done, syncs, seen = self.count.disarm()
        self.back_off(done)
        w = self.w
        w.units_now += done
        w.points["replay"] += done
        w.points["sync"] += syncs
        if seen is not None:
            seen.replays += done
        # a counted sync costs what a counted replay does: one C call in front of the original
        w.hook_calls += done + syncs
        w.hook_ns += (done + syncs) * self.ns
        self.calls += done + syncs

    def back_off(self, done: int) -> None:
        if done > 0:
            self.idle, self.skip = 0, SKIP_FIRST
            return
        self.idle += 1
        if self.idle >= IDLE_ARMS:
            self.idle, self.wait, self.skip = 0, self.skip, min(2 * self.skip, SKIP_MAX)

    def arm(self, kind: str, torch_graph, seen, me: int) -> None:
        """After a call that switched nothing (under the lock): arm the count for the next
        replays of the same graph on the same thread, up to one short of the block's, the
        rest's or a team's settle's end, where each of them would only count a unit."""
        if self.wait:
            self.wait -= 1
            return
        if not self.only_counting(kind, torch_graph, seen, me):
            return
        w = self.w
        r = w.resting
        end = (w.pace.team_settle_units() if w.settling is not None else
               r["units"] if r is not None else w.units_per_block)
        left = end - w.units_now - 1
        if left >= 1:
            self.arms += 1
            self.count.arm(left, seen.ref, me, seen)

    def only_counting(self, kind: str, torch_graph, seen, me: int) -> bool:
        """Whether the next such calls would only count a unit (Phases.search_point): the
        search under way on this thread's replays of the unit's graph, and none of what makes
        a call do more (a settle alone, which ends at a graph's launch, not a count; a rest
        whose hooks are off, the first block or the clock's loss waiting, the ranks not met,
        events timing each replay in the hook); alone, no other thread's calls (they count
        units too, and would read the count short). A team's settle runs to a count of units
        (Pace.team_settle_units): its calls count like a block's."""
        w = self.w
        if kind != "replay" or seen is None or me != w.thread or w.state != "search":
            return False
        if (w.other_threads and w.team is None) or w.team_pending or w.team_gave_up:
            return False
        if w._clock_lost or w._first_block_due or (w.settling is not None and w.team is None):
            return False
        r = w.resting
        if w.replay_events.on or (r is not None and r.get("unhooked")):
            return False
        # a graph that takes no weak reference is held by a closure (Graphs.remember): the
        # count, which must not keep a graph alive, is for weakly referenced graphs only
        return w.phases.is_unit(kind, seen) and type(seen.ref) is weakref.ref \
            and seen.ref() is torch_graph
