"""The simulator with the graphs timed by replay events (advise --replay-events, experimental).

The world of tests/test_live_sim_cpu.py, and each replay of its graph timed as l2p_replays.c
does: a pair of events around it on its stream, one record per replay in the activity log
("replay:<signature>"), timed only while the watcher records. As on the H200 at 94f3501, an
event pair taken while the kernel records are on reads the records' own GPU time too
(``INFLATION``): where the probe sees no eager work the records stay off in the blocks, and an
arm's landing block (records on, to read its windows) would read that much slower than its
other blocks. Such a landing block is not given to the search (Search.next_block).
"""
import bisect
import types

import pytest

from l2persist.process import bootstrap, live, pace
from test_live_sim_cpu import ProgramGraph, _watcher, world  # noqa: F401  (world: a fixture)

#: How much longer an event-timed replay reads while the kernel records are on
#: (decode_big's landing blocks at 94f3501: 6.6-8.7 %).
INFLATION = 0.08
#: A replay launched with the GPU idle: its pair holds the host's launch too, 0 to this many
#: times the replay's own GPU time (server_mix's later blocks 9.7 % apart by events, 94f3501),
#: and l2p_replays logs it under "host:" + its label.
HOST_LAUNCH = 4.0


@pytest.fixture
def events(world, monkeypatch):  # noqa: F811
    """The world's replays timed by events, its launch attributes collected where asked, and a
    PyTorch whose raw current stream can be read (the events' stream)."""
    core = live._core
    labels, slots = {}, {}
    world.timed = world.host = world.ended = 0
    world.host_every = 0           # every n-th replay finds the GPU idle (0: none)
    world.timed_every = 0          # ... or all but every n-th (0: as host_every says)

    def replay_label(text):
        return labels.setdefault(text, len(labels))

    def replay_begin(stream, label):
        if not world.collecting:
            return -1
        slot = len(slots) + world.timed
        slots[slot] = (label, world.clock(), len(world.launches))
        return slot

    def replay_end(slot, stream):
        label, t0, n0 = slots.pop(slot)
        d = sum(ns for _t, ns in world.launches[n0:])
        if world.recording:
            d *= 1 + INFLATION             # the records' own GPU time inside the pair
        text = next(t for t, i in labels.items() if i == label)
        world.ended += 1
        if (world.host_every and world.ended % world.host_every == 0) or \
                (world.timed_every and world.ended % world.timed_every):
            d *= 1 + HOST_LAUNCH * ((world.ended * 7919) % 1000) / 1000
            text = "host:" + text
            world.host += 1
        else:
            world.timed += 1
        world.records.append((t0, t0 + int(d), text, ("replay", text)))
        world.last_end = max(world.last_end, t0 + int(d))   # a synchronization waits for it

    node = (lambda r: isinstance(r[3][0], int))       # a graph node's record: (id(graph), n)
    summed = world.blocks

    def blocks(bounds, timing="nodes"):
        """The events' records or the nodes', never both (CUPTI's graph id tells them apart),
        and the graph nodes recorded per block."""
        every = world.records
        if timing == "events":
            world.records = [r for r in every if not node(r)]
        else:
            world.records = [r for r in every if r[3][0] != "replay"]
        try:
            res = summed(bounds)
        finally:
            world.records = every
        nodes = [0] * (len(bounds) - 1)
        for r in every:
            b = bisect.bisect_right(bounds, r[0]) - 1
            if node(r) and 0 <= b < len(nodes):
                nodes[b] += 1
        res["graph_nodes"] = nodes
        return res

    world.attrs = False
    for name, fn in {"replay_label": replay_label, "replay_begin": replay_begin,
                     "replay_end": replay_end, "replay_harvest": lambda: 0,
                     "replay_counts": lambda: {"timed": world.timed, "host": world.host,
                                               "skipped": 0, "failed": 0,
                                               "pending": len(slots)},
                     "activity_blocks": blocks,
                     "activity_attributes": lambda on: setattr(world, "attrs", on),
                     "activity_windows": lambda bounds: {
                         "windows": {}, "counts": [{} for _ in range(len(bounds) - 1)]}
                     }.items():
        monkeypatch.setattr(core, name, fn, raising=False)
    torch = types.ModuleType("torch")
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0x51)
    torch.cuda = types.SimpleNamespace(is_available=lambda: False,
                                       is_initialized=lambda: False)
    monkeypatch.setitem(__import__("sys").modules, "torch", torch)
    monkeypatch.setattr(bootstrap, "_replay_timer", None)
    monkeypatch.setattr(bootstrap, "_replay_end", None)
    return world


def run_timed_program(world, watcher, replays=2_000_000):  # noqa: F811
    """The program of test_live_sim_cpu.run_program, each replay through the bootstrap's
    replay timer as PyTorch's patched replay calls it (process/bootstrap.py)."""
    g = ProgramGraph()
    watcher.capture_begin()
    watcher.capture_end(g)
    for _ in range(replays):
        watcher.point("replay", g)
        timer = bootstrap._replay_timer
        token = timer(g) if timer is not None else None
        world.replay(g)
        if token is not None:
            bootstrap._after_replay(token)
        if watcher.state in ("done", "off"):
            break
    return g


@pytest.mark.parametrize("gain", [1.25, 1.0])
def test_events_with_the_records_off_judge_each_arm_without_its_landing_block(events, gain):
    events.gain = gain
    w = _watcher(replay_events=True)
    run_timed_program(events, w)
    assert w.state == "done", w.notes
    # the probe saw every graph node in a timed replay and no eager work: events, records off
    assert (w.timing, w.records_off) == ("events", True), w.timing_why
    assert events.timed > 0
    r = w.result
    assert bool(r["helps"]) is (gain > 1), r
    if gain > 1:               # 1.25x on k_gather is ~1.18x on the loop (as by the nodes)
        assert 1.10 < r["speedup"] < 1.25, r
    # the search was given the issued blocks only, and their samples agree within the world's
    # noise: a landing block's would read INFLATION more
    issued = [b for b in w.blocks[:w.recorded] if b.counted]
    assert len(issued) == r["search_blocks"] + r["confirm_blocks"], r
    # the rest before a landing block pairs with the arm's issued block, so the pace learns the
    # rests' length in the first round (every arm's first block is a landing block there)
    pairs = [k for k, b in enumerate(w.blocks) if b.counted and b.rest_units]
    assert len(pairs) >= pace.REST_PAIRS and pairs[pace.REST_PAIRS - 1] < 2 * len(w.arms), pairs
    for arm, d in w.summary()["per_arm"].items():
        s = d["samples"]
        assert max(s) / min(s) < 1 + INFLATION / 2, (arm, s)
    # each landing block, records on, is followed by the arm's issued block, records off
    landing = [k for k, b in enumerate(w.blocks) if not b.counted]
    assert landing and all(w.blocks[k].attrs for k in landing)
    for k in landing:
        if k + 1 < len(w.blocks):
            nxt = w.blocks[k + 1]
            assert nxt.arm == w.blocks[k].arm and nxt.counted and not nxt.attrs


def test_replays_launched_with_the_gpu_idle_are_counted_not_priced(events):
    """A third of the replays find the GPU idle at their pair's first event (l2p_replays logs
    them as "host:replay:..."; their pairs read the host's launch too, up to HOST_LAUNCH times
    the replay). The events still time the graphs (their nodes are covered by the timed and
    the host replays together), the mix counts every replay, and no host pair is priced: each
    arm's samples agree as closely as without them, and the gain is found."""
    events.gain, events.host_every = 1.25, 3
    w = _watcher(replay_events=True)
    run_timed_program(events, w)
    assert w.state == "done", w.notes
    assert (w.timing, w.records_off) == ("events", True), w.timing_why
    assert events.host > 0 and events.timed > events.host
    r = w.result
    assert r["helps"] and 1.10 < r["speedup"] < 1.25, r
    names = [live._core.activity_keys()[k][0] for k in w.mix_ref]
    assert names and not any(n.startswith("host:") for n in names), names
    replay = [k for k, n in zip(w.mix_ref, names) if n.startswith("replay:")]
    assert len(replay) == 1
    # the timed key stands for every replay of its graph in the probe (the unit here): its
    # launches scaled up from the timed two thirds
    ns, n = w.mix_ref[replay[0]]
    assert w.unit[0] == "replay" and ns[0] > 0
    assert n[0] == pytest.approx(w.mix_units, rel=0.01), (n, w.mix_units)
    for arm, d in w.summary()["per_arm"].items():
        s = d["samples"]
        assert max(s) / min(s) < 1 + INFLATION / 2, (arm, s)
    for sums in w.key_sums.values():
        assert not any(live._core.activity_keys()[k][0].startswith("host:") for k in sums)
    # nor in a block's kernels or GPU time (the summary's and the report's per-arm figures)
    done = [b for b in w.blocks if b.by_name]
    assert done and not any(n.startswith("host:") for b in done for n in b.by_name)
    assert all(b.gpu_ns == pytest.approx(sum(b.by_name.values())) for b in done)


@pytest.mark.parametrize("every", [("host_every", 1), ("timed_every", 3)])
def test_events_are_not_used_where_most_replays_find_the_gpu_idle(events, every):
    """Every replay launched with the GPU idle, or two in three (the graph timed by the third):
    the pairs would time the host's launch, so the nodes' records time the graphs (the
    summary's timing says why), and the search decides."""
    events.gain = 1.25
    setattr(events, *every)
    w = _watcher(replay_events=True)
    run_timed_program(events, w)
    assert w.state == "done", w.notes
    assert w.timing == "nodes" and "idle" in w.timing_why, w.timing_why
    assert w.result["helps"], w.result


def test_a_kernel_named_host_keeps_its_time_in_the_blocks(world, monkeypatch):  # noqa: F811
    """Only the events' "host:replay:" records are left out of a block's kernels: a kernel of
    the program's own whose name begins "host::" (a C++ namespace) keeps its place and its
    time, with the nodes' records timing the graph."""
    import test_live_sim_cpu as sim
    from test_live_sim_cpu import run_program
    kernels = [sim.KERNELS[0], (1, "host::k_other", *sim.KERNELS[1][2:])]
    monkeypatch.setattr(sim, "KERNELS", kernels)
    w = _watcher()
    run_program(world, w)
    assert w.state == "done" and w.timing == "nodes", w.notes
    done = [b for b in w.blocks if b.by_name]
    assert done and all(b.by_name.get("host::k_other", 0) > 0 for b in done)


def _cupti_world(events, monkeypatch):
    """The events world with CUPTI as the core has it once let go after the probe
    (process/letgo.py): activity_detach stops the kernel records for good and keeps the log
    (the replays' pairs), cupti_release is carried out by the next synchronization, and every
    CUPTI call that would attach it again is noted in ``events.after``."""
    from l2persist.process import clock, letgo, torch as process_torch
    core = live._core
    events.cupti, events.detached, events.after, events.asked = "attached", False, [], None
    events.release_t = None
    monkeypatch.setattr(process_torch, "renewable", lambda owner: isinstance(owner, ProgramGraph))
    monkeypatch.setattr(clock, "_profiler_on", lambda: False)   # the fake torch has none
    monkeypatch.setattr(letgo, "OTHER_CAPTURERS", ())
    record = core.activity_record

    def attaching(name, fn):
        def call(*a, **k):
            if events.cupti == "released":
                events.after.append(name)
            return fn(*a, **k)
        return call

    def detach():
        events.recording, events.detached = False, True

    end = core.activity_end

    def activity_end():            # as the core: a detached log ends with no CUPTI call
        events.detached = False
        end()

    def release(hand_captures=False):
        events.asked, events.cupti = hand_captures, "releasing"
        return ("releasing", None)

    sync = events.synchronize

    def synchronize():             # a CUDA call of the watcher's carries the release out
        sync()
        if events.cupti == "releasing":
            events.cupti, events.release_t = "released", events.clock()

    monkeypatch.setattr(events, "synchronize", synchronize)
    for name, fn in {"activity_detach": detach, "activity_detached": lambda: events.detached,
                     "activity_record": lambda on: None if events.detached else record(on),
                     "cupti_release": release, "cupti_state": lambda: events.cupti,
                     "activity_end": activity_end,
                     "activity_attributes": attaching("activity_attributes",
                                                      core.activity_attributes),
                     "activity_begin": attaching("activity_begin", core.activity_begin),
                     "activity_graphs": attaching("activity_graphs", lambda on: None),
                     "capture_watch_begin": attaching("capture_watch_begin",
                                                      lambda device: None)}.items():
        monkeypatch.setattr(core, name, fn, raising=False)


def _tracked(w):
    """The capture count on, as the clock begins it at the driver's load when the program
    runs alone (the simulator runs no clock thread): the let-go needs it."""
    w.clock_tracking = True


def test_cupti_stays_where_captures_were_not_tracked(events, monkeypatch):
    """Without the core's capture count (the clock never began it) a graph another library
    made under CUPTI would not be known: the let-go keeps CUPTI, and says why."""
    events.gain = 1.25
    _cupti_world(events, monkeypatch)
    w = _watcher(replay_events=True)
    run_timed_program(events, w)
    assert w.state == "done", w.notes
    t = w.summary()["timing"]
    assert t["cupti_after_probe"][0] == "kept", t
    assert "captures were not tracked" in t["cupti_after_probe"][1]
    assert events.asked is None and events.cupti != "released"


def test_cupti_is_let_go_after_an_events_probe_and_the_search_still_finds_the_gain(
        events, monkeypatch):
    """Where events time the graphs and the records stay off in the blocks, the probe's end
    detaches the log, lets CUPTI go (asked without the capture count: the watcher's own rule),
    makes the graph again once it is gone, and nothing after attaches CUPTI again: no kernel is
    recorded, no launch attribute asked (no landing block), yet the search finds the window."""
    events.gain = 1.25
    _cupti_world(events, monkeypatch)
    w = _watcher(replay_events=True)
    _tracked(w)
    g = run_timed_program(events, w)
    assert w.state == "done", w.notes
    assert (w.timing, w.records_off) == ("events", True), w.timing_why
    t = w.summary()["timing"]
    assert t["cupti_after_probe"] == ("released", None) and events.asked is False, t
    assert t["graphs_renewed"] == 1 and events.instantiations.get(id(g), 0) >= 1
    assert t["letgo_ms"] >= 0
    assert events.after == [], events.after
    nodes = [r for r in events.records if isinstance(r[3][0], int) and r[0] >= events.release_t]
    assert nodes == []
    assert w.blocks and all(b.counted and not b.attrs for b in w.blocks)
    # each arm's windows read back from the graph's nodes as it installed them
    landed = w.landing.summary()
    assert landed["checked"] and landed["from"] == "nodes", landed
    assert len(landed["arms"]) == len(w.arms), landed
    # no arm's nodes held a window it did not set (another arm's left behind), and each arm
    # that sets windows had nodes under them (a node holds one window: an arm with two on the
    # same node shows the one overwritten as on no node, as CUPTI's attributes would)
    for a in landed["arms"]:
        assert a["foreign"] == 0 and (a["meant"] > 0) == (a["windows"] > 0), a
    r = w.result
    assert r["helps"] and 1.10 < r["speedup"] < 1.25, r


def test_cupti_stays_where_the_keep_diagnostic_asks(events, monkeypatch):
    events.gain = 1.25
    _cupti_world(events, monkeypatch)
    w = _watcher(replay_events=True, keep_cupti=True)
    _tracked(w)
    run_timed_program(events, w)
    assert w.state == "done", w.notes
    assert w.cupti_after_probe == ("kept", "L2PERSIST_KEEP_CUPTI=1")
    assert events.cupti == "attached" and not events.detached
    assert any(b.attrs for b in w.blocks)          # the landing blocks, as before


def test_a_search_begun_again_after_the_let_go_probes_with_cuptis_records_again(events,
                                                                              monkeypatch):
    """After CUPTI was let go the replays' event pairs stop coming (here: every pair refused,
    as where the GPU was idle at each): the block has no record, the search begins again
    (Search.restart) and the log is ended and begun with CUPTI again (LetGo.reattach), so the
    new probe has the nodes' records; it times the graphs by them from there and still finds
    the window."""
    events.gain = 1.25
    _cupti_world(events, monkeypatch)
    core = live._core
    begin = core.replay_begin
    monkeypatch.setattr(core, "replay_begin", lambda stream, label: -1 if events.cupti ==
                        "released" and events.release_t is not None and
                        events.clock() > events.release_t and events.no_pairs
                        else begin(stream, label))
    events.no_pairs = True
    w = _watcher(replay_events=True)
    _tracked(w)
    run_timed_program(events, w)
    assert w.state == "done", w.notes
    assert w.restarts["work"] >= 1, w.notes
    assert "activity_begin" in events.after          # CUPTI begun again for the new probe
    assert not events.detached and w.timing == "nodes", (w.timing, w.timing_why)
    assert w.landed_read_back is False
    r = w.result
    assert r["helps"] and 1.10 < r["speedup"] < 1.25, r


def test_a_release_that_was_not_carried_out_leaves_the_search_as_before_the_let_go(
        events, monkeypatch):
    """The synchronization after the request does not carry the release out (another tool's
    call kept CUPTI, say): the let-go is undone (the request taken back, the log collecting
    with CUPTI again), the events still time the search, its landing blocks read the windows
    from the kernels' records again, and it still finds the window."""
    events.gain = 1.25
    _cupti_world(events, monkeypatch)
    core = live._core
    took_back = []

    def reclaim():                 # the core takes the pending request back
        took_back.append(events.cupti)
        events.cupti = "attached"
        return "releasing"
    monkeypatch.setattr(core, "cupti_reclaim", reclaim, raising=False)
    w = _watcher(replay_events=True)
    _tracked(w)
    from l2persist.process import letgo as _letgo
    after = _letgo.LetGo.after_probe

    def after_probe(self):
        dev = self.w.device
        sync = dev.synchronize
        dev.synchronize = lambda: None     # this once: nothing carries the release out
        try:
            after(self)
        finally:
            dev.synchronize = sync
    monkeypatch.setattr(_letgo.LetGo, "after_probe", after_probe)
    run_timed_program(events, w)
    assert w.state == "done", w.notes
    assert took_back == ["releasing"] and events.cupti == "attached"
    t = w.summary()["timing"]
    assert t["cupti_after_probe"] == ("kept", "the release was not carried out (releasing)"), t
    assert not events.detached and w.landed_read_back is False
    assert (w.timing, w.records_off) == ("events", True)
    assert any(b.attrs for b in w.blocks)          # landing blocks: records, as before
    r = w.result
    assert r["helps"] and 1.10 < r["speedup"] < 1.25, r
