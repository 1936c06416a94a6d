"""One rank of a two-rank team on the CPU simulator of test_live_sim_cpu.py, in a process of
its own (tests/test_team_cpu.py starts two): the real Watcher, Team and C search, the ranks
meeting at a store in files, every replay and sync through the bootstrap's real hooks.

    python tests/team_sim_rank.py RANK FAST STORE_DIR OUT

FAST 1: the hook counts the replays that only count (process/fastcount.py); 0: arming off,
every call in the watcher. The program replays its unit graph, syncs every 7th step and
replays a second graph every 13th. OUT gets, per switch (a change of the watcher's steps),
the call's index and the counts then, and each block's arm and units."""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import pytest  # noqa: E402

import test_live_sim_cpu as sim  # noqa: E402
from l2persist.process import bootstrap, fastcount, live, team  # noqa: E402


class FileStore:
    """torch.distributed's store, as the Team uses it, over files in one folder."""

    def __init__(self, folder):
        self.folder = folder

    def _path(self, key):
        return os.path.join(self.folder, key.replace("/", "%"))

    def set(self, key, value):
        tmp = f"{self._path(key)}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(value if isinstance(value, bytes) else str(value).encode())
        os.replace(tmp, self._path(key))

    def get(self, key):
        with open(self._path(key), "rb") as f:
            return f.read()

    def check(self, keys):
        return all(os.path.exists(self._path(k)) for k in keys)

    def delete_key(self, key):
        try:
            os.remove(self._path(key))
        except FileNotFoundError:
            pass


def main(rank: int, fast: bool, folder: str, out: str) -> None:
    mp = pytest.MonkeyPatch()
    world = sim.make_world(mp)
    world.gain = 1.25
    world.rng.seed(100 + rank)
    mp.setattr(team, "store_ready", lambda env=os.environ: True)
    mp.setattr(team, "from_env", lambda r, size, env=os.environ:
               (team.Team(r, size, FileStore(folder)), None))
    if not fast:
        mp.setattr(fastcount.Counting, "arm", lambda *a, **k: None)
    w = live.Watcher(live.Options(mode="advise", warmup_s=0.05, block_units=12, budget_s=60.0,
                                  max_overhead=0.03, rank=rank, world=2))
    g, g2 = sim.ProgramGraph(), sim.ProgramGraph()
    g2.scan = ([(0, "k_side", (32, 1, 1), (64, 1, 1), 0, 1)], [], [])
    for pg in (g, g2):
        w.capture_begin()
        w.capture_end(pg)
    bootstrap._watcher = w
    steps, trace, i, t0 = w.steps, [], 0, time.perf_counter()
    while w.state not in ("done", "off") and time.perf_counter() - t0 < 120:
        i += 1
        g.replay()
        if i % 7 == 0:
            bootstrap._on_sync()
        if i % 13 == 0:
            g2.replay()
        if w.steps != steps:
            steps = w.steps
            trace.append([i, w.steps, len(w.blocks), w.units_now])
    with open(out, "w") as f:
        json.dump({"rank": rank, "state": w.state, "notes": w.notes, "calls": i,
                   "fast_calls": w.counting.calls, "trace": trace,
                   "arms": [b.arm for b in w.blocks], "units": [b.units for b in w.blocks],
                   "rest_units": [b.rest_units for b in w.blocks],
                   "pace_corrections": w.pace_corrections, "rests_capped": w.rests_capped}, f)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3], sys.argv[4])
