/* Capture tracking: every stream capture open in the process, whoever begins it, and the switch
 * lock that keeps a plan switch and a capture apart.
 *
 * Why: the live watcher switches plan arms from its own thread on a timer (the persisting
 * limit, a reset of persisting lines, windows on streams and graph nodes, a device synchronize
 * to cut blocks). Several of those calls are illegal while another thread captures in global
 * mode (cudaDeviceSetLimit and the synchronize wait on the device) and invalidate that capture,
 * and a window set on a capturing stream would be baked into the program's graph. So a switch
 * may run only while no capture is open anywhere in the process: PyTorch's, CuPy's, XLA's or a
 * raw driver call's, on any thread. Python hooks see only PyTorch's; CUDA's own callbacks see
 * them all.
 *
 * How captures are known: CUPTI driver-API callbacks (on the process's one subscriber, shared
 * with the launch log: l2p_cupti.h). The runtime's cudaStreamBeginCapture / EndCapture reach
 * these driver calls too.
 *   - cuStreamBeginCapture, _ptsz, _v2, _v2_ptsz, cuStreamBeginCaptureToGraph, _ptsz: at ENTRY
 *     the capture is counted open (after waiting out a switch, below); at EXIT, a begin that
 *     failed opened nothing and is counted closed again. Between the two it counts as open:
 *     the safe side.
 *   - cuStreamEndCapture, _ptsz: a capture closes when its stream was capturing at ENTRY and is
 *     not at EXIT, whatever the call returned: an invalidated capture still ends (the call
 *     returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED), while an end from the wrong thread, or on
 *     a stream that was not capturing, ends nothing. Where the stream's state cannot be read,
 *     the result decides: success or INVALIDATED closed it (l2p_capture_end_closed).
 * Captures on every device count (global mode spans the process). Not known: a capture begun
 * before l2p_capture_watch_begin (its end finds nothing open and is counted in `unmatched`),
 * and CaptureToGraph where the process's CUPTI is older than CUDA 12.3 (those ids are
 * optional; the others are required).
 *
 * The switch protocol and why it closes the race. One mutex guards the count and a `switching`
 * flag. l2p_switch_enter takes it, and returns 1 with the flag set only where no capture is
 * counted open; the caller switches, then l2p_switch_leave clears the flag. A begin's ENTRY
 * callback takes the same mutex and, while the flag is set, waits on a condition variable
 * before counting. Both decisions are made under the one mutex, so they are ordered: either the
 * begin counted first (the switch sees it and does not start) or the switch started first (the
 * begin waits until it ends, and only then does the driver begin the capture). No capture can
 * begin inside a switch, and no switch can start while one is open. The window between a begin
 * counted and the driver actually capturing is harmless: it is counted open throughout.
 *
 * What it costs a program: nothing while no switch runs (a mutex taken and released once per
 * capture begin and end). A BeginCapture that arrives during a switch waits for that one switch
 * (0.6 ms median, tens of ms at most where the switch synchronizes the device behind queued
 * work), and never two: a begin waiting is counted as pending, and l2p_switch_enter refuses
 * (returns 0) while one is, as it does for a capture open.
 *
 * Why it cannot deadlock. The begin callback waits only for the flag, and holds nothing while
 * it waits (the mutex is released by the wait; the dispatcher holds no lock). The flag clears
 * when the switcher calls l2p_switch_leave, so a deadlock needs the switcher to wait, inside
 * the switch, for the waiting thread:
 *   - through this callback: the switcher never begins a capture, and none of a switch's calls
 *     (cuCtxSetLimit / cudaDeviceSetLimit, cuCtxResetPersistingL2Cache, cuStreamSetAttribute,
 *     cuGraphKernelNodeSetAttribute, cuGraphExecKernelNodeSetParams, cuGraphInstantiate,
 *     cuCtxSynchronize) is a begin; the handler acts on the begin and end ids only. A begin
 *     from the switching thread itself is counted without waiting (it cannot wait for itself).
 *   - through the GPU: a synchronize waits for queued kernels, which never wait for a host
 *     thread (a host function enqueued by the program may make no CUDA call at all).
 *   - through a lock the waiting thread holds: the Python GIL. A switch driven from Python
 *     releases the GIL in its CUDA calls and needs it back to reach l2p_switch_leave; a thread
 *     that called BeginCapture while holding the GIL would wait for the switch while the
 *     switch waits for the GIL. PyTorch (capture_begin: gil_scoped_release) and CuPy
 *     (streamBeginCapture: nogil) release the GIL first, as do ctypes' CDLL, cuda-python's
 *     bindings since 12.9.1 and 13.0.0, and XLA (its captures run in C++ with the GIL let go);
 *     read in their sources, 2026-11-29. cuda-python before 12.9.1 holds it: where that is
 *     loaded the live watcher never switches (process/clock.py, _capture_holds_gil). Another C
 *     extension that begins a capture with the GIL held is not known; a switcher safe against
 *     it would switch in one C call with the GIL released throughout.
 *
 * The pure parts (counting, the lock protocol, the end rule) run without CUPTI or a GPU:
 * l2p_capture_handle is the callback's handler with the stream's state read by the caller, so
 * a C test drives it from threads (tests/c/test_capture.c). */
#ifndef L2P_CAPTURE_H
#define L2P_CAPTURE_H

#include <stdint.h>

#include "l2p_cupti.h"
#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start tracking captures (one subscriber client per process; `device` must exist: the
 * callbacks read stream states through its driver). The count starts at 0. L2P_ERR_STATE
 * while tracking already; L2P_ERR_NOT_SUPPORTED without CUPTI or where another tool holds
 * CUPTI's subscriber. */
l2p_status l2p_capture_watch_begin(int device);
/* The same without a device, the stream states left unread (an end's result decides): for the
 * C tests on a stand-in libcupti (tests/c/test_cupti_release.c). */
l2p_status l2p_capture_watch_begin_nodevice(void);
/* Stop tracking (the callbacks go off; the count stays as it was); idempotent. A count handed
 * to a release (below) stays with it. */
void l2p_capture_watch_end(void);
/* Tracking handed to a release of CUPTI (l2p_activity_release_cupti, l2p_cupti.h), the race
 * it closes: with tracking ended first and the release asked after, a capture begun between
 * the two is seen by neither, and its graph, made under CUPTI, fails once CUPTI is finalized.
 * Handed over, the check and the request are one step under the count's lock: the release is
 * refused where any capture was counted (begun, ended unmatched, open or waiting: "the program
 * made CUDA graphs while CUPTI was attached"), or where tracking is not on. Else tracking ends
 * with the request, and a capture begun before the finalize withdraws it (its begin's entry:
 * on the release's subscriber, or here where the callback came in just before), and CUPTI
 * stays: no finalize runs while such a callback is inside (l2p_cupti.c). */
const l2p_cupti_handover *l2p_capture_handover(void);
/* 1 while tracking. */
int l2p_capture_watching(void);
/* Captures counted open now. */
long l2p_captures_open(void);

/* Enter a switch: 1 when no capture is open or waiting to begin (the caller switches, then
 * calls l2p_switch_leave; until then no capture can begin), 0 otherwise (nothing held). Waits
 * while another thread's switch is inside. -1 (L2P_ERR_STATE) where the calling thread is
 * inside a switch already. */
int l2p_switch_enter(void);
/* Leave the switch entered on this thread; captures waiting to begin go on. L2P_ERR_STATE
 * where the calling thread is not inside a switch. */
l2p_status l2p_switch_leave(void);

/* ---- pure parts (C-tested without a GPU) ---- */

typedef enum {
    L2P_CAPTURE_OTHER = 0, /* not a capture begin or end */
    L2P_CAPTURE_BEGIN,
    L2P_CAPTURE_END,
} l2p_capture_call;

/* Which of the tracked calls a CUPTI driver callback id is. */
l2p_capture_call l2p_capture_call_of(unsigned cbid);

/* Whether an EndCapture closed a capture: its stream's capture state at entry and at exit (1
 * capturing, 0 not, -1 unread) decide where both were read; else its result (a CUresult). */
int l2p_capture_end_closed(int result, int before, int after);

/* One callback as the handler sees it. */
typedef struct {
    unsigned cbid;  /* a CUPTI_DRIVER_TRACE_CBID_* */
    int exit;       /* 0 at the call's entry, 1 at its exit */
    int result;     /* exit: the call's CUresult */
    int capturing;  /* END: the stream's capture state read at this site: 1, 0, -1 unread */
} l2p_capture_event;

/* Handle one callback; *carry passes state from a call's entry to its exit (CUPTI's
 * correlationData: the same word at both sites of one call). A BEGIN's entry may wait for a
 * switch on another thread. Counts while not tracking too (the C test drives it so). */
void l2p_capture_handle(const l2p_capture_event *e, uint64_t *carry);

/* What the tracking saw since the process started (diagnostics). */
typedef struct {
    unsigned long begun;     /* begins counted (failed ones included) */
    unsigned long failed;    /* begins that failed */
    unsigned long ended;     /* ends that closed a capture */
    unsigned long unmatched; /* ends that closed a capture not counted open */
    unsigned long waited;    /* begins that waited for a switch */
    unsigned long refused;   /* switch enters that found a capture open or pending */
    unsigned long switches;  /* switches entered */
    unsigned long withdrew;  /* begins that withdrew a release the count was handed to */
} l2p_capture_counts;
void l2p_capture_counts_get(l2p_capture_counts *out);

#ifdef __cplusplus
}
#endif
#endif
