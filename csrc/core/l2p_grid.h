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

/* l2_read's default passes per launch: enough that one launch reads at least
 * L2P_L2_READ_AUTO_BYTES, so that the launch's ramp (2-3 us on an H200: a short launch's
 * time minus its bytes at the long launches' rate) is under 1 % of what is timed; at most
 * L2P_L2_READ_AUTO_BLOCKS blocks of `chunks` each, and at least 1. */
#define L2P_L2_READ_AUTO_BYTES (4ull << 30)
#define L2P_L2_READ_AUTO_BLOCKS (1ull << 22)
long long l2p_l2_read_auto_repeats(size_t nbytes, size_t chunks);

/* l2_read's loads per thread when the caller names none: of the candidates (largest first),
 * the first whose grid holds at least 4/3 of the blocks the GPU runs at once
 * (blocks[i] * 3 >= resident[i] * 4); else the candidate with the most blocks. Fewer, longer
 * blocks cost less per byte once the GPU is full; a short launch needs more, shorter blocks
 * to fill it (against gpu-benches' kernel on an H200, tools/l2read-vs-original: 64 loads
 * 0.74-0.90x at 1-10 passes of 8-32 MiB, the chosen loads 0.997-1.02x from 3 passes up).
 * Returns an index into the arrays, -1 when n is 0. */
int l2p_l2_read_pick_loads(const size_t *blocks, const size_t *resident, int n);

#ifdef __cplusplus
}
#endif
#endif
