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

import atexit
import sys
import threading
import time

from .. import _core
from .part import Part

SETTLE_S = 0.5       # after a release's request: a capture's withdrawal is settled then,
SETTLE_MAX_S = 8.0   # and looked for again while it is pending, the waits doubling to this

#: How often the clock ticks: a quarter of a 20 ms block (blocks end at the first tick past
#: their length, so a block runs at most a period long).
PERIOD_S = 0.005


def tracking() -> bool:
    """Whether this build counts the process's captures (the clock needs it)."""
    return all(hasattr(_core, n) for n in ("capture_watch_begin", "switch_enter",
                                             "switch_leave"))


class Clock:
    """A daemon thread calling ``tick()`` every ``period_s`` until stopped; ``tick`` returns
    False once nothing more is wanted of the clock (decided, stopped), which ends it.
    :meth:`hold` skips the ticks of a stretch in which none can do anything (a rest whose
    hooks' gate is closed: pace.rest_unhooked)."""

    def __init__(self, tick, period_s: float = PERIOD_S):
        self._tick = tick
        self.period_s = period_s
        self._stop = threading.Event()
        self._nudge = threading.Event()    # a hold ended early, or stop
        self._hold_until = 0.0             # time.monotonic(): no tick before it
        self.thread = None
        self.ticks = 0
        self.held_s = 0.0                  # the holds' time, summed
        self.error = None             # what ended it, if a tick raised

    def start(self) -> "Clock":
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="l2persist-clock",
                                           daemon=True)
            self.thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            wait = max(self.period_s, self._hold_until - time.monotonic())
            self._nudge.wait(wait)
            self._nudge.clear()
            if self._stop.is_set():
                return
            if time.monotonic() < self._hold_until:
                continue               # a hold set while it waited: wait again
            self.ticks += 1
            try:
                if self._tick() is False:
                    return
            except BaseException as e:     # never raised into the program: ends the clock
                self.error = e
                return

    def hold(self, seconds: float):
        """No tick for ``seconds`` from now (0: the hold under way ends and a tick comes now).
        Each wake-up of this thread takes the GIL from the program's."""
        if not self.running:
            return                 # stopped (quiet): nothing to hold, no time counted
        now = time.monotonic()
        if seconds > 0:
            self.held_s += seconds
            self._hold_until = now + seconds
        else:
            if self._hold_until > now:
                self.held_s -= self._hold_until - now
            self._hold_until = 0.0
            self._nudge.set()

    def stop(self, join: bool = True):
        """Idempotent; waits for a tick in progress unless called from the clock's thread."""
        self._stop.set()
        self._nudge.set()
        t = self.thread
        if join and t is not None and t is not threading.current_thread():
            t.join(timeout=5.0)

    @property
    def running(self) -> bool:
        """Started, not stopped, and its thread not ended by a tick (False, or a raise)."""
        return (self.thread is not None and not self._stop.is_set()
                and self.thread.is_alive())


def start(w, again: bool = False) -> None:
    """The watcher's clock started where it may run: advise and verify, alone (ranks switch
    together at their shared calls), with a core that counts captures. ``again``: where a
    search begins again (its warm-up and probe may need the ticks), the clock that
    :func:`quiet` stopped starts again; a watcher that never had one (the simulator's, whose
    ticks are driven by hand) gets none."""
    had = getattr(w, "clock", None)
    if again:
        if had is not None and not had.running:
            c = Clock(w.tick, had.period_s)
            c.ticks, c.held_s = had.ticks, had.held_s      # the summary's, over the restarts
            w.clock = c.start()
            w.clock_quiet = False
        return
    if had is None and w.o.world <= 1 and w.o.mode in ("advise", "verify") and tracking():
        w.clock = Clock(w.tick).start()


def quiet(w) -> None:
    """The search's unit is one of the program's own calls (a mark, a replay, a sync): every
    switch point is the program's from here, and a tick would only cost the program's thread
    the GIL 200 times a second. The clock's thread stops (without waiting: a tick in progress
    cannot take the watcher's lock, which the caller holds); a search that begins again
    starts it again (:func:`start`)."""
    if getattr(w, "clock", None) is not None:
        w.clock.stop(join=False)
        w.clock_quiet = True       # the summary's: a clock that ran went quiet


def _driver_loaded() -> bool:
    """Whether the program has initialised CUDA's driver (cuInit) already, asked without
    loading or initialising it (l2p_driver_initialised says how, and why loaded is not
    enough)."""
    return _core.driver_initialised()


def _profiler_on() -> bool:
    """Whether the program's PyTorch profiler is on: its process-wide flag (torch.profiler and
    torch.autograd.profiler set it), and the calling thread's autograd profiler (thread-local:
    the clock's thread may not see the program's)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        prof = sys.modules.get("torch.autograd.profiler")
        return bool(getattr(prof, "_is_profiler_enabled", False)
                    or torch.autograd._profiler_enabled())
    except Exception:
        return True       # not known: CUPTI stays


def _capturing() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_current_stream_capturing())
    except Exception:
        return False


# Modules of cuda-python (cuda-bindings, and the legacy cuda.cudart / cuda.cuda): before 12.9.1
# (13.0.0 on the 13.x line) its capture begin is called with the GIL held.
_CUDA_PYTHON = ("cuda.bindings", "cuda.cudart", "cuda.cuda")
_GIL_RELEASED_FROM = (12, 9, 1)
_gil_verdict: list = []        # once known: [None] or [why]


def _version_tuple(text: str) -> tuple:
    """"12.9.1" -> (12, 9, 1); each part's leading digits ("0rc1" -> 0), up to a part without."""
    parts = []
    for piece in text.split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _capture_holds_gil() -> str | None:
    """Why a switch may never run here, or None: a library loaded in the process begins its
    captures with the GIL held, cuda-python older than 12.9.1 (its bindings release the GIL
    since 12.9.1 and 13.0.0; PyTorch, CuPy and XLA release it before their capture begins:
    read in their sources, 2026-11-29). Such a begin, arriving during a switch, waits for the
    switch while holding the GIL the switch needs to end (l2p_capture.h): a deadlock. Asked
    before each switch; the version read once, when the module is first seen."""
    if _gil_verdict:
        return _gil_verdict[0]
    if not any(name in sys.modules for name in _CUDA_PYTHON):
        return None
    from importlib import metadata
    version = None
    for dist in ("cuda-bindings", "cuda-python"):
        try:
            version = metadata.version(dist)
            break
        except Exception:
            continue
    held = version is None or _version_tuple(version) < _GIL_RELEASED_FROM
    _gil_verdict.append(
        f"the program loaded cuda-python {version or '(version not known)'}, whose capture "
        f"begins hold the GIL (released since 12.9.1): a capture begun during a switch would "
        f"deadlock, so the watcher does not switch; upgrade cuda-python (cuda-bindings) to "
        f"12.9.1 or later" if held else None)
    return _gil_verdict[0]


class SwitchGate(Part):
    """The watcher's part that says whether it may switch now: whether a capture is open
    anywhere in the process (PyTorch's through its hooks, any other from the core's count),
    the core's switch lock taken and given back around a switch, and whether the clock may
    act at all (the program's driver and context exist)."""

    def capture_open(self) -> bool:
        """Whether a capture is open, asked right before anything is switched: PyTorch's
        through its hooks, or any in the process that the core counts (CUDA's callbacks:
        another library's, another thread's). Where none is, the answer takes the core's switch
        lock (l2p_switch_enter) and holds it to the end of this call of the watcher (point and
        tick let it go): a capture that begins meanwhile, on any thread, waits until the
        switch is done, so "none open" stays true while this call switches."""
        w = self.w
        if w.captures or _capturing():
            return True
        why = _capture_holds_gil()
        if why:
            if why not in w.notes:
                w.notes.append(why)
            return True            # never a switch: as if a capture stayed open
        if w.tracking_ended:
            return False
        me = threading.get_ident()
        if w._switch_held == me:
            return False
        w._switch_held = me        # first: an interrupt after the enter must find it owned
        try:
            entered = _core.switch_enter()
        except BaseException:
            w._switch_held = None
            raise
        if not entered:
            w._switch_held = None
            return True            # one is open, or its begin is waiting for a switch
        return False

    def release(self):
        """The switch lock back, where this thread's call took it."""
        w = self.w
        if w._switch_held == threading.get_ident():
            w._switch_held = None
            _core.switch_leave()

    def end_tracking(self, release: bool = False):
        """The capture count's CUPTI callbacks off once nothing switches any more (decided,
        stopped, at exit): the process's one subscriber is free again for a profiler the
        program starts later. Outside the switch lock, as the launch log's calls; from here
        capture_open asks PyTorch only (a count that stopped may stay high for good). With
        ``release``, CUPTI is let go where it may be, the count handed over in the same step
        (release_cupti); once the count has ended without it, a capture since is not known,
        so CUPTI stays."""
        w = self.w
        self.release()
        if w.tracking_ended:
            if release and not w.activity and w.cupti_release is None:
                w.cupti_release = ("held", "captures were no longer tracked (a graph made "
                                           "since would fail without CUPTI)")
            return
        w.tracking_ended = True
        if release and not w.activity:   # decided and timed, or stopped mid-run (not at
            self.release_cupti()         # exit: the program makes no call for it there)
        if w.clock_tracking:             # a count handed to the release stays with it
            try:
                _core.capture_watch_end()
            except Exception:
                pass

    def release_cupti(self):
        """CUPTI detached from the program once nothing of the watcher's needs it (advise and
        verify decided and timed, or stopped mid-run): attached it costs every launch for
        the rest of the program's life, recording or not (an 8-kernel graph's replay +0.25-0.3
        us of 9.6, H200; the core's l2p_cupti.h). The core refuses where anything of ours still
        holds it, and where its capture count saw any capture: the count is handed over with
        the request in one step (l2p_capture.h), so a capture begun in between cannot slip
        past both, and one begun before the finalize withdraws the release. Here: where the
        program's own profiler is on (detaching would end its session). After this the
        watcher makes no CUPTI call. Once."""
        w = self.w
        if w.cupti_release is not None:
            return
        why = "the program's profiler is on" if _profiler_on() else self.graphs_under_cupti()
        if why:
            w.cupti_release = ("held", why)
            return
        self.request_release(hand_captures=True)

    def request_release(self, hand_captures: bool):
        """The core asked to let CUPTI go (``hand_captures``: the capture count handed over in
        the same step, as release_cupti; without it the caller has ruled out captures made
        under CUPTI itself: letgo.LetGo), its answer in ``w.cupti_release``; a request no call
        has carried out yet is withdrawn at exit, and one a capture withdrew is taken off
        soon."""
        w = self.w
        try:
            w.cupti_release = tuple(_core.cupti_release(hand_captures=hand_captures))
        except Exception as e:
            w.cupti_release = ("held", str(e))
        if w.cupti_release[0] in ("releasing", "withdrawn"):
            # first of Python's exit handlers (they run last-registered first): the program's
            # own (PyTorch's) make CUDA calls that would carry the release out inside its exit
            atexit.register(self.withdraw_release)
            # a capture that withdrew the request leaves its subscriber on every call: taken
            # off soon, not only at exit
            self._settle_later(SETTLE_S)

    def _settle_later(self, delay: float):
        t = threading.Timer(delay, self.settle_release, kwargs={"delay": delay})
        t.daemon = True
        t.start()

    def graphs_under_cupti(self):
        """Why CUPTI must stay, as far as Python knows, where the program may hold CUDA graphs
        made while it was attached: replays of such graphs failed once it was finalized
        ("unspecified launch failure" in all four graph programs of the zoo, H200 at 161093c),
        where graphs made before CUPTI attached replayed as before
        (tools/investigations/cupti-states). Known here from PyTorch's hooks and XLA's own
        graphs; the core's count of every capture begun (capture tracking) is read by the
        core itself, in the same step as the request (release_cupti). Without tracking
        another library's captures are not known, so nothing is let go (apply, which runs no
        clock, unless --release-cupti)."""
        w = self.w
        from .phases import _makes_own_graphs
        if getattr(w, "captures_begun", 0) or _makes_own_graphs():
            return ("the program made CUDA graphs while CUPTI was attached (their replays fail "
                    "once it is let go)")
        if not w.clock_tracking:
            return "captures were not tracked (a graph made under CUPTI would fail without it)"
        return None

    def settle_release(self, delay: float = SETTLE_S):
        """After the request: where a capture withdrew it, the request's subscriber (every
        driver and runtime call goes through it) is taken off; CUPTI stays attached, as where
        it was held. While no CUDA call has carried it out yet (the program in host work), it
        looks again later, the waits doubling to SETTLE_MAX_S; one carried out is left alone."""
        w = self.w
        try:
            if w.cupti_release[0] not in ("releasing", "withdrawn"):
                return
            now = _core.cupti_state()
            if now == "releasing":
                self._settle_later(min(2 * delay, SETTLE_MAX_S))
            elif now == "withdrawn":
                self._take_back()
        except Exception:
            pass

    def withdraw_release(self):
        """At exit: a release no CUDA call has carried out yet is withdrawn (CUPTI is not
        finalized from inside the program's exit, whose teardown calls would carry it out);
        one a capture withdrew has its subscriber, still on every call, taken off. The core is
        asked even where no answer was recorded here: a signal (SIGTERM's restore) can come
        between the core's request and its record."""
        w = self.w
        if w.cupti_release is not None and w.cupti_release[0] not in ("releasing", "withdrawn"):
            return
        try:
            if _core.cupti_state() in ("releasing", "withdrawn"):
                self._take_back()
        except Exception:
            pass

    def _take_back(self):
        """The core's reclaim, recorded by what it found (a finalize may land just before)."""
        found = _core.cupti_reclaim()
        if found == "releasing":
            self.w.cupti_release = ("withdrawn", "the program ended before a CUDA call let "
                                                 "CUPTI go")
        elif found == "withdrawn":
            self.w.cupti_release = ("withdrawn", "a capture began as CUPTI was being let go")

    def begin_tracking(self, without: str) -> bool:
        """The core's capture count on (CUDA's callbacks: every capture begun from here, by
        whoever); where CUPTI refuses (another subscriber, a profiler; no CUPTI), a note
        saying so and ``without``, what the watcher does instead."""
        w = self.w
        try:
            _core.capture_watch_begin(w.o.device)
            w.clock_tracking = True
        except Exception as e:
            w.clock_tracking = False
            w.notes.append(f"captures are not tracked here ({e}): {without}")
        return w.clock_tracking

    def armed(self) -> bool:
        """Whether the clock may act: the program has loaded CUDA's driver itself (asked
        without loading it: a CUDA call of ours before the program's would read
        CUDA_VISIBLE_DEVICES before a script sets it), captures are counted (CUDA's callbacks:
        started here, from the clock's thread, once), and in the idle state the program has
        made its context (asked, never made)."""
        w = self.w
        if w.tracking_ended:       # stopped (decided, failed, exiting): never again
            return False
        if w.clock_tracking is None:
            if not _driver_loaded():
                return False
            self.begin_tracking("the watcher switches only at the program's own calls")
        if not w.clock_tracking:
            return False
        return w.state != "idle" or self.context_made()

    def context_made(self) -> bool:
        """The program has made its context on the watched device (asked, never made)."""
        w = self.w
        try:
            return bool(_core.context_active(w.o.device))
        except Exception:
            return False
