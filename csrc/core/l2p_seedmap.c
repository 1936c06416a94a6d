#include "l2p_seedmap.h"

#include <string.h>

/* glibc random_r TYPE_3: r[i] = r[i-3] + r[i-31] (mod 2^32), output r >> 1, after 310
 * discarded values; the state starts from 16807 * r (mod 2^31 - 1). */
typedef struct {
    int32_t r[34];
    size_t i;
} glibc_rand;

static void glibc_srand(glibc_rand *g, unsigned seed)
{
    int32_t word = seed ? (int32_t)seed : 1;
    int32_t r[344];
    r[0] = word;
    for (int i = 1; i < 31; i++) {
        /* 16807 * r[i-1] % 2147483647 without overflow (Schrage), as glibc computes it. */
        long long hi = r[i - 1] / 127773, lo = r[i - 1] % 127773;
        long long w = 16807 * lo - 2836 * hi;
        if (w < 0) w += 2147483647;
        r[i] = (int32_t)w;
    }
    for (int i = 31; i < 34; i++) r[i] = r[i - 31];
    for (int i = 34; i < 344; i++) r[i] = (int32_t)((uint32_t)r[i - 31] + (uint32_t)r[i - 3]);
    memcpy(g->r, r + 344 - 34, sizeof g->r);
    g->i = 0;
}

static uint32_t glibc_rand_next(glibc_rand *g)
{
    /* Ring of the last 34 values: new = r[-31] + r[-3]. */
    size_t k = g->i % 34;
    int32_t v = (int32_t)((uint32_t)g->r[(k + 3) % 34] + (uint32_t)g->r[(k + 31) % 34]);
    g->r[k] = v;
    g->i++;
    return (uint32_t)v >> 1;
}

void l2p_seed_map_int32(int32_t *map, size_t n, uint32_t range, unsigned seed)
{
    glibc_rand g;
    glibc_srand(&g, seed);
    for (size_t i = 0; i < n; i++) map[i] = (int32_t)(glibc_rand_next(&g) % range);
}

void l2p_seed_map_int64(int64_t *map, size_t n, uint64_t range, unsigned seed)
{
    glibc_rand g;
    glibc_srand(&g, seed);
    for (size_t i = 0; i < n; i++) map[i] = (int64_t)(glibc_rand_next(&g) % range);
}

l2p_status l2p_seed_map_check(long long n, long long range)
{
    if (n < 0) return l2p_fail(L2P_ERR_VALUE, "n: %lld must be >= 0", n);
    if (range < 1 || range > 2147483647LL)
        return l2p_fail(L2P_ERR_VALUE, "range: %lld is outside [1, 2^31 - 1] (rand() yields 31 "
                        "bits)", range);
    return L2P_OK;
}
