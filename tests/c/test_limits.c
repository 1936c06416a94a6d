/* The ranges the kernel rows take from the core (L2P_*_MIN / _MAX in l2p_launch.h and
 * l2p_checks.h) are the ones the core's checks enforce: each bound is accepted and one past it
 * refused with the argument's name. tests/test_api.py checks the rows' side. */
#include <string.h>

#include "l2p_checks.h"
#include "l2p_error.h"
#include "l2p_launch.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

static int refused(l2p_status rc, const char *prefix)
{
    return rc == L2P_ERR_VALUE && strncmp(l2p_last_error()->message, prefix, strlen(prefix)) == 0;
}

static void test_launch_shape(void)
{
    CHECK(l2p_check_launch_shape(1, L2P_THREADS_MAX) == L2P_OK);
    CHECK(refused(l2p_check_launch_shape(1, L2P_THREADS_MAX + 1), "threads:"));
    CHECK(l2p_check_launch_shape(L2P_BLOCKS_MAX, 1) == L2P_OK);
    CHECK(refused(l2p_check_launch_shape(L2P_BLOCKS_MAX + 1, 1), "blocks:"));
}

static void test_l2_read(void)
{
    /* 64 KiB of 16-byte words: one chunk per pass, so repeats may reach its maximum. */
    l2p_buf_desc src = {1, 0x10000, 1024, 1, 'u'};
    CHECK(l2p_launch_check_l2_read(&src, 1, L2P_L2_READ_WIDTH_MIN, L2P_L2_READ_LOADS_MAX, 64) ==
          L2P_OK);
    CHECK(l2p_launch_check_l2_read(&src, 1, L2P_L2_READ_WIDTH_MAX, L2P_L2_READ_LOADS_MIN, 64) ==
          L2P_OK);
    CHECK(refused(l2p_launch_check_l2_read(&src, 1, L2P_L2_READ_WIDTH_MIN / 2, 8, 64), "width:"));
    CHECK(refused(l2p_launch_check_l2_read(&src, 1, L2P_L2_READ_WIDTH_MAX * 2, 8, 64), "width:"));
    CHECK(refused(l2p_launch_check_l2_read(&src, 1, 8, L2P_L2_READ_LOADS_MIN / 2, 64), "loads:"));
    CHECK(refused(l2p_launch_check_l2_read(&src, 1, 8, L2P_L2_READ_LOADS_MAX * 2, 64), "loads:"));
    CHECK(l2p_launch_check_l2_read(&src, L2P_REPEATS_MAX, 16, 64, 1024) == L2P_OK);
    CHECK(refused(l2p_launch_check_l2_read(&src, L2P_REPEATS_MAX + 1, 16, 64, 1024), "repeats:"));
}

static void test_sm_read(void)
{
    /* 8 MiB of 8-byte words in l2_read's default shape: 16 chunks. */
    l2p_buf_desc src = {1, 0x10000, 8 << 20, 1, 'u'};
    CHECK(l2p_launch_check_sm_read(&src, 0, 0, 8, 64, 1024) == L2P_OK);
    CHECK(l2p_launch_check_sm_read(&src, L2P_SM_ID_MAX, 15, 8, 64, 1024) == L2P_OK);
    CHECK(refused(l2p_launch_check_sm_read(&src, -1, 0, 8, 64, 1024), "sm:"));
    CHECK(refused(l2p_launch_check_sm_read(&src, L2P_SM_ID_MAX + 1, 0, 8, 64, 1024), "sm:"));
    CHECK(refused(l2p_launch_check_sm_read(&src, 0, -1, 8, 64, 1024), "chunk:"));
    /* a buffer with L2P_CHUNK_MAX + 1 chunks of one 8-byte word (1 thread, 8 loads) */
    l2p_buf_desc big = {1, 0x10000, (size_t)(L2P_CHUNK_MAX + 1) * 64, 1, 'u'};
    CHECK(l2p_launch_check_sm_read(&big, 0, L2P_CHUNK_MAX, 8, 8, 1) == L2P_OK);
}

static void test_bulk_read(void)
{
    l2p_buf_desc src = {1, 0x10000, 1 << 20, 1, 'u'};
    CHECK(l2p_launch_check_bulk_read(&src, L2P_BULK_CHUNK_MIN, 9, 0) == L2P_OK);
    CHECK(l2p_launch_check_bulk_read(&src, L2P_BULK_CHUNK_MAX, 9, 0) == L2P_OK);
    CHECK(refused(l2p_launch_check_bulk_read(&src, L2P_BULK_CHUNK_MIN - 16, 9, 0), "chunk:"));
    CHECK(refused(l2p_launch_check_bulk_read(&src, L2P_BULK_CHUNK_MAX + 16, 9, 0), "chunk:"));
}

static void test_pattern_width(void)
{
    l2p_pattern_check p = {.src = {1, 0x10000, 4096, 1, 'u'}, .dst = {1, 0x20000, 4096, 1, 'u'},
                           .blocks = 1, .threads = 1, .load_stride = 1, .store_stride = 1};
    p.width = L2P_PATTERN_WIDTH_MAX;
    CHECK(l2p_launch_check_pattern(&p) == L2P_OK);
    p.width = L2P_PATTERN_WIDTH_MAX * 2;
    CHECK(refused(l2p_launch_check_pattern(&p), "width:"));
}

static void test_hot_cold_accesses(void)
{
    l2p_buf_desc hot = {1, 0x10000, 64, 4, 'i'}, cold = {1, 0x20000, 4096, 4, 'i'};
    long long accesses = L2P_ACCESSES_MAX;
    CHECK(l2p_launch_hot_cold_accesses(&hot, &cold, 1, &accesses) == L2P_OK);
    accesses = L2P_ACCESSES_MAX + 1;
    CHECK(refused(l2p_launch_hot_cold_accesses(&hot, &cold, 1, &accesses), "accesses:"));
}

int main(void)
{
    test_launch_shape();
    test_l2_read();
    test_sm_read();
    test_bulk_read();
    test_pattern_width();
    test_hot_cold_accesses();
    printf("test_limits: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed ? 1 : 0;
}
