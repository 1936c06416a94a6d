"""Hardware counters of any Python region, through CUPTI's Range Profiler (in C).

``measure(fn, metrics)`` runs ``fn`` once per pass the metrics need (user replay), so ``fn``
must be repeatable: each call should do the same work from the same starting state.

Cache state: starting a CUPTI pass invalidates the L2 (measured on an H200: a read right
after a warming read done before the pass hit 0 sectors). So ``fn`` starts with a cold L2
unless a ``warmup`` callable is given: it runs inside each pass but outside the measured
range, so its work is not counted and the caches it fills are what ``fn`` finds. (With
``per_kernel=True`` every launch is a range, so ``warmup`` runs before the pass and the L2
is cold.) Persisting lines behave the same way, so persistence shows within a region.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
from collections.abc import Mapping

from . import _core

_FRIENDLY = {name: metric for name, metric, _ in _core.counter_friendly()}
DEFAULT_METRICS = ("gpu_time_ns", "l2_hit_rate", "l2_read_sectors", "l2_read_hit_sectors",
                   "dram_bytes_read", "dram_bytes_write")


class Counters(Mapping):
    """Metric values of one range, by the names they were asked for (friendly or raw)."""

    def __init__(self, values: dict, *, name: str = "region", passes: int = 0):
        self._values = dict(values)
        self.name = name
        self.passes = passes

    def __getitem__(self, key):
        if key in self._values:
            return self._values[key]
        raw = _FRIENDLY.get(key, key)
        for k, v in self._values.items():
            if _FRIENDLY.get(k, k) == raw:
                return v
        raise KeyError(key)

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        body = ", ".join(f"{k}={v:.6g}" for k, v in self._values.items())
        return f"Counters({self.name!r}, {body})"

    def as_dict(self) -> dict:
        return dict(self._values)


def wheel_cupti() -> str | None:
    """The path of CUPTI from NVIDIA's PyPI wheel (``nvidia-cuda-cupti``: ``nvidia/cu13/lib``),
    or None. An install with only a driver gets CUPTI that way, and no loader path names it."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "cu12", "cuda_cupti"):
            lib = os.path.join(root, sub, "lib")
            if not os.path.isdir(lib):
                continue
            for name in sorted(os.listdir(lib), reverse=True):
                if name.startswith("libcupti.so"):
                    return os.path.join(lib, name)
    return None


def _point_at_wheel_cupti() -> None:
    """Before the core first loads CUPTI: name the wheel's library in L2P_CUPTI_LIBRARY (the
    core's loader reads it first), unless the user set it. Only where a wheel provides one."""
    if "L2P_CUPTI_LIBRARY" not in os.environ:
        path = wheel_cupti()
        if path:
            os.environ["L2P_CUPTI_LIBRARY"] = path


def counter_names(device=None, *, raw: bool = False) -> dict | list:
    """The friendly names and the raw metrics they stand for; with ``raw=True`` the chip's
    base metric names from CUPTI (needs a GPU; append ``.sum``, ``.avg``, ``.pct``...).

    ``device``: whose chip (an index or ``Device``; None: the current one), used only with
    ``raw=True``."""
    if raw:
        _point_at_wheel_cupti()
        return sorted(_core.base_metrics(device))
    return dict(_FRIENDLY)


def counters_available() -> tuple[bool, str]:
    """(True, '') where libcupti loads, else (False, why)."""
    _point_at_wheel_cupti()
    return _core.counters_available()


def _explain_unknown(err: ValueError, device) -> ValueError:
    text = str(err)
    if "is not a metric" not in text:
        return err
    bad = text.split("'")[1]
    try:
        known = list(_FRIENDLY) + [f"{b}.sum" for b in _core.base_metrics(device)]
    except Exception:  # noqa: BLE001 - the suggestion list is a courtesy
        known = list(_FRIENDLY)
    close = difflib.get_close_matches(bad, known, n=5, cutoff=0.5)
    hint = f"; closest known names: {', '.join(close)}" if close else ""
    return ValueError(text + hint)


def measure(fn, metrics=None, *, device=None, warmup=None, per_kernel: bool = False,
            max_ranges: int = 256):
    """Counters of ``fn()``: a ``Counters`` mapping, or with ``per_kernel=True`` a list of
    them, one per kernel launch (named after the kernel).

    ``fn`` is called once per CUPTI pass (a metric set may need several). ``metrics``:
    friendly names (``counter_names()``) or raw metric names, one name or a list (None: the
    default set). ``device``: an index or ``Device`` (None: the current one). ``warmup``: a
    callable run before each pass, outside the measured range (e.g. an L2 flush).
    ``max_ranges``: the most kernels one pass records, in [1, 100000]."""
    names = list(DEFAULT_METRICS if metrics is None else
                 ([metrics] if isinstance(metrics, str) else metrics))
    _point_at_wheel_cupti()
    try:
        out = _core.measure(fn, names, device=device, warmup=warmup, per_kernel=per_kernel,
                            max_ranges=max_ranges)
    except ValueError as e:
        raise _explain_unknown(e, device) from None
    ranges = [Counters(dict(zip(names, values)), name=name, passes=out["passes"])
              for name, values in out["ranges"]]
    if per_kernel:
        return ranges
    if not ranges:
        raise RuntimeError("counters: CUPTI returned no range for the region")
    return ranges[0]

__all__ = ["DEFAULT_METRICS", "Counters", "counter_names", "counters_available", "measure",
           "wheel_cupti"]
