"""The live plan document's check: every field named with what it allows.

A plan document is what ``advise --`` writes and ``apply`` / ``verify`` / ``L2PERSIST_PLAN``
read: the GPU it was found on, the set-aside (``null``: leave the device's default) and the
windows, each placed by its graph's signature and a pointer word of that graph
(``_core.live_locate`` finds it again in the next run)."""
from __future__ import annotations

import math

FORMAT = "l2persist-live-plan/1"
_PROPS = ("normal", "streaming", "persisting")
_INT_FIELDS = {"node": (0, 1 << 31), "param": (0, 4096), "offset": (0, 32768),
               "delta": (-(1 << 48), 1 << 48), "bytes": (1, 1 << 48)}


def _fail(where, what):
    raise ValueError(f"plan {where}: {what}")


def _int(where, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        _fail(where, f"expected an int in [{lo}, {hi}], got {v!r:.60}")
    return v


def check_plan(doc, path="") -> dict:
    """The document, checked; ValueError naming the field otherwise."""
    at = f"{path!r}: " if path else ""
    if not isinstance(doc, dict):
        _fail(at + "document", f"expected an object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        _fail(at + "format", f"expected {FORMAT!r}, got {doc.get('format')!r:.60}")
    dev = doc.get("device")
    if not isinstance(dev, dict) or not isinstance(dev.get("name"), str) or not dev["name"]:
        _fail(at + "device.name", "expected the GPU's name (a non-empty string)")
    aside = doc.get("set_aside")
    if aside is not None:
        _int(at + "set_aside", aside, 0, 1 << 40)
    wins = doc.get("windows")
    if not isinstance(wins, list) or len(wins) > 4096:
        _fail(at + "windows", "expected a list of at most 4096 windows")
    for i, w in enumerate(wins):
        where = f"{at}windows[{i}]"
        if not isinstance(w, dict):
            _fail(where, f"expected an object, got {type(w).__name__}")
        if not isinstance(w.get("graph"), str) or not w["graph"].startswith("k"):
            _fail(where + ".graph", "expected a graph signature ('k<count>-<hex>')")
        for name, (lo, hi) in _INT_FIELDS.items():
            _int(f"{where}.{name}", w.get(name), lo, hi)
        h = w.get("hit_ratio")
        if isinstance(h, bool) or not isinstance(h, (int, float)) or not math.isfinite(h) \
                or not 0 < h <= 1:
            _fail(where + ".hit_ratio", f"expected a number in (0, 1], got {h!r:.60}")
        for p in ("hit_prop", "miss_prop"):
            if w.get(p) not in _PROPS:
                _fail(f"{where}.{p}", f"expected one of {', '.join(_PROPS)}, got {w.get(p)!r:.60}")
        nodes = w.get("nodes")
        if not isinstance(nodes, list) or not nodes or len(nodes) > 1 << 16:
            _fail(where + ".nodes", "expected a non-empty list of node positions")
        for k, n in enumerate(nodes):
            _int(f"{where}.nodes[{k}]", n, 0, 1 << 31)
    return doc
