"""The C tuner replayed on measured landscapes, without a GPU (the tuner's bars: the grid's
best within noise, "don't" where nothing helps).

Each grid file under ``tests/data/`` is a study's stored output, measured on a GPU. A fake
``evaluate`` answers the search from the grid (see ``Landscape``) times a noise model, through
``_core.tune_search`` with the measuring device's geometry as ``facts``. The bars, over >= 50
seeds per landscape and noise model:

* at least 95 % of seeds recommend a configuration whose true time is within 2 % of the best
  configuration of the tuner's whole space on that landscape;
* at most 5 % of seeds say "helps" on a landscape whose best gain is under half of min_gain.

The mutation tests at the end run the search with parts switched off (``phases``, a mask for
tests only, ``l2p_tune.h``) and show that each part is needed for a bar.

Run ``python3 tests/test_tune_replay.py`` for the table of rates per landscape.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from l2persist import _core

MIB = 1 << 20
DATA = Path(__file__).parent / "data"
SEEDS = 50
HIT_RATIOS = [(i + 1) / 10 for i in range(10)]
NORMAL, STREAMING, PERSISTING = 0, 1, 2

# The phase bits of l2p_tune.h.
PH_HIT_RATIO, PH_PROPS, PH_POLISH, PH_RECHECK, PH_INTERVAL, PH_MIN_GAIN = (1 << i for i in range(6))
PH_ALL = (1 << 6) - 1


# ---- the grids ------------------------------------------------------------------------------

def _persistence_points(records):
    """The persistence study: hot/cold, rw and ro, hot sizes x set-aside x hitRatio. Its
    "tune's pick" rows are off the grid and left out."""
    for r in records:
        if "pick" in r or r.get("tune_pick"):
            continue
        key = f"{r['mode']} {r['hot_mib']} MiB"
        yield key, r["hot_mib"] * MIB, r["set_aside"], r["hit_ratio"], r["ms"]


def _guide_points(records):
    """The guide's example (A x10 + B): limit 0, the default, the guide's set-aside (the max)
    with and without its window (hitRatio 0.6 over data1, 37 MiB)."""
    meta_max = 39321600
    where = {"limit0": (0, None), "default": (11796480, None), "set_aside": (meta_max, None),
             "window": (meta_max, 0.6)}
    for r in records:
        s, h = where[r["key"]]
        yield "A x10 + B", 37 * MIB, s, h, 10 * r["A_ms"] + r["B_ms"]


# One row per study file: a new study grid is one more row. Files with "points" (the grids
# the integrator measured: every set-aside level x hit ratio x properties) need none.
GRIDS = {
    "h200-persistence.json": _persistence_points,
    "h100-persistence.json": _persistence_points,
    "h200-guide-example.json": _guide_points,
}


def _granule(meta):
    """The driver's set-aside step. Stored results before it was recorded: a tenth of the max
    (3.75 MiB on the H200, 3.125 MiB on the H100, as the set-aside levels show)."""
    return meta.get("persisting_granule") or meta["persisting_l2_cache_max_size"] // 10


class _Surface:
    """What every landscape gives the replay: the device's facts, the target, the hit ratios
    the tuner may ask for, a cost per configuration and the space it searches."""

    hit_ratios = HIT_RATIOS

    @property
    def facts(self):
        return (self.granule, self.pmax, self.default)

    def space(self):
        """Every configuration the tuner can ask for (one target)."""
        for s in _core.set_aside_levels(*self.facts):
            yield {"set_aside": s, "windows": [None]}
            for h in self.hit_ratios:
                for hp in (PERSISTING, NORMAL):
                    for mp in (STREAMING, NORMAL):
                        yield {"set_aside": s, "windows": [
                            {"hit_ratio": h, "hit_prop": hp, "miss_prop": mp}]}

    def best(self):
        return min(self.cost(c) for c in self.space())

    def baseline(self):
        no = {"set_aside": 0, "windows": [None]}
        return min(self.cost(no), self.cost(dict(no, set_aside=self.default)))

    def gain(self):
        """The best speedup over the better baseline anywhere in the space."""
        return self.baseline() / self.best()


class GridLandscape(_Surface):
    """A grid measured at every point of the tuner's space (the integrator's grid-*.json): the
    time of a configuration is the measured median, no interpolation. A grid that left out a
    property pair answers hitProp NORMAL with the no-window time (nothing persists) and a
    missing missProp with the measured one, and a window at set-aside 0 (not measured: nothing
    can persist) with the no-window time; it offers only the hit ratios it measured."""

    def __init__(self, fname, d):
        self.name = f"{d['device']} {d['workload']}"
        self.device, self.target_bytes = d["device"], d["target_bytes"]
        self.granule, self.pmax, self.default = d["granule"], d["persisting_max"], d["default_limit"]
        self.table = {}
        for p in d["points"]:
            w = p["window"]
            key = (p["set_aside"], None) if w is None else (
                p["set_aside"], round(w["hit_ratio"], 6), w["hit_prop"], w["miss_prop"])
            self.table[key] = p["ms"]
        self.hit_ratios = sorted({k[1] for k in self.table if k[1] is not None})
        assert list(_core.set_aside_levels(*self.facts)) == d["levels"], fname

    def cost(self, config):
        s, w = config["set_aside"], config["windows"][0]
        if w is None:
            return self.table[(s, None)]
        h, hp, mp = round(w["hit_ratio"], 6), int(w["hit_prop"]), int(w["miss_prop"])
        for key in ((s, h, hp, mp), (s, h, hp, STREAMING)):
            if key in self.table:
                return self.table[key]
        if hp == NORMAL or s == 0:  # nothing persists: the no-window time
            return self.table[(s, None)]
        raise KeyError(f"{self.name}: no point at {config}")


class Landscape(_Surface):
    """A study's grid (hit ratios x a few set-asides) as a cost surface over the tuner's whole
    space.

    Between grid points the time is interpolated linearly in the set-aside and, for a window,
    bilinearly in (set-aside, hitRatio), with two exact anchors that need no measurement: at
    set-aside 0 a window persists nothing (the time is limit 0's), and at hitRatio 0 it is the
    no-window time at that set-aside. The real landscape is non-monotone between the measured
    points as well; the interpolated one keeps the measured shape: the set-aside penalty
    without a window, the thrash of a window larger than the set-aside, and the optimum at
    the measured points. hitProp NORMAL persists nothing (the no-window time); missProp has
    no measured effect in these studies.
    """

    def __init__(self, name, device, target_bytes, granule, pmax, default, none_s, none_ms,
                 win_s, win_h, win_ms):
        self.name, self.device, self.target_bytes = name, device, target_bytes
        self.granule, self.pmax, self.default = granule, pmax, default
        self.none_s, self.none_ms = none_s, none_ms
        self.win_s, self.win_h, self.win_ms = win_s, win_h, win_ms

    def none(self, s):
        return float(np.interp(s, self.none_s, self.none_ms))

    def window(self, s, h):
        s = min(max(s, self.win_s[0]), self.win_s[-1])
        h = min(max(h, self.win_h[0]), self.win_h[-1])
        i = min(np.searchsorted(self.win_s, s, side="right") - 1, len(self.win_s) - 2)
        j = min(np.searchsorted(self.win_h, h, side="right") - 1, len(self.win_h) - 2)
        ts = (s - self.win_s[i]) / (self.win_s[i + 1] - self.win_s[i])
        th = (h - self.win_h[j]) / (self.win_h[j + 1] - self.win_h[j])
        m = self.win_ms
        return float((1 - ts) * ((1 - th) * m[i, j] + th * m[i, j + 1])
                     + ts * ((1 - th) * m[i + 1, j] + th * m[i + 1, j + 1]))

    def cost(self, config):
        s = config["set_aside"]
        w = config["windows"][0]
        if w is None or int(w["hit_prop"]) == NORMAL:
            return self.none(s)
        return self.window(s, w["hit_ratio"])


def _build(name, device, meta, pts):
    target = pts[0][1]
    none, win = {}, {}
    for p in pts:
        s, h, ms = p[2], p[3], p[4]
        if h is None:
            none.setdefault(s, []).append(ms)
        else:
            win.setdefault((s, h), []).append(ms)
    none_s = np.array(sorted(none), dtype=float)
    none_ms = np.array([np.mean(none[s]) for s in sorted(none)])
    ws = sorted({0} | {s for s, _ in win})
    wh = sorted({0.0} | {h for _, h in win})
    grid = np.empty((len(ws), len(wh)))
    for i, s in enumerate(ws):
        for j, h in enumerate(wh):
            if s == 0:
                grid[i, j] = float(np.interp(0, none_s, none_ms))
            elif h == 0:
                grid[i, j] = float(np.interp(s, none_s, none_ms))
            elif (s, h) in win:
                grid[i, j] = float(np.mean(win[(s, h)]))
            else:
                raise ValueError(f"{name}: the grid misses set-aside {s}, hitRatio {h}")
    return Landscape(name, device, target, _granule(meta), meta["persisting_l2_cache_max_size"],
                     meta["default_persisting_l2_limit"], none_s, none_ms, np.array(ws, float),
                     np.array(wh, float), grid)


def load_landscapes():
    out = []
    for fname in sorted(p.name for p in DATA.glob("*.json")):
        d = json.loads((DATA / fname).read_text())
        if "points" in d:
            out.append(GridLandscape(fname, d))
            continue
        meta = d["meta"]
        by = {}
        for p in GRIDS[fname](d["records"]):
            by.setdefault(p[0], []).append(p)
        device = meta.get("device_name", "?")
        for key, pts in by.items():
            out.append(_build(f"{device} {d.get('study', fname)} {key}", device, meta, pts))
    return out


LANDSCAPES = load_landscapes()


# ---- noise ----------------------------------------------------------------------------------

class Noise:
    """Multiplicative noise of `level` on every sample.

    ``indep``: each sample x (1 + level * u), u uniform in [-1, 1].
    ``drift``: a slow drift of the device's speed, an AR(1) process over samples (correlation
    0.99 per sample, about 10 evaluations of 10 samples) with standard deviation level / 2,
    plus independent noise of level / 2: configurations measured at different times of the
    search differ by the drift.
    """

    def __init__(self, kind, level, seed):
        self.kind, self.level = kind, level
        self.rng = np.random.default_rng(seed)
        self.d = 0.0

    def __call__(self, n):
        u = self.rng.uniform(-1, 1, n)
        if self.kind == "indep":
            return 1 + self.level * u
        rho, sd = 0.99, self.level / 2
        out = np.empty(n)
        for i in range(n):
            self.d = rho * self.d + math.sqrt(1 - rho * rho) * sd * self.rng.standard_normal()
            out[i] = 1 + self.d + self.level / 2 * u[i]
        return out

    def __repr__(self):
        return f"{self.kind} {self.level:.0%}"


NOISES = [("indep", 0.02), ("indep", 0.05), ("drift", 0.02), ("drift", 0.05)]


def replay(land, noise, seed, phases=PH_ALL, cost=None, **kw):
    cost = cost or land.cost
    calls = []

    def evaluate(config, n):
        calls.append(config)
        return list(cost(config) * noise(n))
    kw.setdefault("hit_ratios", land.hit_ratios)
    # The bars here are the search's and the confirmation's; the recheck of a recommended pick
    # in fresh rounds (tune's default, l2p_tune's recheck_pick) is tested on its own
    # (tests/c/test_tune.c, test_tune_cpu.py). With it, marginal gains (1.5-2 %) under 5 %
    # noise are dropped in some seeds (8 of 50 on the H100's ro 16 MiB cell): a second test.
    kw.setdefault("recheck_rounds", 0)
    r = _core.tune_search(evaluate, None, [land.target_bytes], [0], facts=land.facts,
                          seed=seed + 1, phases=phases, **kw)
    r["calls"] = len(calls)
    return r


def rates(land, kind, level, phases=PH_ALL, seeds=SEEDS, cost=None, best=None):
    """(share of seeds within 2 % of the best, share that said "helps")."""
    cost = cost or land.cost
    best = best if best is not None else land.best()
    near = helps = 0
    for seed in range(seeds):
        r = replay(land, Noise(kind, level, 1000 + seed), seed, phases, cost=cost)
        near += cost(r["recommended"]) <= 1.02 * best
        helps += r["persistence_helps"]
    return near / seeds, helps / seeds


# ---- the bars on the measured landscapes ----------------------------------------------------

# Cells that miss a bar, with the rate they reach (pinned 4 points below, so that a
# regression shows). The causes:
# - uniform noise of +-5 % per sample moves a median of 10 samples by +-1.4 %, as much as the
#   differences between the candidates near the top of a landscape whose best gain is 2-8 %
#   (persistence rw 32, ro 16, ro 32; hot/cold rw 16/32 on the H100): the search and the
#   recheck cannot tell them apart, and the recheck's preference for the smaller set-aside
#   within noise (the smallest set-aside among the rechecked) gives up part of the rest;
# - the histograms at 0.8 of L2 have a broad plateau (set-aside 5-8 granules, within 1 % of
#   each other) and a sharp optimum one granule below the max (hitRatio 0.8 only, 6 % better),
#   just before the cliff at the max: the ridge and the axis steps settle on the plateau in
#   8-18 % of seeds even at 2 % noise;
# - flat read-only 8 MiB (a real gain of 0.3-0.4 %) with drifting noise of 5 %: 3 of 50 seeds
#   say "helps" (bar: 5 %).
# Every other cell meets the bars: >= 95 % within 2 %, <= 5 % "helps" where the best gain is
# under 0.5 %.
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
I2, I5, D2, D5 = NOISES
SHORT = {  # (landscape, noise): (share within 2 % at least, share "helps" at most)
    (f"{H100} histogram80", I2): (0.92, None), (f"{H100} histogram80", I5): (0.64, None),
    (f"{H100} histogram80", D5): (0.86, None),
    (f"{H100} hotcold-rw16", I5): (0.94, None),
    (f"{H100} hotcold-rw32", I5): (0.94, None), (f"{H100} hotcold-rw32", D5): (0.90, None),
    (f"{H100} persistence rw 32 MiB", I5): (0.78, None),
    (f"{H100} persistence rw 32 MiB", D5): (0.84, None),
    (f"{H100} persistence ro 16 MiB", I2): (0.94, None),
    (f"{H100} persistence ro 16 MiB", I5): (0.60, None),
    (f"{H100} persistence ro 16 MiB", D5): (0.76, None),
    (f"{H100} persistence ro 32 MiB", I5): (0.84, None),
    (f"{H100} persistence ro 8 MiB", D5): (None, 0.06),
    (f"{H200} histogram80", I2): (0.82, None), (f"{H200} histogram80", I5): (0.46, None),
    (f"{H200} histogram80", D2): (0.88, None), (f"{H200} histogram80", D5): (0.72, None),
    (f"{H200} persistence rw 32 MiB", I5): (0.72, None),
    (f"{H200} persistence rw 32 MiB", D5): (0.82, None),
    (f"{H200} persistence ro 32 MiB", I5): (0.90, None),
    (f"{H200} persistence ro 8 MiB", D5): (None, 0.06),
}
SLACK = 0.04


def _bars(land, kind, level):
    near, helps = SHORT.get((land.name, (kind, level)), (None, None))
    return (0.95 if near is None else near - SLACK), (0.05 if helps is None else helps + SLACK)


def test_fixtures_load():
    names = [land.name for land in LANDSCAPES]
    assert len(names) >= 33, names
    assert {land.device for land in LANDSCAPES} == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}
    land = next(x for x in LANDSCAPES if x.name == "NVIDIA H200 persistence rw 32 MiB")
    # the grid as stored: limit 0, the default, and the window grid at 37.5 MiB
    assert land.none(0) == pytest.approx(1.4459, abs=1e-4)
    assert land.window(37.5 * MIB, 1.0) == pytest.approx(1.4696, abs=1e-4)
    assert land.window(0, 0.7) == land.none(0)
    assert land.window(18.75 * MIB, 0) == pytest.approx(land.none(18.75 * MIB))
    # the real shape: 2x slower at the max set-aside without a window (read-write 8 MiB)
    rw8 = next(x for x in LANDSCAPES if x.name == "NVIDIA H200 persistence rw 8 MiB")
    assert rw8.none(rw8.pmax) > 2 * rw8.none(0)


_CELLS = {}


def cell_rates(land, kind, level):
    """rates() of one cell with the whole search, computed once per run (two tests read it)."""
    key = (land.name, kind, level)
    if key not in _CELLS:
        _CELLS[key] = rates(land, kind, level)
    return _CELLS[key]


@pytest.mark.parametrize("kind,level", NOISES, ids=lambda v: f"{v}")
@pytest.mark.parametrize("land", LANDSCAPES, ids=lambda x: x.name)
def test_replay_within_2_percent(land, kind, level):
    near, helps = cell_rates(land, kind, level)
    near_bar, helps_bar = _bars(land, kind, level)
    assert near >= near_bar, f"{land.name}, {kind} {level:.0%}: {near:.0%} of seeds within 2 %"
    if land.gain() < 1.005:
        assert helps <= helps_bar, f"{land.name}: false 'helps' in {helps:.0%} of seeds"


def test_short_cells_are_few():
    """The exceptions stay exceptions, measured: the cells that miss the plain bars (>= 95 %
    within 2 %; <= 5 % "helps" where the best gain is under 0.5 %) are exactly SHORT's (a
    cell that meets them again loses its lower bar, so that a later regression there shows),
    at most 21 of the 132; at 2 % drifting noise only the 0.8-of-L2 histogram on the H200."""
    missed = set()
    for land in LANDSCAPES:
        for noise in NOISES:
            near, helps = cell_rates(land, *noise)
            if near < 0.95 or (land.gain() < 1.005 and helps > 0.05):
                missed.add((land.name, noise))
    assert missed == set(SHORT), (sorted(missed - set(SHORT)), sorted(set(SHORT) - missed))
    assert len(missed) <= 21
    assert [k for k in missed if k[1] == D2] == [(f"{H200} histogram80", D2)]


# ---- synthetic landscapes: what each part of the search is for -----------------------------

def _land(name):
    return next(x for x in LANDSCAPES if x.name == f"NVIDIA H200 persistence {name}")


def _flat(config):
    return 1.0


def _tiny_gain(config):
    """A real gain of 0.4 %, below min_gain: "helps" would be a false claim."""
    w = config["windows"][0]
    on = w is not None and int(w["hit_prop"]) == PERSISTING and config["set_aside"] > 0
    return 0.996 if on else 1.0


def _normal_miss(config):
    """read-only 32 MiB, where missProp NORMAL is 5 % faster than STREAMING."""
    w = config["windows"][0]
    t = _land("ro 32 MiB").cost(config)
    if w is not None and int(w["hit_prop"]) == PERSISTING and int(w["miss_prop"]) == NORMAL:
        t *= 0.95
    return t


def _off_ridge(config):
    """read-write 16 MiB with a smooth optimum 12 % deep at set-aside 7.5 MiB, hitRatio 0.9,
    far from the ridge (hitRatio 0.47 there)."""
    w = config["windows"][0]
    t = _land("rw 16 MiB").cost(config)
    if w is not None and int(w["hit_prop"]) == PERSISTING:
        ds = (config["set_aside"] - 7.5 * MIB) / (7.5 * MIB)
        dh = (w["hit_ratio"] - 0.9) / 0.3
        t *= 1 - 0.12 * math.exp(-(ds * ds + dh * dh))
    return t


def _isolated(config):
    """Flat, but one grid point off the ridge (set-aside 7.5 MiB, hitRatio 1.0 for 32 MiB;
    the ridge there is 0.2) is 15 % faster, its neighbours not at all."""
    w = config["windows"][0]
    hit = (w is not None and int(w["hit_prop"]) == PERSISTING
           and config["set_aside"] == 2 * 3932160 and w["hit_ratio"] == 1.0)
    return 0.85 if hit else 1.0


def _check(land, cost, noises, phases, helps_bar=None):
    """Failures of the bars for one synthetic surface: within 2 % in >= 95 % of seeds, and
    with `helps_bar`, "helps" in at most that share."""
    best = min(cost(c) for c in land.space())
    out = []
    for kind, level in noises:
        near, helps = rates(land, kind, level, phases, cost=cost, best=best)
        if near < 0.95:
            out.append(f"{kind} {level:.0%}: {near:.0%} within 2 %")
        if helps_bar is not None and helps > helps_bar:
            out.append(f"{kind} {level:.0%}: 'helps' in {helps:.0%}")
    return out


CHECKS = {
    "flat": lambda ph: _check(_land("ro 32 MiB"), _flat, NOISES, ph, helps_bar=0.05),
    "tiny_gain": lambda ph: _check(_land("ro 32 MiB"), _tiny_gain,
                                   [("indep", 0.005), ("drift", 0.005)], ph, helps_bar=0.05),
    "normal_miss_wins": lambda ph: _check(_land("ro 32 MiB"), _normal_miss, NOISES[::2], ph),
    "off_ridge": lambda ph: _check(_land("rw 16 MiB"), _off_ridge, NOISES[::2], ph),
}

# Each mutation of the tuner's phases and the check that catches it.
MUTATIONS = {
    "ridge_only": (PH_ALL & ~(PH_HIT_RATIO | PH_PROPS | PH_POLISH), "normal_miss_wins"),
    "no_props": (PH_ALL & ~PH_PROPS, "normal_miss_wins"),
    "no_polish": (PH_ALL & ~PH_POLISH, "off_ridge"),
    "no_interval": (PH_ALL & ~PH_INTERVAL, "flat"),
    "no_min_gain": (PH_ALL & ~PH_MIN_GAIN, "tiny_gain"),
    "helps_whenever_faster": (PH_ALL & ~(PH_INTERVAL | PH_MIN_GAIN), "flat"),
}


@pytest.mark.parametrize("name", CHECKS)
def test_synthetic_bars(name):
    assert CHECKS[name](PH_ALL) == []


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_mutation_is_caught(mutation):
    phases, check = MUTATIONS[mutation]
    assert CHECKS[check](phases), f"{mutation} survives the {check} check"


def test_isolated_optimum_is_not_found():
    """The documented limit (tune's docstring): an optimum at one grid point off the ridge,
    with no gradient around it, is found only if the search happens to measure that point;
    it measures 12-16 of the ~400 points. The tuner then says "don't" (nothing else helps)."""
    land = _land("ro 32 MiB")
    found = helps = 0
    for seed in range(SEEDS):
        r = replay(land, Noise("indep", 0.02, 1000 + seed), seed, cost=_isolated)
        found += _isolated(r["recommended"]) < 1.0
        helps += r["persistence_helps"]
    assert found == helps == 0


def test_recheck_prefers_the_smaller_set_aside():
    """Every set-aside from 4 granules up is as fast (within noise) with a window at hitRatio
    1; among the rechecked candidates within noise the smallest set-aside wins, so the picks
    are smaller than the fastest-median picks of a search without the recheck."""
    land = _land("ro 32 MiB")
    g = land.granule

    def plateau(config):
        w = config["windows"][0]
        if w is None or int(w["hit_prop"]) != PERSISTING or w["hit_ratio"] != 1.0:
            return 1.0
        return 0.899 if config["set_aside"] == land.pmax else 0.90 if config["set_aside"] >= 4 * g else 0.95
    with_recheck, without, preferred = [], [], 0
    for seed in range(20):
        r = replay(land, Noise("indep", 0.01, 1000 + seed), seed, cost=plateau,
                   hit_ratios=[0.5, 1.0])
        assert r["persistence_helps"] and r["rechecked"] >= 2
        with_recheck.append(r["recommended"]["set_aside"] / g)
        preferred += r["smaller_preferred"]
        r = replay(land, Noise("indep", 0.01, 1000 + seed), seed, PH_ALL & ~PH_RECHECK,
                   cost=plateau, hit_ratios=[0.5, 1.0])
        without.append(r["recommended"]["set_aside"] / g)
    assert preferred >= 10
    assert np.mean(with_recheck) < np.mean(without) - 0.5, (with_recheck, without)


def test_verdict_rule():
    """The better-baseline rule through _core.tune_verdict (one place, l2p_tune_verdict)."""
    rng = np.random.default_rng(5)
    a = 1.0 + 0.005 * rng.standard_normal(30)
    b = 0.98 + 0.005 * rng.standard_normal(30)
    c = 0.90 + 0.005 * rng.standard_normal(30)
    v = _core.tune_verdict(a, b, c)
    assert v["baseline"] == "default" and v["helps"] is True
    assert v["baseline_ms"] == pytest.approx(np.median(b))
    assert v["candidate_ms"] == pytest.approx(np.median(c))
    assert v["ci_low"] <= v["speedup"] == pytest.approx(np.median(b) / np.median(c))
    assert v["speedup"] <= v["ci_high"]
    # a gain under min_gain is no help, however sure
    v = _core.tune_verdict(a, a * 1.0, a / 1.005)
    assert v["baseline"] == "limit0" and v["helps"] is False and v["ci_low"] > 1
    assert _core.tune_verdict(a, a, a / 1.005, min_gain=0.001)["helps"] is True
    # rounds: a drift between rounds widens the interval
    drift = np.repeat([1.0, 1.03, 0.97], 10)
    base, cand = 1.0 * drift, 0.99 * np.roll(drift, 10)
    wide = _core.tune_verdict(base, base, cand, rounds=3)
    narrow = _core.tune_verdict(base, base, cand)
    assert wide["ci_high"] - wide["ci_low"] >= narrow["ci_high"] - narrow["ci_low"]
    with pytest.raises(ValueError, match="rounds"):
        _core.tune_verdict(a, a, c, rounds=7)
    with pytest.raises(ValueError, match="candidate"):
        _core.tune_verdict(a, a, [1.0, -1.0])
    with pytest.raises(ValueError, match="default"):
        _core.tune_verdict(a, [], c)
    with pytest.raises(ValueError, match="min_gain"):
        _core.tune_verdict(a, a, c, min_gain=1.5)


if __name__ == "__main__":
    import sys
    phases = int(sys.argv[1], 0) if len(sys.argv) > 1 else PH_ALL
    for land in LANDSCAPES:
        row = [f"{land.name:45s} gain {land.gain():.3f}"]
        for kind, level in NOISES:
            near, helps = rates(land, kind, level, phases)
            row.append(f"{kind[0]}{level:.0%} {near:4.0%}/{helps:4.0%}")
        print("  ".join(row), flush=True)
