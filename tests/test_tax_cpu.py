"""The set-aside tax model from Python, without a GPU: predictions against the measurements
(held-out knees within 4 MiB), the fits, bad input, the companion-stream term and its
sweep / fit / validation analysis, tax.measure's loop (a fake device and timer) and what
`python -m l2persist check` says it can see."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

import l2persist
from l2persist import tax

MIB = 1 << 20
H200 = {"name": "H200", "compute_capability": (9, 0), "l2_cache_size": 60 * MIB,
        "persisting_l2_cache_max_size": 37 * MIB + MIB // 2}
H100 = {"name": "H100", "compute_capability": (9, 0), "l2_cache_size": 50 * MIB,
        "persisting_l2_cache_max_size": 31 * MIB + MIB // 4}


def test_held_out_knees_within_4_mib():
    knees = tax.measurements()[0]
    held_out = [r for r in knees if not r["fit"]]
    assert len(held_out) >= 12
    for r in knees:
        chip = {"compute_capability": r["compute_capability"],
                "l2_cache_size": int(r["l2_mib"] * MIB)}
        p = tax.predict(chip, int(r["set_aside_mib"] * MIB))
        if not r["knee_hi_mib"]:  # none measured: none predicted
            assert not p.taxed, r
            continue
        k = p.knee_bytes / MIB
        assert p.taxed and max(r["knee_lo_mib"] - k, k - r["knee_hi_mib"], 0) <= 4, (r, k)


def test_prediction_at_the_maximum():
    p = tax.predict(H200, H200["persisting_l2_cache_max_size"])
    assert p.set_aside == 37 * MIB + MIB // 2 and p.granule == 60 * MIB // 16
    assert p.exact and p.basis == "H200" and p.taxed
    assert 8 * MIB < p.knee_bytes <= 12 * MIB
    assert 1.2 < p.capacity_coeff < 1.4
    # measured (the H200 rows of csrc/core/l2p_tax.c): 4.48x at 32 MiB, 4.78x at 48 MiB
    assert p.slowdown_at(32 * MIB) == pytest.approx(4.48, rel=0.3)
    assert p.slowdown_at(48 * MIB) == pytest.approx(4.78, rel=0.3)
    assert 1.0 <= p.slowdown_at(16 * MIB, "read") < 1.1
    assert 1.1 <= p.slowdown_at(16 * MIB, "atomic") <= 1.9
    assert p.slowdown_at(4 * MIB) == 1.0
    assert "slow down" in p.summary() and "MiB" in p.summary()
    q = tax.predict(H100, H100["persisting_l2_cache_max_size"])
    assert q.slowdown_at(32 * MIB) == pytest.approx(4.60, rel=0.3)


def test_rounds_to_granules_and_small_set_asides_are_free():
    p = tax.predict(H200, 1)
    assert p.set_aside == 60 * MIB // 16
    z = tax.predict(H200, 0)
    assert z.knee_bytes == z.base_bytes and not z.taxed and z.slowdown_at(200 * MIB) == 1.0
    assert z.summary() == "no set-aside: no tax"
    d = tax.predict(H200, 11796480)  # the driver's default: 3 granules
    assert not d.taxed and d.slowdown_at(55 * MIB) == 1.0
    assert d.summary().startswith("model: set-aside 11.25 MiB: no tax (it starts at 25% of the L2")


def test_unmeasured_chip_takes_the_closest():
    p = tax.predict({"compute_capability": (10, 0), "l2_cache_size": 126 * MIB}, 40 * MIB)
    assert not p.exact and p.basis == "H200" and p.taxed
    assert p.knee_bytes == pytest.approx(126 * MIB - p.capacity_coeff * p.set_aside, abs=1)
    assert "closest measured chip" in p.summary()


def test_fits_recover_their_constants():
    assert tax.fit_capacity(100, [10, 20], [85, 70]) == pytest.approx(1.5)
    # slowdowns the model itself makes, then P back
    s, ws, P = [20, 20, 20], [80, 90, 120], 3.0
    sl = [(1 + P * max(0, 1 - 70 / w)) / (1 + P * max(0, 1 - 100 / w)) for w in ws]
    assert tax.fit_penalty(100, 1.5, s, ws, sl) == pytest.approx(P)
    assert tax.measured_knee([4, 8, 12], [1.0, 1.3, 2.0]) == (4.0, 8.0)
    assert tax.measured_knee([4, 8], [1.0, 1.0]) == (8.0, 0.0)


@pytest.mark.parametrize("args, exc, words", [
    ((H200, -1), ValueError, "set_aside"),
    ((H200, 38 * MIB), ValueError, "set_aside"),
    ((H200, 1.5), TypeError, "set_aside"),
    ((H200, True), TypeError, "set_aside"),
    (({"compute_capability": (7, 0), "l2_cache_size": 6 * MIB}, 0),
     l2persist.NotSupportedError, "8.0"),
    (({"l2_cache_size": 6 * MIB}, 0), ValueError, "compute_capability"),
    (("H200", 0), TypeError, "device_or_properties"),
])
def test_bad_input(args, exc, words):
    with pytest.raises(exc, match=words):
        tax.predict(*args)


NO_MAX = {"compute_capability": (9, 0), "l2_cache_size": 60 * MIB}


@pytest.mark.parametrize("change, set_aside, exc, message", [
    # each key's bad value is named by its key, with the allowed range
    ({"l2_cache_size": float("nan")}, 0, TypeError,
     r"l2_cache_size: expected an int \(bytes\) in \[1, 2\^63 - 1\], got float"),
    ({"l2_cache_size": 0}, 0, ValueError, r"l2_cache_size: 0 is outside \[1, "),
    ({"granule": "x"}, 0, TypeError, r"granule: expected an int \(bytes\) in \[0, "),
    ({"persisting_l2_cache_max_size": -5}, 0, ValueError,
     r"persisting_l2_cache_max_size: -5 is outside \[0, "),
    ({"compute_capability": None}, 0, TypeError,
     r"compute_capability: expected \(major, minor\), two ints, got None"),
    ({"compute_capability": (9,)}, 0, ValueError,
     r"compute_capability: expected \(major, minor\), two ints, got \(9,\)"),
    ({"compute_capability": "9.0"}, 0, TypeError,
     r"compute_capability: expected \(major, minor\), two ints, got '9.0'"),
    ({"compute_capability": (9, "0")}, 0, TypeError,
     r"compute_capability: expected an int \(minor\) in \[0, 2\^31 - 1\], got str"),
    # without a persisting maximum the L2 size bounds the set-aside, and the message says so
    ({}, -1, ValueError, r"set_aside: -1 bytes is outside \[0, 62914560\] \(the L2 size: "
                         r"persisting_l2_cache_max_size not given\)"),
    ({"persisting_l2_cache_max_size": 37 * MIB}, -1, ValueError,
     r"set_aside: -1 bytes is outside \[0, 38797312\] \(the device's "
     r"persisting_l2_cache_max_size\)"),
    # an int beyond 64 bits: the same range, the value as given
    ({}, 2**70, ValueError, r"set_aside: 1180591620717411303424 bytes is outside \[0, 62914560\]"),
    ({}, -2**70, ValueError, r"set_aside: -1180591620717411303424 bytes is outside \[0, "),
    ({}, "1", TypeError, r"set_aside: expected an int \(bytes\), got str"),
])
def test_mapping_errors_name_the_key_and_range(change, set_aside, exc, message):
    with pytest.raises(exc, match=message):
        tax.predict({**NO_MAX, **change}, set_aside)


def test_mapping_values_as_json_gives_them():
    """A list for compute_capability (JSON has no tuples) and NumPy ints are taken as given;
    the prediction keeps the checked values."""
    import numpy as np
    p = tax.predict({"compute_capability": [9, 0], "l2_cache_size": np.int64(60 * MIB)},
                    np.int64(30 * MIB))
    assert p.compute_capability == (9, 0) and p.persisting_max == 0
    assert p == tax.predict(NO_MAX, 30 * MIB)


def test_bad_fit_input():
    with pytest.raises(ValueError, match="knees"):
        tax.fit_capacity(100, [10, 20], [85])
    with pytest.raises(ValueError, match="set_aside"):
        tax.fit_capacity(100, [0], [85])
    with pytest.raises(ValueError, match="ascend"):
        tax.measured_knee([8, 4], [1, 2])
    with pytest.raises(TypeError, match="ws"):
        tax.measured_knee(["a"], [1])
    with pytest.raises(ValueError, match="kind"):
        tax.predict(H200, 0).slowdown_at(MIB, "scatter")
    with pytest.raises(ValueError, match="ws_bytes"):
        tax.predict(H200, 0).slowdown_at(-1)


def test_a_curve_is_each_point_of_it_with_one_fit():
    """slowdowns_at gives what slowdown_at gives point by point, for every shape, kind and
    companion, on fresh random working sets, and the curve is the prediction's own: where
    the prediction's misses start at its knee (a shape with rows, or no companion), the curve
    is 1 just below knee_bytes and above 1 past it, and a companion that moves the knee moves
    the curve. A bad point is refused by its index."""
    from l2persist.studies import set_aside_tax as study
    rng = np.random.default_rng()
    pmax = H200["persisting_l2_cache_max_size"]
    for shape in ("random", "atomic", "rows", "sweep"):
        # a shape's own rows (from a synthetic sweep), so that its constants differ from
        # random writes'
        rows = None if shape == "random" else study.shape_rows(synthetic_shape_sweep(shape))
        for companion in (0.0, float(rng.uniform(0.5, 4))):
            p = tax.predict(H200, int(rng.integers(6, pmax // MIB + 1)) * MIB,
                            companion=companion, companion_rows=rows, shape=shape)
            assert p.shape_basis == (None if shape == "random" else "H200")
            ws = sorted(float(w) for w in rng.uniform(0, 96 * MIB, 40))
            for kind in (None, "read", "write", "rmw", "atomic"):
                assert p.slowdowns_at(ws, kind) == [p.slowdown_at(w, kind) for w in ws]
            if p.taxed and (p.shape_basis or companion == 0.0):
                below, past = p.slowdowns_at([p.knee_bytes * (1 - 1e-9),
                                              (p.knee_bytes + p.base_bytes) / 2])
                assert below == 1.0 and past > 1.0, (shape, companion, below, past)
            alone = tax.predict(H200, p.set_aside, companion=0.0, companion_rows=rows,
                                shape=shape)
            if p.taxed and alone.taxed and p.knee_bytes != alone.knee_bytes:
                grid = np.linspace(0, 96 * MIB, 385)
                assert p.slowdowns_at(grid) != alone.slowdowns_at(grid), (shape, companion)
    p = tax.predict(H200, pmax)
    assert p.slowdowns_at([]) == []
    for bad, what in ((-1.0, "item 1 is -1"), (float("nan"), "item 1 is nan"),
                      (float("inf"), "item 1 is inf")):
        with pytest.raises(ValueError, match=f"ws_bytes: {what}, outside \\[0, "):
            p.slowdowns_at([MIB, bad])
    with pytest.raises(TypeError, match="ws_bytes: item 0 is not a number"):
        l2persist._core.tax_slowdowns((9, 0), 60 * MIB, 0, 2 * MIB, 45 * MIB, "write", ["x"])
    with pytest.raises(ValueError, match="kind"):
        p.slowdowns_at([MIB], "scatter")
    for bad in (5, None):
        with pytest.raises(TypeError, match="ws_bytes: expected a sequence of numbers"):
            p.slowdowns_at(bad)
    assert p.slowdowns_at(np.array([MIB, 40 * MIB])) == p.slowdowns_at(w for w in (MIB, 40 * MIB))


class FakeH200(dict):
    """What the study's analysis asks of a device, without a GPU: the model's mapping plus
    .properties."""

    def __init__(self):
        super().__init__(H200)
        self.properties = SimpleNamespace(l2_cache_size=H200["l2_cache_size"],
                                          persisting_l2_cache_max_size=H200[
                                              "persisting_l2_cache_max_size"])


def synthetic_records(true_coeff):
    """Times the model would give on a chip whose knee is L2 - true_coeff * s."""
    l2, granule = H200["l2_cache_size"], H200["l2_cache_size"] // 16
    records = []
    for g in (0, 4, 6, 8, 10):
        s = g * granule
        cap = l2 - true_coeff * s
        for ws in range(4 * MIB, l2 + 8 * MIB + 1, 4 * MIB):
            for kind, p in (("write", 5.0), ("read", 0.0)):
                m = max(0.0, 1 - cap / ws) if s else 0.0
                m0 = max(0.0, 1 - l2 / ws)
                ms = 0.1 * (1 + p * max(m, m0))
                records.append(dict(set_aside=s, kind=kind, pattern="random", ws=ws,
                                    ws_mib=ws / MIB, set_aside_mib=s / MIB, ms=ms))
    return records


def test_study_analysis_finds_the_knees_it_was_given():
    from l2persist.studies import set_aside_tax as study

    dev = FakeH200()
    records = synthetic_records(1.25)
    study._add_slowdowns(records, dev)
    assert all(r["slowdown"] == pytest.approx(1.0) for r in records if r["kind"] == "read")
    notes, summary = study._findings(records, dev, have_counters=False)
    knees = summary["knees"]
    assert [k["set_aside_mib"] for k in knees] == [15, 22.5, 30, 37.5]
    for k in knees:  # the true knee lies within a step (4 MiB) of the measured interval
        true = 60 - 1.25 * k["set_aside_mib"]
        assert max(k["measured_lo_mib"] - true, true - k["measured_hi_mib"], 0) <= 4, k
        assert k["off_mib"] is not None and k["off_mib"] <= 4
    assert summary["refit"]["capacity_coeff"] == pytest.approx(1.25, abs=0.1)
    assert summary["heatmap"]["line"][0] == (15.0, pytest.approx(knees[0]["model_mib"]))
    assert any(n.startswith("write (random) at the maximum set-aside 37.5 MiB") for n in notes)
    assert any("4 of 4 within 4 MiB" in n for n in notes)
    assert any("counters unavailable" in n for n in notes)


# ---- the companion stream ----

def h200_footprint():
    """beta of the H200: the line's 128 bytes over the 4-byte word, times ln(P / 0.15)."""
    return 4 / 128 * math.log(tax.predict(H200, 0).penalty["write"] / 0.15)


def companion_knee(alone, k, cap_mib, beta):
    """The knee with the stream: the table plus min(beta k h, cap) fills the capacity."""
    return max(alone / (1 + beta * k), alone - cap_mib)


def synthetic_companion_rows(cap=0.12, coeff=1.35, cost=0.1):
    """Rows of an H200 whose knees without the stream lie on 60 - coeff s (another line than
    the model's own c) and whose stream leaves companion_knee(...) with a cap of `cap` of the
    L2, costing `cost` per byte written: knees exact to +-1 MiB; 7 granules held out."""
    knees, streams, beta = [], [], h200_footprint()
    for k in (1, 2, 4, 8):
        for g in (5, 7, 10):
            s = g * 3.75
            alone = 60 - coeff * s
            with_ = companion_knee(alone, k, cap * 60, beta)
            knees.append(dict(chip="H200", compute_capability=(9, 0), l2_mib=60.0,
                              set_aside_mib=s, companion=float(k), knee_lo_mib=with_ - 1,
                              knee_hi_mib=with_ + 1, alone_lo_mib=alone - 1,
                              alone_hi_mib=alone + 1, fit=g != 7, source="synthetic"))
        streams.append(dict(chip="H200", compute_capability=[9, 0], l2_mib=60.0,
                            companion=float(k), time_ratio=1 + cost * k, source="synthetic"))
    return {"knees": knees, "streams": streams}


def stream_miss(ws, capacity, k, cap):
    """The root m of ws (1 - m) + min(k ws ln(1/m) / 32, cap) = capacity, by bisection."""
    if ws + cap <= capacity:
        return 0.0
    lo, hi = 0.0, 745.0
    for _ in range(100):
        x = (lo + hi) / 2
        if ws * (1 - math.exp(-x)) + min(k * ws * x / 32, cap) < capacity:
            lo = x
        else:
            hi = x
    return math.exp(-(lo + hi) / 2)


@pytest.mark.parametrize("chip", [H200, H100, NO_MAX])
def test_no_companion_is_todays_model(chip):
    rows = synthetic_companion_rows()
    for g in range(11):
        s = g * chip["l2_cache_size"] // 16
        p = tax.predict(chip, s)
        assert tax.predict(chip, s, companion=0) == p
        q = tax.predict(chip, s, companion=0.0, companion_rows=rows)
        assert q == p and q.companion_bytes == 0 and q.companion_basis is None
        for ws in (8 * MIB, 24 * MIB, 40 * MIB, 70 * MIB):
            for kind in tax.KINDS:
                assert q.slowdown_at(ws, kind) == p.slowdown_at(ws, kind)


def test_companion_without_rows_changes_nothing():
    rows = tax.companion_measurements()
    assert set(rows) == {"knees", "streams", "slowdowns"}
    assert {r["shape"] for r in rows["knees"] + rows["streams"] + rows["slowdowns"]} <= set(
        tax.SHAPES)
    p = tax.predict(H200, 26 * MIB + MIB // 4)
    q = tax.predict(H200, 26 * MIB + MIB // 4, companion=3,
                    companion_rows={"knees": [], "streams": []})
    assert q.companion == 3 and q.companion_basis is None
    assert (q.knee_bytes, q.base_bytes, q.slowdown_at(30 * MIB)) == \
        (p.knee_bytes, p.base_bytes, p.slowdown_at(30 * MIB))
    if not any(r["fit"] for r in rows["knees"]):  # no sweep applied yet: the term is off
        assert tax.predict(H200, 26 * MIB + MIB // 4, companion=3).knee_bytes == p.knee_bytes


def test_companion_knee_is_where_table_and_stream_fill_the_capacity():
    rows = synthetic_companion_rows(cap=0.12, coeff=1.35, cost=0.1)
    s = 7 * 60 * MIB // 16
    p = tax.predict(H200, s)
    q = tax.predict(H200, s, companion=3, companion_rows=rows)
    beta = h200_footprint()
    assert q.companion_basis == "H200"
    assert q.companion_footprint == pytest.approx(beta, rel=1e-12)
    assert q.companion_cap == pytest.approx(0.12, abs=1e-9)
    assert q.companion_coeff == pytest.approx(1.35, rel=1e-9)  # the rows' line, not c
    assert q.capacity_coeff == p.capacity_coeff < 1.3
    assert q.stream_cost == pytest.approx(0.1)
    alone = 60 * MIB - 1.35 * s
    assert q.knee_bytes == pytest.approx(alone / (1 + 3 * beta), abs=2)
    assert q.companion_bytes == pytest.approx(alone - q.knee_bytes, abs=2)
    assert q.base_bytes == pytest.approx(p.base_bytes - 0.12 * 60 * MIB, abs=2)  # capped
    assert q.taxed == p.taxed and q.probe_working_set == p.probe_working_set
    # between the stream's knee and the one without it the stream makes writes pay
    assert q.slowdown_at(24 * MIB) > 1.5 and p.slowdown_at(24 * MIB) == 1.0
    # the slowdown: the stream's misses on its own line, diluted by its own cost
    P, cap = q.penalty["write"], 0.12 * 60 * MIB
    for ws in (10 * MIB, 20 * MIB, 30 * MIB, 40 * MIB, 60 * MIB):
        want = (1.3 + P * stream_miss(ws, alone, 3, cap)) / \
            (1.3 + P * stream_miss(ws, p.base_bytes, 3, cap))
        assert q.slowdown_at(ws) == pytest.approx(want, rel=1e-9)
    assert 1.05 < q.slowdown_at(q.knee_bytes) <= 1.15  # the knee's threshold, diluted
    # the fits behind it
    c = [(r["alone_lo_mib"] + 1) / 60 for r in rows["knees"]]
    ks = [r["companion"] for r in rows["knees"]]
    y = [(r["knee_lo_mib"] + 1) / 60 for r in rows["knees"]]
    assert tax.fit_companion(c, ks, y, footprint=beta) == pytest.approx(0.12, abs=1e-12)
    y = [ci / (1 + beta * k) for ci, k in zip(c, ks)]
    assert tax.fit_companion(c, ks, y, footprint=beta) == 1.0  # no cap binds
    assert tax.fit_stream_cost([1, 2], [1.1, 1.2]) == pytest.approx(0.1)


@pytest.mark.parametrize("kw, exc, message", [
    (dict(companion=-1), ValueError,
     r"companion: -1 bytes streamed per byte written is outside \[0, 1e\+06\]"),
    (dict(companion=float("nan")), ValueError, r"companion: nan is not a finite number"),
    (dict(companion="3"), TypeError, r"companion: expected a real number, got str"),
    (dict(companion=1, companion_rows={"knees": []}), ValueError,
     r"companion_rows: expected a mapping with lists 'knees' and 'streams'.*lacking streams"),
    (dict(companion=1, companion_rows={"knees": [{"chip": "H200"}], "streams": []}),
     ValueError, r"companion_rows: knees\[0\] lacks 'chip' or 'compute_capability'"),
    (dict(companion=1, companion_rows={"knees": [dict(
        synthetic_companion_rows()["knees"][0], companion="x")], "streams": []}),
     TypeError, r"companion_rows: knees\[0\]\[companion\] is not a number"),
    (dict(companion=1, companion_rows={"knees": [], "streams": [{
        "chip": "H200", "compute_capability": (9,), "l2_mib": 60}]}),
     ValueError, r"compute_capability: expected \(major, minor\)"),
])
def test_companion_bad_input(kw, exc, message):
    with pytest.raises(exc, match=message):
        tax.predict(H200, 0, **kw)


def test_companion_fit_bad_input():
    with pytest.raises(ValueError, match="companion: row 1 has k = 0"):
        tax.fit_companion([0.5, 0.5], [1, 0], [0.4, 0.4], footprint=0.1)
    with pytest.raises(ValueError, match="companions: 1 values, but capacities has 2"):
        tax.fit_companion([0.5, 0.5], [1], [0.4, 0.4], footprint=0.1)
    with pytest.raises(ValueError, match="knees: 1 values, but capacities has 2"):
        tax.fit_companion([0.5, 0.5], [1, 2], [0.4], footprint=0.1)
    with pytest.raises(ValueError, match=r"footprint: -1(\.0)? is outside \[0"):
        tax.fit_companion([0.5], [1], [0.4], footprint=-1)
    with pytest.raises(TypeError, match="footprint"):
        tax.fit_companion([0.5], [1], [0.4])
    with pytest.raises(ValueError, match="values: 1 values, but companions has 2"):
        tax.fit_stream_cost([1, 2], [0.1])
    with pytest.raises(ValueError, match="companion: the stream's cost needs a point"):
        tax.fit_stream_cost([], [])


# ---- measure: the loop without a GPU (a fake device and timer) ----

class FakeDevice:
    """What measure asks of a device: its limit (rounded up to 1 MiB granules)."""

    def __init__(self, limit=0):
        self.index = 0
        self._limit = limit
        self.history = [limit]

    @property
    def persisting_l2_limit(self):
        return self._limit

    @persisting_l2_limit.setter
    def persisting_l2_limit(self, v):
        self._limit = -(-v // MIB) * MIB
        self.history.append(self._limit)


class FakePlan:
    """A Plan of a set-aside alone over FakeDevice (the real transaction: test_plan.c): the
    limit set when it differs, the one found put back at the restore."""
    dev = None

    def __init__(self, device=None, set_aside=None):
        self.set_aside, self.found = set_aside, None

    def install(self):
        self.found = self.dev.persisting_l2_limit
        return self.apply(self)

    def apply(self, other):
        if other.set_aside is not None and other.set_aside != self.dev.persisting_l2_limit:
            self.dev.persisting_l2_limit = other.set_aside
        return self.dev.persisting_l2_limit

    def restore(self):
        if self.found is not None and self.dev.persisting_l2_limit != self.found:
            self.dev.persisting_l2_limit = self.found
        self.found = None

    def __enter__(self):
        self.install()
        return self

    def __exit__(self, *exc):
        self.restore()
        return False


@pytest.fixture
def fake(monkeypatch):
    from l2persist import _core
    import l2persist.plan as plan_mod
    dev = FakeDevice(limit=3 * MIB)
    monkeypatch.setattr(FakePlan, "dev", dev)
    monkeypatch.setattr(plan_mod, "Plan", FakePlan)
    state = {"calls": 0, "raise_at": None, "exc": None}

    def time_calls(fn, *, stream, warmup, repeat, device, **kw):
        assert device is dev
        state["calls"] += 1
        if state["calls"] == state["raise_at"]:
            raise state["exc"]
        for _ in range(warmup + repeat):
            fn()
        slow = 1.3 if dev.persisting_l2_limit >= 20 * MIB else 1.0
        return [slow * (1 + 0.001 * (i % 3)) for i in range(repeat)]

    def restore(device, limit):
        device.persisting_l2_limit = limit
        return limit

    monkeypatch.setattr(tax, "_measure_device", lambda device, stream: dev)
    monkeypatch.setattr(tax, "predict", lambda d, s: SimpleNamespace(set_aside=-(-s // MIB) * MIB))
    monkeypatch.setattr(_core, "time_calls", time_calls)
    monkeypatch.setattr(_core, "restore_persisting_l2", restore)
    return dev, state


def test_measure_interleaves_until_the_interval_is_tight(fake):
    dev, state = fake
    calls = []
    r = tax.measure(lambda: calls.append(1), 30 * MIB - 5)  # granted: 30 MiB
    assert r.converged and r.rounds == 3 and r.set_aside == 30 * MIB
    assert r.slowdown == pytest.approx(1.3, rel=0.01)
    lo, hi = r.interval
    assert 0.98 * r.slowdown <= lo <= r.slowdown <= hi <= 1.02 * r.slowdown
    assert len(r.base_samples) == len(r.at_samples) == 15 and len(calls) == 6 * (2 + 5)
    # limit 0 first, then the set-aside first (no second switch), ...; the limit found
    # before comes back
    assert dev.history == [3 * MIB, 0, 30 * MIB, 0, 30 * MIB, 3 * MIB]
    assert "1.300x the time at limit 0" in r.summary()


@pytest.mark.parametrize("exc", [RuntimeError("the work failed"), KeyboardInterrupt()])
def test_measure_restores_the_limit_when_interrupted(fake, exc):
    dev, state = fake
    state.update(raise_at=4, exc=exc)
    with pytest.raises(type(exc)):
        tax.measure(lambda: None, 30 * MIB)
    assert dev.persisting_l2_limit == 3 * MIB and state["calls"] == 4


@pytest.mark.parametrize("kw, exc, message", [
    (dict(repeat=0), ValueError, r"repeat: 0 is outside \[1, 1000000\]"),
    (dict(max_rounds=1), ValueError, r"max_rounds: 1 is outside \[2, 1000\]"),
    (dict(min_rounds=5, max_rounds=4), ValueError, r"min_rounds: 5 is outside \[2, max_rounds"),
    (dict(tolerance=0.0), ValueError, r"tolerance: 0 is outside \(0, 1\)"),
    (dict(confidence=1.0), ValueError, r"confidence: 1 is outside \(0.5, 1\)"),
    (dict(repeat=2.5), TypeError, r"repeat: expected an int"),
])
def test_measure_checks_its_arguments_before_any_work(fake, kw, exc, message):
    dev, state = fake
    with pytest.raises(exc, match=message):
        tax.measure(lambda: None, 30 * MIB, **kw)
    assert state["calls"] == 0 and dev.history == [3 * MIB]



def synthetic_sweep(cap=0.12, coeff=1.35, cost=0.1):
    """A companion sweep as tools/investigations/tax-sweep --companion writes it, from one truth: knees
    without the stream on 60 - coeff s (C(0) = 50 MiB, no tax below 4 granules), with it
    companion_knee(...), times 0.25 ms (1 + cost k + P max(0, 1 - knee / ws))."""
    from l2persist.studies import set_aside_tax as study
    g, beta, P = 60 * MIB // 16, h200_footprint(), tax.predict(H200, 0).penalty["write"]
    asides, words, sizes = [0] + [i * g for i in range(4, 11)], [0, 1, 2, 3, 4, 6, 8], \
        list(range(2 * MIB, 64 * MIB + 1, 2 * MIB))
    points = []
    for a in asides:
        alone = 50.0 if a == 0 else min(50.0, 60 - coeff * a / MIB)
        for k in words:
            knee = companion_knee(alone, k, cap * 60, beta) * MIB
            for w in sizes:
                ms = 0.25 * (1 + cost * k + P * max(0.0, 1 - knee / w))
                points.append(dict(set_aside=a, companion=k, ws=w, ms=[ms] * 3, median_ms=ms))
    meta = dict(device_name="NVIDIA H200", compute_capability="9.0", l2_cache_size=60 * MIB,
                persisting_l2_cache_max_size=37 * MIB + MIB // 2, granule=g, date="2026-12-01",
                git_revision="abc", cuda_runtime="13.0")
    return {"format": study.COMPANION_FORMAT, "meta": meta, "set_asides": asides,
            "companions": words, "ws": sizes, "points": points}


def test_companion_rows_from_a_sweep_give_back_its_constants(tmp_path):
    from l2persist.studies import set_aside_tax as study
    sweep = synthetic_sweep(cap=0.12, coeff=1.35, cost=0.1)
    rows = study.companion_rows(sweep)
    assert len(rows["knees"]) == 7 * 6 and len(rows["streams"]) == 6
    held = {(r["set_aside_mib"] / 3.75, r["companion"]) for r in rows["knees"] if not r["fit"]}
    assert {g for g, _ in held} == {5, 7, 9, 4, 6, 8, 10} and all(
        g % 2 == 1 or k == 3 for g, k in held)
    assert all(r["chip"] == "H200" and r["compute_capability"] == [9, 0] for r in rows["knees"])
    assert rows["streams"][2]["time_ratio"] == pytest.approx(1.3)  # k = 3
    p = tax.predict(H200, 26 * MIB + MIB // 4, companion=3, companion_rows=rows)
    assert p.companion_cap == pytest.approx(0.12, abs=0.02)
    assert p.companion_coeff == pytest.approx(1.35, abs=0.03)
    assert p.stream_cost == pytest.approx(0.1, rel=1e-6)
    for r in rows["knees"]:  # every row, held out or not, within a step of the model's knee
        q = tax.predict(H200, int(r["set_aside_mib"] * MIB), companion=r["companion"],
                        companion_rows=rows)
        k = q.knee_bytes / MIB
        assert max(r["knee_lo_mib"] - k, k - r["knee_hi_mib"], 0) <= 2, (r, k)
    # a path works as well as the dict; another format is refused by name
    import json
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep))
    assert study.companion_rows(path) == study.companion_rows(str(path)) == rows
    with pytest.raises(ValueError, match="sweep: format 'x'"):
        study.companion_rows({"format": "x"})


def _tool(name):
    """tools/investigations/<name> (a script without .py) as a module."""
    import tool_script
    return tool_script.load(f"tools/investigations/{name}")


def test_tax_fit_writes_rows_the_core_reads_back(tmp_path, capsys):
    """tools/investigations/tax-fit: the C rows it writes hold every row's numbers (read back here), the
    committed file is what it writes for no sweep (while none is applied), and its report
    runs the core's fit on the sweep's rows."""
    import json
    import re
    from pathlib import Path
    from l2persist.studies import set_aside_tax as study
    tool = _tool("tax-fit")
    committed = (Path(__file__).resolve().parents[1] / "csrc" / "core"
                 / "l2p_tax_companion_rows.c").read_text()
    if not tax.companion_measurements()["knees"]:
        assert committed == tool.rows_c({"knees": [], "streams": []}, [])
    rows = study.companion_rows(synthetic_sweep(), source='a "quoted" source')
    text = tool.rows_c(rows, ["one sweep"])
    body = text.split("l2p_tax_companion_table[] = {")[1].split("{NULL}")[0]
    macros = dict(re.findall(r'#define (SRC\d+) "((?:[^"\\]|\\.)*)"', text))
    assert [json.loads('"' + v + '"') for v in macros.values()] == ['a "quoted" source']
    lines = body.strip().splitlines()
    assert len(lines) == len(rows["knees"])
    for line, r in zip(lines, rows["knees"]):
        fields = [f.strip() for f in line.strip().strip("{},").split(",")]
        nums = [float(f) for f in fields[1:-2]]
        assert nums == [*r["compute_capability"], r["l2_mib"], r["set_aside_mib"],
                        r["companion"], r["knee_lo_mib"], r["knee_hi_mib"], r["alone_lo_mib"],
                        r["alone_hi_mib"], float(r["fit"])]
        assert fields[-2] in macros and fields[-1] == "L2P_TAX_SHAPE_RANDOM"
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(synthetic_sweep()))
    assert tool.main([str(path)]) == 0  # no --write: reports only
    out = capsys.readouterr().out
    assert "NVIDIA H200: footprint beta = 0.1" in out and "held out" in out and "OFF" not in out
    assert tool.main([str(tmp_path / "missing.json")]) == 2


def test_validation_summary_against_the_model():
    """Foreign work whose times are the model's own (with its k) meets the bar; the model
    without k misses the knees the stream moves; a slowdown 40 % off is counted out."""
    from l2persist.studies import set_aside_tax as study
    rows = synthetic_companion_rows(cap=0.12, coeff=1.35, cost=0.1)
    g = 60 * MIB // 16
    records = []
    for gr in (5, 7, 9, 10):
        for ws in range(4 * MIB, 64 * MIB + 1, 4 * MIB):
            p = tax.predict(H200, gr * g, companion=3, companion_rows=rows)
            records.append(dict(workload="fake index_put_", kind="write", companion=3.0,
                                ws=ws, set_aside=gr * g,
                                slowdown=p.slowdown_at(ws, "write") * (1.4 if (gr, ws) == (
                                    10, 64 * MIB) else 1.0)))
    s = study.validation_summary(records, H200, companion_rows=rows)
    t = s["totals"]
    assert t["groups"] == 4 and t["slowdowns"] == 64
    assert t["knees_ok"] == 4 and t["slowdowns_ok"] == 63 and not t["bar_met"]
    assert t["alone_knees_ok"] < 4  # the stream moves the knees by up to 10 MiB
    g10 = next(x for x in s["groups"] if x["granules"] == 10)
    assert g10["slowdowns_ok"] == 15 and g10["companion_basis"] == "H200"
    lines = study.validation_table(s)
    assert len(lines) == 1 + 4 + 1 and "fake index_put_" in lines[1]
    assert "the bar is NOT met" in lines[-1] and "slowdowns within 25%: model 63/64" in lines[-1]


def test_validation_counts_the_curves_own_knee_apart():
    """Atomic work whose times are the model's own atomic curve: its measured knee is where
    that curve first reaches 1.15x, which for atomics is not knee_bytes (the writes' knee).
    Scored by the curve's own crossing every knee is inside its interval; by knee_bytes some
    miss; the bar still counts knee_bytes, and the table says both."""
    from l2persist.studies import set_aside_tax as study
    g = 60 * MIB // 16
    records = []
    for gr in (5, 7, 9, 10):
        p = tax.predict(H200, gr * g, companion=3)
        for ws in range(4 * MIB, 64 * MIB + 1, 4 * MIB):
            records.append(dict(workload="fake scatter_add_", kind="atomic", companion=3.0,
                                ws=ws, set_aside=gr * g, slowdown=p.slowdown_at(ws, "atomic")))
    s = study.validation_summary(records, H200)
    t = s["totals"]
    assert t["curve_knees_ok"] == 4 > t["knees_ok"]
    for grp in s["groups"]:
        assert grp["knee_hi_mib"], grp  # the model's curve crosses inside 64 MiB here
        assert grp["knee_lo_mib"] < grp["curve_knee_mib"] <= grp["knee_hi_mib"]
        assert grp["curve_knee_off_mib"] == 0
    assert "(where its own curve first reaches 1.15x: 4/4)" in study.validation_table(s)[-1]


def test_real_work_is_skipped_with_a_reason_without_torch(monkeypatch):
    from l2persist.studies import set_aside_tax as study

    class Ctx:
        skipped = []

        def has(self, need, what=""):
            self.skipped.append((what, f"it needs {need}"))
            return False

    ctx = Ctx()
    assert study._real_work(ctx) == []
    assert ctx.skipped == [("real work (a PyTorch encoder and a torch_geometric GCN)",
                            "it needs torch")]


def test_real_work_notes_and_findings():
    from l2persist import studies
    from l2persist.studies import set_aside_tax as study
    from pathlib import Path
    rows = [dict(work="encoder training step", set_aside=37 * MIB + MIB // 2, granules=10,
                 slowdown=1.18, low=1.17, high=1.19, rounds=4, converged=True, base_ms=9.5,
                 at_ms=11.2),
            dict(work="encoder training step", set_aside=26 * MIB + MIB // 4, granules=7,
                 slowdown=1.04, low=1.03, high=1.05, rounds=3, converged=True, base_ms=9.5,
                 at_ms=9.9),
            dict(work="torch_geometric GCN training step", set_aside=37 * MIB + MIB // 2,
                 granules=10, slowdown=1.24, low=1.2, high=1.3, rounds=20, converged=False,
                 base_ms=4.0, at_ms=5.0)]
    notes = study.real_work_notes(rows)
    assert notes == [
        "real work, encoder training step (9.5 ms at limit 0, no window), measured "
        "(tax.measure): 1.18x (1.17-1.19) "
        "at 10 granules (37.5 MiB), 1.04x (1.03-1.05) at 7 granules (26.25 MiB)",
        "real work, torch_geometric GCN training step (4 ms at limit 0, no window), measured "
        "(tax.measure): 1.24x "
        "(1.20-1.30, not within +-2 %) at 10 granules (37.5 MiB)"]
    res = studies.load(Path(__file__).resolve().parents[1] / "notebooks" / "results"
                       / "set-aside-tax.json")
    before = study.findings(res)
    res.summary["real_work"] = rows
    assert study.findings(res) == before + notes


# ---- python -m l2persist check: what it can see ----

class CheckDev:
    """What state's check asks of a device."""

    def __init__(self, limit, *, source="process", mps=False, pct=None):
        from types import SimpleNamespace
        self.index = 0
        self.properties = SimpleNamespace(name="NVIDIA H200")
        self.persisting_l2_limit = limit
        self.default_persisting_l2_limit = 11796480
        self.persisting_l2_source = source
        self.mps = mps
        self.mps_server_percentage = pct


@pytest.mark.parametrize("dev, env, rc, words", [
    (CheckDev(11796480), None, 0,
     ["set-aside 11.25 MiB (0 or the default)", "seen from this process's CUDA context",
      "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT not set here",
      "no MPS server", "a fresh process never sees another process's limit",
      "another process's set-aside does not tax this one"]),
    (CheckDev(39321600), None, 1, ["not 0 or the default", "no MPS server"]),
    (CheckDev(31457280, source="mps-server", mps=True, pct=50), None, 1,
     ["the MPS server sets aside 30 MiB", "an MPS server whose set-aside every client gets "
      "(50 % when it started)"]),
    (CheckDev(23592960), "40", 1,
     ["CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT=40 in the environment",
      "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT=40 in this environment"]),
])
def test_check_says_what_it_sees(monkeypatch, capsys, dev, env, rc, words):
    from l2persist import state
    monkeypatch.setattr(state._core, "device_count", lambda: 1)
    monkeypatch.setattr(state._core, "Device", lambda i: dev)
    if env is None:
        monkeypatch.delenv(state.PERCENT_VAR, raising=False)
    else:
        monkeypatch.setenv(state.PERCENT_VAR, env)
    assert state.check_main([]) == rc
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # one line per device, as before
    for w in words:
        assert w in out, (w, out)


def _validate_on_a_fake_device(monkeypatch, clock=None):
    """tools/investigations/tax-validate with one fake workload (k = 3) on a fake H200: tax.measure records
    each set-aside it is asked for; ``clock`` replaces the tool's time.perf_counter."""
    from l2persist import _core
    tool = _tool("tax-validate")
    g = 60 * MIB // 16

    class Stream:
        def __init__(self, dev):
            pass

        def synchronize(self):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    asked = []

    def measure(fn, set_aside, *, stream, max_rounds, hold_us):
        asked.append(set_aside)
        fn()
        return SimpleNamespace(set_aside=set_aside, slowdown=1.0, interval=(0.99, 1.01),
                               rounds=3, converged=True, base_ms=1.0, at_ms=1.0)

    monkeypatch.setattr(_core, "Stream", Stream)
    monkeypatch.setattr(tax, "measure", measure)
    monkeypatch.setattr(tool, "WORKLOADS", [
        ("fake write", "random", "write", lambda h: (h, 3.0), "torch",
         lambda lib, h, s: (lambda: None))])
    monkeypatch.setattr(tool, "_torch", lambda: object())
    monkeypatch.setattr(tool, "_cupy", lambda: None)
    if clock:
        monkeypatch.setattr(tool, "time", SimpleNamespace(perf_counter=clock))
    dev = SimpleNamespace(persisting_l2_granule=g, synchronize=lambda: None,
                          properties=SimpleNamespace(
        l2_cache_size=60 * MIB, persisting_l2_cache_max_size=10 * g))
    return tool, dev, asked, g


def test_tax_validate_measures_every_table_and_says_so_as_it_goes(monkeypatch, capsys):
    """Every table (4 .. L2 + 4 MiB) at 5, 7, 9 and 10 granules, once; a line per table as
    it goes; the CuPy workloads missing are listed, not fatal."""
    tool, dev, asked, g = _validate_on_a_fake_device(monkeypatch)
    records, skipped = tool.measure_workloads(dev, None)
    assert len(records) == 16 * 4 and asked == [n * g for n in (5, 7, 9, 10)] * 16
    assert skipped == [] and {r["companion"] for r in records} == {3.0}
    out = capsys.readouterr().out.splitlines()
    tables = [line for line in out if "MiB, k 3.00: slowdown" in line]
    assert len(tables) == 16 and "at 5, 7, 9, 10 granules" in tables[0]
    assert tables[-1].endswith("(16/16)")


def test_tax_validate_starts_no_table_once_its_budget_is_spent(monkeypatch, capsys):
    """A slow device (each read of the clock 2.5 s later, several a table): with a budget
    of 35 s a few tables are measured, the rest is listed as skipped (the run still ends
    with its table and JSON)."""
    now = [0.0]

    def clock():
        now[0] += 2.5
        return now[0]

    tool, dev, asked, g = _validate_on_a_fake_device(monkeypatch, clock)
    records, skipped = tool.measure_workloads(dev, None, budget_s=35)
    assert 0 < len(records) < 16 * 4 and len(records) % 4 == 0
    n = len(records) // 4
    assert skipped == [f"fake write: tables from {4 * (n + 1)} MiB not measured (the budget "
                       "of 35 s was spent)"]


def test_tax_validate_main_prints_its_table_and_writes_json(monkeypatch, capsys, tmp_path):
    """The whole run on a fake H200 (one fake workload, k = 3, whose slowdowns are the
    model's own): the header names the constants, the table has a line per set-aside and the
    totals, and the JSON under --out is strict JSON with every record and the summary."""
    import json
    tool, dev, asked, g = _validate_on_a_fake_device(monkeypatch)
    from l2persist import _core
    rows = synthetic_companion_rows(cap=0.12, coeff=1.35, cost=0.1)
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps(synthetic_sweep(cap=0.12, coeff=1.35, cost=0.1)))
    h = [0]

    def make(lib, size, stream):
        h[0] = size
        return lambda: None

    def measure(fn, set_aside, *, stream, max_rounds, hold_us):
        p = tax.predict(H200, set_aside, companion=3.0, companion_rows=rows)
        return SimpleNamespace(set_aside=set_aside, slowdown=p.slowdown_at(h[0]),
                               interval=(0.99, 1.01), rounds=3, converged=True, base_ms=1.0,
                               at_ms=1.0)

    monkeypatch.setattr(tool, "WORKLOADS", [("fake index_put_", "random", "write",
                                              tool.scatter_model, "torch", make)])
    monkeypatch.setattr(tax, "measure", measure)
    monkeypatch.setattr(_core, "device_count", lambda: 1)

    class Device:  # a type still (the model's isinstance checks), built as the fake
        def __new__(cls, index):
            return dev

    monkeypatch.setattr(_core, "Device", Device)
    dev.index, dev.persisting_l2_limit, dev.default_persisting_l2_limit = 0, 3 * g, 3 * g
    dev.properties.name, dev.properties.compute_capability = "NVIDIA H200", (9, 0)
    dev.properties.multiprocessor_count = 132
    dev.properties.access_policy_max_window_size = 128 * MIB
    assert tool.main(["--sweep", str(sweep), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "footprint beta = " in out and "capped at 0.12" in out
    table = out[out.index("workload "):].splitlines()
    assert sum("fake index_put_" in line for line in table) == 4  # 5, 7, 9, 10 granules
    assert "knees within 4 MiB: model 4/4" in out
    path, = tmp_path.glob("tax-validate-NVIDIA-H200-*.json")
    data = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(c))
    assert data["format"] == "l2persist-tax-validate/1" and len(data["records"]) == 64
    assert data["summary"]["totals"]["knees_ok"] == 4 and data["sweep"] == [str(sweep)]
    assert {r["shape"] for r in data["records"]} == {"random"}
    assert data["companion_rows"]["knees"] and data["meta"]["device_name"] == "NVIDIA H200"


def test_tax_validate_names_the_companion_constants_it_uses():
    """Without --sweep the core's own rows: while there are none the run says the model with
    k is the model without it; with rows it names beta, the cap, the capacity line and a."""
    tool = _tool("tax-validate")
    line = tool.model_line(H200, None)
    if tax.companion_measurements()["knees"]:
        assert line.startswith("footprint beta = ")
    else:
        assert line.startswith("no companion rows to fit from")
    line = tool.model_line(H200, synthetic_companion_rows(cap=0.12, coeff=1.35, cost=0.1))
    assert line.startswith(f"footprint beta = {h200_footprint():.4f} k h, capped at 0.1200 of "
                           "the L2; capacity L2 - 1.3500 s; a = 0.1000 (rows of the H200)")


# ---- the access shapes: the keyword, the shape sweep's rows, the offline re-scoring ----

def test_shape_keyword_is_checked_and_named():
    assert tax.SHAPES == ("random", "atomic", "rows", "sweep")
    assert [s["name"] for s in tax.shapes()] == list(tax.SHAPES)
    assert {s["name"]: s["kind"] for s in tax.shapes()} == {
        "random": "write", "atomic": "atomic", "rows": "write", "sweep": "rmw"}
    with pytest.raises(ValueError, match=r"shape: 'scatter' is not one of random, atomic, rows, "
                                         r"sweep"):
        tax.predict(H200, 0, shape="scatter")
    with pytest.raises(TypeError, match=r"shape: expected a str"):
        tax.predict(H200, 0, shape=1)
    bad = {"knees": [{"shape": "diagonal"}], "streams": []}
    with pytest.raises(ValueError, match=r"companion_rows: knees\[0\]"):
        tax.predict(H200, 0, companion=1, companion_rows=bad)


def test_a_shape_without_rows_is_random_writes():
    rows = synthetic_companion_rows(cap=0.12, coeff=1.35, cost=0.1)
    s = 26 * MIB + MIB // 4
    p = tax.predict(H200, s, companion=3, companion_rows=rows)
    for shape in ("atomic", "rows", "sweep"):
        q = tax.predict(H200, s, companion=3, companion_rows=rows, shape=shape)
        assert q.shape == shape and q.shape_basis is None
        assert (q.knee_bytes, q.base_bytes) == (p.knee_bytes, p.base_bytes)
        assert q.slowdown_at(40 * MIB, "write") == p.slowdown_at(40 * MIB, "write")
    assert p.shape == "random" and p.slowdown_at(40 * MIB) == p.slowdown_at(40 * MIB, "write")


SHAPE_C, SHAPE_BETA, SHAPE_CAP, SHAPE_COST, SHAPE_P = 1.1, 0.5, 0.15, 0.05, 6.0


def synthetic_shape_sweep(shape="atomic", onset_g=6):
    """A shape sweep whose times follow the shape model with known constants: the capacity
    L2 - c s from onset_g granules (C(0) below), beta, the cap, a and P."""
    from l2persist.studies import set_aside_tax as study
    g = 60 * MIB // 16
    base = tax.predict(H200, 0).base_bytes / MIB
    asides = [0] + [n * g for n in range(4, 11)]
    sizes = list(range(2 * MIB, 64 * MIB + 1, 2 * MIB))
    points = []
    for a in asides:
        alone = base if a < onset_g * g else min(base, 60 - SHAPE_C * a / MIB)
        for words in (0, 1, 2, 4):
            k = words / 3 if shape == "sweep" else float(words)
            knee = companion_knee(alone, k, SHAPE_CAP * 60, SHAPE_BETA) * MIB
            for w in sizes:
                ms = 0.25 * (1 + SHAPE_COST * k + SHAPE_P * max(0.0, 1 - knee / w))
                points.append(dict(shape=shape, set_aside=a, words=words, companion=k, ws=w,
                                   accesses=1 << 23, ms=[ms] * 3, median_ms=ms))
    meta = dict(device_name="NVIDIA H200", compute_capability="9.0", l2_cache_size=60 * MIB,
                persisting_l2_cache_max_size=37 * MIB + MIB // 2, granule=g, date="2026-12-01",
                git_revision="abc", cuda_runtime="13.0")
    return {"format": study.SHAPE_FORMAT, "meta": meta, "shapes": [shape], "set_asides": asides,
            "words": [0, 1, 2, 4], "ws": sizes, "points": points}


@pytest.mark.parametrize("shape", ["atomic", "rows", "sweep"])
def test_shape_rows_from_a_sweep_give_back_its_constants(shape):
    """The shape sweep's rows (knees, stream costs, slowdowns; odd granules held out) fit
    back the shape's own line, onset, footprint, cap, a and P in the core; every row's knee
    within a step of the model's; other shapes keep random writes' model."""
    from l2persist.studies import set_aside_tax as study
    rows = study.shape_rows(synthetic_shape_sweep(shape))
    assert {r["shape"] for r in rows["knees"] + rows["streams"] + rows["slowdowns"]} == {shape}
    assert len(rows["knees"]) == 7 * 3 and len(rows["streams"]) == 3
    assert {round(r["set_aside_mib"] / 3.75) for r in rows["knees"] if not r["fit"]} == {5, 7, 9}
    assert len(rows["slowdowns"]) == 7 * 4 * 16
    top = tax.predict(H200, 37 * MIB + MIB // 2, companion=1, companion_rows=rows, shape=shape)
    assert top.shape_basis == "H200"
    assert top.shape_coeff == pytest.approx(SHAPE_C, abs=0.05)
    assert top.shape_onset == pytest.approx(6 * 3.75 / 60)
    assert top.companion_footprint == pytest.approx(SHAPE_BETA, abs=0.1)
    assert top.stream_cost == pytest.approx(SHAPE_COST, rel=0.05)
    assert top.shape_penalty == pytest.approx(SHAPE_P, rel=0.3)
    for r in rows["knees"]:
        q = tax.predict(H200, int(r["set_aside_mib"] * MIB), companion=r["companion"],
                        companion_rows=rows, shape=shape)
        k = q.knee_bytes / MIB
        if r["knee_hi_mib"]:
            assert q.taxed and max(r["knee_lo_mib"] - k, k - r["knee_hi_mib"], 0) <= 2.5, (r, k)
        else:
            assert not q.taxed, r
    assert tax.predict(H200, 5 * 60 * MIB // 16, companion=3, companion_rows=rows,
                       shape=shape).taxed is False  # below its onset, where random writes pay
    other = "rows" if shape != "rows" else "atomic"
    assert tax.predict(H200, 0, companion_rows=rows, shape=other).shape_basis is None
    with pytest.raises(ValueError, match="sweep: format"):
        study.shape_rows({"format": study.COMPANION_FORMAT})


def test_tax_fit_reads_a_shape_sweep_beside_a_companion_sweep(tmp_path, capsys):
    import json
    tool = _tool("tax-fit")
    a, b = tmp_path / "companion.json", tmp_path / "shapes.json"
    a.write_text(json.dumps(synthetic_sweep()))
    b.write_text(json.dumps(synthetic_shape_sweep("atomic")))
    assert tool.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200: footprint beta" in out and "  atomic: capacity L2 - 1.08" in out
    assert out.count("NVIDIA H200:") == 1  # one chip, both sweeps
    from l2persist.studies import set_aside_tax as study
    rows = study.shape_rows(synthetic_shape_sweep("sweep"))
    text = tool.rows_c(rows, ["s"])
    slow = text.split("l2p_tax_shape_slowdown_table[] = {")[1].split("{NULL}")[0]
    assert len(slow.strip().splitlines()) == len(rows["slowdowns"])
    assert "L2P_TAX_SHAPE_SWEEP" in slow and "SRC0, L2P_TAX_SHAPE_SWEEP}" in text


STORED = __import__("pathlib").Path(__file__).resolve().parents[1] / "docs" / "data" / \
    "tax-validate-H200.json"


def test_tax_validate_from_a_stored_run_rescores_it_without_a_gpu(tmp_path, capsys):
    """--from: the stored H200 run re-scored. Every workload as random writes with the rows
    that run used (the core's own, written from the same sweep) gives back its stored summary
    exactly; each record's shape comes from WORKLOADS; with a shape sweep's rows the shaped
    workloads use them and the random ones do not move."""
    import json
    tool = _tool("tax-validate")
    stored = json.loads(STORED.read_text())
    summary, chip, rows = tool.rescore(str(STORED), shapes=False)
    assert rows is None and chip["l2_cache_size"] == 60 * MIB
    want_totals = stored["summary"]["totals"]
    assert {k: summary["totals"][k] for k in want_totals} == want_totals
    assert set(summary["totals"]) - set(want_totals) == {"curve_knees_ok"}  # counted since
    for got, want in zip(summary["groups"], stored["summary"]["groups"]):
        assert (got["workload"], got["set_aside"]) == (want["workload"], want["set_aside"])
        assert got["model_knee_mib"] == pytest.approx(want["model_knee_mib"], abs=1e-9)
        assert got["slowdowns_ok"] == want["slowdowns_ok"]
    shaped, _, _ = tool.rescore(str(STORED))
    shape_of = {g["workload"]: g["shape"] for g in shaped["groups"]}
    assert shape_of["torch scatter_add_"] == shape_of["cupyx scatter_add"] == "atomic"
    assert shape_of["torch Adam step"] == "sweep" and shape_of["torch embedding bwd"] == "rows"
    assert shape_of["torch index_put_"] == "random"
    adam = [r for r in tool.mapped(stored["records"]) if r["workload"] == "torch Adam step"]
    assert all(r["table"] == r["ws"] / 3 and r["companion"] == 1 for r in adam)
    adam_g = [g for g in shaped["groups"] if g["workload"] == "torch Adam step"]
    plain = [g for g in summary["groups"] if g["workload"] == "torch Adam step"]
    for g, p in zip(adam_g, plain):  # no sweep rows yet: random writes over h / 3, k = 1
        q = tax.predict(chip, g["set_aside"], companion=1.0)
        assert g["model_knee_mib"] == pytest.approx(3 * q.knee_bytes / MIB)
    sweep = tmp_path / "shapes.json"
    sweep.write_text(json.dumps(synthetic_shape_sweep("atomic")))
    fitted, _, rows = tool.rescore(str(STORED), [str(sweep)])
    assert {r.get("shape", "random") for r in rows["knees"]} == {"random", "atomic"}
    for g, h in zip(fitted["groups"], shaped["groups"]):
        if g["shape"] == "atomic":
            assert g["shape_basis"] == "H200"
        else:
            assert g["shape_basis"] is None and g["model_knee_mib"] == h["model_knee_mib"]
    assert tool.main(["--from", str(STORED), "--sweep", str(sweep), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "shape atomic: rows of the H200" in out and "shape rows: no rows" in out
    data = json.loads((tmp_path / ("tax-rescore-" + STORED.name)).read_text())
    assert data["format"] == "l2persist-tax-rescore/1" and data["summary"] == json.loads(
        json.dumps(fitted))
    with pytest.raises(ValueError, match="records: workload 'mystery' is not one of"):
        tool.mapped([{"workload": "mystery"}])
    assert tool.main(["--from", str(tmp_path / "missing.json")]) == 2


def test_committed_rows_are_what_tax_fit_writes_from_the_stored_sweeps():
    """csrc/core/l2p_tax_companion_rows.c is tools/investigations/tax-fit's output from the sweeps its
    header names (docs/data/tax-companion-*.json, tax-shapes-*.json): nobody edited it."""
    import re
    from pathlib import Path
    tool = _tool("tax-fit")
    root = Path(__file__).resolve().parents[1]
    committed = (root / "csrc" / "core" / "l2p_tax_companion_rows.c").read_text()
    stored = re.findall(r"^ \* - (docs/data/tax-\w+-\w+\.json)", committed, re.M)
    if not stored:
        pytest.skip("no sweep has been written into the core")
    rows, _, sources, _ = tool.read_sweeps([str(root / rel) for rel in stored])
    assert [s.split(" (")[0] for s in sources] == stored
    assert tool.rows_c(rows, sources) == committed


def test_shape_sweep_on_a_fake_device_calls_each_probe_within_its_checks(monkeypatch):
    """shape_sweep on a fake H200 whose probe times follow a known shape model: every call
    is one the core's checks accept (rows whole, a sweep's companion one part per word and
    whole passes), each (shape, limit, k, table) timed once a round, the limit restored;
    its rows fit back the model; a slow device stops starting rounds that would overrun."""
    from l2persist import _core
    from l2persist import kernels as K
    from l2persist.studies import set_aside_tax as study
    import l2persist.results as results
    g = 60 * MIB // 16
    base = tax.predict(H200, 0).base_bytes / MIB

    class Buf:
        def __init__(self, n):
            self.n = n

        def __getitem__(self, sl):
            return Buf(len(range(*sl.indices(self.n))))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class Stream(Buf):
        def __init__(self, dev):
            pass

    calls, now = [], [0.0]
    dev = SimpleNamespace(persisting_l2_source="process", persisting_l2_granule=g,
                          persisting_l2_limit=3 * g,
                          properties=SimpleNamespace(l2_cache_size=60 * MIB,
                                                     persisting_l2_cache_max_size=10 * g))

    def probe(view, kind, *, pattern, row_words, arrays, accesses, stream, companion=None,
              companion_words=0):
        shape = {("atomic", 1): "atomic", ("write", 32): "rows", ("rmw", 1): "sweep"}[
            kind, row_words]
        # what the core's l2p_tax_check_shape asks of a shaped probe
        assert (pattern == "random") == (arrays == 1) and view.n % row_words == 0
        assert row_words in (1, 32) and 1 <= arrays <= 16 and (row_words == 1 or arrays == 1)
        part = view.n // arrays
        if arrays > 1:
            assert accesses % part == 0 and accesses >= part
        need = companion_words * (part if arrays > 1 else accesses)
        assert (companion is None) == (companion_words == 0)
        assert companion is None or companion.n >= need
        calls.append((shape, dev.persisting_l2_limit, companion_words, view.n * 4))

    def time_calls(fn, *, stream, warmup, repeat, device):
        fn()
        shape, a, words, ws = calls[-1]
        k = words / 3 if shape == "sweep" else words
        alone = base if a < 6 * g else min(base, 60 - SHAPE_C * a / MIB)
        knee = companion_knee(alone, k, SHAPE_CAP * 60, SHAPE_BETA) * MIB
        now[0] += 0.004
        return [0.25 * (1 + SHAPE_COST * k + SHAPE_P * max(0.0, 1 - knee / ws))] * repeat

    monkeypatch.setattr(K, "tax_probe", probe)
    monkeypatch.setattr(_core, "time_calls", time_calls)
    monkeypatch.setattr(_core, "Stream", Stream)
    monkeypatch.setattr(_core, "zeros", lambda n, dtype, d: Buf(n))
    restored = []
    monkeypatch.setattr(_core, "restore_persisting_l2", lambda d, v: restored.append(v))
    monkeypatch.setattr(results, "collect_metadata", lambda d: dict(
        device_name="NVIDIA H200", compute_capability="9.0", l2_cache_size=60 * MIB,
        persisting_l2_cache_max_size=10 * g, date="2026-12-01", git_revision="abc",
        cuda_runtime="13.0"))
    import time as real_time
    monkeypatch.setattr(real_time, "perf_counter", lambda: now[0])
    sweep = study.shape_sweep(dev, rounds=2, budget_s=1e9)
    per_round = 3 * 4 * 8 * 32
    assert len(calls) == 2 * per_round and restored == [3 * g]
    assert sweep["meta"]["rounds_done"] == 2 and len(sweep["points"]) == per_round
    assert {p["shape"] for p in sweep["points"]} == {"atomic", "rows", "sweep"}
    rows = study.shape_rows(sweep)
    for shape in ("atomic", "rows", "sweep"):
        p = tax.predict(H200, 10 * g, companion=1, companion_rows=rows, shape=shape)
        assert p.shape_basis == "H200" and p.shape_onset == pytest.approx(6 * g / (60 * MIB))
    # a slow device: each round takes 0.004 s x per_round; a budget of 1.5 rounds stops at 1
    calls.clear()
    sweep = study.shape_sweep(dev, rounds=3, budget_s=1.5 * per_round * 0.004)
    assert sweep["meta"]["rounds_done"] == 1 and len(calls) == per_round
