/* Graph replays timed by CUDA events (see l2p_replays.h). */
#include "l2p_replays.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2p_activity.h"
#include "l2p_device.h"
#include "l2p_release.h"

enum { SLOT_FREE = 0, SLOT_BEGUN, SLOT_ENDED };

typedef struct {
    cudaEvent_t first, second; /* made on first use, kept for the process */
    uint64_t stamp;            /* CUPTI's clock on the host, before `first` was recorded */
    int label;
    int state;                 /* SLOT_* */
    int queued;                /* the GPU had not reached `first` once `second` was enqueued */
} replay_slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* program threads replay at once */
static replay_slot slots[L2P_REPLAYS_SLOTS];
static size_t n_made;     /* slots [0, n_made) have their events */
static int free_list[L2P_REPLAYS_SLOTS];
static size_t n_free;     /* free_list[0, n_free): made slots that are free */
static char *labels[L2P_REPLAYS_LABELS];
/* "host:" + each label: the name a replay's record takes where its pair may time the host's
 * launch (l2p_replays_end), so that the blocks' sums keep it apart */
static char *host_labels[L2P_REPLAYS_LABELS];
static int n_labels;
static l2p_replays_counts counts;
/* The context the pool's events were made in (l2p_life.h): a device reset destroys them, and
 * they are then forgotten, never used nor destroyed (l2p_replays_pool_fate). */
static l2p_life pool_life;
/* Counts the pools forgotten: a slot id carries it, so that a pair begun before a reset is
 * never ended on a slot of the pool made after. */
static unsigned generation;

/* A copy of s (C11 has no strdup), or NULL. */
static char *copy_of(const char *s)
{
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

int l2p_replays_label(const char *label)
{
    if (!label) return -1;
    pthread_mutex_lock(&lock);
    int id = -1;
    for (int i = 0; i < n_labels; i++)
        if (!strcmp(labels[i], label)) {
            id = i;
            break;
        }
    if (id < 0 && n_labels < L2P_REPLAYS_LABELS && (labels[n_labels] = copy_of(label))) {
        size_t n = strlen(label) + sizeof L2P_REPLAYS_HOST;
        char *twin = malloc(n);
        if (twin) {
            snprintf(twin, n, "%s%s", L2P_REPLAYS_HOST, label);
            host_labels[n_labels] = twin;
            id = n_labels++;
        } else {
            free(labels[n_labels]);
            labels[n_labels] = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    return id;
}

l2p_replays_fate l2p_replays_pool_fate(const l2p_life *pool, size_t made,
                                      unsigned long long now, int gone)
{
    if (!made || !pool->ctx || !now || now == pool->ctx) return L2P_REPLAYS_USE;
    return gone ? L2P_REPLAYS_FORGET : L2P_REPLAYS_ELSEWHERE;
}

int l2p_replays_slot_id(unsigned gen, int index)
{
    return (int)(gen % L2P_REPLAYS_GENERATIONS) * L2P_REPLAYS_SLOTS + index;
}

/* The pool's events died with their context: every pair pending is counted failed, and the
 * events are dropped without a CUDA call (their handles may name new objects by now). The
 * caller holds the lock. */
static void forget_pool(void)
{
    for (size_t i = 0; i < n_made; i++)
        if (slots[i].state != SLOT_FREE) {
            slots[i].state = SLOT_FREE;
            counts.pending--;
            counts.failed++;
        }
    n_made = 0;
    n_free = 0;
    pool_life.ctx = 0;
    generation++;
}

/* What to do with the pool for a replay on this thread's context `now`: the device reset is
 * asked of the pool's device only where the ids differ (rare: a reset, or a second device). */
static l2p_replays_fate pool_fate_now(unsigned long long now)
{
    int gone = 0;
    if (n_made && pool_life.ctx && now && now != pool_life.ctx) gone = l2p_life_gone(&pool_life);
    return l2p_replays_pool_fate(&pool_life, n_made, now, gone);
}

/* A free slot with its events made, or -1 (the pool is full or an event could not be made:
 * *failed says which). The first events made note the context (`now`). The caller holds the
 * lock. */
static int take_slot(unsigned long long now, int *failed)
{
    *failed = 0;
    if (n_free) return free_list[--n_free];
    if (n_made == L2P_REPLAYS_SLOTS) return -1;
    if (!n_made) {
        int device = 0;
        pool_life.ctx = cudaGetDevice(&device) == cudaSuccess ? now : 0;
        pool_life.device = device;
    }
    replay_slot *s = &slots[n_made];
    if (cudaEventCreate(&s->first) != cudaSuccess) {
        *failed = 1;
        return -1;
    }
    if (cudaEventCreate(&s->second) != cudaSuccess) {
        (void)cudaEventDestroy(s->first); /* never recorded: no capture can hold it */
        *failed = 1;
        return -1;
    }
    return (int)n_made++;
}

static void give_back(int i)
{
    slots[i].state = SLOT_FREE;
    free_list[n_free++] = i;
}

/* A refused call leaves its error as the runtime's last error; the package's own later launch
 * checks (cudaGetLastError) must not read it as theirs. The program's runtime is another
 * instance (cudart is linked statically here), so its checks never see it either way. */
static void forget_error(void)
{
    (void)cudaGetLastError();
}

/* A replay left untimed (under the lock): where a CUDA call refused, counted failed and its
 * error forgotten; for want of a slot, or on a capturing stream, skipped. */
static void count_untimed(int failed)
{
    if (failed) {
        counts.failed++;
        forget_error();
    } else
        counts.skipped++;
}

l2p_status l2p_replays_begin(cudaStream_t stream, int label, int *slot)
{
    *slot = -1;
    pthread_mutex_lock(&lock);
    int known = label >= 0 && label < n_labels;
    pthread_mutex_unlock(&lock);
    if (!known)
        return l2p_fail(L2P_ERR_VALUE, "label: expected an id from l2p_replays_label, got %d",
                        label);
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    cudaError_t rc = cudaStreamIsCapturing(stream, &cap);
    unsigned long long now = l2p_context_id_current();
    pthread_mutex_lock(&lock);
    if (rc != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
        /* capturing: an event here would join the program's graph; on the legacy stream while
         * another thread captures the query itself is refused (that capture goes on) */
        count_untimed(rc != cudaSuccess);
        pthread_mutex_unlock(&lock);
        return L2P_OK;
    }
    l2p_replays_fate fate = pool_fate_now(now);
    if (fate == L2P_REPLAYS_FORGET) forget_pool();
    int failed = 0, i = fate == L2P_REPLAYS_ELSEWHERE ? -1 : take_slot(now, &failed);
    if (i < 0) {
        count_untimed(failed);
        pthread_mutex_unlock(&lock);
        return L2P_OK;
    }
    replay_slot *s = &slots[i];
    if (l2p_activity_now(&s->stamp) != L2P_OK ||
        cudaEventRecord(s->first, stream) != cudaSuccess) {
        give_back(i);
        count_untimed(1);
    } else {
        s->label = label;
        s->state = SLOT_BEGUN;
        counts.pending++;
        *slot = l2p_replays_slot_id(generation, i);
    }
    pthread_mutex_unlock(&lock);
    return L2P_OK;
}

void l2p_replays_end(int id, cudaStream_t stream)
{
    if (id < 0) return;
    pthread_mutex_lock(&lock);
    int slot = id % L2P_REPLAYS_SLOTS;
    replay_slot *s = &slots[slot];
    /* a pair begun before its pool was forgotten is not ended on the new pool's slot */
    if (id == l2p_replays_slot_id(generation, slot) && (size_t)slot < n_made &&
        s->state == SLOT_BEGUN) {
        cudaError_t q = cudaErrorUnknown;
        if (cudaEventRecord(s->second, stream) == cudaSuccess) {
            /* Queued: the whole pair is enqueued (the second event too) and the GPU has not
             * reached the first, so the pair times the GPU's run of the replay alone.
             * Otherwise the GPU reached the first event before the launch was done, and the
             * pair may time the host's launch of the graph as well (server_mix, its GPU busy
             * 48 %: blocks 9.7 % apart by events, H200 94f3501). Relaxed: in global mode an
             * event query here would invalidate a capture another thread has open. */
            int mode = l2p_capture_relax();
            q = cudaEventQuery(s->first);
            l2p_capture_restore(mode);
        }
        if (q == cudaSuccess || q == cudaErrorNotReady) {
            s->queued = q == cudaErrorNotReady;
            s->state = SLOT_ENDED;
        } else { /* the record or the query refused: the pair goes untimed, counted failed */
            give_back(slot);
            counts.pending--;
            count_untimed(1);
        }
    }
    pthread_mutex_unlock(&lock);
}

void l2p_replays_harvest(size_t *added)
{
    size_t n = 0;
    pthread_mutex_lock(&lock);
    /* the watcher's thread: its context may not be the program's, so the pool's own device
     * is asked */
    if (n_made && l2p_life_gone(&pool_life)) forget_pool();
    for (size_t i = 0; i < n_made; i++) {
        replay_slot *s = &slots[i];
        if (s->state != SLOT_ENDED) continue;
        cudaError_t q = cudaEventQuery(s->second);
        if (q == cudaErrorNotReady) continue;
        float ms = 0;
        if (q == cudaSuccess && cudaEventElapsedTime(&ms, s->first, s->second) == cudaSuccess &&
            ms >= 0) {
            const char *name = s->queued ? labels[s->label] : host_labels[s->label];
            l2p_activity_add_replay(name, s->stamp, (uint64_t)((double)ms * 1e6));
            if (s->queued) counts.timed++;
            else counts.host++;
            n++;
        } else
            count_untimed(1);
        counts.pending--;
        give_back((int)i);
    }
    pthread_mutex_unlock(&lock);
    if (added) *added = n;
}

void l2p_replays_counts_get(l2p_replays_counts *out)
{
    pthread_mutex_lock(&lock);
    *out = counts;
    pthread_mutex_unlock(&lock);
}
