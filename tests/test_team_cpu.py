"""Ranks that advise together (l2persist/process/team.py), without a GPU: the gather that keeps
the ranks' watchers in lockstep, run on threads over an in-memory store with the methods of
torch.distributed's; the leader's decisions adopted by a follower; the ranks' results merged
into one, with one plan per GPU model."""
import json
import pathlib
import random
import sys
import threading
import time
import types

import pytest

from l2persist.cli.live import _plan_paths
from l2persist.process import clock, graphs, live, team
from l2persist.process.team import Team, TeamError


class Store:
    """torch.distributed.Store's set / get / check / delete_key, in memory, thread-safe."""

    def __init__(self):
        self.d, self.lock = {}, threading.Lock()

    def set(self, k, v):
        with self.lock:
            self.d[k] = v

    def get(self, k):
        with self.lock:
            return self.d[k]

    def check(self, keys):
        with self.lock:
            return all(k in self.d for k in keys)

    def delete_key(self, k):
        with self.lock:
            return self.d.pop(k, None) is not None


def _ranks(world, body, timeout_s=10.0):
    store, out, errs = Store(), [None] * world, [None] * world

    def run(r):
        try:
            out[r] = body(Team(r, world, store, timeout_s=timeout_s), r)
        except Exception as e:
            errs[r] = e
    ts = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out, errs, store


def test_gather_gives_every_rank_all_docs_in_rank_order():
    def body(t, r):
        got = []
        for step in range(40):
            time.sleep(random.random() * 1e-3)       # ranks arrive in any order
            got.append(t.gather({"rank": r, "step": step, "v": r * 100 + step}))
        return got
    out, errs, store = _ranks(3, body)
    assert errs == [None] * 3
    assert out[0] == out[1] == out[2]
    for step, docs in enumerate(out[0]):
        assert [d["rank"] for d in docs] == [0, 1, 2]
        assert all(d["step"] == step for d in docs)
    # Old steps are pruned: the store holds the last two steps' keys, not all 40.
    assert len(store.d) <= 2 * 3


def test_a_rank_that_leaves_releases_its_peers_with_a_named_error():
    def body(t, r):
        t.gather({"x": r})
        if r == 1:
            t.leave()
            return "left"
        return t.gather({"x": r})
    out, errs, _ = _ranks(2, body)
    assert out[1] == "left"
    assert isinstance(errs[0], TeamError) and "rank 1 stopped watching" in str(errs[0])


def test_a_peer_that_never_arrives_times_out_naming_it():
    def body(t, r):
        if r == 0:
            return t.gather({"x": 0})
        return None                                  # rank 1 never gathers
    t0 = time.monotonic()
    out, errs, _ = _ranks(2, body, timeout_s=0.3)
    assert isinstance(errs[0], TeamError)
    assert "rank 1 did not reach step 0" in str(errs[0])
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize("rank,world,name", [(2, 2, "rank"), (-1, 2, "rank"), (0, 0, "world"),
                                             ("0", 2, "rank")])
def test_bad_rank_or_world_is_named(rank, world, name):
    with pytest.raises(ValueError, match=rf"^{name}: expected"):
        Team(rank, world, Store())


def test_from_env_alone_and_uncoordinated():
    assert team.from_env(0, 1, {}) == (None, None)
    t, why = team.from_env(1, 2, {"WORLD_SIZE": "2", "RANK": "1"})
    assert t is None and "MASTER_ADDR" in why


def test_mean_samples_block_by_block_and_mismatch():
    docs = [{"samples": [1.0, 2.0, 4.0]}, {"samples": [3.0, 2.0, 0.0]}]
    assert team.mean_samples(docs) == [2.0, 2.0, 2.0]
    with pytest.raises(TeamError, match="different numbers of blocks"):
        team.mean_samples([{"samples": [1.0]}, {"samples": [1.0, 2.0]}])


class _G:
    """A graph as the watcher saw it: its pointer words (node, param, offset, word)."""
    anchor = graphs.GraphSeen.anchor

    def __init__(self, sig, uses=None):
        self.signature = sig
        self.uses = uses if uses is not None else [(i, 0, 8 * i, 0) for i in range(16)]


def _target(sig, rec, size, address, weight):
    t = live.Target(address, size, weight)
    t.places.append((_G(sig), rec))
    return t


def test_a_follower_adopts_the_leaders_target_order():
    leader = [_target("g1", 3, 1 << 22, 0x1000, 9.0), _target("g2", 0, 1 << 20, 0x2000, 5.0),
              _target("g1", 7, 1 << 21, 0x3000, 1.0)]
    keys = [team.target_key(t) for t in leader]
    # The follower's addresses differ and its weights ranked two targets the other way round.
    mine = [_target("g2", 0, 1 << 20, 0x9000, 6.0), _target("g1", 3, 1 << 22, 0x8000, 5.0)]
    got, missing = team.adopt_targets(mine, keys)
    assert [t.address for t in got] == [0x8000, 0x9000, 0]
    assert [t.size for t in got] == [1 << 22, 1 << 20, 1 << 21]
    assert missing == 1 and got[2].places == []


def _seen(sig, uses, pieces):
    """Targets over one graph's words: (index of the anchor word in uses, size, address)."""
    g = _G(sig, uses)
    out = []
    for at, size, address in pieces:
        t = live.Target(address, size, 1.0)
        t.places.append((g, at))
        out.append(t)
    return out


HIST, BUF = 36 << 20, 90 << 20


def _ddp_ranks():
    """ddp's graph on two ranks (two H200s at f7a980d): on rank 0 a by-value struct of node 1
    held a stale word 999 bytes into `hist`, which cut `hist` in two there and came first among
    node 1's words."""
    h0, b0, h1, b1 = 0x7000_0000, 0x9000_0000, 0x5000_0000, 0x6000_0000
    uses0 = [(0, 0, 0, h0), (1, 0, 408, h0 + 999), (1, 0, 984, b0), (1, 0, 992, b0 + BUF)]
    uses1 = [(0, 0, 0, h1), (1, 0, 984, b1), (1, 0, 992, b1 + BUF)]
    rank0 = _seen("k2", uses0, [(0, 999, h0), (1, HIST - 999, h0 + 999), (2, BUF, b0),
                                (3, 2 << 20, b0 + BUF)])
    rank1 = _seen("k2", uses1, [(0, HIST, h1), (1, BUF, b1), (2, 2 << 20, b1 + BUF)])
    return rank0, rank1


def test_a_stray_word_on_one_rank_hides_none_of_the_buffers_after_it():
    rank0, rank1 = _ddp_ranks()
    keys = [team.target_key(t) for t in rank0]
    got, missing = team.adopt_targets(rank1, keys)
    # the two pieces of hist are not rank 1's (its hist is whole); stream_buf and the 2 MiB
    # after it are, though their words' indices differ by the stray word
    assert [t.address for t in got] == [0, 0, 0x6000_0000, 0x6000_0000 + BUF]
    assert missing == 2


def test_no_plan_windows_a_buffer_that_some_rank_lacks():
    rank0, rank1 = _ddp_ranks()
    docs = [{"targets": [team.target_key(t) for t in ts], "weights": [9.0, 8.0, 7.0, 6.0][:len(ts)]}
            for ts in (rank0, rank1)]
    docs = json.loads(json.dumps(docs))          # as the store carries them
    weights, lacking = team.shared_weights(docs)
    assert weights == [0.0, 0.0, 7.0, 6.0] and lacking == {1: 2}
    weights, lacking = team.shared_weights([docs[0], docs[0]])
    assert weights == [9.0, 8.0, 7.0, 6.0] and lacking == {}


def test_a_follower_takes_zero_weights_for_what_it_lacks_and_says_so():
    from types import SimpleNamespace as NS
    rank0, rank1 = _ddp_ranks()
    w = live.Watcher(live.Options(mode="advise", rank=1, world=2))
    w.device = NS(persisting_l2_granule=1,
                  properties=NS(persisting_l2_cache_max_size=2, l2_cache_size=3))
    w.unit, w.units_per_block, w.targets = ("replay", "k2"), 4, rank1
    w.probe_counts = {("replay", "k2"): 5}

    class Peer:
        def gather(self, doc):
            lead = dict(doc, targets=[team.target_key(t) for t in rank0],
                        weights=[9.0, 8.0, 7.0, 6.0])
            return json.loads(json.dumps([lead, doc]))
    w.team = Peer()
    assert w.probe.follow_leader() == [0.0, 0.0, 7.0, 6.0]
    assert len(w.targets) == 4 and w.targets[2].address == 0x6000_0000
    assert any("(rank 1 lacks 2)" in n and "no plan tried windows those" in n for n in w.notes)


def _watcher_in(state, rank, due_on_leader, capturing=(False, False)):
    w = live.Watcher(live.Options(mode="advise", warmup_s=0.0 if due_on_leader else 1e9,
                                  rank=rank, world=2))
    w.state, w.t0, w.probe_t = state, time.perf_counter(), time.perf_counter()

    class Peer:                      # the leader's side, already decided
        def gather(self, doc):
            lead = {"due": due_on_leader, "capturing": capturing[0]}
            mine = dict(doc, capturing=capturing[1] or doc["capturing"])
            return [lead, mine] if rank == 1 else [dict(doc), mine]
    w.team = Peer()
    return w


def test_a_follower_ends_its_warmup_on_the_leaders_clock_at_the_agreed_call():
    w = _watcher_in("warmup", rank=1, due_on_leader=True)
    w.o.warmup_s = 1e9                      # its own clock says: not yet
    calls = [w.phases.phase_over(False) for _ in range(team.TEAM_EVERY * 2)]
    assert calls.index(True) == team.TEAM_EVERY - 1
    assert sum(calls) == 2


def test_no_rank_moves_while_any_rank_captures():
    w = _watcher_in("warmup", rank=1, due_on_leader=True, capturing=(True, False))
    assert not any(w.phases.phase_over(False) for _ in range(team.TEAM_EVERY * 3))
    w = _watcher_in("probe", rank=1, due_on_leader=False)
    assert not any(w.phases.phase_over(False) for _ in range(team.TEAM_EVERY * 3))


def test_alone_the_warmup_ends_by_its_own_clock_and_never_in_a_capture():
    w = live.Watcher(live.Options(mode="advise", warmup_s=0.0))
    w.state, w.t0 = "warmup", time.perf_counter()
    assert w.phases.phase_over(True) is False
    assert w.phases.phase_over(False) is True


def test_result_path_is_per_rank_under_torchrun():
    o = live.Options.from_env({"L2PERSIST_RESULT": "/tmp/r.json", "WORLD_SIZE": "2",
                               "RANK": "1", "LOCAL_RANK": "1"})
    assert (o.rank, o.world, o.device) == (1, 2, 1)
    assert o.result_path == "/tmp/r.json.rank1"
    assert live.Options.from_env({"L2PERSIST_RESULT": "/tmp/r.json"}).result_path == \
        "/tmp/r.json"


def _doc(rank, name, seq, plan=True):
    return {"rank": rank, "device": {"name": name, "index": rank}, "state": "done",
            "final_arm": 3, "blocks": len(seq), "arm_sequence": seq, "lockstep": True,
            "result": {"speedup": 1.05}, "notes": [],
            "plan": {"device": {"name": name}, "rank_was": rank} if plan else None}


def test_merge_ranks_checks_the_lockstep_and_keeps_one_plan_per_model():
    m = team.merge_ranks([_doc(1, "H100", [0, 1, 2]), _doc(0, "H100", [0, 1, 2])])
    assert m["rank"] == 0 and m["same_arms"] is True
    assert [x["rank"] for x in m["ranks"]] == [0, 1]
    assert list(m["plans_by_model"]) == ["H100"] and m["plans_by_model"]["H100"]["rank_was"] == 0
    m = team.merge_ranks([_doc(0, "H100", [0, 1, 2]), _doc(1, "H200", [0, 2, 1])])
    assert m["same_arms"] is False
    assert {k: v["rank_was"] for k, v in m["plans_by_model"].items()} == {"H100": 0, "H200": 1}
    from l2persist.process.report import ranks_line
    assert "NOT the same arms" in ranks_line(m) and "H100, H200" in ranks_line(m)


def test_plan_paths_one_model_keeps_out_several_get_the_models_name():
    assert _plan_paths("p/plan.json", {"A": {}}) == {"A": "p/plan.json"}
    got = _plan_paths("p/plan.json", {"NVIDIA H100 80GB HBM3": {}, "NVIDIA H200": {}})
    assert got == {"NVIDIA H100 80GB HBM3": "p/plan-NVIDIA-H100-80GB-HBM3.json",
                   "NVIDIA H200": "p/plan-NVIDIA-H200.json"}


@pytest.mark.parametrize("argv,launcher", [
    (["python3", "-m", "torch.distributed.run", "--nproc-per-node", "2", "p.py"], True),
    (["python3", "-mtorch.distributed.launch", "p.py"], True),
    (["python3", "/venv/bin/torchrun", "--standalone", "p.py"], True),
    (["python3", "-u", "-m", "torch.distributed.run", "p.py"], True),
    (["python3", "p.py", "torchrun"], False),
    (["python3", "-m", "l2persist.studies.programs.ddp"], False),
    (["python3", "-c", "import torch"], False),
    (["python3"], False),
])
def test_a_launcher_of_ranks_is_recognised_by_its_command_line(argv, launcher):
    from l2persist.process.bootstrap import is_launcher
    assert is_launcher(argv) is launcher


def test_a_launcher_gets_no_watcher(monkeypatch):
    from l2persist.process import bootstrap
    monkeypatch.setattr(bootstrap, "_watcher", None)
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-m", "torch.distributed.run", "x.py"],
                        raising=False)
    bootstrap.start({"L2PERSIST_MODE": "advise"})
    assert bootstrap.watcher() is None


@pytest.mark.parametrize("argv,launcher", [
    (["python3", "-X", "faulthandler", "-m", "torch.distributed.run", "p.py"], True),
    (["python3", "-W", "ignore", "/venv/bin/torchrun", "p.py"], True),
    (["python3", "-W", "ignore", "p.py"], False),
])
def test_options_with_a_value_do_not_hide_the_launcher(argv, launcher):
    from l2persist.process.bootstrap import is_launcher
    assert is_launcher(argv) is launcher


def test_merge_names_a_missing_rank_and_does_not_call_one_rank_the_same_arms():
    d = _doc(1, "H100", [0, 1, 2])
    d["world"] = 2
    m = team.merge_ranks([d])
    assert m["missing_ranks"] == [0] and m["same_arms"] is False
    from l2persist.process.report import ranks_line
    assert "no result from rank(s) [0]" in ranks_line(m)
    d0 = _doc(0, "H100", [0, 1, 2])
    d0["lockstep"] = d["lockstep"] = False
    assert "NOT in lockstep" in ranks_line(team.merge_ranks([d0, d]))


def test_target_keys_tell_two_captures_of_the_same_kernels_apart():
    a, b = _G("g1"), _G("g1")
    a.ordinal, b.ordinal = 0, 1
    ta, tb = live.Target(0x1000, 1 << 20), live.Target(0x2000, 1 << 20)
    ta.places.append((a, 2))
    tb.places.append((b, 2))
    assert team.target_key(ta) != team.target_key(tb)
    got, missing = team.adopt_targets([tb, ta], [team.target_key(ta), team.target_key(tb)])
    assert [t.address for t in got] == [0x1000, 0x2000] and missing == 0


def _follower(counts_of_rank1, facts1=(1, 2, 3)):
    from types import SimpleNamespace as NS
    w = live.Watcher(live.Options(mode="advise", rank=1, world=2))
    w.device = NS(persisting_l2_granule=1,
                  properties=NS(persisting_l2_cache_max_size=2, l2_cache_size=3))
    w.unit, w.units_per_block, w.targets = ("replay", "g1"), 4, []
    w.probe_counts = counts_of_rank1

    class Peer:
        left = False

        def gather(self, doc):
            lead = dict(doc, unit=["replay", "g1"], counts=[[["replay", "g1"], 9]],
                        facts=[1, 2, 3], units=7)
            return [lead, dict(doc, facts=list(facts1))]

        def leave(self):
            Peer.left = True
    w.team = Peer()
    return w, Peer


def test_a_rank_without_the_leaders_unit_makes_every_rank_go_alone():
    w, peer = _follower({("replay", "g2"): 5})
    w.probe.follow_leader()
    assert w.team is None and peer.left
    assert any("never made the leader's unit of work" in n for n in w.notes)
    w, peer = _follower({("replay", "g1"): 5}, facts1=(1, 2, 4))
    w.probe.follow_leader()
    assert w.team is None and any("another GPU" in n for n in w.notes)
    w, peer = _follower({("replay", "g1"): 5})
    w.probe.follow_leader()
    assert w.team is not None and w.units_per_block == 7      # the leader's, adopted


def test_in_a_team_only_the_first_threads_calls_count():
    w = live.Watcher(live.Options(mode="advise", rank=1, world=2))
    w.team = object()
    seen = []
    w.phases.point = lambda kind, g, found=None: seen.append(kind)
    w.point("sync")                                    # this thread is the watched one
    t = threading.Thread(target=w.point, args=("sync",))
    t.start()
    t.join()
    w.point("mark")
    assert seen == ["sync", "mark"]


def test_the_hot_path_asks_pytorch_about_captures_only_where_it_could_switch(monkeypatch):
    """Before every replay the watcher runs in the program's thread: while nothing can switch
    (the warm-up not yet due, a block not yet full) it must not ask PyTorch whether a capture
    is open (a CUDA call per replay). It asks once the warm-up is due, and a capture open
    then still stops the switch."""
    asked = []
    monkeypatch.setattr(clock, "_capturing", lambda: asked.append(1) or bool(open_now))
    open_now = False
    w = live.Watcher(live.Options(mode="advise", warmup_s=1e9))
    w.state, w.t0 = "warmup", time.perf_counter()
    for _ in range(100):
        w.phases.point("replay", None)
    assert asked == [] and w.state == "warmup"
    w.o.warmup_s = 0.0                   # due now, but a capture is open
    open_now = True
    w.phases.point("replay", None)
    assert asked == [1] and w.state == "warmup"
    w.state, w.unit, w.units_per_block, w.units_now = "search", ("sync",), 1000, 0
    for _ in range(100):
        w.phases.point("sync", None)     # a block of 1000 units is not full yet
    assert asked == [1]


def test_the_store_is_ready_under_torchrun_or_once_a_process_group_exists(monkeypatch):
    assert team.store_ready({"TORCHELASTIC_USE_AGENT_STORE": "True"}) is True
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    assert team.store_ready({}) is False
    # torchrun without its agent's store (a rendezvous backend that does not share it): rank
    # 0's init_process_group hosts the store, as under mpirun
    assert team.store_ready({"TORCHELASTIC_RUN_ID": "abc",
                             "TORCHELASTIC_USE_AGENT_STORE": "False"}) is False
    dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: False)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    assert team.store_ready({}) is False
    dist.is_initialized = lambda: True
    assert team.store_ready({}) is True


def _pending_watcher(monkeypatch, dist):
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    w = live.Watcher(live.Options(mode="advise", warmup_s=0.0, rank=0, world=2))
    w.state, w.t0, w.team_wait_t0 = "warmup", time.perf_counter(), time.perf_counter()
    w.thread = threading.get_ident()     # the program's thread, whose calls the ranks count
    w.ranks.join()
    return w


def test_under_another_launcher_the_warmup_waits_for_the_process_group(monkeypatch):
    """mpirun / srun: rank 0's init_process_group hosts the store. Before it exists nobody
    connects (rank 0 would wait on itself) and the warm-up does not end, though due; once the
    group exists the ranks meet and decide together."""
    dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: False)
    joined = []

    class Peer:
        def gather(self, doc):
            return [doc, doc]

    monkeypatch.setattr(team, "from_env", lambda rank, world: joined.append(1) or (Peer(), None))
    w = _pending_watcher(monkeypatch, dist)
    assert w.team_pending and w.team is None and joined == []
    assert not any(w.phases.phase_over(False) for _ in range(team.TEAM_EVERY * 2))
    dist.is_initialized = lambda: True
    other = []                            # another thread's call does not form the team
    t = threading.Thread(target=lambda: other.append(w.phases.phase_over(False)))
    t.start()
    t.join()
    assert other == [False] and joined == [] and w.team_pending
    assert w.phases.phase_over(False) is False  # the program's thread meets the team here ...
    assert joined == [1] and isinstance(w.team, Peer) and not w.team_pending
    calls = [w.phases.phase_over(False) for _ in range(team.TEAM_EVERY)]
    assert calls[-1] is True and sum(calls) == 1     # ... and decisions count from the next


def test_a_program_that_never_makes_a_process_group_is_advised_rank_by_rank(monkeypatch):
    dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: False)
    monkeypatch.setattr(team, "TEAM_WAIT_S", 0.0)
    left = []

    class Peer:
        def leave(self):
            left.append(1)

    monkeypatch.setattr(team, "from_env", lambda rank, world: (Peer(), None))
    w = _pending_watcher(monkeypatch, dist)
    assert not w.team_pending and w.team is None and w.team_gave_up
    assert any("each rank advised alone" in n for n in w.notes)
    assert w.phases.phase_over(False) is True         # its own clock, as alone
    assert left == []
    # the group is made after all: peers that met in time are told at once that this rank
    # is not coming (they stop waiting instead of timing out), and this rank stays alone
    dist.is_initialized = lambda: True
    w.state = "search"                    # long past the warm-up: it is told all the same
    w.phases.point("mark", None)
    assert left == [1] and w.team is None and not w.team_gave_up


def test_a_quiet_counting_thread_does_not_hold_the_warmup_forever(monkeypatch):
    """The thread whose calls the ranks count (the first watched call's: a loader that synced
    once) goes quiet while the work runs on another: after the wait, the rank goes on alone."""
    dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: False)
    monkeypatch.setattr(team, "TEAM_WAIT_S", 0.05)
    w = _pending_watcher(monkeypatch, dist)
    w.thread = -1                         # some other thread's, now quiet
    assert w.phases.phase_over(False) is False and w.team_pending
    time.sleep(0.06)
    assert w.phases.phase_over(False) is True  # given up: its own clock
    assert not w.team_pending and any("advised alone" in n for n in w.notes)


def _own_of(world, confirm_ratio, seed):
    """A rank's watcher after a search: 12 search blocks (arm 2 slow there: they are not the
    confirmation's), then 6 confirmation rounds of limit 0, the default and arm 2 (its own
    samples, 1 % noise; arm 2 at 1/confirm_ratio)."""
    from l2persist.process.summary import Report
    rng = random.Random(seed)
    B = types.SimpleNamespace
    blocks = [B(units=4, counted=True, arm=a, sample=1.5 if a == 2 else 1.0)
              for a in (2,) * 6 + (0, 1) * 3]
    blocks.append(B(units=4, counted=False, arm=2, sample=5.0))      # a landing block
    for _ in range(6):
        for a in (0, 1, 2):
            v = (1.0 / confirm_ratio if a == 2 else 1.0) * (1 + 0.01 * rng.gauss(0, 1))
            blocks.append(B(units=4, counted=True, arm=a, sample=v))
    w = B(o=live.Options(mode="advise", rank=0, world=world), blocks=blocks,
          recorded=len(blocks), result={"winner": 2, "search_blocks": 12})
    return Report(w).own_verdict()


def test_each_rank_judges_the_plan_on_its_own_samples_and_a_split_is_said():
    """ddp at f7a980d: rank 0 alone read 1.068x where the team's mean said 1.017x (rank 1 ran
    without the windows); the merged summary now gives each rank's own figure and says when the
    ranks disagree."""
    from l2persist.process.report import ranks_line
    assert _own_of(1, 1.1, 3) is None                   # alone: the verdict is its own
    own0, own1 = _own_of(2, 1.1, 3), _own_of(2, 1.0, 4)
    assert own0["helps"] and 1.08 < own0["speedup"] < 1.12, own0
    assert not own1["helps"] and own1["ci_low"] < 1.01, own1
    row = {"device": {"name": "NVIDIA H200", "index": 0}, "lockstep": True, "notes": []}
    docs = [dict(row, rank=0, own=own0, result={"speedup": 1.05}),
            dict(row, rank=1, own=own1, result={"speedup": 1.05})]
    merged = team.merge_ranks(docs)
    said = ranks_line(merged)
    assert f"rank 0 {own0['speedup']:.4f}x" in said and f"rank 1 {own1['speedup']:.4f}x" in said
    assert said.endswith("the ranks disagree, and the verdict is their mean's"), said
    docs[1]["lockstep"] = False                      # went on alone: the verdicts are each its own
    said = ranks_line(team.merge_ranks(docs))
    assert said.endswith("the ranks disagree"), said
    docs[1]["own"] = own0
    assert "disagree" not in ranks_line(team.merge_ranks(docs))


@pytest.mark.parametrize("modes", ["10", "11"], ids=["one counts in the hook", "both do"])
def test_two_ranks_switch_at_the_same_calls_whoever_counts_in_the_hook(tmp_path, modes):
    """Two ranks of the simulator, each in a process, in lockstep through a store in files,
    their rests hooked (ranks count the same calls): whether a rank counts its replays in the
    hook (process/fastcount.py) or in the watcher, every switch falls at the same call of both,
    with the same plans, blocks and rests, and each rank's summary gives the leader's pace
    (its correction and capped rests), which sized them."""
    import json
    import subprocess
    import sys
    store = tmp_path / "store"
    store.mkdir()
    rank_py = pathlib.Path(__file__).with_name("team_sim_rank.py")
    procs = [subprocess.Popen([sys.executable, str(rank_py), str(r), modes[r], str(store),
                               str(tmp_path / f"r{r}.json")]) for r in range(2)]
    try:
        assert [p.wait(timeout=180) for p in procs] == [0, 0]
    finally:
        for p in procs:            # a rank left waiting for its peer is not left running
            if p.poll() is None:
                p.kill()
    a, b = (json.loads((tmp_path / f"r{r}.json").read_text()) for r in range(2))
    assert a["state"] == b["state"] == "done", (a["notes"], b["notes"])
    assert len(a["trace"]) > 20 and a["trace"] == b["trace"]
    assert (a["arms"], a["units"], a["rest_units"]) == (b["arms"], b["units"], b["rest_units"])
    assert any(a["rest_units"])                                # rests ran, hooked
    # each rank's summary gives the pace that sized the rests, the leader's, not its own
    assert a["pace_corrections"] and a["pace_corrections"] == b["pace_corrections"]
    assert a["rests_capped"] == b["rests_capped"]
    for doc, m in ((a, modes[0]), (b, modes[1])):
        assert (doc["fast_calls"] > doc["calls"] / 4) if m == "1" else doc["fast_calls"] == 0
