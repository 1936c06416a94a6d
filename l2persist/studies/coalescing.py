"""The Kepler GK110 article's access patterns under the three coalescing rules: efficiency
(bytes requested / bytes moved), transactions and sectors per warp, for 4-, 8- and 16-byte
accesses. A model, so it runs anywhere; `granularity` puts the model beside the hardware."""

from __future__ import annotations

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


def _patterns(quick: bool):
    rng = np.random.default_rng(2026)
    strides = (1, 2, 4, 8, 16, 32) if not quick else (1, 2, 32)
    offsets = (0, 1, 8, 16, 31) if not quick else (0, 1)
    pats = [("contiguous", f"offset {o}", o, lambda s, o=o: C.contiguous(size=s, offset=o))
            for o in offsets]
    pats += [("strided", f"stride {k}", k, lambda s, k=k: C.strided(size=s, stride=k))
             for k in strides]
    pats += [("broadcast", "one address", 0, lambda s: C.broadcast(size=s)),
             ("permuted", "within one line", 0,
              lambda s: C.permuted_within_line(rng, size=s)),
             ("scattered", "random over 4096 elements", 0,
              lambda s: C.random_scatter(rng, size=s))]
    return pats


def run(ctx):
    pats = _patterns(ctx.quick)
    sizes = (4, 8, 16) if not ctx.quick else (4,)

    def point(size, rule, pattern):
        family, label, param, make = pattern
        a = C.analyze(make(size), size=size, rule=rule)
        return {"family": family, "pattern": label, "param": param,
                "efficiency_pct": round(a.efficiency, 2), "transactions": int(a.transactions),
                "sectors": int(a.sectors), "replays": int(a.replays)}

    records = ctx.sweep({"size": sizes, "rule": C.RULES, "pattern": pats}, point)
    return ctx.results(records, columns=[
        ("size", "bytes"), ("rule", "rule"), ("family", "family"), ("pattern", "pattern"),
        ("efficiency_pct", "efficiency %"), ("transactions", "transactions"),
        ("sectors", "sectors"), ("replays", "replays")])


def _strided(records, rule) -> dict:
    return {r["param"]: r["efficiency_pct"] for r in records
            if r["family"] == "strided" and r["size"] == 4 and r["rule"] == rule}


def findings(res) -> list:
    notes = []
    for rule in C.RULES:
        by = _strided(res.records, rule)
        notes.append(f"{rule}: 4-byte stride 1 -> {by.get(1)} %, stride 2 -> {by.get(2)} %, "
                     f"stride 32 -> {by.get(32)} % efficient")
    return notes


def plot_spec(res) -> PlotSpec:
    worst = {rule: _strided(res.records, rule).get(32) for rule in C.RULES}
    return PlotSpec(x="param", y=["efficiency_pct"], hue="rule", logx=True,
                    labels={"kepler_caching": "Kepler caching (128 B lines)",
                            "kepler_noncaching": "Kepler non-caching (32 B segments)",
                            "sectors": "sectors (Maxwell and later)"},
                    xlabel="stride (elements), 4-byte accesses", ylabel="efficiency, %",
                    title=f"Strided warps at stride 32: 128-byte lines keep "
                          f"{worst['kepler_caching']:g} %, 32-byte segments and sectors "
                          f"{worst['sectors']:g} % (the two lie on one line)",
                    where={"family": "strided", "size": 4})
