"""The studies behind l2persist as runnable experiments: one module per study on one runner.

    >>> import l2persist.studies as S
    >>> S.list_studies()                     # name, title, whether it needs a GPU
    >>> r = S.run("gather", device=0)        # Results: records + metadata
    >>> r.table(); r.plot("gather.png"); r.to_json("gather.json")

From a shell: ``python -m l2persist list`` and ``python -m l2persist run STUDY [--quick]``.

A study module defines ``TITLE``, ``NEEDS_GPU``, ``SOURCE`` (what the source study claimed)
and ``run(ctx) -> Results``. It declares its axes through ``ctx.sweep`` (a record per point,
progress on stderr) and builds its Results through ``ctx.results`` (metadata included).
"""

from __future__ import annotations

import importlib
import itertools
import sys
import time
from dataclasses import dataclass

from .. import _core
from ..results import PlotSpec, Results, collect_metadata

# name -> module, in the order `list` shows them
_MODULES = {
    "guide-example": "guide_example", "persistence": "persistence", "gather": "gather",
    "granularity": "granularity", "coalescing": "coalescing", "bandwidth": "bandwidth",
    "hints": "hints", "tune": "tune",
}


def study_names() -> list[str]:
    """The names `run` accepts, in the order `list` shows them."""
    return list(_MODULES)


def _module(name: str):
    if name not in _MODULES:
        raise ValueError(f"study: {name!r} is not one of {', '.join(_MODULES)}")
    return importlib.import_module(f"{__name__}.{_MODULES[name]}")


@dataclass(frozen=True)
class StudyInfo:
    name: str
    title: str
    needs_gpu: bool
    source: str


def list_studies() -> list[StudyInfo]:
    """Every study: its name, title, whether it needs a GPU, and its source."""
    out = []
    for name in _MODULES:
        m = _module(name)
        out.append(StudyInfo(name, m.TITLE, m.NEEDS_GPU, m.SOURCE))
    return out


class Context:
    """What a study's run() gets: the device, the mode, progress, and the record builder."""

    def __init__(self, study: str, device, quick: bool, progress: bool | None):
        self.study = study
        self.device = device
        self.quick = quick
        self.progress = progress
        self.meta = collect_metadata(device)
        self.t0 = time.perf_counter()

    def sweep(self, axes: dict, fn, *, desc: str | None = None) -> list[dict]:
        """Call ``fn(**point)`` for every point of the product of ``axes`` (name -> values);
        each call returns a dict (or a list of dicts) merged with the point into records.
        Progress goes to stderr: a bar on a terminal, nothing when piped (tqdm)."""
        names = list(axes)
        points = list(itertools.product(*(axes[n] for n in names)))
        records = []
        with _progress(len(points), desc or self.study, self.progress) as bar:
            for values in points:
                point = dict(zip(names, values))
                out = fn(**point)
                for rec in out if isinstance(out, list) else [out]:
                    records.append({**point, **rec})
                bar.update(1)
        return records

    def results(self, records, *, columns=None, plot: PlotSpec | None = None, notes=(),
                summary=None) -> Results:
        meta = dict(self.meta, quick=self.quick,
                    wall_s=round(time.perf_counter() - self.t0, 3))
        if self.device is not None:
            meta["persisting_l2_limit_after"] = self.device.persisting_l2_limit
        return Results(self.study, list(records), meta, columns=columns, plot_spec=plot,
                       notes=list(notes), summary=dict(summary or {}))


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n):
        pass


def _progress(total: int, desc: str, enabled: bool | None):
    """tqdm on stderr; None: only when stderr is a terminal."""
    if enabled is False:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    disable = None if enabled is None else False  # tqdm: None disables on a non-TTY
    return tqdm(total=total, desc=desc, file=sys.stderr, disable=disable, leave=False,
                unit="pt")


class GpuRequired(RuntimeError):
    """The study needs a CUDA device and none can be used."""


def run(name: str, device=0, *, quick: bool = False, progress: bool | None = None) -> Results:
    """Run one study and return its Results. ``quick`` runs a smaller sweep (seconds).
    The persisting-L2 limit is restored afterwards whatever the study did."""
    mod = _module(name)
    dev = None
    if mod.NEEDS_GPU or _core.device_count() > 0:
        if _core.device_count() == 0:
            from .. import no_device_reason
            raise GpuRequired(f"the {name} study needs a CUDA GPU and none can be used "
                              f"({no_device_reason()}); studies that run anywhere: "
                              + ", ".join(s.name for s in list_studies() if not s.needs_gpu))
        from .. import Device
        dev = device if isinstance(device, Device) else Device(device)
    ctx = Context(name, dev, quick, progress)
    if dev is None:
        return mod.run(ctx)
    limit = dev.persisting_l2_limit
    try:
        return mod.run(ctx)
    finally:
        dev.persisting_l2_limit = limit
        _core.reset_persisting_l2(dev.index)


__all__ = ["Context", "GpuRequired", "StudyInfo", "list_studies", "run", "study_names"]
