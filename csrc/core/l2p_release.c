#include "l2p_release.h"

#include <pthread.h>
#include <stdlib.h>

#include "l2p_device.h"

/* The deferred releases. Locked: buffers are freed with the GIL released, so two threads may
 * defer at once. */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static l2p_deferred *queue;
static size_t queue_len, queue_cap;

int l2p_release_capture_error(cudaError_t code)
{
    switch (code) {
    case cudaErrorStreamCaptureUnsupported: /* an unsafe call while a capture forbids it */
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureImplicit:    /* the legacy stream touched during a capture */
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorCapturedEvent:
        return 1;
    default:
        return 0;
    }
}

const char *l2p_release_call(l2p_release_kind kind)
{
    static const char *const names[L2P_RELEASE_KINDS] = {
        "cudaFree", "cudaGraphDestroy", "cudaGraphExecDestroy", "cudaDestroyTextureObject",
        "cudaEventDestroy", "cudaStreamDestroy"};
    return (unsigned)kind < L2P_RELEASE_KINDS ? names[kind] : "?";
}

l2p_status l2p_release_defer(const l2p_deferred *d)
{
    pthread_mutex_lock(&queue_lock);
    if (queue_len == queue_cap) {
        size_t cap = queue_cap ? 2 * queue_cap : 16;
        l2p_deferred *q = (l2p_deferred *)realloc(queue, cap * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&queue_lock);
            return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory deferring a %s",
                            l2p_release_call(d->kind));
        }
        queue = q;
        queue_cap = cap;
    }
    queue[queue_len++] = *d;
    pthread_mutex_unlock(&queue_lock);
    return L2P_OK;
}

int l2p_release_take(l2p_deferred *out)
{
    int got = 0;
    pthread_mutex_lock(&queue_lock);
    if (queue_len) { /* oldest first: releases happen in the order they were asked for */
        *out = queue[0];
        for (size_t i = 1; i < queue_len; i++) queue[i - 1] = queue[i];
        queue_len--;
        got = 1;
    }
    pthread_mutex_unlock(&queue_lock);
    return got;
}

size_t l2p_release_pending(void)
{
    pthread_mutex_lock(&queue_lock);
    size_t n = queue_len;
    pthread_mutex_unlock(&queue_lock);
    return n;
}

static cudaError_t release_call(l2p_release_kind kind, void *h)
{
    switch (kind) {
    case L2P_RELEASE_MEMORY: return cudaFree(h);
    case L2P_RELEASE_GRAPH: return cudaGraphDestroy((cudaGraph_t)h);
    case L2P_RELEASE_GRAPH_EXEC: return cudaGraphExecDestroy((cudaGraphExec_t)h);
    case L2P_RELEASE_TEXTURE: return cudaDestroyTextureObject((cudaTextureObject_t)(size_t)h);
    case L2P_RELEASE_EVENT: return cudaEventDestroy((cudaEvent_t)h);
    case L2P_RELEASE_STREAM: return cudaStreamDestroy((cudaStream_t)h);
    default: return cudaErrorInvalidValue;
    }
}

int l2p_capture_relax(void)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return (int)mode;
}

void l2p_capture_restore(int previous)
{
    enum cudaStreamCaptureMode mode = (enum cudaStreamCaptureMode)previous;
    if (previous >= 0) (void)cudaThreadExchangeStreamCaptureMode(&mode);
}

/* One attempt with the calling thread relaxed, the device current. */
static cudaError_t release_relaxed(l2p_release_kind kind, void *h)
{
    int mode = l2p_capture_relax();
    cudaError_t rc = release_call(kind, h);
    if (rc != cudaSuccess) (void)cudaGetLastError(); /* not sticky: keep it from the next check */
    l2p_capture_restore(mode);
    return rc;
}

l2p_status l2p_release(int device, l2p_release_kind kind, void *handle)
{
    int prev;
    if (!handle) return L2P_OK;
    if ((unsigned)kind >= L2P_RELEASE_KINDS)
        return l2p_fail(L2P_ERR_VALUE, "release: kind %d is not one of 0..%d", (int)kind,
                        L2P_RELEASE_KINDS - 1);
    int mode = l2p_capture_relax(); /* entering the device and the context query too */
    l2p_status st = l2p_device_enter(device, &prev);
    if (st != L2P_OK) {
        l2p_capture_restore(mode);
        return st;
    }
    cudaError_t rc = release_relaxed(kind, handle);
    if (rc != cudaSuccess && l2p_release_capture_error(rc)) {
        l2p_deferred d = {kind, device, handle, l2p_context_id_current()};
        st = l2p_release_defer(&d);
    } else if (rc != cudaSuccess) {
        st = l2p_fail_cuda(rc, l2p_release_call(kind));
    }
    l2p_device_leave(prev);
    l2p_capture_restore(mode);
    return st;
}

void l2p_release_drain(void)
{
    size_t n = l2p_release_pending(); /* a snapshot: what is refused again waits for later */
    l2p_deferred d;
    if (!n) return; /* the common case: no CUDA call at all */
    int mode = l2p_capture_relax();
    for (size_t i = 0; i < n && l2p_release_take(&d); i++) {
        int prev;
        /* gone with a reset context: the handle is not ours to release any more */
        if (d.ctx && l2p_device_context_gone(d.device, d.ctx)) continue;
        if (l2p_device_enter(d.device, &prev) != L2P_OK) {
            l2p_clear_error();
            continue;
        }
        cudaError_t rc = release_relaxed(d.kind, d.handle);
        l2p_device_leave(prev);
        if (rc != cudaSuccess && l2p_release_capture_error(rc) && l2p_release_defer(&d) != L2P_OK)
            l2p_clear_error();
    }
    l2p_capture_restore(mode);
}
