"""Watching a running program: the live advisor, ``verify`` and ``apply`` inside the program.

The bootstrap (``l2persist.process.bootstrap``) makes one :class:`Watcher` before the
program's code runs and hooks the program's own calls into it: every ``torch.cuda.CUDAGraph``
capture (kept raw, scanned, named by its signature), every graph replay, every host
synchronization and ``l2persist.mark()``. Those calls are the only points where anything is
switched: the watcher runs on the program's thread, between its calls, never while a capture
is open, and never calls the program's work. The program's kernels are timed by CUDA's
activity records (``_core.activity_*``); the search and its verdict are the C core's
(``_core.live_*``); this module keeps the program's entry points (its calls, the clock's
tick, exit), the phases (idle, warm-up, probe, search, done) and which graphs exist. The rest
is in parts, each a class of its own module over the watcher's state (process/part.py):
the switch gate (process/clock.py: capture tracking and the switch lock), the search
driver (process/search.py: the probe, the blocks, the decision), the eager
launches (process/launches.py), the recorder (process/recorder.py: records to samples), the
pace (process/pace.py: rests and settles), the switcher (process/switcher.py: targets and
installing arms) and the report (process/summary.py: the result and the plan); the clock's
thread is process/clock.py, the ranks process/team.py (Ranks), the streams process/streams.py.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from .. import _core
# the watcher's parts (each reads and writes the Watcher's state; names re-exported here)
from .clock import SwitchGate, _capturing, _driver_loaded  # noqa: F401
from .launches import APPLY_LOG_S, APPLY_TRIES, APPLY_WARMUP_S, Launches  # noqa: F401
from .pace import REST_GATE_MAX_S, REST_PAIRS, Pace  # noqa: F401
from .recorder import Block, Recorder, _increasing, _NoRecords  # noqa: F401
from .search import (AFTER_CALLS_MAX, AFTER_S_MAX, AFTER_UNITS, UNGRAPHED_NOTE,  # noqa: F401
                     Search)
from .summary import PER_KEY_SHOWN, PLAN_FORMAT, Report, _jsonable  # noqa: F401
from .switcher import Switcher, Target, _window  # noqa: F401
from . import team as _team



@dataclass
class Options:
    """What ``advise`` / ``verify`` / ``apply`` were asked for (from the bootstrap's
    environment; the CLI checks each value before the program starts)."""
    mode: str = "advise"           # advise | verify | apply
    budget_s: float = 60.0         # seconds of the program's traffic for the search
    warmup_s: float = 2.0          # watched, not switched, before the search
    block_s: float = 0.02          # a block's target length (its units follow from warm-up;
                                   # rests multiply the advice's time by up to ten: short blocks)
    block_units: int = 0           # fixed units per block (0: from block_s)
    min_gain: float | None = None  # None: the core's default (_core.live_defaults())
    max_overhead: float | None = None  # observing's share of the wall time at most (watching
                                       # and the hooks; None: the core's default; 0: record
                                       # every block back to back)
    exit_after: bool = False
    keep_hooks: bool = False   # the per-call hooks stay on after the decision (a tool that
                               # counts the program's calls: tools/investigations/search-cost)
    result: str | None = None      # where the child writes its result (JSON)
    plan: str | None = None        # verify / apply: the plan document
    device: int = 0
    rank: int = 0                  # torchrun's RANK / WORLD_SIZE (one result file per rank)
    world: int = 1

    @classmethod
    def from_env(cls, env=os.environ) -> "Options":
        o = cls(mode=env.get("L2PERSIST_MODE", "advise"))
        for key, name, conv in (("L2PERSIST_BUDGET", "budget_s", float),
                                ("L2PERSIST_WARMUP", "warmup_s", float),
                                ("L2PERSIST_BLOCK_S", "block_s", float),
                                ("L2PERSIST_BLOCK_UNITS", "block_units", int),
                                ("L2PERSIST_MIN_GAIN", "min_gain", float),
                                ("L2PERSIST_MAX_OVERHEAD", "max_overhead", float),
                                ("L2PERSIST_RESULT", "result", str),
                                ("L2PERSIST_PLAN", "plan", str)):
            if env.get(key):
                setattr(o, name, conv(env[key]))
        o.exit_after = env.get("L2PERSIST_EXIT_AFTER", "") == "1"
        o.keep_hooks = env.get("L2PERSIST_KEEP_HOOKS", "") == "1"
        o.device = int(env.get("L2PERSIST_DEVICE", env.get("LOCAL_RANK", "0")) or 0)
        o.world = int(env.get("WORLD_SIZE", "1") or 1)
        o.rank = int(env.get("RANK", "0") or 0) if o.world > 1 else 0
        return o

    @property
    def result_path(self) -> str | None:
        """Where this process writes its result: one file per rank under torchrun."""
        if not self.result or self.world <= 1:
            return self.result
        return f"{self.result}.rank{self.rank}"


@dataclass
class GraphSeen:
    """One graph the program captured: a weak reference to it (the watcher never keeps a graph
    the program dropped, nor its memory pool, alive), its stable name and what the scan found."""
    ref: Any                       # weakref.ref to the program's torch.cuda.CUDAGraph
    signature: str
    names: list
    records: list                  # (address, size, offer) per buffer (allocation)
    uses: list                     # (node, param, offset, word, record) per pointer word
    replays: int = 0
    windows_applied: int = 0
    # replayed with CUPTI recording since its executable was made: after a pause its records
    # would read short (Switcher.install's fresh executables)
    recorded_exec: bool = False
    renew_failed: bool = False     # its owner could not be made to instantiate it again
    # where each target lies in this graph (Switcher.find_targets): the index in `uses` of its
    # anchor word -> the nodes whose words point into the target
    spans: dict = field(default_factory=dict)
    eager = False                  # a graph's windows go on its nodes (streams.LaunchSeen: True)

    def borrow(self):
        """An l2persist Graph over the program's graph, made per use (it holds its owner: kept,
        it would keep the graph alive), or None once the program has dropped the graph."""
        owner = self.ref()
        if owner is None:
            return None
        from ..foreign import as_graph
        try:
            return as_graph(owner)
        except (ValueError, RuntimeError):
            return None            # reset() by the program: it keeps no raw graph now

    def change_windows(self, changes: list, fresh: bool = False) -> bool:
        """Set (window or None, nodes) pairs on the program's graph, then make its next replay
        see them with one re-instantiation (a PyTorch graph's; not one per window); ``fresh``:
        re-instantiate it even where no window changes (see Switcher.install). False when
        the program has dropped the graph or keeps no raw graph now."""
        owner = self.ref()
        if owner is None:
            return False
        if not changes and not fresh:
            return True
        from . import torch as _torch
        if changes:
            try:
                if _torch.is_torch_graph(owner):
                    graph = _torch.borrow(owner, quiet=True)
                else:
                    from ..foreign import as_graph
                    graph = as_graph(owner)
            except (ValueError, RuntimeError):
                return False       # reset() by the program: it keeps no raw graph now
            for w, nodes in changes:
                graph.set_access_policy_window(w, nodes=nodes)
        try:
            renewed = _torch.reinstantiate(owner)
        except (ValueError, RuntimeError):
            # reset() by the program (it keeps the object, not the graph): nothing to renew,
            # and no graph left to window
            self.recorded_exec = False
            return False
        if renewed:
            self.recorded_exec = False
        elif fresh:
            self.renew_failed = True
        return True

    def nodes_of(self, at: int) -> list:
        """The nodes a window on the target anchored at uses[at] goes on: those whose words
        point into it, not every node of the graph."""
        return self.spans.get(at, [])

    def anchor(self, at: int):
        """The target's anchor word, one of the words inside it: (node, param, offset, word)."""
        u = self.uses[at]
        return u[0], u[1], u[2], u[3]


class Watcher:
    """The program's side of advise / verify / apply (one per process)."""

    def __init__(self, options: Options):
        self.o = options
        self.lock = threading.RLock()
        self.graphs: dict[int, GraphSeen] = {}   # id(torch graph) -> seen, while it lives
        self.graphs_gone: list[GraphSeen] = []     # graphs the program dropped
        self.captures = 0                          # captures open now
        self.points = {"replay": 0, "sync": 0, "mark": 0, "tick": 0}
        self.clock = None                          # clock.Clock: switch points of its own
        self.verify_base = None                    # verify: the baseline the plan is, if one
        self._switch_held = None                   # the thread holding the core's switch lock
        self.tracking_ended = False                # end_tracking: the core's count no longer asked
        self._clock_lost = False                   # graphs came in a search on the clock
        self._first_block_due = False              # the search's first block waits for a call
                                                   # with no capture open
        self.clock_tracking = None                 # captures counted for the clock (None: not
                                                   # tried yet)
        self.state = "idle"                        # idle, warmup, search, done, off
        self.notes: list[str] = []
        self.device = None
        self.default_limit = None
        self.limit_before = None
        self.t0 = None
        self.unit = None                           # ("replay", sig) | ("sync",) | ("mark",)
        self.units_per_block = 1
        self.units_now = 0
        self.arms: list = []
        self.targets: list[Target] = []
        self.blocks: list[Block] = []
        self.recorded = 0                          # blocks whose samples the search has
        self.switch_ms: list[float] = []          # a block's end to the next arm installed
        self.switch_work_ms: list[float] = []         # of which the switch's own work (past the
                                                   # synchronization: bookkeeping and install)
        self.install_ms: list[float] = []          # of which the install (limit, reset, windows)
        self.windows_ms: list[float] = []          # of which the windows (every install's)
        self.resting = None                        # the rest under way (records paused)
        self.settling = None                       # after a rest: graphs not yet launched again
        self.replayed: set = set()                 # graphs replayed in the current block
        self.spanning = 0                          # impossible records dropped (see Pace.end_rest)
        self.mix_ref: dict = {}                    # the probe's by_key (Search.begin)
        self.key_sums: dict = {}                   # arm -> launch key -> [ns, launches] of
                                                   # its blocks given to the search
        self.rest_units = 0                        # the length of the latest rest
        self.rests_capped = 0                      # rests sized at the cap (see Pace.rest_length)
        self.result: dict | None = None
        self.final_arm = None
        self.plan_doc: dict | None = None
        self.search_t0 = None
        self.activity = False
        self.paused = False                        # kernel records paused (the warm-up)
        self.captures_begun = 0
        self._after = None                         # timing units after the decision
        self.after_decision = None
        self.applied_sigs: set = set()
        self.restored = None                       # the limit put back at exit
        self.thread = None                         # the first watched call's thread
        self.team = None                           # ranks in lockstep (process/team.py)
        self.team_pending = False                  # ranks exist, their store not yet
        self.team_gave_up = False                  # went on alone: peers are told once it can
        self.team_wait_t0 = None
        self.team_points = 0
        # Set by the bootstrap: takes the per-call hooks (replays, synchronizations) off the
        # program once the watcher needs no more calls (decided, its own cost timed): a
        # server runs on for hours after advice, and each hooked call cost it ~1-2 us of
        # Python (H200: the server loop 2.5 % slower after the decision while hooked).
        self.unhook_calls = None
        self.calls_unhooked = False
        # Set by the bootstrap too: (close, open), the per-call hooks' gate, closed for a
        # rest's uncounted part (Pace.rest_unhooked)
        self.rest_hooks = None
        self.rest_s = None                         # unrecorded wall per unit, newest rests
        self.rest_timer = None
        self.steps = 0                             # rests and blocks begun (a call that
                                                   # switched is not a hook's own time)
        self.hook_ns = 0                           # the search's calls that switched nothing:
        self.hook_calls = 0                        # their time in the watcher, their count
        self.hook_marks = []                       # (time, hook_ns) at the newest cycles' ends
        # Eager launches (streams.py): the recurring ones the probe's launch log saw, windowed
        # through their streams; apply matches the plan's stream windows by a log of its own
        self.eager: list = []                      # streams.LaunchSeen
        self.logging = False                       # the launch log is on
        self.log_cut = False                       # ... stopped by a capture (begins again after)
        self.stream_windows = None                 # streams.StreamWindows, once one is set
        self.unknown_streams: dict = {}            # handle -> eager GPU share not windowed
        self.apply_log = None                      # apply: {"t0", "tries"} while matching
        self._stream_plan: dict = {}               # apply: handle -> (key, window) matched
        self.streams_restored = None               # each stream's own window back (at exit)
        # the parts (what changes together): the search's phases and blocks, the eager launch
        # log, records to samples, rests between blocks, installing arms, what comes out
        self.gate = SwitchGate(self)
        self.ranks = _team.Ranks(self)
        self.search = Search(self)
        self.launches = Launches(self)
        self.recorder = Recorder(self)
        self.pace = Pace(self)
        self.switcher = Switcher(self)
        self.report = Report(self)

    # ---- the program's calls ---------------------------------------------------------------

    def capture_begin(self):
        with self.lock:
            self.captures += 1
            self.captures_begun += 1
            if self.stream_windows is not None:
                self.stream_windows.suspend()  # a captured node would copy its stream's window
            if self.logging:       # a capture's launches are no eager work: the log starts over
                self.launches.stop()
                self.log_cut = True
            if self.resting is not None and self.paused:
                self.resting["recorded"] = True    # no longer an unrecorded rest
                if self.resting.get("unhooked") and "tail_t0" not in self.resting:
                    self.resting["tail_due"] = True   # the gate open: counted from here on
                    self.rest_hooks[1]()
            self._resume()

    def _resume(self):
        """Record from here on (the warm-up's pause ends: the probe begins, or a graph is
        being made or replayed)."""
        if self.paused:
            _core.activity_record(True)    # on first: a caller that sees paused False records
            self.paused = False

    def capture_end(self, torch_graph):
        with self.lock:
            self.captures = max(0, self.captures - 1)
            try:
                self._remember(torch_graph)
            except Exception as e:  # a graph we cannot read is reported, never raised
                self.notes.append(f"a captured graph could not be read: {e}")
            if self.state == "search" and self.unit == ("tick",) and self.graphs:
                self._clock_lost = True    # the clock never acts beside graphs: see tick
            self._capture_closed()

    def capture_failed(self):
        """The program's capture_begin raised: no capture is open for it."""
        with self.lock:
            self.captures = max(0, self.captures - 1)
            self._capture_closed()

    def _capture_closed(self):
        if self.captures:
            return
        if self.stream_windows is not None:
            self.stream_windows.resume()
        if self.log_cut:
            self.log_cut = False
            if self.state == "probe":
                self.launches.begin()

    def fail(self, where: str, e: BaseException) -> None:
        """A hook failed: say where (with the traceback's last frames), stop switching and put
        back the better-known state (the set-aside the program started with). The program's
        call goes on."""
        import traceback
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])
        with self.lock:            # a tick on the clock's thread must not switch meanwhile
            self.notes.append(f"{where} failed, watching stopped: {type(e).__name__}: {e}\n{tb}")
            self._after = None         # a failing after-decision timing must not keep the hooks
            self.launches.stop()
            self.gate.capture_open()       # the switch lock where no capture is open (see finish)
            if self.stream_windows is not None:    # in any state: a capture may be about to open
                self.stream_windows.restore()
            if self.state in ("warmup", "probe", "search"):
                self.state = "off"
                self.restore()
                self.paused = False    # a later replay must not turn the records back on
                self.activity = False
                try:
                    _core.activity_end()
                except Exception:
                    pass
            self.gate.end_tracking()
            if self.team is not None:
                self.team.leave()

    def point(self, kind: str, torch_graph=None):
        """A switch point: a replay (before it is launched), a sync or a mark. In a team only
        the thread that made the first watched call counts (ranks must count the same calls;
        other threads' order is not the same on every rank), and it waits for the lock."""
        if kind == "replay" and self.paused and self.state == "warmup":
            self._resume()         # before any thread's replay: its first instantiates the graph
        me = threading.get_ident()
        if self.thread is None:
            self.thread = me
        if self.team is not None and me != self.thread:
            self._flag_recorded(kind, torch_graph)
            return
        if not self.lock.acquire(blocking=self.team is not None):
            self._flag_recorded(kind, torch_graph)
            return                 # another thread is switching: this call goes on
        t0, steps = time.perf_counter_ns(), self.steps
        # the graph as seen, looked up once per call (this runs before every replay: the
        # lookups are inline, each method call costs the program ~0.1-0.2 us)
        seen = None
        if torch_graph is not None:
            seen = self.graphs.get(id(torch_graph))
            if seen is not None and seen.ref() is not torch_graph:
                seen = None        # an id of a dropped graph, reused
        try:
            self._point(kind, torch_graph, seen)
        finally:
            if self.activity and not self.paused:  # after: the call may have paused or resumed
                self._flag_recorded(kind, torch_graph, seen)
            if self.state == "search" and self.steps == steps:
                # a call that switched nothing: the hooks' own cost to every call of the
                # counting thread, which the rests pay as the blocks do (so added_share cannot
                # see it); a switch's calls are counted in switch_work_ms
                self.hook_ns += time.perf_counter_ns() - t0
                self.hook_calls += 1
            try:
                self.gate.release()     # first: a capture on another thread may wait on it
                if self.unhook_calls is not None and self.state in ("done", "off") and \
                        self._quiet():
                    self._unhook()
            finally:
                self.lock.release()

    def tick(self) -> bool:
        """A switch point from the watcher's own clock (process/clock.py), for programs whose
        calls never reach the watcher (implicit syncs, a library's loop). What it switches, it
        switches inside the core's switch lock (taken where it asks whether a capture is open:
        gate.capture_open), which no capture can begin under and which is refused while one is
        open anywhere in the process. It never touches the program's CUDA before the program
        has (gate.armed), never acts while the program has graphs the watcher knows (their
        executables are made again on a switch, which must not race the program's own
        replays: those programs' replays are the switch points), and waits for nothing: a
        program's call that is switching now, or an open capture, lets this tick go. False
        once the clock is no longer wanted."""
        if self.state in ("done", "off") or self.o.mode == "apply" or self.o.world > 1:
            return False
        if any(g.ref() is not None for g in self.graphs.values()) or not self.gate.armed():
            return True
        if not self.lock.acquire(blocking=False):
            return True
        exiting = False
        try:
            self._point("tick", None, None)
        except SystemExit:       # --exit-after, decided on this thread
            exiting = True
        except Exception as e:
            self.fail("the clock's switch point", e)
        finally:
            try:
                self.gate.release()
            finally:
                self.lock.release()
        if exiting:
            # as the program's own thread would have: put back, written, then the process ends
            # (--exit-after is for the study's and tests' short runs)
            self.finish()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return self.state not in ("done", "off")

    def _flag_recorded(self, kind, torch_graph, seen=False):
        """The graph about to be replayed is launched with CUPTI recording: after a pause its
        executable must be made again before it is recorded (Switcher.install's fresh). Read
        without the lock on other threads' calls: a flag set once too often costs one
        re-instantiation, one missed would let short records into a block. ``seen``: the
        graph already looked up (False: not yet)."""
        if kind == "replay" and torch_graph is not None and self.activity and not self.paused:
            if seen is False:
                seen = self._seen(torch_graph)
            if seen is not None:
                seen.recorded_exec = True

    def _quiet(self) -> bool:
        """No call of the program is needed any more: decided (or stopped) with the watcher's
        own cost timed, and no peer left to tell that this rank went on alone."""
        return (self.o.mode != "apply" and not self.o.keep_hooks and self.state in ("done", "off")
                and self._after is None and not self.team_gave_up)

    def _unhook(self):
        """Under the lock. The undo puts back only what is still the bootstrap's own (a
        wrapper installed over a hook since, by the program or a profiler, stays) and returns
        what it left."""
        undo, self.unhook_calls = self.unhook_calls, None
        if undo is None:
            return
        try:
            kept = undo()
            self.calls_unhooked = True
            if kept:
                self.notes.append(f"the call hooks came off but for {', '.join(kept)}: "
                                  f"wrapped again since (that wrapper stays as it is)")
        except Exception as e:  # the hooks stay: each call returns at once in this state
            self.notes.append(f"taking the call hooks off failed: {e}")

    # ---- bookkeeping -------------------------------------------------------------------------

    def _start(self):
        if self.device is not None:
            return
        from .. import Device
        self.device = Device(self.o.device)
        self.default_limit = self.device.default_persisting_l2_limit
        self.limit_before = self.device.persisting_l2_limit
        try:
            _core.activity_begin(self.o.device)
            self.activity = True
            # Nothing reads the warm-up's records (the probe cuts its own stretch), and
            # recording costs the program's launches (an 8-kernel graph's replay +3.7-10.6 us
            # recording, +0.3-1.1 us paused, H200): while the program has made no graph, the
            # records wait for the probe. Not once a graph exists or is coming: whether CUPTI
            # records the nodes of an executable graph made while paused was not measured
            # (one made before CUPTI started is recorded once resumed, H200).
            if not self.captures_begun:
                _core.activity_record(False)
                self.paused = True
        except Exception as e:
            if self.activity:
                _core.activity_end()
                self.activity = False
            self.notes.append(f"activity records unavailable: {e}")
            self.state = "off"
        if self.o.world > 1 and self.o.mode != "apply" and self.state != "off":
            self.team_wait_t0 = time.perf_counter()
            self.ranks.join()

    def _remember(self, torch_graph):
        from ..foreign import as_graph
        self._forget_dropped()
        kernels, records, uses = as_graph(torch_graph)._scan([])
        names = [k[1] for k in kernels]
        try:
            ref = weakref.ref(torch_graph)
        except TypeError:          # an owner that cannot be weakly referenced is kept
            ref = lambda owner=torch_graph: owner  # noqa: E731
        seen = GraphSeen(ref, _core.graph_signature(kernels), names, list(records), list(uses))
        seen.ordinal = sum(g.signature == seen.signature for g in self.all_graphs())
        self.graphs[id(torch_graph)] = seen
        if self.o.mode in ("apply", "verify") and self.plan_doc is not None:
            self.switcher.apply_plan_windows(seen, install=self.o.mode == "apply")

    def _seen(self, torch_graph):
        """The program's graph as seen, by identity (an id of a dropped graph can be reused)."""
        seen = self.graphs.get(id(torch_graph))
        return seen if seen is not None and seen.ref() is torch_graph else None

    def _forget_dropped(self):
        for k in [k for k, g in self.graphs.items() if g.ref() is None]:
            self.graphs_gone.append(self.graphs.pop(k))

    def all_graphs(self) -> list:
        return self.graphs_gone + list(self.graphs.values())

    def _point(self, kind, torch_graph, seen=None):
        if self.team_gave_up and sum(self.points.values()) % 256 == 0:
            self.ranks.release_peers()  # peers that met in time learn that this rank is not coming
        if seen is not None:
            seen.replays += 1
        self.points[kind] += 1
        if self.state == "search":     # before every replay while searching: first
            self._search_point(kind, torch_graph, seen)
            return
        if self.o.mode == "apply":
            self.launches.apply_point()
            return
        if self.state == "off":
            return
        if self.state == "done":
            if self._after is not None:
                self.search.count_after(kind, seen)
            return
        if self.state == "idle":
            self._start()
            if self.state == "off":
                return
            self.state = "warmup"
            self.t0 = time.perf_counter()
            return
        if self._is_unit(kind, seen):
            self.units_now += 1
        if self.state == "probe":
            key = (kind, self._sig(torch_graph)) if kind == "replay" else (kind,)
            self.probe_counts[key] = self.probe_counts.get(key, 0) + 1
        # Whether a capture is open is asked only where something could switch (a phase's or
        # a block's end): asking PyTorch costs a call, and this runs before every replay.
        if self.state in ("warmup", "probe"):
            if self._phase_over(None, kind):
                if self.state == "warmup":
                    self.search.begin_probe()
                else:
                    self.search.begin()

    def _search_point(self, kind, torch_graph, seen):
        if self._clock_lost:
            if not self.gate.capture_open():
                self._clock_lost = False
                self.notes.append("the program began capturing CUDA graphs after the search "
                                  "had begun on the watcher's clock, which never acts beside "
                                  "graphs: the search stopped here; a longer --warmup lets "
                                  "the graphs come first")
                self.result = _core.live_finish()
                self.search.decide()
            return
        if self._first_block_due:
            if not self.gate.capture_open():
                self._first_block_due = False
                self.search.next_block(_core.activity_now())
            return
        r = self.resting
        if r is not None and r.get("unhooked") and "tail_t0" not in r \
                and not self.pace.begin_tail(r):
            # a call that reached the watcher with the gate closed (a capture's, one in
            # flight as it closed): not counted, its graph noted for the settle
            if kind == "replay":
                self.replayed.add(id(torch_graph))
            return
        if self._is_unit(kind, seen):
            self.units_now += 1
        if kind == "replay":    # a rest's replays too: their first launch after it settles
            self.replayed.add(id(torch_graph))
        if r is not None:
            if self.units_now >= r["units"] and not self.gate.capture_open():
                self.pace.end_rest(kind, torch_graph)
            return
        if self.settling is not None:
            self.pace.settle(kind, torch_graph)
            return
        if self.units_now >= self.units_per_block:
            if self.gate.capture_open():
                return             # never switch while a capture is open
            try:
                self.search.end_block()
            except _NoRecords as e:
                self.notes.append(f"search stopped: {e}")
                self.result = _core.live_finish()
                self.search.decide()

    def _phase_over(self, capturing: bool | None, kind: str = "replay") -> bool:
        """Whether the warm-up (or the probe) ends at this call. Alone: by this process's clock,
        never while a capture is open. In a team: every TEAM_EVERY-th call, by the leader's
        clock, where no rank is capturing (ranks count the same calls, so they agree at the
        same one). capturing None: asked here, only when it decides."""
        if self.team_pending:
            if threading.get_ident() == self.thread:   # ranks count the same thread's calls
                self.ranks.join()
                if self.team is not None:
                    return False   # this call met the team: decisions count from the next
            elif time.perf_counter() - self.team_wait_t0 >= _team.TEAM_WAIT_S:
                self.ranks.give_up()   # the counting thread went quiet: no lockstep to keep
            if self.team_pending:
                return False       # the ranks have not met yet: nobody moves on alone
        now = time.perf_counter()
        if self.state == "warmup":
            due = now - self.t0 >= self.o.warmup_s
        else:
            due = now - self.probe_t >= max(0.25, self.o.warmup_s / 2)
        if self.team is None:
            return due and not (self.gate.capture_open() if capturing is None else capturing)
        if kind == "sync" and (self.points["replay"] or self.points["mark"]):
            return False           # a rank's own syncs (logging on rank 0) are not shared
        self.team_points += 1
        if self.team_points % _team.TEAM_EVERY:
            return False
        if capturing is None:
            capturing = self.gate.capture_open()
        docs = self.team.gather({"due": due, "capturing": capturing})
        return bool(docs[0]["due"]) and not any(d["capturing"] for d in docs)

    def _sig(self, torch_graph):
        seen = self._seen(torch_graph)
        return seen.signature if seen is not None else None

    # ---- eager launches (streams.py) -----------------------------------------------------------

    def wants_calls(self) -> bool:
        """Whether apply needs the program's calls (its plan has stream windows to match)."""
        return self.apply_log is not None

    def _is_unit(self, kind, seen) -> bool:
        """``seen``: the replayed graph as seen (None: not one the watcher knows)."""
        if self.unit is None or self.unit[0] != kind:
            return False
        return kind != "replay" or (seen is not None and seen.signature == self.unit[1])

    # ---- the search --------------------------------------------------------------------------

    # ---- verify / apply: the plan document -----------------------------------------------

    def load_plan(self, path: str):
        self.plan_doc = load_plan(path)
        if self.o.mode == "apply" and any(e.get("stream") for e in self.plan_doc["windows"]):
            self.apply_log = {"tries": 0}

    # ---- what comes out (process/summary.py) ---------------------------------------------------

    def summary(self) -> dict:
        """The result document the CLI reads: verdict, arms, blocks, notes."""
        return self.report.summary()

    def make_plan(self) -> dict:
        """The plan document: what to install at the next start."""
        return self.report.make_plan()

    def finish(self):
        """At exit: a search still running is finished with what it has; the set-aside the
        program started with is put back."""
        if self.rest_timer is not None:
            self.rest_timer.cancel()
        if self.clock is not None:
            self.clock.stop()          # a tick in progress ends first: it holds the lock
        with self.lock:
            if self.state in ("warmup", "probe", "search"):
                try:
                    if self.state == "search" and self.blocks:
                        self.blocks[-1].end = self.blocks[-1].end or _core.activity_now()
                        self.blocks[-1].units = self.blocks[-1].units or self.units_now
                        if not self.blocks[-1].units and len(self.blocks) > self.recorded:
                            self.blocks.pop()      # begun just before the exit: nothing ran
                        try:
                            self.recorder.record_pending(alone=True)
                        except _NoRecords:
                            # the last block, begun just before the exit, holds no record of
                            # the work the probe saw: finish with the blocks before it
                            del self.blocks[self.recorded:]
                        self.result = _core.live_finish()
                    self.notes.append("the program ended before the search decided")
                    self.state = "done"
                except Exception as e:
                    self.notes.append(f"finishing failed: {e}")
            # put back inside the switch lock where no capture is open (a capture that begins
            # meanwhile waits); with one open, put back anyway: the process is ending. The
            # launch log first: its CUPTI calls are made outside the lock
            self.launches.stop()
            try:
                self.gate.capture_open()
            except Exception:
                pass
            self.restore()
            self.gate.end_tracking()
            try:
                _core.activity_end()
            except Exception:
                pass
            if self.o.mode != "apply":
                self.report.write_result()
            if self.team is not None:
                self.team.leave()
            if self.team_gave_up:
                try:
                    self.ranks.release_peers()
                except Exception:
                    pass

    def restore(self):
        self.launches.stop()
        if self.stream_windows is not None:
            failed = self.stream_windows.restore()
            for e in failed:
                self.notes.append(f"restoring a stream's window failed: {e}")
            self.streams_restored = not failed
        if self.device is None or self.limit_before is None:
            return
        try:
            if self.device.persisting_l2_limit != self.limit_before:
                self.device.persisting_l2_limit = self.limit_before
            _core.reset_persisting_l2(self.device)
            self.restored = self.limit_before
        except Exception as e:
            self.notes.append(f"restoring the set-aside failed: {e}")


def load_plan(path: str) -> dict:
    """Read and check a plan document; every field named in the error. Only a regular file
    is read, and at most 16 MiB of it (a window takes a few hundred bytes): a directory, a
    device (/dev/zero), a FIFO is named for what it is and never read (O_NONBLOCK: opening a
    FIFO does not wait for a writer)."""
    import errno
    import stat
    from .plan_doc import check_plan
    cap = 1 << 24
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        why = "no such file" if e.errno == errno.ENOENT else f"cannot read ({e.strerror})"
        raise ValueError(f"plan: {why} {path!r}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a character device"
                    if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
                    "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket"
                    if stat.S_ISSOCK(mode) else "not a file")
            raise ValueError(f"plan: {path!r} is {kind}, not a regular file: give the JSON "
                             f"file that advise wrote")
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(cap + 1)
    except OSError as e:
        raise ValueError(f"plan: cannot read {path!r}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > cap:
        raise ValueError(f"plan: {path!r} is larger than {cap >> 20} MiB: not a plan "
                         f"document")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ValueError(f"plan: {path!r} is not a JSON plan document ({type(e).__name__})") \
            from None
    return check_plan(doc, path)
