/* See l2p_capture.h. */
#define _GNU_SOURCE
#include "l2p_capture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include <cuda.h>  /* driver types only: cuStreamIsCapturing comes through l2p_driver_symbol */
#include <cupti.h> /* the callback API's data and the capture calls' parameter structs */

#include "l2p_cupti.h"
#include "l2p_device.h"

/* ---- the count and the switch flag, under one mutex ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t switch_done = PTHREAD_COND_INITIALIZER; /* `switching` went to 0 */
static long n_open;        /* captures counted open */
static long n_pending;     /* begins waiting for a switch to end: about to be open */
static int switching;      /* a switch is inside (between enter and leave) */
static pthread_t switcher; /* its thread, while switching */
static l2p_capture_counts counts;
static int release_asked;  /* the count was handed to a release of CUPTI */

/* A begin at its entry: wait out another thread's switch, then count the capture open. The
 * switching thread's own begin does not wait (it would wait for itself); no switch makes one. */
static void begin_entered(void)
{
    pthread_mutex_lock(&lock);
    if (switching && !pthread_equal(switcher, pthread_self())) {
        counts.waited++;
        n_pending++; /* l2p_switch_enter refuses from here on: the wait is one switch at most */
        while (switching) pthread_cond_wait(&switch_done, &lock);
        n_pending--;
    }
    n_open++;
    counts.begun++;
    /* came in while CUPTI was held, and reached here after the release took the count over:
     * the release is withdrawn (no finalize runs while this callback is inside) */
    if (release_asked && l2p_cupti_withdraw()) counts.withdrew++;
    pthread_mutex_unlock(&lock);
}

/* Count one capture closed; one that was never counted open (begun before tracking) leaves
 * the count at 0 rather than below it. */
static void count_closed(unsigned long *why)
{
    pthread_mutex_lock(&lock);
    if (n_open > 0) n_open--;
    else counts.unmatched++;
    (*why)++;
    pthread_mutex_unlock(&lock);
}

long l2p_captures_open(void)
{
    pthread_mutex_lock(&lock);
    long n = n_open;
    pthread_mutex_unlock(&lock);
    return n;
}

void l2p_capture_counts_get(l2p_capture_counts *out)
{
    pthread_mutex_lock(&lock);
    *out = counts;
    pthread_mutex_unlock(&lock);
}

int l2p_switch_enter(void)
{
    pthread_mutex_lock(&lock);
    if (switching && pthread_equal(switcher, pthread_self())) {
        pthread_mutex_unlock(&lock);
        l2p_fail(L2P_ERR_STATE, "switch_enter: this thread is inside a switch already "
                 "(switch_leave first)");
        return -1;
    }
    while (switching) pthread_cond_wait(&switch_done, &lock); /* another switcher's */
    int free_now = n_open == 0 && n_pending == 0;
    if (free_now) {
        switching = 1;
        switcher = pthread_self();
        counts.switches++;
    } else {
        counts.refused++;
    }
    pthread_mutex_unlock(&lock);
    return free_now;
}

l2p_status l2p_switch_leave(void)
{
    pthread_mutex_lock(&lock);
    int mine = switching && pthread_equal(switcher, pthread_self());
    if (mine) {
        switching = 0;
        pthread_cond_broadcast(&switch_done); /* the begins waiting, and other switchers */
    }
    pthread_mutex_unlock(&lock);
    return mine ? L2P_OK : l2p_fail(L2P_ERR_STATE, "switch_leave: this thread is not inside a "
                                    "switch (switch_enter returned True on it first)");
}

/* ---- the pure rules ---- */

l2p_capture_call l2p_capture_call_of(unsigned cbid)
{
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz:
        return L2P_CAPTURE_BEGIN;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz:
        return L2P_CAPTURE_END;
    default:
        return L2P_CAPTURE_OTHER;
    }
}

int l2p_capture_end_closed(int result, int before, int after)
{
    if (before == 0) return 0;               /* nothing was capturing there */
    if (before == 1 && after >= 0) return !after;
    /* unread: success ended it; so did an invalidated capture (its end returns this) */
    return result == CUDA_SUCCESS || result == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
}

/* correlationData holds an END's state at entry as capturing + 1 (0, 1 or 2). */
static int carried_state(uint64_t carry) { return carry <= 2 ? (int)carry - 1 : -1; }

void l2p_capture_handle(const l2p_capture_event *e, uint64_t *carry)
{
    switch (l2p_capture_call_of(e->cbid)) {
    case L2P_CAPTURE_BEGIN:
        if (!e->exit) begin_entered();
        else if (e->result != CUDA_SUCCESS) count_closed(&counts.failed); /* opened nothing */
        break;
    case L2P_CAPTURE_END:
        if (!e->exit) *carry = (uint64_t)(e->capturing + 1);
        else if (l2p_capture_end_closed(e->result, carried_state(*carry), e->capturing))
            count_closed(&counts.ended);
        break;
    default:
        break;
    }
}

/* ---- the CUPTI callback ---- */

typedef CUresult (*stream_is_capturing_fn)(CUstream, CUstreamCaptureStatus *);
static stream_is_capturing_fn stream_is_capturing; /* resolved before the subscription */
static atomic_int watching; /* 0 off, 1 on, 2 handed to a release (the handler still acts) */

_Static_assert(sizeof(cuStreamEndCapture_params) == sizeof(cuStreamEndCapture_ptsz_params) &&
               offsetof(cuStreamEndCapture_params, hStream) ==
               offsetof(cuStreamEndCapture_ptsz_params, hStream), "cuStreamEndCapture_ptsz differs");

/* The capture state of an EndCapture's stream: 1, 0, or -1 unread. A _ptsz form's NULL is the
 * calling thread's per-thread stream (capturable); the legacy stream never captures, and is
 * not asked (asking about it while another stream captures is itself an error). */
static int stream_state(unsigned cbid, const void *params)
{
    CUstream s = ((const cuStreamEndCapture_params *)params)->hStream;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!s && cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz) s = CU_STREAM_PER_THREAD;
    if (!s || s == CU_STREAM_LEGACY) return 0;
    if (!stream_is_capturing || stream_is_capturing(s, &status) != CUDA_SUCCESS) return -1;
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* The shared dispatcher's handler (l2p_cupti.h): it may come just after watching ended. */
static void on_callback(unsigned cbid, const void *data)
{
    const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
    l2p_capture_call call = l2p_capture_call_of(cbid);
    uint64_t local = 0;
    if (call == L2P_CAPTURE_OTHER || !atomic_load(&watching)) return;
    l2p_capture_event e = {cbid, cb->callbackSite == CUPTI_API_EXIT, CUDA_SUCCESS, -1};
    if (e.exit && cb->functionReturnValue) e.result = (int)*(const CUresult *)cb->functionReturnValue;
    if (call == L2P_CAPTURE_END) e.capturing = stream_state(cbid, cb->functionParams);
    l2p_capture_handle(&e, cb->correlationData ? cb->correlationData : &local);
}

/* Begin and end are required; CaptureToGraph (CUDA 12.3) may be unknown to an older CUPTI. */
static const unsigned capture_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz};
static int vetoes(unsigned cbid) { return l2p_capture_call_of(cbid) == L2P_CAPTURE_BEGIN; }

static l2p_cupti_client client = {"capture tracking", on_callback, capture_ids,
                                  sizeof capture_ids / sizeof capture_ids[0], 6, 0, 0, vetoes};

int l2p_capture_watching(void) { return atomic_load(&watching) == 1; }

/* The handover's decision, under the subscriber's lock and then this lock (the order every
 * path here keeps): no CUPTI call is made under this lock. */
static const char *commit_release(void (*store)(void))
{
    const char *why = NULL;
    int on = 1;
    pthread_mutex_lock(&lock);
    if (counts.begun || counts.unmatched || n_open || n_pending)
        why = "the program made CUDA graphs while CUPTI was attached";
    /* handed in one move: an end of tracking racing this finds it handed, never half */
    else if (!atomic_compare_exchange_strong(&watching, &on, 2))
        why = "captures were not tracked";
    else {
        store();
        release_asked = 1;
    }
    pthread_mutex_unlock(&lock);
    return why;
}

const l2p_cupti_handover *l2p_capture_handover(void)
{
    static const l2p_cupti_handover handover = {&client, commit_release};
    return &handover;
}

static l2p_status refuse_if_on(void)
{
    return atomic_load(&watching) == 1
               ? l2p_fail(L2P_ERR_STATE, "capture tracking: already on in this process "
                          "(capture_watch_end first)")
               : L2P_OK;
}

/* The count on and the client attached, the stream query resolved (or NULL: states unread). */
static l2p_status watch_attach(void)
{
    pthread_mutex_lock(&lock);
    n_open = 0; /* captures open before now are not known (their ends: counts.unmatched) */
    pthread_mutex_unlock(&lock);
    atomic_store(&watching, 1); /* before the callbacks go on: none is missed */
    l2p_status st = l2p_cupti_attach(&client, 0);
    if (st != L2P_OK) {
        atomic_store(&watching, 0);
        return st;
    }
    pthread_mutex_lock(&lock);
    release_asked = 0; /* a request the count was handed to: the attach reclaimed it */
    pthread_mutex_unlock(&lock);
    return L2P_OK;
}

l2p_status l2p_capture_watch_begin(int device)
{
    void *fn;
    L2P_TRY(refuse_if_on());
    L2P_TRY(l2p_device_check(device));
    L2P_TRY(l2p_driver_symbol("cuStreamIsCapturing", &fn));
    stream_is_capturing = (stream_is_capturing_fn)fn;
    return watch_attach();
}

l2p_status l2p_capture_watch_begin_nodevice(void)
{
    L2P_TRY(refuse_if_on()); /* before the query is touched: the tracking on keeps its own */
    stream_is_capturing = NULL;
    return watch_attach();
}

void l2p_capture_watch_end(void)
{
    int on = 1;
    /* a count handed to a release stays with it: its handler may still be reached */
    if (atomic_compare_exchange_strong(&watching, &on, 0)) l2p_cupti_detach(&client, 0);
}
