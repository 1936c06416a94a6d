"""Streams, access policy windows on streams / graph nodes / single launches, the resets,
set-aside sharing and the guide's worked example."""

import numpy as np
import pytest

import l2persist
from l2persist import AccessPolicyWindow, AccessProperty
from l2persist.pytest_plugin import need

pytestmark = pytest.mark.gpu


@pytest.fixture
def data(rng):
    host = rng.random(1 << 16).astype(np.float32)
    buf = l2persist.to_device(host)
    yield buf, host
    buf.close()


def test_stream_lifecycle():
    s = l2persist.Stream()
    assert s.owned and s.handle != 0 and s.__cuda_stream__() == (0, s.handle)
    s.synchronize()
    s.close()
    s.close()
    with pytest.raises(ValueError, match="closed"):
        s.synchronize()
    with l2persist.Stream(0) as s2:
        assert not s2.closed
    assert s2.closed


def test_wrap_foreign_streams():
    cupy = need("cupy")
    torch = need("torch")
    cs = cupy.cuda.Stream(non_blocking=True)
    w = l2persist.Stream(cs)
    assert w.handle == cs.ptr and not w.owned
    w.close()
    cs.synchronize()  # still alive: wrapping does not own
    ts = torch.cuda.Stream()
    w2 = l2persist.Stream(wrap=ts)
    assert w2.handle == ts.cuda_stream
    w2.synchronize()
    w2.close()


def test_window_validation(data):
    buf, _ = data
    mx = l2persist.Device(0).properties.access_policy_max_window_size
    with pytest.raises(ValueError, match=r"hit_ratio: 1.5 is outside \[0, 1\]"):
        AccessPolicyWindow(buf, hit_ratio=1.5)
    with pytest.raises(ValueError, match="miss_prop: PERSISTING"):
        AccessPolicyWindow(buf, miss_prop=AccessProperty.PERSISTING)
    with pytest.raises(ValueError, match="num_bytes.*past the end"):
        AccessPolicyWindow(buf, buf.nbytes + 1)
    with pytest.raises(ValueError, match="hit_prop: 9"):
        AccessPolicyWindow(buf, hit_prop=9)
    with pytest.raises(TypeError, match="hit_ratio"):
        AccessPolicyWindow(buf, hit_ratio="1")
    with pytest.raises(TypeError, match="num_bytes"):
        AccessPolicyWindow(buf, 1.0)
    w = AccessPolicyWindow(buf, buf.nbytes * 2, clamp=True)
    assert w.num_bytes == buf.nbytes and w.target is buf
    w = AccessPolicyWindow(buf, 4096, offset=1024, hit_ratio=0.25)
    assert w.base_ptr == buf.ptr + 1024 and w.num_bytes == 4096 and w.hit_ratio == 0.25
    assert w.hit_prop is AccessProperty.PERSISTING and w.miss_prop is AccessProperty.STREAMING
    big_n = mx // 4 + 1024
    with l2persist.empty(big_n, dtype=np.float32) as big:
        with pytest.raises(ValueError, match="access_policy_max_window_size"):
            AccessPolicyWindow(big)
        assert AccessPolicyWindow(big, clamp=True).num_bytes == mx


def test_stream_window_reads_back_and_clears(data):
    buf, _ = data
    with l2persist.Stream() as s:
        assert s.access_policy_window is None
        w = AccessPolicyWindow(buf, hit_ratio=0.6)
        s.access_policy_window = w
        back = s.access_policy_window
        assert back == w and back.num_bytes == buf.nbytes and back.hit_ratio == pytest.approx(0.6)
        assert back.hit_prop is AccessProperty.PERSISTING
        s.access_policy_window = None  # num_bytes = 0 disables
        assert s.access_policy_window is None
        with pytest.raises(TypeError, match="window"):
            s.access_policy_window = 3


def test_access_policy_scope_restores_also_through_exception(data, device):
    buf, _ = data
    first = AccessPolicyWindow(buf[:1024], hit_ratio=1.0)
    second = AccessPolicyWindow(buf, hit_ratio=0.5)
    with l2persist.Stream() as s, device.persisting_l2():
        s.access_policy_window = first
        with s.access_policy(second) as w:
            assert w is second and s.access_policy_window == second
        assert s.access_policy_window == first
        with pytest.raises(ZeroDivisionError):
            with s.access_policy(second, reset=True):
                assert s.access_policy_window == second
                1 / 0
        assert s.access_policy_window == first
        with s.access_policy(None):
            assert s.access_policy_window is None
        assert s.access_policy_window == first


def test_kernel_matches_numpy_and_per_launch_window_leaves_stream_alone(data, device):
    buf, host = data
    w_stream = AccessPolicyWindow(buf[:4096], hit_ratio=0.5)
    w_launch = AccessPolicyWindow(buf, hit_ratio=1.0)
    with l2persist.Stream() as s, device.persisting_l2():
        l2persist.kernels.scale_shift(buf, 3.0, -1.0, stream=s, window=w_launch)
        assert s.access_policy_window is None  # untouched, and not set as a side effect
        s.access_policy_window = w_stream
        l2persist.kernels.scale_shift(buf, 0.5, 2.0, stream=s, window=w_launch)
        assert s.access_policy_window == w_stream
        s.synchronize()
    expect = (host * np.float32(3) - np.float32(1)) * np.float32(0.5) + np.float32(2)
    np.testing.assert_allclose(buf.to_numpy(), expect, rtol=1e-6)


def test_kernel_bad_inputs(data):
    buf, _ = data
    with l2persist.empty(16, dtype=np.float64) as f64:
        with pytest.raises(TypeError, match=r"data: dtype .* is not allowed here \(want a 4-byte float\)"):
            l2persist.kernels.scale_shift(f64)
    with pytest.raises(TypeError, match="window"):
        l2persist.kernels.scale_shift(buf, window="w")
    with pytest.raises(TypeError, match="stream"):
        l2persist.kernels.scale_shift(buf, stream=1.5)
    with pytest.raises(TypeError, match="data"):
        l2persist.kernels.scale_shift([1, 2, 3])


def test_capture_copies_stream_window_into_nodes(data, device, rng):
    buf, host = data
    w = AccessPolicyWindow(buf, hit_ratio=0.75)
    with l2persist.Stream() as s, device.persisting_l2():
        s.access_policy_window = w
        with s.capture() as graph:
            l2persist.kernels.scale_shift(buf, 2.0, 0.0, stream=s)
            l2persist.kernels.scale_shift(buf, 1.0, 1.0, stream=s)
        nodes = graph.kernel_nodes
        assert len(nodes) == 2
        # Measured on H100: capture copies the stream's window into every kernel node.
        assert all(n.access_policy_window == w for n in nodes)
        s.access_policy_window = None
        fresh = rng.random(host.size).astype(np.float32)
        buf.copy_from(fresh)
        graph.launch(s)
        assert graph.instantiated
        s.synchronize()
        np.testing.assert_allclose(buf.to_numpy(), fresh * 2 + 1, rtol=1e-6)
        other = AccessPolicyWindow(buf[:2048], hit_ratio=0.25, miss_prop=AccessProperty.NORMAL)
        nodes[0].access_policy_window = other
        assert not graph.instantiated  # changed: the next launch re-instantiates
        assert nodes[0].access_policy_window == other and nodes[1].access_policy_window == w
        graph.set_access_policy_window(None)
        assert all(n.access_policy_window is None for n in graph.kernel_nodes)
        graph.set_access_policy_window(other)
        assert all(n.access_policy_window == other for n in graph.kernel_nodes)
        graph.launch(s)
        s.synchronize()
        np.testing.assert_allclose(buf.to_numpy(), (fresh * 2 + 1) * 2 + 1, rtol=1e-6)
        graph.close()
        graph.close()
        with pytest.raises(ValueError, match="closed"):
            graph.launch(s)


def test_capture_without_stream_window_has_none(data):
    buf, _ = data
    with l2persist.Stream() as s:
        with s.capture() as g:
            l2persist.kernels.scale_shift(buf, stream=s)
        assert [n.access_policy_window for n in g.kernel_nodes] == [None]
        g.close()


def test_capture_discarded_on_exception(data):
    buf, host = data
    with l2persist.Stream() as s:
        with pytest.raises(RuntimeError, match="inside"):
            with s.capture() as g:
                l2persist.kernels.scale_shift(buf, stream=s)
                raise RuntimeError("inside")
        assert g.closed
        l2persist.kernels.scale_shift(buf, 1.0, 0.0, stream=s)  # the stream works again
        s.synchronize()
    np.testing.assert_array_equal(buf.to_numpy(), host)  # nothing captured ever ran


def test_normal_window_reset(data, device):
    buf, _ = data
    w = AccessPolicyWindow(buf)
    normal = w.as_normal()
    assert normal.hit_prop is AccessProperty.NORMAL and normal.base_ptr == w.base_ptr
    with l2persist.Stream() as s, device.persisting_l2():
        s.access_policy_window = w
        l2persist.kernels.scale_shift(buf, 1.0, 0.0, stream=s)
        s.access_policy_window = normal  # the guide's first reset
        l2persist.kernels.scale_shift(buf, 1.0, 0.0, stream=s)
        assert s.access_policy_window == normal
        s.synchronize()


def test_plan_windows_share_the_set_aside_on_two_streams(device, rng):
    host_a = rng.random(4096).astype(np.float32)  # 16 KB each, as in the guide
    host_b = rng.random(4096).astype(np.float32)
    with l2persist.to_device(host_a) as a, l2persist.to_device(host_b) as b:
        wa, wb = l2persist.plan_windows(device, [a, b], set_aside=16384)
        assert wa.hit_ratio == wb.hit_ratio == 0.5 and wa.target is a and wb.target is b
        with device.persisting_l2(16384) as granted:
            wa2, wb2 = l2persist.plan_windows(device, [(a, 3), (b, 1)])
            assert wa2.hit_ratio * a.nbytes + wb2.hit_ratio * b.nbytes <= granted * (1 + 1e-6)
            with l2persist.Stream() as s1, l2persist.Stream() as s2:
                s1.access_policy_window, s2.access_policy_window = wa, wb
                for _ in range(5):
                    l2persist.kernels.scale_shift(a, 1.0, 1.0, stream=s1)
                    l2persist.kernels.scale_shift(b, 1.0, 2.0, stream=s2)
                s1.synchronize()
                s2.synchronize()
        np.testing.assert_allclose(a.to_numpy(), host_a + 5, rtol=1e-6)
        np.testing.assert_allclose(b.to_numpy(), host_b + 10, rtol=1e-6)
    with l2persist.empty(4) as c, pytest.raises(ValueError, match="weight"):
        l2persist.plan_windows(device, [(c, -1)], set_aside=1)


def test_guide_example(device):
    from l2persist.examples import CONFIGS, guide_example
    start = device.persisting_l2_limit
    r = guide_example(device, repeats=10)
    assert device.persisting_l2_limit == start
    assert set(r.runs) == set(CONFIGS)
    for run in r.runs.values():
        assert len(run["A_samples"]) == 10 and all(t > 0 for t in run["A_samples"])
        assert run["B"] > 0 and run["C"] > 0
    # the speedup is quoted against the better of limit 0 and the default, never (c)
    assert r.speedup("A") == pytest.approx(
        min(r.runs["limit0"]["A"], r.runs["default"]["A"]) / r.runs["window"]["A"])
    assert "(a) limit 0" in r.table() and "(c)" in r.table()
    print("\n" + r.table())


def test_benchmark_times_a_kernel(data):
    buf, _ = data
    with l2persist.Stream() as s:
        t = l2persist.benchmark(lambda: l2persist.kernels.scale_shift(buf, stream=s), stream=s,
                                warmup=2, repeat=15)
        assert len(t.samples) == 15 and 0 < t.min <= t.median <= t.max
    with pytest.raises(ValueError, match="repeat"):
        l2persist.benchmark(lambda: None, repeat=0)
    with pytest.raises(ZeroDivisionError):
        l2persist.benchmark(lambda: 1 / 0)
