"""The coalescing model's sectors rule against the counters (global load/store requests and
sectors) over several hundred generated patterns. The bar: every pattern matches exactly."""

from __future__ import annotations

import numpy as np

from .. import coalescing as C
from ..results import PlotSpec

TITLE = "The coalescing model's sectors rule against the hardware's counters"
NEEDS_GPU = True
NEEDS = ("gpu", "counters")
NOTEBOOK = False
SOURCE = "l2persist.coalescing: the sectors rule predicts requests and sectors exactly."
ROW = "the `sectors` rule vs the counters on generated patterns; bar: every pattern matches"


def run(ctx):
    rows = C.hardware_check(ctx.device, rng=np.random.default_rng(2026))
    records = [{"pattern": ", ".join(f"{k}={v}" for k, v in r["pattern"].items()),
                **{f"predicted_{k}": v for k, v in r["predicted"].items()},
                **{f"measured_{k}": v for k, v in r["measured"].items()},
                "match": bool(r["match"])} for r in rows]
    return ctx.results(records, columns=[("pattern", "pattern"), ("match", "match"),
                                         ("predicted_load_sectors", "model load sectors"),
                                         ("measured_load_sectors", "measured load sectors")])


def findings(res) -> list:
    misses = [r for r in res.records if not r["match"]]
    n = len(res.records)
    return [f"sectors rule: {n - len(misses)} of {n} generated patterns match exactly"] + [
        f"differs: {r['pattern']}" for r in misses[:20]]


def bars(res) -> list:
    n = len(res.records)
    hits = sum(r["match"] for r in res.records)
    return [(f"the model matches the counters on every pattern ({hits} of {n})", hits == n)]


def plot_spec(res) -> PlotSpec:
    return PlotSpec(x="predicted_load_sectors", y=["measured_load_sectors"], hue="match",
                    kind="scatter",
                    labels={"True": "model = counters", "False": "model differs"},
                    xlabel="load sectors, model", ylabel="load sectors, counters",
                    title=f"Sectors rule: {sum(r['match'] for r in res.records)} of "
                          f"{len(res.records)} patterns exact")
