"""L2 state hygiene: snapshots of what a process has changed in the L2's persisting setup,
a context that turns persistence off for benchmarks, and the check a benchmark harness runs
first.

    >>> before = l2persist.l2_state(0)
    >>> ...                                  # code under test
    >>> before == l2persist.l2_state(0)      # or: print(before.diff(l2persist.l2_state(0)))

    >>> with l2persist.persisting_l2_disabled(0):   # limit 0, persisting lines reset
    ...     time_my_kernels()                       # the previous limit comes back after

A snapshot holds the persisting limit, where the set-aside comes from (this process or an
MPS server, with the server's percentage) and the access policy windows l2persist knows of:
the windows on every open l2persist ``Stream`` (including wrapped CuPy / PyTorch streams)
and on the default streams, read back from the driver. Windows on graph kernel nodes belong
to their graphs and die with them; windows given to single launches never outlive the launch.

The set-aside belongs to the CUDA context that sets it: a snapshot (and the check) sees this
process's, never another process's (which does not tax this process's work either); under
MPS every client gets the server's.

The snapshot function is replaceable (``set_snapshot_source``) so the pytest guard can be
tested without a GPU.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from . import _core
from ._format import human_bytes

PERCENT_VAR = "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT"


@dataclass(frozen=True)
class L2State:
    """One device's persisting-L2 state. Snapshots compare with ``==``; ``diff`` says what
    changed in words."""

    device: int
    persisting_limit: int | None
    default_limit: int | None   # the limit this process found at its first use of the device
    source: str | None          # 'process', 'mps-server' or 'mps-server-unknown'
    mps: bool | None
    mps_server_percentage: float | None
    # ((where, base_ptr, num_bytes, hit_ratio, hit_prop, miss_prop), ...)
    windows: tuple = ()

    def diff(self, other: "L2State") -> list[str]:
        """What changed from this snapshot to ``other``, one line per change."""
        out = []
        for name in ("device", "persisting_limit", "default_limit", "source", "mps",
                     "mps_server_percentage"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                out.append(f"{name.replace('_', ' ')}: {_show(name, a)} -> {_show(name, b)}")
        mine, theirs = dict(_by_place(self.windows)), dict(_by_place(other.windows))
        for where in sorted(set(mine) | set(theirs)):
            a, b = mine.get(where), theirs.get(where)
            if a == b:
                continue
            if a is None:
                out.append(f"window added on {where}: {_show_window(b)}")
            elif b is None:
                out.append(f"window removed from {where}: {_show_window(a)}")
            else:
                out.append(f"window on {where}: {_show_window(a)} -> {_show_window(b)}")
        return out


def _show(name, v):
    return human_bytes(v) if name.endswith("limit") and isinstance(v, int) else repr(v)


def _by_place(windows):
    return [(w[0], tuple(w[1:])) for w in windows]


def _show_window(w) -> str:
    base, n, ratio, hit, miss = w
    return (f"{human_bytes(n)} at {base:#x}, hitRatio {ratio:g}, hit {_prop(hit)}, "
            f"miss {_prop(miss)}")


def _prop(value: int) -> str:
    try:
        return _core.AccessProperty(value).name
    except ValueError:
        return str(value)


def _window_row(where: str, w) -> tuple:
    return (where, int(w.base_ptr), int(w.num_bytes), float(w.hit_ratio),
            int(w.hit_prop), int(w.miss_prop))


def _default_stream_windows(index: int) -> list:
    """Windows on the legacy and per-thread default streams of device ``index``."""
    rows = []
    for handle, name in ((1, "the legacy default stream"), (2, "the per-thread default stream")):
        try:
            # an int alone would be a device index; device= says whose default stream it is,
            # whichever device is current
            with _core.Stream(wrap=handle, device=index) as s:
                w = s.access_policy_window
        except (_core.CudaError, _core.NotSupportedError, ValueError, TypeError):
            continue  # the runtime cannot read it here: nothing to compare
        if w is not None:
            rows.append(_window_row(name, w))
    return rows


def _stream_windows(index: int) -> list:
    """Windows on every open l2persist Stream of device ``index`` (the core lists them: a
    Stream is listed from when it opens until it closes or dies, so none is missed)."""
    rows = []
    for obj in _core.open_streams():
        try:
            if obj.device.index != index:
                continue
            w = obj.access_policy_window
        except (_core.CudaError, _core.NotSupportedError, ValueError):
            continue  # a stream of a reset context: it holds no window any more
        if w is not None:
            rows.append(_window_row(f"stream {obj.handle:#x}", w))
    return rows


def _read(device) -> L2State:
    """The real snapshot: from the driver and l2persist's own objects."""
    dev = device if isinstance(device, _core.Device) else _core.Device(device)
    windows = _stream_windows(dev.index) + _default_stream_windows(dev.index)
    return L2State(device=dev.index, persisting_limit=dev.persisting_l2_limit,
                   default_limit=dev.default_persisting_l2_limit,
                   source=dev.persisting_l2_source, mps=dev.mps,
                   mps_server_percentage=dev.mps_server_percentage,
                   windows=tuple(sorted(set(windows))))


_source = _read


def set_snapshot_source(fn):
    """Replace what ``l2_state`` reads (``fn(device) -> L2State``); None puts the driver
    back. Returns the previous source. For tests of code that checks state."""
    global _source
    previous = _source
    _source = _read if fn is None else fn
    return previous


def l2_state(device=0) -> L2State:
    """A snapshot of ``device``'s persisting-L2 state (see the module docstring)."""
    return _source(device)


@contextlib.contextmanager
def persisting_l2_disabled(device=0):
    """Benchmark without persistence: limit 0 and persisting lines reset inside; the previous
    limit restored (and lines reset) after, also when an exception passes through. Under MPS
    the set-aside is the server's and cannot be turned off: NotSupportedError."""
    dev = device if isinstance(device, _core.Device) else _core.Device(device)
    with dev.persisting_l2(0):
        dev.reset_persisting_l2()
        yield dev


# ---- python -m l2persist check ----

def _scope(dev) -> str:
    """What the check can see on ``dev``, in words: this process's CUDA context, the
    percentage variable in this environment and the MPS server (a set-aside belongs to the
    context that sets it: measured, another process holding the maximum did not slow this
    process's writes)."""
    pct = os.environ.get(PERCENT_VAR)
    env = (f"{PERCENT_VAR}={pct} in this environment" if pct is not None
           else f"{PERCENT_VAR} not set here")
    if dev.persisting_l2_source != "process" or dev.mps:
        p = dev.mps_server_percentage
        mps = ("an MPS server whose set-aside every client gets"
               + (f" ({p:g} % when it started)" if p is not None else ""))
    else:
        mps = "no MPS server" if dev.mps is False else "no MPS server known"
    return (f"seen from this process's CUDA context; {env}; {mps}. A set-aside belongs to "
            "the context that sets it: a fresh process never sees another process's limit, "
            "and another process's set-aside does not tax this one")


def verdict(dev) -> tuple[bool, str]:
    """(clean, one line) for one device (a Device): the verdict, then what it was seen
    from. The `check` command prints these."""
    clean, line = _limit_verdict(dev)
    return clean, f"{line} ({_scope(dev)})"


def _limit_verdict(dev) -> tuple[bool, str]:
    """(clean, the verdict) for one device."""
    limit = dev.persisting_l2_limit
    name = f"GPU {dev.index} ({dev.properties.name})"
    if dev.persisting_l2_source != "process":
        pct = dev.mps_server_percentage
        if pct is not None and limit != 0:
            return False, (f"{name}: the MPS server sets aside {human_bytes(limit)} of L2 "
                           f"({PERCENT_VAR}={pct:g}) for every client; writes of other work "
                           f"slow down (see l2persist.tax)")
    pct = os.environ.get(PERCENT_VAR)
    if pct is not None and limit != 0:
        return False, (f"{name}: {PERCENT_VAR}={pct} in the environment sets aside "
                       f"{human_bytes(limit)} of L2 in every process that inherits it")
    if limit not in (0, dev.default_persisting_l2_limit):
        return False, (f"{name}: the persisting-L2 set-aside is {human_bytes(limit)}, not 0 "
                       f"or the default {human_bytes(dev.default_persisting_l2_limit)}")
    return True, f"{name}: set-aside {human_bytes(limit)} (0 or the default)"


def check_main(argv=None) -> int:
    """``python -m l2persist check [--device N]`` (l2persist.cli.check): exit 1 with one line
    per device whose set-aside is neither 0 nor the default, 0 with one line otherwise (also
    without a GPU). Each line says what it was seen from: this process's CUDA context, the
    CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT of this environment and the MPS
    server. A set-aside belongs to the context that sets it, so run as its own process the
    check sees the driver's default, an MPS server's set-aside or the variable, never another
    process's limit (which does not tax other processes); called inside a harness
    (``check_main``) it sees that process's own limit."""
    from .cli.check import main
    return main(argv)


__all__ = ["L2State", "PERCENT_VAR", "check_main", "l2_state", "persisting_l2_disabled",
           "set_snapshot_source", "verdict"]
