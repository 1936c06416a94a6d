#include "l2p_timing.h"

#include "l2p_release.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l2p_device.h"
#include "l2p_memory.h"
#include "l2p_stream.h"

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
    /* through the capture-safe release: a timer may die while another stream captures */
    if (t->start && l2p_release(t->device, L2P_RELEASE_EVENT, t->start) != L2P_OK)
        l2p_clear_error();
    if (t->stop && l2p_release(t->device, L2P_RELEASE_EVENT, t->stop) != L2P_OK)
        l2p_clear_error();
    t->start = t->stop = NULL;
}

/* ---- flush buffers ---- */

l2p_status l2p_flush_buffer(l2p_flush_cache *c, int device, void **ptr, size_t *nbytes)
{
    unsigned long long now = 0;
    if (device < 0 || device >= L2P_MAX_DEVICES)
        return l2p_fail(L2P_ERR_VALUE, "device: %d is outside [0, %d)", device, L2P_MAX_DEVICES);
    L2P_TRY(l2p_device_context_id(device, &now));
    if (c->ptr[device] && l2p_life_stale(&(l2p_life){device, c->ctx[device]}, now))
        c->ptr[device] = NULL; /* the device was reset: that memory is gone, not ours to free */
    if (!c->ptr[device]) {
        l2p_device_props p;
        L2P_TRY(l2p_device_get_properties(device, &p));
        L2P_TRY(l2p_memory_alloc(device, 2 * p.l2_cache_size, &c->ptr[device]));
        c->nbytes[device] = 2 * p.l2_cache_size;
        c->ctx[device] = now;
    }
    *ptr = c->ptr[device];
    *nbytes = c->nbytes[device];
    return L2P_OK;
}

void l2p_flush_release(l2p_flush_cache *c)
{
    for (int i = 0; i < L2P_MAX_DEVICES; i++)
        if (c->ptr[i]) {
            unsigned long long now = 0;
            /* not after a reset: the address may be someone else's by now */
            if (l2p_device_context_id(i, &now) == L2P_OK &&
                !l2p_life_stale(&(l2p_life){i, c->ctx[i]}, now))
                (void)l2p_memory_free(i, c->ptr[i]);
            c->ptr[i] = NULL;
        }
}

/* ---- the sample loop ---- */

l2p_status l2p_timing_check(const l2p_timing_run *run)
{
    if (!run->enqueue) return l2p_fail(L2P_ERR_VALUE, "enqueue: a callback is needed");
    if (run->warmup < 0 || run->warmup > L2P_TIME_MAX_COUNT)
        return l2p_fail(L2P_ERR_VALUE, "warmup: %ld is outside [0, %d]", run->warmup,
                        L2P_TIME_MAX_COUNT);
    if (run->repeat < 1 || run->repeat > L2P_TIME_MAX_COUNT)
        return l2p_fail(L2P_ERR_VALUE, "repeat: %ld is outside [1, %d]", run->repeat,
                        L2P_TIME_MAX_COUNT);
    if (!(run->hold_us >= 0.0 && run->hold_us <= L2P_TIME_MAX_HOLD_US))
        return l2p_fail(L2P_ERR_VALUE, "hold_us: %g is outside [0, 1e6]", run->hold_us);
    if (run->hold_us > 0.0 && !run->spin)
        return l2p_fail(L2P_ERR_VALUE, "hold_us: %g needs a spin kernel (spin)", run->hold_us);
    if (run->graph && !run->stream)
        return l2p_fail(L2P_ERR_VALUE, "stream: graph=True captures fn on a stream; pass "
                        "stream= (the legacy default stream cannot be captured)");
    return L2P_OK;
}

typedef struct {
    const l2p_timing_run *run;
    l2p_timer timer;
    void *flush;          /* NULL: no flush */
    size_t flush_bytes;
    l2p_graph graph;      /* graph.graph NULL: enqueue each time */
} sampler;

/* Capture the work once into a graph. */
static l2p_status capture(sampler *s)
{
    cudaGraph_t g = NULL;
    L2P_TRY(l2p_capture_begin(s->run->stream));
    l2p_status work = s->run->enqueue(s->run->ctx, s->run->stream);
    l2p_status end = l2p_capture_end(s->run->stream, &g);
    if (work != L2P_OK) {
        if (g && l2p_release(s->run->device, L2P_RELEASE_GRAPH, g) != L2P_OK) l2p_clear_error();
        return work; /* the callback's error, not the capture's */
    }
    L2P_TRY(end);
    l2p_graph_adopt(&s->graph, g);
    return L2P_OK;
}

static l2p_status wait_elapsed(sampler *s, double *ms)
{
    void *token = s->run->wait_begin ? s->run->wait_begin() : NULL;
    l2p_status rc = l2p_timer_elapsed_ms(&s->timer, ms);
    if (s->run->wait_end) s->run->wait_end(token);
    return rc;
}

/* One sample: flush, hold, then the work between the events. */
static l2p_status sample(sampler *s, double *ms)
{
    const l2p_timing_run *r = s->run;
    if (s->flush) L2P_TRY(l2p_memory_set(r->device, s->flush, 0x5a, s->flush_bytes, r->stream));
    if (r->hold_us > 0.0) {
        cudaError_t e = r->spin((unsigned long long)(r->hold_us * 1e3), r->stream);
        if (e != cudaSuccess) return l2p_fail_cuda(e, "spin (the hold before a sample)");
    }
    L2P_TRY(l2p_timer_start(&s->timer, r->stream));
    L2P_TRY(s->graph.graph ? l2p_graph_launch(&s->graph, r->stream)
                           : r->enqueue(r->ctx, r->stream));
    L2P_TRY(l2p_timer_stop(&s->timer, r->stream));
    return wait_elapsed(s, ms);
}

static l2p_status collect(sampler *s, double *samples)
{
    for (long i = 0; i < s->run->warmup + s->run->repeat; i++) {
        double ms;
        L2P_TRY(sample(s, &ms));
        if (i >= s->run->warmup) samples[i - s->run->warmup] = ms;
    }
    return L2P_OK;
}

l2p_status l2p_time_samples(const l2p_timing_run *run, double *samples)
{
    sampler s;
    int prev;
    l2p_status rc;
    L2P_TRY(l2p_timing_check(run));
    memset(&s, 0, sizeof s);
    s.run = run;
    s.graph.life.device = run->device;
    if (run->flush) L2P_TRY(l2p_flush_buffer(run->flush, run->device, &s.flush, &s.flush_bytes));
    L2P_TRY(l2p_timer_create(run->device, &s.timer));
    rc = l2p_device_enter(run->device, &prev);
    if (rc == L2P_OK) {
        if (!run->graph || (rc = capture(&s)) == L2P_OK) rc = collect(&s, samples);
        l2p_device_leave(prev);
    }
    l2p_graph_destroy(&s.graph);
    l2p_timer_destroy(&s.timer);
    return rc;
}
