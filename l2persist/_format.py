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


def node_label(node, n: int = 32) -> str:
    """A kernel node as text: ``position:kernel name`` (shortened to ``n`` characters)."""
    return f"{node.position}:{short_text(node.name, n)}"


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


def read_json(text_or_path):
    """(parsed object, where it came from) of a JSON string or of the file at a path (str or
    os.PathLike). Bytes are refused: they are neither a path nor text here. A syntax error
    names the file."""
    import os
    if isinstance(text_or_path, (bytes, bytearray, memoryview)):
        raise TypeError("load: give a path (str or os.PathLike) or JSON text, not "
                        f"{type(text_or_path).__name__}")
    if isinstance(text_or_path, os.PathLike) or (
            isinstance(text_or_path, str) and not text_or_path.lstrip().startswith(("{", "["))):
        where = os.fspath(text_or_path)
        with open(where) as f:
            text = f.read()
    elif isinstance(text_or_path, str):
        where, text = "JSON text", text_or_path
    else:
        raise TypeError("load: give a path (str or os.PathLike) or JSON text, not "
                        f"{type(text_or_path).__name__}")
    try:
        return json.loads(text), where
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e}); was the file cut short?") from None


def load_json(text_or_path):
    """The parsed object of read_json, without where it came from."""
    return read_json(text_or_path)[0]


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

__all__ = ["cell_text", "human_bytes", "load_json", "markdown_table", "read_json", "record_repr",
           "record_html", "save_json"]
