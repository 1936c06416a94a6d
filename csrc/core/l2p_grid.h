/* Default launch shapes of the kernels, sized from the SM count. */
#ifndef L2P_GRID_H
#define L2P_GRID_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The streaming kernels' grid: enough resident threads to keep HBM busy on any SM count. */
void l2p_streaming_grid(int multiprocessor_count, unsigned *blocks, unsigned *threads);

/* The bulk read's grid: 2 blocks of 32 threads (one warp drives the copy engine) per SM. */
void l2p_bulk_read_grid(int multiprocessor_count, unsigned *blocks, unsigned *threads);

/* The L2-resident read's shape: blocks of `threads` threads, each thread making `loads`
 * independent loads, one per row of `threads` words, rows `chunks` apart; block b reads chunk
 * b % chunks, so `repeats` passes take repeats * chunks blocks. A block's footprint (1024
 * threads x 64 loads x 8 bytes = 512 KiB) exceeds the L1, so the L2 serves the loads (the
 * scheme of te42kyfo/gpu-benches' L2 kernel). Returns the chunk count of n words. */
size_t l2p_l2_read_chunks(size_t n_words, unsigned threads, unsigned loads);

#ifdef __cplusplus
}
#endif
#endif
