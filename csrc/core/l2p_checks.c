#include "l2p_checks.h"

#include <string.h>

l2p_status l2p_check_launch_shape(long long blocks, long long threads)
{
    if (threads < 1 || threads > 1024)
        return l2p_fail(L2P_ERR_VALUE, "threads: %lld is outside [1, 1024]", threads);
    if (blocks < 1 || blocks > 2147483647LL)
        return l2p_fail(L2P_ERR_VALUE, "blocks: %lld is outside [1, 2147483647]", blocks);
    return L2P_OK;
}

l2p_status l2p_check_affine_range(long long offset, long long stride, long long count,
                                  long long limit, const char *what)
{
    long long first = offset, last;
    if (count <= 0) return L2P_OK;
    if (__builtin_mul_overflow(stride, count - 1, &last) ||
        __builtin_add_overflow(last, offset, &last))
        return l2p_fail(L2P_ERR_VALUE, "%s: offset %lld + stride %lld * %lld overflows", what,
                        offset, stride, count - 1);
    long long lo = first < last ? first : last, hi = first < last ? last : first;
    if (lo < 0 || hi >= limit)
        return l2p_fail(L2P_ERR_VALUE, "%s: elements %lld..%lld are outside the buffer's "
                        "[0, %lld)", what, lo, hi, limit);
    return L2P_OK;
}

l2p_status l2p_check_index_range(const int32_t *index, long long count, long long limit,
                                 const char *what)
{
    for (long long t = 0; t < count; t++)
        if (index[t] < 0 || index[t] >= limit)
            return l2p_fail(L2P_ERR_VALUE, "%s: entry %lld is %d, outside [0, %lld)", what, t,
                            index[t], limit);
    return L2P_OK;
}

l2p_status l2p_check_words16(uintptr_t ptr, size_t nbytes, const char *arg)
{
    if (ptr % 16 || nbytes % 16)
        return l2p_fail(L2P_ERR_VALUE, "%s: the streaming kernels access 16-byte words; the "
                        "buffer must start 16-byte aligned and hold a multiple of 16 bytes "
                        "(address %% 16 = %zu, nbytes = %zu)",
                        arg, (size_t)(ptr % 16), nbytes);
    return L2P_OK;
}

l2p_status l2p_check_alignment(uintptr_t ptr, int width, const char *arg)
{
    if (width > 0 && ptr % (uintptr_t)width)
        return l2p_fail(L2P_ERR_VALUE, "%s: address is not aligned to the %d-byte access width",
                        arg, width);
    return L2P_OK;
}

void l2p_streaming_grid(int multiprocessor_count, unsigned *blocks, unsigned *threads)
{
    /* 4 blocks of 512 threads per SM fill Hopper's 2048 resident threads per SM. */
    *threads = 512;
    *blocks = (unsigned)(multiprocessor_count > 0 ? multiprocessor_count : 1) * 4u;
}

void l2p_l2_read_grid(int multiprocessor_count, unsigned *blocks, unsigned *threads)
{
    *threads = 1024;
    *blocks = (unsigned)(multiprocessor_count > 0 ? multiprocessor_count : 1) * 2u;
}

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
