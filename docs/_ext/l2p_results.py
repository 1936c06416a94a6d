"""The results pages' text, generated from the stored results (no Sphinx needed here, so the
tests can check what the pages say): notebooks/results/*.json, each study's findings
recomputed from its records by the study's own code, and docs/data/*.json.

Everything returns Markdown lines; the directives in l2p_docs.py hand them to MyST."""

from __future__ import annotations

import base64
import io
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(ROOT, "notebooks", "results")
DATA = os.path.join(ROOT, "docs", "data")

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def md_text(value) -> str:
    """A value as Markdown text that means itself (no emphasis, no links, no table cells)."""
    from l2persist._format import cell_text
    if isinstance(value, (list, tuple)):
        value = ", ".join(cell_text(v) for v in value)
    elif isinstance(value, dict):
        value = json.dumps(value, sort_keys=True)
    else:
        value = cell_text(value) if value is not None else "-"
    return _MD_SPECIAL.sub(r"\\\1", value)


def md_table(rows, columns) -> list[str]:
    """Rows (dicts) as a Markdown table; columns are (key, header) pairs."""
    out = ["| " + " | ".join(md_text(h) for _, h in columns) + " |",
           "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(md_text(r.get(k)) for k, _ in columns) + " |" for r in rows]
    return out


def strip_heading(text: str) -> str:
    """A study's INTRO starts with the notebook's title: the page has its own."""
    lines = text.strip().splitlines()
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines)


# ---------------------------------------------------------------- one study's stored run

def results_path(stem: str) -> str:
    path = os.path.join(RESULTS, f"{stem}.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no stored results {path}")
    return path


def load(stem: str):
    """The stored run, its findings recomputed from the records by today's study code."""
    from l2persist import studies
    return studies.load(results_path(stem))


def study_markdown(res, *, prose: bool = True, table: bool = True,
                   columns: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(head, tail): the Markdown before and after the plot of one study's stored run. Head:
    the notebook's introduction (the source, what is measured), where and when it was
    measured, the findings, the bars; tail: every record and the study's "why"."""
    from l2persist import studies
    info = studies.info(res.study)
    head: list[str] = []
    if prose:  # the notebook's intro says the source and what is measured
        head += [strip_heading(info.intro) or f"**The source.** {info.source}", ""]
    head += [f"*{md_text(res.stored_note())}*", ""]
    head += ["**Findings** (the study's `findings()` on the stored records):", ""]
    head += [f"- {md_text(n)}" for n in res.notes] or ["- (none)"]
    head.append("")
    if res.bars:
        head += ["**Bars** this run checked:", ""]
        head += [f"- {'met' if b['met'] else 'NOT met'}: {md_text(b['bar'])}" for b in res.bars]
        head.append("")
    tail: list[str] = []
    if table and res.records:
        cols = list(res.columns) if res.columns else [(k, k) for k in res.keys()]
        if columns:
            names = dict(cols)
            cols = [(k, names.get(k, k)) for k in columns]
        tail += [f"**Records** ({len(res.records)}, as stored):", ""]
        tail += md_table(res.records, cols) + [""]
    if prose and info.why:
        tail += [info.why, ""]
    return head, tail


def plot_png(res) -> str | None:
    """The study's plot as a base64 PNG, or None where matplotlib is missing or the stored
    records draw no plot."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    try:
        fig = res.plot()
    except (ValueError, TypeError, KeyError):  # no plot declared for these records
        return None
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


# ---------------------------------------------------------------- tables of every study, device

def studies_markdown(page_for, repo: str) -> list[str]:
    """The table of studies: name, what it runs, needs, its results page (``page_for(name)``:
    a docname, or None) and its notebook on the repository."""
    from l2persist import studies
    md = ["| study | what it runs | needs | stored results | notebook |",
          "|---|---|---|---|---|"]
    for s in studies.list_studies():
        page = page_for(s.name) if os.path.exists(os.path.join(RESULTS, f"{s.name}.json")) else None
        book = studies.notebook_file(s.name)
        link = f"[`{book[:2]}`]({repo}/blob/main/notebooks/{book})" if book else "-"
        md.append(f"| `{s.name}` | {s.row} | {', '.join(s.needs) or 'nothing'} | "
                  + (f"{{doc}}`{s.name} <{page}>`" if page else "-") + f" | {link} |")
    return md


def stored_files() -> list[str]:
    """Every stored results and data file."""
    out = sorted(os.path.join(RESULTS, f) for f in os.listdir(RESULTS) if f.endswith(".json"))
    return out + sorted(os.path.join(DATA, f) for f in os.listdir(DATA) if f.endswith(".json"))


def devices_markdown() -> tuple[list[str], list[str]]:
    """(Markdown, files read): the L2 facts of every GPU a stored result was measured on, from
    the results' metadata (what the driver reported at the run)."""
    from l2persist import human_bytes
    seen: dict[str, dict] = {}
    used = []
    for path in stored_files():
        with open(path) as f:
            meta = json.load(f).get("meta") or {}
        name = meta.get("device_name")
        if not name or "l2_cache_size" not in meta:
            continue
        used.append(path)
        row = seen.setdefault(name, {"runs": 0, **meta})
        row["runs"] += 1
        if meta.get("granule"):
            row["granule"] = meta["granule"]

    def size(v):
        return "not recorded" if v is None else f"{human_bytes(v)} ({v})"
    md = ["| GPU | cc | SMs | L2 | persisting max | default limit | granule | largest window "
          "| driver supports | runs stored |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for name, m in seen.items():
        md.append("| " + " | ".join(md_text(x) for x in (
            name, m.get("compute_capability"), m.get("multiprocessor_count"))) + " | "
            + " | ".join(md_text(size(m.get(k))) for k in (
                "l2_cache_size", "persisting_l2_cache_max_size", "default_persisting_l2_limit",
                "granule", "access_policy_max_window_size"))
            + f" | CUDA {md_text(m.get('driver_supports'))} | {m['runs']} |")
    return md, used


# ---------------------------------------------------------------- one data file

def data_path(name: str) -> str | None:
    return next((p for p in (os.path.join(DATA, name), os.path.join(RESULTS, name))
                 if os.path.exists(p)), None)


def dig(obj, dotted: str):
    for part in dotted.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def _beside(data, dotted: str, key: str):
    """The ``key`` beside the rows at ``dotted`` (a run's revision), or None."""
    parent = dotted.rsplit(".", 1)[0] if "." in dotted else ""
    try:
        obj = dig(data, parent) if parent else data
    except (KeyError, IndexError, ValueError):
        return None
    return obj.get(key) if isinstance(obj, dict) else None


def several(loaded, rows: str = "rows") -> dict:
    """The rows of several stored files as one table's records, in the order given, each with
    ``file`` (its name), ``gpu`` (the device it names, NVIDIA's prefix dropped) and
    ``revision`` (the l2persist revision it names) beside its own keys."""
    out = []
    for name, data in loaded:
        recs = dig(data, rows)
        m = data.get("meta") or {}
        gpu = str(m.get("device_name") or data.get("device", "?")).replace("NVIDIA ", "")
        rev = m.get("git_revision") or data.get("revision", "?")
        for r in [recs] if isinstance(recs, dict) else recs:
            out.append({**r, "file": name, "gpu": gpu.split()[0], "revision": rev})
    return {"rows": out}


def data_markdown(name: str, data, *, rows: str = "rows", columns: str | None = None,
                  where: str = "", meta: bool = False) -> list[str]:
    """A table of one stored JSON file: ``rows`` the dotted path of its records (a dict is one
    record), ``columns`` ``key`` or ``key=header`` items separated by ``;``, ``where``
    ``key=value`` filters separated by ``;``, ``meta``: a line saying where it was measured."""
    recs = dig(data, rows)
    if isinstance(recs, dict):
        recs = [recs]
    for cond in filter(None, (c.strip() for c in where.split(";"))):
        key, _, value = cond.partition("=")
        recs = [r for r in recs if str(r.get(key.strip())) == value.strip()]
    if columns:
        cols = []
        for item in filter(None, (c.strip() for c in columns.split(";"))):
            key, _, head = item.partition("=")
            cols.append((key.strip(), head.strip() or key.strip()))
    else:
        cols = [(k, k) for k in recs[0]] if recs else []
    md = []
    if meta:
        m = data.get("meta") or {}
        gpu = m.get("device_name") or data.get("device", "?")
        rev = m.get("git_revision") or _beside(data, rows, "revision") or data.get("revision", "?")
        date = str(m.get("date", ""))[:10]
        md += [f"*From `{os.path.relpath(data_path(name) or name, ROOT)}`: "
               f"{md_text(gpu)}, l2persist at {md_text(rev)}{', ' + date if date else ''}; "
               f"{len(recs)} rows.*", ""]
    md += md_table(recs, cols) if recs else ["(no rows)"]
    return md
