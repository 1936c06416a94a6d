"""`list` and `run`: the studies, and one study run with its outputs checked before it runs."""

from __future__ import annotations

import os
import sys

from .. import _core
from ._common import Parser, device_problem, fail, output_problem, prog


def list_main(argv: list[str]) -> int:
    p = Parser(prog=f"{prog()} list", description="List the studies.")
    p.parse_args(argv)
    from ..studies import list_studies
    have_gpu = _core.device_count() > 0
    rows = [(s.name, ("needs a GPU" if s.needs_gpu else "runs anywhere")
             + ("" if have_gpu or not s.needs_gpu else " (none here)"), s.title)
            for s in list_studies()]
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    for name, need, title in rows:
        print(f"{name:<{w0}}  {need:<{w1}}  {title}")
    return 0


def _plot_problem(path: str) -> str | None:
    """Why `--plot path` cannot be drawn here: no matplotlib, or a suffix it cannot write."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return (f"--plot {path}: drawing needs matplotlib, which is not installed "
                "(pip install 'l2persist[plot]', or leave out --plot)")
    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    if suffix not in kinds:
        return (f"--plot {path}: unknown image format {suffix or '(no suffix)'!r}; "
                f"use one of {', '.join('.' + k for k in sorted(kinds))}")
    return None


def _save(res, args) -> list[str]:
    """Write what was asked; a write that fails after the checks (disk full, a directory
    removed meanwhile) still keeps the records: they go to a temporary JSON file."""
    import tempfile
    saved = []
    for path, write in ((args.json, res.to_json), (args.csv, res.to_csv),
                        (args.plot, res.plot)):
        if path is None:
            continue
        try:
            write(path)
            saved.append(path)
        except ValueError as e:  # no plot (none declared, or none for this part): say why
            print(f"{prog()} run {res.study}: {e}", file=sys.stderr)
        except OSError as e:
            fd, keep = tempfile.mkstemp(prefix=f"l2persist-{res.study}-", suffix=".json")
            with open(fd, "w") as f:
                f.write(res.to_json())
            raise SystemExit(f"{prog()} run {res.study}: could not write {path} "
                             f"({e.strerror or e}); the records are kept in {keep}") from None
    return saved


def _only(items: list[str]) -> dict | str:
    """--only AXIS=V[,V...] (repeatable) as {axis: [values]}, or the problem in words."""
    only = {}
    for item in items:
        axis, eq, values = item.partition("=")
        if not eq or not axis or not values:
            return f"--only {item!r}: expected AXIS=VALUE[,VALUE...]"
        only.setdefault(axis.strip(), []).extend(v.strip() for v in values.split(","))
    return only


def _parser():
    from ..studies import study_names
    p = Parser(prog=f"{prog()} run", description=(
        "Run one study: print its table and findings; save its records and metadata (JSON, "
        "CSV) and its plot. Progress goes to stderr when it is a terminal. Exit status: 0 "
        "done, 1 a bar the study checks is not met, 2 a usage error or a study this machine "
        "cannot run."))
    p.add_argument("study", help="one of: " + ", ".join(study_names()))
    p.add_argument("--device", type=int, default=0, help="GPU index (default 0)")
    p.add_argument("--quick", action="store_true", help="a smaller sweep (seconds)")
    p.add_argument("--json", metavar="PATH", help="write records + metadata as JSON")
    p.add_argument("--csv", metavar="PATH", help="write the records as CSV")
    p.add_argument("--plot", metavar="PATH", help="save the plot (PNG, SVG, PDF: by suffix)")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.add_argument("--only", metavar="AXIS=V[,V...]", action="append", default=[],
                   help="keep only these values of one of the study's sweep axes, named "
                        "as the table's columns (repeatable), e.g. --only "
                        "workload=histogram,bloom; a wrong axis or value is refused before "
                        "the study runs, with the study's axes and values")
    return p


def _before_running(args) -> str | None:
    """The first reason the run would fail after its work (an output it cannot write, a
    plot it cannot draw, a device not here), or None."""
    problems = [output_problem(opt, path) for opt, path in
                (("--json", args.json), ("--csv", args.csv), ("--plot", args.plot))
                if path is not None]
    if args.plot:
        problems.append(_plot_problem(args.plot))
    problems.append(device_problem(args.device, _core.device_count()))
    return next((x for x in problems if x), None)


def run_main(argv: list[str]) -> int:
    from ..studies import GpuRequired, run, study_names
    where = f"{prog()} run"
    args = _parser().parse_args(argv)
    only = _only(args.only)
    if isinstance(only, str):
        return fail(where, only)
    if args.study not in study_names():
        return fail(where, f"unknown study {args.study!r}; the studies: "
                           + ", ".join(study_names()))
    problem = _before_running(args)
    if problem:
        return fail(where, problem)
    try:
        res = run(args.study, args.device, quick=args.quick,
                  progress=False if args.no_progress else None, only=only or None)
    except ValueError as e:
        if not only or not str(e).startswith("only "):
            raise
        return fail(f"{where} {args.study}", "--" + str(e))
    except GpuRequired as e:
        return fail(f"{where} {args.study}", str(e))
    except _core.NotSupportedError as e:  # e.g. a set-aside study on an MPS client or MIG
        return fail(f"{where} {args.study}", f"this device cannot run it: {e}")
    print(res.header())
    print()
    print(res.table())
    saved = _save(res, args)
    if saved:
        print("\nwrote " + ", ".join(saved))
    unmet = res.unmet_bars()
    if unmet:
        print(f"{where} {args.study}: bar not met: {unmet[0]}", file=sys.stderr)
        return 1
    return 0
