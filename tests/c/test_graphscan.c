/* C tests of discovery's pure parts (no GPU): which words of a parameter's bytes are scanned,
 * and how the uses found group into buffers, matched to offered tensors. */
#include <stdlib.h>
#include <string.h>

#include "l2p_graphscan.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

#define A 0x7f0000000000ull /* a plausible device address */

static void test_words(void)
{
    /* a by-value struct {int n; int pad; float *p; size_t len; double *q;} at offset 8 */
    unsigned char bytes[32];
    uint64_t v[4] = {5, A + 0x100, 4096, A + 0x2000};
    memcpy(bytes, v, sizeof bytes);
    unsigned offs[8];
    uint64_t words[8];
    size_t n = l2p_scan_param_words(bytes, 8, 32, offs, words, 8);
    CHECK(n == 2); /* small integers are not pointers */
    CHECK(offs[0] == 8 && words[0] == A + 0x100);
    CHECK(offs[1] == 24 && words[1] == A + 0x2000);

    /* a parameter at offset 4 (after an int): the aligned words start 4 bytes in */
    unsigned char b2[20] = {0};
    uint64_t p = A + 8;
    memcpy(b2 + 4, &p, 8);
    n = l2p_scan_param_words(b2, 4, 20, offs, words, 8);
    CHECK(n == 1 && offs[0] == 4 && words[0] == A + 8);

    /* a 4-byte parameter holds no word; the count is exact even past the cap */
    CHECK(l2p_scan_param_words(b2, 0, 4, offs, words, 8) == 0);
    uint64_t many[10];
    for (int i = 0; i < 10; i++) many[i] = A + 64 * (uint64_t)i;
    CHECK(l2p_scan_param_words((const unsigned char *)many, 0, sizeof many, offs, words, 3) == 10);

    /* the `extra` form's buffer: a parameter that ends exactly at its end (a kernel whose
     * last argument is its output buffer) is inside; one byte more, or an offset that would
     * wrap, is not */
    CHECK(l2p_param_in_args(24, 8, 32) && l2p_param_in_args(0, 32, 32));
    CHECK(!l2p_param_in_args(25, 8, 32) && !l2p_param_in_args(0, 33, 32));
    CHECK(!l2p_param_in_args(SIZE_MAX - 4, 8, 32) && l2p_param_in_args(32, 0, 32));

    CHECK(!l2p_word_may_be_pointer(0));
    CHECK(!l2p_word_may_be_pointer(65535));
    CHECK(l2p_word_may_be_pointer(A));
    CHECK(!l2p_word_may_be_pointer(0xffffffffffffffffull)); /* -1 as size_t */
}

static l2p_buffer_use use(size_t kernel, uint64_t word, uint64_t start, uint64_t size)
{
    l2p_buffer_use u = {kernel, 0, 0, word, start, size};
    return u;
}

static void test_grouping(void)
{
    /* one 64 MiB caching-allocator segment holding three tensors, and a separate allocation */
    const uint64_t seg = A, seg_size = 64ull << 20, other = A + (1ull << 30);
    l2p_buffer_use u[6] = {
        use(0, seg, seg, seg_size),                   /* tensor t0 at the segment start */
        use(0, seg + (16ull << 20), seg, seg_size),   /* tensor t1 */
        use(1, seg + (16ull << 20) + 64, seg, seg_size), /* into t1 (a view's pointer) */
        use(1, seg + (48ull << 20), seg, seg_size),   /* in the segment, offered by nobody */
        use(2, other, other, 4096),
        use(2, other + 100, other, 4096),             /* the same unoffered allocation */
    };
    l2p_offer offers[3] = {{seg, 16ull << 20}, {seg + (16ull << 20), 8ull << 20},
                           {A + (2ull << 30), 256}}; /* the last is not used by the graph */
    l2p_buffer_record *r;
    size_t n, rec[6];
    CHECK(l2p_buffers_build(u, 6, offers, 3, &r, &n, rec) == L2P_OK);
    CHECK(n == 4); /* t0, t1, the segment (for the unoffered word), the other allocation */
    /* sorted by address; the segment record starts where t0 does, after it */
    CHECK(r[0].address == seg && r[0].offer == 0 && r[0].size == 16ull << 20);
    CHECK(r[1].address == seg && r[1].offer == -1 && r[1].size == seg_size);
    CHECK(r[2].address == seg + (16ull << 20) && r[2].offer == 1);
    CHECK(r[3].address == other && r[3].offer == -1 && r[3].size == 4096);
    CHECK(rec[0] == 0 && rec[1] == 2 && rec[2] == 2 && rec[3] == 1 && rec[4] == 3 && rec[5] == 3);
    free(r);

    /* no offers: one record per allocation */
    CHECK(l2p_buffers_build(u, 6, NULL, 0, &r, &n, rec) == L2P_OK);
    CHECK(n == 2 && r[0].address == seg && r[1].address == other);
    CHECK(rec[0] == 0 && rec[3] == 0 && rec[5] == 1);
    free(r);

    /* a tensor and a view of it: the word belongs to the one starting there, else the smaller */
    l2p_offer nested[2] = {{seg, 1 << 20}, {seg + 4096, 4096}};
    l2p_buffer_use v[2] = {use(0, seg + 4096, seg, seg_size), use(0, seg + 4200, seg, seg_size)};
    CHECK(l2p_buffers_build(v, 2, nested, 2, &r, &n, rec) == L2P_OK);
    CHECK(n == 1 && r[0].offer == 1 && rec[0] == 0 && rec[1] == 0);
    free(r);
    l2p_offer nested2[2] = {{seg, 1 << 20}, {seg + 4000, 4096}};
    CHECK(l2p_buffers_build(v, 1, nested2, 2, &r, &n, rec) == L2P_OK);
    CHECK(n == 1 && r[0].offer == 1); /* both contain it, neither starts there: the smaller */
    free(r);

    /* nothing used */
    CHECK(l2p_buffers_build(NULL, 0, offers, 3, &r, &n, NULL) == L2P_OK && n == 0);
    free(r);
}

int main(void)
{
    test_words();
    test_grouping();
    printf("test_graphscan: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
