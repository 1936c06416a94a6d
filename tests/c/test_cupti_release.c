/* CUPTI's release with a client handed over (l2p_cupti.h: l2p_cupti_handover), on a stand-in
 * libcupti (fake/fake_cupti.c) that plays CUDA calls' entries and exits on the test's threads:
 * the request refused by the client's rule; carried out at an outermost call's exit; withdrawn
 * by a vetoing call's entry; never finalized while a handler that came in while CUPTI was held
 * is inside, which then withdraws it; a withdrawn request's subscriber taken off by a reclaim;
 * and threads beginning "captures" against rounds of handovers. No GPU. */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2p_cupti.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

enum { DRIVER = CUPTI_CB_DOMAIN_DRIVER_API, ENTER = CUPTI_API_ENTER, EXIT = CUPTI_API_EXIT };
#define BEGIN_ID CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture
#define OTHER_ID CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel

static void (*call)(int, unsigned, int);
static int (*finalized)(void), (*unsubscribed)(void), (*subscribed)(void), (*domain_on)(int);

/* ---- a client shaped as capture tracking: a begin counted under its lock ---- */

static pthread_mutex_t rule_lock = PTHREAD_MUTEX_INITIALIZER;
static int begun, asked;
static atomic_int withdrew, park, parked;

static void handler(unsigned cbid, const void *data)
{
    if (cbid != BEGIN_ID || (int)((const CUpti_CallbackData *)data)->callbackSite != ENTER)
        return;
    if (atomic_load(&park)) { /* held here, inside the handler, until the test lets it go */
        atomic_store(&parked, 1);
        while (atomic_load(&park)) sched_yield();
    }
    pthread_mutex_lock(&rule_lock);
    begun++;
    if (asked && l2p_cupti_withdraw()) atomic_fetch_add(&withdrew, 1);
    pthread_mutex_unlock(&rule_lock);
}

static int vetoes(unsigned cbid) { return cbid == BEGIN_ID; }

static const unsigned ids[] = {BEGIN_ID};
static l2p_cupti_client client = {"test tracking", handler, ids, 1, 1, 0, 0, vetoes};

static atomic_long ticket, request_ticket;

static const char *commit(void (*store)(void))
{
    const char *why = NULL;
    pthread_mutex_lock(&rule_lock);
    if (begun) {
        why = "a capture was counted";
    } else {
        store();
        asked = 1;
        atomic_store(&request_ticket, atomic_fetch_add(&ticket, 1) + 1);
    }
    pthread_mutex_unlock(&rule_lock);
    return why;
}

static const l2p_cupti_handover handover = {&client, commit};

static void outer_call(unsigned cbid)
{
    call(DRIVER, cbid, ENTER);
    call(DRIVER, cbid, EXIT);
}

/* Attach the client, hand it over; the state after. */
static l2p_cupti_hold round_begin(const char **why)
{
    l2p_cupti_hold state = L2P_CUPTI_HELD;
    pthread_mutex_lock(&rule_lock);
    begun = asked = 0;
    pthread_mutex_unlock(&rule_lock);
    CHECK(l2p_cupti_attach(&client, 0) == L2P_OK);
    CHECK(l2p_cupti_release(&state, why, &handover) == L2P_OK);
    return state;
}

/* After a round: held again, nothing of ours subscribed, the client detached. */
static void round_end(void)
{
    l2p_cupti_detach(&client, 0); /* held: still attached; handed: nothing to do */
    l2p_cupti_reclaim();
    CHECK(l2p_cupti_hold_state() == L2P_CUPTI_HELD);
    CHECK(!subscribed());
    CHECK(!client.attached);
}

static void test_refused_where_the_client_saw_a_capture(void)
{
    const char *why = NULL;
    CHECK(l2p_cupti_attach(&client, 0) == L2P_OK);
    outer_call(BEGIN_ID); /* counted: the rule refuses */
    l2p_cupti_hold state;
    CHECK(l2p_cupti_release(&state, &why, &handover) == L2P_OK);
    CHECK(state == L2P_CUPTI_HELD && why && strstr(why, "capture"));
    CHECK(!domain_on(CUPTI_CB_DOMAIN_RUNTIME_API)); /* the request's domains off again */
    CHECK(client.attached && subscribed());
    /* without a handover the attached client itself keeps CUPTI */
    why = NULL;
    CHECK(l2p_cupti_release(&state, &why, NULL) == L2P_OK);
    CHECK(state == L2P_CUPTI_HELD && why && strcmp(why, "test tracking") == 0);
    round_end();
}

static void test_released_at_an_outermost_exit(void)
{
    const char *why = "x";
    int before = finalized();
    CHECK(round_begin(&why) == L2P_CUPTI_RELEASING && why == NULL);
    CHECK(!client.attached);
    call(DRIVER, OTHER_ID, EXIT); /* an exit whose entry came before the request: not it */
    CHECK(l2p_cupti_hold_state() == L2P_CUPTI_RELEASING && finalized() == before);
    call(DRIVER, OTHER_ID, ENTER);
    outer_call(OTHER_ID);         /* an inner call's exit: not it */
    CHECK(finalized() == before);
    call(DRIVER, OTHER_ID, EXIT); /* the outer one's */
    CHECK(l2p_cupti_hold_state() == L2P_CUPTI_RELEASED && finalized() == before + 1);
    round_end();
}

static void test_a_vetoing_entry_withdraws(void)
{
    const char *why = "x";
    int before = finalized();
    CHECK(round_begin(&why) == L2P_CUPTI_RELEASING);
    call(DRIVER, BEGIN_ID, ENTER); /* on the request's subscriber: the client's veto */
    CHECK(l2p_cupti_hold_state() == L2P_CUPTI_WITHDRAWN);
    call(DRIVER, BEGIN_ID, EXIT);
    outer_call(OTHER_ID);
    CHECK(finalized() == before && subscribed()); /* attached, the request still on */
    round_end();                                  /* the reclaim takes it off */
    CHECK(!domain_on(DRIVER));
}

static void *begin_once(void *arg)
{
    (void)arg;
    outer_call(BEGIN_ID);
    return NULL;
}

static void test_no_finalize_while_a_held_handler_is_inside(void)
{
    pthread_t t;
    const char *why = "x";
    int before = finalized();
    CHECK(l2p_cupti_attach(&client, 0) == L2P_OK);
    pthread_mutex_lock(&rule_lock);
    begun = asked = 0;
    pthread_mutex_unlock(&rule_lock);
    atomic_store(&withdrew, 0);
    atomic_store(&parked, 0);
    atomic_store(&park, 1);
    pthread_create(&t, NULL, begin_once, NULL); /* its begin came in while CUPTI was held */
    while (!atomic_load(&parked)) sched_yield();
    l2p_cupti_hold state;
    CHECK(l2p_cupti_release(&state, &why, &handover) == L2P_OK);
    CHECK(state == L2P_CUPTI_RELEASING && why == NULL); /* the rule saw no capture yet */
    outer_call(OTHER_ID); /* an outermost exit, the handler still inside: no finalize */
    outer_call(OTHER_ID);
    CHECK(l2p_cupti_hold_state() == L2P_CUPTI_RELEASING && finalized() == before);
    atomic_store(&park, 0);
    pthread_join(t, NULL);
    CHECK(atomic_load(&withdrew) == 1);
    CHECK(l2p_cupti_hold_state() == L2P_CUPTI_WITHDRAWN);
    outer_call(OTHER_ID);
    CHECK(finalized() == before);
    round_end();
}

/* ---- threads beginning captures against rounds of handovers ---- */

static atomic_int stop, violations, round_no, begins_done;

/* A begin that started after the request (its ticket taken before its entry, the request's
 * right after the state moved) must not leave its entry with the release still pending: it
 * withdrew it, or met a finalize another thread's exit had already begun (not held back:
 * l2p_cupti.c's release_at_exit). */
static void begin_capture(void)
{
    long b = atomic_fetch_add(&ticket, 1) + 1;
    call(DRIVER, BEGIN_ID, ENTER);
    l2p_cupti_hold s = l2p_cupti_hold_state();
    long r = atomic_load(&request_ticket);
    if (r && b > r && s == L2P_CUPTI_RELEASING) atomic_fetch_add(&violations, 1);
    call(DRIVER, BEGIN_ID, EXIT);
}

static void spin(unsigned n)
{
    for (volatile unsigned i = 0; i < n; i++) {
    }
}

/* Callers make CUDA calls with gaps (an exit may carry a release out); capturers begin one
 * capture a round, a random while after the round is armed, which is just before the
 * request: some before it, some between it and the first exit, some after the finalize. */
static void *caller(void *arg)
{
    unsigned seed = (unsigned)(size_t)arg;
    while (!atomic_load(&stop)) {
        outer_call(OTHER_ID);
        spin(rand_r(&seed) % 4000);
    }
    return NULL;
}

static void *capturer(void *arg)
{
    unsigned seed = (unsigned)(size_t)arg;
    int done = 0;
    while (!atomic_load(&stop)) {
        int r = atomic_load(&round_no);
        if (r == done) {
            sched_yield();
            continue;
        }
        done = r;
        spin(rand_r(&seed) % 20000);
        begin_capture();
        atomic_fetch_add(&begins_done, 1);
    }
    return NULL;
}

static void test_race(void)
{
    enum { CALLERS = 2, CAPTURERS = 2, ROUNDS = 2000 };
    pthread_t t[CALLERS + CAPTURERS];
    int released = 0, withdrawn = 0, refused = 0;
    atomic_store(&stop, 0);
    for (int i = 0; i < CALLERS + CAPTURERS; i++)
        pthread_create(&t[i], NULL, i < CALLERS ? caller : capturer, (void *)(size_t)(i + 1));
    for (int r = 1; r <= ROUNDS; r++) {
        const char *why = NULL;
        l2p_cupti_hold state = L2P_CUPTI_HELD;
        atomic_store(&request_ticket, 0);
        atomic_store(&begins_done, 0);
        pthread_mutex_lock(&rule_lock);
        begun = asked = 0;
        pthread_mutex_unlock(&rule_lock);
        CHECK(l2p_cupti_attach(&client, 0) == L2P_OK);
        atomic_store(&round_no, r); /* armed: the capturers are on their way */
        CHECK(l2p_cupti_release(&state, &why, &handover) == L2P_OK);
        while (atomic_load(&begins_done) < CAPTURERS) sched_yield();
        for (int n = 0; n < 100000 && (l2p_cupti_hold_state() == L2P_CUPTI_RELEASING ||
                                       l2p_cupti_hold_state() == L2P_CUPTI_FINALIZING); n++)
            sched_yield();
        l2p_cupti_hold end = l2p_cupti_hold_state();
        refused += state == L2P_CUPTI_HELD;
        released += state != L2P_CUPTI_HELD && end == L2P_CUPTI_RELEASED;
        withdrawn += state != L2P_CUPTI_HELD && end == L2P_CUPTI_WITHDRAWN;
        atomic_store(&request_ticket, 0);
        round_end();
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < CALLERS + CAPTURERS; i++) pthread_join(t[i], NULL);
    printf("release race: %d rounds: %d released, %d withdrawn, %d refused; %d begins past "
           "a pending release\n", ROUNDS, released, withdrawn, refused,
           atomic_load(&violations));
    CHECK(atomic_load(&violations) == 0);
    CHECK(released + withdrawn > 0); /* the request was made in some rounds, and raced */
}

int main(void)
{
    char path[PATH_MAX];
    if (!realpath("build/libfake_cupti.so", path)) {
        fprintf(stderr, "test_cupti_release: build/libfake_cupti.so missing (make builds it)\n");
        return 1;
    }
    setenv("L2P_CUPTI_LIBRARY", path, 1);
    setenv("L2P_CUPTI_IGNORE_MAPPED", "1", 1);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 1;
    call = (void (*)(int, unsigned, int))dlsym(lib, "fake_cupti_call");
    finalized = (int (*)(void))dlsym(lib, "fake_cupti_finalized");
    unsubscribed = (int (*)(void))dlsym(lib, "fake_cupti_unsubscribed");
    subscribed = (int (*)(void))dlsym(lib, "fake_cupti_subscribed");
    domain_on = (int (*)(int))dlsym(lib, "fake_cupti_domain_on");
    test_refused_where_the_client_saw_a_capture();
    test_released_at_an_outermost_exit();
    test_a_vetoing_entry_withdraws();
    test_no_finalize_while_a_held_handler_is_inside();
    test_race();
    printf("test_cupti_release: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed ? 1 : 0;
}
