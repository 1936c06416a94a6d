"""The studies behind l2persist as runnable experiments: one module per study on one runner.

    >>> import l2persist.studies as S
    >>> S.list_studies()                     # name, title, whether it needs a GPU
    >>> r = S.run("gather", device=0)        # Results: records + metadata
    >>> r.table(); r.plot("gather.png"); r.to_json("gather.json")

From a shell: ``python -m l2persist list`` and ``python -m l2persist run STUDY [--quick]``.

A study is one module. It must define ``TITLE``, ``NEEDS_GPU``, ``SOURCE`` (what the source
study claimed) and ``run(ctx) -> Results``: it sweeps its declared axes (``axes`` below)
through ``ctx.sweep`` (a record per point, progress on stderr), times through
``ctx.measure`` (repeats until the spread is small, keeps q1/q3, computes bandwidth and % of
peak from the bytes a point moves) and builds its Results through ``ctx.results`` (metadata
included).

It may also define, and then the runner, the notebooks and the README use them:

- ``NEEDS``: what it cannot run without, from ``NEED_NAMES`` (default: ``("gpu",)`` when
  ``NEEDS_GPU``); a missing need makes ``run`` raise ``Unavailable`` with the reason.
- ``ROW``: the README's "what it runs" cell; ``INTRO`` and ``WHY``: the notebook's prose.
- ``findings(res) -> list[str]``: the findings, computed from ``res.records`` / ``res.meta``
  / ``res.summary`` only, so the same text comes from a live run and from stored results.
- ``axes(ctx) -> {axis: values}``: the sweep axes, declared before the study runs (values
  may depend on ``ctx.quick`` and ``ctx.device``); every study that sweeps something declares
  them, and its run() takes its sweep from ``ctx.axes`` (``ctx.sweep`` refuses an axis or a
  value not declared). ``run(only=...)`` and the CLI's ``--only`` are checked against them
  before any work; a study without ``axes`` sweeps nothing and refuses any ``only``. An axis
  is named as the records' field of that name, and the table's column of it is headed by
  that name (a unit may follow in parentheses). Values are named by their labels
  (``axis_labels``): text and numbers as written; a label holds no comma (``--only`` splits
  values at commas).
- ``COLUMNS``: the table's (field, header) pairs; stored results are shown with them too.
- ``plot_spec(res) -> PlotSpec`` and ``derive(records)`` (adds presentation columns); a
  ``plot_spec`` that cannot draw a part of the sweep raises ValueError saying why in words.
- ``bars(res) -> list[(text, met)]``: requirements; an unmet one makes the CLI exit 1.
- ``NOTEBOOK``: whether it has a notebook (default: when it has ``INTRO``; its results must
  then be stored in notebooks/results/ from a GPU run); ``NOTEBOOK_CELLS``: extra code cells.
"""

from __future__ import annotations

import importlib
import itertools
import shutil
import sys
import time
import warnings
from dataclasses import dataclass

from .. import _core
from ..process.cupy import cupy_stream  # noqa: F401 - its old home (studies import it here)
from ..results import PlotSpec, Results, collect_metadata

# name -> module, in the order `list` shows them
_MODULES = {
    "guide-example": "guide_example", "persistence": "persistence", "gather": "gather",
    "granularity": "granularity", "coalescing": "coalescing", "bandwidth": "bandwidth",
    "hints": "hints", "tune": "tune",
    # the benchmarks (no notebook; their bars make `run` exit 1 when unmet)
    "launch-overhead": "launch_overhead", "timing-agreement": "timing_agreement",
    "model-vs-hardware": "model_vs_hardware", "counter-tables": "counter_tables",
    "foreign-workloads": "foreign_workloads", "tune-grid": "tune_grid",
    "set-aside-counters": "set_aside_counters",
    # whole-step persistence: other libraries' workloads x sizes / L2
    "atlas": "atlas",
    # what a set-aside costs the rest of the process
    "set-aside-tax": "set_aside_tax",
    # one plan for a whole process
    "advisor": "advisor",
    # a running program watched, never called: advise / verify / apply -- COMMAND
    "live": "live",
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
    needs: tuple = ()
    row: str = ""  # the README's "what it runs"
    intro: str = ""  # the notebook's prose before the results
    why: str = ""  # and after the findings


def info(name: str) -> StudyInfo:
    """One study's metadata, declared once in its module."""
    m = _module(name)
    return StudyInfo(name, m.TITLE, m.NEEDS_GPU, m.SOURCE, needs(m),
                     getattr(m, "ROW", m.TITLE), getattr(m, "INTRO", ""), getattr(m, "WHY", ""))


def notebook_cells(name: str) -> list:
    """Extra code cells the study's notebook runs after its findings (NOTEBOOK_CELLS)."""
    return list(getattr(_module(name), "NOTEBOOK_CELLS", []))


def notebook_file(name: str) -> str | None:
    """The study's notebook under notebooks/ (01_guide_example.ipynb: its place among the
    studies that have one, its name with underscores), or None (NOTEBOOK = False: the
    benchmarks, whose results are their bars)."""
    books = [n for n in _MODULES if _has_notebook(_module(n))]
    if name not in books:
        _module(name)  # an unknown name raises
        return None
    return f"{books.index(name) + 1:02d}_{name.replace('-', '_')}.ipynb"


def _has_notebook(mod) -> bool:
    """NOTEBOOK when declared; otherwise a study with notebook prose (INTRO) has one."""
    return bool(getattr(mod, "NOTEBOOK", hasattr(mod, "INTRO")))


def readme_table() -> str:
    """The README's study table, generated from the study modules (tests check it is current)."""
    rows = ["| study | what it runs | needs | notebook |", "| --- | --- | --- | --- |"]
    for s in list_studies():
        book = notebook_file(s.name)
        rows.append(f"| `{s.name}` | {s.row} | {', '.join(s.needs) or 'nothing'} | "
                    + (f"[`{book[:2]}`](notebooks/{book})" if book else "-") + " |")
    return "\n".join(rows)


def list_studies() -> list[StudyInfo]:
    """Every study: its name, title, needs, source and prose."""
    return [info(name) for name in _MODULES]


# ---- needs: what a study cannot run without, each with the reason it is missing ----

def _missing_gpu():
    if _core.device_count() == 0:
        from .. import no_device_reason
        return f"it needs a CUDA GPU and none can be used ({no_device_reason()})"
    return None


def _missing_module(module: str, pip: str):
    def check():
        try:
            importlib.import_module(module)
        except ImportError as e:
            return f"it needs {module} ({e}; pip install {pip})"
        return None
    return check


def _missing_counters():
    from .. import counters_available
    ok, why = counters_available()
    return None if ok else f"it needs the performance counters ({why})"


def _missing_ncu():
    return None if shutil.which("ncu") else "it needs Nsight Compute's ncu on PATH"


_NEED_CHECKS = {"gpu": _missing_gpu, "counters": _missing_counters,
                "cupy": _missing_module("cupy", "cupy-cuda12x"),
                "torch": _missing_module("torch", "torch"),
                "cuda.core": _missing_module("cuda.core", "cuda-core"), "ncu": _missing_ncu}
NEED_NAMES = tuple(_NEED_CHECKS)


def needs(mod) -> tuple:
    declared = tuple(getattr(mod, "NEEDS", ("gpu",) if mod.NEEDS_GPU else ()))
    unknown = [n for n in declared if n not in _NEED_CHECKS]
    if unknown:
        raise ValueError(f"{mod.__name__}.NEEDS: {unknown} not among {NEED_NAMES}")
    return declared


def missing(need: str) -> str | None:
    """Why ``need`` (one of NEED_NAMES) is not met here, or None when it is."""
    if need not in _NEED_CHECKS:
        raise ValueError(f"need: {need!r} is not one of {', '.join(NEED_NAMES)}")
    if need == "counters" and _missing_gpu():
        return _missing_gpu()
    return _NEED_CHECKS[need]()


class Context:
    """What a study's run() gets: the device, the mode, progress, and the record builder."""

    # ctx.measure's defaults: repeat until IQR / median is under NOISE, at most ROUNDS rounds
    NOISE = 0.02
    ROUNDS = 4

    def __init__(self, study: str, device, quick: bool, progress: bool | None,
                 only: dict | None = None):
        self.study = study
        self.device = device
        self.quick = quick
        self.progress = progress
        self.meta = collect_metadata(device)
        self.t0 = time.perf_counter()
        self.skipped = []  # (what, why): parts of the study left out for a missing need
        # axis -> the values to keep (text, as on the command line); sweeps leave out the rest
        self.only = _only_text(only)
        self.axes = None  # axis -> values: the study's axes(ctx), once declared
        self._labels = {}  # axis -> the labels of its values, in order
        self._consulted = set()  # the axes a sweep (or values()) has asked about
        if self.only:
            self.meta["only"] = dict(self.only)

    def declare(self, axes: dict) -> None:
        """The study's axes (its ``axes(ctx)``; ``{}`` when it sweeps nothing): ``only`` is
        checked against them now, before any work. A wrong axis or value is a ValueError
        naming the axes and their values by label; an axis without values, or a label that
        ``--only`` could not name (a comma, spaces at its ends, two values with one label),
        is the study's mistake: RuntimeError."""
        if not isinstance(axes, dict):
            raise RuntimeError(f"the {self.study} study's axes() returned "
                               f"{type(axes).__name__}, not a dict axis -> values")
        declared, labels = {}, {}
        for name, values in axes.items():
            values = list(values)
            if not isinstance(name, str) or not values:
                raise RuntimeError(f"the {self.study} study's axes(): {name!r} needs a text "
                                   "name and at least one value")
            labs = axis_labels(values)
            odd = [lab for i, lab in enumerate(labs)
                   if "," in lab or lab != lab.strip() or lab.endswith(f" #{i}")]
            if odd:
                raise RuntimeError(f"the {self.study} study's axis {name!r}: the value labelled "
                                   f"{odd[0]!r} cannot be named after --only {name}= (values "
                                   "are split at commas and stripped; labels must differ)")
            declared[name], labels[name] = values, labs
        self.axes, self._labels = declared, labels
        for axis, wanted in self.only.items():
            if axis not in declared:
                raise ValueError(self._no_such_axis(axis))
            unknown = [w for w in wanted if not any(_same(v, lab, w) for v, lab in
                                                    zip(declared[axis], labels[axis]))]
            if unknown:
                raise ValueError(f"only {axis}={','.join(wanted)}: {unknown[0]!r} is not one "
                                 f"of the {self.study} study's {axis} values"
                                 f"{' (quick)' if self.quick else ''}: "
                                 + ", ".join(labels[axis]))

    def values(self, axis: str) -> list:
        """The declared values of ``axis`` that this run keeps: all of them, or those
        ``only`` names (in the declared order)."""
        if self.axes is None or axis not in self.axes:
            raise RuntimeError(self._undeclared(axis))
        self._consulted.add(axis)
        values = self.axes[axis]
        if axis not in self.only:
            return list(values)
        return [v for v, lab in zip(values, self._labels[axis])
                if any(_same(v, lab, w) for w in self.only[axis])]

    def _undeclared(self, axis: str) -> str:
        if self.axes is None:
            return (f"the {self.study} study sweeps {axis!r} before its axes were declared "
                    "(ctx.declare(axes(ctx)); studies.run does it)")
        return (f"the {self.study} study sweeps {axis!r}, which its axes() does not declare"
                + (f" ({', '.join(self.axes)})" if self.axes else " (it declares none)"))

    def unconsulted(self) -> list:
        """The axes ``only`` names that no sweep of this run asked about (so --only did not
        narrow them): empty when the study took its sweep from its axes."""
        return [a for a in self.only if a not in self._consulted]

    def has(self, need: str, what: str = "") -> bool:
        """Whether ``need`` is met; when not, the part ``what`` is recorded as skipped."""
        why = missing(need)
        if why is not None:
            self.skipped.append((what or need, why))
        return why is None

    def measure(self, fn, *, stream, bytes_moved: int | None = None, repeat: int | None = None,
                warmup: int = 3, noise: float | None = None, max_samples: int | None = None,
                **benchmark_kw) -> dict:
        """Time ``fn`` (l2persist.benchmark) in rounds of ``repeat`` samples until the spread
        (IQR / median) is under ``noise`` (default NOISE) or ``max_samples`` were taken
        (default ROUNDS rounds, 2 in quick mode). Returns the record
        fields: ms (median), q1_ms, q3_ms, iqr_rel, samples, and with ``bytes_moved``:
        bytes_moved, tbs (at the median) and pct_of_peak (of the device's DRAM peak)."""
        from ..timing import benchmark
        repeat = repeat or (7 if self.quick else 15)
        noise = self.NOISE if noise is None else noise
        cap = max(repeat, max_samples or (2 if self.quick else self.ROUNDS) * repeat)
        samples = []
        while True:
            t = benchmark(fn, stream=stream, warmup=warmup if not samples else 1,
                          repeat=min(repeat, cap - len(samples)), **benchmark_kw)
            samples += t.samples
            st = _core.stats(samples, noise=noise)  # the stopping rule is the core's
            if st["settled"] or len(samples) >= cap:
                break
        out = {"ms": st["median"], "q1_ms": st["q1"], "q3_ms": st["q3"],
               "iqr_rel": st["iqr"] / st["median"] if st["median"] else 0.0,
               "samples": len(samples)}
        if bytes_moved is not None:
            bw = bytes_moved / (st["median"] * 1e-3)
            out.update(bytes_moved=bytes_moved, tbs=bw / 1e12)
            peak = self.device.properties.peak_memory_bandwidth if self.device else 0
            out["pct_of_peak"] = 100.0 * bw / peak if peak else None
        return out

    def sweep(self, axes: dict, fn, *, desc: str | None = None) -> list[dict]:
        """Call ``fn(**point)`` for every point of the product of ``axes`` (name -> values,
        each a declared axis and values among its declared ones: all of ``ctx.axes``, or a
        part) that ``only`` keeps; each call returns a dict (or a list of dicts) merged with
        the point into records. Progress goes to stderr: a bar on a terminal, nothing when
        piped (tqdm)."""
        names = list(axes)
        kept = {}
        for n in names:
            keep = self.values(n)
            declared = self.axes[n]
            stray = [v for v in axes[n] if not any(v == d for d in declared)]
            if stray:
                raise RuntimeError(f"the {self.study} study sweeps {n}={stray[0]!r}, which its "
                                   f"axes() does not declare for {n}")
            kept[n] = [v for v in axes[n] if any(v == k for k in keep)]
        points = list(itertools.product(*(kept[n] for n in names)))
        records = []
        with _progress(len(points), desc or self.study, self.progress) as bar:
            for values in points:
                point = dict(zip(names, values))
                out = fn(**point)
                for rec in out if isinstance(out, list) else [out]:
                    records.append({**point, **rec})
                bar.update(1)
        return records

    def _no_such_axis(self, axis: str) -> str:
        head = f"only {axis}={','.join(self.only[axis])}: "
        if not self.axes:
            return (head + f"the {self.study} study has no axes to pick from: it runs as one "
                    "measurement (leave out --only)")
        return (head + f"the {self.study} study sweeps no such axis; its axes: "
                + "; ".join(f"{n} ({', '.join(labs)})" for n, labs in self._labels.items()))

    def results(self, records, *, columns=None, plot: PlotSpec | None = None, notes=(),
                summary=None) -> Results:
        meta = dict(self.meta, quick=self.quick,
                    wall_s=round(time.perf_counter() - self.t0, 3))
        if self.device is not None:
            meta["persisting_l2_limit_after"] = self.device.persisting_l2_limit
        return Results(self.study, list(records), meta, columns=columns, plot_spec=plot,
                       notes=list(notes), summary=dict(summary or {}))


def _only_text(only) -> dict:
    """``only`` as axis -> [text]: one value or a list of values (text or numbers) per axis."""
    if only is None:
        return {}
    if not isinstance(only, dict):
        raise TypeError(f"only: expected a dict axis -> values, got {type(only).__name__}")
    out = {}
    for axis, vs in only.items():
        if not isinstance(axis, str):
            raise TypeError(f"only: axis names are text, got {type(axis).__name__} {axis!r}")
        vs = [vs] if isinstance(vs, (str, int, float)) else vs
        if not isinstance(vs, (list, tuple, set, frozenset)) or not all(
                isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in vs):
            raise TypeError(f"only: {axis!r} takes a value or a list of values (text or "
                            f"numbers), got {type(vs).__name__} {vs!r}")
        if not vs:
            raise ValueError(f"only: {axis!r} has no values; give at least one")
        out[axis] = [str(v) for v in vs]
    return out


_SCALARS = (str, int, float, bool, type(None))


def axis_labels(values: list) -> list:
    """The words naming each value of a sweep axis (what ``only`` / ``--only`` match and error
    messages list): text and numbers as written; a tuple by its leading text, or, where that
    is not unique, by all its text and numbers; otherwise a ``label`` or ``name`` attribute."""
    def lead(v):
        if isinstance(v, _SCALARS):
            return str(v)
        if isinstance(v, (tuple, list)) and v and isinstance(v[0], str):
            return v[0]
        for attr in ("label", "name"):
            if isinstance(getattr(v, attr, None), str):
                return getattr(v, attr)
        return type(v).__name__

    def whole(v):
        if isinstance(v, (tuple, list)):
            return " ".join(str(x) for x in v if isinstance(x, _SCALARS) and x is not None)
        return lead(v)

    for name in (lead, whole):
        labels = [name(v) for v in values]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{lab} #{i}" for i, lab in enumerate(labels)]


def _same(value, label: str, text: str) -> bool:
    """An axis value asked for as text: its label, or equal as a number."""
    if label == text or str(value) == text:
        return True
    try:
        return float(value) == float(text)
    except (TypeError, ValueError):
        return False


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


class Unavailable(RuntimeError):
    """The study cannot run here: a need (GPU, counters, CuPy, PyTorch, ...) is missing."""


GpuRequired = Unavailable  # the name studies and the CLI used before needs were declared


def run(name: str, device=0, *, quick: bool = False, progress: bool | None = None,
        only: dict | None = None) -> Results:
    """Run one study and return its Results. ``quick`` runs a smaller sweep (seconds);
    ``only`` ({axis: [values]}) keeps only those values of the study's sweep axes (a part of
    a long study; ValueError names an axis or a value the study does not have).
    The persisting-L2 limit is restored afterwards whatever the study did. Raises
    Unavailable, with the reason, when a need the study declares is missing here."""
    mod = _module(name)
    for need in needs(mod):
        why = missing(need)
        if why is not None:
            anywhere = [s.name for s in list_studies() if not s.needs]
            raise Unavailable(f"the {name} study cannot run here: {why}"
                              + ("; studies that run anywhere: " + ", ".join(anywhere)
                                 if need == "gpu" else ""))
    dev = None
    if mod.NEEDS_GPU or _core.device_count() > 0:
        from .. import Device
        dev = device if isinstance(device, Device) else Device(device)
    ctx = Context(name, dev, quick, progress, only)
    # a wrong --only fails here, before any work; a study without axes sweeps nothing
    ctx.declare(mod.axes(ctx) if hasattr(mod, "axes") else {})
    if dev is None:
        return _finished(refresh(mod.run(ctx), ctx), ctx)
    limit = dev.persisting_l2_limit
    try:
        return _finished(refresh(mod.run(ctx), ctx), ctx)
    finally:
        _core.restore_persisting_l2(dev, limit)  # the one restore (restore.c)


def _finished(res: Results, ctx: Context) -> Results:
    """An --only axis the run never asked about narrowed nothing: the notes say so (the run's
    records are kept; the study's tests should have caught it)."""
    for axis in ctx.unconsulted():
        why = (f"--only {axis}= was not applied: the {ctx.study} study declares the axis but "
               "its run did not sweep it")
        warnings.warn(why, RuntimeWarning, stacklevel=3)
        res.notes.insert(0, why)
    return res


def refresh(res: Results, ctx: Context | None = None) -> Results:
    """Recompute what a study derives from its records (presentation columns, findings, plot,
    bars) with the study's own functions: a live run and stored results read the same."""
    if res.study not in _MODULES:
        return res
    mod = _module(res.study)
    partial = res.meta.get("only")
    if hasattr(mod, "COLUMNS"):
        res.columns = list(mod.COLUMNS)
    if hasattr(mod, "derive"):
        _derived(partial, "presentation columns", lambda: mod.derive(res.records), None)
    if hasattr(mod, "findings"):
        res.notes = _derived(partial, "findings", lambda: list(mod.findings(res)), [])
    if partial:
        res.notes.insert(0, "a part of the sweep (only " + "; ".join(
            f"{k}={','.join(v)}" for k, v in partial.items()) + ")")
    if ctx is not None and ctx.skipped:
        skipped = list(dict.fromkeys(ctx.skipped))  # a part skipped at several points: once
        res.notes += [f"skipped {what}: {why}" for what, why in skipped]
        res.summary["skipped"] = [list(x) for x in skipped]
    if hasattr(mod, "plot_spec"):
        res.plot_spec, res.plot_missing = _plot(partial, mod, res)
    if hasattr(mod, "bars"):
        res.bars = _derived(partial, "bars", lambda: [{"bar": text, "met": bool(met)}
                                                      for text, met in mod.bars(res)], [])
    return res


# what a study's findings, plot or bars raise on records that lack a part of the sweep
_PART_ERRORS = (KeyError, IndexError, TypeError, ZeroDivisionError, StopIteration)


def _plot(partial, mod, res):
    """(plot spec, None), or on a part of the sweep that cannot be drawn (None, why in words):
    the study's ValueError says why; any other failure means records the plot needs are not
    in this part."""
    if not partial:
        return mod.plot_spec(res), None
    part = "; ".join(f"{k}={','.join(v)}" for k, v in partial.items())
    try:
        return mod.plot_spec(res), None
    except ValueError as e:
        why = str(e)
    except _PART_ERRORS:
        why = "the plot needs records this part of the sweep does not have"
    return None, (f"left out for this part of the sweep (--only {part}): {why}; the whole sweep "
                  "draws it")


def _derived(partial, what: str, make, empty):
    """A study's findings, plot or bars; on a part of its sweep (``--only``) they may need
    records that are not there, and are then left out rather than failing the run."""
    if not partial:
        return make()
    try:
        return make()
    except (ValueError, *_PART_ERRORS) as e:
        warnings.warn(f"{what} left out: they need the whole sweep ({type(e).__name__}: {e})",
                      RuntimeWarning, stacklevel=3)
        return empty


def derive_columns(res: Results) -> Results:
    """Add the presentation columns a study derives from its records (its ``derive``: the
    columns its stored plot names, e.g. set-aside-tax's ``access``), as ``refresh`` does,
    without recomputing findings, plot or bars. ``Results.load`` calls it, so a stored
    study plots as ``studies.load`` draws it. Records that lack what ``derive`` reads (a
    file edited by hand, a part of a sweep) are left as they are: the plot then names the
    missing column."""
    if res.study in _MODULES:
        mod = _module(res.study)
        if hasattr(mod, "derive"):
            try:
                mod.derive(res.records)
            except _PART_ERRORS:
                pass
    return res


def load(path) -> Results:
    """Stored results (Results.load), with findings and plot from the study's current code."""
    return refresh(Results.load(path))


def merge(paths) -> Results:
    """Parts of one study's sweep run separately (``run --only``, one device) as one Results,
    with findings, plot and bars from the study's current code."""
    return refresh(Results.merge(paths))


__all__ = ["Context", "GpuRequired", "NEED_NAMES", "StudyInfo", "Unavailable", "axis_labels",
           "cupy_stream", "info",
           "derive_columns", "list_studies", "load", "merge", "missing", "notebook_cells",
           "notebook_file", "readme_table", "refresh", "run", "study_names"]
