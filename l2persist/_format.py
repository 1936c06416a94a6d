"""Presentation helpers: byte sizes, repr and HTML of property records. No policy here."""

from __future__ import annotations

import html


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

__all__ = ["human_bytes", "record_repr", "record_html"]
