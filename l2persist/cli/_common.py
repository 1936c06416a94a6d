"""What every command shares: the name the user typed, one-line usage errors, and the
checks of --device and of the files a command will write (made before any work runs)."""

from __future__ import annotations

import argparse
import os
import sys


def prog() -> str:
    """The name the user typed: the `l2persist` console script, else `python -m l2persist`
    (run with -m, from -c, or from a harness that calls main())."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "l2persist" if name == "l2persist" else "python -m l2persist"


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (exit 2), not usage text plus the error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message}\n")


def fail(where: str, message: str) -> int:
    """A user's mistake: one line on stderr, exit status 2, no traceback."""
    print(f"{where}: {message}", file=sys.stderr)
    return 2


def device_problem(device: int | None, count: int) -> str | None:
    """Why `--device N` names no device here (None: it does, or it was not given). Without a
    GPU only 0, the default, is taken: the studies and checks that need no GPU ignore it. The
    one range check of --device (the report, `run` and `check`)."""
    if device is None or 0 <= device < max(count, 1):
        return None
    if count:
        return (f"--device {device}: expected a GPU index in [0, {count - 1}] (this machine "
                f"has {count} CUDA device(s))")
    return f"--device {device}: this machine has no CUDA device: only 0, the default, is taken"


def output_problem(option: str, path: str) -> str | None:
    """Why `path` cannot be written (None: it can), found before a study runs so that a typo
    never costs a finished sweep. The file is created (and removed again if it was not
    there): permission bits say yes to root where the file system says no (/sys)."""
    if not path:
        return f"{option}: the path is empty; give a file name"
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
    existed = os.path.exists(full)
    if existed and not os.path.isfile(full):
        return None  # /dev/null, a pipe: opening one to try it could block
    try:
        with open(full, "a"):  # appending nothing: an existing file keeps its contents
            pass
    except OSError as e:
        return f"{option} {path}: cannot be written here ({e.strerror or e})"
    if not existed:
        try:
            os.remove(full)
        except OSError:
            pass
    return None


def no_device_problem(device: int | None) -> str | None:
    """Why a command that needs a GPU cannot start here (None: it can): no usable CUDA device,
    with the driver's reason in the words the L2 report gives (the core's
    l2p_no_device_reason, the one probe), or a --device beyond the devices there are."""
    from .. import _core
    count = _core.device_count()
    if count:
        return device_problem(device, count)
    why = _core.no_device_reason()
    return "no usable CUDA device" + (f": {why[2]} ({why[1]})" if why else "")
