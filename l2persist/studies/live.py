"""advise / verify / apply -- COMMAND on programs that l2persist never calls into, each run as
a subprocess (the study imports none of them): first three (a server-like loop: decode graphs
for three batch sizes captured the default way, an eager prefill, a CuPy table; a training
loop whose step is one CUDA graph with its optimizer, not idempotent; an eager program whose
kernels run on a stream of its own), then the zoo of issue 50 item 7 (``ZOO``: a request-mix
server, big decode graphs, torch.compile's graph trees, Hugging Face ``generate()``, implicit
syncs only, CuPy only, Triton, JAX, two ranks under torchrun). A program whose library is not
installed, or that needs more GPUs than there are, is left out with the reason.

Per program: plain runs (the whole program's wall time, its own loop's throughput, the digest
of what it computed); ``advise`` (verdict, interval, decision time, blocks, switch cost, the
digest); ``verify`` of the plan in a fresh process; ``apply`` (digest, wall time against plain,
plain and apply interleaved); and an offline grid over the same plan space: each arm advise
searched (its ``arms``, in plan-document form) written as a plan document and checked with
``verify`` (its speedup against the better baseline of its own run). The programs' lengths
follow their measured throughput (a short plain run first), so that advise has the traffic it
needs on any GPU; the programs' iterations are the same in every run that is compared bit for
bit.

The record of a program is computed from the runs' outputs by :func:`program_record` (pure,
no GPU), and the bars from the record by :func:`program_bars`: the CPU tests feed both made-up
outputs."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from ..process.costs import COVERS_TICKS
from ..results import PlotSpec

TITLE = "advise / verify / apply -- COMMAND: a zoo of programs watched, never called"
NEEDS_GPU = True
NEEDS = ("gpu", "torch")
SOURCE = ("the live advisor's bars: the program's outputs bit-identical with and without "
          "advise / apply; advice in under 60 s of the program's traffic; the plan re-measured "
          "by verify in a fresh process within 1 % of what advise reported and never below "
          "0.99 of the better baseline; >= 95 % of an offline grid's best where that best "
          "gains >= 3 %, 'don't' where it gains under 2 %")
ROW = ("`advise` / `verify` / `apply -- COMMAND` on a zoo of programs nobody wrote around "
       "l2persist (servers, graph trees, generate(), implicit syncs, CuPy, Triton, JAX, "
       "training, two ranks), against a grid of verify runs; bars: identical outputs, verify "
       "within 1 %, >= 95 % of the grid's best")
INTRO = """# `advise -- COMMAND`: a running program, watched and never called

The programs here know nothing of l2persist. The first three: a server-like loop (decode
graphs for three batch sizes captured the default way, an eager prefill, a CuPy table), a
training loop whose step is one CUDA graph with its optimizer (one extra replay would move the
weights), and an eager program on a stream of its own. The zoo adds a server whose requests
draw a batch size at random over three 225-node graphs, 225-node decode graphs replayed back
to back, `torch.compile(mode="reduce-overhead")`, a Hugging Face `generate()` loop, an eager
program whose only syncs are implicit, a CuPy-only program, Triton kernels, a JAX program and
a two-rank `torchrun` program (`l2persist/studies/programs/`). Each runs as a subprocess: plain, under
`advise`, under `verify` with the plan advise wrote, under `apply`, and under `verify` once
per plan of an offline grid (every arm advise searched, written as a plan document).

- `python -m l2persist advise --out plan.json -- python prog.py` starts the program with a bootstrap, times its kernels from CUDA's activity records, and switches plan arms at the program's own graph replays, syncs or `l2persist.mark()`, or from its own clock where the program makes none of those calls, never while a capture is open anywhere in the process.
- It judges each arm on the program's GPU time per unit of work at the program's own mix (each kernel and launch shape at its time per launch in the block), against limit 0 and the device default, in rotated blocks, and writes the plan document (a "don't" is an answer).
- `python -m l2persist apply plan.json -- python prog.py` installs the plan at the next start with no code change (windows reach graphs as they are captured; another GPU model: not applied).
- `python -m l2persist verify plan.json -- python prog.py` re-runs the A/B between the plan and both baselines in a fresh process (for a "don't" plan: whether any other plan helps now): exit 0 when the plan still holds, 1 when it no longer does, 3 when the interval cannot tell.
- Nothing of the program's work is called by l2persist: its outputs must be bit-identical with and without each of them."""
WHY = """**Reading it.** The speedups are GPU time per unit of the program's work (a replay of
its busiest graph, a sync, or a tick of the watcher's clock), priced at the program's own mix,
against the better baseline of the same run; wall time is
beside them. The overheads are whole-program wall times over the plain runs': under
`advise` they include the arms that lost (the search runs them on purpose), so
`tools/investigations/live-overhead` measures the watcher's own cost on a launch loop. A grid best under
2 % must be answered "don't"."""
NOTEBOOK_CELLS = [
    '''from l2persist.studies.live import bar_table, grid_table
print(bar_table(res))     # the bars, one row per program
print()
print(grid_table(res))    # each plan of the offline grid, checked by verify''',
    '''from l2persist.studies.live import plot_grid
fig_grid = plot_grid(res)''',
]

MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM_DIR = os.path.join(HERE, "programs")


@dataclass(frozen=True)
class Program:
    """One program of the zoo (issue 50 item 7): a plain Python program in programs/ that
    imports no l2persist, runs as ``python FILE OUT --iters N`` (``ranks`` > 1: under
    ``torchrun --nproc-per-node RANKS``, one digest file OUT.rankR per rank), writes a digest
    of its outputs to OUT (the same for the same iterations: seeds fixed in it) and prints
    ``loop: N iterations in S s`` to stderr."""
    file: str
    shape: str                    # what it is, in words
    modules: tuple = ("torch",)   # the Python modules it imports (a missing one: skipped)
    ranks: int = 1                # processes (GPUs), under torchrun when more than one
    calibrate: int = 1000         # iterations of the calibration run (a few seconds)
    args: tuple = ()              # its own options, after OUT --iters N


ZOO = {
    # the study's first three programs
    "server": Program("server.py", "decode graphs for three batch sizes in turn (a few nodes "
                      "each), an eager prefill, a CuPy table on the current stream", ("torch",),
                      calibrate=1500),
    "train": Program("train.py", "a graphed training step with its optimizer (Adam, "
                     "capturable, multi-tensor)"),
    "eager": Program("eager_stream.py", "an eager histogram on a stream of its own, an "
                     "explicit sync of that stream per iteration"),
    # the zoo (issue 50 item 7)
    "server_mix": Program("server_mix.py", "requests drawing a batch size at random over "
                          "three 200+-node decode graphs, an eager prefill, a CuPy hash upsert "
                          "on its own stream, one sync per request",
                          ("torch", "cupy", "numpy"), calibrate=600),
    "decode_big": Program("decode_big.py", "200+-node decode graphs replayed back to back "
                          "(no request mix), a sync every 50 replays", calibrate=6000),
    "compile_graphs": Program("compile_graphs.py", "torch.compile(mode='reduce-overhead'): "
                              "CUDA graph trees over a 20-40 MiB index_add_ histogram",
                              calibrate=3000),
    "hf_generate": Program("hf_generate.py", "a tiny GPT-2 from its config (random weights), "
                           "greedy generate() in a loop", ("torch", "transformers"),
                           calibrate=40),
    "eager_implicit": Program("eager_implicit.py", "eager work on a PyTorch pool stream whose "
                              "only host syncs are implicit (bincount, .item())",
                              calibrate=8000),
    "cupy_only": Program("cupy_only.py", "CuPy only: a RawKernel hash upsert and streaming "
                         "on a CuPy stream", ("cupy", "numpy"), calibrate=20000),
    "triton_kernels": Program("triton_kernels.py", "triton.jit histogram, gather and "
                              "streaming kernels", ("torch", "triton"), calibrate=10000),
    "jax_program": Program("jax_program.py", "a jax.jit step with a hot table "
                           "(.at[].add, segment_sum): XLA's kernels and graphs, no PyTorch",
                           ("jax", "numpy"), calibrate=20000),
    "train_fused": Program("train.py", "a graphed training step with a fused optimizer "
                           "(Adam, fused=True, capturable)", args=("--optimizer", "fused")),
    "ddp": Program("ddp.py", "two ranks under torchrun: a graph per step, an all-reduce every "
                   "20 steps; a digest per rank", ("torch",), ranks=2, calibrate=10000),
}
# the ten shapes of issue 50 item 7, one program each (train and ddp were there before)
ZOO_SHAPES = ("server_mix", "decode_big", "compile_graphs", "hf_generate", "eager_implicit",
              "cupy_only", "triton_kernels", "jax_program", "train_fused", "ddp")
PROGRAMS = {name: p.file for name, p in ZOO.items()}
CALIBRATE_ITERS = {name: p.calibrate for name, p in ZOO.items()}
MIN_ITERS = 200


def _landed(wl) -> dict | None:
    """The arms checked and those as meant, from advise's ``windows_landed`` (None: not
    checked, with why)."""
    if not wl or not wl.get("checked"):
        return {"checked": False, "why": (wl or {}).get("why")} if wl else None
    arms = wl.get("arms") or []
    return {"checked": True, "arms": len(arms),
            "as_meant": sum(1 for a in arms if a.get("as_meant")),
            "off": [{k: a.get(k) for k in ("arm", "kernels", "meant", "foreign", "missing")}
                    for a in arms if not a.get("as_meant")]}


def missing_for(program: str, device_index: int = 0, device_count=None) -> str | None:
    """Why ``program`` cannot run here (a module it imports is not installed, fewer GPUs than
    its ranks from ``device_index`` on), or None. ``device_count``: a callable (l2persist's
    by default)."""
    import importlib.util
    p = ZOO[program]
    for mod in p.modules:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"the {program} program needs {mod}, which is not installed"
    if p.ranks > 1:
        if device_count is None:
            from .. import device_count
        n = device_count()
        if device_index + p.ranks > n:
            # "needs N GPUs": the words tools/gpu-check's allow-list takes for such a skip
            return (f"the {program} program needs {p.ranks} GPUs (a rank on each) from GPU "
                    f"{device_index}: {n} GPU(s) here")
    return None


BAR_VERIFY_WITHIN = 0.01   # |verify's speedup - advise's gain|
BAR_VERIFY_FLOOR = 0.99    # verify's speedup against the better baseline
BAR_GRID = 0.95            # the plan re-measured reaches 95 % of the grid's best gain ...
BAR_GRID_PAYS = 1.03       # ... where the grid's best gains >= 3 %
BAR_DONT = 1.02            # a grid best under this: the advice must say "don't"
BAR_ADVICE_S = 60.0        # a verdict within this many seconds of the program's traffic
BAR_OVERHEAD = 0.02        # what watching adds to the program's wall time while advising

_LOOP = re.compile(r"^loop: (\d+) iterations in ([0-9.]+) s\s*$", re.M)


@dataclass(frozen=True)
class Config:
    loop_s: float        # the program's loop under plain / advise / verify / apply
    grid_loop_s: float   # a grid plan's verify run
    repeats: int         # plain and apply runs each (interleaved)
    warmup: float        # advise / verify --warmup
    block_ms: float      # --block-ms
    budget: float        # --budget
    top: int | None      # grid: arms beyond the two baselines (by search median); None: all
    max_overhead: float  # advise / verify --max-overhead (per cent; the grid's verify runs: 0)


# Rests between blocks keep watching under --max-overhead, so advice takes longer than the
# back-to-back search (several times, on a host-bound program): the loops are long enough for it.
# On the H100 at 6b3602a the server decided after 19-24 s at advise's defaults (1 %) with rests
# of at most nine blocks' worth; the cap went to fifteen (a sixteenth recorded; the server decided
# after 27-35 s, observing it cost 1.90-2.10 %), then twenty (a twenty-first), which makes a
# capped search about 1.3 times as long again: the budgets leave room, and with the warm-up and
# the probe (counted in the advice's seconds) stay under the bar's 60 s. Full mode's blocks are
# the quick mode's length for that reason (25 ms blocks made a capped search 1.25 times longer).
QUICK = Config(loop_s=60, grid_loop_s=5, repeats=1, warmup=0.5, block_ms=20, budget=55, top=3,
               max_overhead=1.0)
# The GPU suite's execution of the live notebook (L2P_NOTEBOOK_QUICK=1, one program): that the
# notebook runs and draws, not a measurement (at QUICK's length its one program took over 140 s of
# the notebooks part on the H200 at 38f9a65, the other twelve notebooks about 70 s together).
# Its search runs back to back (--max-overhead 0): with rests at 1 % eager decides after 24-30 s
# (the stored eager studies), past this loop, so at 3f61e5f advise gave no plan and the notebook
# had nothing to draw.
NOTEBOOK = Config(loop_s=20, grid_loop_s=3, repeats=1, warmup=0.5, block_ms=20, budget=12,
                  top=1, max_overhead=0.0)
FULL = Config(loop_s=80, grid_loop_s=8, repeats=3, warmup=1.0, block_ms=20, budget=56,
              top=None, max_overhead=1.0)


def _notebook_run(ctx) -> bool:
    return ctx.quick and os.environ.get("L2P_NOTEBOOK_QUICK") == "1"


def axes(ctx) -> dict:
    # The GPU suite executes every notebook in quick mode (L2P_NOTEBOOK_QUICK=1); three
    # programs take six minutes there, so its run watches the shortest one, shortly
    # (NOTEBOOK). The stored results come from a whole quick (or full) run.
    if _notebook_run(ctx):
        return {"program": ["eager"]}
    return {"program": list(PROGRAMS)}


def run(ctx):
    cfg = NOTEBOOK if _notebook_run(ctx) else QUICK if ctx.quick else FULL
    if "server" in ctx.values("program"):
        ctx.has("cupy", "the server program's CuPy table (it runs without it)")
    index = ctx.device.index if ctx.device is not None else 0
    runnable = []
    for program in ctx.values("program"):   # the zoo's programs whose library is missing
        why = missing_for(program, index)   # (or that need more GPUs) are left out, by name
        if why is None:
            runnable.append(program)
        else:
            ctx.skipped.append((f"program {program}", why))
    records = ctx.sweep({"program": runnable}, lambda program: _program(ctx, cfg, program),
                        desc="live programs")
    notes = [f"{'quick' if ctx.quick else 'full'} mode: loops of ~{cfg.loop_s:g} s "
             f"(grid points ~{cfg.grid_loop_s:g} s), advise / verify --warmup {cfg.warmup:g} "
             f"--block-ms {cfg.block_ms:g} --budget {cfg.budget:g} --max-overhead "
             f"{cfg.max_overhead:g} (the grid's verify runs: --max-overhead 0, back to back); "
             f"{cfg.repeats} plain and "
             f"{cfg.repeats} apply run(s) interleaved; grid: "
             + ("every arm" if cfg.top is None else f"the baselines and the top {cfg.top} arms "
                "by search median")]
    return ctx.results(records, columns=COLUMNS, summary={"setup": notes})


# ---- running the programs -----------------------------------------------------------------

def _env(device_index: int, ranks: int = 1) -> dict:
    """The children's environment: this l2persist first on PYTHONPATH (for the CLI), no
    l2persist bootstrap or plan inherited (a plain run is plain), the study's GPU as the
    program's only visible device (``ranks`` GPUs from it on for a program of several
    ranks)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("L2PERSIST_")}
    root = os.path.dirname(os.path.dirname(HERE))
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and not p.rstrip(os.sep).endswith(os.path.join("process", "_boot"))]
    env["PYTHONPATH"] = os.pathsep.join([root] + path)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if device_index or visible or ranks > 1:
        ids = ([v.strip() for v in visible.split(",")] if visible else
               [str(i) for i in range(device_index + ranks)])
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[device_index:device_index + ranks])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _launch(cmd: list, env: dict, timeout: float) -> tuple:
    """(exit status or None on a timeout, stderr, wall seconds); the whole process group is
    ended on a timeout (the CLI's child program with it)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        _kill(p)
        _, err = p.communicate()
        rc, err = None, (err or "") + f"\n(killed after {timeout:.0f} s)"
    except BaseException:          # the study interrupted: its programs end with it
        _kill(p)
        raise
    return rc, err or "", time.perf_counter() - t0


def _kill(p) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_program(prog: str, iters: int, work: str, tag: str, env: dict, timeout: float,
                cli: list | None = None) -> dict:
    """One run of a program (plain, or under ``python -m l2persist CLI... --``): its exit
    status, wall time, loop time (its own stderr line), digest and, for advise / verify,
    the watcher's result (--json)."""
    out = os.path.join(work, f"{tag}.digest.json")
    res = os.path.join(work, f"{tag}.result.json")
    ranks = ranks_of(prog)
    for p in (out, res, *(f"{out}.rank{r}" for r in range(ranks))):
        if os.path.exists(p):
            os.remove(p)
    cmd = program_command(prog, out, iters)
    if cli is not None:
        json_opt = ["--json", res] if cli[0] in ("advise", "verify") else []
        cmd = [sys.executable, "-m", "l2persist", *cli, *json_opt, "--", *cmd]
    rc, err, wall = _launch(cmd, env, timeout)
    loops = _LOOP.findall(err)
    return {"rc": rc, "wall_s": wall, "iters": iters,
            "loop_s": float(loops[-1][1]) if loops else None,
            "digest": read_digest(prog, out), "result": _read_json(res) if cli else None,
            "stderr": err[-6000:]}      # room for a crash's traceback (PYTHONFAULTHANDLER)


def ranks_of(prog: str) -> int:
    p = ZOO.get(prog)
    return p.ranks if p is not None else 1


def program_command(prog: str, out: str, iters: int) -> list:
    """The command line of one plain run: ``python FILE OUT --iters N``, or for a program of
    several ranks ``python -m torch.distributed.run --standalone --nproc-per-node R FILE OUT
    --iters N`` (torchrun, as its users start it)."""
    path = os.path.join(PROGRAM_DIR, PROGRAMS[prog])
    ranks = ranks_of(prog)
    head = [sys.executable] if ranks == 1 else \
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         str(ranks)]
    extra = ZOO[prog].args if prog in ZOO else ()
    return [*head, path, out, "--iters", str(iters), *extra]


def read_digest(prog: str, out: str):
    """The digest a run wrote: OUT's JSON, or for a program of several ranks {"rank0": ...,
    "rank1": ...} from OUT.rankR (None where any rank's is missing)."""
    ranks = ranks_of(prog)
    if ranks == 1:
        return _read_json(out)
    each = {f"rank{r}": _read_json(f"{out}.rank{r}") for r in range(ranks)}
    return None if any(d is None for d in each.values()) else each


def _device_opts(ranks: int = 1) -> list:
    """--device 0 (the one visible GPU); none for a program of several ranks, whose ranks each
    take their LOCAL_RANK's GPU (the CLI's default)."""
    return ["--device", "0"] if ranks == 1 else []


def _search_opts(cfg: Config, paced: bool = True, ranks: int = 1) -> list:
    """``paced`` False: the grid's verify runs, which measure plans, not what watching costs:
    back to back, so that a short run decides."""
    return [*_device_opts(ranks), "--warmup", f"{cfg.warmup:g}", "--block-ms",
            f"{cfg.block_ms:g}", "--budget", f"{cfg.budget:g}", "--max-overhead",
            f"{cfg.max_overhead if paced else 0:g}"]


def _program(ctx, cfg: Config, program: str) -> dict:
    ranks = ranks_of(program)
    env = _env(ctx.device.index if ctx.device is not None else 0, ranks)
    with tempfile.TemporaryDirectory(prefix=f"l2persist-live-{program}-") as work:
        cal = run_program(program, CALIBRATE_ITERS[program], work, "calibrate", env, 300)
        rate = rate_of(cal)
        if cal["rc"] != 0 or not rate:
            return program_record(program, 0, [cal], None, None, [], [],
                                  error="the plain run failed: " + _last_line(cal["stderr"]))
        iters = max(MIN_ITERS, int(rate * cfg.loop_s))
        grid_iters = max(MIN_ITERS, int(rate * cfg.grid_loop_s))
        timeout = 180 + 4 * cfg.loop_s
        plan = os.path.join(work, "plan.json")
        advise = run_program(program, iters, work, "advise", env, timeout,
                             ["advise", *_search_opts(cfg, ranks=ranks), "--out", plan])
        have_plan = os.path.exists(plan)
        verify = (run_program(program, iters, work, "verify", env, timeout,
                              ["verify", plan, *_search_opts(cfg, ranks=ranks)])
                  if have_plan else None)
        plain, applied = [], []
        for r in range(cfg.repeats):   # plain and apply interleaved, the order alternating
            order = ("plain", "apply") if r % 2 == 0 else ("apply", "plain")
            for what in order:
                if what == "plain":
                    plain.append(run_program(program, iters, work, f"plain{r}", env, timeout))
                elif have_plan:
                    applied.append(run_program(program, iters, work, f"apply{r}", env, timeout,
                                               ["apply", plan, *_device_opts(ranks)]))
        grid = []
        summ = advise["result"] or {}
        doc = _read_json(plan) if have_plan else None
        if doc is not None:
            for i in grid_arms(summ, cfg.top):
                arm = summ["arms"][i]
                path = os.path.join(work, f"grid{i}.json")
                with open(path, "w") as f:
                    json.dump(arm_plan(doc, arm, i), f)
                v = run_program(program, grid_iters, work, f"grid{i}", env, timeout,
                                ["verify", path,
                                 *_search_opts(cfg, paced=False, ranks=ranks)])
                grid.append(grid_point(i, arm, summ, v))
        return program_record(program, iters, plain, advise, verify, applied, grid,
                              warmup_s=cfg.warmup)


def _last_line(text: str) -> str:
    lines = [x for x in (text or "").strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else "no output"


# ---- from outputs to records (pure: the CPU tests call these) ------------------------------

def rate_of(run: dict | None):
    """The program's own loop throughput (iterations / s), or None."""
    if not run or not run.get("loop_s"):
        return None
    return run["iters"] / run["loop_s"]


def grid_arms(summary: dict, top: int | None) -> list:
    """The arms of advise's result the grid checks: all, or the two baselines and the ``top``
    others with the lowest search median (GPU time per unit; arms never sampled last)."""
    arms = summary.get("arms") or []
    if top is None:
        return list(range(len(arms)))
    med = (summary.get("result") or {}).get("search_median") or []

    def key(i):
        m = med[i] if i < len(med) else None
        ok = isinstance(m, (int, float)) and math.isfinite(m)
        return (not ok, m if ok else 0.0, i)
    rest = sorted(range(2, len(arms)), key=key)[:top]
    return list(range(min(2, len(arms)))) + sorted(rest)


def arm_plan(doc: dict, arm: dict, index: int) -> dict:
    """A plan document for one arm of advise's search: advise's plan's device block, the
    arm's set-aside and windows (already in plan-document form)."""
    return {"format": doc["format"], "device": doc["device"], "l2persist": doc.get("l2persist"),
            "verdict": "helps", "grid_arm": index, "set_aside": arm.get("set_aside"),
            "windows": list(arm.get("windows") or [])}


def describe_arm(arm: dict | None) -> str:
    """An arm in words: its set-aside and its windows (property, bytes, hitRatio; how many
    graphs each lands in)."""
    if not arm:
        return "-"
    aside = arm.get("set_aside")
    wins = arm.get("windows") or []
    if not wins:
        return "limit 0" if aside == 0 else "default" if aside is None else \
            f"{aside / MIB:g} MiB, no window"
    head = "default" if aside is None else f"{aside / MIB:g} MiB"
    groups = {}
    for w in wins:
        key = (w.get("hit_prop"), w.get("bytes", 0), w.get("hit_ratio"), bool(w.get("stream")))
        groups.setdefault(key, set()).add(w.get("graph"))
    parts = [f"{prop} {nbytes / MIB:.3g} MiB x{hit:.2g}" + (" on a stream" if on_stream else "")
             + (f" on {len(g)} {'launches' if on_stream else 'graphs'}" if len(g) > 1 else "")
             for (prop, nbytes, hit, on_stream), g in sorted(groups.items(),
                                                              key=lambda x: -x[0][1])]
    return f"{head}; " + ", ".join(parts)


def _verdict_of(r: dict | None) -> dict:
    return (r or {}).get("result") or {}


def grid_point(index: int, arm: dict, advise_summary: dict, verify_run: dict) -> dict:
    """One grid plan checked by verify: its speedup against the better baseline of that run."""
    v = _verdict_of(verify_run.get("result"))
    med = (advise_summary.get("result") or {}).get("search_median") or []
    m = med[index] if index < len(med) else None
    return {"arm": index, "what": describe_arm(arm), "set_aside": arm.get("set_aside"),
            "windows": len(arm.get("windows") or []),
            "search_median_ms": m if isinstance(m, (int, float)) and math.isfinite(m) else None,
            **_speed(v), "decided": bool(v.get("decided")), "rc": verify_run.get("rc")}


def _num(x):
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) \
        and math.isfinite(x) else None


def _speed(res: dict) -> dict:
    """speedup, ci_low, ci_high of a core result; all None where it has no interval (both
    ends 0: no arm was compared, or the search ended first), not a speedup of 0."""
    from ..process.summary import compared
    if not compared(res):
        return {"speedup": None, "ci_low": None, "ci_high": None}
    return {"speedup": _num(res.get("speedup")), "ci_low": _num(res.get("ci_low")),
            "ci_high": _num(res.get("ci_high"))}


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _ratio(a, b):
    return a / b if a is not None and b else None


def advice_seconds(summary: dict, warmup_s: float | None = None) -> float | None:
    """Seconds of the program's traffic until advise's verdict: the watcher's own figure
    when it gives one (``decision_s``), else the warm-up and probe plus every recorded block's
    span (wall per unit x units per block, summed per arm) and the switches. (The summary's
    ``search_s`` is written again at exit: it runs to the program's end, not the verdict.)"""
    if not summary:
        return None
    if _num(summary.get("decision_s")) is not None:
        return float(summary["decision_s"])
    upb = summary.get("units_per_block") or 0
    blocks_ms = sum(sum(x for x in d.get("wall_ms_per_unit", []) if x is not None) * upb
                    for d in (summary.get("per_arm") or {}).values())
    switch_ms = sum(x for x in summary.get("switch_ms") or [] if x is not None)
    w = warmup_s or 0.0
    return w + max(0.25, w / 2) + (blocks_ms + switch_ms) / 1e3


def program_record(program: str, iters: int, plain: list, advise: dict | None,
                   verify: dict | None, applied: list, grid: list, *, warmup_s: float = 0.0,
                   error: str | None = None) -> dict:
    """The study's record of one program from its runs' outputs (each run: rc, wall_s,
    iters, loop_s, digest and, for advise / verify, result = the --json document)."""
    digests = [r.get("digest") for r in plain]
    base = digests[0] if digests else None
    deterministic = bool(digests) and base is not None and all(d == base for d in digests)

    def same(run):
        return None if run is None else (base is not None and run.get("digest") == base)

    summ = (advise or {}).get("result") or {}
    res = summ.get("result") or {}
    watching = summ.get("watching") or {}
    wc = summ.get("watch_cost") or {}
    doc = summ.get("plan") or {}
    verdict = doc.get("verdict") if doc else None
    plan_arm = (res.get("winner") if verdict == "helps" else res.get("baseline")) \
        if verdict else None
    a = _speed(res)
    a_speed = a["speedup"]
    gain = (a_speed if verdict == "helps" else 1.0) if verdict else None
    vres = _verdict_of((verify or {}).get("result"))
    v = _speed(vres)
    v_speed = v["speedup"]
    switch = [x for x in summ.get("switch_ms") or [] if x is not None]
    # the switch's own work after the synchronization (process/report.switch_said): a
    # switch's time less the next arm's graphs readied and the wait for the block's queue
    work = [x for x in summ.get("switch_work_ms") or [] if x is not None]
    plain_wall = _median([r.get("wall_s") for r in plain])
    plain_rate = _median([rate_of(r) for r in plain])
    apply_wall = _median([r.get("wall_s") for r in applied])
    apply_rate = _median([rate_of(r) for r in applied])
    speeds = [g["speedup"] for g in grid if g.get("speedup") is not None]
    best = max(grid, key=lambda g: g["speedup"] if g.get("speedup") is not None else -1.0,
               default=None)
    grid_best = max(speeds) if speeds else None
    grid_gain = max(1.0, grid_best) if grid_best is not None else None
    return {
        "program": program, "iters": iters, "error": error,
        "plain_wall_s": plain_wall, "plain_rate": plain_rate, "deterministic": deterministic,
        "verdict": verdict, "plan": describe_arm(doc) if doc else None,
        "plan_windows": len(doc.get("windows") or []) if doc else None,
        "plan_arm": plan_arm,
        "plan_device": (doc.get("device") or {}).get("name") if doc else None,
        "advise_rc": (advise or {}).get("rc"),
        # what advise said last, where it gave no plan (why, in its own words)
        "advise_said": None if doc or advise is None else _last_line(advise.get("stderr", "")),
        "advise_speedup": a_speed, "advise_ci_low": a["ci_low"],
        "advise_ci_high": a["ci_high"], "advised_gain": gain,
        "decided": bool(res.get("decided")),
        "advice_s": advice_seconds(summ, warmup_s) if summ else None,
        "search_s": _num(summ.get("search_s")),
        "search_blocks": res.get("search_blocks"), "confirm_blocks": res.get("confirm_blocks"),
        "unit": (summ.get("unit") or [None])[0],
        "arms": len(summ.get("arms") or []), "graphs": len(summ.get("graphs") or []),
        "switches": len(switch), "switch_ms_median": _median(switch),
        "switch_ms_max": max(switch) if switch else None,
        "switch_work_ms_median": _median(work),
        "advise_digest_same": same(advise), "advise_wall_s": (advise or {}).get("wall_s"),
        "advise_rate": rate_of(advise),
        "advise_overhead": _ratio((advise or {}).get("wall_s"), plain_wall),
        "advise_loop_overhead": _ratio(plain_rate, rate_of(advise)),
        # the watcher's own cost, measured in the program: the final arm's wall per unit while
        # recorded over the same arm's after the decision (nothing recorded or switched); a
        # ratio of walls the program's mix moved is not a cost (the summary's "comparable")
        "watch_cost": _num(wc.get("ratio")) if wc.get("comparable", True) else None,
        # what watching added to the program's wall time while advise searched (the installs
        # and the recorded blocks' excess over the unrecorded rests), and its parts
        "watch_added": _num(watching.get("added_share")),
        # the hooks' own time on every call of the program (rests and blocks alike, so not in
        # watch_added), and the two together: what observing cost the program while advising
        "hooks_share": _num(watching.get("hooks_share")),
        "observing_share": _num(watching.get("observing_share")),
        # the pace: its rests stopped at their cap (the bound out of reach within the budget),
        # and its model scaled by what its newest cycles measured (Costs.correction)
        "rests_capped": watching.get("rests_capped"),
        "pace_correction": _num(watching.get("pace_correction")),
        # False where the program's mix moved its unrecorded walls per unit from rest to rest
        # (the pace's "comparable"): observing is then not measurable in the program
        "observing_comparable": watching.get("comparable", True),
        # COVERS_TICKS where the unit is the clock's tick: the figure then holds the
        # switches and the blocks beyond their ticks, not what the records cost the program's
        # own pace (Costs.ticks)
        "observing_covers": watching.get("covers"),
        # what the arms tried cost the program beyond the baselines' pace (their rests' wall
        # per unit): trying plans, apart from observing; no bar (a size, wall time)
        "exploring_share": _num(watching.get("exploring_share")),
        # the GPU's share of the program's wall time under the default, and the most a gain
        # on GPU time can take off the wall (advice is judged on GPU time; no bar)
        "gpu_busy_share": _num((summ.get("gpu_busy") or {}).get("share")),
        "wall_gain_at_most": _num((summ.get("gpu_busy") or {}).get("wall_gain_at_most")),
        "record_cost": _num(watching.get("record_cost")),
        "recorded_share": _num(watching.get("recorded_share")),
        # whether each arm's windows were on its kernels (launch attributes; None: not checked)
        "windows_landed": _landed(summ.get("windows_landed")),
        "verify_rc": (verify or {}).get("rc"), "verify_speedup": v_speed,
        "verify_ci_low": v["ci_low"], "verify_ci_high": v["ci_high"],
        "verify_decided": bool(vres.get("decided")),
        # a "don't" plan whose verify had no arm to compare (only the baselines reach the
        # program) and held: there is no figure to be within 1 % of, and none is needed
        "verify_nothing_to_compare": (verdict == "dont" and v_speed is None
                                      and (verify or {}).get("rc") == 0),
        "verify_diff": abs(v_speed - gain) if v_speed is not None and gain is not None else None,
        "verify_digest_same": same(verify),
        "apply_digest_same": (all(same(r) for r in applied) if applied else None),
        "apply_wall_s": apply_wall, "apply_rate": apply_rate,
        "apply_overhead": _ratio(apply_wall, plain_wall),
        "apply_loop_overhead": _ratio(plain_rate, apply_rate),
        "grid_points": len(grid), "grid_best": grid_best, "grid_gain": grid_gain,
        "grid_best_arm": best["what"] if best is not None and grid_best is not None else None,
        "vs_grid": _ratio(v_speed, grid_gain),
        "grid": list(grid),
    }


# ---- bars ---------------------------------------------------------------------------------

def _overhead_bar(r: dict, p: str) -> tuple:
    """Observing (the switches, the recorded blocks' excess and the hooks on every call) under
    the bar. A record stored before the hooks were measured is judged on what it has (watching
    added), and the bar says so; one stored before either was measured is not judged."""
    if r.get("observing_comparable") is False:
        return ("bar_overhead", f"{p}: observing under {BAR_OVERHEAD:.0%} of the program's "
                                "wall time: not measurable in it (its mix of work moved the "
                                "walls per unit from rest to rest more than a comparison "
                                "allows)", None)
    if r.get("observing_covers") == COVERS_TICKS:
        return ("bar_overhead", f"{p}: observing under {BAR_OVERHEAD:.0%} of the program's "
                                "wall time: not measurable in it (the unit is the clock's "
                                "tick, whose wall is the clock's: what the records cost the "
                                "program's own pace does not show; advise --placebo measures "
                                "it)", None)
    if "observing_share" in r:
        v = r["observing_share"]
        return ("bar_overhead", f"{p}: observing (watching added and the hooks on every call) "
                                f"under {BAR_OVERHEAD:.0%} of the program's wall time while "
                                "advising (measured in it)",
                v is not None and v < BAR_OVERHEAD)
    return ("bar_overhead", f"{p}: watching added under {BAR_OVERHEAD:.0%} to the program's "
                            "wall time while advising (measured in it; the hooks' own cost "
                            "was not measured then)",
            None if "watch_added" not in r else
            r["watch_added"] is not None and r["watch_added"] < BAR_OVERHEAD)


BAR_KEYS = ("bar_outputs", "bar_advice_s", "bar_verify_within", "bar_verify_floor",
            "bar_overhead", "bar_grid")


def program_bars(r: dict) -> list:
    """(key, bar in words, met: True / False / None where the bar does not apply) for one
    program's record."""
    p = r["program"]
    runs = [r.get("advise_digest_same"), r.get("apply_digest_same"), r.get("verify_digest_same")]
    outputs = bool(r.get("deterministic")) and r.get("advise_digest_same") is True and \
        r.get("apply_digest_same") is True and all(x is not False for x in runs)
    secs = r.get("advice_s")
    nothing = bool(r.get("verify_nothing_to_compare"))   # the verify bars do not apply
    out = [("bar_outputs", f"{p}: outputs bit-identical plain, under advise, verify and apply",
            outputs),
           ("bar_advice_s", f"{p}: a decided verdict in under {BAR_ADVICE_S:g} s of the "
                            "program's traffic",
            bool(r.get("decided")) and secs is not None and secs < BAR_ADVICE_S),
           ("bar_verify_within", f"{p}: verify in a fresh process within "
                                 f"{BAR_VERIFY_WITHIN:.0%} of advise's gain",
            None if nothing else
            r.get("verify_diff") is not None and r["verify_diff"] <= BAR_VERIFY_WITHIN),
           ("bar_verify_floor", f"{p}: verify >= {BAR_VERIFY_FLOOR} x the better baseline",
            None if nothing else
            r.get("verify_speedup") is not None and r["verify_speedup"] >= BAR_VERIFY_FLOOR),
           _overhead_bar(r, p)]
    g = r.get("grid_gain")
    if g is None and r.get("arms") == 2:
        # no window reaches the program's kernels: the plan space is the two baselines, whose
        # grid runs (verify of each) have nothing to compare (cupy_only and jax_program on the
        # H200 at cbba7ed); advise's own confirmation chose between them
        out.append(("bar_grid", f"{p}: only the baselines reach the program (no plan to grid)",
                    None))
    elif g is None:
        out.append(("bar_grid", f"{p}: the offline grid was measured", False))
    elif g >= BAR_GRID_PAYS:
        out.append(("bar_grid", f"{p}: advice >= {BAR_GRID:.0%} of the grid's best gain "
                                f"({g:.3f}x)",
                    r.get("vs_grid") is not None and r["vs_grid"] >= BAR_GRID))
    elif g < BAR_DONT:
        out.append(("bar_grid", f"{p}: says don't where the grid's best gains under "
                                f"{BAR_DONT - 1:.0%} ({g:.3f}x)", r.get("verdict") == "dont"))
    else:
        out.append(("bar_grid", f"{p}: grid's best {g:.3f}x, between the bars (none applies)",
                    None))
    return out


def derive(records) -> None:
    """Each bar's outcome in its record (True / False / None: not applicable), and how many
    of the program's bars were met."""
    for r in records:
        bs = program_bars(r)
        for key, _, met in bs:
            r[key] = met
        judged = [met for _, _, met in bs if met is not None]
        r["bars_met"] = f"{sum(judged)} of {len(judged)}"


def bars(res) -> list:
    return [(text, met) for r in res.records for _, text, met in program_bars(r)
            if met is not None]


# ---- presentation --------------------------------------------------------------------------

COLUMNS = [("program", "program"), ("iters", "iters"), ("verdict", "verdict"),
           ("plan", "plan"), ("advise_speedup", "advise"), ("advice_s", "advice s"),
           ("switch_ms_median", "switch ms"), ("switch_work_ms_median", "its own work ms"),
           ("watch_added", "watching added"),
           ("observing_share", "observing (+ hooks)"), ("exploring_share", "arms' cost"),
           ("verify_speedup", "verify"),
           ("verify_rc", "verify rc"), ("grid_points", "grid plans"),
           ("grid_gain", "grid best gain"), ("vs_grid", "of grid best"),
           ("advise_overhead", "advise wall / plain"), ("apply_overhead", "apply wall / plain"),
           ("bars_met", "bars met")]


def _f(x, fmt="{:.3f}"):
    return "-" if x is None else fmt.format(x)


def _switch_work_text(r: dict) -> str:
    w = r.get("switch_work_ms_median")
    return "" if w is None else f"; its own work after the synchronization " \
        f"{_f(w, '{:.2f}')} ms median (before it: the readying ahead and the wait for the " \
        "block's queued work)"


def _watching_text(r: dict) -> str:
    if "watch_added" not in r:     # stored before the watcher measured it
        return ""
    ticks = r.get("observing_covers") == COVERS_TICKS
    return (f"; watching added {_f(r.get('watch_added'), '{:.2%}')} to the wall time while "
            f"searching ({_f(r.get('recorded_share'), '{:.0%}')} of its units recorded"
            + ("" if ticks else f", recording {_f(r.get('record_cost'), '{:+.1%}')} per unit")
            + ")"
            + ("" if "observing_share" not in r else
               f", the hooks on every call {_f(r.get('hooks_share'), '{:.2%}')}: observing "
               f"{_f(r.get('observing_share'), '{:.2%}')} in all")
            + ("" if not ticks else
               " (the watcher's own time only: the unit is the clock's tick, so what the "
               "records cost the program's own pace is not in it)")
            + ("" if r.get("exploring_share") is None else
               f"; the arms tried cost the program {_f(r['exploring_share'], '{:+.2%}')} of "
               f"the search's wall beyond the baselines' pace"))


def findings(res) -> list:
    out = list(res.summary.get("setup", []))
    for r in res.records:
        p = r["program"]
        if r.get("error"):
            out.append(f"{p}: {r['error']}")
            continue
        if r.get("verdict") is None:
            out.append(f"{p}: advise gave no plan (exit {r.get('advise_rc')}: "
                       f"{r.get('advise_said') or 'no output'}); "
                       f"{r['iters']} iterations at {_f(r.get('plain_rate'), '{:.0f}')} it/s")
            continue
        what = (f"helps: {r['plan']}" if r["verdict"] == "helps" else
                f"don't (keep {r['plan']})")
        met = {k: m for k, _, m in program_bars(r)}
        judged = [m for m in met.values() if m is not None]
        ident = ("bit-identical" if met["bar_outputs"] else "NOT identical") + \
            " plain, under advise, verify and apply"
        cand = (("no arm compared (only the baselines)" if r["arms"] <= 2 else
                 "no candidate confirmed (the search ended first)")
                if r["advise_speedup"] is None else
                f"its best candidate {_f(r['advise_speedup'])}x "
                f"({_f(r['advise_ci_low'])}-{_f(r['advise_ci_high'])}) against the better "
                f"baseline")
        checked = (f"{_f(r.get('verify_speedup'))}x" if r.get("verify_speedup") is not None
                   else "no arm to compare" if r.get("verify_nothing_to_compare")
                   else "no figure (no verdict)")
        out.append(
            f"{p}: advise says {what}; {cand}, "
            f"{'decided' if r['decided'] else 'NOT decided'} after "
            f"{_f(r.get('advice_s'), '{:.1f}')} s of traffic ({r.get('search_blocks')} search + "
            f"{r.get('confirm_blocks')} confirmation blocks over {r['arms']} arms; switch "
            f"{_f(r.get('switch_ms_median'), '{:.2f}')} ms median, "
            f"{_f(r.get('switch_ms_max'), '{:.2f}')} ms max{_switch_work_text(r)})"
            f"{_watching_text(r)}; verify in a "
            f"fresh process "
            f"{checked} (exit {r.get('verify_rc')}); the grid's best of "
            f"{r['grid_points']} plans {_f(r.get('grid_best'))}x ({r.get('grid_best_arm')}); "
            f"outputs {ident}; wall time under advise {_f(r.get('advise_overhead'))}x plain, "
            f"under apply {_f(r.get('apply_overhead'))}x; bars met: {sum(judged)} of {len(judged)}")
    return out


def bar_table(res) -> str:
    """The bars as a short markdown table: one row per program, each bar met (yes), not met
    (NO) or not applicable (-), with the number it was judged on."""
    head = ["program", "outputs identical", f"advice < {BAR_ADVICE_S:g} s",
            f"verify within {BAR_VERIFY_WITHIN:.0%}", f"verify >= {BAR_VERIFY_FLOOR}",
            f"watching < {BAR_OVERHEAD:.0%}", "grid bar"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(met, num=""):
        word = "-" if met is None else "yes" if met else "NO"
        return f"{word} ({num})" if num and met is not None else word
    for r in res.records:
        bs = {k: met for k, _, met in program_bars(r)}
        g = r.get("grid_gain")
        grid_num = ("" if g is None else f"{_f(r.get('vs_grid'))} of {_f(g)}x"
                    if g >= BAR_GRID_PAYS else f"grid {_f(g)}x, {r.get('verdict')}")
        rows.append("| " + " | ".join([
            r["program"], cell(bs["bar_outputs"]),
            cell(bs["bar_advice_s"], _f(r.get("advice_s"), "{:.1f} s")),
            cell(bs["bar_verify_within"], _f(r.get("verify_diff"), "{:.4f}")),
            cell(bs["bar_verify_floor"], _f(r.get("verify_speedup"))),
            cell(bs["bar_overhead"], _f(r.get("observing_share", r.get("watch_added")),
                                        "{:.2%}")),
            cell(bs["bar_grid"], grid_num)]) + " |")
    return "\n".join(rows)


def grid_table(res) -> str:
    """Each grid plan per program: the arm, its search median, verify's speedup and
    interval; the advice's arm marked."""
    rows = ["| program | arm | plan | search median ms/unit | verify speedup | 95 % interval "
            "| verify rc |", "|---|---|---|---|---|---|---|"]
    for r in res.records:
        for g in r.get("grid") or []:
            mark = " (advised)" if g["arm"] == r.get("plan_arm") else ""
            rows.append(f"| {r['program']} | {g['arm']} | {g['what']}{mark} | "
                        f"{_f(g.get('search_median_ms'), '{:.4f}')} | {_f(g.get('speedup'))} | "
                        f"{_f(g.get('ci_low'))}-{_f(g.get('ci_high'))} | {g.get('rc')} |")
    return "\n".join(rows)


def plot_spec(res) -> PlotSpec:
    return PlotSpec(x="program", y=["advise_speedup", "verify_speedup", "grid_best"],
                    kind="bar", hline=1.0,
                    labels={"advise_speedup": "advise (its best candidate, while searching)",
                            "verify_speedup": "the plan, verify in a fresh process",
                            "grid_best": "the offline grid's best plan (verify)"},
                    xlabel="program", ylabel="GPU time per unit: better baseline / plan",
                    title="advise -- COMMAND: what advise found, what verify re-measured, "
                          "what the grid's best reached", hline_label="the better baseline")


def plot_grid(res, path=None):
    """Per program, each grid plan's verify speedup with its interval (the advised plan
    filled): the plan space advise searched, each point measured in its own process."""
    import matplotlib.pyplot as plt
    recs = [r for r in res.records if r.get("grid")]
    if not recs:
        raise ValueError("plot_grid: no record has a grid")
    fig, axs = plt.subplots(1, len(recs), figsize=(4.2 * len(recs), 3.6), squeeze=False)
    for ax, r in zip(axs[0], recs):
        pts = [g for g in r["grid"] if g.get("speedup") is not None]
        for k, g in enumerate(pts):
            lo, hi = g.get("ci_low"), g.get("ci_high")
            err = ([[g["speedup"] - lo], [hi - g["speedup"]]] if lo is not None and
                   hi is not None else None)
            advised = g["arm"] == r.get("plan_arm")
            ax.errorbar(k, g["speedup"], yerr=err, fmt="o", color="C3" if advised else "C0",
                        mfc="C3" if advised else "none", capsize=2)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xticks(range(len(pts)), [str(g["arm"]) for g in pts])
        ax.set_title(f"{r['program']}: {r.get('verdict') or 'no plan'}", fontsize=10)
        ax.set_xlabel("arm of advise's search (filled: the advice)")
        ax.set_ylabel("verify: better baseline / plan")
    fig.suptitle("The offline grid: every arm checked by verify in its own process",
                 fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
