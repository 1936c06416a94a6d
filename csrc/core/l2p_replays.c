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
    cudaEvent_t first, second; /* made on first use, kept until a device reset forgets them */
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
/* The context the pool's events were made in: a device reset destroys them with the primary
 * context, and they are then forgotten, never used nor destroyed (l2p_replays_pool_fate). */
static struct {
    void *ctx;              /* its handle */
    unsigned long long id;  /* its id when the events were made (0: unknown) */
    int primary;            /* the device's primary context: the one a device reset destroys */
} pool;
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

l2p_replays_fate l2p_replays_pool_fate(size_t made, int primary, unsigned long long id_made,
                                      unsigned long long id_now, int same_ctx)
{
    if (!made) return L2P_REPLAYS_USE;
    if (primary && id_made && id_now != id_made) return L2P_REPLAYS_FORGET;
    return same_ctx ? L2P_REPLAYS_USE : L2P_REPLAYS_ELSEWHERE;
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
    pool.ctx = NULL;
    pool.id = 0;
    pool.primary = 0;
    generation++;
}

/* What to do with the pool for a replay in context `ctx` (NULL: the pool's own; the watcher's
 * harvest). Asks only the pool's primary context's id (its handle outlives a reset): nothing
 * is made, switched or entered, and a pool in a green or cuCtxCreate context is never
 * forgotten. The caller holds the lock. */
static l2p_replays_fate pool_fate(void *ctx)
{
    unsigned long long now = n_made && pool.primary ? l2p_context_id_of(pool.ctx) : 0;
    return l2p_replays_pool_fate(n_made, pool.primary, pool.id, now, !ctx || ctx == pool.ctx);
}

/* The pool forgotten where its context was reset since its events were made. */
static void forget_if_reset(void)
{
    if (pool_fate(NULL) == L2P_REPLAYS_FORGET) forget_pool();
}

/* A free slot with its events made, or -1 (the pool is full or an event could not be made:
 * *failed says which). The first events made note their context `ctx` (current on this
 * thread). The caller holds the lock. */
static int take_slot(void *ctx, int *failed)
{
    *failed = 0;
    if (n_free) return free_list[--n_free];
    if (n_made == L2P_REPLAYS_SLOTS) return -1;
    if (!n_made) {
        int device = -1;
        pool.ctx = ctx;
        pool.id = l2p_context_id_of(ctx);
        int mode = l2p_capture_relax(); /* the retain it asks with: never near a capture */
        pool.primary = l2p_context_is_primary(ctx, &device);
        l2p_capture_restore(mode);
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
    /* asked only where no capture is open on the stream: no call of ours near a capture */
    void *ctx = rc == cudaSuccess && cap == cudaStreamCaptureStatusNone
                    ? l2p_context_current_handle() : NULL;
    pthread_mutex_lock(&lock);
    if (rc != cudaSuccess || cap != cudaStreamCaptureStatusNone || !ctx) {
        /* capturing: an event here would join the program's graph; on the legacy stream while
         * another thread captures the query itself is refused (that capture goes on) */
        count_untimed(rc != cudaSuccess);
        pthread_mutex_unlock(&lock);
        return L2P_OK;
    }
    l2p_replays_fate fate = pool_fate(ctx);
    if (fate == L2P_REPLAYS_FORGET) forget_pool();
    int failed = 0, i = fate == L2P_REPLAYS_ELSEWHERE ? -1 : take_slot(ctx, &failed);
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
    forget_if_reset(); /* a reset between the begin and here: the pair's events are gone */
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
    forget_if_reset(); /* the watcher's thread: the pool's own context is asked, none made */
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
