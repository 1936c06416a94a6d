/* Argument checks of the kernel suite, in C so that every caller gets the same messages.
 * Default launch shapes are in l2p_grid.h, the study's host map in l2p_seedmap.h. */
#ifndef L2P_CHECKS_H
#define L2P_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks in [1, 2^31 - 1], threads in [1, 1024]. */
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

#ifdef __cplusplus
}
#endif
#endif
