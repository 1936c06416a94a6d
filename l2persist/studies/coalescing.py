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
    strided = [r for r in records if r["family"] == "strided" and r["size"] == 4]
    notes = []
    for rule in C.RULES:
        by = {r["param"]: r["efficiency_pct"] for r in strided if r["rule"] == rule}
        notes.append(f"{rule}: 4-byte stride 1 -> {by.get(1)} %, stride 2 -> {by.get(2)} %, "
                     f"stride 32 -> {by.get(32)} % efficient")
    plot = PlotSpec(x="param", y=["efficiency_pct"], hue="rule", logx=True,
                    xlabel="stride (elements), 4-byte accesses", ylabel="efficiency, %",
                    title="Strided warps under the three rules",
                    where={"family": "strided", "size": 4})
    return ctx.results(records, notes=notes, plot=plot, columns=[
        ("size", "bytes"), ("rule", "rule"), ("family", "family"), ("pattern", "pattern"),
        ("efficiency_pct", "efficiency %"), ("transactions", "transactions"),
        ("sectors", "sectors"), ("replays", "replays")])
