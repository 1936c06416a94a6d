/* Argument checks of the kernel suite, in C so that every caller gets the same messages, and
 * the pure helpers the kernels' callers need (launch shapes, the study's map generator). */
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

/* A pointer and size usable as 16-byte words. */
l2p_status l2p_check_words16(uintptr_t ptr, size_t nbytes, const char *arg);

/* A pointer aligned for accesses of `width` bytes. */
l2p_status l2p_check_alignment(uintptr_t ptr, int width, const char *arg);

/* The streaming kernels' grid: enough resident threads to keep HBM busy on any SM count. */
void l2p_streaming_grid(int multiprocessor_count, unsigned *blocks, unsigned *threads);

/* The L2-resident read's grid: 2 blocks of 1024 threads per SM with 8 loads in flight each
 * was the best L2-served shape of a sweep on an H200 (tools/l2_read_sweep.py: 8.9 TB/s at
 * 48 MiB, against 8.4 TB/s for the streaming grid). */
void l2p_l2_read_grid(int multiprocessor_count, unsigned *blocks, unsigned *threads);

/* The study's map: srand(0); map[i] = rand() % range, with glibc's rand() (the additive
 * feedback generator of random_r's TYPE_3; glibc treats seed 0 as 1), reproduced exactly on
 * any platform. */
void l2p_seed_map_int32(int32_t *map, size_t n, uint32_t range, unsigned seed);
void l2p_seed_map_int64(int64_t *map, size_t n, uint64_t range, unsigned seed);

#ifdef __cplusplus
}
#endif
#endif
