/* The live search's targets: the ranges the kernels' words point into (see l2p_live.h,
 * l2p_live_ranges, for the rules). */
#include <math.h>
#include <stdlib.h>

#include "l2p_live.h"

typedef struct {
    const l2p_live_word *w;
    size_t i;                   /* its index in the caller's words */
} word_ref;

typedef struct {
    size_t first, count;        /* its words in the sorted refs */
    uint64_t start, end;        /* [its word, the next word or the allocation's end) */
    size_t range;
} piece;

typedef struct {
    size_t range, group, node;
    double weight;
} reader;

#define CMP(a, b) if ((a) != (b)) return (a) < (b) ? -1 : 1

/* By allocation, then word: a piece's words are neighbours, in (group, node, param, offset)
 * order, so two pieces' signatures compare item by item. */
static int by_place(const void *pa, const void *pb)
{
    const l2p_live_word *a = ((const word_ref *)pa)->w, *b = ((const word_ref *)pb)->w;
    CMP(a->range_start, b->range_start);
    CMP(a->range_size, b->range_size);
    CMP(a->word, b->word);
    CMP(a->group, b->group);
    CMP(a->node, b->node);
    CMP(a->param, b->param);
    CMP(a->offset, b->offset);
    return 0;
}

static int by_reader(const void *pa, const void *pb)
{
    const reader *a = pa, *b = pb;
    CMP(a->range, b->range);
    CMP(a->group, b->group);
    CMP(a->node, b->node);
    return 0;
}

static l2p_status check_words(const l2p_live_word *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t end = w[i].range_start + w[i].range_size;
        if (w[i].word < w[i].range_start || w[i].word >= end || end < w[i].range_start)
            return l2p_fail(L2P_ERR_VALUE, "words[%zu]: 0x%llx is outside its allocation "
                            "[0x%llx, +%llu)", i, (unsigned long long)w[i].word,
                            (unsigned long long)w[i].range_start,
                            (unsigned long long)w[i].range_size);
        if (!(w[i].weight >= 0) || !isfinite(w[i].weight))
            return l2p_fail(L2P_ERR_VALUE, "words[%zu]: weight: expected a finite number >= 0, "
                            "got %g", i, w[i].weight);
    }
    return L2P_OK;
}

static int same_allocation(const l2p_live_word *a, const l2p_live_word *b)
{
    return a->range_start == b->range_start && a->range_size == b->range_size;
}

/* Rule 1's exception: an odd word is no pointer the ranges use. No element wider than a byte
 * begins there, and a by-value struct's stale bytes can hold one (ddp on two H200s at f7a980d: a
 * word 999 bytes into a 36 MiB buffer cut it in two on one rank, and no plan was tried on it). */
static int is_pointer(const l2p_live_word *w) { return (w->word & 1) == 0; }

/* Runs of equal words; a piece ends where the next one of its allocation starts. */
static size_t cut_pieces(const word_ref *r, size_t n, piece *p)
{
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        if (np && p[np - 1].start == r[i].w->word &&
            same_allocation(r[p[np - 1].first].w, r[i].w)) {
            p[np - 1].count++;
            continue;
        }
        p[np++] = (piece){.first = i, .count = 1, .start = r[i].w->word};
    }
    for (size_t k = 0; k < np; k++) {
        const l2p_live_word *w = r[p[k].first].w;
        int next_here = k + 1 < np && same_allocation(r[p[k + 1].first].w, w);
        p[k].end = next_here ? p[k + 1].start : w->range_start + w->range_size;
    }
    return np;
}

/* Read by the same kernels in the same roles in the same graphs (not by the same nodes). */
static int same_signature(const word_ref *r, const piece *a, const piece *b)
{
    if (a->count != b->count) return 0;
    for (size_t k = 0; k < a->count; k++) {
        const l2p_live_word *x = r[a->first + k].w, *y = r[b->first + k].w;
        if (x->group != y->group || x->kernel != y->kernel || x->param != y->param) return 0;
    }
    return 1;
}

/* Pieces [i, end) of one allocation: how many from i one range takes (rule 3), at least 1. */
static size_t run_from(const word_ref *r, const piece *p, size_t i, size_t end)
{
    size_t best = 1;
    for (size_t per = 1; per <= L2P_LIVE_MAX_PERIOD && i + 2 * per <= end; per++) {
        size_t k = i;
        while (k + per < end && same_signature(r, &p[k], &p[k + per])) k++;
        size_t whole = (k - i + per) / per * per; /* the run's whole periods */
        if (whole >= 2 * per && whole > best) best = whole;
    }
    return best;
}

/* Each piece's range; the ranges' extents. Returns the ranges. */
static size_t merge_pieces(const word_ref *r, piece *p, size_t np, l2p_live_range *out)
{
    size_t nr = 0;
    for (size_t i = 0; i < np;) {
        size_t end = i + 1;
        while (end < np && same_allocation(r[p[end].first].w, r[p[i].first].w)) end++;
        size_t take = run_from(r, p, i, end);
        out[nr] = (l2p_live_range){.address = p[i].start, .size = p[i + take - 1].end - p[i].start,
                                   .pieces = take};
        for (size_t k = i; k < i + take; k++) p[k].range = nr;
        nr++;
        i += take;
    }
    return nr;
}

/* Rule 4: a node counts once per range, however many of its words point there. */
static void weigh(const word_ref *r, size_t n, const piece *p, size_t np, reader *rd,
                  l2p_live_range *out, size_t *range_of)
{
    size_t m = 0;
    for (size_t k = 0; k < np; k++)
        for (size_t j = p[k].first; j < p[k].first + p[k].count; j++) {
            range_of[r[j].i] = p[k].range;
            rd[m++] = (reader){p[k].range, r[j].w->group, r[j].w->node, r[j].w->weight};
        }
    qsort(rd, n, sizeof *rd, by_reader);
    for (size_t j = 0; j < n; j++) {
        if (j && !by_reader(&rd[j - 1], &rd[j])) continue;
        out[rd[j].range].weight += rd[j].weight;
        out[rd[j].range].readers++;
    }
}

l2p_status l2p_live_ranges(const l2p_live_word *words, size_t n, l2p_live_range **out,
                           size_t *n_out, size_t *range_of)
{
    *out = NULL;
    *n_out = 0;
    l2p_status st = check_words(words, n);
    if (st != L2P_OK) return st;
    word_ref *r = malloc((n ? n : 1) * sizeof *r);
    piece *p = malloc((n ? n : 1) * sizeof *p);
    reader *rd = malloc((n ? n : 1) * sizeof *rd);
    l2p_live_range *ranges = calloc(n ? n : 1, sizeof *ranges);
    if (!r || !p || !rd || !ranges) {
        st = l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory splitting %zu words", n);
        free(ranges);
        goto out;
    }
    size_t m = 0; /* the words taken for pointers */
    for (size_t i = 0; i < n; i++) {
        range_of[i] = L2P_LIVE_NO_RANGE;
        if (is_pointer(&words[i])) r[m++] = (word_ref){&words[i], i};
    }
    qsort(r, m, sizeof *r, by_place);
    size_t np = cut_pieces(r, m, p);
    size_t nr = merge_pieces(r, p, np, ranges);
    weigh(r, m, p, np, rd, ranges, range_of);
    *out = ranges;
    *n_out = nr;
out:
    free(r);
    free(p);
    free(rd);
    return st;
}
