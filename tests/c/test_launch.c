/* C tests of the kernels' launch checks (l2p_launch.h): a good and a bad input for each rule,
 * and that a failure names the argument. No GPU needed (the pattern index copy is not run). */
#include <string.h>

#include "l2p_error.h"
#include "l2p_grid.h"
#include "l2p_launch.h"
#include "l2p_seedmap.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

static l2p_buf_desc buf(uintptr_t ptr, size_t nbytes, size_t itemsize, char kind)
{
    l2p_buf_desc b = {1, ptr, nbytes, itemsize, kind};
    return b;
}

/* The last error is `status` and its message starts with `prefix` (the argument's name). */
static int failed_with(l2p_status rc, l2p_status status, const char *prefix)
{
    const l2p_error *e = l2p_last_error();
    return rc == status && e->status == status &&
           strncmp(e->message, prefix, strlen(prefix)) == 0;
}

static const l2p_buf_desc none;

static void test_gather(void)
{
    l2p_buf_desc f = buf(0x1000, 400, 4, 'f'), i = buf(0x2000, 400, 4, 'i');
    l2p_buf_desc map32 = buf(0x3000, 400, 4, 'i'), map64 = buf(0x3000, 800, 8, 'i');
    l2p_buf_desc short_map = buf(0x3000, 396, 4, 'i');
    CHECK(l2p_launch_check_gather(&f, &f, &map32) == L2P_OK);
    CHECK(l2p_launch_check_gather(&i, &i, &map64) == L2P_OK);
    CHECK(failed_with(l2p_launch_check_gather(&f, &i, &map32), L2P_ERR_TYPE, "out: dtype float32"));
    CHECK(strstr(l2p_last_error()->message, "src's int32") != NULL);
    CHECK(failed_with(l2p_launch_check_gather(&f, &f, &short_map), L2P_ERR_VALUE,
                      "out: 100 elements, but map has 99"));
    CHECK(l2p_launch_check_gather_texture(&f, 100) == L2P_OK);
    CHECK(failed_with(l2p_launch_check_gather_texture(&f, 99), L2P_ERR_VALUE, "src: 100 elements"));
}

static void test_random_map(void)
{
    l2p_buf_desc m32 = buf(0x1000, 40, 4, 'i'), m64 = buf(0x1000, 80, 8, 'i');
    long long range = 0;
    CHECK(l2p_launch_random_map_range(&m32, 0, &range) == L2P_OK && range == 10);
    range = 2147483647LL;
    CHECK(l2p_launch_random_map_range(&m32, 1, &range) == L2P_OK && range == 2147483647LL);
    range = 2147483648LL;
    CHECK(failed_with(l2p_launch_random_map_range(&m32, 1, &range), L2P_ERR_VALUE, "range:"));
    CHECK(strstr(l2p_last_error()->message, "2^31 - 1") != NULL);
    CHECK(l2p_launch_random_map_range(&m64, 1, &range) == L2P_OK);
    range = 0;
    CHECK(failed_with(l2p_launch_random_map_range(&m64, 1, &range), L2P_ERR_VALUE, "range: 0"));
    l2p_buf_desc empty = buf(0x1000, 0, 4, 'i');
    CHECK(failed_with(l2p_launch_random_map_range(&empty, 0, &range), L2P_ERR_VALUE, "range: 0"));
}

static l2p_pattern_check good_pattern(void)
{
    l2p_pattern_check p = {.src = buf(0x1000, 128, 4, 'f'), .dst = buf(0x2000, 128, 4, 'f'),
                           .blocks = 1, .threads = 32, .width = 4, .load_stride = 1,
                           .store_stride = 1};
    return p;
}

static void test_pattern(void)
{
    l2p_pattern_check p = good_pattern();
    CHECK(l2p_launch_check_pattern(&p) == L2P_OK);
    p.load_offset = 1; /* element 32 of 32 */
    CHECK(failed_with(l2p_launch_check_pattern(&p), L2P_ERR_VALUE, "load: elements 1..32"));
    p = good_pattern();
    p.store_stride = -1;
    CHECK(failed_with(l2p_launch_check_pattern(&p), L2P_ERR_VALUE, "store: elements -31..0"));
    p.store_offset = 31;
    CHECK(l2p_launch_check_pattern(&p) == L2P_OK);
    p = good_pattern();
    p.load_stride = 1LL << 62;
    CHECK(failed_with(l2p_launch_check_pattern(&p), L2P_ERR_VALUE, "load: offset"));
    p = good_pattern();
    p.src.ptr = 0x1002;
    CHECK(failed_with(l2p_launch_check_pattern(&p), L2P_ERR_VALUE, "src: address"));
    p = good_pattern();
    p.width = 3;
    CHECK(failed_with(l2p_launch_check_pattern(&p), L2P_ERR_VALUE, "width: 3"));
    p = good_pattern();
    p.threads = 1025;
    CHECK(failed_with(l2p_launch_check_pattern(&p), L2P_ERR_VALUE, "threads: 1025"));
    p = good_pattern();
    p.src2 = buf(0x3000, 16, 4, 'f');
    p.broadcast_index = 3;
    CHECK(l2p_launch_check_pattern(&p) == L2P_OK);
    p.broadcast_index = 4;
    CHECK(failed_with(l2p_launch_check_pattern(&p), L2P_ERR_VALUE, "broadcast_index:"));
    /* With an index, the load range is the index's business, not offset/stride's. */
    p = good_pattern();
    p.load_offset = 1000;
    p.index = buf(0x4000, 128, 4, 'i');
    CHECK(l2p_launch_check_pattern(&p) == L2P_OK);
    p.index = buf(0x4000, 124, 4, 'i');
    CHECK(failed_with(l2p_launch_check_pattern_index(0, NULL, &p), L2P_ERR_VALUE,
                      "index: 31 entries for 32 threads"));
    p.index = buf(0x4000, 256, 8, 'i');
    CHECK(failed_with(l2p_launch_check_pattern_index(0, NULL, &p), L2P_ERR_TYPE, "index:"));
    p.index = none;
    CHECK(l2p_launch_check_pattern_index(0, NULL, &p) == L2P_OK);
}

static void test_streaming(void)
{
    l2p_buf_desc a = buf(0x1000, 1024, 4, 'f'), b = buf(0x2000, 1024, 4, 'f');
    l2p_buf_desc c = buf(0x3000, 1024, 4, 'f'), small = buf(0x4000, 512, 4, 'f');
    l2p_buf_desc ints = buf(0x5000, 1024, 4, 'i');
    CHECK(l2p_launch_check_streaming(L2P_OP_READ, &none, &a, &none) == L2P_OK);
    CHECK(l2p_launch_check_streaming(L2P_OP_WRITE, &a, &none, &none) == L2P_OK);
    CHECK(l2p_launch_check_streaming(L2P_OP_COPY, &a, &b, &none) == L2P_OK);
    CHECK(l2p_launch_check_streaming(L2P_OP_TRIAD, &a, &b, &c) == L2P_OK);
    CHECK(l2p_launch_check_streaming(L2P_OP_COPY, &ints, &ints, &none) == L2P_OK);
    CHECK(failed_with(l2p_launch_check_streaming(L2P_OP_READ, &a, &none, &none), L2P_ERR_TYPE,
                      "src: op 'read' needs this buffer"));
    CHECK(failed_with(l2p_launch_check_streaming(L2P_OP_WRITE, &none, &a, &none), L2P_ERR_TYPE,
                      "dst: op 'write' needs"));
    CHECK(failed_with(l2p_launch_check_streaming(L2P_OP_TRIAD, &a, &b, &none), L2P_ERR_TYPE,
                      "src2: op 'triad' needs"));
    CHECK(failed_with(l2p_launch_check_streaming(L2P_OP_COPY, &small, &a, &none), L2P_ERR_VALUE,
                      "dst: 512 bytes, but src has 1024"));
    CHECK(failed_with(l2p_launch_check_streaming(L2P_OP_TRIAD, &a, &b, &ints), L2P_ERR_TYPE,
                      "src2: triad works on float32, got int32"));
    CHECK(failed_with(l2p_launch_check_streaming(7, &a, &b, &c), L2P_ERR_VALUE, "op: 7"));
}

static void test_l2_read(void)
{
    l2p_buf_desc src = buf(0x1000, 8 << 20, 4, 'f');
    CHECK(l2p_launch_check_l2_read(&src, 10, 8, 64, 1024) == L2P_OK);
    CHECK(l2p_launch_check_l2_read(&src, 10, 16, 8, 256) == L2P_OK);
    l2p_buf_desc odd = buf(0x1004, 8 << 20, 4, 'f');
    CHECK(failed_with(l2p_launch_check_l2_read(&odd, 10, 8, 64, 1024), L2P_ERR_VALUE, "src:"));
    l2p_buf_desc ragged = buf(0x1000, (8 << 20) + 4, 4, 'f');
    CHECK(failed_with(l2p_launch_check_l2_read(&ragged, 10, 8, 64, 1024), L2P_ERR_VALUE, "src:"));
    /* 8 MiB in 8-byte words, 1024 threads, 64 loads: 16 blocks a pass. */
    CHECK(l2p_l2_read_chunks((8 << 20) / 8, 1024, 64) == 16);
    CHECK(l2p_launch_check_l2_read(&src, 2147483647LL / 16, 8, 64, 1024) == L2P_OK);
    CHECK(failed_with(l2p_launch_check_l2_read(&src, 2147483647LL / 16 + 1, 8, 64, 1024),
                      L2P_ERR_VALUE, "repeats:"));
    CHECK(failed_with(l2p_launch_check_l2_read(&src, -1, 8, 64, 1024), L2P_ERR_VALUE, "repeats: -1"));
    /* 0: the launcher's defaults; with loads 0 the grid bound counts 8 loads (128 blocks) */
    CHECK(l2p_launch_check_l2_read(&src, 0, 8, 0, 1024) == L2P_OK);
    CHECK(l2p_launch_check_l2_read(&src, 2147483647LL / 128, 8, 0, 1024) == L2P_OK);
    CHECK(failed_with(l2p_launch_check_l2_read(&src, 2147483647LL / 128 + 1, 8, 0, 1024),
                      L2P_ERR_VALUE, "repeats: 16777216 passes of 128 blocks"));
    CHECK(failed_with(l2p_launch_check_l2_read(&src, 1, 4, 64, 1024), L2P_ERR_VALUE, "width: 4"));
    CHECK(failed_with(l2p_launch_check_l2_read(&src, 1, 8, 48, 1024), L2P_ERR_VALUE, "loads: 48"));
    CHECK(failed_with(l2p_launch_check_l2_read(&src, 1, 8, 64, 0), L2P_ERR_VALUE, "threads: 0"));
}

static void test_sm_read(void)
{
    /* 8 MiB in 8-byte words, 1024 threads, 64 loads: chunks 0..15, as l2_read's blocks. */
    l2p_buf_desc src = buf(0x1000, 8 << 20, 4, 'f');
    CHECK(l2p_launch_check_sm_read(&src, 131, 15, 8, 64, 1024) == L2P_OK);
    CHECK(failed_with(l2p_launch_check_sm_read(&src, 0, 16, 8, 64, 1024), L2P_ERR_VALUE,
                      "chunk: 16 is outside [0, 15]"));
    /* 16-byte words: the same bytes make 8 chunks */
    CHECK(l2p_launch_check_sm_read(&src, 0, 7, 16, 64, 1024) == L2P_OK);
    CHECK(failed_with(l2p_launch_check_sm_read(&src, 0, 8, 16, 64, 1024), L2P_ERR_VALUE,
                      "chunk: 8 is outside [0, 7]"));
    /* l2_read's own checks apply */
    l2p_buf_desc odd = buf(0x1004, 8 << 20, 4, 'f');
    CHECK(failed_with(l2p_launch_check_sm_read(&odd, 0, 0, 8, 64, 1024), L2P_ERR_VALUE, "src:"));
    CHECK(failed_with(l2p_launch_check_sm_read(&src, 0, 0, 4, 64, 1024), L2P_ERR_VALUE, "width: 4"));
    CHECK(failed_with(l2p_launch_check_sm_read(&src, 0, 0, 8, 48, 1024), L2P_ERR_VALUE, "loads: 48"));
    CHECK(failed_with(l2p_launch_check_sm_read(&src, 0, 0, 8, 64, 0), L2P_ERR_VALUE, "threads: 0"));
    l2p_buf_desc empty = buf(0x1000, 0, 4, 'f');
    CHECK(failed_with(l2p_launch_check_sm_read(&empty, 0, 0, 8, 64, 1024), L2P_ERR_VALUE,
                      "src: empty"));
}

static void test_bulk_read(void)
{
    l2p_buf_desc src = buf(0x1000, 1 << 20, 4, 'f');
    CHECK(l2p_launch_check_bulk_read(&src, 16384, 9, 0) == L2P_OK);
    CHECK(l2p_launch_check_bulk_read(&src, 16, 10, 0) == L2P_OK);
    l2p_buf_desc odd = buf(0x1008, 1 << 20, 4, 'f');
    CHECK(failed_with(l2p_launch_check_bulk_read(&odd, 16384, 9, 0), L2P_ERR_VALUE,
                      "src: address 0x1008 is not 16-byte aligned"));
    CHECK(failed_with(l2p_launch_check_bulk_read(&src, 24, 9, 0), L2P_ERR_VALUE, "chunk: 24"));
    CHECK(failed_with(l2p_launch_check_bulk_read(&src, 49168, 9, 0), L2P_ERR_VALUE, "chunk:"));
    l2p_buf_desc tiny = buf(0x1000, 1024, 4, 'f');
    CHECK(failed_with(l2p_launch_check_bulk_read(&tiny, 2048, 9, 0), L2P_ERR_VALUE,
                      "src: 1024 bytes, less than one chunk"));
    CHECK(failed_with(l2p_launch_check_bulk_read(&src, 16384, 8, 0), L2P_ERR_NOT_SUPPORTED,
                      "bulk_read:"));
    unsigned blocks, threads;
    l2p_bulk_read_grid(132, &blocks, &threads);
    CHECK(blocks == 264 && threads == 32);
    l2p_bulk_read_grid(0, &blocks, &threads);
    CHECK(blocks == 2);
}

static void test_hot_cold(void)
{
    l2p_buf_desc hot = buf(0x1000, 400, 4, 'i'), cold = buf(0x2000, 4000, 4, 'i');
    l2p_buf_desc empty = buf(0x3000, 0, 4, 'i');
    long long accesses = 0;
    CHECK(l2p_launch_hot_cold_accesses(&hot, &cold, 0, &accesses) == L2P_OK && accesses == 1000);
    accesses = 7;
    CHECK(l2p_launch_hot_cold_accesses(&hot, &cold, 1, &accesses) == L2P_OK && accesses == 7);
    CHECK(failed_with(l2p_launch_hot_cold_accesses(&empty, &cold, 0, &accesses), L2P_ERR_VALUE,
                      "hot, cold:"));
    CHECK(failed_with(l2p_launch_hot_cold_accesses(&hot, &empty, 0, &accesses), L2P_ERR_VALUE,
                      "hot, cold:"));
    l2p_buf_desc huge = buf(0x1000, (size_t)1 << 34, 4, 'i');
    CHECK(failed_with(l2p_launch_hot_cold_accesses(&huge, &cold, 0, &accesses), L2P_ERR_VALUE,
                      "hot, cold:"));
    accesses = 0;
    CHECK(failed_with(l2p_launch_hot_cold_accesses(&hot, &cold, 1, &accesses), L2P_ERR_VALUE,
                      "accesses: 0"));
    CHECK(l2p_launch_check_hot_cold_read(&hot) == L2P_OK);
    l2p_buf_desc tiny = buf(0x1000, 0, 16, 'V');
    CHECK(failed_with(l2p_launch_check_hot_cold_read(&tiny), L2P_ERR_VALUE, "hot:"));
}

static void test_seed_map_check(void)
{
    CHECK(l2p_seed_map_check(0, 1) == L2P_OK);
    CHECK(l2p_seed_map_check(10, 2147483647LL) == L2P_OK);
    CHECK(failed_with(l2p_seed_map_check(-1, 1), L2P_ERR_VALUE, "n: -1"));
    CHECK(failed_with(l2p_seed_map_check(10, 0), L2P_ERR_VALUE, "range: 0"));
    CHECK(failed_with(l2p_seed_map_check(10, 2147483648LL), L2P_ERR_VALUE, "range:"));
}

int main(void)
{
    test_gather();
    test_random_map();
    test_pattern();
    test_streaming();
    test_l2_read();
    test_sm_read();
    test_bulk_read();
    test_hot_cold();
    test_seed_map_check();
    printf("test_launch: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
