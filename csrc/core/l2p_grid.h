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

/* l2_read's loads per thread when the caller names none, from the candidates `loads` (largest
 * first: 64, 32, 16, 8) and for each the blocks its launch makes and the blocks the GPU runs at
 * once (`resident`, from the occupancy); a candidate's waves are blocks / resident:
 *   1. 64 loads once their launch is 4 waves or more: fewest, longest blocks, the cheapest per
 *      byte once the GPU stays full;
 *   2. else 16 or 8 loads (16 first) whose launch is 1 to 1.35 waves: one full wave with a
 *      short tail beats the original's shape there;
 *   3. else, when even the most blocks (8 loads; on a tie, the fewest loads) fill less than
 *      one wave, those;
 *   4. else 32 loads: gpu-benches' own shape (1024 threads x 32 loads), whose tail is the
 *      original's.
 * Read off tools/l2read-vs-original on an H200 at 6-40 MiB x 1-100 passes, each cell against
 * the original timed against itself (what one cell resolves: 0.967-1.013 from 3 passes up):
 * the former rule (the most loads with 4/3 of a wave) lost 0.92-0.96x at 5-10 passes, where
 * its pick ran 1.5-3 waves of 64 or 8 loads; 32 loads stayed 0.95-1.04x there. Returns an
 * index into the arrays, -1 when n is 0 (and the first candidate when none is 32); a
 * candidate whose occupancy is 0 (resident 0) never counts as filling a wave. */
int l2p_l2_read_pick_loads(const unsigned *loads, const size_t *blocks, const size_t *resident,
                           int n);

#ifdef __cplusplus
}
#endif
#endif
