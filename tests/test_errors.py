"""Bad arguments name the argument and what it may be (DESIGN.md, Errors), checked where the
check lives (in C for these): no GPU needed, each message read as a user reads it."""

import numpy as np
import pytest

import l2persist
from l2persist import _core
from l2persist import coalescing as C


@pytest.mark.parametrize("target", [None, 3, "x"])
def test_window_names_its_target(target):
    with pytest.raises(TypeError, match=r"^target: expected a DeviceBuffer or an object exposing "
                                        r"__cuda_array_interface__ or __dlpack__"):
        l2persist.AccessPolicyWindow(target)


def test_window_on_a_host_array_names_its_target():
    with pytest.raises(TypeError, match=r"^target: a numpy.ndarray array \(DLPack device type 1\) "
                                        r"is not device memory"):
        l2persist.AccessPolicyWindow(np.zeros(4))


def test_as_buffer_and_copy_name_their_argument():
    with pytest.raises(TypeError, match="^obj: a numpy.ndarray array"):
        _core.as_buffer(np.zeros(4))
    with pytest.raises(TypeError, match="^dst: expected a DeviceBuffer"):
        _core.copy(None, None)


@pytest.mark.parametrize("sizes, weights, err, match", [
    ("abc", [1], TypeError, r"^sizes: expected a sequence of ints \(bytes\), got str"),
    (b"ab", [1, 1], TypeError, r"^sizes: expected a sequence of ints \(bytes\), got bytes"),
    (7, [1], TypeError, r"^sizes: expected a sequence of ints \(bytes\), got int"),
    ([1, 2], "ab", TypeError, r"^weights: expected a sequence of real numbers, got str"),
    ([1, 2], [1], ValueError, r"^weights: 1 weight\(s\) for 2 size\(s\); give one weight per size"),
    ([1], ["x"], TypeError, r"^weights: entry 0: expected a real number, got str"),
])
def test_plan_hit_ratios_names_sizes_and_weights(sizes, weights, err, match):
    with pytest.raises(err, match=match):
        _core.plan_hit_ratios(sizes, weights, 16384)


def test_mask_beyond_a_warp_is_written_in_hex():
    with pytest.raises(ValueError, match=r"^masks: warp 0's mask 0x10000000000 has lanes beyond "
                                         r"the 32 of a warp \(allowed 0 \.\. 0xffffffff\)$"):
        C.analyze([0] * 32, masks=[2**40])


@pytest.mark.parametrize("value", [2**64 - 1, 2**63, 2**63 - 256])
def test_unsigned_addresses_above_the_range_are_not_negative(value):
    with pytest.raises(ValueError, match=rf"^addresses: thread 1's address {value} is above "
                                         r"2\*\*63 - 257"):
        C.analyze(np.array([0, value], dtype=np.uint64))


def test_unsigned_addresses_in_range_work():
    a = C.analyze(np.arange(32, dtype=np.uint64) * 4)
    assert a.efficiency == 100.0


@pytest.mark.parametrize("value", ["yes", "", None, [1], 2, 0.5])
def test_store_must_be_a_bool(value):
    with pytest.raises(TypeError, match=r"^store: expected a bool \(True or False\), got "):
        C.analyze([0], store=value)


@pytest.mark.parametrize("value, stored", [(True, 1), (False, 0), (np.True_, 1), (0, 0), (1, 1)])
def test_store_takes_bools(value, stored):
    # a store of 4 bytes under the Kepler caching rule moves 32 B (non-caching), a load 128 B
    a = C.analyze([0], store=value, rule="kepler_caching")
    assert a.bytes_moved == (32 if stored else 128)
    assert a.store is bool(stored)  # what was modelled, as a bool, whatever form it came in


@pytest.mark.parametrize("fn, kwargs, error, match", [
    (C.permuted_within_line, dict(size=0), ValueError, r"^size: 0 is outside \[1, 16\]"),
    (C.permuted_within_line, dict(threads=0), ValueError, r"^threads: 0 is outside \[1, "),
    (C.permuted_within_line, dict(line=-1), ValueError, r"^line: -1 is outside \[0, \d+\]"),
    (C.permuted_within_line, dict(line=2**62), ValueError, r"^line: \d+ is outside \[0, "),
    (C.permuted_within_line, dict(line=1.0), TypeError,
     r"^line: expected an int \(lines\) in \[0, .*float"),
    (C.random_scatter, dict(elements=0), ValueError, r"^elements: 0 is outside \[1, "),
    (C.random_scatter, dict(elements=2**62), ValueError, r"^elements: \d+ is outside \[1, "),
    (C.random_scatter, dict(size=3), ValueError, r"^size: "),
    (C.random_scatter, dict(elements=True), TypeError,
     r"^elements: expected an int \(elements\) in \[1, "),
])
def test_address_patterns_name_their_argument(fn, kwargs, error, match):
    """Every argument checked (in C) before rng draws anything."""
    with pytest.raises(error, match=match):
        fn(np.random.default_rng(), **kwargs)


@pytest.mark.parametrize("fn", [C.permuted_within_line, C.random_scatter])
@pytest.mark.parametrize("rng", [None, 7, "x"])
def test_address_patterns_name_a_bad_rng(fn, rng):
    with pytest.raises(TypeError, match=r"^rng: expected a numpy.random.Generator \(with \."):
        fn(rng)


def test_address_patterns_stay_in_their_range():
    rng = np.random.default_rng()
    lines = C.permuted_within_line(rng, 40, 4, line=2) // 128  # 32 elements a line
    assert sorted(lines.tolist()) == [2] * 32 + [3] * 8
    first = C.permuted_within_line(rng, 32, 4, line=5)
    assert sorted(first.tolist()) == list(range(5 * 128, 6 * 128, 4))  # each element once
    r = C.random_scatter(rng, 1000, 8, elements=3)
    assert set(r.tolist()) <= {0, 8, 16} and len(set(r.tolist())) == 3


def test_every_bool_parameter_is_strict():
    """One converter for every bool parameter (function rows and kernel rows alike)."""
    with pytest.raises(TypeError, match=r"^clamp: expected a bool"):
        l2persist.AccessPolicyWindow(None, clamp="no")
