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
 * first: l2_read asks 64, 32, 8) and for each the blocks its launch makes and the blocks the
 * GPU runs at once (`resident`, from the occupancy); a candidate's waves are blocks / resident:
 *   1. 64 loads once their launch is 4 waves or more: fewest, longest blocks, the cheapest per
 *      byte once the GPU stays full;
 *   2. else, when even the most blocks (8 loads; on a tie, the fewest loads) fill less than
 *      one wave, those: more SMs busy in a launch that cannot fill them all;
 *   3. else 32 loads: gpu-benches' own shape (1024 threads x 32 loads), whose tail is the
 *      original's.
 * Timed with tools/investigations/l2read-vs-original on an H200 against the original (and the original
 * against itself: what one cell resolves). A branch that picked 16 or 8 loads at 1-1.35 waves
 * was fitted on l2_read's former, general body and dropped once l2p_l2_read_rows ran the
 * original's: on sizes it was not fitted on it lost 0.91-0.95x at 44 MiB x 1, 42 x 1 and
 * 11 x 4 (32 loads: 0.987-1.003x there) and won at 13 x 3, 21 x 1 and 21 x 2; branch 2 won
 * in each held-out cell where it picked (9, 13, 15 MiB x 1: 1.08-1.18x). With 8 loads among
 * the candidates no other is picked below 32 (8 make the most blocks). Returns an index into
 * the arrays, -1 when n is 0 (and the first candidate when none is 32); a candidate whose
 * occupancy is 0 (resident 0) takes neither branch 1 nor 2 (32 loads then). */
int l2p_l2_read_pick_loads(const unsigned *loads, const size_t *blocks, const size_t *resident,
                           int n);

#ifdef __cplusplus
}
#endif
#endif
