"""Two GPUs in one process: device 1 works like device 0, independently, and mixing the two
raises. Skipped with fewer than two devices (run on the two-H200 machine)."""

import json
import subprocess
import sys

import numpy as np
import pytest

import l2persist
from l2persist import AccessPolicyWindow
from l2persist import kernels as K
from l2persist.pytest_plugin import need

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    l2persist.device_count() < 2, reason="needs two CUDA devices")]


def _current_device():
    cupy = need("cupy")
    return cupy.cuda.runtime.getDevice()


def test_properties_and_limits_are_per_device():
    d0, d1 = l2persist.Device(0), l2persist.Device(1)
    assert d1.properties.l2_cache_size > 0 and d1.index == 1
    before0 = d0.persisting_l2_limit
    with d1.persisting_l2(2 * d1.persisting_l2_granule) as granted:
        assert d1.persisting_l2_limit == granted
        assert d0.persisting_l2_limit == before0
    assert d0.persisting_l2_limit == before0
    assert _current_device() == 0


def test_buffers_streams_windows_graphs_on_device_1(rng):
    host = rng.random(1 << 20, dtype=np.float32)
    d1 = l2persist.Device(1)
    with l2persist.to_device(host, 1) as b, l2persist.Stream(1) as s, d1.persisting_l2():
        assert b.device.index == 1 and s.device.index == 1
        w = AccessPolicyWindow(b, hit_ratio=1.0)
        with s.access_policy(w, reset=True):
            K.scale_shift(b, 2.0, 1.0, stream=s)
        K.scale_shift(b, 2.0, 0.0, stream=s, window=w)
        with s.capture() as g:
            K.scale_shift(b, 1.0, 1.0, stream=s)
        g.set_access_policy_window(w)
        g.launch(s)
        s.synchronize()
        want = (host * np.float32(2) + np.float32(1)) * np.float32(2) + np.float32(1)
        np.testing.assert_allclose(b.to_numpy(), want, rtol=1e-6)
        g.close()
    assert _current_device() == 0


def test_a_default_streams_window_goes_to_the_device_it_was_wrapped_for(rng):
    """Handle 0 names the current device's legacy stream: wrapped with device=1, its window is
    read, set and put back on device 1 while device 0 is current, and device 0's legacy stream
    keeps its own. A stream of another device is refused a device it is not on."""
    cupy = need("cupy")
    with l2persist.to_device(rng.random(1 << 20, dtype=np.float32), 1) as b, \
            l2persist.Stream(wrap=0, device=1) as s1, l2persist.Stream(wrap=0, device=0) as s0:
        w = AccessPolicyWindow(b, hit_ratio=1.0)
        assert s1.device.index == 1 and s0.device.index == 0 and _current_device() == 0
        try:
            s1.access_policy_window = w
            assert _current_device() == 0
            assert s0.access_policy_window is None
            assert s1.access_policy_window.base_ptr == b.ptr
            with cupy.cuda.Device(1), l2persist.Stream(wrap=0) as plain:  # device 1 current
                assert plain.device.index == 1 and plain.access_policy_window.base_ptr == b.ptr
        finally:
            s1.access_policy_window = None
        assert s1.access_policy_window is None and _current_device() == 0
    with l2persist.Stream(0) as own0:
        with pytest.raises(ValueError, match=r"device: the stream to wrap is on device 0, not 1"):
            l2persist.Stream(wrap=own0, device=1)


def test_a_plan_on_device_1_windows_device_1s_legacy_stream(rng):
    """A plan's bare default handle is its device's stream: installed and restored on device 1
    while device 0 is current; an l2persist Stream wrapped for device 0 is refused there."""
    host = rng.random(1 << 20, dtype=np.float32)
    with l2persist.to_device(host, 1) as b, \
            l2persist.Stream(wrap=0, device=1) as s1, l2persist.Stream(wrap=0, device=0) as s0:
        w = AccessPolicyWindow(b, hit_ratio=1.0)
        plan = l2persist.Plan(1)
        with pytest.raises(ValueError, match=r"carrier: a stream of device 0 for a plan of "
                                             r"device 1"):
            plan.add(s0, w)
        plan.add(0, w)
        with plan:
            assert _current_device() == 0
            assert s1.access_policy_window.base_ptr == b.ptr
            assert s0.access_policy_window is None
            K.scale_shift(b, 2.0, 1.0, stream=s1)
            s1.synchronize()            # device 1's legacy stream, waited on from device 0
        assert s1.access_policy_window is None and _current_device() == 0
        np.testing.assert_allclose(b.to_numpy(), host * np.float32(2) + np.float32(1), rtol=1e-6)


def test_benchmark_measure_and_tune_on_device_1(rng):
    with l2persist.to_device(rng.random(1 << 22, dtype=np.float32), 1) as b, \
            l2persist.Stream(1) as s:
        t = l2persist.benchmark(lambda: K.scale_shift(b, 1.0, 0.0, stream=s), stream=s,
                                repeat=5, flush_l2=True)
        assert t.median > 0
        if l2persist.counters_available()[0]:
            c = l2persist.measure(lambda: K.scale_shift(b, 1.0, 0.0, stream=s),
                                  ["dram_bytes_read"], device=1)
            assert c["dram_bytes_read"] > 0
        r = l2persist.tune(lambda: K.scale_shift(b, 1.0, 0.0, stream=s), [b], stream=s,
                           device=1, repeat=3, max_evals=6, confirm_rounds=1)
        assert r.evals <= 6 + 3
    assert l2persist.Device(0).persisting_l2_limit == l2persist.Device(0).default_persisting_l2_limit


def test_mixing_devices_raises():
    with l2persist.zeros(1024, np.float32, 0) as a, l2persist.zeros(1024, np.float32, 1) as b, \
            l2persist.Stream(1) as s1:
        with pytest.raises(ValueError, match="device 1, the launch on device 0"):
            K.gather(a, a, l2persist.zeros(1024, np.int32, 1))
        with pytest.raises(ValueError, match="stream: it belongs to device 1, the launch to "
                                             "device 0"):
            K.scale_shift(a, stream=s1)
        with pytest.raises(ValueError, match="device"):
            l2persist.copy(a, b)
        K.scale_shift(b, stream=s1)  # still usable
        s1.synchronize()


def test_report_lists_both():
    out = subprocess.run([sys.executable, "-m", "l2persist", "--json"], capture_output=True,
                         text=True, check=True).stdout
    rep = json.loads(out)
    assert rep["devices"] >= 2 and [r["index"] for r in rep["reports"]][:2] == [0, 1]
