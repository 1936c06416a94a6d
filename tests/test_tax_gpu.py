"""The set-aside tax on a GPU: the probe kernel against NumPy, and the measured probe (the
tax shows for writes at the maximum set-aside, not for reads; the limit is restored)."""

import numpy as np
import pytest

import l2persist
from l2persist import kernels as K
from l2persist import tax

pytestmark = pytest.mark.gpu
MIB = 1 << 20
POISON = np.uint32(0xDEADBEEF)


@pytest.fixture
def n():
    return (1 << 20) + 12345  # not a multiple of any grid


def test_streaming_atomics_count_every_access(n, device):
    accesses = 3 * n + 777
    with l2persist.zeros(n, np.uint32, device) as t:
        with l2persist.Stream(device) as s:
            K.tax_probe(t, "atomic", pattern="streaming", accesses=accesses, stream=s)
            s.synchronize()
        got = t.to_numpy()
    want = np.full(n, accesses // n, np.uint32)
    want[: accesses % n] += 1
    np.testing.assert_array_equal(got, want)


def test_random_atomics_cover_the_table(n, device, rng):
    accesses = 4 * n
    with l2persist.zeros(n, np.uint32, device) as t:
        with l2persist.Stream(device) as s:
            K.tax_probe(t, "atomic", accesses=accesses, seed=int(rng.integers(1, 2**32)),
                        stream=s)
            s.synchronize()
        got = t.to_numpy()
    assert int(got.sum(dtype=np.uint64)) == accesses
    # uniform: a word is missed with probability e^-4 (1.8 %); Poisson(4) counts
    assert abs(np.mean(got == 0) - np.exp(-4)) < 0.005
    assert got.max() < 25


def test_streaming_rmw_and_random_writes(n, device, rng):
    v = rng.integers(0, 2**32, n, dtype=np.uint32)
    with l2persist.to_device(v, device) as t:
        with l2persist.Stream(device) as s:
            K.tax_probe(t, "rmw", pattern="streaming", accesses=n, stream=s)
            s.synchronize()
        np.testing.assert_array_equal(t.to_numpy(), v * np.uint32(3) + np.uint32(1))
    with l2persist.to_device(np.full(n, POISON), device) as t:
        with l2persist.Stream(device) as s:
            K.tax_probe(t, "write", accesses=4 * n, stream=s)
            s.synchronize()
        left = np.mean(t.to_numpy() == POISON)
    assert abs(left - np.exp(-4)) < 0.005


def test_reads_change_nothing(n, device, rng):
    v = rng.integers(0, 2**32, n, dtype=np.uint32)
    with l2persist.to_device(v, device) as t:
        with l2persist.Stream(device) as s:
            K.tax_probe(t, "read", stream=s)
            K.tax_probe(t, "read", pattern="streaming", stream=s)
            s.synchronize()
        np.testing.assert_array_equal(t.to_numpy(), v)


def test_probe_kernel_bad_arguments(device):
    with l2persist.zeros(16, np.uint32, device) as t:
        with pytest.raises(ValueError, match="kind"):
            K.tax_probe(t, "scatter")
        with pytest.raises(ValueError, match="pattern"):
            K.tax_probe(t, "write", pattern="zigzag")
        with pytest.raises(ValueError, match="table"):
            K.tax_probe(t[:0], "write")
        with pytest.raises(ValueError, match="accesses"):
            K.tax_probe(t, "write", accesses=0)
        np.testing.assert_array_equal(t.to_numpy(), 0)  # nothing ran
    with l2persist.zeros(16, np.float64, device) as f:
        with pytest.raises((TypeError, ValueError), match="table"):
            K.tax_probe(f, "write")


def needs_own_limit(device):
    if device.persisting_l2_source != "process" or not device.supports_persisting_l2:
        pytest.skip("the set-aside is not this process's to change (MPS or no persisting L2)")


def test_probe_shows_the_write_tax_and_restores_the_limit(device):
    needs_own_limit(device)
    pmax = device.properties.persisting_l2_cache_max_size
    before = device.persisting_l2_limit
    r = tax.probe(device, pmax)
    assert device.persisting_l2_limit == before
    p = tax.predict(device, pmax)
    assert r.set_aside == p.set_aside
    assert p.knee_bytes < r.working_set <= device.properties.l2_cache_size
    assert r.base_ms > 0 and r.at_ms > 0
    # measured 3.1x (H200) / 3.5x (H100) at 16 MiB (l2p_tax.c's rows); the bar here is that a tax shows at all
    assert r.slowdown > 1.5, r
    print(f"probe at {pmax / MIB:.2f} MiB over {r.working_set / MIB:.0f} MiB: "
          f"{r.slowdown:.2f}x measured, {r.predicted:.2f}x predicted")


def test_reads_pay_no_tax(device):
    needs_own_limit(device)
    pmax = device.properties.persisting_l2_cache_max_size
    r = tax.probe(device, pmax, kind="read")
    assert 0.85 < r.slowdown < 1.15, r


def test_set_aside_tax_with_probe(device):
    needs_own_limit(device)
    before = device.persisting_l2_limit
    p = tax.set_aside_tax(device, device.properties.persisting_l2_cache_max_size, probe=True)
    assert p.probe is not None and p.probe.set_aside == p.set_aside
    assert device.persisting_l2_limit == before
    q = tax.set_aside_tax(device)  # the current limit, no probe
    assert q.probe is None and q.set_aside >= before


def test_probe_refuses_bad_input_and_leaves_the_limit(device):
    before = device.persisting_l2_limit
    with pytest.raises(ValueError, match="set_aside"):
        tax.probe(device, device.properties.persisting_l2_cache_max_size + 1)
    with pytest.raises(ValueError, match="kind"):
        tax.probe(device, 0, kind="scatter")
    with pytest.raises(ValueError, match="repeat"):
        tax.probe(device, 0, repeat=0)
    assert device.persisting_l2_limit == before


def test_knee_at_the_maximum_is_where_the_model_puts_it(device):
    """The model's bar on this GPU, at the maximum set-aside: the measured knee (first working
    set 1.15x slower, 4 MiB steps) within 4 MiB of the model's."""
    needs_own_limit(device)
    pmax = device.properties.persisting_l2_cache_max_size
    p = tax.predict(device, pmax)
    ws = list(range(4 * MIB, 28 * MIB + 1, 4 * MIB))
    slow = [tax.probe(device, pmax, working_set=w, repeat=5).slowdown for w in ws]
    lo, hi = tax.measured_knee(ws, slow)
    print("slowdowns:", [f"{w // MIB}: {s:.2f}" for w, s in zip(ws, slow)],
          f"model knee {p.knee_bytes / MIB:.1f} MiB")
    assert hi, slow
    assert max(lo - p.knee_bytes, p.knee_bytes - hi, 0) <= 4 * MIB, (lo, hi, p.knee_bytes)


def test_set_asides_below_the_onset_cost_nothing(device):
    """Up to 3 granules (the driver's default on an H100 / H200) the model predicts no tax,
    and writes over most of the L2 are measured as fast as at limit 0."""
    needs_own_limit(device)
    g = device.persisting_l2_granule
    p = tax.predict(device, 3 * g)
    if p.taxed:
        pytest.skip(f"on this chip 3 granules already reach the onset ({p.onset_fraction:.0%})")
    ws = device.properties.l2_cache_size * 2 // 3 // MIB * MIB
    r = tax.probe(device, 3 * g, working_set=ws)
    assert 0.9 < r.slowdown < 1.1, r


# ---- the companion stream of the probe ----

def test_zero_companion_changes_no_result(n, device):
    """A companion of zeros feeds 0 into every write: the results are those without one,
    for every kind (same seed), while the companion is read."""
    accesses = 2 * n
    with l2persist.Stream(device) as s, \
            l2persist.zeros(3 * accesses, np.uint32, device) as comp:
        for kind in ("write", "rmw", "atomic"):
            with l2persist.zeros(n, np.uint32, device) as a, \
                    l2persist.zeros(n, np.uint32, device) as b:
                K.tax_probe(a, kind, accesses=accesses, seed=7, stream=s)
                K.tax_probe(b, kind, accesses=accesses, seed=7, companion=comp,
                            companion_words=3, stream=s)
                s.synchronize()
                ha, hb = a.to_numpy(), b.to_numpy()
                if kind == "atomic":  # atomics add in any order: the same sums
                    np.testing.assert_array_equal(ha, hb, err_msg=kind)
                else:  # colliding plain writes race (the H200 kept either writer's value):
                    # the same words are written, whichever value won
                    np.testing.assert_array_equal(ha != 0, hb != 0, err_msg=kind)


def test_companion_words_are_each_read_once(n, device, rng):
    """Streaming atomics add 1 + the access's companion words: the table's total is the
    number of accesses plus the sum of the first words x accesses companion words (the rest
    of the buffer is never read)."""
    accesses, words = n + 999, 2
    comp = rng.integers(0, 1 << 8, words * accesses + 4096, dtype=np.uint32)
    with l2persist.Stream(device) as s, l2persist.to_device(comp, device) as c, \
            l2persist.zeros(n, np.uint32, device) as t:
        K.tax_probe(t, "atomic", pattern="streaming", accesses=accesses, companion=c,
                    companion_words=words, stream=s)
        s.synchronize()
        got = int(t.to_numpy().sum(dtype=np.uint64))
    want = accesses + int(comp[: words * accesses].sum(dtype=np.uint64))
    assert got % 2**32 == want % 2**32


def test_companion_bad_arguments(device):
    with l2persist.zeros(16, np.uint32, device) as t, \
            l2persist.zeros(64, np.uint32, device) as c:
        with pytest.raises(ValueError, match=r"companion: companion_words=2 needs a companion"):
            K.tax_probe(t, "write", accesses=8, companion_words=2)
        with pytest.raises(ValueError, match=r"companion_words: 0 with a companion buffer"):
            K.tax_probe(t, "write", accesses=8, companion=c)
        with pytest.raises(ValueError, match=r"companion: 64 words is fewer than"):
            K.tax_probe(t, "write", accesses=40, companion=c, companion_words=2)
        with pytest.raises(ValueError, match=r"companion_words: 17 is outside \[0, 16\]"):
            K.tax_probe(t, "write", accesses=1, companion=c, companion_words=17)
        np.testing.assert_array_equal(t.to_numpy(), 0)  # nothing ran


# ---- the access shapes' probes ----

def test_row_probe_touches_whole_rows(device):
    """Atomics in rows of 32 words: every word of a row gets the same count (a row is taken
    whole), the counts add up to the accesses, and the rows are spread over the table."""
    rows, accesses = 4096, 32 * 20000
    with l2persist.Stream(device) as s, l2persist.zeros(32 * rows, np.uint32, device) as t:
        K.tax_probe(t, "atomic", row_words=32, accesses=accesses, seed=11, stream=s)
        s.synchronize()
        got = t.to_numpy().reshape(rows, 32)
    assert (got == got[:, :1]).all()
    assert int(got.sum()) == accesses
    assert (got[:, 0] > 0).sum() > 0.9 * rows  # 20000 draws over 4096 rows: nearly all


def test_sweep_probe_passes_over_every_array_with_its_companion(device):
    """A sweep over 3 arrays: a pass read-modify-writes every position of each (x -> 3x + 1 +
    c), c its companion words at that position, the same words every pass (two launches of
    one pass each: passes within a launch may race on a word); the words after the 3 parts
    are never touched."""
    n, arrays = 3 * 50000 + 2, 3
    part = n // arrays
    comp = np.arange(2 * part, dtype=np.uint32) % 7
    with l2persist.Stream(device) as s, l2persist.zeros(n, np.uint32, device) as t, \
            l2persist.to_device(comp, device) as c:
        t.copy_from(np.full(n, POISON, np.uint32))
        for _ in range(2):
            K.tax_probe(t, "rmw", pattern="streaming", arrays=arrays, accesses=part,
                        companion=c, companion_words=2, stream=s)
        s.synchronize()
        got = t.to_numpy()
    cpos = comp[:part] + comp[part:]
    want = np.full(part, POISON, np.uint32)  # uint32 arrays wrap as the kernel's words do
    for _ in range(2):
        want = want * np.uint32(3) + np.uint32(1) + cpos
    for a in range(arrays):
        np.testing.assert_array_equal(got[a * part:(a + 1) * part], want)
    np.testing.assert_array_equal(got[3 * part:], POISON)


def test_shape_bad_arguments(device):
    with l2persist.zeros(96, np.uint32, device) as t, \
            l2persist.zeros(8, np.uint32, device) as c:
        with pytest.raises(ValueError, match=r"row_words: 3 is not one of 1, 2, 4, 8, 16, 32"):
            K.tax_probe(t, "write", row_words=3)
        with pytest.raises(ValueError, match=r"arrays: 17 is outside \[1, 16\]"):
            K.tax_probe(t, "write", pattern="streaming", arrays=17)
        with pytest.raises(ValueError, match=r"arrays: 3 needs pattern='streaming'"):
            K.tax_probe(t, "write", arrays=3)
        with pytest.raises(ValueError, match=r"row_words: 32 needs pattern='random'"):
            K.tax_probe(t, "write", pattern="streaming", row_words=32)
        with pytest.raises(ValueError, match=r"companion: 8 words is fewer than"):
            K.tax_probe(t, "rmw", pattern="streaming", arrays=3, companion=c,
                        companion_words=1)  # one part is 32 words
        np.testing.assert_array_equal(t.to_numpy(), 0)  # nothing ran


# ---- measure: the tax on the caller's own work ----

def test_measure_sees_the_write_tax_and_restores_the_limit(device):
    needs_own_limit(device)
    pmax = device.properties.persisting_l2_cache_max_size
    before = device.persisting_l2_limit
    ws = tax.predict(device, pmax).probe_working_set
    with l2persist.Stream(device) as s, l2persist.zeros(ws // 4, np.uint32, device) as t:
        r = tax.measure(lambda: K.tax_probe(t, "write", stream=s), pmax, stream=s)
        # the same probe through tax.probe, as a reference
        ref = tax.probe(device, pmax, stream=s, working_set=ws)
    assert device.persisting_l2_limit == before
    assert r.set_aside == tax.predict(device, pmax).set_aside
    lo, hi = r.interval
    assert lo <= r.slowdown <= hi and r.slowdown > 1.5, r
    assert 2 <= r.rounds <= 20 and len(r.base_samples) == r.rounds * 5
    assert r.slowdown == pytest.approx(ref.slowdown, rel=0.25), (r, ref)
    print(r.summary(), f"(tax.probe: {ref.slowdown:.2f}x)")


def test_measure_of_reads_below_the_knee_is_one(device):
    needs_own_limit(device)
    with l2persist.Stream(device) as s, l2persist.zeros((4 * MIB) // 4, np.uint32, device) as t:
        r = tax.measure(lambda: K.tax_probe(t, "read", stream=s),
                        device.properties.persisting_l2_cache_max_size, stream=s,
                        tolerance=0.05)
    assert 0.9 < r.slowdown < 1.1, r


def test_measure_restores_the_limit_on_interrupt(device):
    needs_own_limit(device)
    before = device.persisting_l2_limit
    calls = []

    def fn():
        calls.append(1)
        if len(calls) == 9:  # in the first set-aside block
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tax.measure(fn, device.properties.persisting_l2_cache_max_size)
    assert device.persisting_l2_limit == before and len(calls) == 9


def test_measure_and_set_aside_tax_refuse_bad_arguments(device):
    before = device.persisting_l2_limit
    with pytest.raises(ValueError, match=r"set_aside: -1 bytes is outside"):
        tax.measure(lambda: None, -1, device=device)
    with pytest.raises(ValueError, match=r"max_rounds: 1 is outside \[2, 1000\]"):
        tax.measure(lambda: None, 0, device=device, max_rounds=1)
    with pytest.raises(TypeError, match="fn: expected a callable"):
        tax.measure(None, 0, device=device)
    assert device.persisting_l2_limit == before


def test_set_aside_tax_with_work(device):
    needs_own_limit(device)
    pmax = device.properties.persisting_l2_cache_max_size
    before = device.persisting_l2_limit
    with l2persist.Stream(device) as s, l2persist.zeros((4 * MIB) // 4, np.uint32, device) as t:
        p = tax.set_aside_tax(device, pmax, stream=s,
                              work=lambda: K.tax_probe(t, "read", stream=s))
    assert p.measured is not None and p.measured.set_aside == p.set_aside
    assert p.probe is None and p == tax.predict(device, pmax)
    assert device.persisting_l2_limit == before


def test_real_work_pays_the_tax_at_the_maximum(device):
    """The study's encoder inference forward (PyTorch, no window) is slower at the maximum
    set-aside than at limit 0 (measured 1.31x on the H200; the bar: a tax shows)."""
    needs_own_limit(device)
    torch = pytest.importorskip("torch")
    from l2persist.studies import set_aside_tax as study
    pmax = device.properties.persisting_l2_cache_max_size
    before = device.persisting_l2_limit
    with l2persist.Stream(device) as s:
        ext = torch.cuda.ExternalStream(s.handle)
        works = dict(study._encoder_work(torch, ext))
        infer = works["encoder inference forward"]
        infer()
        s.synchronize()
        r = tax.measure(infer, pmax, stream=s, max_rounds=10)
    assert device.persisting_l2_limit == before
    print(r.summary())
    assert r.slowdown > 1.05 and r.interval[0] > 1.0, r
