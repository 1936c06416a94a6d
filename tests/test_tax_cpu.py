"""The set-aside tax model from Python, without a GPU: predictions against the measurements
(held-out knees within the issue's 4 MiB), the fits, and bad input."""

import pytest

import l2persist
from l2persist import tax

MIB = 1 << 20
H200 = {"name": "H200", "compute_capability": (9, 0), "l2_cache_size": 60 * MIB,
        "persisting_l2_cache_max_size": 37 * MIB + MIB // 2}
H100 = {"name": "H100", "compute_capability": (9, 0), "l2_cache_size": 50 * MIB,
        "persisting_l2_cache_max_size": 31 * MIB + MIB // 4}


def test_held_out_knees_within_4_mib():
    knees, _ = tax.measurements()
    held_out = [r for r in knees if not r["fit"]]
    assert len(held_out) >= 4
    for r in knees:
        chip = {"compute_capability": r["compute_capability"],
                "l2_cache_size": int(r["l2_mib"] * MIB)}
        k = tax.predict(chip, int(r["set_aside_mib"] * MIB)).knee_bytes / MIB
        off = max(r["knee_lo_mib"] - k, k - r["knee_hi_mib"], 0)
        assert off <= 4, (r, k)


def test_prediction_at_the_maximum():
    p = tax.predict(H200, H200["persisting_l2_cache_max_size"])
    assert p.set_aside == 37 * MIB + MIB // 2 and p.granule == 60 * MIB // 16
    assert p.exact and p.basis == "H200"
    assert 8 * MIB < p.knee_bytes <= 12 * MIB
    assert p.capacity_coeff == pytest.approx(4 / 3, abs=0.02)
    assert p.slowdown_at(16 * MIB) == pytest.approx(3.1, rel=0.15)
    assert p.slowdown_at(48 * MIB) == pytest.approx(4.7, rel=0.15)
    assert p.slowdown_at(16 * MIB, "read") == 1.0
    assert 1.1 <= p.slowdown_at(16 * MIB, "atomic") <= 1.9
    assert p.slowdown_at(4 * MIB) == 1.0
    assert "slow down" in p.summary() and "MiB" in p.summary()
    q = tax.predict(H100, H100["persisting_l2_cache_max_size"])
    assert q.slowdown_at(16 * MIB) == pytest.approx(3.5, rel=0.15)


def test_rounds_to_granules_and_zero_is_free():
    p = tax.predict(H200, 1)
    assert p.set_aside == 60 * MIB // 16
    z = tax.predict(H200, 0)
    assert z.knee_bytes == 60 * MIB and z.slowdown_at(200 * MIB) == 1.0
    assert z.summary() == "no set-aside: no tax"


def test_unmeasured_chip_takes_the_closest():
    p = tax.predict({"compute_capability": (10, 0), "l2_cache_size": 126 * MIB}, 30 * MIB)
    assert not p.exact and p.basis == "H200"
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
