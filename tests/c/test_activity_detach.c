/* The launch log detached from CUPTI (l2p_activity_detach), against a stand-in libcupti whose
 * activity calls are counted (fake/fake_activity.c), no GPU: once detached the log makes no
 * CUPTI call, its clock is the host's, and only the replays' pairs of that clock go in: a
 * pair begun before the detach (a stamp of CUPTI's clock, or of the host's before it), one
 * from the future, and kernel records delivered late are dropped. Ended, it makes no CUPTI call
 * either, and collecting begins again (a search begun again: LetGo.reattach). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include "l2p_activity.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

static int (*calls)(void);
static void (*deliver)(uint64_t start, uint64_t end);

static size_t replays(const l2p_activity *log)
{
    size_t n = 0;
    for (size_t i = 0; i < log->n; i++) n += log->recs[i].origin == L2P_RECORD_REPLAY;
    return n;
}

static void test_detached_log(void)
{
    l2p_activity *log = l2p_activity_log();
    uint64_t cupti_t = 0, before = 0, host_t = 0;
    CHECK(l2p_activity_begin(0) == L2P_OK);
    CHECK(l2p_activity_now(&cupti_t) == L2P_OK && cupti_t > 1700000000000000000ull);
    deliver(cupti_t, cupti_t + 1000);              /* collecting: the record goes in */
    CHECK(log->n == 1);
    /* a host stamp taken before the detach, read as the core reads the host's clock */
    {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        before = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    CHECK(l2p_activity_detach() == L2P_OK && l2p_activity_detached());
    CHECK(log->n == 0);                             /* CUPTI's stamps never share the log */
    CHECK(l2p_activity_detach() != L2P_OK);         /* once */
    int made = calls();
    CHECK(l2p_activity_now(&host_t) == L2P_OK && host_t > before && host_t < cupti_t);
    CHECK(l2p_activity_flush() == L2P_OK);
    CHECK(l2p_activity_record(1) == L2P_OK);
    CHECK(l2p_activity_attributes(1) == L2P_ERR_STATE);
    CHECK(l2p_activity_graphs(1) == L2P_ERR_STATE);
    CHECK(calls() == made);                         /* no CUPTI call while detached */
    /* kernel records CUPTI delivers late, through its callback or past its early check */
    deliver(cupti_t + 2000, cupti_t + 3000);
    const uint32_t shape[6] = {1, 1, 1, 1, 1, 1};
    l2p_activity_add(log, 0, cupti_t + 4000, cupti_t + 5000, 7, "k", "k", shape, NULL);
    l2p_activity_add(log, 0, host_t, host_t + 10, 7, "k", "k", shape, NULL); /* not a replay */
    CHECK(log->n == 0);
    /* the replays' pairs: only those begun on the host's clock since the detach */
    l2p_activity_add_replay("replay:cupti", cupti_t + 6000, 1000);
    l2p_activity_add_replay("replay:before", before, 1000);
    l2p_activity_add_replay("replay:future", host_t + 3600ull * 1000000000u, 1000);
    CHECK(log->n == 0);
    l2p_activity_add_replay("replay:after", host_t, 1000);
    CHECK(log->n == 1 && replays(log) == 1 && log->recs[0].start == host_t &&
          log->recs[0].end == host_t + 1000);
    l2p_activity_end();
    CHECK(!l2p_activity_detached());
    CHECK(calls() == made);                         /* ended with no CUPTI call */
    CHECK(l2p_activity_begin(0) == L2P_OK);         /* begun again: CUPTI's clock again */
    CHECK(calls() > made);
    CHECK(l2p_activity_begin(0) != L2P_OK);         /* no second begin */
    uint64_t again = 0;
    CHECK(l2p_activity_now(&again) == L2P_OK && again > 1700000000000000000ull);
    l2p_activity_end();
}

int main(void)
{
    char path[PATH_MAX];
    if (!realpath("build/libfake_activity.so", path)) {
        fprintf(stderr, "test_activity_detach: build/libfake_activity.so missing (make builds "
                        "it)\n");
        return 1;
    }
    setenv("L2P_CUPTI_LIBRARY", path, 1);
    setenv("L2P_CUPTI_IGNORE_MAPPED", "1", 1);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 1;
    calls = (int (*)(void))dlsym(lib, "fake_activity_calls");
    deliver = (void (*)(uint64_t, uint64_t))dlsym(lib, "fake_activity_deliver");
    if (!calls || !deliver) return 1;
    test_detached_log();
    printf("test_activity_detach: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
