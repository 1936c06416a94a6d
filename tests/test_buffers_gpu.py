"""DeviceBuffer: NumPy round trips, views, lifetime, errors and zero-copy interop."""

import gc
import weakref

import numpy as np
import pytest

import l2persist
from l2persist.pytest_plugin import need

pytestmark = pytest.mark.gpu

DTYPES = [np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32, np.float64,
          np.complex64, np.bool_, np.dtype([("a", "<i4"), ("b", "<f8")])]


def _random(rng, shape, dtype):
    dtype = np.dtype(dtype)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    a = raw.view(dtype).reshape(shape)
    if dtype == np.bool_:
        a = raw.astype(bool).reshape(shape)
    return a


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0,), (1,), (1000,), (7, 13), (2, 3, 5)])
def test_round_trip(rng, dtype, shape):
    host = _random(rng, shape, dtype)
    with l2persist.to_device(host) as buf:
        assert buf.shape == shape and buf.dtype == np.dtype(dtype)
        assert buf.size == host.size and buf.nbytes == host.nbytes
        back = buf.to_numpy()
        assert back.dtype == host.dtype and back.shape == host.shape
        assert back.tobytes() == host.tobytes()  # bitwise: NaNs in random bits compare unequal
        other = _random(rng, shape, dtype)
        buf.copy_from(other)
        assert buf.to_numpy().tobytes() == other.tobytes()


def test_empty_zeros_follow_numpy(rng):
    with l2persist.empty(5) as e, l2persist.zeros((3, 4), dtype=np.int16) as z:
        assert e.dtype == np.float64 and e.shape == (5,)
        e.fill_bytes(0xAB)  # poisoned, then overwritten
        assert np.all(e.to_numpy().view(np.uint8) == 0xAB)
        assert z.to_numpy().dtype == np.int16 and not z.to_numpy().any()
    with l2persist.empty(4, device=0) as a, l2persist.empty(4, device=l2persist.Device(0)) as b:
        assert a.device == b.device == l2persist.Device(0)


def test_views_share_memory_and_keep_parent_alive(rng):
    host = rng.random(1000).astype(np.float32)
    buf = l2persist.to_device(host)
    view = buf[100:300]
    assert view.shape == (200,) and view.ptr == buf.ptr + 400 and view.base is buf
    np.testing.assert_array_equal(view.to_numpy(), host[100:300])
    patch = rng.random(200).astype(np.float32)
    view.copy_from(patch)
    host[100:300] = patch
    np.testing.assert_array_equal(buf.to_numpy(), host)
    ref = weakref.ref(buf)
    del buf
    gc.collect()
    assert ref() is not None  # the view holds it
    np.testing.assert_array_equal(view.to_numpy(), host[100:300])
    assert view[-50:].to_numpy().tolist() == host[250:300].tolist()
    assert len(view[5:5]) == 0


def test_view_errors():
    with l2persist.empty((4, 4), dtype=np.float32) as b2, l2persist.empty(8) as b1:
        with pytest.raises(ValueError, match="1-D"):
            b2[1:2]
        with pytest.raises(ValueError, match="step must be 1"):
            b1[::2]
        with pytest.raises(TypeError, match="slices"):
            b1[3]


def test_close_is_idempotent_and_use_after_close_raises():
    buf = l2persist.empty(16, dtype=np.int32)
    view = buf[2:4]
    buf.close()
    buf.close()
    assert buf.closed
    with pytest.raises(ValueError, match="closed"):
        buf.to_numpy()
    with pytest.raises(ValueError, match="closed"):
        buf.ptr
    with pytest.raises(ValueError, match="belongs to is closed"):
        view.to_numpy()
    with pytest.raises(ValueError, match="closed"):
        buf.__cuda_array_interface__


def test_copy_mismatch_names_shapes():
    with l2persist.empty(10, dtype=np.float32) as buf:
        with pytest.raises(ValueError, match="do not match"):
            buf.copy_from(np.zeros(11, dtype=np.float32))
        with pytest.raises(ValueError, match="do not match"):
            buf.copy_from(np.zeros(10, dtype=np.float64))


@pytest.mark.parametrize("shape, dtype, exc, match", [
    ((-1,), None, ValueError, "shape"),
    ((4,), object, TypeError, "dtype"),
    ((4,), "not-a-dtype", TypeError, None),
])
def test_bad_allocations(shape, dtype, exc, match):
    with pytest.raises(exc, match=match):
        l2persist.empty(shape, dtype=dtype)


def test_out_of_memory_is_a_cuda_memory_error_and_the_process_goes_on(rng):
    with pytest.raises(l2persist.CudaMemoryError) as e:
        l2persist.empty(1 << 50, dtype=np.uint8)
    assert isinstance(e.value, MemoryError) and e.value.name == "cudaErrorMemoryAllocation"
    host = rng.random(64)
    with l2persist.to_device(host) as buf:  # the device still works
        np.testing.assert_array_equal(buf.to_numpy(), host)
        l2persist.kernels.noop()
        l2persist.Device(0).synchronize()


def test_cuda_array_interface(rng):
    with l2persist.to_device(rng.random((3, 5)).astype(np.float32)) as buf:
        cai = buf.__cuda_array_interface__
        assert cai["version"] == 3 and cai["shape"] == (3, 5) and cai["typestr"] == "<f4"
        assert cai["data"] == (buf.ptr, False) and cai["strides"] is None
        assert "stream" in cai


def test_cupy_round_trip_without_copy(rng):
    cupy = need("cupy")
    host = rng.random(1000).astype(np.float32)
    with l2persist.to_device(host) as buf:
        c = cupy.asarray(buf)  # via __cuda_array_interface__
        assert c.data.ptr == buf.ptr
        np.testing.assert_array_equal(cupy.asnumpy(c), host)
        c *= 2  # writes through
        cupy.cuda.runtime.deviceSynchronize()
        np.testing.assert_array_equal(buf.to_numpy(), host * 2)
    arr = cupy.asarray(rng.random((4, 6)))
    wrapped = l2persist.as_buffer(arr)
    assert wrapped.ptr == arr.data.ptr and wrapped.shape == (4, 6) and wrapped.base is arr
    np.testing.assert_array_equal(wrapped.to_numpy(), cupy.asnumpy(arr))
    with pytest.raises(ValueError, match="contiguous"):
        l2persist.as_buffer(arr[:, ::2])


def test_torch_round_trip_without_copy(rng):
    torch = need("torch")
    host = rng.random(777).astype(np.float32)
    with l2persist.to_device(host) as buf:
        t = torch.from_dlpack(buf)
        assert t.data_ptr() == buf.ptr and t.device.type == "cuda"
        np.testing.assert_array_equal(t.cpu().numpy(), host)
    t = torch.arange(12, dtype=torch.int64, device="cuda").reshape(3, 4)
    wrapped = l2persist.as_buffer(t)
    assert wrapped.ptr == t.data_ptr() and wrapped.dtype == np.int64 and wrapped.shape == (3, 4)
    np.testing.assert_array_equal(wrapped.to_numpy(), np.arange(12).reshape(3, 4))
    wrapped.close()
    wrapped.close()
    assert t.sum().item() == 66  # torch's tensor is intact after our release
    with pytest.raises(TypeError, match="not device memory"):
        l2persist.as_buffer(np.zeros(3))  # NumPy has __dlpack__, on the CPU
    with pytest.raises(TypeError, match="__cuda_array_interface__ or __dlpack__"):
        l2persist.as_buffer([1, 2, 3])
