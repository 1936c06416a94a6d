/* Activity records: each kernel's GPU duration, read from CUDA's profiling activity API
 * (CUPTI activity, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), for watching a program that
 * l2persist does not call into.
 *
 * Why activity records and not wall time: a host-bound serving loop's wall time per iteration
 * varies +-8-12 % over 32 blocks (H100), while the sum of its kernels' GPU durations resolved
 * +-0.2 % per plan arm in 4 blocks of 8 iterations (0.15 s of traffic). The durations are the
 * driver's own start/end stamps, taken on the GPU; nothing is added to the program's streams.
 *
 * How: CUPTI hands us buffers to fill (buffer_requested) and gives them back full
 * (buffer_completed, on a CUPTI thread); the completion callback copies each kernel record's
 * start, end, stream and name into the log under a lock and calls nothing else (no CUDA, no
 * Python). The log is process-wide because CUPTI's buffer callbacks carry no user pointer: one
 * activity log per process, as CUPTI allows one set of buffer callbacks.
 *
 * Blocks: the watcher cuts the timeline into blocks at switch points: it waits for the device
 * (so nothing queued before the switch runs after it), reads l2p_activity_now() and installs
 * the next plan arm. A kernel belongs to the block its start stamp falls in
 * (l2p_activity_blocks), so a block's GPU time is exactly the work launched under its arm.
 */
#ifndef L2P_ACTIVITY_H
#define L2P_ACTIVITY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "l2p_cupti.h"
#include "l2p_error.h"
#include "l2p_graphscan.h" /* L2P_KERNEL_NAME_MAX: one cut for every kernel name */

#ifdef __cplusplus
extern "C" {
#endif

/* Distinct kernel names kept (open addressing on CUPTI's shared name pointer, 3/4 used at
 * most); kernels past that are counted under one "(other kernels)" name. A name is kept as a
 * graph's scan and the launch log keep it, its first L2P_KERNEL_NAME_MAX - 1 characters, so
 * that the records' names and the scans' compare (PyTorch's templated kernels run to 400 and
 * more: at full length a logged eager kernel's GPU time was never found by its name). */
#define L2P_ACTIVITY_NAMES 8192
#define L2P_ACTIVITY_OTHER 0 /* name id 0: "(other kernels)"; key id 0: "(other launches)" */

/* Launch keys: a kernel with one launch shape (its name id, grid and block), the unit in which
 * the live search compares plan arms. Why per launch shape: a block's GPU time divided by the
 * replays of one graph counts how many other requests landed in the block (a server whose
 * requests draw a batch size at random read 0.43 to 5.4 ms "per unit" under one arm, H100,
 * fb5dac1); a key's time per launch does not depend on how many launches of other keys came.
 * Batch sizes give kernels different grids, so a server's decode graphs keep apart. (A graph
 * node's own id is not used: records of a graph instantiated again may name other node ids,
 * and the watcher instantiates graphs again when it changes their windows.) */
#define L2P_ACTIVITY_KEYS 16384

typedef struct {
    uint32_t name;           /* name id */
    uint32_t shape[6];       /* grid x, y, z, block x, y, z */
} l2p_launch_key;

/* Windows seen on kernels (CUPTI's launch attributes, l2p_activity_attributes): the distinct
 * (base, bytes) pairs are kept in a small table, a record keeps its pair's id (1 + its index;
 * 0: no window, or launch attributes not collected for it). Pairs past the table share the last
 * id, L2P_ACTIVITY_WINDOWS, "another window". The watcher installs at most a few windows per
 * arm and some tens of arms, so 63 distinct pairs outlast a search. */
#define L2P_ACTIVITY_WINDOWS 64

typedef struct {
    uint64_t base, bytes;    /* the access policy window's base_ptr and num_bytes */
} l2p_window_seen;

/* Where a record came from. Why apart: a record per graph node costs a 250-node graph's replay
 * +110.9 us against +5.7 us for CUDA events around the replay (H200, cbba7ed,
 * tools/investigations/graph-records), so the watcher may time the graphs it hooks by events
 * (l2p_replays.h) and must then not count their nodes' records twice. */
typedef enum {
    L2P_RECORD_EAGER = 0,  /* a kernel launched on its own (CUPTI) */
    L2P_RECORD_NODE = 1,   /* a kernel node of a graph launch (CUPTI's graphId is set) */
    L2P_RECORD_REPLAY = 2, /* a whole graph replay timed by events (l2p_replays.h) */
} l2p_record_origin;

/* What l2p_activity_blocks sums for graphs: their nodes' records (the replays' events left
 * out), or the replays' events (the nodes' records left out, counted apart). */
typedef enum { L2P_TIMING_NODES = 0, L2P_TIMING_EVENTS = 1 } l2p_timing_source;

typedef struct {
    uint64_t start, end;     /* the GPU's stamps, ns (the l2p_activity_now clock); a replay's
                              * start is the host's stamp just before its first event */
    uint32_t name;           /* index into the log's names */
    uint32_t stream;         /* CUPTI's stream id (0 for a replay) */
    uint32_t key;            /* index into the log's launch keys */
    uint32_t window;         /* 0: none seen; else 1 + index into the log's windows */
    uint32_t origin;         /* l2p_record_origin */
} l2p_kernel_record;

typedef struct {
    l2p_kernel_record *recs; /* in the order CUPTI delivered them (not sorted) */
    size_t n, cap;
    const void **keys;       /* name table: CUPTI's name pointer per slot (NULL: empty) */
    uint32_t *ids;           /* the name id of each slot */
    char **names;            /* name id -> the kernel's (mangled) name, cut as a scan cuts it */
    size_t n_names;
    size_t n_keys;           /* slots used: several keys may share a name id */
    l2p_launch_key *lkeys;   /* launch key id -> its name and shape */
    uint32_t *lslots;        /* open addressing over launch keys: key id + 1 (0: empty) */
    size_t n_lkeys;          /* launch keys kept (id 0: "other", past the table's 3/4) */
    l2p_window_seen windows[L2P_ACTIVITY_WINDOWS - 1]; /* id k + 1 -> windows[k] */
    size_t n_windows;
    size_t dropped;          /* records CUPTI dropped, or that did not fit in host memory */
    uint32_t device;         /* only this device's kernels are kept */
    int active;              /* collecting: the kinds are enabled */
    pthread_mutex_t lock;    /* the completion callback runs on CUPTI's thread */
} l2p_activity;

/* ---- the process's log (CUPTI) ---- */

/* Start collecting `device`'s kernel records into the process's log (which is emptied).
 * L2P_ERR_NOT_SUPPORTED where CUPTI is missing or already collecting for another tool. */
l2p_status l2p_activity_begin(int device);
/* Pause (0) or resume (1) the kernel records while collecting; begin starts recording. The
 * watcher pauses through the warm-up, whose records nothing reads: on the H200 a replay of an
 * 8-kernel graph cost +1.1 us paused (CUPTI attached) against +3.7-10.6 us recording, and
 * switching costs 0.02-0.03 ms (tools/investigations/activity-modes). L2P_ERR_STATE when not collecting.
 *
 * Why kernel records and not CUPTI's graph records (GRAPH_TRACE: one record per graph launch,
 * +1.3 us per replay of that graph): turning GRAPH_TRACE on while an executable graph made
 * without it exists crashed the process inside the graph's next launch (H200, driver 580,
 * tools/investigations/activity-modes at c844b7f), and a program under advise makes its graphs before the
 * watcher knows what it will record. */
l2p_status l2p_activity_record(int on);
/* Graph-level records on (1) or off (0) while collecting: one record per graph launch, from its
 * first node's start to its last node's end, logged as a kernel named "graph:<CUPTI's graph
 * id>" (launch shape zero); graphs launched while these are on give no record per node
 * (CUPTI's answer to the per-node cost: an 8-kernel graph's replay +1.3 us against +3.7-10.6
 * us per-node, H200). Only the watcher's experimental --graph-records turns them on (before
 * the program's first capture): turning them on while an executable graph made without them
 * exists crashed the next launch of that graph (above, and again at cbba7ed). On a 250-node
 * graph replayed at 212 us (H200, cbba7ed, tools/investigations/graph-records): a record per
 * node +110.9 us a replay, these +22.2 us, CUDA events around the replay +5.7 us; turned on
 * before the graph existed, or before the process's first CUDA work, they ran. Once on they
 * stay on until the process ends, l2p_activity_end included
 * (their records are dropped once not collecting): turning them off beside graphs made under
 * them was not measured. L2P_ERR_STATE when not collecting. */
l2p_status l2p_activity_graphs(int on);
/* Collect each kernel's launch attributes (1) or not (0) while collecting
 * (cuptiActivityEnableLaunchAttributes): a record then carries the access policy window its
 * kernel ran under, the way to see that a plan arm's windows are on the kernels it meant
 * (issue 50 item 2). L2P_ERR_NOT_SUPPORTED where the process's CUPTI predates the call (its
 * records then lack the field); L2P_ERR_STATE when not collecting. Off at begin and at end. */
l2p_status l2p_activity_attributes(int on);
/* Deliver every record CUPTI holds (flush), so that records of work that ran are in the log. */
l2p_status l2p_activity_flush(void);
/* Stop collecting (flush, disable); idempotent. The log keeps its records. */
void l2p_activity_end(void);
/* CUPTI's clock, the one the records' stamps use (ns); once detached (below) the host's
 * CLOCK_MONOTONIC, with no CUPTI call. */
l2p_status l2p_activity_now(uint64_t *ns);
/* Go on collecting without CUPTI (issue 50: a search whose graphs are timed by events needs
 * CUPTI for its probe only, and attached it costs every launch, recording or not: an 8-kernel
 * graph's replay 9.8 us plain, 9.8 us once let go, H200, tools/investigations/cupti-states):
 * the kernel records and attributes off (flushed first), every record dropped (their stamps
 * are CUPTI's clock), and from here the log's clock is the host's (l2p_activity_now), its only
 * records the replays' event pairs (l2p_activity_add_replay; one begun before this is dropped),
 * record and flush no-ops, attributes and graph records L2P_ERR_STATE. Names and launch keys
 * stay (ids are kept). l2p_activity_end ends it, with no CUPTI call. Nothing here holds CUPTI:
 * l2p_activity_release_cupti may let it go. L2P_ERR_STATE when not collecting, or where
 * CUPTI's graph records are on (they stay on to the end). */
l2p_status l2p_activity_detach(void);
/* 1 while collecting detached from CUPTI (l2p_activity_detach), else 0. */
int l2p_activity_detached(void);
/* Let CUPTI go from the process (l2p_cupti_release) where nothing of ours needs it: not while
 * the records are collecting or CUPTI's graph records are on, nor while a client of its
 * subscriber (the launch log, capture tracking) is attached, except the handover's client
 * (capture tracking handed over in the same step: l2p_capture_handover; may be NULL); *why
 * says which. The caller makes no CUPTI call of ours after it unless it means CUPTI to attach
 * again (any begin, flush or timestamp does). */
l2p_status l2p_activity_release_cupti(l2p_cupti_hold *state, const char **why,
                                      const l2p_cupti_handover *handover);
/* The process's log, for reading its records under its lock (l2p_activity_lock). */
l2p_activity *l2p_activity_log(void);
void l2p_activity_lock(l2p_activity *a);
void l2p_activity_unlock(l2p_activity *a);

/* ---- pure parts (C-tested without a GPU) ---- */

l2p_status l2p_activity_init(l2p_activity *a, uint32_t device);
/* Drop every record and name (the names' table stays allocated). */
void l2p_activity_clear(l2p_activity *a);
void l2p_activity_free(l2p_activity *a);
/* Add one kernel record; key is CUPTI's name pointer (shared by every record of one kernel),
 * name its text, shape its grid and block (x, y, z each; NULL: unknown, all zero). A record of
 * another device is ignored; one that cannot be stored counts in dropped. Takes the lock. */
void l2p_activity_add(l2p_activity *a, uint32_t device, uint64_t start, uint64_t end,
                      uint32_t stream, const void *key, const char *name,
                      const uint32_t shape[6], const l2p_window_seen *window);
/* The same with the record's origin (l2p_activity_add's records are L2P_RECORD_EAGER). */
void l2p_activity_add_from(l2p_activity *a, l2p_record_origin origin, uint32_t device,
                           uint64_t start, uint64_t end, uint32_t stream, const void *key,
                           const char *name, const uint32_t shape[6],
                           const l2p_window_seen *window);
/* A graph replay timed by events into the process's log (while collecting; ignored
 * otherwise): named `label` (kept alive by the caller for the process: its pointer is the name
 * key), from `start` (the host's stamp before the replay's first event) for `ns`. */
void l2p_activity_add_replay(const char *label, uint64_t start, uint64_t ns);

/* Per block (cut as l2p_activity_blocks cuts), the records counted per window id: counts is
 * (n_bounds - 1) x (L2P_ACTIVITY_WINDOWS + 1), row = block, column = window id (0: none).
 * Records that span their block's end are left out, as l2p_activity_blocks leaves them. The
 * caller holds the lock; the ids name a->windows. */
l2p_status l2p_activity_block_windows(const l2p_activity *a, const uint64_t *bounds,
                                      size_t n_bounds, uint64_t *counts);

/* Sum the records into blocks cut at bounds[0] < bounds[1] < ... < bounds[n_bounds-1]: block
 * b holds the kernels with bounds[b] <= start < bounds[b+1] (n_bounds - 1 blocks; kernels
 * before the first or after the last bound belong to none). gpu_ns[b]: the block's summed
 * durations; by_name (when not NULL): n_names x (n_bounds - 1), row = name id, the same sums
 * per kernel name. Bounds not increasing: L2P_ERR_VALUE. The caller holds the lock.
 * key_ns and key_n (when not NULL): n_keys x (n_bounds - 1), row = launch key id, the same
 * sums per launch key and the launches counted.
 * timing: which records time graphs (l2p_timing_source); graph_nodes (when not NULL, one per
 * block): the graph nodes' records the timing left out (L2P_TIMING_EVENTS), so the caller can
 * check that its events covered every graph launched in the block.
 * spanning (when not NULL): a record that ends past its block's end bound is not summed but
 * counted here. The watcher ends every block after a device synchronization, so such a record
 * cannot be true: CUPTI writes them for a graph launched while its kernel records were paused
 * and launched again once resumed (its start is the last launch recorded before the pause, its
 * end the new launch's: a duration as long as the pause, H200, CUPTI 13.0). A replay's record
 * is never spanning: its start is the host's stamp, before the GPU ran it.
 * Records of a replay are left out of the window counts (l2p_activity_block_windows). */
l2p_status l2p_activity_blocks(const l2p_activity *a, const uint64_t *bounds, size_t n_bounds,
                               l2p_timing_source timing, double *gpu_ns, double *by_name,
                               size_t n_names, double *key_ns, double *key_n, size_t n_keys,
                               double *graph_nodes, size_t *spanning);

/* Drop the records that start before `before` (blocks already summed, rests, settles), keeping
 * the rest in order; returns how many were dropped. Why: every l2p_activity_blocks call scans
 * the whole log, so a watcher that never trims pays at each switch for all the records kept
 * so far, and the log's memory grows with the program's run. (Not a measured cost of the
 * switches at the study's lengths: the H200's server switches at d34f50b did not grow over a
 * 27 s search.) The names stay (ids are kept). The caller holds the lock. */
size_t l2p_activity_trim(l2p_activity *a, uint64_t before);

#ifdef __cplusplus
}
#endif
#endif
