"""Presentation helpers: byte sizes, repr and HTML of property records. No policy here."""

from __future__ import annotations

import html
import json


def cell_text(v) -> str:
    """One table cell: 4 significant digits, yes/no for booleans, 'nan' kept visible."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != v:
            return "nan"
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3e}"
    return str(v)


def short_text(name: str, n: int = 48) -> str:
    """name cut to n characters, an ellipsis marking the cut."""
    return name if len(name) <= n else name[: n - 1] + "…"


def kernel_label(name: str, n: int = 72) -> str:
    """A kernel's name for a person: demangled and shortened to ``n`` characters by the C
    core's rule (``_core.kernel_name``; l2p_demangle.h says how). Only for showing: names
    used as keys (signatures, matching, dictionaries) stay as the driver gives them."""
    from . import _core
    return _core.kernel_name(name, max_chars=n)


def node_label(node, n: int = 32) -> str:
    """A kernel node as text: ``position:kernel name`` (its kernel_label, ``n`` characters)."""
    return f"{node.position}:{kernel_label(node.name, n)}"


def markdown_table(rows, columns) -> str:
    """Rows (dicts) as a markdown table; columns are (key, header) pairs."""
    out = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(cell_text(r.get(k, "")) for k, _ in columns) + " |" for r in rows]
    return "\n".join(out)


def save_json(obj, path=None, **kw) -> str:
    """JSON text of obj, also written to path when one is given."""
    text = json.dumps(obj, **kw)
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
    return text


#: The most a loader reads of a file (a plan, a Results or Advice file is far smaller): a
#: path to /dev/zero or a log file is refused, not read without bound.
MAX_JSON_BYTES = 64 << 20


def _is_json_text(s: str) -> bool:
    """Whether a str is JSON text rather than a path, by its content: an object or array, or
    any other valid JSON value ('null', '5', '"x"'). A path that happens to be valid JSON
    ('2024') is given as a pathlib.Path."""
    head = s.lstrip()
    if head.startswith(("{", "[")):
        return True
    try:
        json.loads(s)
    except (ValueError, RecursionError):
        return False
    return True


def _read_file(path, arg: str) -> str:
    """The text of a file, at most MAX_JSON_BYTES, as UTF-8; every failure names the file."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
    except FileNotFoundError as e:
        raise FileNotFoundError(e.errno, f"{arg}: {path!r} is neither JSON text nor an "
                                         "existing file") from None
    except IsADirectoryError as e:
        raise IsADirectoryError(e.errno, f"{arg}: {path!r} is a directory; give a JSON "
                                         "file") from None
    if len(data) > MAX_JSON_BYTES:
        raise ValueError(f"{arg}: {path!r} holds more than {MAX_JSON_BYTES >> 20} MiB; not an "
                         "l2persist JSON file (loaders read at most that much)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{arg}: {path!r} is not UTF-8 text (byte {e.start} is "
                         f"{data[e.start]:#04x}); not a JSON file") from None


def json_kind(v) -> str:
    """The JSON name of a parsed value's type, for messages ("null", not "NoneType")."""
    for kind, name in ((bool, "a boolean"), (type(None), "null"), (dict, "an object"),
                       (list, "an array"), (str, "a string"), ((int, float), "a number")):
        if isinstance(v, kind):
            return name
    return type(v).__name__


def read_json(text_or_path, arg: str = "text_or_path", what: str = "an l2persist file"):
    """(parsed object, where it came from) of JSON text or of the file at a path (str or
    os.PathLike). A str is JSON text when it starts with '{' or '[' or is any other valid
    JSON value, else a path. A file is read up to MAX_JSON_BYTES. Every l2persist document
    is a JSON object: anything else is refused, saying it is not ``what``. Every failure
    names the argument (``arg``) or the file: bytes (neither a path nor text here), a
    missing file, a binary file, invalid or too deeply nested JSON."""
    import os
    if isinstance(text_or_path, os.PathLike) or (
            isinstance(text_or_path, str) and not _is_json_text(text_or_path)):
        path = os.fspath(text_or_path)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        where, text = path, _read_file(path, arg)
    elif isinstance(text_or_path, str):
        where, text = f"{arg} (JSON text)", text_or_path
    else:
        raise TypeError(f"{arg}: give a path (str or os.PathLike) or JSON text, not "
                        f"{type(text_or_path).__name__}")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e}); was the file cut short?") from None
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply to read (an l2persist file nests "
                         "a few levels)") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: holds {json_kind(doc)}, not a JSON object: not {what}")
    return doc, where


def load_json(text_or_path, arg: str = "text_or_path", what: str = "an l2persist file"):
    """The parsed object of read_json, without where it came from."""
    return read_json(text_or_path, arg, what)[0]


def human_bytes(n: int | float) -> str:
    """1536 -> '1.5 KiB'. Exact multiples print without decimals."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{int(n)} B"
            return f"{n:.0f} {unit}" if n == int(n) else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable


def _value_text(key: str, value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return repr(value)
    if key == "peak_memory_bandwidth":
        return f"{value / 1e12:.2f} TB/s"
    if key.endswith(("_size", "_memory", "_limit", "_granule")) and isinstance(value, int):
        return f"{value} ({human_bytes(value)})"
    return repr(value)


def record_repr(kind: str, record) -> str:
    items = record.as_dict()
    body = ",\n".join(f"    {k}={_value_text(k, v)}" for k, v in items.items())
    return f"{kind}(\n{body}\n)"


def record_html(kind: str, record) -> str:
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
        f"<td style='text-align:left'>{html.escape(_value_text(k, v))}</td></tr>"
        for k, v in record.as_dict().items())
    return f"<table><caption>{html.escape(kind)}</caption>{rows}</table>"


# ---- the set-aside tax: where each printed figure came from ----
# Every place that prints a tax says whether it is the model's prediction (a prior: the C
# core's fit, l2persist.tax.predict) or a measurement (and of what); where both exist for the
# same thing the measurement leads and the model's figure follows as what it predicted, so a
# disagreement is there to read. This is the one home of those words.

TAX_MODEL = "model"
TAX_MEASURED = "measured"


def tax_source(measured: bool, how: str = "") -> str:
    """The label of one tax figure: ``"measured (how)"`` or ``"model"``."""
    if measured:
        return f"{TAX_MEASURED} ({how})" if how else TAX_MEASURED
    return TAX_MODEL


def tax_predicted(model, fmt="{:.2f}x") -> str:
    """The model's figure beside a measurement of the same thing: ``the model predicted X``."""
    return f"the {TAX_MODEL} predicted {(fmt.format if isinstance(fmt, str) else fmt)(model)}"


def tax_figure(measured=None, model=None, *, fmt="{:.2f}x", how: str = "") -> str:
    """One tax figure with its source: the measured value first (``how``: of what, how) and
    the model's after it as what it predicted; the model's alone is labelled as the model's.
    ``fmt``: a format string or a callable for the values (None: that one is absent)."""
    text = fmt.format if isinstance(fmt, str) else fmt
    if measured is not None:
        out = f"{TAX_MEASURED} {text(measured)}" + (f" ({how})" if how else "")
        return out + (f"; {tax_predicted(model, fmt)}" if model is not None else "")
    if model is not None:
        return f"{text(model)} ({TAX_MODEL}, not measured)"
    return "not measured, no model"


__all__ = ["MAX_JSON_BYTES", "cell_text", "human_bytes", "json_kind", "kernel_label", "load_json",
           "markdown_table",
           "read_json", "record_repr", "record_html", "save_json", "TAX_MEASURED",
           "TAX_MODEL", "tax_figure", "tax_predicted", "tax_source"]
