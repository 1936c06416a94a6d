/* Capture-safe releases: every free and destroy of the core goes through l2p_release.
 *
 * Why: in CUDA's default (global) capture mode, a "potentially unsafe" call such as cudaFree,
 * cudaGraphExecDestroy or cudaGraphDestroy made by any thread while some stream captures
 * fails and invalidates that capture (cudaErrorStreamCaptureInvalidated at its end; measured on
 * the H200). An l2persist object dying at the wrong moment (a name rebound in
 * `with s.capture() as g:` in a loop, a buffer garbage-collected while PyTorch captures) would
 * then destroy the user's capture.
 *
 * Decision: switch the calling thread to cudaStreamCaptureModeRelaxed around the release
 * (cudaThreadExchangeStreamCaptureMode; thread-local, restored at once). A relaxed thread is
 * "not prohibited from potentially unsafe API calls", so the release neither fails nor touches
 * anyone's capture. Deferring everything while any capture runs was rejected: the runtime
 * cannot tell which streams of the process are capturing, so "any capture underway" is not
 * observable. If a release still fails with a capture error (a driver that refuses it even
 * relaxed), it is queued, not retried in a loop, and the queue is drained at the next safe
 * point: the next allocation, the next graph launch, and module teardown.
 */
#ifndef L2P_RELEASE_H
#define L2P_RELEASE_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    L2P_RELEASE_MEMORY = 0, /* cudaFree */
    L2P_RELEASE_GRAPH,      /* cudaGraphDestroy */
    L2P_RELEASE_GRAPH_EXEC, /* cudaGraphExecDestroy */
    L2P_RELEASE_TEXTURE,    /* cudaDestroyTextureObject */
    L2P_RELEASE_EVENT,      /* cudaEventDestroy */
    L2P_RELEASE_STREAM,     /* cudaStreamDestroy */
    L2P_RELEASE_KINDS
} l2p_release_kind;

/* Release `handle` (a pointer, or a handle cast to void *; NULL / 0 is a no-op) on `device`
 * without disturbing any capture. L2P_OK when released or deferred; a failure unrelated to
 * capture is returned as the call's error. */
l2p_status l2p_release(int device, l2p_release_kind kind, void *handle);
/* Retry the deferred releases (those still refused stay queued). Call at safe points. */
void l2p_release_drain(void);
/* Number of releases waiting in the queue. */
size_t l2p_release_pending(void);

/* Relax the calling thread's capture mode for a stretch of releases and the checks around
 * them (a context query, a wait on our own stream); returns the previous mode for
 * l2p_capture_restore (-1: nothing to restore). Nests. */
int l2p_capture_relax(void);
void l2p_capture_restore(int previous);

/* Whether a release that failed with `code` was refused because of a stream capture
 * (and so is deferred rather than reported). Pure; tested without a GPU. */
int l2p_release_capture_error(cudaError_t code);
/* The CUDA call that releases `kind` ("cudaFree", ...); "?" for an unknown kind. */
const char *l2p_release_call(l2p_release_kind kind);

/* The queue itself, without CUDA (for the C tests and the drain): push a deferred release;
 * pop the oldest into *out (returns 0 when empty). */
typedef struct {
    l2p_release_kind kind;
    int device;
    void *handle;
    unsigned long long ctx; /* the context it belongs to: a reset since then means skip it */
} l2p_deferred;
l2p_status l2p_release_defer(const l2p_deferred *d);
int l2p_release_take(l2p_deferred *out);

#ifdef __cplusplus
}
#endif
#endif
