/* Timing: CUDA-event timers and the statistics of a set of samples. */
#ifndef L2P_TIMING_H
#define L2P_TIMING_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    size_t n;
    double median, min, max, mean, stdev; /* stdev: sample standard deviation (n - 1) */
    double q1, q3, iqr;                   /* quartiles by linear interpolation, as NumPy */
} l2p_stats;

/* Pure C; samples need not be sorted. n == 0 is an error naming `samples`. */
l2p_status l2p_stats_compute(const double *samples, size_t n, l2p_stats *out);

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

#ifdef __cplusplus
}
#endif
#endif
