#include "l2p_model.h"

#include "l2p_flavour.h"

#include <stdlib.h>
#include <string.h>

const char *const l2p_rule_names[L2P_RULE_COUNT + 1] = {"kepler_caching", "kepler_noncaching",
                                                        "sectors", NULL};
#define rule_names l2p_rule_names

const char *l2p_rule_name(int rule)
{
    return rule >= 0 && rule < L2P_RULE_COUNT ? rule_names[rule] : NULL;
}

l2p_status l2p_rule_parse(const char *name, int *rule)
{
    return l2p_parse_choice(name, "rule", l2p_rule_names, rule);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sort and drop duplicates; returns the new count. */
static int unique(int64_t *v, int n)
{
    int k = 0;
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    for (int i = 0; i < n; i++)
        if (k == 0 || v[i] != v[k - 1]) v[k++] = v[i];
    return k;
}

/* Distinct bytes covered by [start, start + size) of every start (sorted, unique). */
static uint64_t union_bytes(const int64_t *start, int n, int size)
{
    uint64_t bytes = 0;
    int64_t covered_to = INT64_MIN;
    for (int i = 0; i < n; i++) {
        int64_t lo = start[i] > covered_to ? start[i] : covered_to, hi = start[i] + size;
        if (hi > lo) bytes += (uint64_t)(hi - lo);
        if (hi > covered_to) covered_to = hi;
    }
    return bytes;
}

/* Runs of contiguous set bits in a 4-bit segment mask: transactions of the non-caching rule. */
static int segment_runs(unsigned seg_mask)
{
    int runs = 0, prev = 0;
    for (int s = 0; s < 4; s++) {
        int on = (seg_mask >> s) & 1;
        if (on && !prev) runs++;
        prev = on;
    }
    return runs;
}

/* Per touched line, its segment mask; sectors sorted. Returns the number of lines. */
static int line_masks(const int64_t *sectors, int n_sectors, unsigned *masks)
{
    int lines = 0;
    int64_t current = -1;
    for (int i = 0; i < n_sectors; i++) {
        int64_t line = sectors[i] >> 2;
        if (line != current) {
            masks[lines++] = 0;
            current = line;
        }
        masks[lines - 1] |= 1u << (sectors[i] & 3);
    }
    return lines;
}

static void apply_rule(int rule, int store, int n_lines, const unsigned *masks, int n_sectors,
                       l2p_access_stats *out)
{
    out->sectors = (uint64_t)n_sectors;
    out->lines = (uint64_t)n_lines;
    if (rule == L2P_RULE_KEPLER_CACHING && !store) {
        out->transactions = (uint64_t)n_lines;
        out->bytes_moved = 128u * (uint64_t)n_lines;
    } else if (rule == L2P_RULE_SECTORS) {
        out->transactions = (uint64_t)n_lines;
        out->bytes_moved = 32u * (uint64_t)n_sectors;
    } else { /* Kepler non-caching, and Kepler stores under either rule */
        uint64_t t = 0;
        for (int l = 0; l < n_lines; l++) t += (uint64_t)segment_runs(masks[l]);
        out->transactions = t;
        out->bytes_moved = 32u * (uint64_t)n_sectors;
    }
    out->replays = out->transactions > out->requests ? out->transactions - out->requests : 0;
}

static l2p_status check_size(int size)
{
    if (size == 1 || size == 2 || size == 4 || size == 8 || size == 16) return L2P_OK;
    return l2p_fail(L2P_ERR_VALUE, "size: %d bytes is not an access size; allowed 1, 2, 4, 8, 16",
                    size);
}

static l2p_status above_max(size_t thread, unsigned long long address)
{
    return l2p_fail(L2P_ERR_VALUE, "addresses: thread %zu's address %llu is above 2**63 - 257, "
                    "the largest the model takes (allowed 0 .. 2**63 - 257)", thread, address);
}

l2p_status l2p_model_check_unsigned(size_t thread, uint64_t address)
{
    return address > (uint64_t)L2P_MODEL_MAX_ADDRESS ? above_max(thread, address) : L2P_OK;
}

static l2p_status warp_inner(const int64_t *addr, uint32_t mask, int size, int store, int rule,
                             size_t first_thread, l2p_access_stats *out)
{
    int64_t starts[32], sectors[32];
    unsigned masks[32];
    int n = 0;
    memset(out, 0, sizeof *out);
    for (int lane = 0; lane < 32; lane++) {
        if (!((mask >> lane) & 1)) continue;
        int64_t a = addr[lane];
        if (a < 0)
            return l2p_fail(L2P_ERR_VALUE, "addresses: thread %zu has the negative address %lld",
                            first_thread + (size_t)lane, (long long)a);
        if (a > L2P_MODEL_MAX_ADDRESS) /* a + size and the line arithmetic must not overflow */
            return above_max(first_thread + (size_t)lane, (unsigned long long)a);
        if (a % size)
            return l2p_fail(L2P_ERR_VALUE, "addresses: thread %zu's address %lld is not aligned "
                            "to the %d-byte access size", first_thread + (size_t)lane,
                            (long long)a, size);
        starts[n] = a;
        sectors[n] = a >> 5; /* an aligned access of <= 16 bytes never crosses a sector */
        n++;
    }
    if (n == 0) return L2P_OK;
    out->requests = 1;
    int distinct = unique(starts, n);
    out->bytes_requested = union_bytes(starts, distinct, size);
    int n_sectors = unique(sectors, n);
    int n_lines = line_masks(sectors, n_sectors, masks);
    apply_rule(rule, store, n_lines, masks, n_sectors, out);
    return L2P_OK;
}

l2p_status l2p_model_warp(const int64_t *addr, uint32_t mask, int size, int store, int rule,
                          l2p_access_stats *out)
{
    L2P_TRY(check_size(size));
    if (!l2p_rule_name(rule)) return l2p_fail(L2P_ERR_VALUE, "rule: %d is not a rule", rule);
    return warp_inner(addr, mask, size, store, rule, 0, out);
}

static void add(l2p_access_stats *t, const l2p_access_stats *w)
{
    t->requests += w->requests;
    t->transactions += w->transactions;
    t->replays += w->replays;
    t->sectors += w->sectors;
    t->lines += w->lines;
    t->bytes_requested += w->bytes_requested;
    t->bytes_moved += w->bytes_moved;
}

l2p_status l2p_model_analyze(const int64_t *addr, size_t n, const uint32_t *masks, int size,
                             int store, int rule, l2p_access_stats *per_warp,
                             l2p_access_stats *total)
{
    size_t warps = (n + 31) / 32;
    L2P_TRY(check_size(size));
    if (!l2p_rule_name(rule)) return l2p_fail(L2P_ERR_VALUE, "rule: %d is not a rule", rule);
    memset(total, 0, sizeof *total);
    for (size_t w = 0; w < warps; w++) {
        int64_t lanes[32] = {0};
        size_t base = w * 32, count = n - base < 32 ? n - base : 32;
        uint32_t mask = count == 32 ? 0xffffffffu : ((1u << count) - 1u);
        if (masks) mask &= masks[w];
        memcpy(lanes, addr + base, count * sizeof *lanes);
        l2p_access_stats s;
        L2P_TRY(warp_inner(lanes, mask, size, store, rule, base, &s));
        if (per_warp) per_warp[w] = s;
        add(total, &s);
    }
    return L2P_OK;
}

l2p_status l2p_model_lines(int64_t *out, size_t n, int size, int64_t line, const int64_t *perm)
{
    L2P_TRY(check_size(size)); /* line's range is its row's (model.c): no overflow below */
    int64_t per_line = 128 / size;
    for (size_t t = 0; t < n; t++) {
        if (perm[t] < 0 || perm[t] >= per_line)
            return l2p_fail(L2P_ERR_VALUE, "perm: thread %zu's element %lld is outside [0, %lld) "
                            "(elements of a line)", t, (long long)perm[t], (long long)per_line);
        out[t] = (line + (int64_t)t / per_line) * 128 + perm[t] * size; /* < 2^48: no overflow */
    }
    return L2P_OK;
}

l2p_status l2p_model_scatter(int64_t *out, size_t n, int size, const int64_t *pick,
                             int64_t elements)
{
    L2P_TRY(check_size(size));
    for (size_t t = 0; t < n; t++) {
        if (pick[t] < 0 || pick[t] >= elements)
            return l2p_fail(L2P_ERR_VALUE, "pick: thread %zu's element %lld is outside [0, %lld)",
                            t, (long long)pick[t], (long long)elements);
        out[t] = pick[t] * size;
    }
    return L2P_OK;
}

l2p_status l2p_model_strided(int64_t *out, size_t n, int size, int64_t offset, int64_t stride,
                             int64_t base, const char *args)
{
    L2P_TRY(check_size(size));
    for (size_t t = 0; t < n; t++) {
        int64_t element, byte, a;
        if (__builtin_mul_overflow((int64_t)t, stride, &element) ||
            __builtin_add_overflow(element, offset, &element) ||
            __builtin_mul_overflow(element, (int64_t)size, &byte) ||
            __builtin_add_overflow(byte, base, &a))
            return l2p_fail(L2P_ERR_VALUE, "%s: thread %zu's address does not fit an int64 "
                            "(allowed 0 .. 2**63 - 257)", args, t);
        if (a < 0 || a > L2P_MODEL_MAX_ADDRESS)
            return l2p_fail(L2P_ERR_VALUE, "%s: thread %zu's address %lld is outside 0 .. 2**63 - "
                            "257", args, t, (long long)a);
        out[t] = a;
    }
    return L2P_OK;
}

double l2p_model_efficiency(const l2p_access_stats *s)
{
    return s->bytes_moved ? 100.0 * (double)s->bytes_requested / (double)s->bytes_moved : 0.0;
}
