/* C tests of the core, without Python: policy arithmetic, statistics, errors, and device
 * counting (0 with a reason on a machine without a GPU). */
#include <stdint.h>
#include <string.h>

#include <stdlib.h>

#include "l2p_checks.h"
#include "l2p_grid.h"
#include "l2p_seedmap.h"
#include "l2p_counters.h"
#include "l2p_device.h"
#include "l2p_flavour.h"
#include "l2p_model.h"
#include "l2p_error.h"
#include "l2p_policy.h"
#include "l2p_timing.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

static void test_default_set_aside(void)
{
    /* H200: 60 MiB L2, 37.5 MiB max -> the max; H100: 50 MiB L2, 37.5 MiB max -> 37.5 MiB. */
    CHECK(l2p_policy_default_set_aside(62914560, 39321600) == 39321600);
    CHECK(l2p_policy_default_set_aside(52428800, 39321600) == 39321600);
    /* A100: 40 MiB L2, 30 MiB max -> 0.75 * 40 MiB = 30 MiB. */
    CHECK(l2p_policy_default_set_aside(41943040, 31457280) == 31457280);
    CHECK(l2p_policy_default_set_aside(1000, 10000) == 750);
    CHECK(l2p_policy_default_set_aside(0, 10000) == 0);
}

static void test_limit_checks(void)
{
    size_t out;
    CHECK(l2p_policy_check_limit(0, 100) == L2P_OK);
    CHECK(l2p_policy_check_limit(100, 100) == L2P_OK);
    CHECK(l2p_policy_check_limit(101, 100) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "persisting_l2_cache_max_size") != NULL);
    CHECK(strstr(l2p_last_error()->message, "[0, 100]") != NULL);
    CHECK(l2p_policy_check_limit(-1, 100) == L2P_ERR_VALUE);
    CHECK(l2p_policy_set_aside_fraction(0.5, 1000, &out) == L2P_OK && out == 500);
    CHECK(l2p_policy_set_aside_fraction(1.5, 1000, &out) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "fraction") != NULL);
    CHECK(l2p_policy_set_aside_fraction(NAN, 1000, &out) == L2P_ERR_VALUE);
}

static void test_make_window(void)
{
    l2p_window w;
    const size_t max = 1 << 20;
    CHECK(l2p_policy_make_window(0x1000, 4096, 0, -1, 0.6, L2P_ACCESS_PERSISTING,
                                 L2P_ACCESS_STREAMING, max, 0, &w) == L2P_OK);
    CHECK(w.base_ptr == 0x1000 && w.num_bytes == 4096);
    CHECK_NEAR(w.hit_ratio, 0.6, 1e-6);
    CHECK(l2p_policy_make_window(0x1000, 4096, 1024, 1024, 1.0, L2P_ACCESS_PERSISTING,
                                 L2P_ACCESS_STREAMING, max, 0, &w) == L2P_OK);
    CHECK(w.base_ptr == 0x1400 && w.num_bytes == 1024);
    /* Each violation names its argument. */
    CHECK(l2p_policy_make_window(0x1000, 4096, 0, -1, 1.5, 2, 1, max, 0, &w) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "hit_ratio") != NULL);
    CHECK(l2p_policy_make_window(0x1000, 4096, 0, -1, -0.1, 2, 1, max, 0, &w) == L2P_ERR_VALUE);
    CHECK(l2p_policy_make_window(0x1000, 4096, 0, -1, 0.5, 2, 2, max, 0, &w) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "miss_prop") != NULL);
    CHECK(l2p_policy_make_window(0x1000, 4096, 0, -1, 0.5, 7, 1, max, 0, &w) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "hit_prop") != NULL);
    CHECK(l2p_policy_make_window(0x1000, 4096, 0, 8192, 0.5, 2, 1, max, 0, &w) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "num_bytes") != NULL);
    CHECK(l2p_policy_make_window(0x1000, 4096, 5000, -1, 0.5, 2, 1, max, 0, &w) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "offset") != NULL);
    /* Clamping only when asked: to the target, then to the max window. */
    CHECK(l2p_policy_make_window(0x1000, 4096, 0, 8192, 0.5, 2, 1, max, 1, &w) == L2P_OK &&
          w.num_bytes == 4096);
    CHECK(l2p_policy_make_window(0, 4 << 20, 0, -1, 0.5, 2, 1, max, 0, &w) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "access_policy_max_window_size") != NULL);
    CHECK(l2p_policy_make_window(0, 4 << 20, 0, -1, 0.5, 2, 1, max, 1, &w) == L2P_OK &&
          w.num_bytes == max);
}

static double used_bytes(size_t n, const size_t *nb, const double *r)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += r[i] * (double)nb[i];
    return s;
}

static void test_plan_windows(void)
{
    size_t bytes[3], nb[3];
    double w[3], r[3];
    /* The guide: two 16 KB windows sharing a 16 KB set-aside get 0.5 each. */
    bytes[0] = bytes[1] = 16384;
    w[0] = w[1] = 1.0;
    CHECK(l2p_policy_plan_windows(2, bytes, w, 16384, SIZE_MAX, nb, r) == L2P_OK);
    CHECK_NEAR(r[0], 0.5, 1e-12);
    CHECK_NEAR(r[1], 0.5, 1e-12);
    /* A small window saturates at 1 and leaves its unused share to the big one. */
    bytes[0] = 1000; bytes[1] = 100000;
    CHECK(l2p_policy_plan_windows(2, bytes, w, 20000, SIZE_MAX, nb, r) == L2P_OK);
    CHECK_NEAR(r[0], 1.0, 1e-12);
    CHECK_NEAR(r[1], 19000.0 / 100000.0, 1e-12);
    CHECK(used_bytes(2, nb, r) <= 20000.0 + 1e-6);
    /* Weights 3:1 over equal windows. */
    bytes[0] = bytes[1] = 100000;
    w[0] = 3; w[1] = 1;
    CHECK(l2p_policy_plan_windows(2, bytes, w, 40000, SIZE_MAX, nb, r) == L2P_OK);
    CHECK_NEAR(r[0], 0.3, 1e-12);
    CHECK_NEAR(r[1], 0.1, 1e-12);
    /* Everything fits: all hit ratios 1. */
    w[0] = w[1] = w[2] = 1;
    bytes[0] = 10; bytes[1] = 20; bytes[2] = 30;
    CHECK(l2p_policy_plan_windows(3, bytes, w, 1000, SIZE_MAX, nb, r) == L2P_OK);
    CHECK(r[0] == 1.0 && r[1] == 1.0 && r[2] == 1.0);
    /* The max window size cuts num_bytes before sharing. */
    bytes[0] = 1 << 20;
    CHECK(l2p_policy_plan_windows(1, bytes, w, 1 << 10, 1 << 12, nb, r) == L2P_OK);
    CHECK(nb[0] == (1 << 12));
    CHECK_NEAR(r[0], 0.25, 1e-12);
    /* A zero weight gets no share; negative or all-zero weights are errors. */
    bytes[0] = bytes[1] = 1000;
    w[0] = 0; w[1] = 1;
    CHECK(l2p_policy_plan_windows(2, bytes, w, 500, SIZE_MAX, nb, r) == L2P_OK);
    CHECK(r[0] == 0.0);
    CHECK_NEAR(r[1], 0.5, 1e-12);
    w[0] = -1;
    CHECK(l2p_policy_plan_windows(2, bytes, w, 500, SIZE_MAX, nb, r) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "weight") != NULL);
    w[0] = 0; w[1] = 0;
    CHECK(l2p_policy_plan_windows(2, bytes, w, 500, SIZE_MAX, nb, r) == L2P_ERR_VALUE);
}

static void test_stats(void)
{
    const double v[] = {5, 1, 4, 2, 3};
    l2p_stats s;
    CHECK(l2p_stats_compute(v, 5, &s) == L2P_OK);
    CHECK(s.median == 3 && s.min == 1 && s.max == 5 && s.mean == 3);
    CHECK(s.q1 == 2 && s.q3 == 4 && s.iqr == 2);
    CHECK_NEAR(s.stdev, 1.5811388300841898, 1e-12);
    const double even[] = {4, 1, 3, 2};
    CHECK(l2p_stats_compute(even, 4, &s) == L2P_OK);
    CHECK_NEAR(s.median, 2.5, 1e-12);
    CHECK_NEAR(s.q1, 1.75, 1e-12); /* NumPy's linear percentile */
    CHECK(l2p_stats_compute(v, 0, &s) == L2P_ERR_VALUE);
    /* the studies' stopping rule: IQR 2 against median 3 */
    CHECK(l2p_stats_compute(v, 5, &s) == L2P_OK);
    CHECK(l2p_stats_settled(&s, 0.7) && l2p_stats_settled(&s, 2.0 / 3.0));
    CHECK(!l2p_stats_settled(&s, 0.6) && !l2p_stats_settled(&s, 0.0));
}

/* l2p_grow: room by doubling from the first size, the array kept where the size would
 * overflow, nothing done where there is room already. */
static void test_grow(void)
{
    int *a = NULL;
    size_t cap = 0;
    CHECK(l2p_grow((void **)&a, &cap, 5, sizeof *a, 4) && cap == 8 && a);
    a[7] = 7;
    CHECK(l2p_grow((void **)&a, &cap, 8, sizeof *a, 4) && cap == 8); /* room already */
    CHECK(l2p_grow((void **)&a, &cap, 17, sizeof *a, 4) && cap == 32 && a[7] == 7);
    int *kept = a;
    CHECK(!l2p_grow((void **)&a, &cap, SIZE_MAX / 2, sizeof *a, 4) && a == kept && cap == 32);
    CHECK(!l2p_grow((void **)&a, &cap, SIZE_MAX, 1, 4) && a == kept && cap == 32);
    free(a);
}

static void test_errors(void)
{
    CHECK(l2p_fail_cuda(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)") == L2P_ERR_NO_MEMORY);
    CHECK(strcmp(l2p_last_error()->call, "cudaMalloc") == 0);
    CHECK(strstr(l2p_last_error()->message, "cudaMalloc failed: cudaErrorMemoryAllocation: ") ==
          l2p_last_error()->message);
    CHECK(l2p_fail_cuda(cudaErrorNoDevice, "cudaGetDeviceCount") == L2P_ERR_NO_DEVICE);
    CHECK(l2p_fail_cuda(cudaErrorInvalidValue, "cudaDeviceSetLimit") == L2P_ERR_CUDA);
    CHECK(l2p_last_error()->cuda_code == (int)cudaErrorInvalidValue);
}

static void test_device_count(void)
{
    int n = -1;
    cudaError_t why;
    l2p_device_count(&n, &why);
    CHECK(n >= 0);
    CHECK((n == 0) == (why != cudaSuccess));
    if (n == 0) {
        /* Asking for a device then says why there is none. */
        CHECK(l2p_device_check(0) == L2P_ERR_NO_DEVICE);
        CHECK(strstr(l2p_last_error()->message, "no CUDA device") != NULL);
    } else {
        CHECK(l2p_device_check(n) == L2P_ERR_VALUE);
        CHECK(strstr(l2p_last_error()->message, "valid indices") != NULL);
        l2p_device_props p;
        CHECK(l2p_device_get_properties(0, &p) == L2P_OK && p.l2_cache_size > 0);
    }
    printf("devices: %d (%s)\n", n, n ? "present" : cudaGetErrorName(why));
}

static void test_flavours(void)
{
    int f = -1;
    CHECK(l2p_load_flavour_parse("evict_last", "load", &f) == L2P_OK && f == L2P_LD_EVICT_LAST);
    CHECK(l2p_store_flavour_parse("cs", "store", &f) == L2P_OK && f == L2P_ST_CS);
    CHECK(l2p_load_flavour_parse("ldg", "load", &f) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "load: 'ldg' is not one of default, ca, cg") != NULL);
    CHECK(strcmp(l2p_load_flavour_name(L2P_LD_NC), "nc") == 0 && !l2p_load_flavour_name(99));
    CHECK(l2p_check_width(16, "width") == L2P_OK && l2p_check_width(3, "width") == L2P_ERR_VALUE);
}

static void test_checks(void)
{
    const int32_t idx[] = {0, 5, 9, 10};
    unsigned blocks, threads;
    CHECK(l2p_check_affine_range(1, 1, 32, 33, "load") == L2P_OK);
    CHECK(l2p_check_affine_range(1, 1, 32, 32, "load") == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "load: elements 1..32 are outside") != NULL);
    CHECK(l2p_check_affine_range(31, -1, 32, 32, "load") == L2P_OK);
    CHECK(l2p_check_affine_range(30, -1, 32, 32, "load") == L2P_ERR_VALUE);
    CHECK(l2p_check_affine_range(0, 1LL << 62, 8, 1LL << 40, "load") == L2P_ERR_VALUE);
    CHECK(l2p_check_index_range(idx, 3, 10, "index") == L2P_OK);
    CHECK(l2p_check_index_range(idx, 4, 10, "index") == L2P_ERR_VALUE);
    CHECK(l2p_check_launch_shape(1, 1024) == L2P_OK && l2p_check_launch_shape(0, 32) != L2P_OK);
    CHECK(l2p_check_words16(256, 64, "src") == L2P_OK && l2p_check_words16(260, 64, "src") != L2P_OK);
    CHECK(l2p_check_alignment(8, 8, "src") == L2P_OK && l2p_check_alignment(4, 8, "src") != L2P_OK);
    l2p_streaming_grid(132, &blocks, &threads);
    CHECK(blocks == 528 && threads == 512);
    /* 16 MiB of 8-byte words in rows of 1024, 64 rows per block: 32 chunks; a partial row
     * and a partial chunk round up; nothing to read, no chunk. */
    CHECK(l2p_l2_read_chunks((16u << 20) / 8, 1024, 64) == 32);
    CHECK(l2p_l2_read_chunks(1025, 1024, 64) == 1 && l2p_l2_read_chunks(1024 * 65, 1024, 64) == 2);
    CHECK(l2p_l2_read_chunks(0, 1024, 64) == 0 && l2p_l2_read_chunks(5, 0, 64) == 0);
}

/* l2_read's default loads for `passes` over `mib` MiB on an H200's 132 SMs (2 blocks of
 * 1024 threads each), as l2p_grid.c picks them. */
static int h200_loads(unsigned mib, size_t passes)
{
    static const unsigned loads[] = {64, 32, 8}; /* kernels/streaming.cu's candidates */
    size_t blocks[3], resident[3];
    for (int i = 0; i < 3; i++) {
        blocks[i] = l2p_l2_read_chunks(((size_t)mib << 20) / 8, 1024, loads[i]) * passes;
        resident[i] = 2 * 132;
    }
    int i = l2p_l2_read_pick_loads(loads, blocks, resident, 3);
    return i < 0 ? -1 : (int)loads[i];
}

static void test_l2_read_defaults(void)
{
    /* The rule's three branches at cells of tools/investigations/l2read-vs-original on the H200 (waves:
     * blocks / 264). 1: 64 loads from 4 waves (8 MiB x 3000, 32 x 30, 6 x 100: 4.5 waves),
     * not at 3.03 (40 x 10). */
    CHECK(h200_loads(8, 3000) == 64 && h200_loads(32, 30) == 64 && h200_loads(6, 100) == 64);
    CHECK(h200_loads(40, 10) == 32 && h200_loads(40, 20) == 64);
    /* 2: under one wave even at 8 loads: the most blocks (13 MiB x 1: 208 blocks of 8) */
    CHECK(h200_loads(8, 1) == 8 && h200_loads(13, 1) == 8 && h200_loads(16, 1) == 8);
    /* 3: else the original's 32 loads, also where 16 loads make 1-1.35 waves (11 x 4: 352
     * blocks of 16; 42 x 1: 336; 13 x 3: 312) and where 8 loads just fill one (17 x 1: 272) */
    CHECK(h200_loads(11, 4) == 32 && h200_loads(42, 1) == 32 && h200_loads(13, 3) == 32);
    CHECK(h200_loads(17, 1) == 32 && h200_loads(40, 5) == 32 && h200_loads(16, 10) == 32);
    /* the bounds, inclusive: 4 waves for 64; one wave (264) for the most blocks */
    static const unsigned l[4] = {64, 32, 16, 8};
    size_t r[4] = {264, 264, 264, 264};
    size_t at4[4] = {1056, 2112, 4224, 8448}, below4[4] = {1055, 2110, 4220, 8440};
    CHECK(l2p_l2_read_pick_loads(l, at4, r, 4) == 0 && l2p_l2_read_pick_loads(l, below4, r, 4) == 1);
    size_t one[4] = {33, 66, 132, 264}, under[4] = {32, 64, 128, 263};
    CHECK(l2p_l2_read_pick_loads(l, one, r, 4) == 1 && l2p_l2_read_pick_loads(l, under, r, 4) == 3);
    size_t tiny[4] = {1, 1, 1, 1}, none[4] = {0, 0, 0, 0}, lots[4] = {5000, 9000, 9000, 9000};
    CHECK(l2p_l2_read_pick_loads(l, tiny, r, 4) == 3); /* a tie under one wave: 8 loads */
    CHECK(l2p_l2_read_pick_loads(l, lots, none, 4) == 1); /* no occupancy: no wave is filled */
    CHECK(l2p_l2_read_pick_loads(l, under, r, 0) == -1);
    static const unsigned no32[2] = {64, 16};
    size_t b2[2] = {600, 2400};
    CHECK(l2p_l2_read_pick_loads(no32, b2, r, 2) == 0); /* none is 32: the first */
    /* passes: at least 4 GiB a launch, capped at 2^22 blocks, at least 1 */
    CHECK(l2p_l2_read_auto_repeats(8u << 20, 128) == 512);
    CHECK(l2p_l2_read_auto_repeats(3u << 20, 48) == 1366); /* rounds up */
    CHECK(l2p_l2_read_auto_repeats(8u << 30, 1 << 20) == 1);
    CHECK(l2p_l2_read_auto_repeats(1024, 1) == (1 << 22)); /* 4 Mi passes, not 4 Gi / 1 Ki */
    CHECK(l2p_l2_read_auto_repeats(0, 0) == 1 && l2p_l2_read_auto_repeats(8, 1u << 23) == 1);
}

/* The study's map must be glibc's srand(0); rand() % n, on any platform. */
static void test_seed_map(void)
{
    enum { N = 50000 };
    static int32_t map[N];
    l2p_seed_map_int32(map, N, 1000u, 0);
#ifdef __GLIBC__
    srand(0);
    int same = 1;
    for (int i = 0; i < N; i++) same &= map[i] == rand() % 1000;
    CHECK(same);
#endif
    /* glibc's first rand() after srand(1) (which srand(0) means) is 1804289383. */
    l2p_seed_map_int32(map, 1, 2147483647u, 0);
    CHECK(map[0] == 1804289383);
}

static void test_counter_names(void)
{
    CHECK(strcmp(l2p_counter_resolve("l2_hit_rate"), "lts__t_sector_hit_rate.pct") == 0);
    CHECK(strcmp(l2p_counter_resolve("dram__bytes_read.sum"), "dram__bytes_read.sum") == 0);
    CHECK(l2p_counter_friendly_count() >= 12);
    l2p_status st = l2p_counters_load(); /* either loads, or says plainly why not */
    CHECK(st == L2P_OK || (st == L2P_ERR_NOT_SUPPORTED &&
                           strstr(l2p_last_error()->message, "CUPTI") != NULL));
}

static l2p_access_stats model_contiguous(int threads, int offset, int rule, int store)
{
    int64_t addr[32];
    l2p_access_stats s;
    for (int t = 0; t < 32; t++) addr[t] = (int64_t)(offset + t) * 4;
    uint32_t mask = threads == 32 ? 0xffffffffu : (1u << threads) - 1u;
    if (l2p_model_warp(addr, mask, 4, store, rule, &s) != L2P_OK) memset(&s, 0, sizeof s);
    return s;
}

static void test_model(void)
{
    /* The L1/L2 study, exactly. */
    l2p_access_stats s = model_contiguous(1, 0, L2P_RULE_KEPLER_CACHING, 0);
    CHECK_NEAR(l2p_model_efficiency(&s), 3.125, 1e-9);
    s = model_contiguous(32, 0, L2P_RULE_KEPLER_CACHING, 0);
    CHECK_NEAR(l2p_model_efficiency(&s), 100.0, 1e-9);
    const int threads[] = {1, 9, 17, 25};
    const double eff[] = {12.5, 56.25, 70.833333, 78.125};
    for (int i = 0; i < 4; i++) {
        s = model_contiguous(threads[i], 0, L2P_RULE_KEPLER_NONCACHING, 0);
        CHECK_NEAR(l2p_model_efficiency(&s), eff[i], 1e-4);
        s = model_contiguous(threads[i], 0, L2P_RULE_KEPLER_NONCACHING, 1);
        CHECK_NEAR(l2p_model_efficiency(&s), eff[i], 1e-4);
    }
    s = model_contiguous(32, 1, L2P_RULE_KEPLER_NONCACHING, 0);
    CHECK(s.transactions == 2 && s.sectors == 5 && s.replays == 1);
    CHECK_NEAR(l2p_model_efficiency(&s), 80.0, 1e-9);
    s = model_contiguous(32, 1, L2P_RULE_SECTORS, 0);
    CHECK(s.requests == 1 && s.sectors == 5 && s.lines == 2 && s.bytes_moved == 160);
    /* Errors name the thread. */
    int64_t bad[32] = {0, 5};
    CHECK(l2p_model_warp(bad, 3u, 4, 0, L2P_RULE_SECTORS, &s) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "thread 1") != NULL);
    CHECK(l2p_model_warp(bad, 1u, 3, 0, L2P_RULE_SECTORS, &s) == L2P_ERR_VALUE);
    int r = -1;
    CHECK(l2p_rule_parse("sectors", &r) == L2P_OK && r == L2P_RULE_SECTORS);
    CHECK(l2p_rule_parse("fermi", &r) == L2P_ERR_VALUE);
}

/* Address patterns with their random part given: lines filled in order from `line`, each
 * line's elements permuted; scattered picks times the size; bad sizes and picks refused. */
static void test_pattern_addresses(void)
{
    int64_t perm[40], out[40], pick[3] = {0, 4095, 7};
    for (int t = 0; t < 40; t++) perm[t] = (t * 7) % 32; /* a permutation of each line's 32 */
    CHECK(l2p_model_lines(out, 40, 4, 2, perm) == L2P_OK);
    CHECK(out[0] == 256 && out[1] == 256 + 28 && out[31] == 256 + ((31 * 7) % 32) * 4);
    CHECK(out[32] == 384 && out[39] == 384 + ((39 * 7) % 32) * 4); /* the next line */
    perm[5] = 32;
    CHECK(l2p_model_lines(out, 40, 4, 2, perm) == L2P_ERR_VALUE); /* past the line */
    CHECK(l2p_model_lines(NULL, 0, 3, 0, NULL) == L2P_ERR_VALUE);   /* not an access size */
    CHECK(l2p_model_scatter(out, 3, 8, pick, 4096) == L2P_OK);
    CHECK(out[0] == 0 && out[1] == 4095 * 8 && out[2] == 56);
    CHECK(l2p_model_scatter(out, 3, 8, pick, 4095) == L2P_ERR_VALUE); /* 4095 not below it */
    pick[0] = -1;
    CHECK(l2p_model_scatter(out, 3, 8, pick, 4096) == L2P_ERR_VALUE);
}

int main(void)
{
    test_model();
    test_pattern_addresses();
    test_flavours();
    test_checks();
    test_l2_read_defaults();
    test_seed_map();
    test_counter_names();
    test_default_set_aside();
    test_limit_checks();
    test_make_window();
    test_plan_windows();
    test_stats();
    test_grow();
    test_errors();
    test_device_count();
    printf("%d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed ? 1 : 0;
}
