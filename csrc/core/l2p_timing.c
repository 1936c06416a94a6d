#include "l2p_timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l2p_device.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* NumPy's default ("linear") percentile of sorted data. */
static double percentile(const double *sorted, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)floor(pos);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - (double)lo);
}

l2p_status l2p_stats_compute(const double *samples, size_t n, l2p_stats *out)
{
    double *s, sum = 0.0, sq = 0.0;
    if (n == 0) return l2p_fail(L2P_ERR_VALUE, "samples: at least 1 sample is needed, got 0");
    s = (double *)malloc(n * sizeof *s);
    if (!s) return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory sorting %zu samples", n);
    memcpy(s, samples, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    for (size_t i = 0; i < n; i++) sum += s[i];
    out->n = n;
    out->mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) sq += (s[i] - out->mean) * (s[i] - out->mean);
    out->stdev = n > 1 ? sqrt(sq / (double)(n - 1)) : 0.0;
    out->min = s[0];
    out->max = s[n - 1];
    out->median = percentile(s, n, 0.5);
    out->q1 = percentile(s, n, 0.25);
    out->q3 = percentile(s, n, 0.75);
    out->iqr = out->q3 - out->q1;
    free(s);
    return L2P_OK;
}

l2p_status l2p_timer_create(int device, l2p_timer *t)
{
    int prev;
    cudaError_t rc;
    memset(t, 0, sizeof *t);
    t->device = device;
    L2P_TRY(l2p_device_enter(device, &prev));
    rc = cudaEventCreate(&t->start);
    if (rc == cudaSuccess) rc = cudaEventCreate(&t->stop);
    l2p_device_leave(prev);
    if (rc != cudaSuccess) {
        l2p_timer_destroy(t);
        return l2p_fail_cuda(rc, "cudaEventCreate");
    }
    return L2P_OK;
}

l2p_status l2p_timer_start(l2p_timer *t, cudaStream_t stream)
{
    L2P_CUDA_TRY(cudaEventRecord(t->start, stream));
    return L2P_OK;
}

l2p_status l2p_timer_stop(l2p_timer *t, cudaStream_t stream)
{
    L2P_CUDA_TRY(cudaEventRecord(t->stop, stream));
    return L2P_OK;
}

l2p_status l2p_timer_elapsed_ms(l2p_timer *t, double *ms)
{
    float f = 0.0f;
    L2P_CUDA_TRY(cudaEventSynchronize(t->stop));
    L2P_CUDA_TRY(cudaEventElapsedTime(&f, t->start, t->stop));
    *ms = (double)f;
    return L2P_OK;
}

void l2p_timer_destroy(l2p_timer *t)
{
    if (t->start) (void)cudaEventDestroy(t->start);
    if (t->stop) (void)cudaEventDestroy(t->stop);
    t->start = t->stop = NULL;
}
