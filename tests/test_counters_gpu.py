"""Hardware counters through CUPTI's Range Profiler, checked against the L1/L2 study and
against bytes we know a kernel moves."""

import numpy as np
import pytest

import l2persist
from l2persist import kernels as K

pytestmark = pytest.mark.gpu

LOAD = ["global_load_efficiency", "global_load_sectors", "global_load_requests"]
STORE = ["global_store_efficiency", "global_store_sectors", "global_store_requests"]


@pytest.fixture(scope="module")
def bufs():
    with l2persist.zeros(4096, np.uint32) as a, l2persist.zeros(4096, np.uint32) as b, \
            l2persist.zeros(4096, np.uint32) as out:
        yield a, b, out


@pytest.mark.parametrize("threads, efficiency", [(1, 12.50), (9, 56.25), (17, 70.83),
                                                 (25, 78.12), (32, 100.0)])
def test_study_load_efficiency(bufs, threads, efficiency):
    a, _, out = bufs
    c = l2persist.measure(lambda: K.pattern(a, out, threads=threads), LOAD)
    assert c["global_load_efficiency"] == pytest.approx(efficiency, abs=0.01)
    assert c["global_load_requests"] == 1
    assert c.passes >= 1


def test_study_offset_by_one_and_broadcast(bufs):
    a, b, out = bufs
    c = l2persist.measure(lambda: K.pattern(a, out, threads=32, load_offset=1), LOAD)
    assert c["global_load_sectors"] == 5
    assert c["global_load_efficiency"] == pytest.approx(80.0, abs=0.01)
    c = l2persist.measure(lambda: K.pattern(b, out, threads=32, src2=a, broadcast_index=3), LOAD)
    assert c["global_load_efficiency"] == pytest.approx(82.5, abs=0.01)  # C[x] = A[3] + B[x]
    assert c["global_load_requests"] == 2 and c["global_load_sectors"] == 5


@pytest.mark.parametrize("threads, offset, efficiency, sectors", [
    (1, 0, 12.50, 1), (9, 0, 56.25, 2), (17, 0, 70.83, 3), (25, 0, 78.12, 4), (32, 1, 80.0, 5)])
def test_study_store_efficiency(bufs, threads, offset, efficiency, sectors):
    a, _, out = bufs
    c = l2persist.measure(lambda: K.pattern(a, out, threads=threads, store_offset=offset), STORE)
    assert c["global_store_efficiency"] == pytest.approx(efficiency, abs=0.01)
    assert c["global_store_sectors"] == sectors and c["global_store_requests"] == 1


def _cold_l2(dev, scratch, stream=None):
    """Before each pass: demote persisting lines and evict the L2 by writing 2x its size."""
    def prep():
        l2persist.reset_persisting_l2(dev)
        K.stream_write(scratch, stream=stream)
    return prep


def test_streaming_read_dram_bytes(device):
    n = 256 << 20
    scratch_n = 2 * device.properties.l2_cache_size
    with l2persist.zeros(n, np.uint8) as src, l2persist.empty(scratch_n, np.uint8) as scratch:
        c = l2persist.measure(lambda: K.stream_read(src),
                              ["dram_bytes_read", "l2_read_sectors", "lts__t_sectors_op_read.sum"],
                              warmup=_cold_l2(device, scratch))
    assert c["dram_bytes_read"] == pytest.approx(n, rel=0.02)
    assert c["l2_read_sectors"] == pytest.approx(n / 32, rel=0.02)
    # All L2 reads, the traffic between Hopper's two L2 partitions included, exceed it.
    assert c["lts__t_sectors_op_read.sum"] > 1.2 * n / 32


@pytest.fixture
def known_l2(device):
    """The L2 state the counts below assume, whatever earlier tests left: no set-aside and no
    persisting lines (restored after). Under MPS the set-aside is the server's: lines are
    only reset."""
    if device.persisting_l2_source != "process":
        device.reset_persisting_l2()
        yield
        return
    with l2persist.persisting_l2_disabled(device):
        yield


# Sectors that missed in the SM's own L2 partition, crossed to the other one and hit there.
FABRIC_READ_HITS = "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum"


def test_l2_resident_reread_hits(device, known_l2):
    # Starts from limit 0, reset lines and a fresh stream (no window an earlier test may have
    # left on the default stream); --l2p-guard names a test that leaks the limit or a window.
    # loads=64 (16 blocks of 512 KiB a pass) as in the runs that saw the 7/8.
    scratch_n = 2 * device.properties.l2_cache_size
    with l2persist.zeros(8 << 20, np.uint8) as src, \
            l2persist.empty(scratch_n, np.uint8) as scratch, l2persist.Stream(device) as s:
        c = l2persist.measure(lambda: K.l2_read(src, 10, loads=64, stream=s),
                              ["l2_hit_rate", "dram_bytes_read"],
                              warmup=lambda: K.l2_read(src, 1, loads=64, stream=s))
        # Cold: a 2x-L2 write evicts the region first (the last pass may have left it in L2).
        cold = l2persist.measure(lambda: K.l2_read(src, 1, loads=64, stream=s),
                                 ["l2_read_hit_sectors"], warmup=_cold_l2(device, scratch, s))
        # One CUPTI pass for the three (GH100): every count comes from the same replay of
        # warm-up and launch. The list this replaced (hit sectors, l2_fabric_sectors) took
        # two passes: the fabric count printed beside the 7/8 (1528) came from another replay.
        warm = l2persist.measure(lambda: K.l2_read(src, 1, loads=64, stream=s),
                                 ["l2_read_hit_sectors", FABRIC_READ_HITS, "dram_bytes_read"],
                                 warmup=lambda: K.l2_read(src, 1, loads=64, stream=s))
    # Served by the L2, not DRAM. (Lookups in the SM's near L2 partition of lines homed in the
    # far one count as misses there and are served over the fabric: hit rates stay below 100.)
    assert c["dram_bytes_read"] < 0.1 * 10 * (8 << 20) and c["l2_hit_rate"] > 80
    # Every byte of every pass is requested from the L2, none served by the L1 (a block's
    # footprint exceeds it), for both load widths.
    for width, loads in ((8, 64), (16, 32)):
        with l2persist.zeros(8 << 20, np.uint8) as src:
            s = l2persist.measure(lambda: K.l2_read(src, 10, width=width, loads=loads),
                                  ["l2_read_sectors", "l1_hit_rate"])
        # Up to ~5 % of the sectors are at times served by the L1 (seen once in 8 full runs
        # on an H200: 4.5 % fewer L2 sectors); never more, never extra L2 traffic.
        assert 0.93 * 10 * (8 << 20) / 32 <= s["l2_read_sectors"] <= 1.03 * 10 * (8 << 20) / 32
        assert s["l1_hit_rate"] < 7
    # A pass starts with a cold L2; the in-pass warm-up fills it for the region.
    n_sectors = (8 << 20) // 32
    assert cold["l2_read_hit_sectors"] < 0.1 * n_sectors
    # The warm pass finds the region in the L2: hits in the SM's own partition plus hits in
    # the other one over the fabric, and (almost) no DRAM reads. The near hits alone depend
    # on where the scheduler puts l2_read's 16 blocks (block b reads chunk b, 512 KiB): a
    # block on an SM of the other partition than the warm-up's block of its chunk misses
    # near for the lines that the other partition holds, and finds them there over the
    # fabric. That is the exact 7/8 (229376 near hits) of a few full runs on an H200:
    # tools/investigations/l2-partitions (K.sm_read) on the H200 at 1198133: the SMs split in two sides; a
    # 512 KiB chunk warmed from SM 0 and re-read from the other side hits 50.0 % near and
    # the rest over the fabric (8192 + 8216 of 16384); with 2 of the 16 chunks re-read from
    # the other side near hits are 245760 (15/16), with 4 exactly 229376 (7/8), fabric
    # 33088, DRAM 32 sectors; the test's own sequence gave 98.4 % near (14 of 14 above 90 %);
    # an evicted region gives near + fabric 0.001 of the sectors and DRAM all of them, so
    # this check still fails when the data are not in the L2.
    assert warm["l2_read_hit_sectors"] + warm[FABRIC_READ_HITS] > 0.9 * n_sectors, dict(warm)
    assert warm["dram_bytes_read"] < 0.1 * (8 << 20), dict(warm)


def test_sm_read_reads_its_chunk_once_from_the_sm_asked_for(device):
    """K.sm_read: one block reads the chunk (the L1 sees each of its sectors once: a second
    reader on the SM would double them), on the first and the last SM id, two launches in a
    row (the claim resets itself); an id that no SM has reads nothing. The last id assumes
    that %smid runs 0..SMs-1 (tools/investigations/l2-partitions prints any id in that range no SM has)."""
    chunk_sectors = (512 << 10) // 32  # l2_read's chunk of 8 MiB: 1024 threads x 64 x 8 bytes
    last = device.properties.multiprocessor_count - 1
    with l2persist.zeros(8 << 20, np.uint8) as src, l2persist.Stream(device) as s:
        for sm in (0, last):
            c = l2persist.measure(lambda: (K.sm_read(src, sm, 3, stream=s),
                                           K.sm_read(src, sm, 15, stream=s)),
                                  ["global_load_sectors", "l2_read_sectors"])
            assert c["global_load_sectors"] == 2 * chunk_sectors, (sm, dict(c))
            assert c["l2_read_sectors"] == pytest.approx(2 * chunk_sectors, rel=0.01), (sm, dict(c))
        none = l2persist.measure(lambda: K.sm_read(src, 1023, 3, stream=s), ["global_load_sectors"])
    assert none["global_load_sectors"] == 0


def test_hot_cold_window_cuts_dram_reads(device):
    hot_n, cold_n = (16 << 20) // 4, (256 << 20) // 4
    names = ["gpu_time_ns", "l2_hit_rate", "l2_read_hit_rate", "dram_bytes_read",
             "dram_bytes_write"]
    with l2persist.zeros(hot_n, np.int32) as hot, l2persist.zeros(cold_n, np.int32) as cold, \
            device.persisting_l2(), l2persist.Stream() as s:
        run = lambda: K.hot_cold(hot, cold, stream=s)  # noqa: E731
        none = l2persist.measure(run, names, warmup=lambda: K.hot_cold(hot, cold, stream=s))
        with s.access_policy(l2persist.AccessPolicyWindow(hot, hit_ratio=1.0), reset=True):
            win = l2persist.measure(run, names, warmup=lambda: K.hot_cold(hot, cold, stream=s))
    print(f"\nno window: {dict(none)}\nwindow:    {dict(win)}")
    # The mechanism, in counts: the window keeps the hot set in the L2, so fewer bytes come
    # from DRAM. (Whether that makes the kernel faster is a speed outcome: the guide-example
    # and tune studies measure it in gpu-check, with rounds, not one counter pass here.)
    assert win["dram_bytes_read"] < none["dram_bytes_read"]
    assert win["gpu_time_ns"] > 0 and none["gpu_time_ns"] > 0


def test_unknown_metric_lists_close_names(bufs):
    a, _, out = bufs
    with pytest.raises(ValueError, match="closest known names: .*l2_hit_rate"):
        l2persist.measure(lambda: K.pattern(a, out), ["l2_hit_rat"])
    with pytest.raises(ValueError, match="lts__t_sectors_op_reed.sum"):
        l2persist.measure(lambda: K.pattern(a, out), ["lts__t_sectors_op_reed.sum"])
    with pytest.raises(TypeError, match="metrics"):
        l2persist.measure(lambda: None, [3])


def test_exception_inside_fn_ends_the_session(bufs):
    a, _, out = bufs
    with pytest.raises(ZeroDivisionError):
        l2persist.measure(lambda: 1 / 0, ["gpu_time_ns"])
    c = l2persist.measure(lambda: K.pattern(a, out), ["global_load_requests"])
    assert c["global_load_requests"] == 1


def test_per_kernel_ranges_and_raw_names(bufs):
    a, _, out = bufs

    def two():
        K.pattern(a, out, threads=32)
        K.pattern(a, out, threads=32, blocks=2)

    ranges = l2persist.measure(two, ["global_load_requests", "smsp__inst_executed.sum"],
                               per_kernel=True)
    assert len(ranges) == 2
    assert [r["global_load_requests"] for r in ranges] == [1, 2]
    assert all(r["smsp__inst_executed.sum"] > 0 for r in ranges)
    names = [r.name for r in ranges]
    assert len(set(names)) == 2 and all(names), names


def test_benchmark_with_counters(bufs):
    n = 16 << 20  # fits in L2: only the flush makes the read go to DRAM
    with l2persist.zeros(n, np.uint8) as src, l2persist.Stream() as s:
        t = l2persist.benchmark(lambda: K.stream_read(src, stream=s), stream=s, repeat=5,
                                counters=["dram_bytes_read", "gpu_time_ns"], flush_l2=True)
        warm = l2persist.benchmark(lambda: K.stream_read(src, stream=s), stream=s, repeat=5,
                                   counters=["dram_bytes_read"])
    assert t.counters["dram_bytes_read"] == pytest.approx(n, rel=0.05)
    assert t.counters["gpu_time_ns"] > 0
    print(f"\nwarm re-read of {n} B: dram_bytes_read {warm.counters['dram_bytes_read']:.0f}")


def test_counter_names_from_the_chip():
    names = l2persist.counter_names(raw=True)
    assert "lts__t_sectors" in names and "dram__bytes" in names
    assert l2persist.counter_names()["dram_bytes_read"] == "dram__bytes_read.sum"
