/* CUPTI's release with a client handed over (l2p_cupti.h: l2p_cupti_handover), on a stand-in
 * libcupti (fake/fake_cupti.c) that plays CUDA calls' entries and exits on the test's threads:
 * the request refused by the client's rule, the client still hearing its ids after; carried
 * out at an outermost call's exit; withdrawn by a vetoing call's entry, and every later
 * request with a handover refused; never finalized while a handler that came in while CUPTI
 * was held is inside, which then withdraws it; a withdrawn request's subscriber taken off by a
 * reclaim; and capture tracking's own handover (l2p_capture.c, no device) raced by threads
 * beginning captures as the request is made. Each case runs in a process of its own (CUPTI's
 * state is the process's). No GPU. */
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
#include <sys/wait.h>
#include <unistd.h>

#include "l2p_capture.h"
#include "l2p_cupti.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

enum { DRIVER = CUPTI_CB_DOMAIN_DRIVER_API, ENTER = CUPTI_API_ENTER, EXIT = CUPTI_API_EXIT };
#define BEGIN_ID CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture
#define OTHER_ID CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel

static void (*call)(int, unsigned, int);
static int (*finalized)(void), (*unsubscribed)(void), (*subscribed)(void), (*domain_on)(int);
static void (*watch)(int);
static int (*finalize_saw)(void), (*runtime_on)(void);

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
    int was = begun;
    outer_call(BEGIN_ID); /* the client's own ids back on: it still hears its begins */
    CHECK(begun == was + 1);
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
    unsigned long seen, late;
    l2p_cupti_vetoes(&seen, &late);
    CHECK(seen == 1 && late == 0);
    /* that capture was made under CUPTI and never counted: no later handover lets it go */
    CHECK(round_begin(&why) == L2P_CUPTI_HELD && why && strstr(why, "earlier release"));
    round_end();
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

/* ---- capture tracking's own handover, raced ---- */

/* In a process of its own: capture tracking on (no device), a capturer thread that begins one
 * capture a random while after its start, after the request's, or just as the request's
 * domains come on (a begin entering its handler while CUPTI is still held, as the client
 * decides), a caller thread making calls with gaps, and the
 * request made with the count handed over. The oracle is the stand-in's: how many begins had
 * left their entry when cuptiFinalize began. A finalized round must have none (a begin before
 * the request was counted, and refused it; one after withdrew it, or waited out the finalize
 * already under way). Writes: the request's state, the end state, the begins at finalize. */
static atomic_int go, stop_calls;

static void spin(unsigned n)
{
    for (volatile unsigned i = 0; i < n; i++) {
    }
}

static void *race_caller(void *arg)
{
    unsigned seed = (unsigned)(size_t)arg;
    while (!atomic_load(&stop_calls)) {
        outer_call(OTHER_ID);
        spin(rand_r(&seed) % 4000);
    }
    return NULL;
}

static void *race_capturer(void *arg)
{
    unsigned seed = (unsigned)(size_t)arg;
    switch (rand_r(&seed) % 3) {
    case 0: /* at the request's last step before the client decides: the narrow windows */
        while (!runtime_on()) {
        }
        spin(rand_r(&seed) % 200);
        break;
    case 1: /* from the request's start */
        while (!atomic_load(&go)) sched_yield();
        spin(rand_r(&seed) % 20000);
        break;
    default: /* from the thread's start: often before the request */
        spin(rand_r(&seed) % 20000);
    }
    outer_call(BEGIN_ID);
    return NULL;
}

static void race_round(int fd, unsigned seed)
{
    pthread_t caller, capturer;
    l2p_cupti_hold state = L2P_CUPTI_HELD;
    const char *why = NULL;
    int out[3];
    watch(BEGIN_ID);
    if (l2p_capture_watch_begin_nodevice() != L2P_OK) _exit(3);
    pthread_create(&caller, NULL, race_caller, (void *)(size_t)seed);
    pthread_create(&capturer, NULL, race_capturer, (void *)(size_t)(seed * 7 + 1));
    spin(rand_r(&seed) % 60000);
    atomic_store(&go, 1);
    if (l2p_cupti_release(&state, &why, l2p_capture_handover()) != L2P_OK) _exit(4);
    if (why) l2p_capture_watch_end();
    pthread_join(capturer, NULL);
    for (int n = 0; n < 100000 && (l2p_cupti_hold_state() == L2P_CUPTI_RELEASING ||
                                   l2p_cupti_hold_state() == L2P_CUPTI_FINALIZING); n++)
        sched_yield();
    atomic_store(&stop_calls, 1);
    pthread_join(caller, NULL);
    out[0] = (int)state;
    out[1] = (int)l2p_cupti_hold_state();
    out[2] = finalize_saw();
    if (write(fd, out, sizeof out) != (ssize_t)sizeof out) _exit(5);
    _exit(0);
}

static void test_race(void)
{
    enum { ROUNDS = 1000 };
    int released = 0, withdrawn = 0, refused = 0, lost = 0, bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int fd[2], out[3] = {-1, -1, -1}, status = 0;
        if (pipe(fd) != 0) break;
        pid_t pid = fork();
        if (pid == 0) {
            close(fd[0]);
            race_round(fd[1], (unsigned)r + 1);
        }
        close(fd[1]);
        ssize_t got = read(fd[0], out, sizeof out);
        close(fd[0]);
        waitpid(pid, &status, 0);
        if (got != (ssize_t)sizeof out || !WIFEXITED(status) || WEXITSTATUS(status)) {
            bad++;
            continue;
        }
        if (out[0] == L2P_CUPTI_HELD) refused++;
        released += out[0] != L2P_CUPTI_HELD && out[1] == L2P_CUPTI_RELEASED;
        withdrawn += out[0] != L2P_CUPTI_HELD && out[1] == L2P_CUPTI_WITHDRAWN;
        lost += out[2] > 0; /* finalized after a begin had left its entry */
    }
    printf("release race (capture tracking's handover, a process a round): %d rounds: %d let "
           "go, %d withdrawn, %d refused, %d rounds failed; %d finalized after a begin\n",
           ROUNDS, released, withdrawn, refused, bad, lost);
    CHECK(bad == 0);
    CHECK(lost == 0);
    CHECK(released > 0); /* raced and let go (the other ways out: the cases above) */
}

/* Each case in a process of its own; its checks counted there. */
static void run_alone(void (*test)(void), const char *name)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        test();
        printf("  %s: %d passed, %d failed\n", name, l2p_test_passed, l2p_test_failed);
        fflush(stdout);
        _exit(l2p_test_failed ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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
    watch = (void (*)(int))dlsym(lib, "fake_cupti_watch");
    runtime_on = (int (*)(void))dlsym(lib, "fake_cupti_runtime_on");
    finalize_saw = (int (*)(void))dlsym(lib, "fake_cupti_finalize_saw");
    run_alone(test_refused_where_the_client_saw_a_capture, "refused");
    run_alone(test_released_at_an_outermost_exit, "released");
    run_alone(test_a_vetoing_entry_withdraws, "vetoed");
    run_alone(test_no_finalize_while_a_held_handler_is_inside, "a handler inside");
    test_race();
    printf("test_cupti_release: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed ? 1 : 0;
}
