"""The coalescing model (pure C, no GPU): the L1/L2 study's numbers, a NumPy reference on
random addresses, and bad inputs."""

import numpy as np
import pytest

from l2persist import coalescing as C


@pytest.mark.parametrize("threads, eff", [(1, 12.5), (9, 56.25), (17, 70.83), (25, 78.12),
                                          (32, 100.0)])
def test_noncaching_study(threads, eff):
    a = C.analyze(C.contiguous(threads), rule="kepler_noncaching")
    assert round(a.efficiency, 2) == eff
    s = C.analyze(C.contiguous(threads), rule="kepler_noncaching", store=True)
    assert round(s.efficiency, 2) == eff  # stores likewise


def test_caching_study():
    assert round(C.analyze(C.contiguous(1), rule="kepler_caching").efficiency, 2) == 3.12
    assert C.analyze(C.contiguous(32), rule="kepler_caching").efficiency == 100.0
    two = C.analyze(C.contiguous(32, offset=1), rule="kepler_caching")
    assert two.transactions == 2 and two.replays == 1 and two.bytes_moved == 256


def test_offset_by_one_and_broadcast():
    a = C.analyze(C.contiguous(32, offset=1), rule="kepler_noncaching")
    assert (a.transactions, a.sectors, a.efficiency) == (2, 5, 80.0)
    both = C.analyze(C.broadcast(element=3)) + C.analyze(C.contiguous(base=4096))
    assert both.efficiency == 82.5 and both.requests == 2 and both.sectors == 5
    assert C.analyze(C.broadcast()).bytes_requested == 4


def test_rules_differ_where_the_article_and_study_differ():
    # segments 1 and 3 of one line: two runs (two transactions), two segments moved
    addrs = np.array([32, 96], dtype=np.int64)
    a = C.analyze(addrs, rule="kepler_noncaching")
    assert a.transactions == 2 and a.sectors == 2 and a.bytes_moved == 64
    s = C.analyze(addrs, rule="sectors")
    assert s.transactions == 1 and s.sectors == 2


def test_study_table_matches_what_the_study_printed():
    for row in C.study_table():
        got = row[row["study_rule"]]
        for key, want in row["study"].items():
            assert got[key] == pytest.approx(want, abs=0.005), (row["case"], key)


def _reference(addrs, size, active):
    """Sectors, lines, bytes of each warp, by NumPy."""
    out = []
    for w in range(0, len(addrs), 32):
        a = addrs[w:w + 32][active[w:w + 32]]
        if not len(a):
            out.append((0, 0, 0, 0))
            continue
        sectors = np.unique(a >> 5)
        lines = np.unique(a >> 7)
        nbytes = len(np.unique((a[:, None] + np.arange(size)).ravel()))
        out.append((1, len(sectors), len(lines), nbytes))
    return np.array(out)


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16])
def test_sectors_rule_matches_numpy_on_random_addresses(rng, size):
    n = int(rng.integers(1, 2000))
    addrs = rng.integers(0, 1 << 14, n).astype(np.int64) * size
    active = rng.random(n) < 0.8
    a = C.analyze(addrs, size=size, active=active)
    ref = _reference(addrs, size, active)
    assert np.array_equal(a.per_warp["requests"], ref[:, 0])
    assert np.array_equal(a.per_warp["sectors"], ref[:, 1])
    assert np.array_equal(a.per_warp["lines"], ref[:, 2])
    assert np.array_equal(a.per_warp["bytes_requested"], ref[:, 3])
    assert a.sectors == ref[:, 1].sum() and a.bytes_moved == 32 * ref[:, 1].sum()


def test_masks_select_lanes():
    addrs = C.contiguous(64)
    a = C.analyze(addrs, masks=[0x1, 0xFFFFFFFF])
    assert list(a.per_warp["sectors"]) == [1, 4]
    assert C.analyze(addrs, masks=[0, 0]).requests == 0


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(addresses=[-4]), ValueError, "thread 0 has the negative address -4"),
    (dict(addresses=[0, 6]), ValueError, "thread 1's address 6 is not aligned to the 4-byte"),
    (dict(addresses=[0], size=3), ValueError, "size: 3 bytes is not an access size"),
    (dict(addresses=[0], rule="fermi"), ValueError, "rule: 'fermi' is not one of"),
    (dict(addresses=[0], masks=[1 << 33]), ValueError, "lanes beyond the 32 of a warp"),
    (dict(addresses=[0] * 40, masks=[1]), ValueError, "masks: 1 masks for 2 warps"),
    (dict(addresses=[0.5]), TypeError, "addresses: expected a 1-D integer array"),
    (dict(addresses=[0], masks=[1], active=[True]), TypeError, "not both"),
])
def test_bad_inputs(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        C.analyze(**kwargs)


def test_helpers():
    assert list(C.strided(4, 8, 1, 2)) == [8, 24, 40, 56]
    rng = np.random.default_rng(1)
    p = C.permuted_within_line(rng, 32, 4, line=2)
    assert sorted(p) == list(range(256, 384, 4))
    assert C.analyze(p).sectors == 4 and C.analyze(p).lines == 1


@pytest.mark.parametrize("call, err, match", [
    (lambda: C.contiguous(threads=-1), ValueError, r"threads: -1 is outside \[1, "),
    (lambda: C.contiguous(threads=0), ValueError, "threads: 0"),
    (lambda: C.contiguous(threads=True), TypeError, "threads"),
    (lambda: C.contiguous(size=3), ValueError, "size: 3"),
    (lambda: C.strided(stride=-1), ValueError, "offset, stride, base"),
    (lambda: C.broadcast(element=-1), ValueError, "element, base"),
    (lambda: C.analyze(None), TypeError, "addresses: expected a 1-D"),
    (lambda: C.analyze([]), ValueError, "addresses: empty"),
    (lambda: C.analyze([[0, 4]]), ValueError, "addresses:"),
    (lambda: C.analyze([0, 4], rule="kepler"), ValueError, "rule: 'kepler' is not one of"),
    (lambda: C.analyze([0, 4], size=0), ValueError, "size:"),
])
def test_patterns_and_analyze_name_their_bad_argument(call, err, match):
    with pytest.raises(err, match=match):
        call()


@pytest.mark.parametrize("call, err, match", [
    (lambda: C.contiguous(threads=-1), ValueError,
     r"^threads: -1 is outside \[1, 16777216\] \(threads\)$"),
    (lambda: C.strided(threads=2.0), TypeError,
     r"^threads: expected an int \(threads\) in \[1, 16777216\], got float$"),
    (lambda: C.strided(stride=1 << 41), ValueError,
     r"^stride: 2199023255552 is outside \[-1099511627776, 1099511627776\] \(elements\)$"),
    (lambda: C.strided(stride=-1), ValueError,
     r"^offset, stride, base: thread 1's address -4 is outside 0 \.\. 2\*\*63 - 257$"),
    (lambda: C.strided(1 << 24, 16, 1 << 40, 1 << 40), ValueError,
     r"^offset, stride, base: thread \d+'s address does not fit an int64"),
    (lambda: C.broadcast(element=-1), ValueError,
     r"^element, base: thread 0's address -4 is outside 0 \.\. 2\*\*63 - 257$"),
    (lambda: C.broadcast(size=3), ValueError, r"^size: 3 bytes is not an access size"),
])
def test_pattern_ranges_are_the_c_rows(call, err, match):
    """The patterns' arguments are checked by the extension's rows (one home for ranged ints)
    and their addresses by the core, not again in Python."""
    with pytest.raises(err, match=match):
        call()
    assert not hasattr(C, "_int")


def test_patterns_from_c():
    assert C.strided(4, 8, 1, 2).dtype == np.int64
    assert list(C.broadcast(3, 4, 5, 100)) == [120] * 3
    assert list(C.strided(2, 4, -1, 1, base=4)) == [0, 4]
