"""The live watcher end to end without a GPU: a simulated program and GPU.

The watcher (l2persist.process.live.Watcher) runs as under `advise` / `verify`, driven by a
program loop that captures one graph and replays it; the C search (live_arms, live_begin,
live_next, live_record, live_result) is the real one. What is simulated is what needs a GPU:
the device (its L2 facts, the set-aside), the activity records (each replay adds one record
per kernel node, its duration set by what is installed: the set-aside and the windows the
watcher put on the graph's nodes) and the borrowed graph (its scan and its node windows).

This proves the watcher's logic on CPU, where every session can run it: it finds the arm a
world rewards, says "don't" in a world where nothing helps, writes a plan whose windows are
found again by `verify` in a fresh watcher (the plan document's round trip), never switches in
a capture, and puts the set-aside back. The numbers of the world are made up; what a real GPU
gives is the GPU tests' (tests/test_live_gpu.py).

The world's records are stamped on this host's clock and its blocks' wall time is real time.
Tests whose checks read wall time (a host that pays per replay, rests, tails, the watcher's
own cost) carry the host_timed marker: another process taking the CPU moves those figures (a
tail preempted on a CI machine read 2.2x its rate), so they get three tries
(tests/host_timed.py). The others judge GPU time from the world's records and get one.
"""
import bisect
import json
import math
import random
import statistics
import sys
import time
import types

import pytest

import l2persist
from l2persist import foreign
from l2persist.process import bootstrap, clock, costs, fastcount, launches, live, switcher
from l2persist.process import torch as process_torch

MIB = 1 << 20
TABLE = 0x7F00_0000_0000          # the graph's table (the target a window should cover)
SMALL = 0x7F10_0000_0000
EAGER_IN = 0x7F20_0000_0000       # what the eager kernel reads once (a streaming window's target)
KERNELS = [(0, "k_gather", (128, 1, 1), (256, 1, 1), 0, 2),
           (1, "k_other", (64, 1, 1), (128, 1, 1), 0, 1)]


class World:
    """A GPU: the set-aside installed, the windows on each node, and the activity log. Records
    are stamped on the host's clock (as CUPTI's are comparable with it) and last what the world
    says; a block's wall time is real time; a synchronization waits for the last kernel's end.
    As CUPTI does (H200, docs/data/live-rest-records-H200.json), a node launched while the
    records are paused is recorded, at its next launch once they resume, from its last launch
    recorded before the pause, unless the graph was instantiated again in between; and every
    later record of that graph's kernels reads short (by ``short``) until it is instantiated
    again (H100, tools/investigations/pause-bias at 7eafa56: 1.5-2 % less in every graph kernel).
    Each record carries its key, as the core's do: a graph kernel's (id(graph), node), an
    eager kernel's ("eager", name); blocks() sums per key too ("by_key", numbered as the core
    numbers its launch keys: activity_keys() names each id). Durations come from
    kernel_ns / eager_kernel_ns, which a world with another timing model replaces. The core's
    capture count and switch lock read captures_open; a device call made while a capture is
    open is kept in ``violations`` and raised."""

    @staticmethod
    def clock():
        return time.perf_counter_ns()

    def __init__(self, gain: float, seed: int = 5):
        self.gain = gain                  # k_gather's speedup with the table persisting
        self.rng = random.Random(seed)
        self.limit = 4 * MIB              # the device's default set-aside
        self.records = []                 # (start, end, name, key)
        self.key_table = [("(other kernels)", (0, 0, 0), (0, 0, 0))]   # activity_keys()
        self.key_ids = {}                 # a record's key -> its id in key_table
        self.collecting = self.recording = False
        self.windows = {}                 # node -> window (the graph's)
        self.graph_windows = {}           # (id(graph), node) -> window (each graph's own)
        self.violations = []              # what was done while a capture was open
        self.switching = False            # inside the core's switch lock
        self.context = False              # the program made its context (launched a kernel)
        self.captures_open = 0
        self.limits_seen = []
        self.last_end = 0                 # the GPU is busy until then
        self.last_start = {}              # node -> its last recorded launch's start
        self.paused_nodes = set()         # launched while the records were paused
        self.misrecorded = 0
        self.trimmed = 0                  # records dropped by activity_trim
        self.short = 0.02                 # how short a stale graph's records read
        self.recorded_execs = set()       # graphs with a recorded launch since instantiation
        self.stale = set()                # ... then launched paused: their records read short
        self.short_records = 0
        self.instantiations = {}          # id(graph) -> executables made again
        self.launches = []                # (host time of the launch, true duration)
        self.hooked = True                # the program's calls reach the watcher
        self.unseen = 0                   # replays while they did not
        self.switches = []                # the hooks' states set, in order
        # eager launches: the launch log (CUPTI's callbacks) and the streams' windows
        self.eager_gain = 1.0             # k_eager's speedup under a streaming window on EAGER_IN
        self.eager_ns = 50_000            # k_eager's duration without it
        self.noise = 0.01                 # each kernel's own noise (relative sd)
        self.logging = False
        self.log_fails = False            # another CUPTI subscriber: the log cannot begin
        self.logged = []                  # the streams of the eager launches logged
        self.stream_win = {}              # stream handle -> its window (None: none)
        self.stream_sets = []             # (handle, window) in the order they were set

    def no_capture(self, what):
        """A device call that must not come while any capture is open (it would invalidate
        it): kept, even where the caller swallows the error, and raised."""
        if self.captures_open:
            self.violations.append(what)
            raise AssertionError(f"{what} while a capture was open")

    def instantiated(self, graph=None):
        """The graph was instantiated again (its windows changed): a fresh executable."""
        gid = id(graph)
        self.instantiations[gid] = self.instantiations.get(gid, 0) + 1
        for k in [k for k in self.last_start if k[0] == gid]:
            del self.last_start[k]
        self.paused_nodes = {k for k in self.paused_nodes if k[0] != gid}
        self.recorded_execs.discard(gid)
        self.stale.discard(gid)

    def synchronize(self):
        while World.clock() < self.last_end:     # the host's clock (self.clock may be queued)
            pass

    def kernel_ns(self, graph, node, name):
        """A graph kernel's true duration (ns) under what is installed, before noise:
        k_gather 100 us, faster by ``gain`` with a window on the table and 8 MiB set aside;
        k_other 40 us. Worlds with another timing model override it."""
        d = 100_000.0 if name == "k_gather" else 40_000.0
        w = self.windows.get(node)
        if (name == "k_gather" and w is not None and self.limit >= 8 * MIB
                and w.base <= TABLE < w.base + w.nbytes and w.hit_ratio > 0):
            d /= self.gain
        return d

    # the kernels' durations under what is installed (ns), with 1 % noise
    def replay(self, graph=None):
        for node, name, *_ in getattr(graph, "kernels", KERNELS):
            key = (id(graph), node)       # CUPTI's wrong record is per executable graph; and
                                          # the record's key: one node of one graph
            d = self.kernel_ns(graph, node, name)
            d *= 1 + self.rng.gauss(0, self.noise)
            self.launches.append((World.clock(), int(d)))
            self.context = True
            t = self.clock()
            self.last_end = max(self.last_end, t + int(d))
            if self.collecting and not self.recording:
                self.paused_nodes.add(key)
                if id(graph) in self.recorded_execs:
                    self.stale.add(id(graph))
            elif self.collecting:
                self.recorded_execs.add(id(graph))
                if id(graph) in self.stale:       # CUPTI's short records, until instantiated
                    self.short_records += 1
                    d_rec = int(d * (1 - self.short))
                else:
                    d_rec = int(d)
                start = t
                if key in self.paused_nodes and key in self.last_start:
                    start = self.last_start[key]       # CUPTI's wrong record
                    self.misrecorded += 1
                self.paused_nodes.discard(key)
                self.last_start[key] = t
                self.records.append((start, t + d_rec, name, key))

    def eager(self, stream=0):
        """One eager kernel on ``stream``, 50 us; faster by eager_gain under a streaming window
        on its input set on that stream."""
        d = self.eager_kernel_ns(stream) * (1 + self.rng.gauss(0, self.noise))
        self.context = True
        if self.logging:
            self.logged.append(stream)
        t = self.clock()
        self.last_end = max(self.last_end, t + int(d))
        if self.collecting and self.recording:
            self.records.append((t, t + int(d), "k_eager", ("eager", "k_eager")))

    def eager_kernel_ns(self, stream):
        """The eager kernel's true duration (ns), before noise."""
        d = float(self.eager_ns)
        w = self.stream_win.get(stream)
        if (w is not None and w.hit_prop == "streaming" and
                w.base <= EAGER_IN < w.base + w.nbytes):
            d /= self.eager_gain
        return d

    def blocks(self, bounds, timing="nodes"):
        """As l2p_activity_blocks: by start; a record ending past its block's end is counted
        in spanning, not summed. by_key: per record key (a graph's node, an eager launch
        shape) with any launch summed in the range, its ns and its launches per block."""
        import bisect
        nb = len(bounds) - 1
        gpu, by, by_key, spanning = [0.0] * nb, {}, {}, 0
        for s, e, name, key in self.records:
            b = bisect.bisect_right(bounds, s) - 1
            if not 0 <= b < nb:
                continue
            if e > bounds[b + 1]:
                spanning += 1
                continue
            gpu[b] += e - s
            by.setdefault(name, [0.0] * nb)[b] += e - s
            ns, n = by_key.setdefault(self.key_id(key, name), ([0.0] * nb, [0] * nb))
            ns[b] += e - s
            n[b] += 1
        return {"gpu_ns": gpu, "by_name": by, "by_key": by_key, "records": len(self.records),
                "dropped": 0, "spanning": spanning}

    def key_id(self, key, name):
        """A record key's id, as the core's launch keys are numbered (activity_keys: its name
        and shape, the shape the kernel's row in KERNELS gives)."""
        if key not in self.key_ids:
            shape = {k[1]: (k[2], k[3]) for k in KERNELS}.get(name, ((256, 1, 1), (256, 1, 1)))
            self.key_ids[key] = len(self.key_table)
            self.key_table.append((name, *shape))
        return self.key_ids[key]

    def activity_keys(self):
        return list(self.key_table)

    def trim(self, before):
        """As l2p_activity_trim: the records that start before `before` go."""
        kept = [r for r in self.records if r[0] >= before]
        dropped, self.records[:] = len(self.records) - len(kept), kept
        self.trimmed += dropped
        return dropped


class ProgramGraph:
    """The program's torch.cuda.CUDAGraph (weakly referenceable, as PyTorch's is). Its
    ``replay`` runs it in the world, hooked by make_world as the bootstrap hooks PyTorch's (the
    count in C in front of the bootstrap's Python hook: process/fastcount.py)."""
    world = None

    def plain_replay(self):
        ProgramGraph.world.replay(self)
    replay = plain_replay


@pytest.fixture
def world(monkeypatch):
    yield make_world(monkeypatch)
    fastcount.COUNT.disarm()        # a test that ended mid-block leaves no count armed


def make_world(monkeypatch) -> World:
    """The world with the core's device, activity and graph calls patched to it (pytest's
    monkeypatch, or a tool's own pytest.MonkeyPatch: tools/investigations/hook-cost)."""
    w = World(gain=1.0)
    core = live._core
    monkeypatch.setattr(ProgramGraph, "world", w)
    monkeypatch.setattr(ProgramGraph, "replay", ProgramGraph.plain_replay)   # undone after
    process_torch.patch_replay(ProgramGraph, bootstrap._on_replay, stream=False,
                               after=bootstrap._after_replay, count=fastcount.COUNT)

    def begin(device):
        w.collecting = w.recording = True

    def record(on):
        if not w.collecting:
            raise ValueError("activity: not collecting")
        w.recording = on

    for name, fn in {"activity_begin": begin, "activity_record": record,
                     "activity_end": lambda: setattr(w, "collecting", False),
                     "activity_flush": lambda: None, "activity_now": w.clock,
                     "activity_blocks": w.blocks, "activity_trim": w.trim, "reset_persisting_l2": lambda dev: None,
                     "driver_version": lambda: (13, 0)}.items():
        monkeypatch.setattr(core, name, fn)

    class Device:
        properties = types.SimpleNamespace(name="Simulated GPU", compute_capability=(9, 0),
                                           l2_cache_size=50 * MIB,
                                           persisting_l2_cache_max_size=30 * MIB)
        persisting_l2_granule = MIB
        default_persisting_l2_limit = 4 * MIB

        def __init__(self, index=0):
            self.index = index

        @property
        def persisting_l2_limit(self):
            return w.limit

        @persisting_l2_limit.setter
        def persisting_l2_limit(self, v):
            w.no_capture("the set-aside was set")
            w.limit = v
            w.limits_seen.append(v)

        def synchronize(self):
            w.no_capture("the device was synchronized")
            w.synchronize()

    class Borrowed:
        def __init__(self, owner):
            self.owner = owner

        def _scan(self, _):
            spec = getattr(self.owner, "scan", None)   # a world's own graph (its kernels,
            if spec is not None:                       # buffers and their uses)
                return spec
            if getattr(self.owner, "bare", False):    # a graph with no buffer to window
                return KERNELS, [], []
            records = [(TABLE, 8 * MIB, 1), (SMALL, MIB, 1)]
            uses = [(0, 0, 0, TABLE, 0), (0, 1, 8, SMALL, 1), (1, 0, 0, SMALL, 1)]
            return KERNELS, records, uses

        @property
        def kernel_nodes(self):
            """Each node's window as the graph holds it (the landing's read-back)."""
            def node(n):
                win = w.graph_windows.get((id(self.owner), n))
                return types.SimpleNamespace(access_policy_window=None if win is None else
                                             types.SimpleNamespace(base_ptr=win.base,
                                                                   num_bytes=win.nbytes))
            return [node(n) for n, *_ in getattr(self.owner, "kernels", KERNELS)]

        def set_access_policy_window(self, win, nodes):
            w.no_capture("a window was set")
            w.instantiated(self.owner)  # as PyTorch's owner, notified, instantiates again
            for n in nodes:
                if win is None:
                    w.windows.pop(n, None)
                    w.graph_windows.pop((id(self.owner), n), None)
                else:
                    w.windows[n] = win
                    w.graph_windows[(id(self.owner), n)] = win

    monkeypatch.setattr(l2persist, "Device", Device)
    monkeypatch.setattr(foreign, "as_graph", lambda owner: Borrowed(owner))

    def reinstantiate(owner):
        w.instantiated(owner)
        return True
    monkeypatch.setattr(process_torch, "reinstantiate", reinstantiate)
    monkeypatch.setattr(switcher, "_window", lambda base, nbytes, hit, hp, mp:
                        types.SimpleNamespace(base=base, nbytes=nbytes, hit_ratio=hit,
                                              hit_prop=hp, miss_prop=mp))
    monkeypatch.setattr(clock, "_capturing", lambda: w.captures_open > 0)

    # the core's capture tracking (CUDA's callbacks count every capture, whoever makes it) and
    # its switch lock (refused while a capture is open; a capture that begins waits for it)
    def switch_enter():
        if w.captures_open:
            return False
        if w.switching:
            raise ValueError("switch_enter: this thread is inside a switch already")
        w.switching = True
        return True

    def switch_leave():
        if not w.switching:
            raise ValueError("switch_leave: not inside a switch")
        w.switching = False
    # the clock arms once CUDA's driver is in the process (here: always) and counts captures
    monkeypatch.setattr(clock, "_driver_loaded", lambda: True)
    for name, fn in {"captures_open": lambda: w.captures_open, "switch_enter": switch_enter,
                     "capture_watch_begin": lambda device=None: None,
                     "switch_leave": switch_leave,
                     "context_active": lambda device=None: w.context,
                     "activity_keys": w.activity_keys}.items():
        monkeypatch.setattr(core, name, fn, raising=False)

    def log_begin(device):
        if w.log_fails:
            raise RuntimeError("CUPTI: another subscriber holds the callbacks")
        assert not w.logging, "the launch log was begun twice"
        w.logging, w.logged = True, []

    def log_take(offers, discard=False):
        if not w.logging:
            if discard:
                return None
            raise RuntimeError("launch log: not logging")
        w.logging = False
        if discard:
            return None
        # each eager kernel follows a small fill kernel (no records: its time is nothing);
        # the log's records are all its launches' (the fill's SMALL, the eager kernel's input)
        kernels, uses = [], []
        for i, h in enumerate(w.logged):
            kernels += [(2 * i, "k_fill", (8, 1, 1), (256, 1, 1), 0, 1, h),
                        (2 * i + 1, "k_eager", (256, 1, 1), (256, 1, 1), 0, 2, h)]
            uses += [(2 * i, 0, 0, SMALL, 0), (2 * i + 1, 0, 0, EAGER_IN, 1)]
        return kernels, [(SMALL, MIB, 0), (EAGER_IN, 64 * MIB, 0)], uses, 0

    class Stream:                  # l2persist.Stream(wrap=...): the watcher's stream windows
        def __init__(self, wrap, device=None):
            self.h = int(wrap)
            # every stream is wrapped with the watched device (Options.device: 0 here): a
            # default stream is that device's, never the thread's current one
            assert device == 0, (self.h, device)

        @property
        def access_policy_window(self):
            return w.stream_win.get(self.h)

        @access_policy_window.setter
        def access_policy_window(self, win):
            w.no_capture("a stream's window was set")
            w.stream_win[self.h] = win
            w.stream_sets.append((self.h, win))

        def close(self):
            pass
    monkeypatch.setattr(core, "_launch_log_begin", log_begin)
    monkeypatch.setattr(core, "_launch_log_take", log_take)
    monkeypatch.setattr(core, "Stream", Stream)
    monkeypatch.setattr(bootstrap, "_watcher", None)   # set by run_program: the hook's watcher
    return w


def run_program(world, watcher, replays=2_000_000, sync_after_capture=False):
    """The program: capture its graph, replay it; the watcher sees each call first. It stops
    once the watcher has decided (the rest of the run changes nothing); the warm-up and probe
    last real time (a quarter second), hence the generous count. ``sync_after_capture``: a
    ``torch.cuda.synchronize()`` between the capture and the first replay (the zoo's graphed
    training step)."""
    g = ProgramGraph()
    watcher.capture_begin()
    world.captures_open += 1
    world.captures_open -= 1
    watcher.capture_end(g)
    if sync_after_capture:
        watcher.point("sync")
        world.synchronize()
    bootstrap._watcher = watcher          # its hook: a replay that only counts stays there
    for i in range(replays):
        if world.hooked:                  # the bootstrap's hook on replay (see _hookable)
            g.replay()
        else:
            world.unseen += 1
            world.replay(g)
        if watcher.state in ("done", "off"):
            break
    return g


def _hookable(world, watcher):
    """The bootstrap's per-call hooks as the world's switch: off, the program's replays do not
    reach the watcher (run_program counts them unseen)."""
    def switch(on):
        def flip():
            world.hooked = on
            world.switches.append(on)
            return []
        return flip
    watcher.rest_hooks = (switch(False), switch(True))


def _watcher(**kw):
    o = dict(mode="advise", warmup_s=0.01, block_units=4, budget_s=30.0)
    o.update(kw)
    return live.Watcher(live.Options(**o))


def test_advise_finds_the_window_a_world_rewards(world):
    world.gain = 1.25
    w = _watcher()
    run_program(world, w)
    assert w.state == "done", w.notes
    r = w.result
    assert r["helps"] and r["winner"] >= 2, r
    arm = w.arms[w.final_arm]
    table = next(i for i, t in enumerate(w.targets) if t.address == TABLE)
    assert arm["set_aside"] >= 8 * MIB and any(t == table for t, *_ in arm["windows"])
    # the whole loop is k_gather + k_other; 1.25x on k_gather is ~1.18x on the loop
    assert 1.10 < r["speedup"] < 1.25, r
    assert world.limit == arm["set_aside"] and 0 in world.windows
    plan = w.make_plan()
    assert plan["verdict"] == "helps" and plan["set_aside"] == arm["set_aside"]
    assert [d["bytes"] for d in plan["windows"]] == [8 * MIB]
    assert plan["windows"][0]["graph"] == w.targets[table].places[0][0].signature
    # every graph advise saw is listed, windowed or not, and the plan passes its own check
    assert plan["graphs"] == [{"graph": g.signature} for g in w.all_graphs()]
    from l2persist.process import plan_doc
    assert plan_doc.check_plan(json.loads(json.dumps(plan)))["graphs"] == plan["graphs"]
    s = w.summary()
    assert s["unit"][0] == "replay"
    # both buffers are targets, weighed by the recorded time of the kernels that use them
    weights = {t["bytes"]: t["weight_ms"] for t in s["targets"]}
    assert set(weights) == {8 * MIB, MIB} and weights[MIB] > weights[8 * MIB] > 0


def test_a_replay_that_only_counts_stays_in_the_hook_and_every_unit_is_counted(world):
    """Through the bootstrap's real hook: the replays that would only count a unit are counted
    there (process/fastcount.py), and the watcher reads the same counts as if it had seen each:
    every block ends at its count of units, every replay is a point and one of its graph's
    replays, and the decision is the world's."""
    world.gain = 1.25
    made, replay = [0], world.replay

    def counted_replay(graph=None):
        made[0] += 1
        replay(graph)
    world.replay = counted_replay
    w = _watcher(block_units=40)
    g = run_program(world, w)
    assert w.state == "done" and w.result["helps"], w.notes
    assert w.counting.calls > 0.9 * w.hook_calls          # most calls never left the hook
    assert {b.units for b in w.blocks} == {w.units_per_block}
    starts = sorted(t for t, _d in world.launches)       # each block's replays, by the world
    for b in w.blocks:
        ran = bisect.bisect_left(starts, b.end) - bisect.bisect_left(starts, b.start)
        assert ran == b.units * len(KERNELS), (b, ran)
    assert w.points["replay"] == made[0] == w.graphs[id(g)].replays
    watching = w.summary()["watching"]
    assert watching["fast_calls"] == w.counting.calls and watching["fast_us_per_call"] > 0
    from l2persist.process.report import _fast_said   # the hooks line's words (shown where
    assert (f"{w.counting.calls} of its {w.hook_calls} calls were replays and syncs that "
            f"only counted" in _fast_said(watching))  # the rests' walls compare: host-timed)
    assert fastcount.COUNT.left == fastcount.COUNT.done == 0   # decided: taken, not armed


def _armed_mid_block(world, w, g):
    """Replays through the hook until the search is in a block with a count armed far from its
    end."""
    bootstrap._watcher = w
    for _ in range(500_000):
        if (w.state == "search" and w.resting is None and w.settling is None
                and fastcount.COUNT.left >= 30 and len(w.blocks) >= 3):
            return w.blocks[-1]
        g.replay()
    raise AssertionError(f"no count armed mid-block: {w.state}, {len(w.blocks)} blocks, "
                         f"{w.notes}")


def _replays_in(world, b):
    starts = sorted(t for t, _d in world.launches)
    return (bisect.bisect_left(starts, b.end) - bisect.bisect_left(starts, b.start)) \
        // len(KERNELS)


def test_a_second_threads_call_finds_the_count_taken(world):
    """Alone, another thread's first calls while the counting thread's count is armed: the
    watcher takes the count at any thread's call, so that block and the next end at their
    true counts (the review of 47d58bd: 40 units recorded for 45 replays, then 45 for 40)."""
    import threading
    w = _watcher(block_units=40, max_overhead=0.0)          # blocks back to back
    g, g2 = ProgramGraph(), ProgramGraph()
    for pg in (g, g2):
        w.capture_begin()
        w.capture_end(pg)
    b = _armed_mid_block(world, w, g)
    for _ in range(5):                                     # counted in the hook
        g.replay()

    def other():                                           # the same kernels: each a unit
        for _ in range(45):
            g2.replay()
    t = threading.Thread(target=other)
    t.start()
    t.join()
    for _ in range(60):
        g.replay()
    nxt = w.blocks[w.blocks.index(b) + 1]
    assert w.other_threads and b.end and nxt.end
    assert (b.units, nxt.units) == (_replays_in(world, b), _replays_in(world, nxt)) == (40, 40)


def test_a_capture_into_the_counted_graph_takes_the_count_first(world):
    """The program captures into the unit's graph object again (other kernels) while a count
    is armed: the capture takes it, so no replay of the graph as it is now counts as a unit."""
    w = _watcher(block_units=40, max_overhead=0.0)
    g = ProgramGraph()
    w.capture_begin()
    w.capture_end(g)
    _armed_mid_block(world, w, g)
    old, units = w.graphs[id(g)], w.units_now + fastcount.COUNT.done
    g.scan = ([(0, "k_new", (32, 1, 1), (64, 1, 1), 0, 1)], [], [])
    w.capture_begin()
    w.capture_end(g)
    new = w.graphs[id(g)]
    assert new.signature != w.unit[1] and fastcount.COUNT.left == 0
    for _ in range(20):
        g.replay()
    assert fastcount.COUNT.done == 0 and w.units_now == units
    assert new.replays == 20 and old is not new


def test_syncs_between_replays_are_counted_in_the_hook_too(world):
    """A program that synchronizes after every seventh replay (`ddp` syncs every 100th step)
    through the bootstrap's sync hook: a sync that comes while the count is armed is counted in
    C and leaves it armed, so the replays after it are counted there too (where it went to the
    watcher, it took the count, and the next replay went there as well). The watcher reads
    every sync as a point, every block holds as many of the unit's launches as it counts
    units (a block begins only at the unit's replay: Phases.starts_block), and the decision
    is the world's."""
    world.gain = 1.25
    reached = []

    def on_sync():
        reached.append(1)
        bootstrap._on_sync()
    cuda = types.SimpleNamespace(synchronize=world.synchronize)
    process_torch.patch_after(cuda, "synchronize", on_sync, "cuda.synchronize",
                              count=fastcount.COUNT)
    w = _watcher(block_units=40)
    g = ProgramGraph()
    w.capture_begin()
    w.capture_end(g)
    bootstrap._watcher = w
    replays = syncs = 0
    while w.state not in ("done", "off") and replays < 2_000_000:
        g.replay()
        replays += 1
        if replays % 7 == 0:            # prime to the block's 40 units: blocks begin anywhere
            cuda.synchronize()
            syncs += 1
    assert w.state == "done" and w.result["helps"], w.notes
    assert (w.points["replay"], w.points["sync"]) == (replays, syncs)
    assert len(reached) < 0.2 * syncs, (len(reached), syncs)     # most never left C
    assert w.counting.calls > 0.9 * w.hook_calls
    assert {b.units for b in w.blocks} == {w.units_per_block}
    for b in w.blocks:
        assert _replays_in(world, b) == b.units, b


def test_arming_backs_off_where_the_counts_come_back_empty(world):
    """A program whose every replay is followed by a call that reaches the watcher (here a
    sync through the Python hook alone; in the zoo, the `server`'s and `decode_big`'s other
    graphs' replays) never leaves a replay to count in the hook: each arm is undone by that
    call. After a few empty counts arming skips its chances, longer each time, so the cost of
    trying stays a small share of the calls."""
    w = _watcher(block_units=40, budget_s=1000.0)
    g = ProgramGraph()
    w.capture_begin()
    w.capture_end(g)
    bootstrap._watcher = w
    steps = 0
    while w.state != "done" and steps < 60000:
        g.replay()
        bootstrap._on_sync()
        steps += 1
    assert w.counting.calls == 0 and w.points["replay"] == steps
    assert 0 < w.counting.arms < 0.02 * steps, (w.counting.arms, steps)


def test_advise_says_dont_where_nothing_helps_and_keeps_a_baseline(world):
    world.gain = 1.0
    w = _watcher()
    run_program(world, w)
    assert w.state == "done", w.notes
    assert not w.result["helps"]
    assert w.final_arm in (0, 1) and w.arms[w.final_arm]["windows"] == []
    assert world.windows == {}                        # the arms' windows were taken off
    # every kernel ran in the graph: nothing to say about eager launches
    assert w.summary()["ungraphed"]["share"] == 0.0
    assert not any("no captured graph holds" in n for n in w.notes), w.notes
    assert w.make_plan()["verdict"] == "dont"
    assert w.make_plan()["graphs"] == [{"graph": g.signature} for g in w.all_graphs()]


def test_verify_finds_the_plans_windows_again_in_a_fresh_watcher(world, tmp_path):
    """The plan document's round trip: advise writes it, a fresh watcher in verify mode finds
    its windows in a newly captured graph (by signature and anchor words) and confirms it."""
    import json
    world.gain = 1.25
    w = _watcher()
    run_program(world, w)
    assert w.result["helps"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(w.make_plan()))
    world.windows.clear()
    world.limit = 4 * MIB
    v = _watcher(mode="verify")
    v.load_plan(str(path))
    run_program(world, v)
    assert v.state == "done", v.notes
    assert v.applied_sigs and v.result["helps"], (v.result, v.notes)
    assert v.arms[2]["windows"], "verify's plan arm found no window"


def test_the_set_aside_is_put_back_at_the_end(world):
    world.gain = 1.25
    w = _watcher()
    run_program(world, w)
    assert world.limit != 4 * MIB                     # the winner is installed ...
    w.restore()
    assert world.limit == 4 * MIB                     # ... and the program's own put back


def test_an_eager_start_is_unrecorded_until_the_first_graph(world):
    """Syncs of eager work come first (no graph yet): the records are paused; the capture
    resumes them before its graph exists, and the probe then weighs the graph's kernels."""
    world.gain = 1.25
    w = _watcher(warmup_s=1e9)            # no clock ends this warm-up before the capture
    for _ in range(50):
        w.point("sync")
    assert w.paused and not world.recording and w.state == "warmup"
    w.o.warmup_s = 0.01
    run_program(world, w)
    assert not w.paused and not world.collecting      # the decision ended collection
    assert w.state == "done" and w.result["helps"], w.notes
    assert all(t.weight > 0 for t in w.targets)


def _warm_replays(world, w, g, n):
    for _ in range(n):
        w.point("replay", g)
        world.replay(g)


@pytest.mark.parametrize("keep", [False, True])
def test_the_warmups_records_are_on_only_where_an_executable_is_made(world, monkeypatch, keep):
    """Nothing reads the warm-up's records, and a replay recorded costs a 250-node graph 15-20 %
    (H200): they are on from a capture's begin through each graph's first replay (it makes the
    executable) and paused at the replays after it; a graph captured later turns them on again
    for its own first replay. The probe makes the graphs recorded in the warm-up again, so none
    of its records reads short (CUPTI's after a pause), and the search still finds the window.
    ``L2PERSIST_WARMUP_RECORDS=1`` (keep) records the whole warm-up, as before."""
    monkeypatch.setattr(process_torch, "renewable", lambda owner: True)   # PyTorch's, here
    world.gain = 1.25
    w = _watcher(warmup_s=1e9, warmup_records=keep)
    g, h = ProgramGraph(), ProgramGraph()
    w.point("sync")                                   # the first watched call: paused, no graph
    assert w.paused and not world.recording
    w.capture_begin()
    assert world.recording                            # a capture makes a graph: on
    w.capture_end(g)
    _warm_replays(world, w, g, 30)
    kernels = len(KERNELS)
    assert len(world.records) == (30 if keep else 1) * kernels, len(world.records)
    assert world.recording == keep and w.paused != keep
    w.capture_begin()                                 # a second graph mid-warm-up
    assert world.recording
    w.capture_end(h)
    _warm_replays(world, w, h, 10)
    _warm_replays(world, w, g, 10)
    assert len(world.records) == (50 if keep else 2) * kernels, len(world.records)
    assert world.recording == keep
    made = dict(world.instantiations)
    w.o.warmup_s = 0.01
    run_program_on(world, w, g)
    assert w.state == "done" and w.result["helps"], w.notes
    assert world.short_records == 0
    assert w.summary()["timing"]["warmup_pauses"] == (0 if keep else 2)
    if not keep:        # each was recorded, then paused: made again as the probe began
        assert world.instantiations.get(id(h), 0) > made.get(id(h), 0), world.instantiations


@pytest.mark.parametrize("why", ["thread", "xla", "foreign"])
def test_the_warmups_records_stay_on_where_a_pause_could_miss_an_executable(world, monkeypatch,
                                                                           why):
    """No pause where it could catch an executable being made unrecorded: once another thread
    has made watched calls (its first replay could come during the pause; a pause taken before
    it ends at its call), beside XLA (its own graphs are made where the watcher cannot see),
    or with a graph the watcher cannot make again (its records after a pause read short)."""
    import threading
    renewable = why != "foreign"
    monkeypatch.setattr(process_torch, "renewable", lambda owner: renewable)
    if why == "xla":
        monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))
    w = _watcher(warmup_s=1e9)
    g = ProgramGraph()
    w.point("sync")
    w.capture_begin()
    w.capture_end(g)
    if why == "thread":
        _warm_replays(world, w, g, 5)
        assert w.paused and not world.recording        # paused by the first thread
        t = threading.Thread(target=_warm_replays, args=(world, w, g, 1))
        t.start()
        t.join()
        assert w.other_threads and world.recording     # another thread: on again
    _warm_replays(world, w, g, 20)
    assert world.recording and not w.paused and w.warm_pauses == (1 if why == "thread" else 0)


@pytest.mark.parametrize("shape", ["fast", "slow", "marks", "full"])
def test_the_probe_ends_once_its_unit_came_often_enough(world, shape):
    """The probe lasts half the warm-up (here 0.5 s; 1.5 s for the fast loop), and ends sooner,
    after 0.25 s, once the unit (a mark, else the busiest graph's replay) came PROBE_UNITS
    times: a fast replay loop is recorded for about a quarter second ("fast"); a loop whose replays take 3 ms ("slow"), or
    whose unit is a mark every 1,000th replay ("marks": the replays' count is not the unit's),
    is probed for the whole length, as is a fast loop under L2PERSIST_FULL_PROBE=1 ("full")."""
    from l2persist.process import probe as _probe
    # the fast loop's whole length is 1.5 s (warm-up 3 s): a loaded CPU that slows its replays
    # (this file's whole run on two cores read 0.46 s for the 256 units) still ends well before
    w = _watcher(warmup_s=3.0 if shape == "fast" else 1.0, full_probe=shape == "full")
    g = ProgramGraph()
    w.capture_begin()
    w.capture_end(g)
    bootstrap._watcher = w
    for i in range(10_000_000):
        if shape == "marks" and i % 1000 == 0:
            w.point("mark")
        g.replay()
        if shape == "slow":
            t = time.perf_counter() + 3e-3
            while time.perf_counter() < t:
                pass
        if w.state != "warmup" and w.state != "probe":
            break
    assert w.state == "search", w.notes
    timing = w.summary()["timing"]
    probe_s = timing["probe_s"]
    assert w.unit[0] == ("mark" if shape == "marks" else "replay")
    assert timing["probe_units"] == w.probe_counts[w.unit] > 0
    if shape == "fast":
        assert _probe.PROBE_MIN_S <= probe_s < 1.2, probe_s
        assert w.probe_counts[w.unit] >= _probe.PROBE_UNITS
    else:
        assert probe_s >= 0.5, probe_s
        if shape != "full":
            assert w.probe_counts[w.unit] < _probe.PROBE_UNITS * probe_s / 0.25


def run_program_on(world, w, g, replays=2_000_000):
    """The rest of run_program's loop on a graph already captured."""
    bootstrap._watcher = w
    for _ in range(replays):
        g.replay()
        if w.state in ("done", "off"):
            break


def test_nothing_is_switched_while_the_program_captures(world):
    """Mid-search the program captures a second graph (another batch size) while its first
    keeps replaying: no block ends and no arm is installed until the capture has ended (the
    borrowed graph also asserts that no window is set during a capture), then the search goes
    on and decides."""
    world.gain = 1.25
    w = _watcher()
    g = ProgramGraph()
    w.capture_begin()
    w.capture_end(g)
    while not (w.state == "search" and len(w.blocks) >= 5):
        w.point("replay", g)
        world.replay(g)
    w.capture_begin()
    world.captures_open += 1
    blocks, seen = len(w.blocks), len(world.limits_seen)
    for _ in range(200):                       # 50 blocks' worth of units, a capture open
        w.point("replay", g)
        world.replay(g)
    assert w.state == "search" and len(w.blocks) == blocks, "a block ended during a capture"
    assert world.limits_seen[seen:] == [], "the set-aside changed while a capture was open"
    world.captures_open -= 1
    g2 = ProgramGraph()
    w.capture_end(g2)
    while w.state not in ("done", "off"):
        w.point("replay", g)
        world.replay(g)
    assert w.state == "done" and w.result["helps"], w.notes
    assert len(w.graphs) == 2


def test_an_eager_program_is_recorded_from_the_probe_on(world):
    """No graph at all: the records wait through the warm-up and the probe turns them on (it
    would weigh nothing, and the search would stop for want of records, if it did not). Here
    the launch log cannot begin (another CUPTI subscriber): no window reaches the kernels."""
    world.log_fails = True
    w = _watcher()
    while w.state not in ("done", "off"):
        w.point("sync")
        world.eager()
    assert w.state == "done", w.notes
    assert not any("no kernel records" in n for n in w.notes), w.notes
    # all of its GPU time is outside any graph, and advise says that nothing windowed it
    s = w.summary()
    assert s["ungraphed"]["share"] == 1.0 and s["ungraphed"]["heaviest"] == ["k_eager"]
    assert any("no captured graph holds" in n and "k_eager" in n for n in w.notes), w.notes
    assert any("eager launches not logged" in n for n in w.notes), w.notes
    per = s["per_arm"]
    assert per and all(min(d["gpu_ms_per_unit"]) > 0 for d in per.values())


def _eager_program(world, w, stream=0, calls=3_000_000):
    """An eager program: one kernel on ``stream`` and a synchronization per iteration."""
    for _ in range(calls):
        w.point("sync")
        if w.state in ("done", "off") or (w.o.mode == "apply" and
                                          w.apply_log.get("over")):
            break
        world.eager(stream)


def test_an_eager_kernel_gets_a_stream_window_the_world_rewards(world, tmp_path):
    """The probe's launch log finds the eager kernel's input on the legacy default stream; a
    streaming window on it, set as the stream's attribute, is what this world rewards, and
    advise picks it. The plan names it by the launch ("stream": "launch"); verify finds it
    again in a fresh watcher's log; at the end the stream's own window is back."""
    import json
    world.eager_gain = 1.25
    w = _watcher()
    _eager_program(world, w)
    assert w.state == "done", w.notes
    r = w.result
    assert r["helps"] and r["winner"] >= 2, (r, w.notes)
    assert 1.15 < r["speedup"] < 1.35, r
    win = world.stream_win.get(0)
    assert win is not None and win.hit_prop == "streaming" and win.base == EAGER_IN
    assert not world.logging, "the launch log was left on after the probe"
    plan = w.make_plan()
    assert [e.get("stream") for e in plan["windows"]] == ["launch"], plan["windows"]
    assert plan["windows"][0]["hit_prop"] == "streaming"
    assert w.summary()["ungraphed"]["share"] == 0.0    # the eager kernel is windowable
    w.restore()
    assert world.stream_win[0] is None, "the stream's own window was not put back"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    world.stream_win.clear()
    v = _watcher(mode="verify")
    v.load_plan(str(path))
    _eager_program(world, v)
    assert v.state == "done" and v.result["helps"], (v.result, v.notes)
    assert v.arms[2]["windows"], "verify's plan arm found no stream window"
    v.restore()
    assert world.stream_win[0] is None


def _apply_with_a_stream_window(world, tmp_path, monkeypatch, begun=0, release=True):
    """advise on the eager program, then apply of its plan in a fresh watcher (the defaults:
    apply waits APPLY_WARMUP_S), the core's capture tracking and CUPTI's release faked:
    ``begun`` captures counted; ``release``: apply --release-cupti. Returns the apply watcher, the faked calls, the plan, apply's
    start and its unhookings."""
    import json
    world.eager_gain = 1.25
    w = _watcher()
    _eager_program(world, w)
    plan = w.make_plan()
    w.restore()
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    world.stream_win.clear()
    calls, unhooked = [], []
    core = live._core
    monkeypatch.setattr(core, "capture_watch_begin",
                        lambda device=None: calls.append(("track", world.logging)))
    monkeypatch.setattr(core, "capture_watch_end", lambda: calls.append("untrack"))
    state = ["held"]

    def cupti_release(hand_captures=False):
        # the core's rule with the count handed over: held where any capture was counted
        calls.append(("release", hand_captures))
        if hand_captures and begun:
            return ("held", "the program made CUDA graphs while CUPTI was attached")
        state[0] = "releasing"
        return ("releasing", None)
    monkeypatch.setattr(core, "cupti_release", cupti_release)
    monkeypatch.setattr(core, "cupti_state", lambda: state[0])
    monkeypatch.setattr(launches, "APPLY_LOG_S", 0.005)
    a = live.Watcher(live.Options(mode="apply", apply_release=release))
    t0 = time.perf_counter()
    a.load_plan(str(path))
    assert a.wants_calls()
    a.unhook_calls = lambda: unhooked.append(True) or []
    a.device = l2persist.Device(0)
    _eager_program(world, a, calls=2_000_000)
    assert a.apply_log.get("over"), a.notes
    return a, calls, plan, t0, unhooked


@pytest.mark.host_timed
def test_apply_sets_a_plans_stream_window_once_matched_then_unhooks(world, tmp_path,
                                                                     monkeypatch):
    """apply with a stream window in its plan: the program's calls are watched only until a
    logged launch matched it; the window is then set on that launch's stream (no capture open),
    the log is off and the call hooks come off; restore puts the stream's window back."""
    a, calls, plan, t0, unhooked = _apply_with_a_stream_window(world, tmp_path, monkeypatch,
                                                                release=False)
    assert unhooked == [True], a.notes
    # without --release-cupti (experimental) apply counts no captures and keeps CUPTI
    assert calls == [] and a.cupti_release is None, calls
    # matched within a short program's life: not after advise's 2 s warm-up
    assert time.perf_counter() - t0 < live.APPLY_WARMUP_S + 1.0
    assert not world.logging
    win = world.stream_win.get(0)
    assert win is not None and win.base == EAGER_IN and win.hit_prop == "streaming"
    assert plan["windows"][0].get("_applied") is None and \
        a.plan_doc["windows"][0]["_applied"] == 1
    a.restore()
    assert world.stream_win[0] is None


@pytest.mark.host_timed
def test_apply_lets_cupti_go_once_its_stream_windows_matched(world, tmp_path, monkeypatch):
    """apply's launch log attaches CUPTI, which costs each launch for the program's life.
    With --release-cupti (experimental) captures are counted from before the log (tracking
    begun while not logging yet); once the windows matched, tracking ends and CUPTI is let go
    where no capture began, as advise does once decided (clock.SwitchGate.release_cupti);
    apply's report says so."""
    from l2persist.process import bootstrap
    a, calls, *_ = _apply_with_a_stream_window(world, tmp_path, monkeypatch, begun=0)
    assert calls[0] == ("track", False), calls
    assert calls[-2:] == [("release", True), "untrack"], calls
    assert a.cupti_release == ("releasing", None)
    assert "CUPTI let go after the launch log (the program made no CUDA graph; now " \
           "releasing)" in bootstrap.apply_report(a)
    # attached again since (a reclaim): the report says what the core says now
    monkeypatch.setattr(live._core, "cupti_state", lambda: "held")
    assert "CUPTI stayed attached: attached again" in bootstrap.apply_report(a)
    # a capture began before any call's exit carried the release out: the core withdrew it
    monkeypatch.setattr(live._core, "cupti_state", lambda: "withdrawn")
    assert "CUPTI stayed attached: a capture began as it was being let go" in \
        bootstrap.apply_report(a)
    a.restore()


@pytest.mark.host_timed
def test_apply_keeps_cupti_where_a_capture_began_while_it_was_attached(world, tmp_path,
                                                                        monkeypatch):
    """A capture counted while the log ran: its graph would fail once CUPTI went (161093c),
    so CUPTI stays, and apply's report says why."""
    from l2persist.process import bootstrap
    a, calls, *_ = _apply_with_a_stream_window(world, tmp_path, monkeypatch, begun=1)
    assert calls[-2:] == [("release", True), "untrack"], calls
    assert a.cupti_release[0] == "held" and "graph" in a.cupti_release[1], a.cupti_release
    assert "CUPTI stays attached after the launch log" in bootstrap.apply_report(a)
    a.restore()


@pytest.mark.parametrize("stream,said", [(0x5EED, "stream(s) the program made itself"),
                                         (2, "a per-thread default stream")])
def test_a_stream_the_program_made_itself_gets_no_window(world, stream, said):
    """Eager launches on a stream that is neither the legacy default stream nor PyTorch's pool
    (the program may destroy it; a per-thread default stream, as the launch log gives a _ptsz
    launch's NULL, is the launching thread's own): not a target, nothing set on it, and advise
    says which."""
    world.eager_gain = 1.25
    w = _watcher()
    _eager_program(world, w, stream=stream)
    assert w.state == "done", w.notes
    assert not w.result["helps"], w.result
    assert world.stream_sets == []
    assert any(said in n and "no window is set there" in n for n in w.notes), w.notes


@pytest.mark.parametrize("ends", ["capture_end", "capture_failed"])
def test_a_capture_suspends_the_stream_windows(world, ends):
    """A captured kernel node copies its stream's window: while the program captures, the
    watcher's stream windows are off, and back once the capture has ended, or once the
    program's capture_begin raised (nothing else would set them again: after the decision no
    switch comes). A failing hook puts them back for good."""
    world.eager_gain = 1.25
    w = _watcher()
    _eager_program(world, w)
    assert world.stream_win.get(0) is not None
    w.capture_begin()
    assert world.stream_win[0] is None
    if ends == "capture_end":
        world.captures_open += 1
        world.captures_open -= 1
        w.capture_end(ProgramGraph())
    else:
        w.capture_failed()
    assert world.stream_win[0] is not None and world.stream_win[0].base == EAGER_IN
    assert w.captures == 0
    w.fail("a hook", RuntimeError("boom"))
    assert world.stream_win[0] is None


def _stream_entry(sig, nbytes=64 * MIB, prop="streaming"):
    return {"graph": sig, "node": 0, "param": 0, "offset": 0, "delta": 0, "bytes": nbytes,
            "hit_ratio": 1.0, "hit_prop": prop, "miss_prop": "streaming", "nodes": [0],
            "stream": "launch"}


def test_a_plans_stream_window_lands_only_on_the_buffer_it_names(world):
    """One kernel launched on two buffers is two groups of one signature: the plan's window
    (saved on the 64 MiB input) lands on that allocation, not on the first group's 1 MiB one;
    and a second entry for the same stream does not replace the first (a stream holds one)."""
    from l2persist.process.streams import LaunchSeen
    sig = "k1-00000000000000ee"
    w = _watcher(mode="apply")
    w.plan_doc = {"set_aside": None, "windows": [_stream_entry(sig),
                                                 _stream_entry(sig, prop="persisting")]}
    small = LaunchSeen(sig, ["k_eager"], [(SMALL, MIB, 0)], [(0, 0, 0, SMALL, 0)], 0, 5)
    big = LaunchSeen(sig, ["k_eager"], [(EAGER_IN, 64 * MIB, 0)], [(0, 0, 0, EAGER_IN, 0)], 0,
                     5)
    w.switcher.apply_plan_windows(small, install=True)
    assert not w._stream_plan and not small.windows_applied
    w.switcher.apply_plan_windows(big, install=True)
    (key, win), = w._stream_plan.values()
    assert key[0] == EAGER_IN and win.hit_prop == "streaming" and big.windows_applied == 1
    w.switcher.apply_plan_windows(big, install=True)   # the next try: the other entry
    assert w._stream_plan[0][1].hit_prop == "streaming"
    assert w.plan_doc["windows"][1].get("_superseded")


def test_a_plan_holds_one_window_per_stream_as_installed(world):
    """An arm with two eager targets on one stream: the plan holds the first placed, the one
    Switcher.install sets (the heavier target), not one the search never measured."""
    from l2persist.process.streams import LaunchSeen
    w = _watcher()
    g1 = LaunchSeen("k1-00000000000000e1", ["k_eager"], [(EAGER_IN, 64 * MIB, 0)],
                    [(0, 0, 0, EAGER_IN, 0)], 0, 5)
    g2 = LaunchSeen("k1-00000000000000e2", ["k_fill"], [(SMALL, MIB, 0)],
                    [(0, 0, 0, SMALL, 0)], 0, 5)
    w.targets = [live.Target(EAGER_IN, 64 * MIB, 2.0, [(g1, 0)]),
                 live.Target(SMALL, MIB, 1.0, [(g2, 0)])]
    arm = {"set_aside": 8 * MIB, "windows": [(0, 1.0, "streaming", "streaming"),
                                             (1, 1.0, "persisting", "streaming")]}
    docs = w.report.window_docs(arm)
    assert [(d["graph"], d["stream"]) for d in docs] == [("k1-00000000000000e1", "launch")]
    w.arms, w.device, w.default_limit = [arm], l2persist.Device(0), 4 * MIB
    w.switcher.install(0)
    assert world.stream_win[0].base == EAGER_IN
    w.restore()


def test_a_capture_in_the_probe_starts_the_launch_log_over(world):
    """A capture's launches go to the capture stream as if eager: the probe's log is dropped
    when a capture begins and begun again once it has ended."""
    w = _watcher(warmup_s=0.01)
    while w.state != "probe":
        w.point("sync")
        world.eager()
    assert world.logging
    w.capture_begin()
    world.captures_open += 1
    assert not world.logging and w.log_cut
    world.captures_open -= 1
    w.capture_end(ProgramGraph())
    assert world.logging and not w.log_cut
    _eager_program(world, w)
    assert w.state == "done" and not world.logging, w.notes


def test_a_graph_the_program_dropped_is_no_target(world):
    """A graph replayed in the warm-up and then dropped (its batch size retired) gives no
    target: its windows would land nowhere and take an arm."""
    import gc
    world.gain = 1.25
    w = _watcher(warmup_s=1e9)
    old = ProgramGraph()
    w.capture_begin()
    w.capture_end(old)
    for _ in range(100):
        w.point("replay", old)
        world.replay(old)
    del old
    gc.collect()
    w.o.warmup_s = 0.01
    g = run_program(world, w)
    assert w.state == "done", w.notes
    assert all(place[0].ref() is g for t in w.targets for place in t.places)


@pytest.mark.host_timed
def test_the_watchers_own_cost_is_measured_after_the_decision(world):
    """Once decided, the final arm's units are timed again with nothing recorded or switched,
    and the summary sets the two walls side by side (the watcher's cost, measured in the
    program). Here the simulated host pays a recorded replay 200 us, several times what the
    rest of a replay costs it, so watching costs the loop's wall time visibly (without that
    cost the ratio came out 1.4-1.9 here: the watcher's own path)."""
    import time as _time
    world.gain = 1.25
    rec = world.replay

    def replay_paying_for_records(graph=None):
        if world.collecting and world.recording:
            t = _time.perf_counter() + 200e-6     # two recorded kernels, 100 us each
            while _time.perf_counter() < t:
                pass
        rec(graph)

    world.replay = replay_paying_for_records
    w = _watcher()
    g = run_program(world, w)
    assert w.summary()["watch_cost"] is None            # not yet: nothing timed after
    need = max(live.AFTER_UNITS, 8 * w.units_per_block)
    for _ in range(need + 1):
        w.point("replay", g)
        world.replay(g)
    wc = w.summary()["watch_cost"]
    assert wc["unrecorded_units"] == need and wc["recorded_blocks"] >= 6
    assert wc["ratio"] > 3, wc                           # the 200 us per replay shows
    text = live_report_text(w)
    assert "watching: wall" in text and "after the decision" in text


def test_the_call_hooks_come_off_once_nothing_needs_them(world):
    """A program runs on long after advice: once decided and its own cost timed, the watcher
    takes its per-call hooks off (the bootstrap's undo), once; not while the after-decision
    timing still counts units, and not in a rank that must still tell its peers it went on
    alone. Calls that still reach it (a kept reference to a hooked function) return at once."""
    world.gain = 1.25
    w = _watcher()
    undone = []
    w.unhook_calls = lambda: undone.append(w.after_decision)
    g = run_program(world, w)
    assert w.state == "done" and w._after is not None and not undone   # still timing
    need = max(live.AFTER_UNITS, 8 * w.units_per_block)
    for _ in range(need + 1):
        w.point("replay", g)
        world.replay(g)
    assert len(undone) == 1 and undone[0] is not None    # after the timing, once
    assert w.unhook_calls is None and w.calls_unhooked
    before = dict(w.points)
    for _ in range(10):
        w.point("replay", g)
    assert len(undone) == 1 and w.points["replay"] == before["replay"] + 10

    w2 = _watcher()
    w2.unhook_calls = lambda: undone.append("team")
    w2.team_gave_up = True                 # peers still to be told: the hooks stay
    w2.state, w2._after = "done", None
    w2.ranks.release_peers = lambda: None
    w2.point("sync")
    assert undone[-1] != "team" and w2.unhook_calls is not None


@pytest.mark.host_timed
def test_the_pace_is_given_the_hooks_share_so_far(monkeypatch):
    """The pace bounds all that observing costs: the watcher hands the core (its one home) the
    share of the search's wall the hooks took so far, none before a call was timed."""
    w = _watcher()
    w.units_per_block = 4
    asked = []

    def rest_units(*a, **k):
        asked.append(k)
        return 0, False
    monkeypatch.setattr(live._core, "live_rest_units", rest_units)
    # the C search's state is the process's: alone this test has begun none (a review of
    # d8f40ad found it passing only after another test's search)
    monkeypatch.setattr(live._core, "live_blocks_left", lambda: 10)
    w.search_t0 = time.perf_counter() - 2.0
    w.hook_ns, w.hook_calls = 10_000_000, 1000          # 10 ms of hooks in 2 s of search
    w.pace.rest_length()
    assert 0.0045 < asked[-1]["hooks_share"] <= 0.005, asked
    # over the newest sixteen cycles, not since the start: four hooked cycles (10 ms of hooks
    # each), then gated ones whose hooks cost k * 0.1 ms in cycle k, 0.1 s a cycle
    now = time.perf_counter()
    marks, ns = [], 0
    for k in range(20):
        ns += 10_000_000 if k < 4 else k * 100_000
        marks.append((now - (20 - k) * 0.1, ns))
    w.hook_marks, w.hook_ns = list(marks), ns + 2_000_000
    w.pace.rest_length()
    t0, ns0 = marks[-16]                         # the mark sixteen cycles before this one
    want = (w.hook_ns - ns0) / 1e9 / (now - t0)
    assert abs(asked[-1]["hooks_share"] / want - 1) < 0.01, (asked[-1], want)
    w.hook_ns = w.hook_calls = 0
    w.pace.rest_length()
    assert asked[-1]["hooks_share"] is None


@pytest.mark.host_timed
@pytest.mark.parametrize("queued", [False, True])
def test_a_rest_runs_with_the_call_hooks_off_but_for_its_counted_tail(world, queued):
    """Each rest's units but its last block's worth run with the hooks' gate closed (the
    program's calls do not reach the watcher, so they cost it nothing), then a timer opens it
    and the tail is counted and timed from a drained GPU: the blocks still read the truth, the
    rests' rate per unit is the program's, and the rests' units are estimated from it. Queued:
    a GPU-bound program whose host runs far ahead, with 3 ms switches (long rests though
    recording costs it nothing): the tail's rate is the GPU's 140 us a unit, not the backlog
    the uncounted part left (checked by mutation: without the drain it read several times
    that). In a team (ranks count the same calls) or before a rate is known, a rest stays
    hooked."""
    w = _paced_world(world, queued)
    if queued:
        install = w.switcher.install

        def slow_install(arm, fresh=False):
            t = time.perf_counter() + 3e-3
            while time.perf_counter() < t:
                pass
            return install(arm, fresh)
        w.switcher.install = slow_install
    _hookable(world, w)
    run_program(world, w)
    assert w.state == "done" and w.result["helps"], w.notes
    s = w.summary()["watching"]
    assert s["rests_unhooked"] > 0 and world.unseen > 0, s
    assert world.switches[:2] == [False, True] and world.hooked     # open at the end
    assert all(a != b for a, b in zip(world.switches, world.switches[1:]))  # closed, open ...
    unhooked = [b for b in w.blocks if b.rest_unhooked]
    assert unhooked and all(b.rest_units >= 20 and b.rest_wall_ns > 1.5 * b.rest_ns
                            for b in unhooked)                    # a counted tail
    truth = 0.140                                         # GPU ms per unit with no window
    per_arm = w.summary()["per_arm"]
    for arm in (0, 1):
        samples = per_arm[arm]["gpu_ms_per_unit"]
        assert all(abs(x / truth - 1) < 0.03 for x in samples), (arm, samples)
    # the rests' units, estimated: near the replays that ran in them (seen or not)
    assert 0.8 < s["rest_units_total"] / (world.unseen + sum(
        b.rest_units for b in w.blocks if b.rest_units)) < 1.25, s
    if queued:      # GPU-bound: a unit costs its GPU time, the tail's too
        rates = per_arm[0]["rest_wall_ms_per_unit"] + per_arm[1]["rest_wall_ms_per_unit"]
        # (the median and nine in ten, not all: a loaded host makes single tails noisy; one
        # preempted tail read 0.31 ms on a CI machine. Without the drain every tail read
        # several times the truth)
        assert rates and abs(statistics.median(rates) / truth - 1) < 0.15, rates
        high = sorted(rates)[math.ceil(0.9 * len(rates)) - 1]
        assert high < 1.5 * truth, rates
    else:
        assert 0.10 < s["record_cost"] < 0.35, s            # the tails' rate, as before
    assert "rests ran with the call hooks off" in live_report_text(w)

    w2 = _watcher(block_units=20)
    _hookable(world, w2)
    w2.team, w2.rest_s = object(), 1e-4
    r = {"units": 400}
    w2.pace.rest_unhooked(r)
    assert "unhooked" not in r and world.hooked
    w2.team = None
    w2.rest_s = None                                          # no rate yet
    r = {"units": 400}
    w2.pace.rest_unhooked(r)
    assert "unhooked" not in r and world.hooked


def live_report_text(w):
    from l2persist.process.report import summary_text
    return summary_text(w.summary())


def _paying_host(world, base_s: float, recorded_s: float):
    """The program's host pays base_s per replay, and recorded_s more while its kernels are
    recorded (CUPTI's per-launch cost)."""
    rec = world.replay

    def replay(graph=None):
        t = time.perf_counter() + base_s + (recorded_s if world.collecting and world.recording
                                            else 0.0)
        while time.perf_counter() < t:
            pass
        rec(graph)
    world.replay = replay


def test_the_arms_cost_from_their_rests_against_the_baselines():
    """Costs.exploring on blocks made by hand: an arm's rests (their counted part: a gated rest's
    tail) set its wall per unit against the baselines' rests; the whole wall it ran (rests,
    settles, blocks) is charged at that ratio; one rest gives no "worst"; no candidate arm
    rested: nothing to say."""
    B = live.Block
    blocks = [B(0, 0, end=1000, units=10, rest_ns=10_000, rest_units=100),   # 100 ns a unit
              B(1, 0, end=1000, units=10, rest_ns=10_000, rest_units=100),
              # arm 2: 130 ns a unit in two rests, one gated (its tail counted, wall whole)
              B(2, 0, end=2000, units=10, rest_ns=1300, rest_units=10, rest_wall_ns=60_000,
                rest_unhooked=True, settle_ns=500),
              B(2, 0, end=2000, units=10, rest_ns=13_000, rest_units=100),
              B(3, 0, end=1000, units=10, rest_ns=7500, rest_units=50)]       # 150, one rest
    out = costs.Costs.exploring(blocks, wall=200_000.0)
    wall2 = 60_000 + 2000 + 500 + 13_000 + 2000
    wall3 = 7500 + 1000
    want = (wall2 * (1 - 1 / 1.3) + wall3 * (1 - 1 / 1.5)) / 200_000
    assert out["exploring_share"] == pytest.approx(want)
    assert out["exploring_worst"] == pytest.approx(1.3)           # arm 3: one rest, not it
    assert costs.Costs.exploring(blocks[:2], 200_000.0) == {
        "exploring_share": None, "exploring_worst": None}           # no candidate rested
    assert costs.Costs.exploring(blocks[2:], 200_000.0)["exploring_share"] is None


@pytest.mark.host_timed
@pytest.mark.parametrize("taxed", [True, False])
def test_what_trying_the_arms_costs_the_program_is_measured(world, taxed):
    """Apart from observing, trying an arm costs the program what the arm does to it: here
    (taxed) every set-aside of 16 MiB or more makes the host's replay 60 % slower, as the
    tax on a program's other kernels does. The watcher sets each arm's unrecorded rests
    against the baselines' pace: the costliest arm reads near 1.6x and the search paid for
    it (0.07-0.11 of the search's wall on this CPU); where no arm costs anything, the figure
    is near zero (this CPU's noise: -0.013 to 0.008 alone, 0.036 once under load; the worst arm
    up to 1.1x)."""
    world.gain = 1.25
    rec = world.replay

    def replay(graph=None):
        t = time.perf_counter() + 100e-6 * (1.6 if taxed and world.limit >= 16 * MIB else 1)
        while time.perf_counter() < t:
            pass
        rec(graph)
    world.replay = replay
    w = _watcher(block_units=20, max_overhead=0.03)
    run_program(world, w)
    assert w.state == "done", w.notes
    s = w.summary()["watching"]
    if taxed:
        assert 1.3 < s["exploring_worst"] < 2.0, s
        assert 0.04 < s["exploring_share"] < 0.5, s
    else:
        # wall-time noise on this CPU: 0.036 once with other tests running beside it (CI at
        # 5270e5a); the worst arm, the taxed case's 1.3-2.0x, is the sharper line
        assert s["exploring_worst"] < 1.25 and abs(s["exploring_share"]) < 0.06, s
    from l2persist.process.report import summary_text
    assert "exploring: the arms tried cost" in summary_text(w.summary())


@pytest.mark.host_timed
@pytest.mark.parametrize("max_overhead", [0.03, 0.0])
def test_rests_keep_what_watching_adds_near_the_bound(world, max_overhead):
    """Recording costs this host 20 % of a replay: back to back blocks would add about that to
    the program's wall time while it searches. With max_overhead 3 % the watcher rests
    between blocks (records paused, the next arm installed), sized from its own measurements,
    and what it measured watching to add comes out near the bound; the search still finds the
    table's window. max_overhead 0: no rest, every block back to back."""
    world.gain = 1.25
    _paying_host(world, 100e-6, 20e-6)
    w = _watcher(block_units=20, max_overhead=max_overhead)
    run_program(world, w)
    assert w.state == "done" and w.result["helps"], w.notes
    s = w.summary()["watching"]
    if not max_overhead:
        assert s["rests"] == 0 and s["rest_units_total"] == 0 and s["added_share"] is None, s
        assert all(not b.rest_units for b in w.blocks)
        return
    assert 0.10 < s["record_cost"] < 0.35, s         # the 20 % the host pays, measured
    assert s["rest_units"] >= 2 * 20, s               # rests of several blocks' worth
    assert s["rest_units_total"] > 2 * s["recorded_units"], s
    assert s["recorded_share"] == pytest.approx(
        s["recorded_units"] / (s["recorded_units"] + s["rest_units_total"]))
    assert s["added_share"] < 0.06, s                 # near the 3 % asked, not the 20 %
    assert "pace:" in live_report_text(w)


@pytest.mark.host_timed
def test_the_pace_scales_its_model_by_what_its_cycles_measured(world):
    """Every fourth switch stalls the host 6 ms (a collection, a page fault, a peer late to a
    gather): the median switch the pace models never sees it, the total the summary measures
    does. The pace scales its model by what its newest cycles measured over what the model
    said for them (Costs.correction), so what watching adds stays under the bound asked (5 %,
    aimed at 4 %: 4.3-4.4 % in five runs here), where the model alone let it run to 9-10 %."""
    world.gain = 1.25
    _paying_host(world, 100e-6, 20e-6)
    w = _watcher(block_units=20, max_overhead=0.05)
    install, n = w.switcher.install, [0]

    def stalling(*a, **k):
        n[0] += 1
        if n[0] % 4 == 0:
            time.sleep(0.006)
        return install(*a, **k)
    w.switcher.install = stalling
    run_program(world, w)
    assert w.state == "done" and w.result["helps"], w.notes
    s = w.summary()["watching"]
    assert s["rests_capped"] * 10 < s["rests"] and s["pace_correction"] > 1.5, s
    assert s["added_share"] < 0.05, s
    assert f"the rests sized for {s['pace_correction']:.2f}x the cost" in live_report_text(w)


@pytest.mark.host_timed
@pytest.mark.parametrize("max_overhead,reach", [(0.005, False), (0.5, True)])
def test_a_bound_out_of_reach_is_said(world, max_overhead, reach):
    """Where the bound would need rests longer than the cap (max_rest_ratio blocks' worth:
    0.5 % against a 20 % recording cost), the rests stop at the cap and the summary and the
    report say that the bound was out of reach, not that it held; a bound within reach (50 %)
    gets rests below the cap and no such line."""
    world.gain = 1.25
    _paying_host(world, 100e-6, 20e-6)
    w = _watcher(block_units=20, max_overhead=max_overhead)
    run_program(world, w)
    assert w.state == "done", w.notes
    s = w.summary()["watching"]
    text = live_report_text(w)
    if reach:
        assert s["rests_capped"] == 0, s
        assert "out of reach" not in text
        return
    assert s["rests_capped"] * 2 >= s["rests"] > 0, s
    assert max(b.rest_units for b in w.blocks) >= 20 * s["max_rest_ratio"]
    assert s["added_share"] > max_overhead, s          # the bound did not hold ...
    assert "out of reach" in text                      # ... and the report says so


@pytest.mark.host_timed
def test_cuptis_misrecord_after_a_pause_reaches_no_sample(world, monkeypatch):
    """The world misrecords as CUPTI does: a graph launched while the records were paused is
    recorded at its next launch from its last launch before the pause (unless instantiated
    again). Every block still reads the truth: the settle lets each graph launch once before the
    block begins, and a record that outlives its block is dropped and counted. (Without the
    settle, every other block of limit 0 read 1/20 low here: checked by mutation.) The graph's
    owner cannot be made to instantiate it again here (not PyTorch's: the watcher's fresh
    executables before a rest do not reach it), so only a window change renews it, and the
    watcher says so. (CUPTI's short records of such a graph are another matter: off here.)"""
    world.gain = 1.25
    world.short = 0.0
    monkeypatch.setattr(process_torch, "reinstantiate", lambda owner: False)
    _paying_host(world, 100e-6, 20e-6)
    w = _watcher(block_units=20, max_overhead=0.03)
    run_program(world, w)
    assert w.state == "done" and w.result["helps"], w.notes
    assert world.misrecorded > 0                          # the world did misrecord
    s = w.summary()
    assert s["watching"]["spanning_records"] > 0          # ... and those records were dropped
    assert any("could not be instantiated again" in n for n in w.notes), w.notes
    truth = 0.140                                         # ms per unit with no window
    for arm in (0, 1):
        samples = s["per_arm"][arm]["gpu_ms_per_unit"]
        assert all(abs(x / truth - 1) < 0.03 for x in samples), (arm, samples)


def _warmup_only_graph(world, after_warmup=None):
    """A paced search on graph g, with a bare second graph (no buffer: never windowed, renewed
    only when fresh) replayed only in the first 20 iterations, the warm-up (whose records are
    on: graphs exist); after_warmup(early) runs once after those. Returns (watcher, g, early)."""
    world.gain = 1.25
    _paying_host(world, 100e-6, 20e-6)
    w = _watcher(block_units=20, max_overhead=0.03)
    g, early = ProgramGraph(), ProgramGraph()
    early.bare = True
    for graph in (g, early):
        w.capture_begin()
        w.capture_end(graph)
    for i in range(2_000_000):
        w.point("replay", g)
        world.replay(g)
        if i < 20:
            w.point("replay", early)
            world.replay(early)
        elif i == 20 and after_warmup is not None:
            after_warmup(early)
        if w.state in ("done", "off"):
            break
    return w, g, early


@pytest.mark.host_timed
def test_only_graphs_recorded_since_their_executable_are_made_again(world):
    """Before a paused rest the watcher makes again the executables of the graphs replayed
    with records on since theirs was made, and no other: a graph replayed only in the warm-up
    is renewed once, not at every rest (a program's idle batch sizes would cost every switch
    otherwise); the graph in use is renewed at every rest."""
    w, g, early = _warmup_only_graph(world)
    s = w.summary()["watching"]
    assert w.state == "done" and s["rests"] > 10, s
    assert world.instantiations.get(id(early), 0) == 1, world.instantiations
    assert world.instantiations[id(g)] >= s["rests"]
    assert world.short_records == 0


@pytest.mark.host_timed
def test_a_graph_the_program_reset_is_left_alone(world, monkeypatch):
    """A graph replayed with records on, then reset() by the program, which keeps the object:
    PyTorch refuses to instantiate it again (RuntimeError). The fresh executables before a rest
    skip it; watching goes on to a decision."""
    renew = process_torch.reinstantiate

    def reinstantiate(owner):
        if getattr(owner, "was_reset", False):
            raise RuntimeError("capture_end() must have been called before calling instantiate")
        return renew(owner)
    monkeypatch.setattr(process_torch, "reinstantiate", reinstantiate)
    # the program resets it after the warm-up, and keeps the object
    w, _, _ = _warmup_only_graph(world, lambda early: setattr(early, "was_reset", True))
    assert w.state == "done", w.notes
    assert not any("failed" in n for n in w.notes), w.notes


def test_the_ungraphed_share_is_a_lower_bound(world):
    """By kernel name: a dropped graph's kernels are graph kernels, a kernel launched both
    ways counts as the graph's, and kernels past the name table count in the total only."""
    w = _watcher()
    live_g, dropped = types.SimpleNamespace(names=["k_a"]), types.SimpleNamespace(names=["k_b"])
    w.graphs, w.graphs_gone = {1: live_g}, [dropped]
    w.kernel_ns_warmup = {"k_a": 30.0, "k_b": 20.0, "k_eager": 25.0, "(other kernels)": 25.0}
    w.probe.note_ungraphed()
    assert w.ungraphed == {"share": 0.25, "heaviest": ["k_eager"]}
    assert any("at least 25 %" in n and "k_eager" in n for n in w.notes), w.notes
    w.notes, w.kernel_ns_warmup = [], {}
    w.probe.note_ungraphed()
    assert w.ungraphed["share"] is None and not w.notes     # no records: nothing said


def test_the_after_decision_timing_waits_for_a_capture_to_close(world):
    """The after-decision timing synchronizes at both ends, so never while the program
    captures: a capture open at the boundary puts the end off until it closes (the sim's
    device refuses a synchronization in a capture)."""
    world.gain = 1.0
    w = _watcher()
    g = run_program(world, w)
    need = max(live.AFTER_UNITS, 8 * w.units_per_block)
    for _ in range(need):                     # t0 and need - 1 units
        w.point("replay", g)
        world.replay(g)
    w.capture_begin()
    world.captures_open += 1
    for _ in range(5):                        # the boundary passes inside the capture
        w.point("replay", g)
    world.captures_open -= 1
    w.capture_end(ProgramGraph())
    assert w.summary()["watch_cost"] is None  # not while the capture was open
    w.point("replay", g)
    world.replay(g)
    wc = w.summary()["watch_cost"]
    assert wc is not None and wc["unrecorded_units"] > need


@pytest.mark.host_timed
def test_the_watchers_own_cost_counts_the_gpu_where_the_host_runs_ahead(world):
    """A GPU-bound program: the host launches a replay in about 30 us, the GPU runs it in
    140 us, so the host runs ahead. The after-decision wall is timed between synchronizations,
    as each block's is, so it reads the program's throughput, not the host's launch rate, and
    the two walls agree (the host's own time read a training step at 2.2x on the H100)."""
    world.gain = 1.0
    _queued(world)
    _paying_host(world, 30e-6, 0.0)                # recording costs this host nothing
    w = _watcher(block_units=20)
    g = run_program(world, w)
    need = max(live.AFTER_UNITS, 8 * w.units_per_block)
    for _ in range(need + 1):
        w.point("replay", g)
        world.replay(g)
    wc = w.summary()["watch_cost"]
    assert wc is not None and wc["unrecorded_units"] == need
    assert wc["unrecorded_wall_ms_per_unit"] > 0.12, wc   # the GPU's 140 us, not the host's 30
    assert 0.85 < wc["ratio"] < 1.2, wc


def _paced_world(world, queued: bool):
    """The paced watcher's usual world: a table window that pays 1.25x, a host that pays for
    recording (host-bound) or, queued, a GPU that runs behind a host that barely does."""
    world.gain = 1.25
    if queued:
        _queued(world)
        _paying_host(world, 30e-6, 5e-6)      # the host: 30-35 us a replay; the GPU: 140 us
    else:
        _paying_host(world, 100e-6, 20e-6)
    return _watcher(block_units=20, max_overhead=0.03)


def _queued(world):
    """The GPU runs behind the host: a kernel starts when the one before it ends."""
    clock = world.clock

    def later():
        return max(clock(), world.last_end)
    world.clock = later


@pytest.mark.host_timed
@pytest.mark.parametrize("unit", ["replay", "mark"])
@pytest.mark.parametrize("queued", [False, True])
def test_settled_blocks_read_the_truth(world, unit, queued):
    """Two cases the settle must hold in (a review found both): the unit is a mark, so the call
    that ends the rest is not the graph's (its first launch after the pause must still fall in
    the settle), and a GPU that runs behind the host (the settle's queued kernels must not run
    in the block). Every block's GPU time is that of the kernels launched in it. (Fails with
    the graph taken off the settle's list before the check, and without the settle's
    synchronization: both checked by mutation.)"""
    w = _paced_world(world, queued)
    g, rare = ProgramGraph(), ProgramGraph()  # rare: every 5th iteration (the settle waits)
    bare = ProgramGraph()                     # no buffer: never windowed, so never renewed
    bare.bare = True                          # by a window change (every 3rd iteration)
    for graph in (g, rare, bare):
        w.capture_begin()
        w.capture_end(graph)
    for i in range(2_000_000):
        if unit == "mark":
            w.point("mark")
        w.point("replay", g)
        world.replay(g)
        if i % 5 == 4:
            w.point("replay", rare)
            world.replay(rare)
        if i % 3 == 2:
            w.point("replay", bare)
            world.replay(bare)
        if w.state in ("done", "off"):
            break
    s = w.summary()
    assert w.state == "done" and s["unit"][0] == unit, w.notes
    assert s["watching"]["rests"] > 0 and s["watching"]["settle_units"] > s["watching"]["rests"]
    # Each block's GPU time is exactly that of the kernels launched in it: no launch of the
    # settle before it, none of its own lost to a wrong record.
    import bisect
    at = [t for t, _ in world.launches]
    timed = [b for b in w.blocks[:w.recorded] if b.units]
    assert len(timed) > 50
    for b in timed:
        lo, hi = bisect.bisect_left(at, b.start), bisect.bisect_left(at, b.end)
        truth = sum(d for _, d in world.launches[lo:hi])
        assert abs(b.gpu_ns / truth - 1) < 0.005, (b, truth)
    # ... every graph renewed before each paused rest, the bare one too: no short record
    assert world.short_records == 0 and not any("instantiated again" in n for n in w.notes)
    # ... with the summed blocks' records trimmed as the search went: the log holds no record
    # that starts before the last summed block's end
    assert world.trimmed > 0
    assert all(r[0] >= w.blocks[w.recorded - 1].end for r in world.records)
