/* The live targets (l2p_live_ranges): words split allocations into the ranges kernels read; a
 * flat tensor viewed per layer is one range; a range is weighed by its own readers only. */
#include <stdlib.h>
#include <string.h>

#include "l2p_live.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

#define KIB ((uint64_t)1 << 10)
#define MIB ((uint64_t)1 << 20)
#define SEG 0x7f0000000000ull  /* a 2 MiB small-pool segment */
#define FLAT 0x7f1000000000ull /* a 36 MiB flat weight */

static l2p_live_word word(size_t group, size_t node, unsigned param, uint64_t kernel,
                          uint64_t at, uint64_t start, uint64_t size, double weight)
{
    return (l2p_live_word){.group = group, .node = node, .param = param, .kernel = kernel,
                           .word = at, .range_start = start, .range_size = size,
                           .weight = weight};
}

/* The range starting at `address`, or -1. */
static long find(const l2p_live_range *r, size_t n, uint64_t address)
{
    for (size_t i = 0; i < n; i++)
        if (r[i].address == address) return (long)i;
    return -1;
}

/* A segment of four tensors, one of them small and hot: each is its own range up to the next
 * word pointed at (the last to the segment's end), weighed by its readers alone. */
static void test_segment_tensors_are_their_own_ranges(void)
{
    l2p_live_word w[] = {
        word(0, 0, 0, 1, SEG, SEG, 2 * MIB, 1.0),                      /* k_a writes t0 */
        word(0, 1, 1, 2, SEG + 64 * KIB, SEG, 2 * MIB, 50.0),          /* k_hot reads hot */
        word(0, 2, 0, 3, SEG + 64 * KIB + 4 * KIB, SEG, 2 * MIB, 2.0), /* k_b: t2 */
        word(0, 3, 1, 4, SEG + 512 * KIB, SEG, 2 * MIB, 3.0),          /* k_c: t3 */
        word(0, 1, 0, 2, SEG + 512 * KIB, SEG, 2 * MIB, 50.0),         /* k_hot writes t3 */
    };
    size_t n = sizeof w / sizeof *w, of[5], nr = 0;
    l2p_live_range *r = NULL;
    CHECK(l2p_live_ranges(w, n, &r, &nr, of) == L2P_OK);
    CHECK(nr == 4);
    long hot = find(r, nr, SEG + 64 * KIB), t3 = find(r, nr, SEG + 512 * KIB);
    CHECK(hot >= 0 && r[hot].size == 4 * KIB && r[hot].weight == 50.0 && r[hot].readers == 1);
    CHECK(t3 >= 0 && r[t3].size == 2 * MIB - 512 * KIB);
    CHECK(t3 >= 0 && r[t3].weight == 53.0 && r[t3].readers == 2);
    CHECK(r[0].address == SEG && r[0].size == 64 * KIB && r[0].weight == 1.0);
    CHECK(of[1] == (size_t)hot && of[3] == (size_t)t3 && of[4] == (size_t)t3);
    free(r);
}

/* A stray odd word (stale bytes of another kernel's by-value struct, ddp at f7a980d: 999 bytes
 * into a 36 MiB buffer) is taken for no pointer: it cuts nothing, reads nothing, and belongs to
 * no range, first in its allocation or not; a flat weight's views stay one range (rule 3)
 * with one among them. */
static void test_an_odd_word_is_no_pointer(void)
{
    l2p_live_word w[20];
    size_t n = 0, of[20], nr = 0;
    w[n++] = word(0, 0, 0, 1, FLAT, FLAT, 36 * MIB, 30.0);        /* index_add_ reads hist */
    w[n++] = word(0, 1, 0, 2, FLAT + 999, FLAT, 36 * MIB, 5.0);   /* sum's stale word */
    w[n++] = word(0, 1, 0, 2, SEG + 7, SEG, 2 * MIB, 5.0);        /* odd, first in its allocation */
    w[n++] = word(0, 2, 0, 3, SEG + 64 * KIB, SEG, 2 * MIB, 1.0);
    uint64_t views = 0x7f2000000000ull, slice = 600 * KIB;
    for (size_t layer = 0; layer < 6; layer++)
        w[n++] = word(1, layer, 1, 7, views + layer * slice, views, 8 * MIB, 1.0);
    w[n++] = word(1, 9, 0, 8, views + 2 * slice + 333, views, 8 * MIB, 2.0); /* a stray one */
    l2p_live_range *r = NULL;
    CHECK(l2p_live_ranges(w, n, &r, &nr, of) == L2P_OK);
    CHECK(nr == 3);
    long hist = find(r, nr, FLAT), seg = find(r, nr, SEG + 64 * KIB), flat = find(r, nr, views);
    CHECK(hist >= 0 && r[hist].size == 36 * MIB && r[hist].readers == 1);
    CHECK(hist >= 0 && r[hist].weight == 30.0 && of[0] == (size_t)hist);
    CHECK(of[1] == L2P_LIVE_NO_RANGE && of[2] == L2P_LIVE_NO_RANGE);
    CHECK(seg >= 0 && r[seg].size == 2 * MIB - 64 * KIB && find(r, nr, SEG + 7) < 0);
    CHECK(flat >= 0 && r[flat].size == 8 * MIB && r[flat].pieces == 6 && r[flat].readers == 6);
    CHECK(of[n - 1] == L2P_LIVE_NO_RANGE);
    free(r);
}

/* A flat weight viewed per layer: 60 words, each read by one layer's node of the same kernel
 * in the same role, is one range from the first word to the allocation's end, weighed by the
 * 60 readers; a second graph reading the same slices keeps it one. */
static void test_a_flat_weight_is_one_range(void)
{
    l2p_live_word w[121];
    size_t n = 0, of[121], nr = 0;
    uint64_t slice = 600 * KIB; /* a layer's weights (element-aligned, as real views are) */
    for (size_t layer = 0; layer < 60; layer++) {
        w[n++] = word(0, 4 * layer + 2, 1, 7, FLAT + layer * slice, FLAT, 36 * MIB, 1.0);
        w[n++] = word(1, 3 * layer + 1, 1, 7, FLAT + layer * slice, FLAT, 36 * MIB, 0.5);
    }
    w[n++] = word(0, 240, 0, 9, SEG, SEG, 2 * MIB, 4.0);    /* elsewhere: its own */
    l2p_live_range *r = NULL;
    CHECK(l2p_live_ranges(w, n, &r, &nr, of) == L2P_OK);
    CHECK(nr == 2);
    long flat = find(r, nr, FLAT);
    CHECK(flat >= 0 && r[flat].size == 36 * MIB && r[flat].pieces == 60);
    CHECK(flat >= 0 && r[flat].readers == 120 && fabs(r[flat].weight - 90.0) < 1e-9);
    for (size_t i = 0; i < 120; i++) CHECK(of[i] == (size_t)flat);
    free(r);
}

/* Layers of three views each (q, k, v by three kernels): period 3; a tail that breaks the
 * pattern (a partial layer, then the head read by another kernel) is left out of the run. */
static void test_a_period_of_views_and_a_tail(void)
{
    l2p_live_word w[64];
    size_t n = 0, of[64], nr = 0;
    uint64_t at = FLAT;
    for (size_t layer = 0; layer < 10; layer++)
        for (unsigned j = 0; j < 3; j++, at += MIB)
            w[n++] = word(0, 3 * layer + j, 1, 10 + j, at, FLAT, 64 * MIB, 1.0);
    w[n++] = word(0, 30, 1, 10, at, FLAT, 64 * MIB, 1.0);      /* a partial layer: q only */
    at += MIB;
    w[n++] = word(0, 31, 1, 20, at, FLAT, 64 * MIB, 8.0);      /* the head */
    l2p_live_range *r = NULL;
    CHECK(l2p_live_ranges(w, n, &r, &nr, of) == L2P_OK);
    CHECK(nr == 3);
    CHECK(r[0].address == FLAT && r[0].size == 30 * MIB && r[0].pieces == 30);
    CHECK(r[1].address == FLAT + 30 * MIB && r[1].size == MIB && r[1].pieces == 1);
    CHECK(r[2].address == FLAT + 31 * MIB && r[2].size == 33 * MIB && r[2].weight == 8.0);
    free(r);
}

/* Neighbours read by the same kernel in other graphs, or in another role, are not a run; a
 * single repeat of a period longer than one is not either (two whole periods are needed). */
static void test_what_is_not_a_run(void)
{
    l2p_live_word w[] = {
        word(0, 0, 1, 5, SEG, SEG, 2 * MIB, 1.0),
        word(1, 0, 1, 5, SEG + 4 * KIB, SEG, 2 * MIB, 1.0),      /* another graph */
        word(1, 1, 2, 5, SEG + 8 * KIB, SEG, 2 * MIB, 1.0),      /* another param */
        word(1, 2, 1, 6, SEG + 12 * KIB, SEG, 2 * MIB, 1.0),     /* A B then A' alone */
        word(1, 3, 1, 7, SEG + 16 * KIB, SEG, 2 * MIB, 1.0),
        word(1, 4, 1, 6, SEG + 20 * KIB, SEG, 2 * MIB, 1.0),
    };
    size_t n = sizeof w / sizeof *w, of[6], nr = 0;
    l2p_live_range *r = NULL;
    CHECK(l2p_live_ranges(w, n, &r, &nr, of) == L2P_OK);
    CHECK(nr == 6);
    for (size_t i = 0; i < n; i++) CHECK(of[i] == i);
    free(r);
    /* the same words in any order: the same ranges, each word mapped to its own */
    l2p_live_word s[6] = {w[5], w[2], w[0], w[4], w[1], w[3]};
    CHECK(l2p_live_ranges(s, n, &r, &nr, of) == L2P_OK);
    CHECK(nr == 6 && of[0] == 5 && of[1] == 2 && of[2] == 0 && of[5] == 3);
    free(r);
}

/* A node counts once per range however many words it passes there; two allocations at one
 * start but of other sizes (two graphs' views of a reused address) stay apart. */
static void test_readers_count_once(void)
{
    l2p_live_word w[] = {
        word(0, 0, 0, 1, SEG, SEG, 2 * MIB, 3.0),
        word(0, 0, 1, 1, SEG, SEG, 2 * MIB, 3.0),
        word(0, 0, 2, 1, SEG + 8, SEG, 2 * MIB, 3.0),   /* + 8: an offset view, other param */
        word(0, 5, 0, 2, SEG, SEG, 4 * MIB, 1.0),
    };
    size_t of[4], nr = 0;
    l2p_live_range *r = NULL;
    CHECK(l2p_live_ranges(w, 4, &r, &nr, of) == L2P_OK);
    CHECK(nr == 3);
    CHECK(of[0] == of[1] && of[0] != of[2] && of[3] != of[0]);
    CHECK(r[of[0]].weight == 3.0 && r[of[0]].readers == 1 && r[of[0]].size == 8);
    CHECK(r[of[3]].size == 4 * MIB && r[of[3]].weight == 1.0);
    free(r);
}

static void test_errors(void)
{
    size_t of[1], nr = 7;
    l2p_live_range *r = (l2p_live_range *)&nr;
    l2p_live_word out = word(0, 0, 0, 1, SEG + 2 * MIB, SEG, 2 * MIB, 1.0);
    CHECK(l2p_live_ranges(&out, 1, &r, &nr, of) == L2P_ERR_VALUE);
    CHECK(r == NULL && nr == 0);
    CHECK(strstr(l2p_last_error()->message, "words[0]") != NULL);
    l2p_live_word bad = word(0, 0, 0, 1, SEG, SEG, 2 * MIB, NAN);
    CHECK(l2p_live_ranges(&bad, 1, &r, &nr, of) == L2P_ERR_VALUE);
    bad.weight = -1;
    CHECK(l2p_live_ranges(&bad, 1, &r, &nr, of) == L2P_ERR_VALUE);
    CHECK(l2p_live_ranges(NULL, 0, &r, &nr, of) == L2P_OK && nr == 0);
    free(r);
}

int main(void)
{
    test_segment_tensors_are_their_own_ranges();
    test_an_odd_word_is_no_pointer();
    test_a_flat_weight_is_one_range();
    test_a_period_of_views_and_a_tail();
    test_what_is_not_a_run();
    test_readers_count_once();
    test_errors();
    printf("test_live_ranges: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
