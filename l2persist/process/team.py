"""Ranks that advise together (``advise -- torchrun --nproc-per-node N prog.py``).

Collectives make ranks wait on each other, so a plan switched on one rank at another time than
on its peers would be judged on the peers' arms too. The ranks' watchers therefore move in
lockstep: every decision that a clock or a sample makes (the warm-up's end, the unit of work and
a block's length, the targets, the budget, each round's samples) is taken by gathering one small
document from every rank through a key-value store and using the same inputs on every rank. The
C search is deterministic, so ranks fed the same samples pick the same arms in the same order and
switch at the same counts of the program's own calls.

The store is the program's own rendezvous store (the TCPStore at MASTER_ADDR:MASTER_PORT that
torchrun's agent or rank 0's ``init_process_group`` hosts), reached as one more client under a
key prefix of l2persist's own and the run's id. Nothing here calls the program's collectives.
"""
from __future__ import annotations

import json
import os
import sys
import time

from .part import Part

#: In a team, ranks agree on the warm-up's and the probe's end at every this many calls.
TEAM_EVERY = 16
#: Under a launcher other than torchrun, how long the warm-up waits for the program's process
#: group (whose store the ranks meet at) before each rank goes on alone.
TEAM_WAIT_S = 30.0
#: A gather that waits longer than this for a peer gives up (the watcher then stops switching
#: and restores the set-aside on that rank; its peers give up the same way).
TIMEOUT_S = 60.0


class TeamError(RuntimeError):
    """A peer did not arrive (it ended, or its calls diverged from this rank's)."""


class Team:
    """One rank's side of the lockstep: ``gather(doc)`` returns every rank's doc, in rank order,
    once all have sent theirs. ``store`` needs ``set(key, bytes)``, ``get(key) -> bytes``,
    ``check([key]) -> bool`` and ``delete_key(key)`` (torch.distributed.Store has them)."""

    def __init__(self, rank: int, world: int, store, prefix: str = "l2persist",
                 timeout_s: float = TIMEOUT_S):
        if not (isinstance(world, int) and world >= 1):
            raise ValueError(f"world: expected an int >= 1, got {world!r}")
        if not (isinstance(rank, int) and 0 <= rank < world):
            raise ValueError(f"rank: expected an int in [0, {world - 1}], got {rank!r}")
        self.rank, self.world, self.store = rank, world, store
        self.prefix, self.timeout_s = prefix, timeout_s
        self.seq = 0

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def _key(self, seq: int, rank: int) -> str:
        return f"{self.prefix}/{seq}/{rank}"

    def gather(self, doc: dict) -> list[dict]:
        seq = self.seq
        self.seq += 1
        self.store.set(self._key(seq, self.rank), json.dumps(doc).encode())
        out = [self._wait(seq, r) for r in range(self.world)]
        # Every peer has sent seq, so each has read all of seq - 1: this rank's key of seq - 2
        # is read by everyone and can go (the store stays small however long the search runs).
        if seq >= 2:
            try:
                self.store.delete_key(self._key(seq - 2, self.rank))
            except Exception:
                pass
        return out

    def leave(self) -> None:
        """This rank stops watching (exit, failure): peers waiting on it give up at once."""
        try:
            self.store.set(f"{self.prefix}/gone/{self.rank}", b"1")
        except Exception:
            pass

    def _wait(self, seq: int, rank: int) -> dict:
        key = self._key(seq, rank)
        gone = f"{self.prefix}/gone/{rank}"
        t0 = time.monotonic()
        pause = 20e-6
        while not self.store.check([key]):
            if rank != self.rank and self.store.check([gone]):
                raise TeamError(f"rank {rank} stopped watching before step {seq} of the "
                                "lockstep")
            if time.monotonic() - t0 > self.timeout_s:
                raise TeamError(f"rank {rank} did not reach step {seq} of the lockstep in "
                                f"{self.timeout_s:g} s (its calls diverged from rank "
                                f"{self.rank}'s, or it is stuck)")
            time.sleep(pause)
            pause = min(pause * 2, 2e-3)
        return json.loads(self.store.get(key))


def store_ready(env=os.environ) -> bool:
    """Whether the ranks' store exists yet: from the start where torchrun's agent hosts it (it
    says so with TORCHELASTIC_USE_AGENT_STORE=True; not every rendezvous backend does), else
    once this process has made its default process group (rank 0's ``init_process_group``
    hosts it)."""
    if env.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return True
    dist = sys.modules.get("torch.distributed")
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except Exception:
        return False


def from_env(rank: int, world: int, env=os.environ):
    """The team of this process under torchrun, or (None, why) where there is none.

    `rank` and `world` are RANK and WORLD_SIZE as :class:`~l2persist.process.live.Options`
    read them (once, with their checks). (team, None) with `world` > 1 and the store at
    MASTER_ADDR:MASTER_PORT reachable (the torchrun agent's, or the one rank 0's
    ``init_process_group`` hosts: a client waits for it); (None, None) for a single process;
    (None, reason) where ranks exist but cannot be coordinated."""
    if world <= 1:
        return None, None
    if not (env.get("MASTER_ADDR") and env.get("MASTER_PORT")):
        return None, ("several ranks but no MASTER_ADDR / MASTER_PORT to meet at: each rank "
                      "switches on its own clock, so collectives may confound the verdict")
    try:
        from datetime import timedelta

        from torch.distributed import TCPStore
        store = TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False,
                         timeout=timedelta(seconds=TIMEOUT_S), wait_for_workers=False)
    except Exception as e:
        return None, f"torchrun's store is not reachable ({type(e).__name__}: {e})"
    run = env.get("TORCHELASTIC_RUN_ID", "run")
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    return Team(rank, world, store, prefix=f"l2persist/{run}/{restart}"), None


def mean_samples(docs: list[dict], key: str = "samples") -> list[float]:
    """The ranks' samples of the same blocks, averaged block by block (every rank must have
    measured the same blocks: the lockstep guarantees it, a mismatch is an error)."""
    rows = [d[key] for d in docs]
    n = {len(r) for r in rows}
    if len(n) != 1:
        raise TeamError(f"ranks measured different numbers of blocks: {[len(r) for r in rows]}")
    return [sum(col) / len(col) for col in zip(*rows)]


def target_key(t) -> list:
    """A target's name that is the same on every rank of one program: the graph of its first
    place (its signature, and which capture of that signature: double-buffered graphs share
    one; whether it is an eager launch group, which may share a one-node graph's signature),
    where its anchor word sits there (node, parameter, offset), and its size (addresses
    differ between ranks). Not the word's index among the graph's pointer words: one stray word
    on one rank (a by-value struct's stale bytes that happen to point into an allocation: ddp
    on two H200s at f7a980d) shifts every index after it, and the peer then finds none of
    those buffers."""
    g, at = t.places[0]
    anchor = g.anchor(at)
    return [g.signature, getattr(g, "ordinal", 0), bool(getattr(g, "eager", False)),
            list(anchor[:3]) if anchor is not None else at, t.size]


def shared_weights(docs: list[dict]) -> tuple[list, dict]:
    """The leader's weights with 0 for each of its targets that some rank lacks (no arm is
    built on a weight of 0, so no plan windows a buffer on one rank and nothing on another:
    a team mean over a windowed rank and an unwindowed one measures neither), and per rank
    how many it lacks. Every rank computes this from the same documents."""
    have = [{tuple(_hashable(k)) for k in d["targets"]} for d in docs]
    keys = [tuple(_hashable(k)) for k in docs[0]["targets"]]
    lacking = {r: sum(k not in h for k in keys) for r, h in enumerate(have)}
    weights = [float(x) if all(k in h for h in have) else 0.0
               for k, x in zip(keys, docs[0]["weights"])]
    return weights, {r: n for r, n in lacking.items() if n}


def _hashable(k):
    return [tuple(x) if isinstance(x, list) else x for x in k]


def adopt_targets(mine: list, keys: list) -> tuple[list, int]:
    """This rank's targets put in the leader's order (keys from target_key); a target the
    leader has and this rank lacks becomes an empty one (its windows land nowhere here).
    Returns (targets, how many were missing)."""
    from .switcher import Target
    by_key = {tuple(_hashable(target_key(t))): t for t in mine}
    out, missing = [], 0
    for k in keys:
        t = by_key.get(tuple(_hashable(k)))
        if t is None:
            missing += 1
            t = Target(0, k[-1])
        out.append(t)
    return out, missing


def merge_ranks(docs: list[dict]) -> dict:
    """The ranks' result documents as one: rank 0's (the lowest rank's) with a table of every
    rank beside it, whether their arm sequences were the same (the lockstep held), and one plan
    per GPU model (ranks of one model share the lowest such rank's plan)."""
    docs = sorted(docs, key=lambda d: d.get("rank", 0))
    first = next((d for d in docs if d.get("result")), docs[0])
    merged = dict(first)
    seqs = [d.get("arm_sequence") for d in docs if d.get("result")]
    merged["ranks"] = [{
        "rank": d.get("rank", 0), "device": (d.get("device") or {}).get("name"),
        "index": (d.get("device") or {}).get("index"), "state": d.get("state"),
        "final_arm": d.get("final_arm"), "blocks": d.get("blocks"),
        "speedup": (d.get("result") or {}).get("speedup"), "own": d.get("own"),
        "lockstep": d.get("lockstep"), "notes": d.get("notes", [])} for d in docs]
    world = max([d.get("world") or 1 for d in docs] + [len(docs)])
    merged["missing_ranks"] = sorted(set(range(world)) - {d.get("rank", 0) for d in docs})
    merged["same_arms"] = (len(seqs) == len(docs) == world
                           and all(s == seqs[0] for s in seqs))
    plans = {}
    for d in docs:
        name = (d.get("device") or {}).get("name")
        if d.get("plan") and name not in plans:
            plans[name] = d["plan"]
    merged["plans_by_model"] = plans
    return merged


class Ranks(Part):
    """The watcher's part that meets the other ranks (once their store exists), gives up on
    them, and tells peers that this rank went on alone; the team itself is :class:`Team`."""

    def join(self):
        """Meet the other ranks once their store exists. torchrun's agent may host it before any
        rank starts; otherwise (other rendezvous backends, mpirun, srun) rank 0's
        ``init_process_group`` does, and a rank that waited for it before its own call would
        stall (rank 0 on itself). Until then the warm-up goes on (``team_pending``); a program
        that makes no process group within TEAM_WAIT_S is advised rank by rank, with a note."""
        w = self.w
        if not store_ready():
            w.team_pending = True
            if time.perf_counter() - w.team_wait_t0 >= TEAM_WAIT_S:
                self.give_up()
            return
        w.team_pending = False
        w.team, why = from_env(w.o.rank, w.o.world)
        if why:
            w.notes.append(why)

    def give_up(self):
        w = self.w
        waited = time.perf_counter() - w.team_wait_t0
        w.team_pending = False
        w.team_gave_up = True
        w.notes.append(f"the ranks did not meet within {waited:.0f} s (no process group, and "
                       "no torchrun agent's store): each rank advised alone, so collectives "
                       "may confound the verdict")

    def release_peers(self):
        """A rank that went on alone: once the store exists after all, it says so there, so
        that a peer which met it in time stops waiting for it at once (not after 60 s)."""
        w = self.w
        if store_ready():
            w.team_gave_up = False
            t, _why = from_env(w.o.rank, w.o.world)
            if t is not None:
                t.leave()
