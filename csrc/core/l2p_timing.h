/* Timing: CUDA-event timers and the benchmarking procedure (flush, hold, capture, the sample
 * loop), callable from C: the caller gives a callback that enqueues its work. */
#ifndef L2P_TIMING_H
#define L2P_TIMING_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "l2p_device.h"
#include "l2p_error.h"
#include "l2p_stats.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    cudaEvent_t start, stop;
    int device;
} l2p_timer;

l2p_status l2p_timer_create(int device, l2p_timer *t);
l2p_status l2p_timer_start(l2p_timer *t, cudaStream_t stream);
l2p_status l2p_timer_stop(l2p_timer *t, cudaStream_t stream);
/* Waits for the stop event, then gives start -> stop in milliseconds. */
l2p_status l2p_timer_elapsed_ms(l2p_timer *t, double *ms);
void l2p_timer_destroy(l2p_timer *t);

/* The defaults of a timing run, the one source of the extension's time_calls signature and
 * of l2persist.benchmark's. The hold: a 50 us spin queued before each sample keeps the GPU
 * busy while the host enqueues the start event and the work, so the events bracket what the
 * GPU spent, not the host's launch latency (50 us covers a Python call of a few launches). */
#define L2P_TIME_WARMUP 3
#define L2P_TIME_REPEAT 20
#define L2P_TIME_HOLD_US 50.0
#define L2P_TIME_MAX_COUNT 1000000 /* warmup and repeat at most */
#define L2P_TIME_MAX_HOLD_US 1e6

/* Per-device flush buffers of 2x the L2: writing one before a sample evicts normal lines
 * (lines held by the persisting set-aside stay). Allocated on first use, dropped (not freed:
 * the memory went with the context) after a device reset. Zero-initialise. */
typedef struct {
    void *ptr[L2P_MAX_DEVICES];
    size_t nbytes[L2P_MAX_DEVICES];
    unsigned long long ctx[L2P_MAX_DEVICES]; /* the context id each was allocated in */
} l2p_flush_cache;

l2p_status l2p_flush_buffer(l2p_flush_cache *c, int device, void **ptr, size_t *nbytes);
/* Free every buffer still in the context it was allocated in; idempotent. */
void l2p_flush_release(l2p_flush_cache *c);

typedef struct {
    int device;             /* where the events go (the stream's device) */
    cudaStream_t stream;    /* NULL: the legacy stream (no graph then) */
    /* Enqueue the work to time on `stream`. On failure return a status with the core's last
     * error set (L2P_ERR_CALLBACK when the callback's own error says why). */
    l2p_status (*enqueue)(void *ctx, cudaStream_t stream);
    void *ctx;
    long warmup, repeat;    /* in [0, L2P_TIME_MAX_COUNT], repeat >= 1 */
    double hold_us;         /* spin before each sample; 0: none */
    /* The spin kernel (the kernel suite's, which the core does not link); needed when
     * hold_us > 0. */
    cudaError_t (*spin)(unsigned long long ns, cudaStream_t stream);
    l2p_flush_cache *flush; /* non-NULL: write a 2x-L2 buffer before each sample */
    int graph;              /* capture enqueue once, replay the graph for every sample */
    /* Around each wait for the device (NULL: none), e.g. to release Python's GIL; the
     * enqueue callback is always called between wait_end and the next wait_begin. */
    void *(*wait_begin)(void);
    void (*wait_end)(void *token);
} l2p_timing_run;

/* Check the run's arguments (each error names its argument and the range). */
l2p_status l2p_timing_check(const l2p_timing_run *run);

/* warmup + repeat samples; the last `repeat` times in ms into samples[0..repeat). Leaves the
 * calling thread's current device as it found it. */
l2p_status l2p_time_samples(const l2p_timing_run *run, double *samples);

#ifdef __cplusplus
}
#endif
#endif
