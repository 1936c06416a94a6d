"""Regression tests of the safety issue: hostile foreign buffers, negative and overflowing
sizes, NaN samples (CPU), and on the GPU: the first launch of every kernel inside a capture in a
fresh process, a graph over a closed buffer, misaligned bulk reads, negative windows."""

import ctypes
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

import l2persist
from l2persist import _core, coalescing
from l2persist import kernels as K
from l2persist.pytest_plugin import need


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class Hostile:
    """A DLPack producer that lies: a device id or shape of its choosing, no real memory."""

    def __init__(self, device_id=0, shape=(4,)):
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.t = _DLManaged()
        self.t.dl_tensor.data = 0x1000
        self.t.dl_tensor.device = _DLDevice(2, device_id)
        self.t.dl_tensor.ndim = len(shape)
        self.t.dl_tensor.dtype = _DLDataType(2, 32, 1)  # float32
        self.t.dl_tensor.shape = self.shape
        self.device_id = device_id

    def __dlpack_device__(self):
        return (2, self.device_id)

    def __dlpack__(self, **kw):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                        ctypes.c_void_p]
        return new(ctypes.addressof(self.t), b"dltensor", None)


@pytest.mark.parametrize("device_id", [0x7FFFFFFF, -5, -(1 << 31)])
def test_hostile_device_id_is_refused(device_id):
    with pytest.raises((ValueError, l2persist.NoDeviceError)):
        l2persist.as_buffer(Hostile(device_id=device_id))
    with pytest.raises((ValueError, l2persist.NoDeviceError)):
        l2persist.kernels.hot_cold(Hostile(device_id=device_id), Hostile(device_id=device_id))


@pytest.mark.parametrize("shape", [(-1,), (1 << 40, 1 << 40), (4, -4)])
def test_hostile_shapes_are_refused(shape):
    if l2persist.is_available():
        with pytest.raises(ValueError, match="shape"):
            l2persist.as_buffer(Hostile(shape=shape))
    else:
        with pytest.raises((ValueError, l2persist.NoDeviceError)):
            l2persist.as_buffer(Hostile(shape=shape))


def test_negative_and_overflowing_sizes():
    with pytest.raises(ValueError, match="sizes"):
        l2persist.plan_hit_ratios([-1, 100], [1, 1], 100)
    with pytest.raises(ValueError, match="addresses"):
        coalescing.analyze([2**63 - 4], size=4)
    with pytest.raises(ValueError, match="NaN"):
        _core.stats([1.0, float("nan")])


# Each kernel row's first launch, captured: (call, the kernel's name in the graph node, the
# buffers it writes, those poisoned first (outputs that are not also inputs), the NumPy
# reference of each written buffer from the host inputs `h`, and whether it must match exactly).
# Buffers: a, b uint8 (1 MiB); f, f2, f3 float32 and i int32 (N = 2^18; i is a valid map into
# N); z int32 zeros (1024).
_CAPTURED = {
    "stream_read": ("K.stream_read(a, stream=s)", "l2p_read_kernel", (), (), {}, True),
    "triad": ("K.triad(f, f2, f3, stream=s)", "l2p_triad_kernel", ("f",), ("f",),
              {"f": "h['f2'] + np.float32(3.0) * h['f3']"}, False),
    # a: a whole number of 1024 x loads 8-byte words, so the kernel without a per-load test;
    # 1000000 bytes (125000 words) are not, so the tested one
    "l2_read": ("K.l2_read(a, stream=s)", "l2p_l2_read_rows", (), (), {}, True),
    "l2_read ragged": ("K.l2_read(a[:1000000], stream=s)", "l2p_l2_read_kernel", (), (), {}, True),
    "hot_cold": ("K.hot_cold(z, i, stream=s)", "l2p_hot_cold_kernel", ("z", "i"), (),
                 {"z": "h['z']", "i": "h['i'] * np.int32(2)"}, True),
    "hot_cold_read": ("K.hot_cold_read(a[:4096], a, stream=s)", "l2p_hot_cold_read_kernel", (),
                      (), {}, True),
    "gather": ("K.gather(f, f2, i, stream=s)", "l2p_gather_plain", ("f",), ("f",),
               {"f": "h['f2'][h['i']]"}, True),
    "scale_shift": ("K.scale_shift(f, stream=s)", "l2p_scale_shift_kernel", ("f",), (),
                    {"f": "h['f'] * np.float32(2.0) + np.float32(1.0)"}, True),
    "noop": ("K.noop(stream=s)", "l2p_noop_kernel", (), (), {}, True),
    "spin": ("K.spin(1000, stream=s)", "l2p_spin_kernel", (), (), {}, True),
    # indices from the seed: no NumPy reference of the values, their range is checked
    "random_map": ("K.random_map(i, 3, stream=s)", "l2p_random_map_kernel", ("i",), ("i",),
                   {}, True),
    "pattern": ("K.pattern(a, b, stream=s)", "l2p_pattern_kernel", ("b",), ("b",),
                {"b": "np.concatenate([h['a'][:128], np.full(len(h['b']) - 128, 0xFF, "
                      "np.uint8)])"}, True),
    "bulk_read": ("K.bulk_read(a, 1, stream=s)", "l2p_bulk_read_kernel", (), (), {}, True),
    # reads only (1 MiB: chunks 0 and 1); the occupancy query on its launch path must capture
    "sm_read": ("K.sm_read(a, 0, 1, stream=s)", "l2p_sm_read_kernel", (), (), {}, True),
    "streaming": ("K.streaming('copy', dst=b, src=a, stream=s)", "l2p_copy_kernel", ("b",),
                  ("b",), {"b": "h['a']"}, True),
    # atomicAdds at positions from the seed: the same sums whatever the order
    "tax_probe": ("K.tax_probe(i, 'atomic', stream=s)", "l2p_tax_probe_kernel", ("i",), (), {},
                  True),
}

_CAPTURE_SCRIPT = """
import numpy as np, l2persist as l2p
from l2persist import kernels as K
rng = np.random.default_rng({seed})
N = 1 << 18
h = {{"a": rng.integers(0, 256, 1 << 20, dtype=np.uint8),
      "b": rng.integers(0, 256, 1 << 20, dtype=np.uint8),
      "f": rng.standard_normal(N).astype(np.float32),
      "f2": rng.standard_normal(N).astype(np.float32),
      "f3": rng.standard_normal(N).astype(np.float32),
      "i": rng.integers(0, N, N).astype(np.int32), "z": np.zeros(1024, np.int32)}}
d = {{k: l2p.to_device(v) for k, v in h.items()}}
a, b, f, f2, f3, i, z = (d[k] for k in ("a", "b", "f", "f2", "f3", "i", "z"))
OUT, POISON, REF, EXACT = {out!r}, {poison!r}, {ref!r}, {exact!r}
dev = l2p.Device(0)

def reset():
    for k, v in h.items():
        d[k].copy_from(v)
    for k in POISON:
        d[k].fill_bytes(0xFF)
    dev.synchronize()

def outputs():
    return {{k: d[k].to_numpy() for k in OUT}}

def same(x, y):  # bytes, not values: a poisoned float32 is NaN, and NaN != NaN
    return np.array_equal(np.ascontiguousarray(x).view(np.uint8), np.ascontiguousarray(y).view(np.uint8))

reset()
poisoned = outputs()
with l2p.Stream() as s:
    with s.capture() as g:
        {call}
    names = [n.name for n in g.kernel_nodes]
    assert names and any({kname!r} in n for n in names), names
    dev.synchronize()
    for k, v in outputs().items():   # a capture runs nothing
        assert same(v, poisoned[k]), ("ran during capture", k)
    g.launch(stream=s)
    s.synchronize()
    replay = outputs()
    g.close()
    reset()
    {call}
    s.synchronize()
    direct = outputs()
for k in OUT:
    assert same(replay[k], direct[k]), ("replay differs from a direct launch", k)
    if k in POISON:
        assert not np.array_equal(direct[k], poisoned[k]), ("nothing written", k)
    if k in REF:
        want = eval(REF[k])
        if EXACT:
            assert np.array_equal(direct[k], want), ("differs from NumPy", k)
        else:
            np.testing.assert_allclose(direct[k], want, rtol=1e-6, atol=1e-6)
if "random_map" in {call!r}:
    assert direct["i"].min() >= 0 and direct["i"].max() < N, "random_map outside [0, N)"
print("ok")
"""


@pytest.mark.gpu
def test_first_launch_of_each_kernel_inside_a_capture(request):
    """Each in a fresh process: nothing may allocate or synchronize on the launch path. The
    captured graph holds the kernel's node, a capture runs nothing, and its replay writes what
    a direct launch writes (poisoned outputs, NumPy reference where the kernel has one)."""
    # Every row of the kernel table is covered: a new kernel must be added here.
    assert set(_core.KERNELS) <= set(_CAPTURED), set(_core.KERNELS) - set(_CAPTURED)
    seed = zlib.crc32(request.node.nodeid.encode())
    for name, (call, kname, out, poison, ref, exact) in _CAPTURED.items():
        code = _CAPTURE_SCRIPT.format(seed=seed, call=call, kname=kname, out=out,
                                      poison=poison, ref=ref, exact=exact)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 0 and "ok" in r.stdout, (name, r.stderr[-2000:])


@pytest.mark.gpu
def test_graph_over_a_closed_buffer_refuses_to_launch():
    b = l2persist.zeros(1 << 16, np.float32)
    with l2persist.Stream() as s:
        with s.capture() as g:
            l2persist.kernels.scale_shift(b, 2.0, 1.0, stream=s)
        b.close()
        with pytest.raises(ValueError, match="closed"):
            g.launch(stream=s)
        with l2persist.zeros(16, np.float32) as c:  # the context is alive
            l2persist.kernels.scale_shift(c, 1.0, 1.0, stream=s)
            s.synchronize()
            assert (c.to_numpy() == 1.0).all()
        g.close()
        # A captured view is refused once the buffer it hangs from is closed, the view itself
        # still open (its memory is freed with its parent's).
        parent = l2persist.zeros(1 << 16, np.float32)
        view = parent[1024:]
        with s.capture() as g:
            l2persist.kernels.scale_shift(view, 2.0, 1.0, stream=s)
        parent.close()
        assert not view.closed
        with pytest.raises(ValueError, match="belongs to is closed"):
            g.launch(stream=s)
        g.close()
        view.close()


@pytest.mark.gpu
def test_bad_sizes_on_the_gpu_are_refused():
    with l2persist.zeros(1 << 16, np.int32) as b, l2persist.zeros(1 << 16, np.int32) as c:
        if l2persist.Device(0).properties.compute_capability >= (9, 0):
            with pytest.raises(ValueError, match="16-byte aligned"):
                l2persist.kernels.bulk_read(b[1:])
        with pytest.raises(ValueError, match="num_bytes"):
            l2persist.AccessPolicyWindow(b, num_bytes=-5)
        with pytest.raises(ValueError, match="accesses"):
            l2persist.kernels.hot_cold(b, c, accesses=-1)
        l2persist.kernels.hot_cold(b, c)  # still usable
        l2persist.Device(0).synchronize()


# ---- lifetimes and stream ordering of exports ----

@pytest.mark.gpu
def test_dlpack_export_outlives_close():
    torch = need("torch")
    host = np.random.default_rng().random(1 << 20, dtype=np.float32)
    buf = l2persist.to_device(host)
    t = torch.from_dlpack(buf)
    buf.close()  # the tensor still holds the memory: the free is deferred
    with pytest.raises(ValueError, match="closed"):
        buf.to_numpy()
    others = [l2persist.to_device(np.full(1 << 20, 7.0, np.float32)) for _ in range(4)]
    np.testing.assert_array_equal(t.cpu().numpy(), host)  # not the new buffers' sevens
    del t  # the last export's deleter frees the memory now
    for o in others:
        o.close()
    l2persist.Device(0).synchronize()


@pytest.mark.gpu
def test_cai_export_outlives_close_and_is_freed_with_the_last_reference():
    cupy = need("cupy")
    import gc
    n = 16 << 20  # 64 MiB of float32: well above the allocator's noise
    host = np.random.default_rng().random(n, dtype=np.float32)
    free0 = cupy.cuda.runtime.memGetInfo()[0]
    buf = l2persist.to_device(host)
    view = buf[8:]
    a = cupy.asarray(view)  # zero-copy through __cuda_array_interface__; a holds the view
    assert a.data.ptr == view.ptr
    del view
    buf.close()  # closed for l2persist; CuPy still reads the memory
    with pytest.raises(ValueError, match="closed"):
        buf.to_numpy()
    others = [l2persist.to_device(np.full(n, 7.0, np.float32)) for _ in range(3)]
    np.testing.assert_array_equal(cupy.asnumpy(a), host[8:])  # not the new buffers' sevens
    for o in others:
        o.close()
    del a, buf  # the last references: now the memory goes
    gc.collect()
    l2persist.Device(0).synchronize()
    assert cupy.cuda.runtime.memGetInfo()[0] >= free0 - (4 << 20)


@pytest.mark.gpu
def test_dlpack_consumer_stream_waits_for_our_work():
    torch = need("torch")
    host = np.random.default_rng().random(1 << 22, dtype=np.float32)
    with l2persist.to_device(host) as b, l2persist.Stream() as s:
        K.spin(30_000_000, stream=s)  # 30 ms: the scale below runs late on our stream
        K.scale_shift(b, 2.0, 1.0, stream=s)
        t = torch.from_dlpack(b)  # torch passes its current (legacy) stream
        got = t.cpu().numpy()      # read on torch's stream: must see the scale
        np.testing.assert_allclose(got, host * np.float32(2) + np.float32(1), rtol=1e-6)
        s.synchronize()
        del t


@pytest.mark.gpu
def test_memory_is_not_a_stream():
    with l2persist.zeros(16, np.float32) as b:
        with pytest.raises(TypeError, match="stream: l2persist.DeviceBuffer is device memory"):
            K.noop(stream=b)
        with pytest.raises(TypeError, match="stream: .* is device memory"):
            K.scale_shift(b, stream=b)
        cupy = need("cupy")
        mp = cupy.zeros(4).data  # a MemoryPointer has .ptr, like CuPy's streams
        with pytest.raises(TypeError, match=r"stream: \S*MemoryPointer is device memory"):
            K.noop(stream=mp)


@pytest.mark.gpu
def test_cai_never_exports_stream_zero():
    with l2persist.zeros(16, np.float32) as b, l2persist.Stream(wrap=0) as legacy:
        K.scale_shift(b, stream=legacy)
        assert b.__cuda_array_interface__["stream"] == 1
        legacy.synchronize()


@pytest.mark.gpu
def test_close_from_another_thread_during_a_copy_waits_for_it():
    import threading
    import time
    n = (256 << 20) // 4
    want = np.arange(n, dtype=np.uint32)
    for _ in range(3):
        buf = l2persist.to_device(want)
        got = {}

        def read():
            try:
                got["a"] = buf.to_numpy()  # drops the GIL for ~0.1 s
            except ValueError as e:  # closed before the copy began: refused by name
                got["e"] = e

        t = threading.Thread(target=read)
        t.start()
        time.sleep(0.02)
        buf.close()  # the memory outlives the copy in flight
        t.join()
        if "a" in got:
            np.testing.assert_array_equal(got["a"], want)
        else:
            assert "closed" in str(got["e"])
        with l2persist.zeros(16, np.float32) as c:  # the process and device are fine
            K.scale_shift(c, 2.0, 1.0)
            assert (c.to_numpy() == 1.0).all()


@pytest.mark.gpu
def test_dlpack_imports_are_asked_for_the_launch_stream():
    torch = need("torch")
    t = torch.arange(1 << 16, dtype=torch.float32, device="cuda")
    asked = []

    class OnlyDLPack:  # a producer without the CUDA array interface (JAX-like)
        def __dlpack__(self, stream=None):
            asked.append(stream)
            return t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    with l2persist.Stream() as s:
        K.scale_shift(OnlyDLPack(), 2.0, 1.0, stream=s)
        K.scale_shift(OnlyDLPack(), 1.0, 0.0)  # the legacy stream is 1 in DLPack
        s.synchronize()
        assert asked == [s.handle, 1]
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t.cpu().numpy(), np.arange(1 << 16, dtype=np.float32) * 2 + 1)


_RESET_SCRIPT = textwrap.dedent("""
    import ctypes
    import json
    import numpy as np
    import l2persist
    from l2persist import kernels as K

    rng = np.random.default_rng()
    x = rng.standard_normal(1 << 20).astype(np.float32)
    b = l2persist.to_device(x)
    v = b[16:4096]
    s = l2persist.Stream()
    K.scale_shift(b, 2.0, 1.0, stream=s)
    with s.capture() as g:
        K.scale_shift(b, 1.0, 0.0, stream=s)
    s.synchronize()
    # Another library resets the device under us (what cudaDeviceReset does in any runtime).
    cuda = ctypes.CDLL("libcuda.so.1")
    dev = ctypes.c_int()
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxReset_v2(dev) == 0
    errors = {}
    ops = {"launch": lambda: K.scale_shift(b, 2.0, 1.0),
           "view": lambda: K.scale_shift(v, 2.0, 1.0),
           "to_numpy": b.to_numpy, "fill_bytes": lambda: b.fill_bytes(0),
           "copy_from": lambda: b.copy_from(x),
           "copy": lambda: l2persist.copy(v, v),
           "dlpack": lambda: b.__dlpack__(),
           "cai": lambda: b.__cuda_array_interface__,
           "stream": lambda: K.noop(stream=s),
           "graph": g.launch}
    for name, op in ops.items():
        try:
            op()
            errors[name] = None
        except ValueError as e:
            errors[name] = str(e)
    # New memory after the reset may reuse the old addresses: closing the stale buffers and
    # dropping the stale graph must not free or touch it.
    y = rng.standard_normal(1 << 20).astype(np.float32)
    c = l2persist.to_device(y)
    v.close(); b.close(); b.close()
    del g
    s.close()
    K.scale_shift(c, 2.0, 1.0)
    ok = bool(np.array_equal(c.to_numpy(), y * np.float32(2.0) + np.float32(1.0)))
    t = l2persist.benchmark(lambda: K.scale_shift(c, 1.0, 0.0), flush_l2=True, repeat=3)
    l2persist.Device(0).synchronize()
    print(json.dumps({"errors": errors, "ok": ok, "timed": t.median > 0}))
""")


@pytest.mark.gpu
def test_buffers_from_before_a_device_reset_are_refused_and_never_freed():
    r = subprocess.run([sys.executable, "-c", _RESET_SCRIPT], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    import json
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for name, err in out["errors"].items():
        assert err is not None and "was reset" in err, (name, err)
    assert out["errors"]["launch"].startswith("data: device 0 was reset")
    assert out["ok"] and out["timed"]


@pytest.mark.parametrize("call, name", [
    (lambda: l2persist.plan_hit_ratios([16], [1], -1), "set_aside"),
    (lambda: l2persist.plan_hit_ratios([16], [1], 2**64), "set_aside"),
    (lambda: l2persist.plan_hit_ratios([16], [1], 16, -1), "max_window"),
    (lambda: l2persist.plan_hit_ratios([16], [1], 16, max_window=2**64), "max_window"),
    (lambda: l2persist._core.default_set_aside(-1, -1), "l2_cache_size"),
    (lambda: l2persist._core.default_set_aside(1, 2**64), "persisting_l2_cache_max_size"),
    (lambda: l2persist.Device(2**70), "index"),
    (lambda: l2persist.reset_persisting_l2(2**70), "device"),
    (lambda: l2persist._core.seed_map(4, seed=2**32), "seed"),
    (lambda: l2persist._core.time_calls(lambda: None, repeat=2**70), "repeat"),
])
def test_arithmetic_that_would_wrap_is_refused(call, name):
    """Values that would wrap (negative sizes, 2**64) raise ValueError
    naming the argument and its range, on any machine."""
    with pytest.raises(ValueError, match=rf"^{name}: .* is outside \["):
        call()
