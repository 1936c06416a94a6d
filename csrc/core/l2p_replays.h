/* Graph replays timed by CUDA events: one event pair around each replay the watcher hooks
 * (PyTorch's CUDAGraph.replay), on the stream it launches on, harvested into the process's
 * activity log as one record per replay (L2P_RECORD_REPLAY).
 *
 * Why: CUPTI's record per kernel node costs a 250-node graph's replay +110.9 us of its 212 us,
 * CUPTI's graph-level records +22.2 us, events around the replay +5.7 us (H200, cbba7ed,
 * tools/investigations/graph-records). The live search compares a graph's time per replay
 * (its launch key); events give exactly that, and no CUPTI record is needed for it.
 *
 * What it never does: record an event on a stream that is capturing (the event would become a
 * node of the program's graph), or fail the program's replay. A replay that cannot be timed
 * (capturing, the pool full, an event call failed) is counted, not raised. The events are made
 * once and reused for the process (destroying them could race a capture elsewhere: the
 * capture rules in DESIGN.md) until a device reset forgets them (l2p_replays_pool_fate); at
 * most L2P_REPLAYS_SLOTS pairs are pending at once.
 *
 * Stamps: a record starts at CUPTI's clock (l2p_activity_now) read on the host just before the
 * first event is recorded, so the GPU ran the replay after it, and ends `elapsed` later; the
 * watcher ends a block only after a device synchronization, so the replay's record belongs to
 * the block its host call was made in. */
#ifndef L2P_REPLAYS_H
#define L2P_REPLAYS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pairs pending (begun, not yet harvested) at most: a block of a few hundred replays between
 * harvests, and a probe of a few thousand, fit with room to spare. */
#define L2P_REPLAYS_SLOTS 16384
/* The prefix of a label's twin: the name of a replay whose pair's first event the GPU had
 * reached before the pair was wholly enqueued (it may time the host's launch too:
 * l2p_replays_end). */
#define L2P_REPLAYS_HOST "host:"
/* Slot ids name the pool's generation too (l2p_replays_slot_id): ids run below
 * L2P_REPLAYS_GENERATIONS * L2P_REPLAYS_SLOTS. */
#define L2P_REPLAYS_GENERATIONS 65536
/* Distinct labels (graph signatures) kept for the process. */
#define L2P_REPLAYS_LABELS 1024

typedef struct {
    uint64_t timed;    /* replays harvested into the log, queued behind earlier GPU work */
    uint64_t host;     /* harvested under the label's L2P_REPLAYS_HOST twin: the GPU had reached
                        * the first event early, so the pair may hold the host's launch */
    uint64_t skipped;  /* not timed: the stream was capturing, the pool was full, or the
                        * replay ran in another device's context than the pool's */
    uint64_t failed;   /* an event call failed (the replay went on untimed), or the pair was
                        * pending when its device was reset */
    uint64_t pending;  /* begun or ended, not yet harvested */
} l2p_replays_counts;

/* A device reset (cudaDeviceReset by the program or any library) destroys the pool's events
 * with the primary context. What a replay (or an end, or a harvest) does with the pool, given
 * whether any events were made, whether they were made in the device's primary context, that
 * context's id then (`id_made`, 0 unknown) and now (`id_now`: asked of the same handle, which
 * outlives a reset; 0 once destroyed), and whether the replay runs in the pool's context:
 * forget it (the primary context's id changed: its pending pairs are counted failed and the
 * events dropped without a CUDA call, then new ones made); leave the replay untimed (counted
 * skipped: another context, a second device's or a green one, which the events do not belong
 * to); or use it. A pool made in a non-primary context is never forgotten (a device reset
 * leaves such contexts alone, and its id is not asked). Pure: C-tested without a GPU. */
typedef enum { L2P_REPLAYS_USE, L2P_REPLAYS_FORGET, L2P_REPLAYS_ELSEWHERE } l2p_replays_fate;
l2p_replays_fate l2p_replays_pool_fate(size_t made, int primary, unsigned long long id_made,
                                       unsigned long long id_now, int same_ctx);
/* The id a pair's slot is handed out under: its index and the pool's generation (bumped each
 * time a pool is forgotten), so that a pair begun before a reset is never ended on a slot of
 * the pool made after. Pure. */
int l2p_replays_slot_id(unsigned generation, int index);

/* The id of `label` (interned for the process; the same text gives the same id), or -1 when
 * the table is full or memory ran out. */
int l2p_replays_label(const char *label);
/* Before a replay on `stream`: record its first event. *slot: the pair to end, or -1 when the
 * replay is not timed (counted: skipped or failed; the pool forgotten first where the device
 * was reset: l2p_replays_pool_fate). Returns L2P_ERR_VALUE for a bad label
 * only; CUDA's refusals are counted, never returned (the program's replay must go on). */
l2p_status l2p_replays_begin(cudaStream_t stream, int label, int *slot);
/* After the replay: its second event on the same stream, then whether the GPU has reached the
 * first yet (asked with the thread's capture mode relaxed): if not, the pair times the GPU's
 * run alone and is logged under its label; if so, under the label's L2P_REPLAYS_HOST twin.
 * A refused record or query leaves the replay untimed (counted failed). A slot of -1 is
 * ignored, and so is one begun before its pool was forgotten. */
void l2p_replays_end(int slot, cudaStream_t stream);
/* Every ended pair whose second event completed goes into the activity log (one replay record
 * each), named by its label where the replay was queued behind earlier work when launched,
 * else by the label's L2P_REPLAYS_HOST twin; pairs still running stay. *added: how many went
 * in this call. A pair of a search since abandoned lands before the new search's first block,
 * and no block sums it. A pool whose device was reset is forgotten first. */
void l2p_replays_harvest(size_t *added);
void l2p_replays_counts_get(l2p_replays_counts *out);

#ifdef __cplusplus
}
#endif
#endif
