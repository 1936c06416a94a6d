"""The kernel suite against NumPy on fresh random data, outputs poisoned before each run."""

import os

import numpy as np
import pytest

import l2persist
from l2persist import kernels as K

pytestmark = pytest.mark.gpu
POISON = 0xA5


def poisoned(shape, dtype):
    b = l2persist.empty(shape, dtype=dtype)
    b.fill_bytes(POISON)
    return b


@pytest.mark.parametrize("variant", ["plain", "restrict", "texture"])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("map_dtype", [np.int32, np.int64])
def test_gather_matches_numpy(rng, variant, dtype, map_dtype):
    n_src, n = int(rng.integers(1, 5000)), int(rng.integers(1, 5000))
    src_h = rng.integers(-2**31, 2**31 - 1, n_src).astype(np.int32).view(dtype)
    map_h = rng.integers(0, n_src, n).astype(map_dtype)
    with l2persist.to_device(src_h) as src, l2persist.to_device(map_h) as m, \
            poisoned(n, dtype) as out:
        K.gather(out, src, m, variant)
        assert out.to_numpy().tobytes() == src_h[map_h].tobytes()
        src_h2 = rng.random(n_src).astype(np.float32).view(dtype)
        src.copy_from(src_h2)  # the cached texture reads the new data
        out.fill_bytes(POISON)
        K.gather(out, src, m, variant, check=False, texture="per_launch")
        assert out.to_numpy().tobytes() == src_h2[map_h].tobytes()


def test_gather_checks_the_map(rng):
    with l2persist.to_device(rng.random(100).astype(np.float32)) as src, \
            l2persist.to_device(np.array([0, 5, 100, 7], np.int32)) as m, poisoned(4, np.float32) as out:
        with pytest.raises(ValueError, match=r"map: a checked gather on device \d+ read map "
                           r"entries outside its src"):
            K.gather(out, src, m, "restrict", check="sync")
        np.testing.assert_array_equal(out.to_numpy()[[0, 1, 3]], src.to_numpy()[[0, 5, 7]])
        assert out.to_numpy()[2] == 0
        # the default check does not wait: the error surfaces at the stream's next sync ...
        with l2persist.Stream() as s:
            K.gather(out, src, m, "plain", stream=s)
            with pytest.raises(ValueError, match="outside its src"):
                s.synchronize()
            s.synchronize()  # ... once
            K.gather(out, src, m, "plain", stream=s)
            assert K.gather_errors() is True and K.gather_errors() is False
            # a checked gather can be the first launch of a capture
            with s.capture() as g:
                K.gather(out, src, m, "restrict", stream=s)
            g.launch(stream=s)
            with pytest.raises(ValueError, match="outside its src"):
                s.synchronize()
            g.close()
        with pytest.raises(ValueError, match="check"):
            K.gather(out, src, m, check="later")
        with pytest.raises(ValueError, match="variant"):
            K.gather(out, src, m, "ldg")
        with pytest.raises(ValueError, match="texture"):
            K.gather(out, src, m, "texture", texture="sometimes")
        with l2persist.empty(4, np.float64) as f64, pytest.raises(TypeError, match="out"):
            K.gather(f64, src, m)
        with l2persist.empty(4, np.float32) as fmap, pytest.raises(TypeError, match="map"):
            K.gather(out, src, fmap)
        with l2persist.empty(5, np.float32) as out5, pytest.raises(ValueError, match="map has 4"):
            K.gather(out5, src, m)
        ok = l2persist.to_device(np.array([1, 2, 3, 4], np.int32))
        K.gather(out, src, ok)  # still usable after the refused map
        np.testing.assert_array_equal(out.to_numpy(), src.to_numpy()[[1, 2, 3, 4]])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_random_map_is_uniform_and_seeded(dtype):
    n = 1 << 20
    with l2persist.empty(n, dtype) as a, l2persist.empty(n, dtype) as b, \
            l2persist.empty(n, dtype) as c:
        a.fill_bytes(POISON)
        K.random_map(a, 7, range=1000)
        K.random_map(b, 7, range=1000)
        K.random_map(c, 8, range=1000)
        x = a.to_numpy()
        assert x.min() >= 0 and x.max() < 1000
        assert np.array_equal(x, b.to_numpy()) and not np.array_equal(x, c.to_numpy())
        counts = np.bincount(x, minlength=1000)
        chi2 = float(((counts - n / 1000) ** 2 / (n / 1000)).sum())
        assert chi2 < 1200  # 999 degrees of freedom; p(chi2 > 1200) < 1e-5


def test_seed_map_reproduces_glibc_rand():
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.srand(0)
    want = [libc.rand() % 12345 for _ in range(5000)]
    assert K.seed_map(5000, 12345).tolist() == want
    assert K.seed_map(3, dtype=np.int64).dtype == np.int64


def _words(a, width):
    """Element view of a uint8 array for an access width (8 and 16: lanes of uint32)."""
    if width in (1, 2, 4):
        return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[width]).reshape(-1, 1)
    return a.view(np.uint32).reshape(-1, width // 4)


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("load", K.LOAD_FLAVOURS)
def test_pattern_load_flavours(rng, width, load):
    _pattern_case(rng, width, load, "wb")


@pytest.mark.parametrize("store", K.STORE_FLAVOURS)
def test_pattern_store_flavours(rng, store):
    _pattern_case(rng, 8, "cg", store)


def _pattern_case(rng, width, load, store, threads=96, blocks=3):
    total = threads * blocks
    lo, ls = int(rng.integers(0, 40)), int(rng.integers(1, 5))
    so, ss = int(rng.integers(0, 40)), int(rng.integers(1, 3))
    n_src, n_dst = lo + ls * total + 8, so + ss * total + 8
    src_h = rng.integers(0, 256, n_src * width, dtype=np.uint8)
    src2_h = rng.integers(0, 256, 64 * width, dtype=np.uint8)
    bidx = int(rng.integers(0, 64))
    dst_h = np.full(n_dst * width, POISON, np.uint8)
    with l2persist.to_device(src_h) as s, l2persist.to_device(src2_h) as s2, \
            l2persist.to_device(dst_h) as d:
        K.pattern(s, d, threads=threads, blocks=blocks, width=width, load_offset=lo,
                  load_stride=ls, store_offset=so, store_stride=ss, src2=s2,
                  broadcast_index=bidx, load=load, store=store)
        got = _words(d.to_numpy(), width)
    sw, bw, want = _words(src_h, width), _words(src2_h, width), _words(dst_h.copy(), width)
    t = np.arange(total)
    want[so + ss * t] = sw[lo + ls * t] + bw[bidx]  # unsigned lanes wrap as in the kernel
    np.testing.assert_array_equal(got, want)


def test_pattern_index_and_study_cases(rng):
    n = 4096
    src_h = rng.integers(0, 2**32, n, dtype=np.uint32)
    idx_h = rng.permutation(n)[:256].astype(np.int32)
    with l2persist.to_device(src_h) as s, l2persist.to_device(idx_h) as idx, \
            l2persist.to_device(np.full(256, 0xA5A5A5A5, np.uint32)) as d:
        K.pattern(s, d, threads=128, blocks=2, index=idx, load="nc")
        np.testing.assert_array_equal(d.to_numpy(), src_h[idx_h])
        # B[x] = A[x+1] and B[x+1] = A[x] for one warp
        d.fill_bytes(0)
        K.pattern(s, d, threads=32, load_offset=1)
        np.testing.assert_array_equal(d.to_numpy()[:32], src_h[1:33])
        K.pattern(s, d, threads=32, store_offset=1)
        np.testing.assert_array_equal(d.to_numpy()[1:33], src_h[:32])
        # C[x] = A[3] + B[x]
        K.pattern(s, d, threads=32, src2=s, broadcast_index=3)
        np.testing.assert_array_equal(d.to_numpy()[:32], src_h[:32] + src_h[3])


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(width=3), ValueError, "width: 3 is not one of 1, 2, 4, 8, 16"),
    (dict(threads=0), ValueError, r"threads: 0 is outside \[1, 1024\]"),
    (dict(threads=2000), ValueError, "threads"),
    (dict(load="ldg"), ValueError, "load: 'ldg' is not one of default, ca"),
    (dict(store="cs2"), ValueError, "store: 'cs2'"),
    (dict(load_offset=1000), ValueError, r"load: elements 1000..1031 are outside"),
    (dict(load_stride=-1), ValueError, "load: elements -31..0"),
    (dict(store_offset=1000), ValueError, "store"),
    (dict(broadcast_index=99999, src2="self"), ValueError, "broadcast_index"),
])
def test_pattern_bad_inputs(kwargs, exc, match):
    with l2persist.zeros(64, np.uint32) as s, l2persist.zeros(64, np.uint32) as d:
        if kwargs.get("src2") == "self":
            kwargs = dict(kwargs, src2=s)
        with pytest.raises(exc, match=match):
            K.pattern(s, d, **kwargs)
        with pytest.raises(ValueError, match="aligned"):
            K.pattern(s[1:], d, width=8, threads=4)
        with l2persist.to_device(np.array([0, 64], np.int32)) as idx, \
                pytest.raises(ValueError, match=r"index: entry 1 is 64"):
            K.pattern(s, d, threads=2, index=idx)
        K.pattern(s, d)  # still fine afterwards


@pytest.mark.parametrize("load", ["default", "cg", "cs", "nc", "evict_first", "evict_last"])
@pytest.mark.parametrize("store", ["wb", "cs"])
def test_streaming_matches_numpy(rng, load, store):
    n = (1 << 18) + 4 * 37  # not a multiple of the grid: exercises the tails
    b_h = rng.random(n).astype(np.float32)
    c_h = rng.random(n).astype(np.float32)
    with l2persist.to_device(b_h) as b, l2persist.to_device(c_h) as c, \
            poisoned(n, np.float32) as d:
        K.stream_copy(d, b, load=load, store=store)
        np.testing.assert_array_equal(d.to_numpy(), b_h)
        d.fill_bytes(POISON)
        K.triad(d, b, c, 2.5, load=load, store=store)
        np.testing.assert_allclose(d.to_numpy(), b_h + np.float32(2.5) * c_h, rtol=2e-7)
        d.fill_bytes(POISON)
        K.stream_write(d, store=store)
        k = np.arange(n // 4, dtype=np.uint32)
        want = np.stack([k, k + 1, k + 2, k + 3], axis=1).ravel()
        np.testing.assert_array_equal(d.to_numpy().view(np.uint32), want)
        K.stream_read(b, load=load)
        K.l2_read(b, 3, load=load)
        l2persist.Device(0).synchronize()


def test_streaming_bad_inputs():
    with l2persist.empty(10, np.uint8) as odd, l2persist.empty(16, np.uint8) as a, \
            l2persist.empty(32, np.uint8) as b:
        with pytest.raises(ValueError, match="16-byte words"):
            K.stream_read(odd)
        with pytest.raises(ValueError, match="dst: 16 bytes, but src has 32"):
            K.stream_copy(a, b)
        with pytest.raises(ValueError, match="16-byte words"):
            K.stream_read(b[1:17])
        with pytest.raises(TypeError, match="float"):
            K.triad(a, a, a)
        with pytest.raises(ValueError, match="op"):
            K.streaming("scale", src=a)
        # Only dst to a read: once a NULL dereference, now the missing src is named.
        with pytest.raises(TypeError, match="src: op 'read' needs this buffer"):
            K.streaming("read", dst=a)
        with pytest.raises(TypeError, match="dst: op 'write' needs this buffer"):
            K.streaming("write", src=a)
        with pytest.raises(ValueError, match="repeats"):
            K.l2_read(a, 0)
        with pytest.raises(ValueError, match="loads: 3"):
            K.l2_read(a, 1, loads=3)
        with pytest.raises(ValueError, match="width: 4"):
            K.l2_read(a, 1, width=4)


def test_l2_read_defaults_launch_what_l2_read_shape_says(rng, device):
    """repeats None reads at least 4 GiB a launch; loads None takes fewer loads (more blocks)
    for a short launch than for a long one; the captured kernel node has the grid that
    l2_read_shape names, and the counters see its bytes."""
    mib = 8
    rows = (mib << 20) // 8 // 1024
    with l2persist.to_device(rng.integers(0, 2**32, (mib << 20) // 4, dtype=np.uint32)) as src, \
            l2persist.Stream() as s:
        long, short = K.l2_read_shape(src.nbytes), K.l2_read_shape(src.nbytes, 1)
        assert long["bytes"] >= 4 << 30 and long["repeats"] == -(-(4 << 30) // src.nbytes)
        assert short["repeats"] == 1 and short["bytes"] == src.nbytes
        assert short["loads"] < long["loads"] == 64
        # 8-byte words: two 1024-thread blocks per SM where an SM holds 2048 threads (the
        # launch bounds' 32 registers; sm_80 / 90 / 100), and no shared memory, as
        # gpu-benches' kernel (a kernel that asks for some can need another L1/shared split
        # than the one before it: kernels/bulk.cu). compute-sanitizer instruments the
        # kernels, so their registers are not the build's there.
        cc = device.properties.compute_capability
        cap = 32 if tuple(cc) in ((8, 0), (9, 0), (10, 0)) else 64
        sanitized = bool(os.environ.get("L2P_SANITIZER"))
        for shape in (long, short, K.l2_read_shape(src.nbytes, 7, loads=32)):
            assert shape["blocks"] == shape["repeats"] * -(-rows // shape["loads"])
            assert shape["shared_bytes"] == 0, shape
            assert sanitized or 0 < shape["registers"] <= cap, shape
        wide = K.l2_read_shape(src.nbytes, 1, width=16, loads=16)
        assert wide["shared_bytes"] == 0 and (sanitized or 0 < wide["registers"] <= 64), wide
        # the grid launched is the one named (a node of a capture keeps its launch shape)
        for repeats, loads in ((None, None), (1, None), (7, 32)):
            with s.capture() as g:
                K.l2_read(src, repeats, loads=loads, stream=s)
            (node,) = g.kernel_nodes
            want = K.l2_read_shape(src.nbytes, repeats, loads=loads)
            assert node.grid == (want["blocks"], 1, 1) and node.block == (1024, 1, 1)
            # and the kernel named: 8 MiB is a whole number of rows at every loads
            assert want["whole_rows"] and "l2p_l2_read_rows" in node.name, (want, node.name)
            g.close()
        # the counters: not under compute-sanitizer, which holds CUPTI's one subscriber
        if not sanitized:
            c = l2persist.measure(lambda: K.l2_read(src, stream=s), ["l2_read_sectors"])
            assert 0.93 * long["bytes"] / 32 <= c["l2_read_sectors"] <= \
                1.03 * long["bytes"] / 32
        with pytest.raises(ValueError, match="loads: 3"):
            K.l2_read_shape(src.nbytes, loads=3)
        with pytest.raises(ValueError, match="width: 4"):
            K.l2_read_shape(src.nbytes, width=4)
        with pytest.raises(ValueError, match="repeats"):
            K.l2_read_shape(src.nbytes, 0)


@pytest.mark.parametrize("width,threads", [(8, 1024), (16, 1024), (8, 96)])
def test_l2_read_reads_every_word_of_src_and_none_past_it(rng, device, width, threads):
    """Every word of src is read, and none past its end, by both of l2_read's kernels (src a
    whole number of threads x loads words: the one with no per-load test; any other size:
    the tested one), at every loads, in one pass and in several. A thread whose words fold
    (XOR) to SINK_MAGIC stores it to the sink, so one planted magic word among zeros tells
    whether the read covered that word: planted in turn at the first and the last word of
    every row of `threads` words (each row is one load of one chunk), and at random words."""
    per = width // 4  # uint32 per word
    unit = threads * 64  # a whole number of rows at every loads (8 to 64)
    whole = unit * int(rng.integers(1, 4))
    # ragged and short sizes are no whole number of rows, so whole at no loads
    sizes = {"whole": whole, "ragged": whole + int(rng.integers(1, threads)),
             "short": whole - threads * int(rng.integers(0, 64)) - int(rng.integers(1, threads))}
    magic, zero = np.zeros(per, np.uint32), np.zeros(per, np.uint32)
    magic[0] = K.SINK_MAGIC

    with l2persist.empty((whole + 2 * unit) * per, np.uint32) as buf:
        buf.fill_bytes(0)

        def read_with_magic_at(src, j, repeats, loads):
            buf[j * per:(j + 1) * per].copy_from(magic)
            K.sink_take()  # clear what anything before left
            K.l2_read(src, repeats, width=width, loads=loads, threads=threads)
            got = K.sink_take()
            buf[j * per:(j + 1) * per].copy_from(zero)
            return got

        for name, n in sizes.items():
            src = buf[:n * per]
            rows = -(-n // threads)
            ends = {min(r * threads + d, n - 1) for r in range(rows) for d in (0, threads - 1)}
            for loads in (8, 16, 32, 64, None):
                shape = K.l2_read_shape(src.nbytes, 3, width=width, loads=loads, threads=threads)
                assert shape["whole_rows"] == (n % threads == 0 and rows % shape["loads"] == 0)
                assert shape["whole_rows"] == (name == "whole"), (name, shape)
                missed = [j for j in sorted(ends) if read_with_magic_at(src, j, 1, loads) == 0]
                assert not missed, (name, n, loads, missed[:8], len(missed))
                for j in rng.integers(0, n, 3):
                    for repeats in (1, 3):
                        got = read_with_magic_at(src, int(j), repeats, loads)
                        assert got == K.SINK_MAGIC, (name, n, int(j), repeats, loads, shape)
                # the word just past src is not read
                assert read_with_magic_at(src, n, 3, loads) == 0, (name, n, loads)


def test_hot_cold_best_practices_kernel(rng):
    hot_n, cold_n = 1024, 4096
    hot_h = rng.integers(1, 1000, hot_n).astype(np.int32)
    cold_h = rng.integers(-1000, 1000, cold_n).astype(np.int32)
    with l2persist.to_device(hot_h) as hot, l2persist.to_device(cold_h) as cold:
        K.hot_cold(hot, cold)
        np.testing.assert_array_equal(cold.to_numpy(), 2 * cold_h)
        # Four threads update each hot element without atomics (as the guide's kernel does):
        # each is doubled between once and four times.
        got = hot.to_numpy()
        ok = np.zeros(hot_n, bool)
        for k in range(1, 5):
            ok |= got == hot_h * 2 ** k
        assert ok.all()
        before = hot.to_numpy()
        K.hot_cold(hot, cold, read_only=True)
        np.testing.assert_array_equal(hot.to_numpy(), before)
        with pytest.raises(ValueError, match="sizes must be"):
            K.hot_cold(hot[:0], cold)
        with l2persist.empty(4, np.float32) as f, pytest.raises(TypeError, match="hot"):
            K.hot_cold(f, cold)


def test_bulk_read_runs_and_checks_its_arguments():
    with l2persist.zeros(1 << 20, np.uint8) as src:
        K.bulk_read(src, 3)
        K.bulk_read(src, 1, chunk=4096, blocks=7)
        l2persist.Device(0).synchronize()
        with pytest.raises(ValueError, match="chunk: 10 is outside"):
            K.bulk_read(src, 1, chunk=10)
        with pytest.raises(ValueError, match="less than one chunk"):
            K.bulk_read(src[:100], 1)


def test_hot_cold_read_runs_every_flavour_pair():
    with l2persist.zeros(1 << 16, np.uint8) as hot, l2persist.zeros(1 << 20, np.uint8) as cold:
        for hl in ("default", "evict_last", "cg"):
            for cl in ("default", "cs", "evict_first"):
                K.hot_cold_read(hot, cold, hot_load=hl, cold_load=cl)
        l2persist.Device(0).synchronize()
        with pytest.raises(ValueError, match="hot_load"):
            K.hot_cold_read(hot, cold, hot_load="x")


def test_benchmark_flush_and_graph(rng):
    with l2persist.to_device(rng.random(1 << 20).astype(np.float32)) as b, \
            l2persist.Stream() as s:
        plain = l2persist.benchmark(lambda: K.stream_read(b, stream=s), stream=s, repeat=10)
        flushed = l2persist.benchmark(lambda: K.stream_read(b, stream=s), stream=s, repeat=10,
                                      flush_l2=True)
        graphed = l2persist.benchmark(lambda: K.stream_read(b, stream=s), stream=s, repeat=10,
                                      graph=True)
        for t in (plain, flushed, graphed):
            assert len(t.samples) == 10 and 0 < t.min <= t.median <= t.max
        # That the flush evicts is checked with counters (test_benchmark_with_counters);
        # times are compared in benchmarks, not in tests that also run under the sanitizer.
        with pytest.raises(ValueError, match="graph=True"):
            l2persist.benchmark(lambda: None, graph=True)
        with pytest.raises(ValueError, match="hold_us"):
            l2persist.benchmark(lambda: None, hold_us=-1)
        idle = l2persist.benchmark(lambda: K.noop(stream=s), stream=s, repeat=10, hold_us=0)
        assert len(idle.samples) == 10


def test_time_calls_passes_fn_errors_through():
    """The timing loop lives in the C core (l2p_time_samples) and calls fn through a callback:
    fn's own exception comes back unchanged, plain or captured, and a failed capture leaves
    the stream usable."""
    def boom():
        raise KeyError("boom")

    with l2persist.Stream() as s:
        for graph in (False, True):
            with pytest.raises(KeyError, match="boom"):
                l2persist._core.time_calls(boom, stream=s, graph=graph, repeat=2)
        samples = l2persist._core.time_calls(lambda: K.noop(stream=s), stream=s, repeat=3,
                                             flush_l2=True)
        assert len(samples) == 3 and all(0 < x < 1000 for x in samples)
        graphed = l2persist._core.time_calls(lambda: K.noop(stream=s), stream=s, repeat=3,
                                             graph=True, hold_us=0)
        assert len(graphed) == 3 and all(0 < x < 1000 for x in graphed)
