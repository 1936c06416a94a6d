#include "l2p_checks.h"

#include <stdint.h>
#include <string.h>

#include "l2p_policy.h"

l2p_status l2p_check_launch_shape(long long blocks, long long threads)
{
    if (threads < 1 || threads > L2P_THREADS_MAX)
        return l2p_fail(L2P_ERR_VALUE, "threads: %lld is outside [1, %d]", threads,
                        L2P_THREADS_MAX);
    if (blocks < 1 || blocks > L2P_BLOCKS_MAX)
        return l2p_fail(L2P_ERR_VALUE, "blocks: %lld is outside [1, %lld]", blocks,
                        L2P_BLOCKS_MAX);
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

l2p_status l2p_check_words(uintptr_t ptr, size_t nbytes, unsigned width, const char *arg)
{
    if (width > 1 && (ptr % width || nbytes % width))
        return l2p_fail(L2P_ERR_VALUE, "%s: the kernel accesses %u-byte words; the buffer must "
                        "start %u-byte aligned and hold a multiple of %u bytes (address %% %u = "
                        "%zu, nbytes = %zu)", arg, width, width, width, width,
                        (size_t)(ptr % width), nbytes);
    return L2P_OK;
}

l2p_status l2p_check_words16(uintptr_t ptr, size_t nbytes, const char *arg)
{
    return l2p_check_words(ptr, nbytes, 16, arg);
}

l2p_status l2p_check_alignment(uintptr_t ptr, int width, const char *arg)
{
    if (width > 0 && ptr % (uintptr_t)width)
        return l2p_fail(L2P_ERR_VALUE, "%s: address is not aligned to the %d-byte access width",
                        arg, width);
    return L2P_OK;
}

l2p_status l2p_check_window_rule(double hit_ratio, int hit_prop, int miss_prop)
{
    /* an empty window over an empty target: only the ratio and the properties can fail, and
     * they fail with the messages the policy gives them (one rule, one home) */
    l2p_window unused;
    return l2p_policy_make_window(0, 0, 0, 0, hit_ratio, hit_prop, miss_prop, SIZE_MAX, 0,
                                  &unused);
}
