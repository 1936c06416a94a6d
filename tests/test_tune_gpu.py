"""tune() on the GPU: state restored (also through an exception), apply() reproduces the
measured result, foreign (PyTorch) work and graph targets."""

import numpy as np
import pytest

import l2persist as l2p
from l2persist import AccessPolicyWindow
from l2persist import kernels as K
from l2persist.tune import EXPLAIN_COUNTERS

pytestmark = pytest.mark.gpu
MIB = 1 << 20
QUICK = dict(repeat=3, max_evals=6, confirm_rounds=1)


@pytest.fixture
def hot_cold(rng, device):
    hot = l2p.to_device(rng.integers(0, 100, 4 * MIB // 4, dtype=np.int32))
    cold = l2p.to_device(rng.integers(0, 100, 64 * MIB // 4, dtype=np.int32))
    yield hot, cold
    hot.close()
    cold.close()


def test_tune_restores_limit_and_windows(device, hot_cold):
    hot, cold = hot_cold
    with l2p.Stream() as s:
        before = AccessPolicyWindow(cold, 4096, hit_ratio=0.25)
        s.access_policy_window = before
        limit = device.persisting_l2_limit
        r = l2p.tune(lambda: K.hot_cold(hot, cold, stream=s), [hot], stream=s, **QUICK)
        assert device.persisting_l2_limit == limit
        w = s.access_policy_window
        assert (w.base_ptr, w.num_bytes) == (before.base_ptr, before.num_bytes)
        assert w.hit_ratio == pytest.approx(0.25)
        assert r.evals <= 6 and len(r.trials) == r.evals
        assert r.limit0_ms > 0 and r.default_ms > 0 and r.found_ms > 0
        assert r.baseline_ms == min(r.limit0_ms, r.default_ms)
        s.access_policy_window = None


def test_tune_restores_after_an_exception(device, hot_cold):
    hot, cold = hot_cold
    calls = []

    def fn():
        calls.append(1)
        if len(calls) == 30:
            raise KeyboardInterrupt
        K.hot_cold(hot, cold, stream=s)
    with l2p.Stream() as s:
        limit = device.persisting_l2_limit
        with pytest.raises(KeyboardInterrupt):
            l2p.tune(fn, [hot], stream=s, **QUICK)
        assert device.persisting_l2_limit == limit
        assert s.access_policy_window is None or s.access_policy_window.num_bytes == 0
        K.hot_cold(hot, cold, stream=s)  # the stream and the device still work
        s.synchronize()


def test_tune_computes_right_and_apply_reproduces(device, rng):
    host_hot = rng.integers(-1000, 1000, 16 * MIB // 4, dtype=np.int32)
    host_cold = rng.integers(-1000, 1000, 256 * MIB // 4, dtype=np.int32)
    with l2p.Stream() as s, l2p.to_device(host_hot) as hot, l2p.to_device(host_cold) as cold:
        fn = lambda: K.hot_cold(hot, cold, read_only=True, stream=s)
        r = l2p.tune(fn, [hot], stream=s, repeat=8)
        limit = device.persisting_l2_limit
        base = l2p.benchmark(fn, stream=s, repeat=20).median
        with r.apply():
            if r.persistence_helps:
                assert device.persisting_l2_limit >= r.recommended["set_aside"]
                assert s.access_policy_window.num_bytes == hot.nbytes
            applied = l2p.benchmark(fn, stream=s, repeat=20).median
        assert device.persisting_l2_limit == limit
        # what apply() installs runs as fast as tune measured it, relative to the baseline
        expected = r.found_ms / r.baseline_ms if r.persistence_helps else 1.0
        assert abs(np.log((applied / base) / expected)) < 0.15, (applied, base, expected)
        # the read-only kernel leaves the data alone
        np.testing.assert_array_equal(hot.to_numpy(), host_hot)
        print("\n" + r.table())


def test_tune_graph_target(device, hot_cold):
    hot, cold = hot_cold
    with l2p.Stream() as s:
        with s.capture() as g:
            K.hot_cold(hot, cold, read_only=True, stream=s)
        r = l2p.tune(lambda: g.launch(stream=s), [l2p.Target(hot, on=g)], stream=s,
                     **QUICK)
        assert r.evals >= 3
        for node in g.kernel_nodes:  # restored: no window on the node
            w = node.access_policy_window
            assert w is None or w.num_bytes == 0
        g.close()


def test_tune_foreign_torch_work(device, rng):
    torch = pytest.importorskip("torch")
    table = torch.randn(1 << 20, 32, device="cuda")          # 128 MiB, larger than L2
    zipf = rng.zipf(1.3, 1 << 18) % table.shape[0]
    idx = torch.as_tensor(zipf, device="cuda")
    target_rows = 1 << 16
    # the target (the table's first rows) is where the lookups go: the hottest row and most
    # of all lookups, so a window over it is the one worth tuning
    counts = np.bincount(zipf, minlength=table.shape[0])
    assert counts.argmax() < target_rows and counts[:target_rows].sum() > 0.9 * zipf.size
    ts = torch.cuda.Stream()
    with torch.cuda.stream(ts):
        fn = lambda: torch.nn.functional.embedding(idx, table)
        limit = device.persisting_l2_limit
        r = l2p.tune(fn, [l2p.Target(table[:target_rows], on=ts)], stream=ts, **QUICK)
        assert device.persisting_l2_limit == limit
        with l2p.Stream(wrap=ts) as tw:                       # the stream's window restored
            assert tw.access_policy_window is None or tw.access_policy_window.num_bytes == 0
        out = fn()
    torch.cuda.synchronize()
    assert 3 <= r.evals <= QUICK["max_evals"] and len(r.trials) == r.evals
    # every looked-up row, against NumPy's indexing of the table
    np.testing.assert_array_equal(out.cpu().numpy(), table.cpu().numpy()[zipf])


def test_every_friendly_counter_resolves_and_tune_explains(device, hot_cold):
    hot, cold = hot_cold
    if not l2p.counters_available()[0]:
        pytest.skip(l2p.counters_available()[1])
    with l2p.Stream() as s:
        fn = lambda: K.hot_cold(hot, cold, stream=s)
        names = list(l2p.counter_names())
        c = l2p.measure(fn, names, device=device, warmup=fn)
        assert set(c) == set(names)
        r = l2p.tune(fn, [hot], stream=s, counters=True, **QUICK)
        assert set(r.counters) == set(EXPLAIN_COUNTERS)
        for v in r.counters.values():
            assert v["baseline"] >= 0 and v["pick"] >= 0
        assert r.counters["dram_bytes_read"]["baseline"] > 0.5 * cold.nbytes
        assert "| counter |" in r.table()


def test_tune_reports_tax_and_scope(device, rng):
    """The set-aside's cost and scope on the hot/cold kernel (read-write, hot 16 MiB: 1.07x on
    the H200 and 1.17x on the H100 in the integrator's grids): the switch cost is measured,
    the scope follows from the C rule, and the tax is probed at the recommended set-aside (or a note says why not)."""
    hot = l2p.to_device(rng.integers(0, 100, 16 * MIB // 4, dtype=np.int32))
    cold = l2p.to_device(rng.integers(0, 100, 512 * MIB // 4, dtype=np.int32))
    try:
        # From limit 0 every pick that helps sets a limit of its own, so a switch is measured.
        # (From the device's default, a pick at the default level switches nothing, and
        # switch_ms and scope are None: one H200 run in random order picked it.)
        # The gain is ~1.07x, near tune's own 1.01x floor plus its recheck: a search that
        # misses it once is run once more (a tune that cannot find it misses both).
        with l2p.Stream() as s, l2p.persisting_l2_disabled(device):
            for attempt in range(2):
                r = l2p.tune(lambda: K.hot_cold(hot, cold, stream=s), [hot], stream=s)
                assert device.persisting_l2_limit == 0
                if r.persistence_helps:
                    break
                assert r.switch_ms is None and r.scope is None, r.table(trials=True)
    finally:
        hot.close()
        cold.close()
    assert r.persistence_helps, r.table(trials=True)
    assert r.baseline_ms == (r.default_ms if r.baseline == "default" else r.limit0_ms)
    assert r.recommended["set_aside"] > 0
    assert 0.0 < r.switch_ms < 50.0  # a device synchronisation: ~0.5 ms when idle
    expect = l2p._core.tune_scope(r.switch_ms, r.baseline_ms, r.found_ms)
    assert r.scope == expect and r.scope["min_calls"] >= 1
    assert "scope:" in r.verdict() and "stream capture" in r.verdict()
    try:
        import l2persist.tax  # noqa: F401 - written beside this change
    except ImportError:
        assert "not measured" in r.tax_note
    else:
        if r.recommended["set_aside"] != r.default_limit:
            assert r.tax["set_aside"] == r.recommended["set_aside"]
            assert r.tax["slowdown"] > 0 and "tax at set-aside" in r.verdict()
            assert "measured" in r.tax_line()
    print(r.table())
