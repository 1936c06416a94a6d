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
 * b % chunks, so `repeats` passes take repeats * chunks blocks. No block reads a word twice
 * and the blocks that share a chunk run passes apart, so the L2 serves the loads (the scheme
 * of te42kyfo/gpu-benches' L2 kernel). Returns the chunk count of n words. */
size_t l2p_l2_read_chunks(size_t n_words, unsigned threads, unsigned loads);

/* l2_read's default passes per launch: enough that one launch reads at least
 * L2P_L2_READ_AUTO_BYTES, so that the launch's ramp (2-3 us on an H200: a short launch's
 * time minus its bytes at the long launches' rate) is under 1 % of what is timed; at most
 * L2P_L2_READ_AUTO_BLOCKS blocks of `chunks` each, and at least 1. */
#define L2P_L2_READ_AUTO_BYTES (4ull << 30)
#define L2P_L2_READ_AUTO_BLOCKS (1ull << 22)
long long l2p_l2_read_auto_repeats(size_t nbytes, size_t chunks);

/* l2_read's threads per block when the caller names none. Small blocks end and start a few
 * threads at a time, so an SM's load queue never drains for a whole 1024-thread block; with
 * the 64 loads per thread of a long launch a block still reads 128 KiB. Against gpu-benches'
 * kernel on an H200 (tools/l2read-vs-original, 8-32 MiB x 1-50 passes, 11 rounds), 256
 * threads x 64 loads met it in every cell from 2 passes up (1.001-1.33x); 1024 threads,
 * whatever the loads, fell to 0.93-0.99x somewhere below 50 passes. */
#define L2P_L2_READ_THREADS 256

/* l2_read's loads per thread when the caller names none: of the candidates (largest first),
 * the first whose grid has at least 8/3 blocks per SM (blocks[i] * 3 >= sms * 8); else the
 * candidate with the most blocks. Fewer, longer blocks cost less per byte once every SM is
 * busy; a short launch needs more, shorter blocks to busy them. On an H200 at 256 threads,
 * any threshold from 1/2 to 3 blocks per SM met the original from 2 passes up; at 512
 * threads 8/3 to 6 did from 3 passes up; at 1024 threads 8/3 came closest (0.992x from 3
 * passes up; 8/3 x 132 = 4/3 of the 264 resident 1024-thread blocks, the rule of the
 * 1024-thread default before).
 * Returns an index into blocks, -1 when n is 0. */
int l2p_l2_read_pick_loads(const size_t *blocks, int n, int sms);

#ifdef __cplusplus
}
#endif
#endif
