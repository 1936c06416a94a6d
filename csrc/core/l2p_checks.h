/* Argument checks of the kernel suite and of windows, in C so that every caller gets the same
 * messages. Default launch shapes are in l2p_grid.h, the study's host map in l2p_seedmap.h. */
#ifndef L2P_CHECKS_H
#define L2P_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The launch shape's ranges: the kernel rows take theirs from here (one number, one home). */
#define L2P_THREADS_MAX 1024        /* threads per block */
#define L2P_BLOCKS_MAX 2147483647LL /* blocks of a grid, 2^31 - 1 */

/* Blocks in [1, L2P_BLOCKS_MAX], threads in [1, L2P_THREADS_MAX]. */
l2p_status l2p_check_launch_shape(long long blocks, long long threads);

/* Every index in {offset + t * stride : 0 <= t < count} lies in [0, limit). */
l2p_status l2p_check_affine_range(long long offset, long long stride, long long count,
                                  long long limit, const char *what);

/* Every index[t] for t < count lies in [0, limit). */
l2p_status l2p_check_index_range(const int32_t *index, long long count, long long limit,
                                 const char *what);

/* A pointer and size usable as words of `width` bytes (1: anything). */
l2p_status l2p_check_words(uintptr_t ptr, size_t nbytes, unsigned width, const char *arg);
/* The same for 16-byte words. */
l2p_status l2p_check_words16(uintptr_t ptr, size_t nbytes, const char *arg);

/* A pointer aligned for accesses of `width` bytes. */
l2p_status l2p_check_alignment(uintptr_t ptr, int width, const char *arg);

/* A window's hit_ratio and properties, by the rule of l2p_policy_make_window, without a
 * target: a window's own values are named before any buffer or device is asked about (the
 * buffer's conversion and the device's window limit may need a driver). */
l2p_status l2p_check_window_rule(double hit_ratio, int hit_prop, int miss_prop);

#ifdef __cplusplus
}
#endif
#endif
