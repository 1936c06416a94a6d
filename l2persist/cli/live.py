"""advise / verify / apply -- COMMAND: a running program, watched, never called.

Each starts COMMAND (a Python program and its arguments, as ``coverage run`` or ``nsys
profile`` take one) with l2persist's bootstrap first on PYTHONPATH, waits for it, and reads what
the watcher inside wrote. The program's own output and exit status pass through untouched.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

from ._common import Parser, output_problem

BOOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "process",
                    "_boot")


def _split(argv: list[str], prog: str):
    """(options, command): everything after the first '--' is the program."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def _positive(name, lo, hi, conv=float):
    def check(text):
        try:
            v = conv(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: expected a number in [{lo}, {hi}], "
                                             f"got {text!r}") from None
        if not (lo <= v <= hi):
            raise argparse.ArgumentTypeError(f"{name}: expected [{lo}, {hi}], got {text}")
        return v
    return check


def _parser(prog: str, plan: bool, search: bool) -> argparse.ArgumentParser:
    p = Parser(prog=f"python -m l2persist {prog}",
                                usage=f"python -m l2persist {prog} [options]"
                                      f"{' PLAN' if plan else ''} -- COMMAND [ARGS...]")
    if plan:
        p.add_argument("plan", help="the plan document (JSON) that advise wrote")
    p.add_argument("--device", type=_positive("--device", 0, 1023, int), default=None,
                   help="the GPU the program uses (default: LOCAL_RANK, else 0)")
    if search:
        from ..process.live import Options
        d = Options()              # the watcher's defaults: one home
        p.add_argument("--budget", type=_positive("--budget", 1, 86400), default=d.budget_s,
                       help=f"seconds of the program's traffic for the search (default "
                            f"{d.budget_s:g})")
        p.add_argument("--warmup", type=_positive("--warmup", 0, 3600), default=d.warmup_s,
                       help=f"seconds watched before any switch (captures settle; default "
                            f"{d.warmup_s:g})")
        p.add_argument("--block-ms", type=_positive("--block-ms", 1, 10000),
                       default=d.block_s * 1e3,
                       help=f"a block's length under one arm, ms of the program's time "
                            f"(default {d.block_s * 1e3:g})")
        p.add_argument("--block-units", type=_positive("--block-units", 1, 100000, int),
                       default=0, help="units of work per block instead of --block-ms (the "
                                       "same on every rank)")
        from .. import _core
        gain = _core.live_defaults()["min_gain"]
        p.add_argument("--min-gain", type=_positive("--min-gain", 0, 0.5), default=gain,
                       help=f"the least gain worth a plan (default {gain:g})")
        pct = 100 * _core.live_defaults()["max_overhead"]
        p.add_argument("--max-overhead", type=_positive("--max-overhead", 0, 50),
                       default=pct, metavar="PCT",
                       help=f"what observing (watching and the hooks on every call) may add "
                            f"to the program's wall time while it searches, in per cent: "
                            f"unrecorded rests between blocks keep it there (0: record back "
                            f"to back, the fastest advice; default {pct:g})")
        p.add_argument("--report", default=None, help="write an HTML report here")
        p.add_argument("--json", default=None, help="write the watcher's whole result here")
    if prog == "advise":
        p.add_argument("--out", default="l2persist-plan.json",
                       help="the plan document (default l2persist-plan.json)")
        p.add_argument("--exit-after", action="store_true",
                       help="end the program once decided (else it runs on under the better "
                            "baseline)")
    return p


def _parse(argv, prog, plan=False, search=True):
    opts, command = _split(list(argv), prog)
    p = _parser(prog, plan, search)
    try:
        args = p.parse_args(opts)
    except SystemExit as e:
        return None, None, int(e.code or 0)
    if not command:
        print(f"python -m l2persist {prog}: no program given: put it after '--', e.g. "
              f"python -m l2persist {prog}{' plan.json' if plan else ''} -- python train.py",
              file=sys.stderr)
        return None, None, 2
    if plan and not os.path.isfile(args.plan):
        print(f"python -m l2persist {prog}: plan: no such file {args.plan!r}", file=sys.stderr)
        return None, None, 2
    if plan:
        from ..process.live import load_plan
        try:
            load_plan(args.plan)
        except ValueError as e:
            print(f"python -m l2persist {prog}: {e}", file=sys.stderr)
            return None, None, 2
    for name in ("out", "report", "json"):
        path = getattr(args, name, None)
        why = output_problem(f"--{name}", path) if path is not None else None
        if why:
            print(f"python -m l2persist {prog}: {why}", file=sys.stderr)
            return None, None, 2
    return args, command, None


def _env(args, mode: str, result: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = BOOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["L2PERSIST_MODE"] = mode
    env["L2PERSIST_RESULT"] = result
    if getattr(args, "plan", None):
        env["L2PERSIST_PLAN"] = os.path.abspath(args.plan)
    if args.device is not None:
        env["L2PERSIST_DEVICE"] = str(args.device)
    if hasattr(args, "budget"):
        env["L2PERSIST_BUDGET"] = repr(args.budget)
        env["L2PERSIST_WARMUP"] = repr(args.warmup)
        env["L2PERSIST_BLOCK_S"] = repr(args.block_ms / 1e3)
        env["L2PERSIST_BLOCK_UNITS"] = str(args.block_units)
        env["L2PERSIST_MIN_GAIN"] = repr(args.min_gain)
        env["L2PERSIST_MAX_OVERHEAD"] = repr(args.max_overhead / 100)
    if getattr(args, "exit_after", False):
        env["L2PERSIST_EXIT_AFTER"] = "1"
    return env


def _run(command, env) -> int:
    """Start the program; pass SIGINT / SIGTERM on to it; its exit status."""
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as e:
        print(f"l2persist: cannot start {command[0]!r}: {e.strerror}", file=sys.stderr)
        return 127
    previous = {}

    def forward(signum, frame):
        child.send_signal(signum)
    for s in (signal.SIGINT, signal.SIGTERM):
        previous[s] = signal.signal(s, forward)
    try:
        return child.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _read(result: str):
    """The watcher's result; under torchrun the ranks' results (one file each) merged."""
    import glob
    ranks = [_read_one(p) for p in sorted(glob.glob(glob.escape(result) + ".rank*"))
             if not p.endswith(".tmp")]
    ranks = [d for d in ranks if d is not None]
    if ranks:
        from ..process.team import merge_ranks
        return merge_ranks(ranks)
    return _read_one(result)


def _read_one(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _plan_paths(out: str, plans: dict) -> dict:
    """Where each GPU model's plan goes: OUT for one model; OUT with the model's name before
    the extension for several (a mixed host)."""
    if len(plans) <= 1:
        return {name: out for name in plans}
    root, ext = os.path.splitext(out)
    slug = lambda n: "".join(c if c.isalnum() else "-" for c in (n or "unknown")).strip("-")
    return {name: f"{root}-{slug(name)}{ext or '.json'}" for name in plans}


def _watch(args, command, mode):
    """Run the program watched; (its exit status, the watcher's result or None). The summary
    is printed, or why there is none."""
    with tempfile.TemporaryDirectory(prefix="l2persist-") as tmp:
        result = os.path.join(tmp, "result.json")
        prog_rc = _run(command, _env(args, mode, result))
        r = _read(result)
    if r is None or not r.get("result"):
        print(_no_result(r, prog_rc), file=sys.stderr)
        return prog_rc, None
    from ..process.report import summary_text
    print(summary_text(r), file=sys.stderr)
    return prog_rc, r


def advise_main(argv: list[str]) -> int:
    args, command, rc = _parse(argv, "advise")
    if args is None:
        return rc
    prog_rc, r = _watch(args, command, "advise")
    if r is None:
        return prog_rc or 1
    plans = r.get("plans_by_model") or ({None: r["plan"]} if r.get("plan") else {})
    for name, path in _plan_paths(args.out, plans).items():
        with open(path, "w") as f:
            json.dump(plans[name], f, indent=1)
        print(f"l2persist: plan{' for ' + name if len(plans) > 1 else ''} written to {path}: "
              f"apply it with `python -m l2persist apply {path} -- {' '.join(command)}`",
              file=sys.stderr)
    _extras(args, r)
    return prog_rc


def verify_main(argv: list[str]) -> int:
    args, command, rc = _parse(argv, "verify", plan=True)
    if args is None:
        return rc
    prog_rc, r = _watch(args, command, "verify")
    if r is None:
        return 1
    _extras(args, r)
    res = r["result"]
    if prog_rc:
        print(f"l2persist verify: the program exited with {prog_rc}", file=sys.stderr)
    with open(args.plan) as f:
        doc = json.load(f)
    if doc.get("verdict") == "dont":
        ok = not res.get("helps")   # a "don't" plan still holds while the plan arm gains nothing
    else:
        ok = bool(res.get("helps")) and bool(res.get("decided"))
    print(f"l2persist verify: {'still holds' if ok else 'no longer holds'} "
          f"(plan {res.get('speedup', 0):.4f}x the better baseline, "
          f"{res.get('ci_low', 0):.4f}-{res.get('ci_high', 0):.4f})", file=sys.stderr)
    return 0 if ok else 1


def apply_main(argv: list[str]) -> int:
    opts, command = _split(list(argv), "apply")
    if not command and len(opts) == 1 and opts[0] not in ("-h", "--help"):
        # No program: how a launcher that starts the program itself applies the plan.
        plan = os.path.abspath(opts[0])
        print(f"export PYTHONPATH={BOOT}{os.pathsep}$PYTHONPATH\nexport L2PERSIST_PLAN={plan}")
        return 0
    args, command, rc = _parse(argv, "apply", plan=True, search=False)
    if args is None:
        return rc
    env = _env(args, "apply", os.devnull)
    return _run(command, env)


def _extras(args, r):
    if getattr(args, "json", None):
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1)
    if getattr(args, "report", None):
        from ..process.report import write_report
        write_report(r, args.report)
        print(f"l2persist: report written to {args.report}", file=sys.stderr)


def _no_result(r, prog_rc) -> str:
    if r is None:
        return (f"l2persist: no advice: the program (exit {prog_rc}) never reached a point "
                "where l2persist could watch it (a CUDA graph replay, torch.cuda.synchronize, "
                "or l2persist.mark())")
    notes = "; ".join(r.get("notes", [])) or "no note"
    return (f"l2persist: no advice: the program (exit {prog_rc}) ended in the "
            f"{r.get('state')} phase ({notes}); run it longer, or lower --warmup / --budget")
