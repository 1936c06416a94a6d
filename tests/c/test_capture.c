/* C tests of capture tracking's pure part (no GPU, no CUPTI): which callback ids are begins and
 * ends, when an EndCapture closed a capture, the count through l2p_capture_handle, the switch
 * protocol on one thread, and a race that tries to lose it: threads begin and end captures
 * through the handler while another enters and leaves switches, and neither may ever see the
 * other inside. */
#define _GNU_SOURCE
#include <cuda.h>  /* CUresult values */
#include <cupti.h> /* the callback ids */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "l2p_capture.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

#define BEGIN CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2
#define END CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture

static void event(unsigned cbid, int exit, int result, int capturing, uint64_t *carry)
{
    l2p_capture_event e = {cbid, exit, result, capturing};
    l2p_capture_handle(&e, carry);
}

/* One capture begun and ended as the driver's callbacks would report it. */
static void begin(uint64_t *carry) { event(BEGIN, 0, 0, -1, carry), event(BEGIN, 1, 0, -1, carry); }
static void end(uint64_t *carry) { event(END, 0, 0, 1, carry), event(END, 1, 0, 0, carry); }

static void test_calls(void)
{
    const unsigned begins[] = {
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz};
    for (size_t i = 0; i < sizeof begins / sizeof begins[0]; i++)
        CHECK(l2p_capture_call_of(begins[i]) == L2P_CAPTURE_BEGIN);
    CHECK(l2p_capture_call_of(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture) == L2P_CAPTURE_END);
    CHECK(l2p_capture_call_of(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz) == L2P_CAPTURE_END);
    CHECK(l2p_capture_call_of(CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing) == L2P_CAPTURE_OTHER);
    CHECK(l2p_capture_call_of(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) == L2P_CAPTURE_OTHER);
    CHECK(l2p_capture_call_of(CUPTI_DRIVER_TRACE_CBID_cuThreadExchangeStreamCaptureMode) ==
          L2P_CAPTURE_OTHER);
}

static void test_end_rule(void)
{
    /* the stream's state decides where both were read, whatever the result */
    CHECK(l2p_capture_end_closed(CUDA_SUCCESS, 1, 0) == 1);
    CHECK(l2p_capture_end_closed(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 1, 0) == 1);
    CHECK(l2p_capture_end_closed(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, 1, 0) == 1);
    CHECK(l2p_capture_end_closed(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 1, 1) == 0);
    CHECK(l2p_capture_end_closed(CUDA_ERROR_ILLEGAL_STATE, 0, 0) == 0); /* was not capturing */
    CHECK(l2p_capture_end_closed(CUDA_SUCCESS, 0, -1) == 0);
    /* unread: the result decides */
    CHECK(l2p_capture_end_closed(CUDA_SUCCESS, -1, -1) == 1);
    CHECK(l2p_capture_end_closed(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 1, -1) == 1);
    CHECK(l2p_capture_end_closed(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, -1, -1) == 0);
    CHECK(l2p_capture_end_closed(CUDA_ERROR_ILLEGAL_STATE, -1, 0) == 0);
}

static void test_count(void)
{
    uint64_t c1 = 0, c2 = 0;
    l2p_capture_counts before, after;
    l2p_capture_counts_get(&before);
    CHECK(l2p_captures_open() == 0);
    begin(&c1);
    CHECK(l2p_captures_open() == 1);
    event(BEGIN, 0, 0, -1, &c2); /* counted open from the begin's entry, */
    CHECK(l2p_captures_open() == 2);
    event(BEGIN, 1, CUDA_ERROR_ILLEGAL_STATE, -1, &c2); /* not once it failed */
    CHECK(l2p_captures_open() == 1);
    /* an end from the wrong thread leaves it open; an invalidated capture's end closes it */
    event(END, 0, 0, 1, &c1), event(END, 1, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 1, &c1);
    CHECK(l2p_captures_open() == 1);
    event(END, 0, 0, 1, &c1), event(END, 1, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 0, &c1);
    CHECK(l2p_captures_open() == 0);
    /* the end of a capture begun before tracking: the count stays at 0 */
    end(&c1);
    CHECK(l2p_captures_open() == 0);
    /* the other ids change nothing */
    event(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0, 0, 1, &c1);
    CHECK(l2p_captures_open() == 0);
    l2p_capture_counts_get(&after);
    CHECK(after.begun - before.begun == 2 && after.failed - before.failed == 1);
    CHECK(after.ended - before.ended == 2 && after.unmatched - before.unmatched == 1);
}

static void test_switch_one_thread(void)
{
    uint64_t c = 0;
    CHECK(l2p_switch_leave() == L2P_ERR_STATE); /* not inside */
    CHECK(l2p_switch_enter() == 1);
    CHECK(l2p_switch_enter() == -1);            /* not twice on one thread */
    CHECK(l2p_last_error()->status == L2P_ERR_STATE);
    /* the switching thread's own begin does not wait for itself */
    begin(&c);
    CHECK(l2p_captures_open() == 1);
    CHECK(l2p_switch_leave() == L2P_OK);
    CHECK(l2p_switch_leave() == L2P_ERR_STATE);
    CHECK(l2p_switch_enter() == 0);             /* a capture is open */
    CHECK(l2p_switch_leave() == L2P_ERR_STATE); /* and 0 held nothing */
    end(&c);
    CHECK(l2p_switch_enter() == 1);
    CHECK(l2p_switch_leave() == L2P_OK);
}

/* ---- the race ---- */

static atomic_int inside;       /* the switcher is between a successful enter and its leave */
static atomic_int stop;
static atomic_long enter_while_open, begin_while_inside, n_switches, n_begins;

static void spin(int n)
{
    for (volatile int i = 0; i < n; i++)
        if (i % 16 == 0) sched_yield();
}

static void *switcher(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        if (l2p_switch_enter() != 1) { /* a capture is open: try again soon */
            sched_yield();
            continue;
        }
        atomic_store(&inside, 1);
        atomic_fetch_add(&n_switches, 1);
        if (l2p_captures_open() != 0) atomic_fetch_add(&enter_while_open, 1);
        spin(64);            /* the switch's CUDA calls */
        if (l2p_captures_open() != 0) atomic_fetch_add(&begin_while_inside, 1);
        atomic_store(&inside, 0);
        l2p_switch_leave();
    }
    return NULL;
}

static void *capturer(void *arg)
{
    long n = *(const long *)arg;
    for (long k = 0; k < n && !atomic_load(&stop); k++) {
        uint64_t carry = 0;
        event(BEGIN, 0, 0, -1, &carry);      /* counted open: no switch is inside now, */
        if (atomic_load(&inside)) atomic_fetch_add(&begin_while_inside, 1);
        atomic_fetch_add(&n_begins, 1);
        spin(16);                            /* and none enters while the capture is open */
        if (atomic_load(&inside)) atomic_fetch_add(&enter_while_open, 1);
        event(BEGIN, 1, 0, -1, &carry);
        end(&carry);
        spin(k % 8);                         /* gaps of several lengths for the switcher */
    }
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void test_race(void)
{
    enum { CAPTURERS = 2 };
    long per = 10000;
    pthread_t s, c[CAPTURERS];
    double t0 = now();
    atomic_store(&stop, 0);
    pthread_create(&s, NULL, switcher, NULL);
    for (int i = 0; i < CAPTURERS; i++) pthread_create(&c[i], NULL, capturer, &per);
    for (int i = 0; i < CAPTURERS; i++) pthread_join(c[i], NULL);
    atomic_store(&stop, 1);
    pthread_join(s, NULL);
    l2p_capture_counts counts;
    l2p_capture_counts_get(&counts);
    printf("capture race: %ld begins (%lu waited for a switch), %ld switches, %lu refused, "
           "%.2f s\n", atomic_load(&n_begins), counts.waited, atomic_load(&n_switches),
           counts.refused, now() - t0);
    CHECK(atomic_load(&enter_while_open) == 0);
    CHECK(atomic_load(&begin_while_inside) == 0);
    CHECK(atomic_load(&n_begins) == CAPTURERS * per);
    CHECK(atomic_load(&n_switches) > 0); /* both sides ran, */
    CHECK(counts.waited > 0);            /* and they met: begins waited for switches */
    CHECK(l2p_captures_open() == 0);
}

int main(void)
{
    test_calls();
    test_end_rule();
    test_count();
    test_switch_one_thread();
    test_race();
    printf("test_capture: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed ? 1 : 0;
}
