"""The command line: ``python -m l2persist`` and the ``l2persist`` script.

    python -m l2persist [--device N] [--json]  the L2 report of every GPU (or of GPU N)
    python -m l2persist list                   the studies, and which need a GPU
    python -m l2persist run STUDY [...]        one study: its table, findings, JSON/CSV/plot
    python -m l2persist check [--device N]     is a persisting-L2 set-aside in force here?
    python -m l2persist advise [...] -- CMD    watch a program and find a plan for it
    python -m l2persist apply PLAN -- CMD      run a program with a saved plan applied
    python -m l2persist verify PLAN -- CMD     does a saved plan still help? (exit 0 / 1)

Each command lives in its own module and is imported when it runs: the report and the studies
work without the live advisor's dependencies, and `advise`/`apply`/`verify` are
l2persist.cli.live's."""

from __future__ import annotations

import importlib
import sys

from ._common import fail, prog
from .report import device_report, format_no_gpu, format_table, no_gpu_report

#: command -> (module in this package, its entry point, what it does). Each entry point
#: takes the arguments after the command and returns the exit status.
COMMANDS = {
    "list": ("studies", "list_main", "the studies, and which need a GPU"),
    "run": ("studies", "run_main", "run one study: its table, findings and outputs"),
    "check": ("check", "main", "is a persisting-L2 set-aside in force for this process?"),
    "advise": ("live", "advise_main", "watch a program (advise [options] -- COMMAND ...) and "
                                      "find a plan for it"),
    "apply": ("live", "apply_main", "run a program with a saved plan applied"),
    "verify": ("live", "verify_main", "check that a saved plan still helps a program"),
}


def _description() -> str:
    width = max(map(len, COMMANDS))
    return ("The L2 report of every GPU (or of --device N). Without a GPU it says so, shows\n"
            "what needs no GPU, and exits 0 (2 with --require-gpu).\n\ncommands:\n"
            + "\n".join(f"  {name:<{width}}  {what}" for name, (_, _, what) in COMMANDS.items()))


def main(argv: list[str] | None = None) -> int:
    """Entry point of both `python -m l2persist` and the `l2persist` console script. A reader
    that leaves early (`| head`) ends the output quietly."""
    try:
        return _dispatch(sys.argv[1:] if argv is None else list(argv))
    except BrokenPipeError:
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        from . import report
        return report.main(argv, _description())
    if argv[0] not in COMMANDS:
        return fail(prog(), f"unknown command {argv[0]!r}; the commands: "
                            f"{', '.join(COMMANDS)} (none: the L2 report)")
    module, entry, _ = COMMANDS[argv[0]]
    run = getattr(importlib.import_module(f"{__name__}.{module}"), entry)
    return run(argv[1:])


__all__ = ["COMMANDS", "device_report", "format_no_gpu", "format_table", "main",
           "no_gpu_report"]
