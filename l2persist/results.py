"""Results of a study: tidy records (one dict per measured point) plus the metadata that makes
them citable (device, versions, L2 sizes, the persisting limit before and after, date,
l2persist version and git revision). Saved as JSON and loaded back into the same object, so
a table or a plot can be redrawn on a machine without a GPU."""

from __future__ import annotations

import csv
import datetime as _dt
import html
import io
import json
import os
import subprocess
from dataclasses import dataclass, field

from . import _core
from ._format import cell_text, json_kind, markdown_table, read_json, save_json

FORMAT = 1  # version of the JSON layout


def _git_revision() -> str | None:
    """The checkout's revision; L2P_GIT_REVISION wins (a copy of the tree whose .git is not
    the one it came from, as on a lent GPU machine, is told the revision by the caller)."""
    if os.environ.get("L2P_GIT_REVISION"):
        return os.environ["L2P_GIT_REVISION"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.exists(os.path.join(root, ".git")):
        return None
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip()
    return (rev + ("+dirty" if dirty else "")) if rev else None


def collect_metadata(device=None) -> dict:
    """What a reader needs to judge a result: where, with what, when."""
    from . import __version__
    meta = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "l2persist_version": __version__,
        "git_revision": _git_revision(),
        "cuda_runtime": "%d.%d" % _core.runtime_version(),
        "driver_supports": None if _core.driver_version() is None
        else "%d.%d" % _core.driver_version(),
    }
    if device is not None:
        p = device.properties
        meta.update({
            "device_index": device.index, "device_name": p.name,
            "compute_capability": "%d.%d" % p.compute_capability,
            "multiprocessor_count": p.multiprocessor_count, "l2_cache_size": p.l2_cache_size,
            "persisting_l2_cache_max_size": p.persisting_l2_cache_max_size,
            "access_policy_max_window_size": p.access_policy_max_window_size,
            "persisting_l2_limit_before": device.persisting_l2_limit,
            "default_persisting_l2_limit": device.default_persisting_l2_limit,
        })
    return meta


@dataclass
class PlotSpec:
    """How a study's records are drawn: y columns against x, one series per hue value.

    ``labels`` maps raw names (hue values, y columns) to the words a legend shows.
    ``interval`` names two columns (low, high) drawn as an error bar at each point.
    ``hline`` draws a reference line (1.0 where speedups are drawn; ``hline_label`` names it in
    the legend, e.g. the series the others are divided by); ``vlines`` maps x values
    to the words written beside a vertical line there. ``facet`` draws one panel per value of
    that column (``facet_titles`` names them), ``facet_cols`` panels to a row. Series get
    distinct markers and line styles, so that one lying on another stays visible, and a series
    with the same values as an earlier one says so in the legend. Titles wrap to the figure.

    A heatmap draws ``hue`` values as rows (bottom to top when they are numbers), ``x`` values
    as columns and ``y[0]`` as the colour, on one colour scale for all panels: ``cmap`` and
    ``vrange`` ([low, high], None for the data's) choose it; otherwise it is centred on
    ``hline``. ``curve`` is a list of [x, row value] points drawn over every panel as a line
    (``curve_label`` in the legend), at data positions between the cells."""

    x: str
    y: list
    hue: str | None = None
    logx: bool = False
    logy: bool = False
    xlabel: str = ""
    ylabel: str = ""
    kind: str = "line"  # "line", "scatter" (points only), "bar" or "heatmap"
    title: str = ""
    where: dict | None = None  # draw only records whose values match (a list: any of)
    labels: dict | None = None
    interval: list | None = None
    hline: float | None = None
    vlines: dict | None = None
    facet: str | None = None
    facet_titles: dict | None = None
    interval_label: str = "95 % interval"
    facet_cols: int | None = None
    cmap: str | None = None
    vrange: list | None = None
    curve: list | None = None
    curve_label: str = ""
    xlim: list | None = None
    hline_label: str = ""

    def __post_init__(self):
        # a layout read from a file is checked here as one a study declares: a wrong type
        # would draw nothing, or characters of a name as columns
        _expect("x", self.x, str)
        if not isinstance(self.y, list) or not self.y or \
                not all(isinstance(c, str) for c in self.y):
            raise TypeError(f"y: expected a non-empty list of column names, got {self.y!r}")
        for name in ("hue", "facet"):
            _expect(name, getattr(self, name), (str, type(None)))
        if self.kind not in _KINDS:
            raise ValueError(f"kind: {self.kind!r} is not one of {', '.join(_KINDS)}")
        _expect("where", self.where, (dict, type(None)))
        if self.interval is not None and not (
                isinstance(self.interval, list) and len(self.interval) == 2
                and all(isinstance(c, str) for c in self.interval)):
            raise TypeError(f"interval: expected two column names [low, high], got "
                            f"{self.interval!r}")

    def as_dict(self) -> dict:
        return dict(self.__dict__)


_KINDS = ("line", "scatter", "bar", "heatmap")


def _expect(name: str, value, kinds) -> None:
    if not isinstance(value, kinds):
        raise TypeError(f"{name}: expected {_json_kind(kinds)}, got {json_kind(value)}")


@dataclass
class Results:
    """Records and metadata of one study run (see the module docstring)."""

    study: str
    records: list
    meta: dict = field(default_factory=dict)
    columns: list | None = None  # (key, header) pairs of the table; None: every key
    plot_spec: PlotSpec | None = None
    notes: list = field(default_factory=list)   # the findings, in words
    summary: dict = field(default_factory=dict)  # the headline numbers
    bars: list = field(default_factory=list)  # {"bar": what was required, "met": bool}
    # why plot_spec is None for a part of a sweep (set by studies.refresh; not saved)
    plot_missing: str | None = field(default=None, repr=False, compare=False)
    # the file it was loaded from, for messages (not saved)
    source: str | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def __getitem__(self, i):
        return self.records[i]

    # ---- serialisation ----
    def as_dict(self) -> dict:
        return {"format": FORMAT, "study": self.study, "meta": self.meta,
                "columns": [list(c) for c in self.columns] if self.columns else None,
                "plot": self.plot_spec.as_dict() if self.plot_spec else None,
                "notes": list(self.notes), "summary": self.summary, "bars": list(self.bars),
                "records": self.records}

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        return save_json(self.as_dict(), path, indent=1, default=_jsonable)

    @classmethod
    def from_json(cls, text_or_path) -> "Results":
        """Load what to_json wrote (a JSON string, or a path as str or os.PathLike). A file
        that is not a Results layout raises ValueError naming the file and the field."""
        d, where = read_json(text_or_path, what="an l2persist Results file")
        res = cls(**_fields(d, where), source=where)
        # a known study's presentation columns (those its stored plot names) are derived
        # from the records by the study's own code, not stored: add them as studies.load does
        from .studies import derive_columns
        return derive_columns(res)

    load = from_json

    @classmethod
    def merge(cls, parts) -> "Results":
        """One Results from parts of one study's sweep run separately on one device (``run
        --only``): records in order, the first part's metadata without its ``only``, the
        parts' wall times summed. ValueError when the parts are of other studies or devices."""
        parts = [p if isinstance(p, Results) else cls.load(p) for p in parts]
        if not parts:
            raise ValueError("parts: at least one Results is needed")
        first = parts[0]
        for p in parts[1:]:
            for key, a, b in (("study", first.study, p.study),
                              ("device", first.meta.get("device_name"),
                               p.meta.get("device_name"))):
                if a != b:
                    raise ValueError(f"parts: {key} {b!r} differs from the first part's {a!r}")
        meta = {k: v for k, v in first.meta.items() if k != "only"}
        meta["wall_s"] = round(sum(p.meta.get("wall_s") or 0.0 for p in parts), 3)
        meta["merged_parts"] = [p.meta.get("only") for p in parts]
        summary = dict(first.summary)
        return cls(first.study, [r for p in parts for r in p.records], meta,
                   columns=first.columns, summary=summary)

    def unmet_bars(self) -> list:
        """The bars this run checked and did not meet (the CLI exits 1 when there are any)."""
        return [b["bar"] for b in self.bars if not b["met"]]


    def keys(self) -> list:
        keys = []
        for r in self.records:
            keys += [k for k in r if k not in keys]
        return keys

    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=self.keys(), extrasaction="ignore")
        w.writeheader()
        for r in self.records:
            w.writerow({k: _jsonable(v) if isinstance(v, (list, dict, tuple)) else v
                        for k, v in r.items()})
        if path is not None:
            with open(path, "w", newline="") as f:
                f.write(buf.getvalue())
        return buf.getvalue()

    def to_pandas(self):
        """A DataFrame of the records (pandas is optional: ImportError says how to get it)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("to_pandas needs pandas: pip install pandas") from e
        df = pd.DataFrame.from_records(self.records)
        df.attrs.update(self.meta)
        return df

    # ---- presentation ----
    def _columns(self) -> list:
        return list(self.columns) if self.columns else [(k, k) for k in self.keys()]

    def table(self) -> str:
        """The records as a markdown table, then the notes ("(no records)" when there are
        none)."""
        out = [markdown_table(self.records, self._columns()) if self.records else "(no records)"]
        return "\n".join(out + ([""] + [f"- {n}" for n in self.notes] if self.notes else []))

    def header(self) -> str:
        m = self.meta
        where = (f"{m['device_name']} (cc {m['compute_capability']}, L2 "
                 f"{m['l2_cache_size'] >> 20} MiB)" if "device_name" in m else "no GPU")
        driver = (f"driver supports CUDA {m['driver_supports']}" if m.get("driver_supports")
                  else "no NVIDIA driver")
        return (f"{self.study}: {where}; CUDA runtime {m.get('cuda_runtime')}, {driver}; "
                f"l2persist {m.get('l2persist_version')} "
                f"({m.get('git_revision') or 'no git'}); {m.get('date')}")

    def stored_note(self, reason: str | None = None) -> str:
        """What a notebook drawn from stored results says first: that it was drawn from them,
        and the GPU, driver, CUDA runtime, l2persist revision and date they were measured
        with; ``reason``: why this machine could not run the study live."""
        m = self.meta
        gpu = (f"{m['device_name']} (compute capability {m.get('compute_capability')}, L2 "
               f"{m['l2_cache_size'] >> 20} MiB)" if "device_name" in m else "no GPU")
        driver = (f"a driver supporting CUDA {m['driver_supports']}" if m.get("driver_supports")
                  else "no NVIDIA driver")
        rev = m.get("git_revision") or "an unknown revision"
        return (f"Drawn from stored results: the {self.study} study as measured on {gpu} with "
                f"{driver}, CUDA runtime {m.get('cuda_runtime')}, l2persist "
                f"{m.get('l2persist_version')} at revision {rev}, on "
                f"{str(m.get('date', '?'))[:10]}; the findings and the plot are recomputed from "
                "those records by this l2persist."
                + (f" This machine has no usable CUDA GPU: {reason}." if reason else ""))

    def __repr__(self) -> str:
        return f"<Results {self.study}: {len(self.records)} records; {self.header()}>"

    def _repr_html_(self) -> str:
        cols = self._columns()
        head = "".join(f"<th>{html.escape(h)}</th>" for _, h in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(cell_text(r.get(k, '')))}</td>"
                                        for k, _ in cols) + "</tr>" for r in self.records)
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<p><b>{html.escape(self.header())}</b></p><table><tr>{head}</tr>{body}"
                f"</table>" + (f"<ul>{notes}</ul>" if notes else ""))

    def plot(self, path: str | os.PathLike | None = None, ax=None):
        """Draw the study's plot (matplotlib, the [plot] extra); save it when path is given.
        Returns the Figure."""
        if self.plot_spec is None:
            raise ValueError(f"plot: {self.plot_missing}" if self.plot_missing else
                             f"plot: the {self.study} study declares no plot")
        problem = _plot_problem(self.plot_spec, self.records, self._selected(self.plot_spec))
        if problem:  # said before matplotlib draws an empty or misleading figure
            raise ValueError(f"plot{' of ' + self.source if self.source else ''}: {problem}"
                             + _notes_said(self.notes if self.records else ()))
        try:
            import matplotlib
            if path is not None and ax is None and not _interactive():
                matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("plot needs matplotlib: pip install 'l2persist[plot]'") from e
        spec = self.plot_spec
        selected = self._selected(spec)
        problem = _plot_problem(spec, self.records, selected)
        if problem:  # said before matplotlib draws an empty or misleading figure
            raise ValueError(f"plot{' of ' + self.source if self.source else ''}: {problem}")
        facets = ([None] if not spec.facet else
                  list(dict.fromkeys(r.get(spec.facet) for r in selected)))
        ncols = min(len(facets), spec.facet_cols or len(facets))
        nrows = -(-len(facets) // ncols)
        heat = _heat_scale(spec, selected) if spec.kind == "heatmap" else None
        if ax is None:
            width = 7.5 if len(facets) == 1 else 5.2 * ncols
            fig, grid = plt.subplots(nrows, ncols, figsize=(width, 4.6 * nrows ** 0.85),
                                     squeeze=False, sharey=True, sharex=nrows > 1)
            axes = [a for row in grid for a in row]
            for a in axes[len(facets):]:  # a wrapped grid's empty places
                a.set_visible(False)
        else:
            fig, axes = ax.figure, [ax] * len(facets)
        outside = bool(spec.facet) or len(_series(spec, selected)) > 6
        image = None
        for i, (a, value) in enumerate(zip(axes, facets)):
            recs = [r for r in selected if spec.facet is None or r.get(spec.facet) == value]
            image = _draw(a, spec, recs, fig, legend=not outside, heat=heat) or image
            if spec.facet:
                a.set_title((spec.facet_titles or {}).get(str(value), str(value)), fontsize=9)
            if nrows > 1:  # ticks on every panel, the x label on each column's last
                a.tick_params(labelbottom=True)
                if i < len(facets) - ncols:
                    a.set_xlabel("")
            if i % ncols:
                a.set_ylabel("")
        title = spec.title or self.header()
        if spec.facet:
            fig.suptitle(_wrapped(title, fig.get_figwidth(), 10), fontsize=10)
        else:
            axes[0].set_title(_wrapped(title, fig.get_figwidth(), 9), fontsize=9)
        bottom, right = 0.0, 1.0
        if outside:  # many series: one legend under the panels, not over the data
            handles, labels = axes[0].get_legend_handles_labels()
            ncol = 3
            if labels:
                fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=7.5,
                           frameon=False)
                bottom = 0.05 * (-(-len(labels) // ncol)) / nrows ** 0.85 + 0.03
                fig.set_figheight(fig.get_figheight() + 4.6 * bottom)
        if image is not None:  # one colour bar for every panel, right of them
            right = 0.9 if ax is None else 1.0
        fig.tight_layout(rect=(0, bottom, right, 1))
        if image is not None:
            cax = fig.add_axes((0.915, 0.15, 0.015, 0.7)) if ax is None else None
            fig.colorbar(image, cax=cax, ax=None if cax else ax,
                         label=spec.ylabel or spec.y[0])
        if path is not None:
            fig.savefig(path, dpi=110)
        return fig

    def _selected(self, spec) -> list:
        where = spec.where or {}
        return [r for r in self.records
                if all(r.get(k) in (v if isinstance(v, list) else [v]) for k, v in where.items())]


_SCALAR = (str, int, float, bool, type(None))


#: How much of the study's notes a plot that cannot be drawn quotes (notes, characters each).
NOTES_QUOTED = (6, 240)


def _notes_said(notes) -> str:
    """The study's own notes, cut short, for a plot that cannot be drawn: why its records
    hold nothing to draw is said there (a program that gave no advice, a run that failed),
    and the error is often all a reader of a failed notebook or log sees."""
    n, chars = NOTES_QUOTED
    said = [x if len(x) <= chars else x[:chars - 3] + "..." for x in list(notes)[-n:]]
    return ("; the study's notes: " + " | ".join(said)) if said else ""


def _plot_problem(spec, records, selected) -> str | None:
    """Why the records cannot draw the plot (None: they can): none at all, none that the
    plot's ``where`` keeps, a column in no record, or a value of the wrong type where the
    plot draws numbers (a string on a value axis is drawn as a category, upside down)."""
    if not records:
        return "there are no records to draw"
    if not selected:
        return f"no record matches the plot's where={spec.where!r}"
    have = list(dict.fromkeys(k for r in selected for k in r))
    named = [(role, getattr(spec, role)) for role in ("x", "hue", "facet")]
    for role, col in named:
        if col is not None and col not in have:
            return (f"the plot's {role} column {col!r} is in no record (the columns: "
                    f"{', '.join(have)})")
    if not any(y in have for y in spec.y):
        return (f"none of the plot's y columns ({', '.join(spec.y)}) is in a record (the "
                f"columns: {', '.join(have)})")
    if all(r.get(y) is None for r in selected for y in spec.y):
        return f"every value of the plot's y columns ({', '.join(spec.y)}) is null"
    numbers = list(spec.y) + list(spec.interval or [])
    if spec.kind in ("line", "scatter"):
        numbers.append(spec.x)
    for i, r in enumerate(selected):
        for col in numbers:
            v = r.get(col)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                return (f"record {records.index(r)}'s {col!r} is {v!r}, not a number (the plot "
                        f"draws {col} as a value)")
        for role, col in named:
            if col is not None and not isinstance(r.get(col), _SCALAR):
                return (f"record {records.index(r)}'s {col!r} is {json_kind(r.get(col))}, "
                        f"not a value the plot can place (its {role})")
    return None


def _wrapped(title: str, width_in: float, fontsize: float) -> str:
    """The title in lines that fit the figure's width (a character of DejaVu Sans is about
    0.55 em wide), so that a long one is not clipped at the figure's edge."""
    import textwrap
    chars = max(20, int(width_in * 72 / (fontsize * 0.56)) - 4)
    return "\n".join(textwrap.wrap(title, chars)) if len(title) > chars else title


# Series styles: each series differs from its neighbours in colour, marker and line style,
# and markers are hollow, so a series drawn exactly on another still shows.
_MARKERS = "osD^vx+<>*"
_LINES = ("-", "--", ":", "-.")


def _style(i: int) -> dict:
    return {"marker": _MARKERS[i % len(_MARKERS)], "linestyle": _LINES[i % len(_LINES)],
            "color": f"C{i % 10}", "ms": 7 - (i % 3) * 1.5, "mfc": "none", "lw": 1.4}


def _series(spec, recs) -> list:
    """(label, [(x, y, (low, high) or None)]) per hue value and y column."""
    labels = spec.labels or {}
    groups = {}
    for r in recs:
        groups.setdefault(r.get(spec.hue) if spec.hue else None, []).append(r)
    out = []
    for hue, rs in groups.items():
        for y in spec.y:
            pts = [(r[spec.x], r[y], (r[spec.interval[0]], r[spec.interval[1]])
                    if spec.interval and r.get(spec.interval[0]) is not None else None)
                   for r in rs if r.get(y) is not None and spec.x in r]
            if not pts:
                continue
            parts = [labels.get(str(hue), str(hue)) if hue is not None else None,
                     labels.get(y, y) if len(spec.y) > 1 or hue is None else None]
            out.append((", ".join(p for p in parts if p) or None, pts))
    return _same_values_noted(out)


def _same_values_noted(series: list) -> list:
    """A series whose points equal an earlier one's is drawn exactly over it: its legend entry
    says so, so that a reader knows the hidden line is there."""
    out = []
    for i, (label, pts) in enumerate(series):
        key = sorted((x, y) for x, y, _ in pts)
        twin = next((lab for lab, p in series[:i] if sorted((x, y) for x, y, _ in p) == key),
                    None)
        if twin is not None and label:
            label = f"{label}: same values as {twin}"
        out.append((label, pts))
    return out


def _ordered(values) -> list:
    """Distinct values in order of appearance; numbers ascending."""
    values = list(dict.fromkeys(values))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sorted(values)
    return values


def _heat_scale(spec, recs) -> dict:
    """The colour scale every panel of a heatmap shares: cmap, vmin, vmax."""
    vals = [r[spec.y[0]] for r in recs if r.get(spec.y[0]) is not None]
    lo, hi = (spec.vrange or [None, None])
    if spec.vrange is None and spec.hline is not None and vals:  # centred on the reference
        span = max(abs(v - spec.hline) for v in vals) or 1.0
        lo, hi = spec.hline - span, spec.hline + span
    lo = min(vals) if lo is None and vals else lo
    hi = max(vals) if hi is None and vals else hi
    return {"cmap": spec.cmap or "RdYlGn", "vmin": lo, "vmax": hi}


def _heatmap(ax, spec, recs, heat):
    """hue values as rows, x values as columns, y[0] as colour; the curve drawn over it."""
    import numpy as np
    rows = _ordered(r[spec.hue] for r in recs)
    cols = _ordered(r[spec.x] for r in recs)
    cell = {(r[spec.hue], r[spec.x]): r[spec.y[0]] for r in recs}
    grid = np.array([[cell.get((h, c)) if cell.get((h, c)) is not None else np.nan
                      for c in cols] for h in rows], dtype=float)
    numeric_rows = all(isinstance(v, (int, float)) for v in rows)  # ascending: bottom up
    im = ax.imshow(grid, aspect="auto", origin="lower" if numeric_rows else "upper",
                   **(heat or _heat_scale(spec, recs)))
    if len(cols) <= 16:  # values written in the cells while they stay legible
        digits = 2 if len(cols) <= 10 else 1
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if v == v:
                    ax.text(j, i, f"{v:.{digits}f}", ha="center", va="center",
                            fontsize=7 if digits == 2 else 6)
    step = max(1, -(-len(cols) // 16))
    ax.set_xticks(range(0, len(cols), step))
    ax.set_xticklabels([_tick(c) for c in cols[::step]], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_tick(r) for r in rows], fontsize=8)
    if spec.curve:
        pts = [(_position(x, cols), _position(y, rows)) for x, y in spec.curve]
        pts = [(x, y) for x, y in pts if x is not None and y is not None]
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], color="tab:blue", lw=2,
                    marker="o", ms=5, label=spec.curve_label or None)
            ax.set_xlim(-0.5, len(cols) - 0.5)
            if spec.curve_label and not spec.facet:  # facets: the figure's legend shows it
                ax.legend(fontsize=7, loc="upper right")
    ax.set_xlabel(spec.xlabel or spec.x)
    ax.set_ylabel((spec.labels or {}).get(spec.hue, spec.hue))
    return im


def _position(value, axis_values):
    """Where value falls on a heatmap axis, in cell units: its index, or between the cells
    of numeric values (None outside them, or on an axis of names)."""
    if value in axis_values:
        return float(axis_values.index(value))
    if any(isinstance(v, str) for v in axis_values) or not axis_values:
        return None
    import numpy as np
    if not axis_values[0] <= value <= axis_values[-1]:
        return None
    return float(np.interp(value, axis_values, range(len(axis_values))))


def _tick(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _draw(ax, spec, recs, fig, legend: bool = True, heat=None):
    """Draw one panel; a heatmap returns its image (for the figure's colour bar)."""
    series = _series(spec, recs)
    if spec.kind == "bar":  # grouped bars, one group per x value
        xs = list(dict.fromkeys(x for _, pts in series for x, _, _ in pts))
        width = 0.8 / max(1, len(series))
        for i, (label, pts) in enumerate(series):
            pos = [xs.index(x) + (i - (len(series) - 1) / 2) * width for x, _, _ in pts]
            ax.bar(pos, [y for _, y, _ in pts], width=width, label=label, color=f"C{i % 10}",
                   hatch=("", "//", "..", "xx")[i % 4], edgecolor="white")
            iv = [(p, lo, hi) for p, (_, _, ci) in zip(pos, pts) if ci for lo, hi in [ci]]
            if iv:
                ax.errorbar([p for p, _, _ in iv], [(lo + hi) / 2 for _, lo, hi in iv],
                            yerr=[(hi - lo) / 2 for _, lo, hi in iv], fmt="none", ecolor="k",
                            capsize=5, lw=1.5, label=spec.interval_label)
        top = max([y for _, pts in series for _, y, _ in pts]
                  + [ci[1] for _, pts in series for _, _, ci in pts if ci] + [spec.hline or 0])
        ax.set_ylim(0, top * 1.3)  # room for the legend above the bars
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([(spec.labels or {}).get(str(x), str(x)) for x in xs],
                           rotation=20, ha="right", fontsize=8)
    elif spec.kind == "heatmap":
        return _heatmap(ax, spec, recs, heat)
    else:
        for i, (label, pts) in enumerate(series):
            pts = sorted(pts, key=lambda p: p[0])
            style = _style(i)
            if spec.kind == "scatter":
                style["linestyle"] = "none"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style)
            iv = [(x, ci) for x, _, ci in pts if ci]
            if iv:
                ax.errorbar([x for x, _ in iv], [(lo + hi) / 2 for _, (lo, hi) in iv],
                            yerr=[(hi - lo) / 2 for _, (lo, hi) in iv], fmt="none",
                            ecolor=f"C{i % 10}", capsize=4)
    if spec.hline is not None:
        ax.axhline(spec.hline, color="k", lw=0.9, ls="--", zorder=0,
                   label=spec.hline_label or None)
    for x, text in (spec.vlines or {}).items():
        ax.axvline(float(x), color="grey", lw=0.9, ls=":")
        ax.annotate(text, (float(x), 0.02), xycoords=("data", "axes fraction"),
                    rotation=90, fontsize=7, color="dimgrey", ha="right", va="bottom")
    if spec.logx:
        ax.set_xscale("log", base=2)
        xs = [p[0] for _, pts in series for p in pts]
        if xs and max(xs) < 4096:  # small values read better as numbers than as 2^n
            from matplotlib.ticker import FuncFormatter
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    if spec.logy:
        ax.set_yscale("log")
    if spec.xlim:
        ax.set_xlim(*spec.xlim)
    ax.grid(True, alpha=0.3)
    if legend and (len(series) > 1 or spec.interval or spec.hline_label):
        ax.legend(fontsize=7)
    ax.set_xlabel(spec.xlabel or spec.x)
    ax.set_ylabel(spec.ylabel or ", ".join(spec.y))
    return None


# field -> (type it must have, required); the layout FORMAT names
_SCHEMA = {"format": (int, True), "study": (str, True), "meta": (dict, True),
           "records": (list, True), "columns": ((list, type(None)), False),
           "plot": ((dict, type(None)), False), "notes": (list, False),
           "summary": (dict, False), "bars": (list, False)}


def _fields(d, where: str) -> dict:
    """The constructor arguments of a Results from a parsed JSON object (read_json's), or
    ValueError."""
    for key, (kind, required) in _SCHEMA.items():
        if key not in d:
            if required:
                raise ValueError(f"{where}: the key {key!r} is missing")
            continue
        if not isinstance(d[key], kind) or isinstance(d[key], bool) and kind is int:
            raise ValueError(f"{where}: {key!r} must be {_json_kind(kind)}, not "
                             f"{json_kind(d[key])}")
    if d["format"] != FORMAT:
        raise ValueError(f"{where}: format {d['format']!r} is not {FORMAT}, the layout this "
                         "l2persist reads")
    bad = next((i for i, r in enumerate(d["records"]) if not isinstance(r, dict)), None)
    if bad is not None:
        raise ValueError(f"{where}: 'records' must hold objects; record {bad} is "
                         f"{json_kind(d['records'][bad])}")
    try:
        plot = PlotSpec(**d["plot"]) if d.get("plot") else None
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: 'plot' is not a plot layout ({e})") from None
    return dict(study=d["study"], records=d["records"], meta=d["meta"],
                columns=[tuple(c) for c in d["columns"]] if d.get("columns") else None,
                plot_spec=plot, notes=d.get("notes", []), summary=d.get("summary", {}),
                bars=d.get("bars", []))


def _json_kind(kind) -> str:
    """The JSON names of Python types: (dict, NoneType) -> 'a JSON object or null'."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "a JSON integer", str: "a JSON string", dict: "a JSON object",
             list: "a JSON array", type(None): "null"}
    return " or ".join(names[k] for k in kinds)


def _interactive() -> bool:
    try:
        from IPython import get_ipython
        return get_ipython() is not None
    except ImportError:
        return False


def _jsonable(v):
    try:
        import numpy as np
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            return v.tolist()
    except ImportError:
        pass
    if isinstance(v, (tuple, set)):
        return list(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v, default=_jsonable)
    return str(v)


__all__ = ["FORMAT", "PlotSpec", "Results", "collect_metadata"]
