"""Watching a running program: the live advisor, ``verify`` and ``apply`` inside the program.

The bootstrap (``l2persist.process.bootstrap``) makes one :class:`Watcher` before the
program's code runs and hooks the program's own calls into it: every ``torch.cuda.CUDAGraph``
capture (kept raw, scanned, named by its signature), every graph replay, every host
synchronization and ``l2persist.mark()``. Those calls are the only points where anything is
switched: the watcher runs on the program's thread, between its calls, never while a capture
is open, and never calls the program's work. The program's kernels are timed by CUDA's
activity records (``_core.activity_*``); the search and its verdict are the C core's
(``_core.live_*``); this module keeps the bookkeeping: which graphs exist, which block ran
under which arm, and how to install an arm (the set-aside and windows on graph nodes).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from .. import _core
from .._format import kernel_label
from . import streams as _streams

PLAN_FORMAT = _core.live_plan_format()  # the core owns the document (csrc/core/l2p_live.h)
#: In a team, ranks agree on the warm-up's and the probe's end at every this many calls.
TEAM_EVERY = 16
#: After the decision, this many units at least (8 blocks' worth if more) are timed with nothing
#: recorded, for the summary's watch_cost.
AFTER_UNITS = 64
# The after-decision timing gives up past this many of the program's calls or seconds (the
# unit no longer comes): the per-call hooks come off only once it has ended.
AFTER_CALLS_MAX = 200_000
AFTER_S_MAX = 120.0
# A rest's gate stays closed this long at most (a rest of the H200's server loop: ~0.3 s).
REST_GATE_MAX_S = 10.0
#: Under a launcher other than torchrun, how long the warm-up waits for the program's process
#: group (whose store the ranks meet at) before each rank goes on alone.
TEAM_WAIT_S = 30.0
#: The rest before a block is sized from this many rest-then-block pairs (the newest ones); until
#: that many exist each rest is one block long.
REST_PAIRS = 3
#: apply logs launches this long a try, this many tries at most, to match its stream windows.
APPLY_LOG_S = 0.5
APPLY_TRIES = 3
#: The summary's per_key section lists this many launch keys, the heaviest in the probe.
PER_KEY_SHOWN = 20
#: ... from this long after its first watched call (not advise's --warmup, 2 s by default: a
#: program of a few seconds ended before its log began, H200 8cce687).
APPLY_WARMUP_S = 0.25
#: advise notes the share of the warm-up's GPU time in kernels no captured graph holds from this
#: share on (their buffers get no window: see _note_ungraphed).
UNGRAPHED_NOTE = 0.05


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
    # would read short (Watcher._install's fresh executables)
    recorded_exec: bool = False
    renew_failed: bool = False     # its owner could not be made to instantiate it again
    # where each target lies in this graph (Watcher._targets): the index in `uses` of its
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
        re-instantiate it even where no window changes (see Watcher._install). False when
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


@dataclass
class Target:
    """One range the hot graphs' kernels point into (_core.live_ranges: a tensor inside a
    shared segment, or a flat tensor's per-layer slices together), wherever it is used: a
    window on it is put on the nodes whose words point into it, in every graph that has them.
    places: (graph, at) pairs; at: the index of the graph's anchor word in its uses (its
    nodes: GraphSeen.spans), or an eager group's record (its whole allocation, on its stream)."""
    address: int
    size: int
    weight: float = 0.0
    places: list = field(default_factory=list)


@dataclass
class Block:
    arm: int
    start: int                     # CUPTI stamps (ns)
    end: int = 0
    units: int = 0
    rest_ns: int = 0               # the unrecorded rest just before it, under the same arm: the
    rest_units: int = 0            # counted part (an unhooked rest's tail) and its units
    rest_wall_ns: int = 0          # the whole rest
    rest_unhooked: bool = False    # its uncounted part ran with the hooks' gate closed
    settle_ns: int = 0             # recorded, uncounted: from the rest's end to its start
    settle_units: int = 0
    share: float | None = None     # the probe's GPU time in launch keys seen in the block
    sample: float | None = None    # what the search was given: ms per unit at the probe's mix


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
        self.tracking_ended = False                # _end_tracking: the core's count no longer asked
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
        self.spanning = 0                          # impossible records dropped (see _end_rest)
        self.mix_ref: dict = {}                    # the probe's by_key (_begin_search)
        self.key_sums: dict = {}                   # arm -> launch key -> [ns, launches] of
                                                   # its blocks given to the search
        self.rest_units = 0                        # the length of the latest rest
        self.rests_capped = 0                      # rests sized at the cap (see _rest_length)
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
        # rest's uncounted part (_rest_unhooked)
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

    # ---- the program's calls ---------------------------------------------------------------

    def capture_begin(self):
        with self.lock:
            self.captures += 1
            self.captures_begun += 1
            if self.stream_windows is not None:
                self.stream_windows.suspend()  # a captured node would copy its stream's window
            if self.logging:       # a capture's launches are no eager work: the log starts over
                self._log_stop()
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
                self._log_begin()

    def fail(self, where: str, e: BaseException) -> None:
        """A hook failed: say where (with the traceback's last frames), stop switching and put
        back the better-known state (the set-aside the program started with). The program's
        call goes on."""
        import traceback
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])
        self.notes.append(f"{where} failed, watching stopped: {type(e).__name__}: {e}\n{tb}")
        self._after = None         # a failing after-decision timing must not keep the hooks
        self._log_stop()
        self._capture_open()       # the switch lock where no capture is open (see finish)
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
        self._end_tracking()
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
                self._switch_release()     # first: a capture on another thread may wait on it
                if self.unhook_calls is not None and self.state in ("done", "off") and \
                        self._quiet():
                    self._unhook()
            finally:
                self.lock.release()

    def tick(self) -> bool:
        """A switch point from the watcher's own clock (process/clock.py), for programs whose
        calls never reach the watcher (implicit syncs, a library's loop). What it switches, it
        switches inside the core's switch lock (taken where it asks whether a capture is open:
        _capture_open), which no capture can begin under and which is refused while one is
        open anywhere in the process. It never touches the program's CUDA before the program
        has (_clock_armed), never acts while the program has graphs the watcher knows (their
        executables are made again on a switch, which must not race the program's own
        replays: those programs' replays are the switch points), and waits for nothing: a
        program's call that is switching now, or an open capture, lets this tick go. False
        once the clock is no longer wanted."""
        if self.state in ("done", "off") or self.o.mode == "apply" or self.o.world > 1:
            return False
        if self.graphs or not self._clock_armed():
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
                self._switch_release()
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

    def _clock_armed(self) -> bool:
        """Whether the clock may act: the program has loaded CUDA's driver itself (asked
        without loading it: a CUDA call of ours before the program's would read
        CUDA_VISIBLE_DEVICES before a script sets it), captures are counted (CUDA's callbacks:
        started here, from the clock's thread, once), and in the idle state the program has
        made its context (asked, never made)."""
        if self.clock_tracking is None:
            if not _driver_loaded():
                return False
            try:
                _core.capture_watch_begin(self.o.device)
                self.clock_tracking = True
            except Exception as e:     # another CUPTI subscriber (a profiler), no CUPTI
                self.clock_tracking = False
                self.notes.append(f"captures are not tracked here ({e}): the watcher switches "
                                  f"only at the program's own calls")
        if not self.clock_tracking:
            return False
        return self.state != "idle" or self._context_made()

    def _context_made(self) -> bool:
        """The program has made its context on the watched device (asked, never made)."""
        try:
            return bool(_core.context_active(self.o.device))
        except Exception:
            return False

    def _flag_recorded(self, kind, torch_graph, seen=False):
        """The graph about to be replayed is launched with CUPTI recording: after a pause its
        executable must be made again before it is recorded (Watcher._install's fresh). Read
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
            self._join_team()

    def _join_team(self):
        """Meet the other ranks once their store exists. torchrun's agent may host it before any
        rank starts; otherwise (other rendezvous backends, mpirun, srun) rank 0's
        ``init_process_group`` does, and a rank that waited for it before its own call would
        stall (rank 0 on itself). Until then the warm-up goes on (``team_pending``); a program
        that makes no process group within TEAM_WAIT_S is advised rank by rank, with a note."""
        from . import team
        if not team.store_ready():
            self.team_pending = True
            if time.perf_counter() - self.team_wait_t0 >= TEAM_WAIT_S:
                self._give_up_team()
            return
        self.team_pending = False
        self.team, why = team.from_env()
        if why:
            self.notes.append(why)

    def _give_up_team(self):
        waited = time.perf_counter() - self.team_wait_t0
        self.team_pending = False
        self.team_gave_up = True
        self.notes.append(f"the ranks did not meet within {waited:.0f} s (no process group, and "
                          "no torchrun agent's store): each rank advised alone, so collectives "
                          "may confound the verdict")

    def _release_peers(self):
        """A rank that went on alone: once the store exists after all, it says so there, so
        that a peer which met it in time stops waiting for it at once (not after 60 s)."""
        from . import team
        if team.store_ready():
            self.team_gave_up = False
            t, _why = team.from_env()
            if t is not None:
                t.leave()

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
            self._apply_plan_windows(seen, install=self.o.mode == "apply")

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
            self._release_peers()  # peers that met in time learn that this rank is not coming
        if seen is not None:
            seen.replays += 1
        self.points[kind] += 1
        if self.state == "search":     # before every replay while searching: first
            self._search_point(kind, torch_graph, seen)
            return
        if self.o.mode == "apply":
            self._apply_point()
            return
        if self.state == "off":
            return
        if self.state == "done":
            if self._after is not None:
                self._count_after(kind, seen)
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
                    self._begin_probe()
                else:
                    self._begin_search()

    def _search_point(self, kind, torch_graph, seen):
        if self._clock_lost:
            if not self._capture_open():
                self._clock_lost = False
                self.notes.append("the program began capturing CUDA graphs after the search "
                                  "had begun on the watcher's clock, which never acts beside "
                                  "graphs: the search stopped here; a longer --warmup lets "
                                  "the graphs come first")
                self.result = _core.live_finish()
                self._decide()
            return
        if self._first_block_due:
            if not self._capture_open():
                self._first_block_due = False
                self._next_block(_core.activity_now())
            return
        r = self.resting
        if r is not None and r.get("unhooked") and "tail_t0" not in r \
                and not self._begin_tail(r):
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
            if self.units_now >= r["units"] and not self._capture_open():
                self._end_rest(kind, torch_graph)
            return
        if self.settling is not None:
            self._settle(kind, torch_graph)
            return
        if self.units_now >= self.units_per_block:
            if self._capture_open():
                return             # never switch while a capture is open
            try:
                self._end_block()
            except _NoRecords as e:
                self.notes.append(f"search stopped: {e}")
                self.result = _core.live_finish()
                self._decide()

    def _capture_open(self) -> bool:
        """Whether a capture is open, asked right before anything is switched: PyTorch's
        through its hooks, or any in the process that the core counts (CUDA's callbacks:
        another library's, another thread's). Where none is, the answer takes the core's switch
        lock (l2p_switch_enter) and holds it to the end of this call of the watcher (point and
        tick let it go): a capture that begins meanwhile, on any thread, waits until the
        switch is done, so "none open" stays true while this call switches."""
        if self.captures or _capturing():
            return True
        if self.tracking_ended:
            return False
        me = threading.get_ident()
        if self._switch_held == me:
            return False
        if not _core.switch_enter():
            return True            # one is open, or its begin is waiting for a switch
        self._switch_held = me
        return False

    def _end_tracking(self):
        """The capture count's CUPTI callbacks off once nothing switches any more (decided,
        stopped, at exit): the process's one subscriber is free again for a profiler the
        program starts later. Outside the switch lock, as the launch log's calls; from here
        _capture_open asks PyTorch only (a count that stopped may stay high for good)."""
        self._switch_release()
        if self.tracking_ended:
            return
        self.tracking_ended = True
        if self.clock_tracking:
            try:
                _core.capture_watch_end()
            except Exception:
                pass

    def _switch_release(self):
        """The switch lock back, where this thread's call took it."""
        if self._switch_held == threading.get_ident():
            self._switch_held = None
            _core.switch_leave()

    def _count_after(self, kind, seen):
        """Wall time per unit of work under the final arm with nothing recorded or switched
        (after the decision), beside the same arm's recorded blocks: the watcher's own cost to
        the program, measured in the program (the summary's ``watch_cost``)."""
        a = self._after
        a["calls"] += 1
        if a["calls"] > AFTER_CALLS_MAX or time.perf_counter() - a["since"] > AFTER_S_MAX:
            # the unit stopped coming (a new shape captured, the program idle): no figure,
            # and the hooks must not stay on for it
            self._after = None
            self.notes.append("the wall time after the decision was not timed: the unit of "
                              "work did not come often enough")
            return
        if not self._is_unit(kind, seen):
            return
        if a["t0"] is None:
            # from a unit's boundary on, the GPU drained at both ends as around each block:
            # a GPU-bound program's host runs ahead of its GPU, and host time alone read a
            # training step at 0.30 ms a unit against its blocks' 0.66 (H100, 160237b): the
            # host's launch rate, not the program's throughput
            if not self._capture_open():
                self.device.synchronize()
                a["t0"] = time.perf_counter()
            return
        a["units"] += 1
        if a["units"] >= a["need"] and not self._capture_open():
            self.device.synchronize()
            now = time.perf_counter()
            self.after_decision = {"units": a["units"],
                                   "wall_ms_per_unit": (now - a["t0"]) / a["units"] * 1e3}
            self._after = None

    def _watch_cost(self, per_arm: dict):
        d = per_arm.get(self.final_arm) if self.final_arm is not None else None
        after = self.after_decision
        if not d or not d["wall_ms_per_unit"] or not after:
            return None
        walls = d["wall_ms_per_unit"]
        recorded = statistics.median(walls)
        return {"recorded_wall_ms_per_unit": recorded, "recorded_blocks": len(walls),
                "unrecorded_wall_ms_per_unit": after["wall_ms_per_unit"],
                "unrecorded_units": after["units"],
                "ratio": recorded / after["wall_ms_per_unit"]}

    def _phase_over(self, capturing: bool | None, kind: str = "replay") -> bool:
        """Whether the warm-up (or the probe) ends at this call. Alone: by this process's clock,
        never while a capture is open. In a team: every TEAM_EVERY-th call, by the leader's
        clock, where no rank is capturing (ranks count the same calls, so they agree at the
        same one). capturing None: asked here, only when it decides."""
        if self.team_pending:
            if threading.get_ident() == self.thread:   # ranks count the same thread's calls
                self._join_team()
                if self.team is not None:
                    return False   # this call met the team: decisions count from the next
            elif time.perf_counter() - self.team_wait_t0 >= TEAM_WAIT_S:
                self._give_up_team()   # the counting thread went quiet: no lockstep to keep
            if self.team_pending:
                return False       # the ranks have not met yet: nobody moves on alone
        now = time.perf_counter()
        if self.state == "warmup":
            due = now - self.t0 >= self.o.warmup_s
        else:
            due = now - self.probe_t >= max(0.25, self.o.warmup_s / 2)
        if self.team is None:
            return due and not (self._capture_open() if capturing is None else capturing)
        if kind == "sync" and (self.points["replay"] or self.points["mark"]):
            return False           # a rank's own syncs (logging on rank 0) are not shared
        self.team_points += 1
        if self.team_points % TEAM_EVERY:
            return False
        if capturing is None:
            capturing = self._capture_open()
        docs = self.team.gather({"due": due, "capturing": capturing})
        return bool(docs[0]["due"]) and not any(d["capturing"] for d in docs)

    def _sig(self, torch_graph):
        seen = self._seen(torch_graph)
        return seen.signature if seen is not None else None

    def _begin_probe(self):
        """After the warm-up (imports, compiles, captures settle): a short steady stretch that
        says what a unit of work is, how many units a block holds, and which kernels take the
        GPU's time (the targets' weights)."""
        self.probe_counts: dict[tuple, int] = {}
        self.device.synchronize()
        self._resume()                 # kernels launched from here on are recorded
        self._log_begin()
        self._warm_ns = _core.activity_now()
        self.probe_t = time.perf_counter()
        self.state = "probe"

    # ---- eager launches (streams.py) -----------------------------------------------------------

    def _log_begin(self) -> bool:
        """Log the program's kernel launches from here (the probe; apply: until its stream
        windows matched): their streams and argument words, which the activity records lack.
        The log's CUPTI calls (enabling callbacks on the subscriber the capture count shares)
        are made outside the switch lock: a capture's begin may be waiting inside CUPTI's
        callback for that lock. Whatever this call switches after it asks again."""
        self._switch_release()
        try:
            _core._launch_log_begin(self.o.device)
            self.logging = True
        except Exception as e:     # another CUPTI subscriber (a profiler), no CUPTI
            self.notes.append(f"eager launches not logged (no stream windows): {e}")
        return self.logging

    def _log_take(self) -> list:
        """Stop the log; the recurring eager launches it saw, grouped (streams.launch_groups)."""
        if not self.logging:
            return []
        self._switch_release()     # outside the switch lock, as _log_begin says
        self.logging = False
        kernels, records, uses, dropped = _core._launch_log_take([])
        del dropped                # a full log still holds every recurring launch many times
        return _streams.launch_groups(kernels, records, uses)

    def _log_stop(self):
        if self.logging:
            self._switch_release()     # outside the switch lock, as _log_begin says
            self.logging = False
            try:
                _core._launch_log_take(None, discard=True)
            except Exception:
                pass

    def _apply_point(self):
        """apply, with stream windows in the plan: the launch log runs from the first watched
        call until each of them matched a launch (APPLY_LOG_S of launches a try, APPLY_TRIES
        tries), the windows are set on the launches' streams at the call that took the log, and
        the call hooks come off: from there apply adds nothing to a call or a launch."""
        a = self.apply_log
        if a is None or a.get("over"):
            return
        now = time.perf_counter()
        if "pending" in a:         # taken at a call that then found a capture open
            if self._capture_open():
                return
            groups = a.pop("pending")
        elif not self.logging:
            if a.setdefault("since", now) > now - APPLY_WARMUP_S or self._capture_open():
                return             # the program's first calls (loading, compiling): no sample
            if a["tries"] >= APPLY_TRIES or not self._log_begin():
                self._apply_over()
                return
            a["tries"] += 1
            a["t0"] = time.perf_counter()
            return
        else:
            if now - a["t0"] < APPLY_LOG_S or self._capture_open():
                return             # captures asked only where it acts: this runs every call
            groups = self._log_take()  # outside the switch lock: asked again before windows
            if self._capture_open():
                a["pending"] = groups
                return
        for g in groups:
            if _streams.known(g.stream):
                self._apply_plan_windows(g, install=True)
                if g.windows_applied:
                    self.eager.append(g)
        if self._stream_plan:
            self._set_stream_windows(self._stream_plan)
        if all(e.get("_applied") or e.get("_superseded")
               for e in self.plan_doc["windows"] if e.get("stream")):
            self._apply_over()

    def _apply_over(self):
        self.apply_log["over"] = True
        self._log_stop()
        self._unhook()

    def wants_calls(self) -> bool:
        """Whether apply needs the program's calls (its plan has stream windows to match)."""
        return self.apply_log is not None

    def _eager_from_log(self):
        """The probe's eager launches: those on streams known to live become places for
        windows; the GPU time of those on other streams is noted (no window is set there)."""
        groups = self._log_take()
        ns = self.kernel_ns_warmup
        for g in groups:
            if _streams.known(g.stream):
                self.eager.append(g)
            else:
                self.unknown_streams[g.stream] = self.unknown_streams.get(g.stream, 0.0) + \
                    ns.get(g.names[0], 0.0)
        if self.unknown_streams and self.o.mode == "advise":
            total = sum(ns.values()) or 1.0
            share = sum(self.unknown_streams.values()) / total
            if share >= UNGRAPHED_NOTE:
                self.notes.append(f"{100 * share:.0f} % of the warm-up's GPU time ran in eager "
                                  f"kernels on {self._unknown_streams_said()}")

    def _unknown_streams_said(self) -> str:
        made = [s for s in self.unknown_streams if s != _streams.PER_THREAD]
        said = []
        if made:
            said.append(f"{len(made)} stream(s) the program made itself (not PyTorch's pool or "
                        f"a default stream): it may destroy them")
        if _streams.PER_THREAD in self.unknown_streams:
            said.append("a per-thread default stream: each thread has its own, and the "
                        "watcher's thread is not the one that launched them")
        return " and on ".join(said) + ", so no window is set there"

    def _is_unit(self, kind, seen) -> bool:
        """``seen``: the replayed graph as seen (None: not one the watcher knows)."""
        if self.unit is None or self.unit[0] != kind:
            return False
        return kind != "replay" or (seen is not None and seen.signature == self.unit[1])

    def _choose_unit(self, elapsed: float):
        """A mark, else the busiest graph's replay, else a sync; the clock's tick where that
        comes less than once a block (a program whose syncs are implicit makes none)."""
        c = self.probe_counts
        replays = {k: v for k, v in c.items() if k[0] == "replay" and k[1] is not None}
        if c.get(("mark",)):
            unit = ("mark",)
        elif replays:
            unit = max(replays, key=replays.get)
        else:
            unit = ("sync",)
        if c.get(("tick",)) and c.get(unit, 0) / elapsed * self.o.block_s < 1:
            unit = ("tick",)
        return unit

    # ---- the search --------------------------------------------------------------------------

    def _begin_search(self):
        dev = self.device
        dev.synchronize()
        now = _core.activity_now()
        _core.activity_flush()
        warm = self._warm_stamp
        probe = _core.activity_blocks([warm, now]) if warm and now > warm else {}
        by_name = probe.get("by_name", {})
        elapsed = max(1e-6, time.perf_counter() - self.probe_t)
        self.unit = self._choose_unit(elapsed)
        units = self.probe_counts.get(self.unit, 0)
        # the reference the blocks are priced at: each launch key's launches in the probe
        # (the program's own mix, under the device's default) per unit of work (l2p_live_mix)
        self.mix_ref, self.mix_units = probe.get("by_key", {}), max(1, units)
        if self.o.block_units:
            self.units_per_block = self.o.block_units
        else:
            self.units_per_block = max(1, round(units / elapsed * self.o.block_s))
        self.kernel_ns_warmup = {k: v[0] for k, v in by_name.items()}
        self._eager_from_log()
        if self.o.mode == "verify" and self.plan_doc is not None:
            for g in self.eager:
                self._apply_plan_windows(g, install=False)
        self.targets = self._targets(self.kernel_ns_warmup)
        self._note_ungraphed()
        weights = [t.weight for t in self.targets]
        if self.team is not None:
            weights = self._follow_leader()
        p = dev.properties
        self.verify_base = None
        if self.o.mode == "verify":
            self.arms = self._verify_arms()
            self.verify_base = self._baseline_of(self.arms[2])
        if self.o.mode == "verify" and self.verify_base is None:
            _core.live_begin(3, confirm_only=True, min_gain=self.o.min_gain,
                             target_halfwidth=_core.live_defaults()["verify_halfwidth"])
        else:
            # advise, or verify of a plan that is a baseline ("don't"): checking it against
            # itself would always say it holds, so the question becomes whether any arm helps
            # now (a short search over the same arms advise tries)
            self.arms = _core.live_arms([t.size for t in self.targets], weights,
                                        granule=dev.persisting_l2_granule,
                                        persisting_max=p.persisting_l2_cache_max_size,
                                        l2_bytes=p.l2_cache_size)
            _core.live_begin(len(self.arms), min_gain=self.o.min_gain)
        self.state = "search"
        self.search_t0 = time.perf_counter()
        self.hook_marks = [(self.search_t0, self.hook_ns)]
        if self._capture_open():   # asked again: taking the launch log let the lock go
            self._first_block_due = True   # it begins at the next call with no capture open
            return
        self._next_block(now)

    def _note_ungraphed(self):
        """Say how much of the warm-up's GPU time ran in kernels no window reaches: in no
        captured graph, and not among the eager launches logged on streams known to live
        (streams.py). Their buffers are not tried, and a verdict of "don't" says nothing about
        them."""
        # by name: a kernel launched both eagerly and in a graph counts as the graph's, and
        # kernels past the log's name table (unknown) count in the total only, so the share
        # is a lower bound
        in_graphs = {n for g in self.all_graphs() + self.eager for n in g.names}
        ns = self.kernel_ns_warmup
        total = sum(ns.values())
        if not total > 0:
            self.ungraphed = {"share": None, "heaviest": []}   # no records: nothing to say
            return
        outside = {k: v for k, v in ns.items()
                   if k not in in_graphs and k != "(other kernels)" and v > 0}
        share = sum(outside.values()) / total
        self.ungraphed = {"share": share,
                          "heaviest": sorted(outside, key=outside.get, reverse=True)[:3]}
        if self.o.mode == "advise" and share >= UNGRAPHED_NOTE:
            names = ", ".join(kernel_label(k) for k in self.ungraphed["heaviest"])
            how = "all" if share >= 0.995 else f"at least {100 * share:.0f} %"
            self.notes.append(f"{how} of the warm-up's GPU time ran in kernels that no window "
                              f"can reach (no captured graph holds them, and no launch of "
                              f"theirs on a stream known to live was logged; the heaviest: "
                              f"{names}): their buffers were not tried")

    def _follow_leader(self) -> list:
        """Team: the leader's unit of work, block length and targets (in its order, with its
        weights) are every rank's, so the arm table and the blocks are the same on all. Where a
        rank never made the leader's unit of work (ranks run different graphs: pipeline
        stages) or the GPUs differ (arm tables would differ), every rank sees it in the same
        documents and all go on alone, with a note."""
        from .team import adopt_targets, target_key
        p = self.device.properties
        docs = self.team.gather({"unit": list(self.unit), "units": self.units_per_block,
                                 "targets": [target_key(t) for t in self.targets],
                                 "weights": [t.weight for t in self.targets],
                                 "counts": [[list(k), v] for k, v in self.probe_counts.items()],
                                 "facts": [self.device.persisting_l2_granule,
                                           p.persisting_l2_cache_max_size, p.l2_cache_size]})
        lead = docs[0]
        unit = tuple(lead["unit"])
        lacking = [r for r, d in enumerate(docs)
                   if not any(tuple(k) == unit and v for k, v in d["counts"])]
        differ = [r for r, d in enumerate(docs) if d["facts"] != lead["facts"]]
        if lacking or differ:
            why = (f"rank(s) {lacking} never made the leader's unit of work" if lacking else
                   f"rank(s) {differ} have another GPU than rank 0")
            self.notes.append(f"ranks not in lockstep: {why}; each rank advised alone")
            self.team.leave()
            self.team = None
            return [t.weight for t in self.targets]
        self.unit = unit
        self.units_per_block = int(lead["units"])
        self.targets, missing = adopt_targets(self.targets, lead["targets"])
        if missing:
            self.notes.append(f"rank {self.o.rank}: {missing} of the leader's targets are not "
                              "in this rank's graphs; their windows land nowhere here")
        return [float(w) for w in lead["weights"]]

    @property
    def _warm_stamp(self):
        return getattr(self, "_warm_ns", None)

    def _targets(self, kernel_ns: dict) -> list:
        """The ranges the replayed graphs' kernels point into (the core's rule,
        l2p_live_ranges), by address (the same table used by three decode graphs is one
        target), each weighted by the warm-up's GPU time of the nodes whose words point into
        it; an eager group's, the allocations it uses. The C core ranks them (l2p_live_arms)."""
        seen = [g for g in list(self.graphs.values()) + self.eager
                if g.replays and g.ref() is not None]   # not: never replayed, or dropped
        node_ns = _node_ns(kernel_ns, seen)
        by_addr: dict[tuple, Target] = {}

        def target(address, size):
            return by_addr.setdefault((address, size), Target(address, size))
        for g in seen:
            if g.eager:   # a stream window: the whole allocations (apply matches them whole)
                for i, (address, size, _offer) in enumerate(g.records):
                    t = target(address, size)
                    t.places.append((g, i))
                    t.weight += sum(node_ns[id(g)][n] for n in g.nodes_of(i))
        graphs = [g for g in seen if not g.eager]
        kernels: dict[str, int] = {}
        words = [(gi, u[0], u[1], u[2], kernels.setdefault(g.names[u[0]], len(kernels)), u[3],
                  g.records[u[4]][0], g.records[u[4]][1], node_ns[id(g)][u[0]])
                 for gi, g in enumerate(graphs) for u in g.uses]
        ranges, range_of = _core.live_ranges(words)
        k = 0
        for g in graphs:
            at: dict[int, int] = {}           # range -> its anchor: the graph's lowest word in it
            nodes: dict[int, set] = {}
            for i, u in enumerate(g.uses):
                r, k = range_of[k], k + 1
                if r not in at or u[3] < g.uses[at[r]][3]:
                    at[r] = i
                nodes.setdefault(r, set()).add(u[0])
            g.spans = {i: sorted(nodes[r]) for r, i in at.items()}
            for r, i in at.items():
                target(*ranges[r][:2]).places.append((g, i))
        for address, size, weight, _readers, _pieces in ranges:
            target(address, size).weight += weight
        out = sorted(by_addr.values(), key=lambda t: -t.weight)
        return out  # the core ranks the first L2P_LIVE_MAX_TARGETS (heaviest first here)

    def _end_block(self):
        t_switch = time.perf_counter()
        self.device.synchronize()           # nothing launched under this arm runs after now
        end = _core.activity_now()
        t_synced = time.perf_counter()      # from here, the switch's own work
        b = self.blocks[-1]
        b.end, b.units = end, self.units_now
        over = bool(self.o.budget_s) and time.perf_counter() - self.search_t0 > self.o.budget_s
        rest = self._rest_length()
        if self.team is not None:     # the leader's clock and pace: ranks switch together
            lead = self.team.gather({"over": over, "rest": rest})[0]
            over, rest = bool(lead["over"]), int(lead["rest"])
        if over:
            self._record_pending()
            self.result = _core.live_finish()
            self.notes.append(f"the budget ({self.o.budget_s:g} s) ran out before a decision")
            self._decide()
            return
        arm = _core.live_next()
        while arm == -2:
            self._record_pending()
            arm = _core.live_next()
        if arm == -1:
            self.result = _core.live_result()
            self._decide()
            return
        t_install = time.perf_counter()
        self.windows_ms.append(self._install(arm, fresh=rest > 0))
        done = time.perf_counter()
        # the search's bookkeeping (records flushed and cut, a team's gathers) and the install:
        # what a switch costs the program beyond the synchronization's wait
        self.switch_work_ms.append((done - t_synced) * 1e3)
        self.install_ms.append((done - t_install) * 1e3)
        self.switch_ms.append((done - t_switch) * 1e3)
        self.rest_units = rest
        if rest:
            self._begin_rest(arm, rest)
        else:
            self._next_block(_core.activity_now(), arm)

    # ---- the pace: rests between blocks --------------------------------------------------------

    def _rest_length(self) -> int:
        """Units to run unrecorded (CUPTI paused) under the next arm before its block, so that
        observing (the switch and the block's recording, and the hooks on every call) adds at
        most ``max_overhead`` of the program's wall time: the core sizes it
        (l2p_live_rest_units) from the newest rest-then-block pairs, which time the same arm
        unrecorded and recorded, and the hooks' share of the newest sixteen cycles' wall,
        which a rest hides only where it runs with their gate closed."""
        pairs = []                           # the newest 16, scanned from the end
        for b in reversed(self.blocks):
            if len(pairs) == 16:
                break
            if b.end and b.units and b.rest_units:
                pairs.append(b)
        rest_s = block_s = None
        recorded = self.units_per_block      # a cycle's recorded units: its block and settle
        if len(pairs) >= REST_PAIRS:
            rest_s = statistics.median(b.rest_ns / b.rest_units for b in pairs) / 1e9
            self.rest_s = rest_s
            block_s = statistics.median((b.end - b.start + b.settle_ns)
                                        / (b.units + b.settle_units) for b in pairs) / 1e9
            recorded += round(statistics.median(b.settle_units for b in pairs))
        work = self.switch_work_ms[-16:]
        switch_s = statistics.median(work) / 1e3 if work else None
        # the hooks' own time over the newest sixteen cycles: the bound is on both;
        # the first rests run hooked until a rate is known, so a share since the start would
        # stay high long after the gate took most of the hooks' cost away
        now = time.perf_counter()
        marks = self.hook_marks
        marks.append((now, self.hook_ns))
        del marks[:-17]
        t0, ns0 = marks[0] if len(marks) > 1 else (self.search_t0, 0)
        hooks = (self.hook_ns - ns0) / 1e9 / (now - t0) if self.hook_calls and now > t0 \
            else None
        units, capped = _core.live_rest_units(recorded, switch_s, rest_s, block_s,
                                              max_overhead=self.o.max_overhead,
                                              cycle=len(self.blocks),
                                              hooks_share=min(hooks, 1.0) if hooks else None)
        # the bound needed more than the cap: the summary says so rather than let it read as met
        self.rests_capped += capped
        return units

    def _begin_rest(self, arm: int, units: int):
        """The rest also lets the new arm settle (its lines fill) before it is timed."""
        self.steps += 1
        if not self.paused:
            _core.activity_record(False)
            self.paused = True
        self.resting = {"arm": arm, "start": _core.activity_now(), "units": units}
        self.units_now = 0
        self._rest_unhooked(self.resting)

    def _rest_unhooked(self, r: dict):
        """The rest's units but its last block's worth run with the per-call hooks' gate
        closed (the hooks cost a host-bound program ~3 us a call in the watcher, H200 server
        loop at 495cdaa and a4a7db0: 2.7 % of the search's wall, and a rest is most of it):
        for the time those units took in the newest rests; then a timer opens the gate, and at
        the program's next call the GPU is drained and the last block's worth is counted and
        timed as every rest was (the per-unit rate the pace and the shares use). Alone only
        (ranks count the same calls), and only once a rate is known."""
        tail = self.units_per_block
        if (self.rest_hooks is None or self.team is not None or not self.rest_s
                or r["units"] < 3 * tail):
            return
        # a program slower in the newest rests (idle) than now would keep the gate closed
        # long past its units: at most REST_GATE_MAX_S, then counted as any rest
        off_s = min((r["units"] - tail) * self.rest_s, REST_GATE_MAX_S)
        r.update(units=tail, unhooked=True)
        self.rest_hooks[0]()
        t = threading.Timer(off_s, self._rehook_rest, args=(r,))
        t.daemon = True     # a program that ends mid-rest is not kept waiting for it
        self.rest_timer = t
        t.start()

    def _rehook_rest(self, r: dict):
        """On the timer's thread: the gate open; nothing else (the tail begins on the
        program's thread, between its calls)."""
        with self.lock:
            if self.resting is r and self.state == "search":
                r["tail_due"] = True
                self.rest_hooks[1]()

    def _begin_tail(self, r: dict) -> bool:
        """An unhooked rest's counted tail begins at this call, once the timer has opened the
        gate and no capture is open: the GPU drained (the tail is timed from there, as whole
        rests were from the block's end)."""
        if not r.get("tail_due") or self._capture_open():
            return False
        self.steps += 1              # this call waits on the GPU: not the hooks' own time
        self.device.synchronize()
        r["tail_t0"] = _core.activity_now()
        self.units_now = 0
        return True

    def _end_rest(self, kind=None, torch_graph=None):
        """Records on again, then a settle before the block: CUPTI's record of the first launch
        of a graph after the pause is wrong (it starts at the graph's last launch recorded
        before the pause: as long as the pause, H200), so the block begins once every graph
        the last block replayed has been launched again (at most a block's units later), and
        records that outlive their block are dropped (l2p_activity_blocks' spanning)."""
        self.steps += 1
        r, units = self.resting, self.units_now
        self.device.synchronize()           # the rest's work is done: the block times its own
        end = _core.activity_now()
        self.resting = None
        self._resume()
        # an unhooked rest counted its units from the hooks' return only (its tail): the rate
        # per unit is the tail's, the rest's wall its whole
        counted_from = r.get("tail_t0") or r["start"]
        need = set(self.replayed)
        if r.get("unhooked"):
            # graphs replayed while the gate was closed were not seen: those left stale
            # (their executable not made again) must launch again before the block too
            need |= {id(g.ref()) for g in self.graphs.values()
                     if g.renew_failed and g.ref() is not None}
        st = {"arm": r["arm"], "rest_ns": end - counted_from, "rest_units": units,
              "rest_wall_ns": end - r["start"], "unhooked": bool(r.get("unhooked")),
              "t0": _core.activity_now(), "need": need, "pre_ns": 0, "pre_units": 0}
        if r.get("recorded"):   # a capture turned the records on mid-rest: no unrecorded time
            st.update(rest_ns=0, rest_units=0, rest_wall_ns=0, pre_ns=end - counted_from,
                      pre_units=units)
        self.settling = st
        self.replayed = set()
        self.units_now = 0
        self._settle(kind, torch_graph)     # this call's launch comes after: in the settle

    def _settle(self, kind, torch_graph):
        """Alone: until every graph of the last block has launched again (a block's units at
        most). In a team the ranks must begin their blocks at the same count of their calls, and
        their graphs are their own: a fixed quarter block, with the spanning records dropped."""
        st = self.settling
        if self.team is not None:
            waiting = self.units_now < max(1, self.units_per_block // 4)
        else:
            waiting = bool(st["need"]) and self.units_now < self.units_per_block
        if waiting or self._capture_open():
            if kind == "replay":           # this launch comes after this call: in the settle
                st["need"].discard(id(torch_graph))
            return
        units = self.units_now
        if units:
            self.device.synchronize()      # the settle's queued kernels must not run in the block
        now = _core.activity_now()
        self.settling = None
        self._next_block(now, st["arm"])
        b = self.blocks[-1]
        b.rest_ns, b.rest_units = st["rest_ns"], st["rest_units"]
        b.rest_wall_ns, b.rest_unhooked = st["rest_wall_ns"], st["unhooked"]
        b.settle_ns, b.settle_units = now - st["t0"] + st["pre_ns"], units + st["pre_units"]

    def _watching(self) -> dict:
        """What watching cost the program during the search, measured in it: the switches' work,
        and the recorded blocks' (and settles') wall beyond what their units take unrecorded
        (the rests' total wall per unit: a total, as the share is one; a median would count a
        program's occasional slow unit, an eager prefill, as watching's), as a share of the
        search's wall time (switches, rests, settles and blocks). record_cost compares the
        medians per unit (a typical unit, recorded against not)."""
        done = [b for b in self.blocks if b.end and b.units]
        rested = [b for b in done if b.rest_units]
        out = {"max_overhead": (self.o.max_overhead if self.o.max_overhead is not None
                                else _core.live_defaults()["max_overhead"]),
               "rest_units": self.rest_units, "rests": len(rested),
               "rests_capped": self.rests_capped,
               "max_rest_ratio": _core.live_defaults()["max_rest_ratio"],
               "recorded_units": sum(b.units for b in done),
               "switch_work_ms_median": (statistics.median(self.switch_work_ms)
                                         if self.switch_work_ms else None),
               "install_ms_median": (statistics.median(self.install_ms)
                                     if self.install_ms else None),
               "windows_ms_median": (statistics.median(self.windows_ms)
                                     if self.windows_ms else None),
               "record_cost": None, "added_share": None, "hooks_share": None,
               "observing_share": None, "exploring_share": None, "exploring_worst": None}
        # an unhooked rest counted only its tail: its units estimated at the tail's rate
        out["rest_units_total"] = round(sum(
            b.rest_units * max(1.0, (b.rest_wall_ns or b.rest_ns) / b.rest_ns)
            for b in rested if b.rest_ns))
        out["rests_unhooked"] = sum(1 for b in rested if b.rest_unhooked)
        counted = out["recorded_units"] + out["rest_units_total"]
        out["recorded_share"] = out["recorded_units"] / counted if counted else None
        if not rested:
            return out
        unrec = sum(b.rest_ns for b in rested) / sum(b.rest_units for b in rested)  # ns/unit
        med_unrec = statistics.median(b.rest_ns / b.rest_units for b in rested)
        rec = statistics.median((b.end - b.start) / b.units for b in rested)
        work = sum(self.switch_work_ms) * 1e6
        # the settles are recorded too: watched time, counted with the blocks
        blocks = sum(b.end - b.start + b.settle_ns for b in done)
        units = out["recorded_units"] + sum(b.settle_units for b in done)
        wall = work + blocks + sum(b.rest_wall_ns or b.rest_ns for b in rested)
        added = work + blocks - unrec * units
        # the hooks' own time on the calls that switched nothing, paid in rests and blocks
        # alike: not in added_share; observing_share is the two together (what the search's
        # observing costs the program, but for the hooks' outer frames and CUPTI attached,
        # which tools/investigations/search-cost measures against the program run plain)
        hooks = self.hook_ns / wall
        out.update(self._exploring(done, wall))
        out.update(record_cost=rec / med_unrec - 1, added_share=max(0.0, added) / wall,
                   hooks_share=hooks, hook_us_per_call=(self.hook_ns / self.hook_calls / 1e3
                                                        if self.hook_calls else None),
                   observing_share=max(0.0, added) / wall + hooks,
                   unrecorded_ms_per_unit=unrec / 1e6,
                   settle_units=sum(b.settle_units for b in done),
                   spanning_records=self.spanning)
        return out

    @staticmethod
    def _exploring(done: list, wall: float) -> dict:
        """What the arms tried cost the program beyond its own pace, which observing does not
        count: the wall per unit of each arm's unrecorded rests against the two baselines'
        rests, applied to all the wall the arm ran (its rests, settles and blocks). A set-aside
        that taxes the program's other kernels makes every unit under it slower (the server's
        37.5 MiB arms' rests: about 12 % over the baselines', H200 5d07e18), and the program
        pays that while the arm is tried. Net of the arms that ran faster; wall time, so read
        it as a size: `exploring_share` of the search's wall (None until some candidate arm
        has rested), and `exploring_worst`, the costliest arm's ratio among those with two
        rests or more (one rest's median is one sample)."""
        rates: dict[int, list] = {}
        walls: dict[int, float] = {}
        for b in done:
            if b.rest_units and b.rest_ns:
                rates.setdefault(b.arm, []).append(b.rest_ns / b.rest_units)
            walls[b.arm] = walls.get(b.arm, 0.0) + (b.rest_wall_ns or b.rest_ns) \
                + (b.end - b.start) + b.settle_ns
        base = rates.get(0, []) + rates.get(1, [])
        tried = [a for a in rates if a not in (0, 1)]
        if not base or not tried or not wall > 0:
            return {"exploring_share": None, "exploring_worst": None}
        pace = statistics.median(base)
        over = {a: statistics.median(rates[a]) / pace for a in tried}
        # the wall each arm ran, less what its units take at the baselines' pace
        extra = sum(walls[a] * (1 - 1 / over[a]) for a in tried)
        worst = max((over[a] for a in tried if len(rates[a]) >= 2), default=None)
        return {"exploring_share": extra / wall, "exploring_worst": worst}

    def _next_block(self, stamp, arm=None):
        self.steps += 1
        if arm is None:
            arm = _core.live_next()
            self._install(arm)
            stamp = _core.activity_now()
        self.blocks.append(Block(arm, stamp))
        self.units_now = 0
        self.replayed = set()

    def _record_pending(self, alone: bool = False):
        """Give the search the samples of the blocks that ended (ms of GPU time per unit). In a
        team every rank gives the ranks' mean of the same blocks (``alone``: this rank's own,
        at exit, when peers may be anywhere)."""
        _core.activity_flush()
        done = [b for b in self.blocks[self.recorded:] if b.end]
        if not done:
            return
        try:
            samples, why = self._block_samples(done), None
        except _NoRecords as e:
            samples, why = [], str(e)
        if self.team is not None and not alone:
            from .team import mean_samples
            docs = self.team.gather({"samples": samples, "why": why})
            bad = [(r, d["why"]) for r, d in enumerate(docs) if d["why"]]
            if bad:
                raise _NoRecords("; ".join(f"rank {r}: {w}" for r, w in bad))
            samples = mean_samples(docs)
        elif why:
            raise _NoRecords(why)
        for v in samples:
            _core.live_record(v)
            self.recorded += 1
        # the summed blocks' records are read no more: each activity_blocks call scans the
        # whole log, which would otherwise grow with the program's run
        rest = self.blocks[self.recorded:]
        _core.activity_trim(rest[0].start if rest else self.blocks[self.recorded - 1].end)

    def _block_samples(self, done: list) -> list:
        bounds = []
        for b in done:
            bounds += [b.start, b.end]
        bounds = _increasing(bounds)
        res = _core.activity_blocks(bounds)
        self.spanning += res.get("spanning", 0)
        if not self.mix_ref:
            raise _NoRecords("the probe recorded no kernel of the program")
        # each block priced at the probe's mix: the blocks' own mixes do not enter the sample
        priced, shares = _core.live_mix(self.mix_ref, res["by_key"], len(bounds) - 1,
                                        self.mix_units)
        out = []
        for k, b in enumerate(done):
            ns = res["gpu_ns"][2 * k]
            b.gpu_ns = ns
            b.by_name = {name: row[2 * k] for name, row in res["by_name"].items() if row[2 * k]}
            b.share, b.sample = shares[2 * k], priced[2 * k]
            if not (ns > 0 and priced[2 * k] > 0):
                # No kernel the probe saw ran in a whole block: the records are not arriving
                # (another tool took CUPTI's activity buffers) or the program's work changed
                # wholly, so nothing can be judged; stop searching rather than feed the search
                # a made-up sample.
                raise _NoRecords(f"a block of {b.units} units had no kernel records of the "
                                 f"work seen in the probe")
            out.append(priced[2 * k])
        for k, b in enumerate(done):         # each arm's launch keys (summary's per_key)
            sums = self.key_sums.setdefault(b.arm, {})
            for key, (ns, n) in res["by_key"].items():
                if n[2 * k]:
                    s = sums.setdefault(key, [0.0, 0])
                    s[0] += ns[2 * k]
                    s[1] += n[2 * k]
        return out

    def _decide(self):
        r = self.result
        if self.o.mode == "verify" and self.verify_base is not None:
            keep = self.verify_base    # the plan's own state: verify changes nothing for good
        elif self.o.mode == "verify":
            keep = 2 if r["helps"] else r["baseline"]
        else:
            keep = r["winner"] if r["helps"] and r["winner"] >= 0 else r["baseline"]
        self._install(keep)
        self.final_arm = keep
        self.state = "done"
        # What watching cost: the final arm's units are timed again, unrecorded, once decided.
        # (not where the unit is the clock's tick: no program call would time it)
        self._after = {"need": max(AFTER_UNITS, 8 * self.units_per_block), "units": 0,
                       "t0": None, "since": time.perf_counter(), "calls": 0} \
            if self.unit and self.unit[0] != "tick" else None
        self.decision_s = time.perf_counter() - self.t0
        _core.activity_end()
        self.activity = False      # nothing records now: no replay needs a flag (a lookup each)
        self._end_tracking()
        self.write_result()
        if self.o.exit_after:
            raise SystemExit(0)

    # ---- installing arms ----------------------------------------------------------------------

    def _install(self, arm: int, fresh: bool = False):
        """The arm's set-aside and windows; returns the windows' ms. ``fresh`` (a rest with
        CUPTI's records paused follows): every graph replayed with records on since its
        executable was made is instantiated again, windows changed or not. After a pause
        CUPTI's records of such a graph, left alone, read short (H100, 7eafa56,
        tools/investigations/pause-bias: the baseline blocks that followed the other baseline, whose graphs
        were left alone, read 1.2-2.2 % less GPU time than the same arm's other blocks; over
        the arm's blocks every graph kernel read less than back to back, the eager kernels the
        same), which made the paced search's baselines look faster and its gain smaller
        (1.032-1.042x against 1.055-1.057x back to back). A graph replayed only while paused
        since its executable was made needs nothing: its executable stays fresh."""
        a = self.arms[arm]
        limit = self.default_limit if a["set_aside"] is None else a["set_aside"]
        if self.device.persisting_l2_limit != limit:
            self.device.persisting_l2_limit = limit
        _core.reset_persisting_l2(self.device)   # an arm starts on clean lines
        t_windows = time.perf_counter()
        want: dict[int, dict] = {}
        on_streams: dict[int, tuple] = {}
        for g, nodes, base, nbytes, hit, hp, mp, _rec in self._placements(a):
            key = (base, nbytes, hit, hp, mp)
            if g.eager:            # one per stream (_placements)
                on_streams[g.stream] = (key, _window(*key))
                continue
            w = (key, _window(*key))
            d = want.setdefault(id(g), {})
            for n in nodes:
                d[n] = w
        if on_streams or self.stream_windows is not None:
            self._set_stream_windows(on_streams)
        windowed = self._windowed_graphs()
        for g in windowed:
            self._set_graph_windows(g, want.get(id(g), {}), fresh and g.recorded_exec)
        if fresh:
            done = {id(g) for g in windowed}
            for g in self.graphs.values():
                if id(g) not in done and g.recorded_exec and g.ref() is not None:
                    g.change_windows([], fresh=True)
            self._note_unrenewable()
        return (time.perf_counter() - t_windows) * 1e3

    def _note_unrenewable(self):
        if getattr(self, "_noted_unrenewable", False):
            return
        bad = [g for g in self.graphs.values() if g.renew_failed]
        if bad:
            self._noted_unrenewable = True
            self.notes.append(f"{len(bad)} graph(s) could not be instantiated again before a "
                              f"rest (their owner is not PyTorch's): CUPTI's records of them "
                              f"may read short after each paused rest (H100: 1.2-2.2 %), biasing "
                              f"their arms; --max-overhead 0 records back to back, unpaused")

    def _placements(self, arm) -> list:
        """(graph, nodes, base, bytes, hit_ratio, hit_prop, miss_prop, record) per graph a
        window of the arm lands in, as installed and as written (_window_docs); record: the
        target's record in the graph, None for a saved plan's window found again (verify)."""
        out = []
        taken: set = set()
        for ti, hit, hp, mp in arm["windows"]:
            if "_located" in arm:           # verify: a saved plan's window, found again
                g = arm["_graphs"][ti]
                if _first_on_its_stream(g, taken):
                    base, nbytes, nodes = arm["_located"][ti]
                    out.append((g, nodes, base, nbytes, hit, hp, mp, None))
                continue
            t = self.targets[ti]
            for g, rec in t.places:
                if _first_on_its_stream(g, taken):
                    out.append((g, g.nodes_of(rec), t.address, t.size, hit, hp, mp, rec))
        return out

    def _set_stream_windows(self, want: dict):
        sw = self.stream_windows
        if sw is None:
            sw = self.stream_windows = _streams.StreamWindows(self.o.device)
        sw.resume()                # no capture is open here (a failed one left them held)
        sw.set(want)

    def _windowed_graphs(self) -> list:
        if not hasattr(self, "_all_windowed"):
            gs = {}
            for a in self.arms:
                for p in self._placements(a):
                    if not p[0].eager:
                        gs[id(p[0])] = p[0]
            self._all_windowed = list(gs.values())
        return self._all_windowed

    def _set_graph_windows(self, g: GraphSeen, want: dict, fresh: bool = False):
        """Each node gets the window the arm wants on it, or none: one call per distinct window
        that changes (a node that keeps its window is not touched), one re-instantiation per
        graph. A graph the program dropped is left alone."""
        had = getattr(g, "_windowed", {})       # node -> the window's key
        keys = {n: kw[0] for n, kw in want.items()}
        changes = []
        clear = sorted(set(had) - set(want))
        if clear:
            changes.append((None, clear))
        for key, w in {id(kw): kw for kw in want.values()}.values():
            nodes = sorted(n for n in want if want[n][1] is w and had.get(n) != key)
            if nodes:
                changes.append((w, nodes))
        if g.change_windows(changes, fresh):
            g._windowed = keys

    # ---- verify / apply: the plan document -----------------------------------------------

    def load_plan(self, path: str):
        self.plan_doc = load_plan(path)
        if self.o.mode == "apply" and any(e.get("stream") for e in self.plan_doc["windows"]):
            self.apply_log = {"tries": 0}

    def _apply_plan_windows(self, seen, install: bool):
        """The plan's windows for this graph (or eager launch group), located in it; set
        where ``install`` (apply; a group's on its stream)."""
        eager = seen.eager
        entries = [w for w in self.plan_doc["windows"] if w["graph"] == seen.signature
                   and (w.get("stream") == "launch") == eager and not (eager and w.get("_applied"))]
        located = []
        uses6 = [(u[0], u[1], u[2], u[3], seen.records[u[4]][0], seen.records[u[4]][1])
                 for u in seen.uses]
        for e in entries:
            at = _core.live_locate(uses6, e["node"], e["param"], e["offset"], e["delta"],
                                   e["bytes"])
            if at is not None and eager and not _whole_allocation(seen.records, at, e["bytes"]):
                # one kernel launched on several buffers is several groups of one signature:
                # the word must point into an allocation of the saved size, from its start
                at = None
            if at is None:
                e.setdefault("_missed", 0)
                e["_missed"] += 1
                continue
            located.append((at[0], at[1], [n for n in e["nodes"] if n < len(seen.names)], e))
        if located:
            self.applied_sigs.add(seen.signature)
        seen.plan_windows = located
        if eager:
            if install and located:
                base, nbytes, _nodes, e = located[0]
                if not _first_on_its_stream(seen, set(self._stream_plan)):
                    e["_superseded"] = True     # the first matched holds its stream
                    return
                key = (base, nbytes, e["hit_ratio"], e["hit_prop"], e["miss_prop"])
                self._stream_plan[seen.stream] = (key, _window(*key))
                e["_applied"] = e.get("_applied", 0) + 1
                seen.windows_applied = 1
            return
        graph = seen.borrow() if install and located else None
        if graph is not None:
            for base, nbytes, nodes, e in located:
                w = _window(base, nbytes, e["hit_ratio"], e["hit_prop"], e["miss_prop"])
                graph.set_access_policy_window(w, nodes=nodes)
                e["_applied"] = e.get("_applied", 0) + 1
            seen.windows_applied = len(located)

    def _baseline_of(self, arm) -> int | None:
        """The baseline a plan's arm is (0: limit 0, 1: the device's default), or None where it
        has windows or another set-aside."""
        if arm["windows"]:
            return None
        if arm["set_aside"] is None or arm["set_aside"] == self.default_limit:
            return 1
        return 0 if arm["set_aside"] == 0 else None

    def _verify_arms(self) -> list:
        doc = self.plan_doc
        plan_arm = {"set_aside": doc["set_aside"], "windows": [], "_graphs": {}, "_located": {}}
        k = 0
        for g in list(self.graphs.values()) + self.eager:
            for base, nbytes, nodes, e in getattr(g, "plan_windows", []):
                plan_arm["windows"].append((k, e["hit_ratio"], e["hit_prop"], e["miss_prop"]))
                plan_arm["_graphs"][k] = g
                plan_arm["_located"][k] = (base, nbytes, nodes)
                k += 1
        return [{"set_aside": 0, "windows": []}, {"set_aside": None, "windows": []}, plan_arm]

    # ---- what comes out --------------------------------------------------------------------

    def summary(self) -> dict:
        """The result document the CLI reads: verdict, arms, blocks, notes."""
        dev = self.device
        arms_out = []
        for i, a in enumerate(self.arms):
            arms_out.append({"set_aside": a["set_aside"], "windows": self._window_docs(a)})
        per_arm = {}
        for b in self.blocks[:self.recorded]:
            if not b.units:
                continue
            d = per_arm.setdefault(b.arm, {"gpu_ms_per_unit": [], "wall_ms_per_unit": [],
                                          "rest_wall_ms_per_unit": [], "kernels": {},
                                          "samples": [], "shares": []})
            # the search's samples (GPU time per unit at the probe's mix), and the block's own
            # GPU time over its units (which moves with the block's mix of work)
            d["samples"].append(b.sample)
            d["shares"].append(b.share)
            d["gpu_ms_per_unit"].append(getattr(b, "gpu_ns", 0) / b.units / 1e6)
            d["wall_ms_per_unit"].append((b.end - b.start) / b.units / 1e6)
            if b.rest_units:      # the same arm unrecorded: what it costs the program's wall
                d["rest_wall_ms_per_unit"].append(b.rest_ns / b.rest_units / 1e6)
            for name, ns in getattr(b, "by_name", {}).items():
                d["kernels"][name] = d["kernels"].get(name, 0.0) + ns / b.units / 1e6
        for d in per_arm.values():
            n = len(d["gpu_ms_per_unit"])
            d["kernels"] = {k: v / n for k, v in d["kernels"].items()}
        meta = {}
        if dev is not None:
            p = dev.properties
            meta = {"name": p.name, "cc": list(p.compute_capability),
                    "l2_bytes": p.l2_cache_size,
                    "persisting_max": p.persisting_l2_cache_max_size,
                    "default_limit": self.default_limit,
                    "driver": list(_core.driver_version() or (0, 0)), "index": self.o.device}
        return {
            "mode": self.o.mode, "state": self.state, "device": meta,
            "unit": list(self.unit) if self.unit else None,
            "units_per_block": self.units_per_block,
            "points": dict(self.points), "result": self.result, "final_arm": self.final_arm,
            # verify: "plan" (the plan against both baselines) or "baseline" (the plan is one
            # of them, a "don't": the result is a search over advise's arms, and a winner
            # that helps means the plan no longer holds)
            "verify_of": (None if self.o.mode != "verify" else
                          "baseline" if getattr(self, "verify_base", None) is not None
                          else "plan"),
            "arms": arms_out, "per_arm": per_arm, "per_key": self._per_key(),
            "switch_ms": self.switch_ms, "switch_work_ms": self.switch_work_ms,
            "blocks": len(self.blocks),
            # the search's pace and what watching added to the program's wall time in it
            "watching": self._watching(),
            # the final arm's wall per unit recorded (its blocks) over unrecorded (after)
            "watch_cost": self._watch_cost(per_arm),
            "arm_sequence": [b.arm for b in self.blocks],
            # the per-call hooks came off once decided (graph replays and points count to
            # there)
            "calls_unhooked": self.calls_unhooked,
            "rank": self.o.rank, "world": self.o.world,
            "lockstep": self.team is not None,
            "graphs": [{"signature": g.signature, "kernels": len(g.names), "replays": g.replays,
                        "windows_applied": g.windows_applied,
                        "in_plan": g.signature in self.applied_sigs}
                       for g in self.all_graphs()],
            "targets": [{"graphs": [g.signature for g, _ in t.places], "bytes": t.size,
                         "weight_ms": t.weight / 1e6} for t in self.targets],
            # the warm-up's GPU time in kernels no window reaches (no graph, no stream known)
            "ungraphed": getattr(self, "ungraphed", None),
            # eager launches windowed through their streams (streams.py)
            "eager": {"groups": [{"signature": g.signature, "kernel": g.names[0],
                                  "stream": g.stream, "launches": g.launches,
                                  "windows_applied": g.windows_applied} for g in self.eager],
                      "streams_set": sorted(self.stream_windows.wrapped_ever)
                      if self.stream_windows is not None else [],
                      "streams_left_alone": sorted(self.unknown_streams),
                      "restored": self.streams_restored},
            "notes": self.notes,
            # from the first watched call to the decision (warm-up and probe included)
            "decision_s": getattr(self, "decision_s", None),
            "search_s": (time.perf_counter() - self.search_t0) if self.search_t0 else 0.0,
            "plan": self.make_plan() if self.o.mode == "advise" and self.result else None,
        }

    def _per_key(self) -> dict | None:
        """Each launch key's GPU time per launch under the final arm and the better baseline
        (where the final arm is that baseline: the best arm tried), the heaviest keys of the
        probe first: which kernels the plan moved. ratio: the baseline's time per launch over
        the arm's (above 1: faster under the arm)."""
        r = self.result
        if not r or not self.mix_ref:
            return None
        base, arm = r["baseline"], self.final_arm
        if arm is None or arm == base:
            arm = r["winner"]
        if arm is None or arm < 0 or arm == base:
            return None
        keys = _core.activity_keys()
        total = sum(ns[0] for ns, n in self.mix_ref.values() if n[0] > 0)
        a, b = self.key_sums.get(arm, {}), self.key_sums.get(base, {})
        rows = []
        for key, (ns, n) in self.mix_ref.items():
            if not n[0] > 0:
                continue
            name, grid, block = keys[key] if 0 <= key < len(keys) else ("?", (0,) * 3, (0,) * 3)
            us_a = a[key][0] / a[key][1] / 1e3 if key in a else None
            us_b = b[key][0] / b[key][1] / 1e3 if key in b else None
            rows.append({"key": key, "kernel": _core.kernel_name(name), "grid": list(grid),
                         "block": list(block), "share": ns[0] / total,
                         "arm_us": us_a, "baseline_us": us_b,
                         "arm_launches": a[key][1] if key in a else 0,
                         "baseline_launches": b[key][1] if key in b else 0,
                         "ratio": us_b / us_a if us_a and us_b else None})
        rows.sort(key=lambda d: -d["share"])
        return {"arm": arm, "baseline": base, "keys": rows[:PER_KEY_SHOWN]}

    def _window_docs(self, arm) -> list:
        """The arm's windows as the plan document places them: per graph, the anchor word
        (node, param, offset) that finds the buffer again in the next run, the buffer's offset
        from it (delta), and the nodes that get the window."""
        out = []
        for g, nodes, base, nbytes, hit, hp, mp, rec in self._placements(arm):  # as installed
            d = {"graph": g.signature}
            if rec is not None:        # a target's place: the word that finds it again
                node, param, offset, word = g.anchor(rec)
                d.update(node=node, param=param, offset=offset, delta=base - word)
            d.update(bytes=nbytes, hit_ratio=hit, hit_prop=hp, miss_prop=mp, nodes=nodes)
            if g.eager or rec is None:
                d["stream"] = "launch" if g.eager else None  # on the stream it is queued on
            out.append(d)
        return out

    def make_plan(self) -> dict:
        """The plan document: what to install at the next start."""
        from .. import __version__
        r = self.result
        helps = bool(r["helps"]) and r["winner"] >= 0
        arm = self.arms[r["winner"]] if helps else self.arms[r["baseline"]]
        p = self.device.properties
        return {
            "format": PLAN_FORMAT,
            "device": {"name": p.name, "cc": list(p.compute_capability),
                       "l2_bytes": p.l2_cache_size,
                       "driver": list(_core.driver_version() or (0, 0))},
            "l2persist": __version__,
            "verdict": "helps" if helps else "dont",
            "speedup": r["speedup"], "ci": [r["ci_low"], r["ci_high"]],
            "set_aside": arm["set_aside"],
            "windows": self._window_docs(arm),
        }

    def write_result(self):
        path = self.o.result_path
        if not path:
            return
        tmp = path + ".tmp"
        try:
            doc = self.summary()
        except Exception as e:  # the CLI still learns what happened
            import traceback
            doc = {"mode": self.o.mode, "state": self.state, "result": None,
                   "notes": self.notes + ["the summary failed: " + "".join(
                       traceback.format_exception(type(e), e, e.__traceback__)[-4:])]}
        with open(tmp, "w") as f:
            json.dump(doc, f, default=_jsonable)
        os.replace(tmp, path)

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
                            self._record_pending(alone=True)
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
            # meanwhile waits); with one open, put back anyway: the process is ending
            self._capture_open()
            self.restore()
            self._end_tracking()
            try:
                _core.activity_end()
            except Exception:
                pass
            if self.o.mode != "apply":
                self.write_result()
            if self.team is not None:
                self.team.leave()
            if self.team_gave_up:
                try:
                    self._release_peers()
                except Exception:
                    pass

    def restore(self):
        self._log_stop()
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


def _node_ns(kernel_ns: dict, seen: list) -> dict:
    """id(graph) -> each node's share of the warm-up's GPU time. The records are summed per
    kernel name, so a name's time is shared among the nodes that launch it, by how often each
    ran (its graph's replays, an eager group's launches): a range read by 60 nodes of one kernel
    is not weighed 60 times that kernel's whole time."""
    runs: dict[str, int] = {}
    for g in seen:
        for name in g.names:
            runs[name] = runs.get(name, 0) + g.replays
    return {id(g): [kernel_ns.get(name, 0.0) * g.replays / runs[name] if runs[name] else 0.0
                    for name in g.names] for g in seen}


def _first_on_its_stream(g, taken: set) -> bool:
    """A stream holds one window: an arm's eager placements after the first on a stream (the
    heavier target's, targets being heaviest first) are dropped where the arm is placed (and
    so where it is installed and written); apply keeps the first plan entry matched on a
    stream. Graph placements always pass."""
    if not g.eager:
        return True
    if g.stream in taken:
        return False
    taken.add(g.stream)
    return True


def _whole_allocation(records: list, at: tuple, nbytes: int) -> bool:
    """Whether the located window (base, bytes) starts an allocation of ``nbytes`` bytes."""
    return any(r[0] == at[0] and r[1] == nbytes == at[1] for r in records)


def _window(base, nbytes, hit, hit_prop, miss_prop):
    from .discover import _RawRange
    return _core.AccessPolicyWindow(_RawRange(base, nbytes), nbytes, hit_ratio=hit,
                                    hit_prop=_core.AccessProperty[hit_prop.upper()],
                                    miss_prop=_core.AccessProperty[miss_prop.upper()],
                                    clamp=True)


class _NoRecords(RuntimeError):
    pass



def _increasing(bounds: list) -> list:
    """Block bounds with a gap of zero length made one nanosecond long (blocks back to back
    share a stamp; the C side wants them increasing)."""
    out = []
    for b in bounds:
        out.append(b if not out or b > out[-1] else out[-1] + 1)
    return out


def _driver_loaded() -> bool:
    """Whether CUDA's driver library is in the process already (RTLD_NOLOAD: asked without
    loading it)."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        return True
    except OSError:
        return False


def _capturing() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_current_stream_capturing())
    except Exception:
        return False


def _jsonable(x):
    if isinstance(x, float):
        return None
    return str(x)


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
