"""The Kepler GK110 article's access patterns under the three coalescing rules: efficiency
(bytes requested / bytes moved), transactions and sectors per warp, for 4-, 8- and 16-byte
accesses. A model, so it runs anywhere; `granularity` puts the model beside the hardware."""

from __future__ import annotations

import zlib

import numpy as np

from .. import coalescing as C
from ..results import PlotSpec

TITLE = "Coalescing rules on the Kepler article's patterns (model, no GPU needed)"
NEEDS_GPU = False
SOURCE = ("Kepler GK110 article: 32 B segments, 128 B lines; a warp's accesses cost 1, 2 or 4 "
          "segments when aligned and contiguous, more when offset or strided; caching (128 B) "
          "loads waste more than non-caching (32 B) ones on scattered addresses.")
NEEDS = ()
ROW = "the Kepler article's patterns under three rules (no GPU)"
INTRO = """# Coalescing rules on the Kepler article's patterns

**The source.** NVIDIA's Kepler GK110 article: global memory is served in 32-byte segments and
128-byte lines; a warp's accesses cost 1, 2 or 4 segments when aligned and contiguous, more
when offset, strided or scattered; caching loads (128-byte lines through L1) waste more than
non-caching ones (32-byte segments) on scattered addresses.

**What we compute.** The model (`l2persist.coalescing`, in C) under three rules —
`kepler_caching`, `kepler_noncaching` and `sectors` (today's GPUs) — for contiguous, offset,
strided, broadcast, permuted and scattered warps of 4-, 8- and 16-byte accesses. No GPU is
needed; the `granularity` notebook checks the `sectors` rule against the hardware."""
WHY = """**Why.** With 128-byte lines a warp whose 32 addresses are spread one per line moves 32 x 128
bytes for 128 useful ones (3.1 %); with 32-byte sectors it moves 32 x 32 (12.5 %). Aligned
contiguous warps are 100 % efficient under every rule; a one-element offset costs one extra
line or sector. The non-caching Kepler rule and today's sectors rule give the same numbers
on these patterns: both move 32-byte pieces."""


def _patterns(quick: bool) -> dict:
    """label -> (family, parameter, addresses(size)). The random patterns are drawn from a
    seed of their own and the access size, so every rule, and a run of a part of the sweep
    (--only), compares the same addresses."""
    strides = (1, 2, 4, 8, 16, 32) if not quick else (1, 2, 32)
    offsets = (0, 1, 8, 16, 31) if not quick else (0, 1)
    pats = {f"offset {o}": ("contiguous", o, lambda s, o=o: C.contiguous(size=s, offset=o))
            for o in offsets}
    pats.update({f"stride {k}": ("strided", k, lambda s, k=k: C.strided(size=s, stride=k))
                 for k in strides})
    pats["one address"] = ("broadcast", 0, lambda s: C.broadcast(size=s))
    pats["within one line"] = ("permuted", 0,
                               lambda s: C.permuted_within_line(_rng("permuted", s), size=s))
    pats["random over 4096 elements"] = ("scattered", 0,
                                         lambda s: C.random_scatter(_rng("scattered", s), size=s))
    return pats


def _rng(family: str, size: int):
    return np.random.default_rng([2026, zlib.crc32(family.encode()), size])


def axes(ctx) -> dict:
    return {"size": (4, 8, 16) if not ctx.quick else (4,), "rule": C.RULES,
            "pattern": list(_patterns(ctx.quick))}


def run(ctx):
    pats = _patterns(ctx.quick)

    def point(size, rule, pattern):
        family, param, make = pats[pattern]
        a = C.analyze(make(size), size=size, rule=rule)
        return {"family": family, "param": param,
                "efficiency_pct": round(a.efficiency, 2), "transactions": int(a.transactions),
                "sectors": int(a.sectors), "replays": int(a.replays)}

    return ctx.results(ctx.sweep(ctx.axes, point), columns=COLUMNS)


COLUMNS = [("size", "size (bytes)"), ("rule", "rule"), ("family", "family"),
           ("pattern", "pattern"), ("efficiency_pct", "efficiency %"),
           ("transactions", "transactions"), ("sectors", "sectors"), ("replays", "replays")]


def _strided(records, rule, size=4) -> dict:
    return {r["param"]: r["efficiency_pct"] for r in records
            if r["family"] == "strided" and r["size"] == size and r["rule"] == rule}


def findings(res) -> list:
    notes = []
    for rule in C.RULES:
        by = _strided(res.records, rule)
        cells = [f"stride {k} -> {by[k]} %" for k in (1, 2, 32) if k in by]
        if cells:
            notes.append(f"{rule}: 4-byte " + ", ".join(cells) + " efficient")
    return notes


_LABELS = {"kepler_caching": "Kepler caching (128 B lines)",
           "kepler_noncaching": "Kepler non-caching (32 B segments)",
           "sectors": "sectors (Maxwell and later)"}


def plot_spec(res) -> PlotSpec:
    """Efficiency of strided warps against the stride, a line per rule, at the smallest access
    size the records hold (4 bytes in the whole sweep)."""
    strided = [r for r in res.records if r["family"] == "strided"]
    if not strided:
        raise ValueError("the plot draws strided warps against their stride, and this part of "
                         "the sweep has none (its patterns: "
                         + ", ".join(dict.fromkeys(r["pattern"] for r in res.records)) + ")")
    size = min(r["size"] for r in strided)
    rules = [rule for rule in C.RULES if any(r["rule"] == rule for r in strided)]
    widest = max(r["param"] for r in strided)
    at = {rule: _strided(strided, rule, size).get(widest) for rule in rules}
    title = (f"Strided {size}-byte warps: at stride {widest} "
             + ", ".join(f"{_LABELS[rule].split(' (')[0]} {at[rule]:g} %" for rule in rules))
    return PlotSpec(x="param", y=["efficiency_pct"], hue="rule", logx=True,
                    labels=_LABELS, xlabel=f"stride (elements), {size}-byte accesses",
                    ylabel="efficiency, %", title=title,
                    where={"family": "strided", "size": size})
