"""Watching a running program: the live advisor, ``verify`` and ``apply`` inside the program.

The bootstrap (``l2persist.process.bootstrap``) makes one :class:`Watcher` before the
program's code runs and hooks the program's own calls into it: every ``torch.cuda.CUDAGraph``
capture (kept raw, scanned, named by its signature), every graph replay, every host
synchronization and ``l2persist.mark()``. Those calls are the only points where anything is
switched: the watcher runs on the program's thread, between its calls, never while a capture
is open, and never calls the program's work. The program's kernels are timed by CUDA's
activity records (``_core.activity_*``); the search and its verdict are the C core's
(``_core.live_*``); this module keeps the program's entry points (its calls, the clock's
tick, exit) and the watcher's one state. The rest is in parts, each a class of its own module
over that state (process/part.py): the graphs it knows (process/graphs.py: captures, each
graph scanned and named), the phases (process/phases.py: idle, warm-up, probe, search, done),
the switch gate (process/clock.py: capture tracking and the switch lock), the probe
(process/probe.py: the unit of work, the targets, the arms), the search driver
(process/search.py: the blocks, the decision), the eager launches
(process/launches.py), the recorder (process/recorder.py: records to samples), the pace
(process/pace.py: rests and settles), what watching costs (process/costs.py: the summary's
`watching`, the pace's correction), the switcher (process/switcher.py: targets and
installing arms), the report (process/summary.py: the result and the plan) and the ending
(process/ending.py: a failure, the exit, what is put back); the clock's thread is
process/clock.py, the ranks process/team.py (Ranks), the streams process/streams.py.
"""
from __future__ import annotations

import collections
import json
import os
import sys
import threading
import time
from dataclasses import dataclass

from .. import _core
# the watcher's parts (each reads and writes the Watcher's state; names re-exported here)
from .clock import SwitchGate, _capturing, _driver_loaded  # noqa: F401
from .costs import Costs
from .ending import Ending
from .fastcount import Counting
from .graphs import Graphs, GraphSeen  # noqa: F401
from .launches import APPLY_LOG_S, APPLY_TRIES, APPLY_WARMUP_S, Launches  # noqa: F401
from .landing import Landing  # noqa: F401
from .letgo import LetGo
from .pace import REST_GATE_MAX_S, REST_PAIRS, Pace  # noqa: F401
from .phases import Phases
from .recorder import Block, Recorder, ReplayEvents, _increasing, _NoRecords  # noqa: F401
from .probe import UNGRAPHED_NOTE, Probe  # noqa: F401
from .search import AFTER_CALLS_MAX, AFTER_S_MAX, AFTER_UNITS, Search  # noqa: F401
from .summary import PER_KEY_SHOWN, PLAN_FORMAT, Report, _jsonable  # noqa: F401
from .switcher import Switcher, Target, _window  # noqa: F401
from . import team as _team


def _env_value(key: str, text: str, conv, low=None):
    """An environment variable's value as `conv` reads it, or a ValueError that names the
    variable and what it takes (the bootstrap says it, and the program runs as without it)."""
    kind = {int: "an integer", float: "a number", str: "text"}[conv]
    try:
        value = conv(text)
    except ValueError:
        value = None
    if value is None or (low is not None and value < low):
        raise ValueError(f"{key}={text!r}: expected {kind}"
                         + (f" >= {low}" if low is not None else "")) from None
    return value


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
    graph_records: bool = False    # experimental: a record per graph replay, not per node
                                   # (process/graphs.py, Graphs.graph_records_first)
    replay_events: bool = False    # experimental: hooked replays timed by CUDA events, the
                                   # records off in blocks (process/recorder.py, ReplayEvents)
    ready_ahead: bool = True       # the next arm's graphs readied before a block's
                                   # synchronization (Switcher.ready); L2PERSIST_READY_AHEAD=0
                                   # after it, as before (tools/investigations/zoo-advise)
    placebo: bool = False          # advise --placebo: arms installed with no effect (what
                                   # observing costs, timed against a plain run)
    placebo_windows: bool = True   # with placebo, L2PERSIST_PLACEBO_WINDOWS=0: no window set
                                   # at all (what the windows on streams and nodes cost apart
                                   # from the records: tools/investigations/zoo-advise)
    warmup_records: bool = False   # L2PERSIST_WARMUP_RECORDS=1 (a diagnostic): the kernel
                                   # records on through the warm-up, as before 2026-11-30
                                   # (Watcher.warm_records; tools/investigations/zoo-advise)
    full_probe: bool = False       # L2PERSIST_FULL_PROBE=1 (a diagnostic): the probe lasts
                                   # max(0.25, warmup / 2) s even where the unit came often
                                   # enough sooner, as before 2026-11-30 (Probe.over)
    keep_cupti: bool = False       # L2PERSIST_KEEP_CUPTI=1 (a diagnostic): CUPTI stays attached
                                   # after a probe whose search events time alone, as before
                                   # 2026-12-01 (letgo.LetGo)
    apply_release: bool = False    # apply --release-cupti (experimental): CUPTI let go once
                                   # the stream windows matched (process/launches.py)
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
                setattr(o, name, _env_value(key, env[key], conv))
        o.exit_after = env.get("L2PERSIST_EXIT_AFTER", "") == "1"
        o.keep_hooks = env.get("L2PERSIST_KEEP_HOOKS", "") == "1"
        o.graph_records = env.get("L2PERSIST_GRAPH_RECORDS", "") == "1"
        o.replay_events = env.get("L2PERSIST_REPLAY_EVENTS", "") == "1"
        o.placebo = env.get("L2PERSIST_PLACEBO", "") == "1"
        o.placebo_windows = env.get("L2PERSIST_PLACEBO_WINDOWS", "1") != "0"
        o.warmup_records = env.get("L2PERSIST_WARMUP_RECORDS", "") == "1"
        o.full_probe = env.get("L2PERSIST_FULL_PROBE", "") == "1"
        o.keep_cupti = env.get("L2PERSIST_KEEP_CUPTI", "") == "1"
        o.apply_release = env.get("L2PERSIST_APPLY_RELEASE", "") == "1"
        o.ready_ahead = env.get("L2PERSIST_READY_AHEAD", "1") != "0"
        device_key = "L2PERSIST_DEVICE" if env.get("L2PERSIST_DEVICE") else "LOCAL_RANK"
        o.device = _env_value(device_key, env.get(device_key) or "0", int, low=0)
        o.world = _env_value("WORLD_SIZE", env.get("WORLD_SIZE") or "1", int, low=1)
        o.rank = _env_value("RANK", env.get("RANK") or "0", int, low=0) if o.world > 1 else 0
        return o

    @property
    def result_path(self) -> str | None:
        """Where this process writes its result: one file per rank under torchrun."""
        if not self.result or self.world <= 1:
            return self.result
        return f"{self.result}.rank{self.rank}"


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
        self.clock_quiet = False                   # stopped once the unit was the program's
        self.verify_base = None                    # verify: the baseline the plan is, if one
        self._switch_held = None                   # the thread holding the core's switch lock
        self.tracking_ended = False                # end_tracking: the core's count no longer asked
        self.cupti_release = None                  # (state, why) of SwitchGate.release_cupti
        self.cupti_after_probe = None              # (state, why) of LetGo.after_probe
        self.graphs_renewed = 0                    # ... the graphs made again after it
        self.letgo_ms = None                       # ... and its time on the program's thread
        self._clock_lost: float | bool = False     # when graphs came in a search on the clock
        self.empty_probes = 0                      # probes that recorded no kernel (again)
        self.restarts = collections.Counter()      # searches begun again, per cause (Search.restart)
        self.probe_notes = None                    # (from, to): the last probe's notes (begin)
        self.stopped = None                        # why the search stopped (Phases.stop_search)
        self.ended_in = None                       # the phase the program ended in (finish)
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
        self.ahead_ms: list[float] = []            # before the synchronization: the next
                                                   # arm's graphs readied (Switcher.ready)
        self.other_threads = False                 # watched calls came from another thread too
        self.ahead_hidden = 0                      # of those, readied while the GPU was still
                                                   # busy (the synchronization waited after)
        self.resting = None                        # the rest under way (records paused)
        self.settling = None                       # after a rest: graphs not yet launched again
        self.replayed: set = set()                 # graphs replayed in the current block
        self.spanning = 0                          # impossible records dropped (see Pace.end_rest)
        self.mix_ref: dict = {}                    # the probe's by_key, priced (Probe.begin)
        self.probe_keys: dict = {}                 # ... all of it (the per-launch table)
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
        self.warm_paused = False                   # ... after graphs were recorded in it
        self.warm_pauses = 0                       # how often (Watcher.warm_records)
        self.captures_begun = 0
        self.graph_records = False                 # CUPTI's graph-level records are on
        self.timing = "nodes"                      # what times graphs: "nodes" (their
                                                   # records) or "events" (ReplayEvents)
        self.timing_why = None                     # why not events, where they were asked
        self.records_off = False                   # events time the graphs and the kernel
                                                   # records stay off in blocks (but landing's)
        self.eager_share = None                    # eager kernels' share of the probe's GPU
                                                   # time, where events time the graphs
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
        self.rest_ratios: list = []                # the rests' caps (blocks' worth) used
        self.pace_corrections: list = []           # the pace's model scaled by (Costs.correction)
        self.landed_on = False                     # launch attributes collected now
        self.landed_why = None                     # why they are not (an older CUPTI)
        self.landed_read_back = False              # read from the graphs' nodes (letgo.py)
        self.landed_blocks: dict = {}              # arm -> blocks recorded with them
        self.landed_seen: dict = {}                # arm -> {window id: kernels}
        self.landed_table: dict = {}               # window id -> (base, bytes) or None
        # the parts (what changes together): the graphs it knows, the phases, the search's
        # blocks, the eager launch log, records to samples, rests between blocks, installing
        # arms, what comes out, and what is put back at the end
        self.known = Graphs(self)              # (self.graphs is the graphs themselves)
        self.phases = Phases(self)
        self.counting = Counting(self)
        self.gate = SwitchGate(self)
        self.ranks = _team.Ranks(self)
        self.probe = Probe(self)
        self.search = Search(self)
        self.launches = Launches(self)
        self.recorder = Recorder(self)
        self.replay_events = ReplayEvents(self)
        self.pace = Pace(self)
        self.costs = Costs(self)
        self.switcher = Switcher(self)
        self.landing = Landing(self)
        self.letgo = LetGo(self)
        self.report = Report(self)
        self.ending = Ending(self)

    # ---- the program's calls ---------------------------------------------------------------

    def capture_begin(self):
        self.known.capture_begin()

    def capture_end(self, torch_graph):
        self.known.capture_end(torch_graph)

    def capture_failed(self):
        """The program's capture_begin raised: no capture is open for it."""
        self.known.capture_failed()

    def _resume(self):
        """Record from here on (the warm-up's pause ends: the probe begins, or a graph is
        being made or replayed). Where events time the graphs and the records stay off in
        blocks (records_off), only the events resume (Search.next_block turns the records on
        for a landing block)."""
        if self.paused:
            if not self.records_off:
                _core.activity_record(True)  # on first: a caller that sees paused False records
            self.paused = False

    def warm_records(self, torch_graph, me: int):
        """The warm-up's kernel records, which nothing reads (the probe cuts its own stretch),
        on only while an executable may be made: from a capture's begin (Graphs.capture_begin)
        and at a graph's first replay, which instantiates it (whether CUPTI records the nodes
        of an executable made while paused was not measured); paused at the replays of graphs
        already made. A replay recorded costs ``decode_big`` about 15-20 % more than one paused
        (H200, observing-parts' ``cupti_on``, 6d60da2), so the warm-up's 2 s recorded cost it
        about 1 % of a 30 s loop. Probe.begin_probe makes the graphs recorded here again
        before the probe records them: after a pause their records would read short
        (Switcher.install). Paused only on the first watched thread while no other thread has
        made watched calls (a pause there could catch another thread's first replay), with
        every graph renewable (PyTorch's), not beside XLA's own graphs (Phases.start) nor with
        graph records; ``L2PERSIST_WARMUP_RECORDS=1`` keeps the records on throughout."""
        seen = self.graphs.get(id(torch_graph))
        making = seen is None or seen.ref() is not torch_graph or seen.replays == 0 \
            or self.captures > 0
        if self.paused:
            if making or me != self.thread or self.other_threads:
                self._resume()
        elif not making and self._warm_pausable(me):
            _core.activity_record(False)
            self.paused = self.warm_paused = True
            self.warm_pauses += 1

    def _warm_pausable(self, me: int) -> bool:
        if (getattr(self.o, "warmup_records", False) or self.graph_records
                or me != self.thread or self.other_threads):
            return False           # the cheap answers first: this runs before such replays
        from .phases import _makes_own_graphs
        from . import torch as _torch
        return not _makes_own_graphs() and all(_torch.renewable(g.ref())
                                               for g in self.graphs.values()
                                               if g.ref() is not None)

    def records_in_block(self, attrs: bool):
        """As a block begins where the records stay off in blocks: on for a landing block
        (its windows are read from the nodes' records), off otherwise."""
        if self.records_off and self.activity:
            _core.activity_record(bool(attrs))

    def fail(self, where: str, e: BaseException) -> None:
        """A hook failed: stop switching and put back (process/ending.py)."""
        self.ending.fail(where, e)

    def point(self, kind: str, torch_graph=None):
        """A switch point: a replay (before it is launched), a sync or a mark. In a team only
        the thread that made the first watched call counts (ranks must count the same calls;
        other threads' order is not the same on every rank), and it waits for the lock."""
        me = threading.get_ident()
        if self.thread is None:
            self.thread = me
        elif me != self.thread:
            self.other_threads = True   # no graph is readied ahead from here (Search)
        if kind == "replay" and self.state == "warmup" and self.activity:
            self.warm_records(torch_graph, me)   # before any thread's replay is launched
        if self.team is not None and me != self.thread:
            self.known.flag_recorded(kind, torch_graph)
            return
        if not self.lock.acquire(blocking=self.team is not None):
            self.known.flag_recorded(kind, torch_graph)
            return                 # another thread is switching: this call goes on
        t0, steps, seen, returned = time.perf_counter_ns(), self.steps, None, False
        try:
            self.counting.take()   # what the hook counted since the counting thread's last call
            # the graph as seen, looked up once per call (this runs before every replay: the
            # lookups are inline, each method call costs the program ~0.1-0.2 us)
            if torch_graph is not None:
                seen = self.graphs.get(id(torch_graph))
                if seen is not None and seen.ref() is not torch_graph:
                    seen = None        # an id of a dropped graph, reused
            self.phases.point(kind, torch_graph, seen)
            returned = True
        finally:
            if self.activity and not self.paused:  # after: the call may have paused or resumed
                self.known.flag_recorded(kind, torch_graph, seen)
            if self.state == "search" and self.steps == steps:
                # a call that switched nothing: the hooks' own cost to every call of the
                # counting thread, which the rests pay as the blocks do (so added_share cannot
                # see it); a switch's calls are counted in switch_work_ms. Arming is part of it
                if returned:
                    self.counting.arm(kind, torch_graph, seen, me)
                self.hook_ns += time.perf_counter_ns() - t0
                self.hook_calls += 1
            try:
                self.gate.release()     # first: a capture on another thread may wait on it
                if self.unhook_calls is not None and self.state in ("done", "off") and \
                        self.phases.quiet():
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
            self.phases.point("tick", None, None)
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

    # ---- the graphs the watcher knows (process/graphs.py) ------------------------------------

    def all_graphs(self) -> list:
        return self.known.all_graphs()

    # ---- eager launches (streams.py) -----------------------------------------------------------

    def wants_calls(self) -> bool:
        """Whether apply needs the program's calls (its plan has stream windows to match)."""
        return self.apply_log is not None

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

    # ---- the ending (process/ending.py) --------------------------------------------------------

    def finish(self):
        """At exit: a search still running is finished with what it has; the set-aside the
        program started with is put back."""
        self.ending.finish()

    def restore(self):
        self.ending.restore()


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
    if not raw.strip():
        raise ValueError(f"plan: {path!r} is empty: give the JSON file that advise wrote")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"plan: {path!r} is not valid JSON (line {e.lineno}, column "
                         f"{e.colno}: {e.msg}): give the JSON file that advise wrote") from None
    except UnicodeDecodeError:
        raise ValueError(f"plan: {path!r} is not UTF-8 text: not a plan document") from None
    except (ValueError, RecursionError) as e:
        raise ValueError(f"plan: {path!r} is not a JSON plan document ("
                         f"{'nested too deeply' if isinstance(e, RecursionError) else e})") \
            from None
    return check_plan(doc, path)
