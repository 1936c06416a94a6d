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
import textwrap

from ._common import Parser, device_problem, fail, no_device_problem, output_problem

BOOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "process",
                    "_boot")


def _split(argv: list[str]):
    """(options, command): everything after the first '--' is the program."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def _positive(lo, hi, conv=float):
    """A number in [lo, hi]; argparse names the option in front of the message."""
    def check(text):
        try:
            v = conv(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number in [{lo}, {hi}], "
                                             f"got {text!r}") from None
        if not (lo <= v <= hi):
            raise argparse.ArgumentTypeError(f"expected [{lo}, {hi}], got {text}")
        return v
    return check


#: Each command's description and exit statuses (--help; docs/guides/advise-program.md
#: quotes them).
HELP = {
    "advise": (
        "Watch a Python program (COMMAND, after '--') run its own work, try persisting-L2 "
        "plans on it between its calls (the set-aside and access policy windows on the "
        "buffers its CUDA graphs and kernels read), and write the plan that helps, or a "
        "\"don't\" plan, to --out. Needs a usable CUDA device: without one it says so and "
        "does not start the program. The program's output passes through untouched.",
        "exit status:\n"
        "  the program's own    a plan was written (\"helps\" or \"don't\"); or no plan "
        "where\n"
        "                       the program failed before a decision, or with --placebo\n"
        "  1                    no plan: the program exited 0 before a decision (the line "
        "says\n"
        "                       why and what would decide it)\n"
        "  2                    bad invocation, an output path that cannot be written, or "
        "no\n"
        "                       usable CUDA device (the program is not started)\n"
        "  127                  the program could not be started"),
    "apply": (
        "Run a program (COMMAND, after '--') with a saved plan applied: the plan's set-aside "
        "is set before the program's code runs, its windows go on the graphs and eager "
        "launches it matches, and everything is put back at exit. The plan is checked first. "
        "Without a usable CUDA device, or on another GPU model, the program runs without the "
        "plan and l2persist says so. `apply PLAN` with no program checks the plan and prints "
        "the two exports (PYTHONPATH, L2PERSIST_PLAN) that apply it to the programs a "
        "launcher starts itself.",
        "exit status:\n"
        "  the program's own    the program ran (with the plan, or without it where it "
        "cannot\n"
        "                       apply: no usable CUDA device, another GPU model)\n"
        "  0                    `apply PLAN` alone: the plan is good, the exports printed\n"
        "  2                    bad invocation or a plan that fails its check (the program "
        "is\n"
        "                       not started)\n"
        "  127                  the program could not be started"),
    "verify": (
        "Run a program (COMMAND, after '--') switching between a saved plan and the two "
        "baselines (limit 0, the device default) on its own work, and say whether the plan "
        "still helps. For a \"don't\" plan: whether another plan of advise's search "
        "(another set-aside or window) helps now. Needs a usable CUDA "
        "device of the plan's GPU model: otherwise it says so and does not start the "
        "program. The program's output passes through; its exit status is reported.",
        "exit status:\n"
        "  0  the plan still holds\n"
        "  1  it no longer helps (for a \"don't\" plan: another plan now helps)\n"
        "  2  bad invocation, no usable CUDA device, or a plan from another GPU model\n"
        "     (the program is not started)\n"
        "  3  inconclusive: the 95 % interval holds both \"helps\" and \"does not help\" "
        "(a\n"
        "     longer --budget narrows it), or nothing was measured"),
}

#: What the watcher's options do, in each command's words: advise searches, verify checks.
_WORK = {"advise": ("the search", "searches"), "verify": ("the check", "checks")}


def _parser(prog: str, plan: bool, search: bool) -> argparse.ArgumentParser:
    what, does = _WORK.get(prog, ("", ""))
    description, epilog = HELP[prog]
    p = Parser(prog=f"{_prog()} {prog}",
               usage=f"{_prog()} {prog} [options]{' PLAN' if plan else ''} -- COMMAND [ARGS...]"
               + ("\n       " + f"{_prog()} apply PLAN" if prog == "apply" else ""),
               description=textwrap.fill(description, 79), epilog=epilog,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    if plan:
        p.add_argument("plan", help="the plan document (JSON) that advise wrote")
    p.add_argument("--device", type=_positive(0, 1023, int), default=None, metavar="N",
                   help="the GPU the program uses (default: LOCAL_RANK, else 0)")
    if search:
        from ..process.live import Options
        d = Options()              # the watcher's defaults: one home
        p.add_argument("--budget", type=_positive(1, 86400), default=d.budget_s,
                       metavar="SECONDS",
                       help=f"seconds of the program's traffic for {what} (default "
                            f"{d.budget_s:g}); where it leaves room, the rests (stretches "
                            f"watched but not timed, between the timed blocks) run longer to "
                            f"keep observing under --max-overhead")
        p.add_argument("--warmup", type=_positive(0, 3600), default=d.warmup_s,
                       metavar="SECONDS",
                       help=f"seconds watched before the first switch of {what} (captures "
                            f"settle; default {d.warmup_s:g})")
        p.add_argument("--block-ms", type=_positive(1, 10000), default=d.block_s * 1e3,
                       metavar="MS",
                       help=f"how long {what} keeps one arm (a plan tried, or a baseline: "
                            f"limit 0 or the device's default) in place: a timed block, ms "
                            f"of the program's time (default "
                            f"{d.block_s * 1e3:g})")
        p.add_argument("--block-units", type=_positive(1, 100000, int), default=0,
                       metavar="N",
                       help="units of work per block instead of --block-ms (the same on "
                            "every rank)")
        from .. import _core
        defaults = _core.live_defaults()
        gain = defaults["min_gain"]
        p.add_argument("--min-gain", type=_positive(0, 0.5), default=gain, metavar="FRACTION",
                       help=(f"the least gain worth a plan (default {gain:g})" if prog ==
                             "advise" else f"the least gain that counts as the plan helping "
                                           f"(default {gain:g})"))
        pct = 100 * defaults["max_overhead"]
        p.add_argument("--max-overhead", type=_positive(0, 50), default=pct, metavar="PCT",
                       help=f"what observing (watching and the hooks on every call) may add "
                            f"to the program's wall time while {prog} {does}, in per cent: "
                            f"rests between the timed blocks, watched but not timed, keep it "
                            f"there (0: time back to back, the fastest answer; default "
                            f"{pct:g})")
        p.add_argument("--graph-records", action="store_true",
                       help="experimental: time each PyTorch graph replay with one CUPTI record "
                            "per replay instead of one per kernel node (per node +110.9 us, "
                            "these +22.2 us a replay of a 250-node graph, H200; turned on "
                            "before the program's first capture, else left off with a note)")
        p.add_argument("--replay-events", action="store_true",
                       help="experimental: time each PyTorch graph replay with a pair of CUDA "
                            "events on its stream (+5.7 us a replay of a 250-node graph, "
                            "H200), and keep the kernel records off in the blocks where "
                            "l2persist's first look at the program (before any plan is tried) "
                            "saw little eager work; where events cannot cover the "
                            "graphs, or most replays find the GPU idle (their pairs would "
                            "time the launch too), the nodes' records time them as without it "
                            "(the summary's timing says which). Not the default: its "
                            "intervals came out as narrow as the nodes' records' on the "
                            "request-mix server but 3.9 times wider on 250-node decode graphs "
                            "(H200, a0a4b97, one run each)")
        p.add_argument("--report", default=None, metavar="PATH",
                       help=f"write an HTML report of {what} here")
        p.add_argument("--json", default=None, metavar="PATH",
                       help="write the watcher's whole result document (JSON) here")
    if prog == "advise":
        p.add_argument("--out", default="l2persist-plan.json", metavar="PATH",
                       help="the plan document (default l2persist-plan.json)")
        p.add_argument("--placebo", action="store_true",
                       help="measure what observing costs, not a plan: every arm is installed "
                            "as advise would (its windows on the same nodes and streams, the "
                            "same switches, records and rests) but with normal hit and miss "
                            "properties and the device's default set-aside, so the program "
                            "runs as under no plan; time its work against a plain run of the "
                            "same work (tools/investigations/zoo-advise --placebo). Writes no "
                            "plan")
        p.add_argument("--exit-after", action="store_true",
                       help="end the program once decided (else it runs on under the better "
                            "baseline)")
    if prog == "apply":
        p.add_argument("--release-cupti", action="store_true",
                       help="experimental: where the plan has stream windows, count captures "
                            "from before the launch log that matches them attaches CUPTI, "
                            "and let CUPTI go after it where the program made no CUDA graph "
                            "(attached, it costs every launch for the program's life); not "
                            "yet run on a GPU, so not the default")
    return p


def _prog() -> str:
    from ._common import prog
    return prog()


def _usage_fail(cmd: str, message: str):
    """(None, None, 2) after one line on stderr, as every usage error."""
    fail(f"{_prog()} {cmd}", message)
    return None, None, 2


def _parse(argv, cmd, plan=False, search=True):
    """(args, command, None), or (None, None, exit status) after one line saying why. Checked
    before the program starts: the options, the plan, the output paths, and for advise and
    verify the device (and verify's plan against its GPU model)."""
    opts, command = _split(list(argv))
    p = _parser(cmd, plan, search)
    try:
        args, extra = p.parse_known_args(opts)
    except SystemExit as e:
        return None, None, int(e.code or 0)
    if extra and extra[0].startswith("-"):
        return _usage_fail(cmd, f"unknown option {extra[0]} (see {_prog()} {cmd} --help)")
    if extra:       # the program given without '--' (argparse would only say "unrecognized")
        return _usage_fail(cmd, f"unrecognized arguments: {' '.join(extra)}; the program goes "
                                f"after '--': {_prog()} {cmd} [options]"
                                f"{' PLAN' if plan else ''} -- {' '.join(extra)}")
    if not command:
        return _usage_fail(cmd, f"no program given: put it after '--', e.g. {_prog()} {cmd}"
                                f"{' plan.json' if plan else ''} -- python train.py")
    doc = None
    if plan:
        from ..process.live import load_plan
        try:
            doc = load_plan(args.plan)
        except ValueError as e:
            return _usage_fail(cmd, str(e))
        args.plan_doc = doc
    for name in ("out", "report", "json"):
        path = getattr(args, name, None)
        why = output_problem(f"--{name}", path) if path is not None else None
        if why:
            return _usage_fail(cmd, why)
    if cmd in ("advise", "verify"):
        why = no_device_problem(args.device) or (doc and _model_problem(doc, args))
        if why:
            return _usage_fail(cmd, f"{why}; the program was not started")
    elif args.device is not None:   # apply: no GPU runs the program plainly; a bad index is a typo
        from .. import _core
        count = _core.device_count()
        why = device_problem(args.device, count) if count else None
        if why:
            return _usage_fail(cmd, f"{why}; the program was not started")
    return args, command, None


def _model_problem(doc: dict, args) -> str | None:
    """Why the plan cannot be verified on this GPU (None: it can): a plan holds for the GPU
    model it was found on, as apply holds it."""
    from .. import Device
    index = args.device if args.device is not None else int(os.environ.get("LOCAL_RANK") or 0)
    here = Device(index).properties.name
    if here == doc["device"]["name"]:
        return None
    return (f"plan {args.plan!r} was found on {doc['device']['name']}; GPU {index} is {here}: "
            f"a plan holds on the GPU model it was found on (advise again here)")


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
    if getattr(args, "graph_records", False):
        env["L2PERSIST_GRAPH_RECORDS"] = "1"
    if getattr(args, "replay_events", False):
        env["L2PERSIST_REPLAY_EVENTS"] = "1"
    if getattr(args, "placebo", False):
        env["L2PERSIST_PLACEBO"] = "1"
    if getattr(args, "release_cupti", False):
        env["L2PERSIST_APPLY_RELEASE"] = "1"
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
    """Run the program watched; (its exit status, the watcher's result document or None).
    The summary is printed when there is a result."""
    with tempfile.TemporaryDirectory(prefix="l2persist-") as tmp:
        result = os.path.join(tmp, "result.json")
        prog_rc = _run(command, _env(args, mode, result))
        r = _read(result)
    if r is not None and r.get("result"):
        from ..process.report import summary_text
        print(summary_text(r), file=sys.stderr)
    return prog_rc, r


def advise_main(argv: list[str]) -> int:
    args, command, rc = _parse(argv, "advise")
    if args is None:
        return rc
    prog_rc, r = _watch(args, command, "advise")
    if r is None or not r.get("result"):
        print(f"l2persist advise: no advice: {_nothing_measured(r, prog_rc, args)}",
              file=sys.stderr)
        return prog_rc or 1
    if not r["result"].get("decided"):
        print(f"l2persist advise: {_undecided(r, args)}", file=sys.stderr)
    if r.get("placebo"):
        print("l2persist advise --placebo: no plan written: every arm ran as no plan (normal "
              "hit and miss properties, the default set-aside); compare the program's time "
              "with a plain run of the same work for what observing cost", file=sys.stderr)
        _extras(args, r)
        return prog_rc
    plans = r.get("plans_by_model") or ({None: r["plan"]} if r.get("plan") else {})
    for name, path in _plan_paths(args.out, plans).items():
        with open(path, "w") as f:
            json.dump(plans[name], f, indent=1)
        print(f"l2persist: plan{' for ' + name if len(plans) > 1 else ''} written to {path}: "
              f"apply it with `{_prog()} apply {path} -- {' '.join(command)}`",
              file=sys.stderr)
    _extras(args, r)
    return prog_rc


def verify_outcome(r: dict | None, plan: dict, min_gain: float) -> tuple[int, str]:
    """verify's exit status and its one line, from the watcher's result document (None: the
    watcher wrote none) and the plan document. The status is the core's rule
    (``_core.live_verify_status``: the plan holds only with its whole interval past
    1 + min_gain, fails with all of it short, else inconclusive, 3; a "don't" plan fails when an
    arm of advise's search helps now, and holds when its search decided with no arm to compare);
    this function only says it in words."""
    from .. import _core
    from ..process.summary import compared
    res = (r or {}).get("result")
    if not res:
        return 3, "inconclusive: nothing was measured (see above)"
    need = 1 + min_gain
    nums = (f"{res['speedup']:.4f}x the better baseline, 95 % interval "
            f"{res['ci_low']:.4f}-{res['ci_high']:.4f}")
    # a "don't" plan, or any plan that is one of the baselines: the watcher searched advise's
    # arms instead of checking the plan against itself (its result's verify_of)
    baseline = plan.get("verdict") == "dont" or (r or {}).get("verify_of") == "baseline"
    decided = bool(res.get("decided"))
    status = _core.live_verify_status(baseline, decided, bool(res.get("helps")),
                                      res["ci_low"], res["ci_high"], min_gain=min_gain)
    if status == 0 and baseline and not compared(res):
        return 0, ("still holds: only the two baselines could be tried (no window "
                   "reaches the program's kernels)"
                   + (", as when advised" if plan.get("speedup") is None else
                      "; advise compared arms, so the program's buffers are out of reach now: "
                      "run advise again to see why"))
    if status == 0:
        return 0, (f"still holds: no other plan tried helps (the best: {nums}; a gain "
                   f"counts from {need:g}x)"
                   if baseline else f"still holds: the plan gives {nums}")
    if status == 1:
        return 1, (f"no longer holds: another plan now helps ({_winner_text(r)}: {nums}); run "
                   f"advise again" if baseline else
                   f"no longer holds: the plan gives {nums}, below the least gain that "
                   f"counts ({need:g}x); run advise again")
    if not compared(res):
        return 3, ("inconclusive: the program ended before the check reached a verdict; run it "
                   "for longer than --budget")
    todo = (f"the check reached its cap of {res.get('confirm_rounds', 0)} rounds: {CAP_SAID}"
            if res.get("capped") else "a longer --budget narrows it")
    return 3, (f"inconclusive: {nums}: the interval reaches both above and below {need:g}x "
               f"(the least gain that counts), so it neither helps nor fails yet; {todo}")


def _winner_text(r: dict) -> str:
    from ..process.report import _arm_text
    w, arms = r["result"].get("winner", -1), r.get("arms") or []
    return _arm_text(arms[w]) if 0 <= w < len(arms) else "a plan tried"


def verify_main(argv: list[str]) -> int:
    args, command, rc = _parse(argv, "verify", plan=True)
    if args is None:
        return rc
    prog_rc, r = _watch(args, command, "verify")
    if r is None or not r.get("result"):
        print(f"l2persist verify: {_nothing_measured(r, prog_rc, args)}", file=sys.stderr)
    else:
        _extras(args, r)
    if prog_rc:
        print(f"l2persist verify: the program exited with {prog_rc}", file=sys.stderr)
    status, line = verify_outcome(r, args.plan_doc, args.min_gain)
    print(f"l2persist verify: {line}", file=sys.stderr)
    return status


def apply_main(argv: list[str]) -> int:
    opts, command = _split(list(argv))
    if not command and len(opts) == 1 and not opts[0].startswith("-"):
        # No program: how a launcher that starts the program itself applies the plan. The
        # plan is checked first, as when apply starts the program.
        from ..process.live import load_plan
        try:
            load_plan(opts[0])
        except ValueError as e:
            return fail(f"{_prog()} apply", str(e))
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


#: What the watcher was doing when the program ended without a result (its state), in words,
#: and what to do about it.
_ENDED = {
    "idle": ("before l2persist saw a point where it can switch plans (a CUDA graph replay, "
             "a synchronize, or l2persist.mark())",
             "check that the program runs its CUDA work on this GPU, and let it run longer"),
    "warmup": ("in the first {warmup:g} s of watching (the warm-up, before any plan is "
               "tried)", "run it longer, or lower --warmup"),
    "probe": ("while l2persist was still finding the buffers its kernels read, before any "
              "plan was tried", "run it longer"),
    "search": ("before the search had a result", "run it longer, or lower --budget"),
    "off": ("after watching stopped", "see the note for why"),
}


def _nothing_measured(r, prog_rc, args) -> str:
    """Why a watched run gave no result, and what to do: one line, no internal names."""
    if r is None:
        return (f"the program (exit {prog_rc}) ended and l2persist wrote nothing: the "
                f"watcher did not start in it (is it a Python program, with l2persist "
                f"importable?)")
    state = r.get("ended_in") or r.get("state")     # finish turns the phase under way "done"
    ended, todo = _ENDED.get(state, ("without a result", "see the note"))
    if state == "probe" and r.get("empty_probes"):
        ended = (f"while l2persist waited for its kernels: {r['empty_probes']} probe(s) "
                 f"recorded none (its work had not begun, or its kernels never reach "
                 f"CUDA's activity records)")
        todo = "run it longer; a program whose kernels are never recorded cannot be advised"
    notes = "; ".join(n.splitlines()[0] for n in r.get("notes", []) if n)
    if not notes and "note" in todo:   # nothing noted to point at
        todo = "run it again with --json PATH and report the file"
    return (f"the program (exit {prog_rc}) ended "
            f"{ended.format(warmup=getattr(args, 'warmup', 0))}"
            + (f" (l2persist noted: {notes})" if notes else "") + f": {todo}")


#: What a confirmation that ran to its cap undecided says of the gain.
CAP_SAID = "a gain this small is within what the program's blocks vary by"


def _undecided(r, args) -> str:
    """Why advise did not decide, and what would decide it."""
    from ..process.report import undecided_reason
    res = r["result"]
    kind, why = undecided_reason(r)
    if kind == "stopped":
        return f"undecided: {why}; the plan written keeps the better baseline"
    if kind == "budget":
        why = f"the search used its --budget of {args.budget:g} s"
    if res.get("winner", -1) >= 0:
        why += (f" while the best plan tried measured {res['ci_low']:.4f}-"
                f"{res['ci_high']:.4f}x (95 %), which reaches both above and below "
                f"{1 + args.min_gain:g}x, the least gain that counts")
    todo = {"ended": "run the program for longer than --budget",
            "capped": (f"{CAP_SAID}; a larger --min-gain decides sooner" + (
                           ", and on several ranks see whether the ranks agree (the ranks' "
                           "notes above)" if r.get("ranks") else ""))
            }.get(kind, "a longer --budget would narrow it; a larger --min-gain decides sooner")
    return f"undecided: {why}: {todo}; the plan written keeps the better baseline"
