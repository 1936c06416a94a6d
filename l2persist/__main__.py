"""python -m l2persist: the L2 report of every GPU (or of --device N).

Without a GPU it says so, with the runtime's reason, shows what needs no GPU, and exits 0
(2 with --require-gpu).

    python -m l2persist list                 the studies, and which need a GPU
    python -m l2persist run STUDY [--device N] [--quick] [--json PATH] [--csv PATH]
                                  [--plot PATH] [--only AXIS=V[,V...]]
    python -m l2persist check [...]          the persisting-L2 state check (l2persist.state)"""

from __future__ import annotations

import argparse
import json
import sys

from . import _core
from ._format import human_bytes
from .state import check_device as _check_device


def device_report(index: int) -> dict:
    """Everything l2persist knows about one device's L2, as plain data."""
    dev = _core.Device(index)
    report = dev.properties.as_dict()
    report["persisting_l2_limit"] = dev.persisting_l2_limit
    report["default_persisting_l2_limit"] = dev.default_persisting_l2_limit
    report["supports_persisting_l2"] = dev.supports_persisting_l2
    report["persisting_l2_granule"] = dev.persisting_l2_granule if report[
        "supports_persisting_l2"] else None
    report["mps"] = dev.mps
    report["persisting_l2_source"] = dev.persisting_l2_source
    report["mps_server_percentage"] = dev.mps_server_percentage
    report["guide_set_aside"] = _core.default_set_aside(
        report["l2_cache_size"], report["persisting_l2_cache_max_size"])
    return report


def no_gpu_report() -> dict:
    """What needs no GPU: versions and the policy arithmetic."""
    why = _core.no_device_reason()
    example = _core.plan_hit_ratios([16384, 16384], [1, 1], 16384)
    return {
        "devices": 0,
        "reason": None if why is None else {"code": why[0], "name": why[1], "description": why[2]},
        "l2persist_version": _version(),
        "cuda_runtime": "%d.%d" % _core.runtime_version(),
        "driver_supports": None if _core.driver_version() is None else
        "%d.%d" % _core.driver_version(),
        "guide_sharing_example": {
            "set_aside": 16384,
            "windows": [{"num_bytes": n, "hit_ratio": r} for n, r in example],
        },
    }


def _version() -> str:
    from . import __version__
    return __version__


_ROWS = [
    ("name", "name"), ("compute_capability", "compute capability"),
    ("multiprocessor_count", "SMs"), ("l2_cache_size", "L2 cache"),
    ("persisting_l2_cache_max_size", "persisting L2 max"),
    ("persisting_l2_limit", "persisting L2 limit (now)"),
    ("persisting_l2_source", "set-aside decided by"),
    ("default_persisting_l2_limit", "persisting L2 limit (default)"),
    ("guide_set_aside", "guide's set-aside min(0.75 L2, max)"),
    ("persisting_l2_granule", "set-aside granule"),
    ("access_policy_max_window_size", "max access policy window"),
    ("supports_persisting_l2", "persisting L2 supported"),
    ("mps", "MPS client"),
    ("mps_server_percentage", "MPS server's L2 percentage"),
    ("global_l1_cache_supported", "global loads cached in L1"),
    ("total_memory", "global memory"), ("memory_bus_width", "memory bus (bits)"),
    ("memory_clock_khz", "memory clock (kHz)"), ("peak_memory_bandwidth", "peak bandwidth"),
    ("pci_bus_id", "PCI bus id"),
]


def _cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key == "compute_capability":
        return "%d.%d" % tuple(value)
    if key == "persisting_l2_source":
        return {"process": "this process (cudaDeviceSetLimit)",
                "mps-server": "the MPS server, fixed at its start",
                "mps-server-unknown": "the MPS server (its setting could not be read; the "
                                      "limit shown is this client's reading)"}.get(value, value)
    if key == "mps_server_percentage":
        return f"{value:g} %"
    if key == "peak_memory_bandwidth":
        return f"{value / 1e12:.2f} TB/s"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and (key.endswith(("size", "limit", "memory", "granule",
                                                 "set_aside"))):
        return f"{human_bytes(value)} ({value})"
    return str(value)


def format_table(reports: list[dict]) -> str:
    width = max(len(label) for _, label in _ROWS)
    lines = []
    for r in reports:
        lines.append(f"GPU {r['index']}")
        lines += [f"  {label:<{width}}  {_cell(key, r.get(key))}" for key, label in _ROWS]
    return "\n".join(lines)


def format_no_gpu(info: dict) -> str:
    reason = info["reason"]
    # The reason's words come from the C core (l2p_no_device_reason), as NoDeviceError's.
    why = f": {reason['description']} ({reason['name']})." if reason else "."
    lines = [
        "No CUDA device was found" + why,
        "Without a GPU, l2persist can still show:",
        f"  l2persist {info['l2persist_version']}, built with CUDA runtime "
        f"{info['cuda_runtime']}; driver supports CUDA: {info['driver_supports'] or 'no driver'}",
        "  The guide's set-aside sharing (two 16 KiB windows on a 16 KiB set-aside):",
    ]
    lines += [f"    window {i}: num_bytes={w['num_bytes']}, hit_ratio={w['hit_ratio']:.2f}"
              for i, w in enumerate(info["guide_sharing_example"]["windows"])]
    return "\n".join(lines)


def _prog() -> str:
    """The name the user typed: `python -m l2persist` or the console script's own name."""
    import os
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m l2persist" if name in ("", "__main__.py", "-c") else name


def main(argv: list[str] | None = None) -> int:
    """Entry point of both `python -m l2persist` and the `l2persist` console script. A reader
    that leaves early (`| head`) ends the report quietly."""
    try:
        return _main(argv)
    except BrokenPipeError:
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (exit 2), not usage text plus the error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message}\n")


def _fail(prog: str, message: str) -> int:
    """A user's mistake: one line on stderr, exit status 2, no traceback."""
    print(f"{prog}: {message}", file=sys.stderr)
    return 2


def _check_output(option: str, path: str) -> str | None:
    """Why `path` cannot be written (None: it can); checked before a study runs so that a
    typo never costs a finished sweep."""
    import os
    full = os.path.abspath(os.path.expanduser(path))
    parent = os.path.dirname(full)
    if os.path.isdir(full):
        return f"{option} {path}: is a directory; give a file name"
    if not os.path.isdir(parent):
        return f"{option} {path}: the directory {parent} does not exist"
    if os.path.exists(full) and not os.access(full, os.W_OK):
        return f"{option} {path}: the file is not writable"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{option} {path}: the directory {parent} is not writable"
    return None


def _check_plot(path: str) -> str | None:
    """Why `--plot path` cannot be drawn here: no matplotlib, or a suffix it cannot write."""
    import os
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


def _list(argv: list[str]) -> int:
    p = _Parser(prog=f"{_prog()} list", description="List the studies.")
    p.parse_args(argv)
    from .studies import list_studies
    have_gpu = _core.device_count() > 0
    rows = [(s.name, ("needs a GPU" if s.needs_gpu else "runs anywhere")
             + ("" if have_gpu or not s.needs_gpu else " (none here)"), s.title)
            for s in list_studies()]
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    for name, need, title in rows:
        print(f"{name:<{w0}}  {need:<{w1}}  {title}")
    return 0


def _save(res, args) -> list[str]:
    """Write what was asked; a write that fails after the checks (disk full, a directory
    removed meanwhile) still keeps the records: they go to a temporary JSON file."""
    import tempfile
    saved = []
    for path, write in ((args.json, res.to_json), (args.csv, res.to_csv),
                        (args.plot, res.plot)):
        if not path:
            continue
        try:
            write(path)
            saved.append(path)
        except ValueError as e:  # no plot (none declared, or none for this part): say why
            print(f"{_prog()} run {res.study}: {e}", file=sys.stderr)
        except OSError as e:
            fd, keep = tempfile.mkstemp(prefix=f"l2persist-{res.study}-", suffix=".json")
            with open(fd, "w") as f:
                f.write(res.to_json())
            raise SystemExit(f"{_prog()} run {res.study}: could not write {path} ({e.strerror or e}); "
                             f"the records are kept in {keep}") from None
    return saved


def _run(argv: list[str]) -> int:
    from .studies import GpuRequired, run, study_names
    prog = f"{_prog()} run"
    p = _Parser(prog=prog, description=(
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
    args = p.parse_args(argv)
    only = {}
    for item in args.only:
        axis, eq, values = item.partition("=")
        if not eq or not axis or not values:
            return _fail(prog, f"--only {item!r}: expected AXIS=VALUE[,VALUE...]")
        only.setdefault(axis.strip(), []).extend(v.strip() for v in values.split(","))
    if args.study not in study_names():
        return _fail(prog, f"unknown study {args.study!r}; the studies: "
                           + ", ".join(study_names()))
    problems = [_check_output(opt, path) for opt, path in
                (("--json", args.json), ("--csv", args.csv), ("--plot", args.plot)) if path]
    if args.plot:
        problems.append(_check_plot(args.plot))
    problems = [x for x in problems if x]
    if problems:
        return _fail(prog, problems[0])
    problem = _check_device(args.device, _core.device_count())
    if problem:
        return _fail(prog, problem)
    try:
        res = run(args.study, args.device, quick=args.quick,
                  progress=False if args.no_progress else None, only=only or None)
    except ValueError as e:
        if not only or not str(e).startswith("only "):
            raise
        return _fail(f"{prog} {args.study}", "--" + str(e))
    except GpuRequired as e:
        return _fail(f"{prog} {args.study}", str(e))
    except _core.NotSupportedError as e:  # e.g. a set-aside study on an MPS client or MIG
        return _fail(f"{prog} {args.study}", f"this device cannot run it: {e}")
    print(res.header())
    print()
    print(res.table())
    saved = _save(res, args)
    if saved:
        print("\nwrote " + ", ".join(saved))
    unmet = res.unmet_bars()
    if unmet:
        print(f"{prog} {args.study}: bar not met: {unmet[0]}", file=sys.stderr)
        return 1
    return 0


def _check(argv: list[str]) -> int:
    """`check`: the persisting-state check, written in l2persist.state (imported lazily: the
    report and the studies work without it)."""
    try:
        from .state import check_main
    except ModuleNotFoundError as e:
        if e.name not in ("l2persist.state", f"{__package__}.state"):
            raise
        return _fail(f"{_prog()} check", "this l2persist has no state checker "
                                         "(l2persist.state.check_main is missing)")
    return check_main(argv)


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "list":
        return _list(argv[1:])
    if argv and argv[0] == "run":
        return _run(argv[1:])
    if argv and argv[0] == "check":
        return _check(argv[1:])
    p = _Parser(prog=_prog(), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    p.add_argument("--device", type=int, default=None, help="report only this GPU index")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--require-gpu", action="store_true",
                   help="exit with status 2 when no GPU is found")
    args = p.parse_args(argv)

    from .coalescing import format_study_table, study_table

    count = _core.device_count()
    if _check_device(args.device, count):
        p.error(_check_device(args.device, count))
    if count == 0:
        info = no_gpu_report()
        info["coalescing_study"] = study_table()
        print(json.dumps(info, indent=2) if args.json else
              format_no_gpu(info) + "\n\nThe L1/L2 study under the coalescing model "
              "(l2persist.coalescing):\n" + format_study_table(info["coalescing_study"]))
        return 2 if args.require_gpu else 0
    indices = [args.device] if args.device is not None else list(range(count))
    reports = [device_report(i) for i in indices]
    if args.json:
        print(json.dumps({"devices": count, "reports": reports,
                          "coalescing_study": study_table()}, indent=2))
    else:
        print(format_table(reports))
        print("\nThe L1/L2 study under the coalescing model (l2persist.coalescing):")
        print(format_study_table())
    return 0


__all__ = ["device_report", "no_gpu_report", "format_table", "format_no_gpu", "main"]

if __name__ == "__main__":
    sys.exit(main())
