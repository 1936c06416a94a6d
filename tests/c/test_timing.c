/* C tests of the benchmarking procedure (l2p_timing.h) and the one median (l2p_stats.h): the
 * run's argument checks everywhere, and on a machine with a GPU, C work timed through the
 * callback (plain, flushed, held and captured). */
#include <string.h>

#include "l2p_device.h"
#include "l2p_error.h"
#include "l2p_memory.h"
#include "l2p_stats.h"
#include "l2p_timing.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

static void test_median(void)
{
    double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2}, one[] = {7};
    CHECK(l2p_median_sort(odd, 3) == 3.0 && odd[0] == 1.0 && odd[2] == 5.0);
    CHECK(l2p_median_sort(even, 4) == 2.5);
    CHECK(l2p_median_sort(one, 1) == 7.0);
    double sorted[] = {1, 2, 3, 4, 5};
    CHECK(l2p_percentile_sorted(sorted, 5, 0.0) == 1.0);
    CHECK(l2p_percentile_sorted(sorted, 5, 1.0) == 5.0);
    CHECK_NEAR(l2p_percentile_sorted(sorted, 5, 0.1), 1.4, 1e-12); /* NumPy: 1.4 */
    l2p_stats s;
    double v[] = {10, 2, 4, 8, 6};
    CHECK(l2p_stats_compute(v, 5, &s) == L2P_OK && s.median == 6.0 && s.q1 == 4.0 && s.iqr == 4.0);
    CHECK(v[0] == 10); /* the caller's samples stay unsorted */
}

/* The work timed: a memset of the context's buffer. */
typedef struct {
    void *ptr;
    size_t nbytes;
    int calls;
    int fail_at; /* call number that fails (0: none) */
} work;

static l2p_status enqueue(void *ctx, cudaStream_t stream)
{
    work *w = (work *)ctx;
    if (++w->calls == w->fail_at) return l2p_fail(L2P_ERR_CALLBACK, "work: call %d fails", w->calls);
    L2P_CUDA_TRY(cudaMemsetAsync(w->ptr, 1, w->nbytes, stream));
    return L2P_OK;
}

static cudaError_t no_spin(unsigned long long ns, cudaStream_t stream)
{
    (void)ns;
    (void)stream;
    return cudaSuccess;
}

static void test_check(void)
{
    work w = {0};
    l2p_timing_run r = {.enqueue = enqueue, .ctx = &w, .warmup = L2P_TIME_WARMUP,
                        .repeat = L2P_TIME_REPEAT, .hold_us = 0.0};
    CHECK(l2p_timing_check(&r) == L2P_OK);
    r.repeat = 0;
    CHECK(l2p_timing_check(&r) == L2P_ERR_VALUE && strncmp(l2p_last_error()->message, "repeat: 0", 9) == 0);
    r.repeat = 1;
    r.warmup = -1;
    CHECK(l2p_timing_check(&r) == L2P_ERR_VALUE && strncmp(l2p_last_error()->message, "warmup:", 7) == 0);
    r.warmup = 0;
    r.hold_us = -1.0;
    CHECK(l2p_timing_check(&r) == L2P_ERR_VALUE && strncmp(l2p_last_error()->message, "hold_us:", 8) == 0);
    r.hold_us = 50.0; /* a hold needs the spin kernel */
    CHECK(l2p_timing_check(&r) == L2P_ERR_VALUE);
    r.spin = no_spin;
    CHECK(l2p_timing_check(&r) == L2P_OK);
    r.graph = 1; /* the legacy stream cannot be captured */
    CHECK(l2p_timing_check(&r) == L2P_ERR_VALUE && strncmp(l2p_last_error()->message, "stream:", 7) == 0);
    /* Checked before any device is touched: no work was enqueued. */
    double out[1];
    CHECK(l2p_time_samples(&r, out) == L2P_ERR_VALUE && w.calls == 0);
    CHECK(L2P_TIME_HOLD_US == 50.0);
}

static void test_on_device(void)
{
    int n = 0;
    cudaError_t why;
    l2p_device_count(&n, &why);
    if (n == 0) {
        printf("test_timing: no device (%s), the timed runs skipped\n", cudaGetErrorName(why));
        return;
    }
    work w = {.nbytes = 1 << 20};
    cudaStream_t stream = NULL;
    l2p_flush_cache cache;
    memset(&cache, 0, sizeof cache);
    CHECK(l2p_memory_alloc(0, w.nbytes, &w.ptr) == L2P_OK);
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaStreamCreate(&stream) == cudaSuccess);
    double samples[5] = {-1, -1, -1, -1, -1};
    l2p_timing_run r = {.device = 0, .stream = stream, .enqueue = enqueue, .ctx = &w,
                        .warmup = 2, .repeat = 5, .spin = no_spin};
    CHECK(l2p_time_samples(&r, samples) == L2P_OK && w.calls == 7);
    for (int i = 0; i < 5; i++) CHECK(samples[i] > 0.0 && samples[i] < 1000.0);
    /* Flushed: the 2x-L2 buffer is allocated once and kept. */
    r.flush = &cache;
    CHECK(l2p_time_samples(&r, samples) == L2P_OK && cache.ptr[0] != NULL);
    l2p_device_props p;
    CHECK(l2p_device_get_properties(0, &p) == L2P_OK && cache.nbytes[0] == 2 * p.l2_cache_size);
    /* Captured: the work is enqueued once, then replayed. */
    w.calls = 0;
    r.graph = 1;
    CHECK(l2p_time_samples(&r, samples) == L2P_OK && w.calls == 1);
    /* A failing callback's status comes back, and no samples are claimed. */
    r.graph = 0;
    w.calls = 0;
    w.fail_at = 3;
    CHECK(l2p_time_samples(&r, samples) == L2P_ERR_CALLBACK && w.calls == 3);
    l2p_flush_release(&cache);
    l2p_flush_release(&cache); /* idempotent */
    CHECK(cache.ptr[0] == NULL);
    (void)cudaStreamDestroy(stream);
    CHECK(l2p_memory_free(0, w.ptr) == L2P_OK);
}

int main(void)
{
    test_median();
    test_check();
    test_on_device();
    printf("test_timing: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
