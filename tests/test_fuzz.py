"""Property-based tests (hypothesis) with random and hostile arguments: every call ends in a
result or a named ValueError / TypeError (or NoDeviceError where the checks pass and no GPU
is there), and the process and the device stay usable. CPU: the validation paths. GPU: the
launch paths, each followed by a probe that the context still computes right."""

import inspect
import re

import numpy as np
import pytest

hyp = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import l2persist  # noqa: E402
from l2persist import _core, coalescing  # noqa: E402
from l2persist import kernels as K  # noqa: E402
from l2persist.pytest_plugin import need

HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["default", "cg", "plain", "sync", "read", "texture", "evict_last"]),
    st.lists(st.integers(-5, 5), max_size=3), st.just(object()))
NAMED = (ValueError, TypeError, OverflowError, l2persist.NoDeviceError)
FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@st.composite
def kernel_call(draw):
    name = draw(st.sampled_from(_core.KERNELS))
    params = list(inspect.signature(getattr(_core, name)).parameters)
    chosen = draw(st.lists(st.sampled_from(params), max_size=4, unique=True))
    return name, {p: draw(HOSTILE) for p in chosen}


def _refusal_is_named(name, kwargs, e):
    """A refusal names an argument given ("window: ..."), or the required one missing."""
    msg = str(e)
    if any(re.search(rf"\b{re.escape(k)}\b", msg) for k in kwargs):
        return True
    required = [p.name for p in inspect.signature(getattr(_core, name)).parameters.values()
                if p.default is inspect.Parameter.empty]
    missing = [r for r in required if r not in kwargs]
    return bool(missing) and f"missing required argument '{missing[0]}'" in msg


@FAST
@given(kernel_call())
def test_kernel_arguments_never_crash(call):
    name, kwargs = call
    kwargs.pop("ns", None)  # a valid ns up to a minute would only make the test slow
    try:
        getattr(_core, name)(**kwargs)
    except l2persist.NoDeviceError:
        # only once the arguments the binder checks without a device have passed: nothing
        # required is missing
        params = inspect.signature(getattr(_core, name)).parameters.values()
        assert all(p.name in kwargs for p in params if p.default is inspect.Parameter.empty)
    except (ValueError, TypeError, OverflowError) as e:
        assert _refusal_is_named(name, kwargs, e), \
            (name, kwargs, e)
    except l2persist.CudaError as e:  # a launch that reached the driver must name its call
        assert e.call
    else:
        assert l2persist.is_available(), (name, kwargs)   # no kernel runs without a GPU
    if l2persist.is_available():
        l2persist.Device(0).synchronize()


@FAST
@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=0, max_size=64),
       st.integers(-3, 40), st.sampled_from(list(coalescing.RULES) + ["bogus"]), st.booleans())
def test_coalescing_model_never_crashes(addrs, size, rule, store):
    try:
        a = coalescing.analyze(np.array(addrs, dtype=np.int64), size=size, rule=rule,
                               store=store)
    except NAMED:
        return
    assert a.sectors >= 0 and a.bytes_moved >= 0 and 0 <= a.efficiency <= 100.0 + 1e-9


@FAST
@given(st.lists(st.integers(-2**64, 2**64), max_size=5), st.lists(
    st.floats(allow_nan=True, allow_infinity=True), max_size=5),
    st.integers(-2**64, 2**65))
def test_hit_ratio_plan_never_crashes(sizes, weights, set_aside):
    try:
        plan = l2persist.plan_hit_ratios(sizes, weights, set_aside)
    except NAMED:
        return
    for (nbytes, ratio), size in zip(plan, sizes):
        assert 0 <= nbytes <= size and 0.0 <= ratio <= 1.0


@FAST
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=20))
def test_statistics_refuse_what_is_not_a_sample(samples):
    try:
        s = _core.stats(samples)
    except NAMED:
        return
    assert s["min"] <= s["median"] <= s["max"]


# ---- on the GPU: the launch paths ----

def _probe():
    """The context still computes right: a fresh scale-shift against NumPy (x * 2 + 1 rounds
    once whether fused or not, so the results must be identical)."""
    host = np.random.default_rng().random(4096, dtype=np.float32)
    with l2persist.to_device(host) as b:
        K.scale_shift(b, 2.0, 1.0)
        np.testing.assert_array_equal(b.to_numpy(), host * np.float32(2) + np.float32(1))


@pytest.mark.gpu
@settings(max_examples=120, deadline=None)
@given(threads=st.integers(-4, 1100), blocks=st.integers(-2, 5), width=st.integers(0, 20),
       load_offset=st.integers(-100, 5000), load_stride=st.integers(-40, 40),
       store_offset=st.integers(-100, 5000), store_stride=st.integers(-40, 40))
def test_pattern_launches_never_poison(threads, blocks, width, **affine):
    with l2persist.zeros(4096, np.uint8) as src, l2persist.zeros(4096, np.uint8) as dst:
        try:
            K.pattern(src, dst, threads=threads, blocks=blocks, width=width, **affine)
            l2persist.Device(0).synchronize()
        except NAMED:
            pass
    _probe()


@pytest.mark.gpu
@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5000), src_n=st.integers(1, 5000), lo=st.integers(-10**6, 0),
       hi=st.integers(1, 10**6))
def test_gather_with_hostile_maps_is_right_or_raises(n, src_n, lo, hi):
    rng = np.random.default_rng()
    src_h = rng.integers(0, 2**31, src_n, dtype=np.int32)
    map_h = rng.integers(lo, hi, n, dtype=np.int64)
    with l2persist.to_device(src_h) as src, l2persist.to_device(map_h) as mp, \
            l2persist.empty(n, np.int32) as out:
        out.fill_bytes(0xAB)
        bad = bool(((map_h < 0) | (map_h >= src_n)).any())
        if bad:
            with pytest.raises(ValueError, match="outside its src"):
                K.gather(out, src, mp, check="sync")
        else:
            K.gather(out, src, mp, check="sync")
        ok = (map_h >= 0) & (map_h < src_n)
        got = out.to_numpy()
        np.testing.assert_array_equal(got[ok], src_h[map_h[ok]])
        assert (got[~ok] == 0).all()
    _probe()


@pytest.mark.gpu
@settings(max_examples=100, deadline=None)
@given(offset=st.integers(-10, 1 << 21), num_bytes=st.one_of(st.none(), st.integers(-10, 1 << 21)),
       hit_ratio=st.floats(allow_nan=True, allow_infinity=True), clamp=st.booleans())
def test_windows_are_inside_their_buffer_or_refused(offset, num_bytes, hit_ratio, clamp):
    with l2persist.zeros(1 << 20, np.uint8) as b:
        try:
            w = l2persist.AccessPolicyWindow(b, num_bytes, offset=offset, hit_ratio=hit_ratio,
                                             clamp=clamp)
        except NAMED:
            return
        assert b.ptr <= w.base_ptr and w.base_ptr + w.num_bytes <= b.ptr + b.nbytes
        assert 0.0 <= w.hit_ratio <= 1.0


@pytest.mark.gpu
def test_soak_ten_thousand_cycles_leave_memory_where_it_was():
    cupy = need("cupy")
    dev = l2persist.Device(0)
    dev.synchronize()

    def cycle():
        with l2persist.zeros(1 << 14, np.float32) as b, l2persist.Stream() as s:
            w = l2persist.AccessPolicyWindow(b, hit_ratio=0.5)
            with s.access_policy(w):
                K.scale_shift(b, 1.0, 1.0, stream=s)
            K.scale_shift(b, 1.0, 1.0, stream=s, window=w)
            s.synchronize()

    for _ in range(50):  # let allocator pools settle before the baseline
        cycle()
    free_before = cupy.cuda.runtime.memGetInfo()[0]
    for _ in range(10_000):
        cycle()
    free_after = cupy.cuda.runtime.memGetInfo()[0]
    assert abs(free_after - free_before) <= 2 << 20, (free_before, free_after)
    _probe()
