"""The watcher's clock: switch points that do not wait for the program's calls.

A program whose only host synchronizations are implicit (``.item()``, ``torch.bincount``
reading its range) or hidden in a library's loop (a Hugging Face ``generate()``) never calls
anything the bootstrap hooks after its start, so a watcher that switches only at the
program's own calls never switches there. The clock is a daemon thread that calls
:meth:`Watcher.tick` every ``period_s``; the tick switches from this thread, between the
program's launches, whenever no stream capture is open anywhere in the process.

Captures are known from CUDA itself, not from the libraries' Python: the core counts every
``cuStreamBeginCapture`` / ``cuStreamEndCapture`` from CUPTI's driver callbacks, whoever
calls them (PyTorch, CuPy, XLA, a raw driver call), and a tick switches only inside
``_core.switch_enter()`` / ``switch_leave()``, which holds the same lock the begin callback
takes before it counts a capture: a capture cannot begin while a switch is in progress (its
begin waits for the switch to end), and a switch cannot begin while a capture is open
(csrc/core/l2p_capture.h says why that closes the race).

The clock never starts the program's CUDA: until the device's primary context is active (the
program made it), a tick does nothing. Ranks under torchrun switch together at their shared
calls (process/team.py), never from a clock.
"""
from __future__ import annotations

import threading

from .. import _core

#: How often the clock ticks: a quarter of a 20 ms block (blocks end at the first tick past
#: their length, so a block runs at most a period long).
PERIOD_S = 0.005


def tracking() -> bool:
    """Whether this build counts the process's captures (the clock needs it)."""
    return all(hasattr(_core, n) for n in ("capture_watch_begin", "switch_enter",
                                             "switch_leave"))


class Clock:
    """A daemon thread calling ``tick()`` every ``period_s`` until stopped; ``tick`` returns
    False once nothing more is wanted of the clock (decided, stopped), which ends it."""

    def __init__(self, tick, period_s: float = PERIOD_S):
        self._tick = tick
        self.period_s = period_s
        self._stop = threading.Event()
        self.thread = None
        self.ticks = 0
        self.error = None             # what ended it, if a tick raised

    def start(self) -> "Clock":
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="l2persist-clock",
                                           daemon=True)
            self.thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.period_s):
            self.ticks += 1
            try:
                if self._tick() is False:
                    return
            except BaseException as e:     # never raised into the program: ends the clock
                self.error = e
                return

    def stop(self, join: bool = True):
        """Idempotent; waits for a tick in progress unless called from the clock's thread."""
        self._stop.set()
        t = self.thread
        if join and t is not None and t is not threading.current_thread():
            t.join(timeout=5.0)
