/* See l2p_activity.h. */
#define _GNU_SOURCE
#include "l2p_activity.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti_activity.h>

#include "l2p_counters.h"
#include "l2p_cupti.h"

/* ---- pure parts ---- */

l2p_status l2p_activity_init(l2p_activity *a, uint32_t device)
{
    memset(a, 0, sizeof *a);
    a->device = device;
    a->keys = calloc(L2P_ACTIVITY_NAMES, sizeof *a->keys);
    a->ids = calloc(L2P_ACTIVITY_NAMES, sizeof *a->ids);
    a->names = calloc(L2P_ACTIVITY_NAMES, sizeof *a->names);
    a->lkeys = calloc(L2P_ACTIVITY_KEYS, sizeof *a->lkeys);
    a->lslots = calloc(L2P_ACTIVITY_KEYS, sizeof *a->lslots);
    if (!a->keys || !a->ids || !a->names || !a->lkeys || !a->lslots ||
        pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a->keys);
        free(a->ids);
        free(a->names);
        free(a->lkeys);
        free(a->lslots);
        memset(a, 0, sizeof *a);
        return l2p_fail(L2P_ERR_NO_MEMORY, "activity log: out of host memory");
    }
    a->names[L2P_ACTIVITY_OTHER] = strdup("(other kernels)");
    a->n_names = 1;
    a->n_lkeys = 1; /* id 0: "(other launches)" */
    return L2P_OK;
}

void l2p_activity_clear(l2p_activity *a)
{
    for (size_t i = 1; i < a->n_names; i++) free(a->names[i]);
    if (a->keys) memset(a->keys, 0, L2P_ACTIVITY_NAMES * sizeof *a->keys);
    a->n_names = a->names ? 1 : 0;
    a->n_keys = 0;
    if (a->lslots) memset(a->lslots, 0, L2P_ACTIVITY_KEYS * sizeof *a->lslots);
    a->n_lkeys = a->lkeys ? 1 : 0;
    a->n = 0;
    a->n_windows = 0;
    a->dropped = 0;
}

void l2p_activity_free(l2p_activity *a)
{
    if (!a->keys) return;
    l2p_activity_clear(a);
    free(a->names[L2P_ACTIVITY_OTHER]);
    free(a->recs);
    free(a->keys);
    free(a->ids);
    free(a->names);
    free(a->lkeys);
    free(a->lslots);
    pthread_mutex_destroy(&a->lock);
    memset(a, 0, sizeof *a);
}

/* The id of a name already kept (cut), or 0. Only on a key's first sight: a scan of the
 * names kept, which stay few. */
static uint32_t kept_name(const l2p_activity *a, const char *cut)
{
    for (size_t i = 1; i < a->n_names; i++)
        if (strcmp(a->names[i], cut) == 0) return (uint32_t)i;
    return 0;
}

/* The id of name (cut), interned where new; L2P_ACTIVITY_OTHER when the names are full. */
static uint32_t intern_name(l2p_activity *a, const char *name)
{
    char *copy = strndup(name ? name : "?", L2P_KERNEL_NAME_MAX - 1);
    if (!copy) return L2P_ACTIVITY_OTHER;
    uint32_t id = kept_name(a, copy);
    if (id) free(copy);
    else if (a->n_names >= L2P_ACTIVITY_NAMES * 3 / 4) {
        free(copy);
        id = L2P_ACTIVITY_OTHER;
    } else {
        id = (uint32_t)a->n_names++;
        a->names[id] = copy;
    }
    return id;
}

/* The name id of key (interned on first sight); L2P_ACTIVITY_OTHER when the table is full.
 * Keyed by CUPTI's pointer: every record of one kernel shares it, so a lookup costs one short
 * compare and no hashing of the text. A pointer is one kernel's only while its module is
 * loaded: one unloaded (XLA's autotuning loads, launches and unloads modules), the address can
 * come back as another kernel's name, so a key whose text changed is the new text's from then
 * on. Two kernels whose names agree up to the cut share an id, as their scans' names would. */
static uint32_t name_id(l2p_activity *a, const void *key, const char *name)
{
    size_t mask = L2P_ACTIVITY_NAMES - 1;
    size_t h = (size_t)(((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull) & mask;
    for (;; h = (h + 1) & mask) {
        if (a->keys[h] == key) {
            uint32_t id = a->ids[h]; /* OTHER: re-keyed once the names were full; stays so */
            if (id == L2P_ACTIVITY_OTHER ||
                strncmp(name ? name : "?", a->names[id], L2P_KERNEL_NAME_MAX - 1) == 0)
                return id;
            return a->ids[h] = intern_name(a, name); /* the address is another kernel's now */
        }
        if (!a->keys[h]) break;
    }
    if (a->n_keys >= L2P_ACTIVITY_NAMES * 3 / 4) return L2P_ACTIVITY_OTHER;
    uint32_t id = intern_name(a, name);
    if (id == L2P_ACTIVITY_OTHER) return id;
    a->keys[h] = key;
    a->ids[h] = id;
    a->n_keys++;
    return id;
}

/* The launch key id of (name, shape), interned on first sight; 0 once the table is 3/4 full
 * (those launches are compared as one "other" key). FNV-1a over the seven words. */
static uint32_t launch_key_id(l2p_activity *a, uint32_t name, const uint32_t shape[6])
{
    l2p_launch_key k = {.name = name};
    if (shape) memcpy(k.shape, shape, sizeof k.shape);
    uint64_t h = (1469598103934665603ull ^ k.name) * 1099511628211ull;
    for (int i = 0; i < 6; i++) h = (h ^ k.shape[i]) * 1099511628211ull;
    size_t mask = L2P_ACTIVITY_KEYS - 1;
    for (size_t s = (size_t)h & mask;; s = (s + 1) & mask) {
        uint32_t id = a->lslots[s];
        if (!id) {
            if (a->n_lkeys >= L2P_ACTIVITY_KEYS * 3 / 4) return 0;
            id = (uint32_t)a->n_lkeys++;
            a->lkeys[id] = k;
            a->lslots[s] = id; /* ids start at 1: 0 marks an empty slot */
            return id;
        }
        const l2p_launch_key *o = &a->lkeys[id];
        if (o->name == k.name && !memcmp(o->shape, k.shape, sizeof k.shape)) return id;
    }
}

/* The id of a window seen (interned; a linear scan: few distinct windows, see the header). */
static uint32_t window_id(l2p_activity *a, const l2p_window_seen *w)
{
    if (!w || !w->bytes) return 0;
    for (size_t i = 0; i < a->n_windows; i++)
        if (a->windows[i].base == w->base && a->windows[i].bytes == w->bytes)
            return (uint32_t)i + 1;
    if (a->n_windows == L2P_ACTIVITY_WINDOWS - 1) return L2P_ACTIVITY_WINDOWS;
    a->windows[a->n_windows++] = *w;
    return (uint32_t)a->n_windows;
}

/* The process's log (l2p_activity_begin) and whether it collects detached from CUPTI
 * (l2p_activity_detach): defined with the collecting, below. */
static l2p_activity process_log;
static int detached;         /* read without the lock by the clock and the harvest: atomic */
static uint64_t detached_at; /* the host's clock at the detach */
static uint64_t host_ns(void);

/* Detached, only the replays' pairs of the host's clock go into the process's log. Asked under
 * the log's lock, which the detach holds while it trims CUPTI's records: a buffer CUPTI's own
 * thread delivers as the log detaches cannot land after the trim. A pair begun before the
 * detach (another thread's) carries a stamp of CUPTI's clock, which cannot be compared with
 * the host's: whatever that clock's zero, the stamp falls outside [detached_at, now] of the
 * host's (CUPTI's Unix-epoch stamps on Linux lie above it; a clock of the host's zero, below
 * detached_at). */
static int refused_detached(const l2p_activity *a, l2p_record_origin origin, uint64_t start)
{
    if (a != &process_log || !__atomic_load_n(&detached, __ATOMIC_ACQUIRE)) return 0;
    return origin != L2P_RECORD_REPLAY || start < detached_at || start > host_ns();
}

void l2p_activity_add_from(l2p_activity *a, l2p_record_origin origin, uint32_t device,
                           uint64_t start, uint64_t end, uint32_t stream, const void *key,
                           const char *name, const uint32_t shape[6],
                           const l2p_window_seen *window)
{
    if (device != a->device) return;
    pthread_mutex_lock(&a->lock);
    if (refused_detached(a, origin, start)) {
        pthread_mutex_unlock(&a->lock);
        return;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 65536;
        l2p_kernel_record *r = realloc(a->recs, cap * sizeof *r);
        if (!r) {
            a->dropped++;
            pthread_mutex_unlock(&a->lock);
            return;
        }
        a->recs = r;
        a->cap = cap;
    }
    l2p_kernel_record *r = &a->recs[a->n++];
    r->start = start;
    r->end = end > start ? end : start;
    r->stream = stream;
    r->name = key ? name_id(a, key, name) : L2P_ACTIVITY_OTHER;
    r->key = r->name == L2P_ACTIVITY_OTHER ? 0 : launch_key_id(a, r->name, shape);
    r->window = window_id(a, window);
    r->origin = (uint32_t)origin;
    pthread_mutex_unlock(&a->lock);
}

void l2p_activity_add(l2p_activity *a, uint32_t device, uint64_t start, uint64_t end,
                      uint32_t stream, const void *key, const char *name,
                      const uint32_t shape[6], const l2p_window_seen *window)
{
    l2p_activity_add_from(a, L2P_RECORD_EAGER, device, start, end, stream, key, name, shape,
                          window);
}

/* The block of stamp t: the b with bounds[b] <= t < bounds[b+1], or -1 (binary search). */
static long block_of(const uint64_t *bounds, size_t n_bounds, uint64_t t)
{
    if (t < bounds[0] || t >= bounds[n_bounds - 1]) return -1;
    size_t lo = 0, hi = n_bounds - 1; /* bounds[lo] <= t < bounds[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (bounds[mid] <= t) lo = mid;
        else hi = mid;
    }
    return (long)lo;
}

/* Whether a record of this origin is summed under this timing source. */
static int timed_by(uint32_t origin, l2p_timing_source timing)
{
    if (origin == L2P_RECORD_NODE) return timing == L2P_TIMING_NODES;
    if (origin == L2P_RECORD_REPLAY) return timing == L2P_TIMING_EVENTS;
    return 1;
}

l2p_status l2p_activity_blocks(const l2p_activity *a, const uint64_t *bounds, size_t n_bounds,
                               l2p_timing_source timing, double *gpu_ns, double *by_name,
                               size_t n_names, double *key_ns, double *key_n, size_t n_keys,
                               double *graph_nodes, size_t *spanning)
{
    if (n_bounds < 2) return l2p_fail(L2P_ERR_VALUE, "bounds: need at least 2, got %zu", n_bounds);
    for (size_t i = 1; i < n_bounds; i++)
        if (bounds[i] <= bounds[i - 1])
            return l2p_fail(L2P_ERR_VALUE, "bounds: not increasing at %zu", i);
    size_t nb = n_bounds - 1;
    memset(gpu_ns, 0, nb * sizeof *gpu_ns);
    if (by_name) memset(by_name, 0, n_names * nb * sizeof *by_name);
    if (key_ns) memset(key_ns, 0, n_keys * nb * sizeof *key_ns);
    if (key_n) memset(key_n, 0, n_keys * nb * sizeof *key_n);
    if (graph_nodes) memset(graph_nodes, 0, nb * sizeof *graph_nodes);
    if (spanning) *spanning = 0;
    for (size_t i = 0; i < a->n; i++) {
        const l2p_kernel_record *r = &a->recs[i];
        long b = block_of(bounds, n_bounds, r->start);
        if (b < 0) continue;
        if (!timed_by(r->origin, timing)) {
            if (graph_nodes && r->origin == L2P_RECORD_NODE) graph_nodes[b] += 1;
            continue;
        }
        if (spanning && r->origin != L2P_RECORD_REPLAY && r->end > bounds[b + 1]) {
            (*spanning)++;
            continue;
        }
        double d = (double)(r->end - r->start);
        gpu_ns[b] += d;
        if (by_name && r->name < n_names) by_name[(size_t)r->name * nb + (size_t)b] += d;
        if (r->key < n_keys) {
            size_t at = (size_t)r->key * nb + (size_t)b;
            if (key_ns) key_ns[at] += d;
            if (key_n) key_n[at] += 1;
        }
    }
    return L2P_OK;
}

l2p_status l2p_activity_block_windows(const l2p_activity *a, const uint64_t *bounds,
                                      size_t n_bounds, uint64_t *counts)
{
    if (n_bounds < 2) return l2p_fail(L2P_ERR_VALUE, "bounds: need at least 2, got %zu", n_bounds);
    for (size_t i = 1; i < n_bounds; i++)
        if (bounds[i] <= bounds[i - 1])
            return l2p_fail(L2P_ERR_VALUE, "bounds: not increasing at %zu", i);
    const size_t cols = L2P_ACTIVITY_WINDOWS + 1;
    memset(counts, 0, (n_bounds - 1) * cols * sizeof *counts);
    for (size_t i = 0; i < a->n; i++) {
        const l2p_kernel_record *r = &a->recs[i];
        long b = block_of(bounds, n_bounds, r->start);
        if (b < 0 || r->origin == L2P_RECORD_REPLAY || r->end > bounds[b + 1]) continue;
        counts[(size_t)b * cols + (r->window <= L2P_ACTIVITY_WINDOWS ? r->window : 0)]++;
    }
    return L2P_OK;
}

size_t l2p_activity_trim(l2p_activity *a, uint64_t before)
{
    size_t kept = 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->recs[i].start >= before) a->recs[kept++] = a->recs[i];
    size_t dropped = a->n - kept;
    a->n = kept;
    return dropped;
}

/* ---- the process's log: CUPTI's activity API ---- */

typedef CUptiResult (*register_fn)(CUpti_BuffersCallbackRequestFunc,
                                   CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*kind_fn)(CUpti_ActivityKind);
typedef CUptiResult (*flush_fn)(uint32_t);
typedef CUptiResult (*next_fn)(uint8_t *, size_t, CUpti_Activity **);
typedef CUptiResult (*stamp_fn)(uint64_t *);
typedef CUptiResult (*attrs_fn)(uint8_t);

static struct {
    register_fn reg;
    kind_fn enable, disable;
    flush_fn flush_all;
    next_fn next;
    stamp_fn stamp;
    attrs_fn attributes; /* NULL: this CUPTI cannot put launch attributes in a record */
} cupti;

static pthread_mutex_t process_lock = PTHREAD_MUTEX_INITIALIZER; /* begin / end */
static int registered;      /* the buffer callbacks are CUPTI's until it is finalized: */
static unsigned registered_in; /* registered in this generation (l2p_cupti_generation) */
static int recording;       /* CONCURRENT_KERNEL is enabled now */
static int graph_records;   /* GRAPH_TRACE is enabled now (l2p_activity_graphs) */
static int attributes;      /* launch attributes are collected now (l2p_activity_attributes) */

#define BUFFER_BYTES ((size_t)4 << 20)

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    /* CUPTI wants 8-byte-aligned buffers. */
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0; /* as many as fit */
}

/* One record per graph launch, its first node's start to its last node's end, kept as a
 * kernel named "graph:<graph id>" (launch shape all zero). The key is the id with a bit no
 * user-space pointer (CUPTI's kernel name keys) has on x86-64 or aarch64, so that graphs and
 * kernels never share a name slot. The fields read sit where every version of the record has
 * them. */
static void add_graph_record(const CUpti_ActivityGraphTrace2 *g)
{
    char name[32];
    /* graph records outlive the collecting (l2p_activity_end leaves them on): dropped here */
    if (!process_log.active || (!g->start && !g->end)) return;
    snprintf(name, sizeof name, "graph:%u", (unsigned)g->graphId);
    const void *key = (const void *)(((uintptr_t)1 << 63) | ((uintptr_t)g->graphId << 4));
    l2p_activity_add(&process_log, g->deviceId, g->start, g->end, g->streamId, key, name, NULL,
                     NULL);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)ctx;
    (void)stream_id;
    (void)size;
    CUpti_Activity *rec = NULL;
    /* detached (l2p_activity_detach): a buffer CUPTI delivers late (at its finalize) holds
     * stamps of its clock, which the log's host clock cannot be compared with */
    if (l2p_activity_detached()) valid = 0;
    /* Only the fields every kernel record version shares (kind .. name) are read: the CUPTI in
     * the process may be an older one than the headers (PyTorch's). */
    while (valid && cupti.next && cupti.next(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
            add_graph_record((const CUpti_ActivityGraphTrace2 *)rec);
            continue;
        }
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
            rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        /* grid and block come before the name in every version's layout */
        const uint32_t shape[6] = {(uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ,
                                   (uint32_t)k->blockX, (uint32_t)k->blockY,
                                   (uint32_t)k->blockZ};
        /* The window pointer sits at one offset in every kernel record from version 6 on, and
         * a CUPTI that has cuptiActivityEnableLaunchAttributes writes version 10 or later; the
         * pointer is CUPTI's, valid while the buffer is ours (read here, copied). NULL: not
         * collected, or the kernel ran under no window. */
        l2p_window_seen seen = {0, 0};
        if (cupti.attributes && k->pAccessPolicyWindow) {
            seen.base = (uint64_t)(uintptr_t)k->pAccessPolicyWindow->base_ptr;
            seen.bytes = (uint64_t)k->pAccessPolicyWindow->num_bytes;
        }
        /* graphId sits at one offset from version 5 on, before the window pointer: read where
         * the window's offset is trusted (a CUPTI of CUDA 12 or newer); elsewhere every kernel
         * counts as eager, and the watcher does not time graphs by events (l2p_replays.h) */
        l2p_record_origin origin =
            cupti.attributes && k->graphId ? L2P_RECORD_NODE : L2P_RECORD_EAGER;
        l2p_activity_add_from(&process_log, origin, k->deviceId, k->start, k->end, k->streamId,
                              k->name, k->name, shape, &seen);
    }
    free(buffer);
}

/* Resolve the activity entry points once; L2P_ERR_NOT_SUPPORTED without CUPTI. */
static l2p_status resolve(void)
{
    void *lib = NULL;
    l2p_cupti_reclaim(); /* every use of ours comes here first: CUPTI attaches again */
    l2p_status st = l2p_cupti_library(&lib);
    if (st != L2P_OK) return st;
    if (cupti.reg) return L2P_OK;
    cupti.reg = (register_fn)dlsym(lib, "cuptiActivityRegisterCallbacks");
    cupti.enable = (kind_fn)dlsym(lib, "cuptiActivityEnable");
    cupti.disable = (kind_fn)dlsym(lib, "cuptiActivityDisable");
    cupti.flush_all = (flush_fn)dlsym(lib, "cuptiActivityFlushAll");
    cupti.next = (next_fn)dlsym(lib, "cuptiActivityGetNextRecord");
    cupti.stamp = (stamp_fn)dlsym(lib, "cuptiGetTimestamp");
    cupti.attributes = (attrs_fn)dlsym(lib, "cuptiActivityEnableLaunchAttributes");
    if (!cupti.reg || !cupti.enable || !cupti.disable || !cupti.flush_all || !cupti.next ||
        !cupti.stamp) {
        cupti.reg = NULL;
        return l2p_fail(L2P_ERR_NOT_SUPPORTED, "CUPTI at %s lacks the activity API",
                        l2p_cupti_path() ? l2p_cupti_path() : "?");
    }
    return L2P_OK;
}

/* Turn one kind of record on or off (*flag: whether it is on); the caller holds
 * process_lock. */
static l2p_status set_kind(CUpti_ActivityKind kind, const char *what, int *flag, int on)
{
    if (*flag == !!on) return L2P_OK;
    CUptiResult rc = on ? cupti.enable(kind) : cupti.disable(kind);
    if (rc != CUPTI_SUCCESS)
        return l2p_cupti_fail(rc, on ? "cuptiActivityEnable" : "cuptiActivityDisable", what);
    *flag = !!on;
    return L2P_OK;
}

static l2p_status set_recording(int on)
{
    return set_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", &recording, on);
}

l2p_status l2p_activity_begin(int device)
{
    l2p_status st = resolve();
    if (st != L2P_OK) return st;
    pthread_mutex_lock(&process_lock);
    /* again under the lock, which a release holds throughout: one asked between resolve's
     * reclaim and here is withdrawn before the records start */
    l2p_cupti_reclaim();
    if (!process_log.keys && (st = l2p_activity_init(&process_log, (uint32_t)device)) != L2P_OK)
        goto out;
    if (process_log.active) {
        st = l2p_fail(L2P_ERR_STATE, "activity: already collecting in this process");
        goto out;
    }
    pthread_mutex_lock(&process_log.lock);
    l2p_activity_clear(&process_log);
    process_log.device = (uint32_t)device;
    pthread_mutex_unlock(&process_log.lock);
    CUptiResult rc = CUPTI_SUCCESS;
    if (!registered || registered_in != l2p_cupti_generation())
        rc = cupti.reg(buffer_requested, buffer_completed);
    if (rc != CUPTI_SUCCESS) {
        st = l2p_cupti_fail(rc, "cuptiActivityRegisterCallbacks", NULL);
        goto out;
    }
    registered = 1;
    registered_in = l2p_cupti_generation();
    if ((st = set_recording(1)) != L2P_OK) goto out;
    process_log.active = 1;
out:
    pthread_mutex_unlock(&process_lock);
    return st;
}

l2p_status l2p_activity_flush(void)
{
    if (l2p_activity_detached()) return L2P_OK; /* nothing of CUPTI's to deliver */
    if (!cupti.flush_all) return l2p_fail(L2P_ERR_STATE, "activity: never started");
    l2p_cupti_reclaim();
    CUptiResult rc = cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    return rc == CUPTI_SUCCESS ? L2P_OK : l2p_cupti_fail(rc, "cuptiActivityFlushAll", NULL);
}

void l2p_activity_end(void)
{
    pthread_mutex_lock(&process_lock);
    if (process_log.active && l2p_activity_detached()) {
        __atomic_store_n(&detached, 0, __ATOMIC_RELEASE); /* CUPTI is not ours to call now */
        process_log.active = 0;
    } else if (process_log.active) {
        (void)cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        (void)set_recording(0);
        recording = 0; /* what failed to disable is CUPTI's to drop at exit */
        if (attributes) (void)cupti.attributes(0);
        attributes = 0;
        /* Graph records stay on: whether turning them off while graphs made under them live
         * is safe was not measured (turning them on beside older graphs crashed); their
         * records are dropped from here on (add_graph_record). */
        (void)cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        process_log.active = 0;
    }
    pthread_mutex_unlock(&process_lock);
}

l2p_status l2p_activity_record(int on)
{
    pthread_mutex_lock(&process_lock);
    /* detached: no kernel is recorded, on or off (the replays' pairs go on) */
    l2p_status st = !process_log.active ? l2p_fail(L2P_ERR_STATE, "activity: not collecting")
                    : l2p_activity_detached() ? L2P_OK : set_recording(on);
    pthread_mutex_unlock(&process_lock);
    return st;
}

l2p_status l2p_activity_graphs(int on)
{
    pthread_mutex_lock(&process_lock);
    l2p_status st =
        !process_log.active ? l2p_fail(L2P_ERR_STATE, "activity: not collecting")
        : l2p_activity_detached()
            ? l2p_fail(L2P_ERR_STATE, "activity: detached from CUPTI (no graph records)")
            : set_kind(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, "GRAPH_TRACE", &graph_records, on);
    pthread_mutex_unlock(&process_lock);
    return st;
}

l2p_status l2p_activity_attributes(int on)
{
    pthread_mutex_lock(&process_lock);
    l2p_status st = L2P_OK;
    if (!process_log.active) st = l2p_fail(L2P_ERR_STATE, "activity: not collecting");
    else if (l2p_activity_detached())
        st = l2p_fail(L2P_ERR_STATE, "activity: detached from CUPTI (no launch attributes)");
    else if (!cupti.attributes)
        st = l2p_fail(L2P_ERR_NOT_SUPPORTED, "CUPTI at %s cannot record launch attributes "
                      "(no cuptiActivityEnableLaunchAttributes: CUDA 12.x's or newer needed)",
                      l2p_cupti_path() ? l2p_cupti_path() : "?");
    else if (attributes != !!on) {
        CUptiResult rc = cupti.attributes((uint8_t)!!on);
        if (rc != CUPTI_SUCCESS)
            st = l2p_cupti_fail(rc, "cuptiActivityEnableLaunchAttributes", NULL);
        else attributes = !!on;
    }
    pthread_mutex_unlock(&process_lock);
    return st;
}

l2p_status l2p_activity_release_cupti(l2p_cupti_hold *state, const char **why,
                                      const l2p_cupti_handover *handover)
{
    l2p_status st = L2P_OK;
    /* held throughout: a begin on another thread waits, then reclaims under this lock */
    pthread_mutex_lock(&process_lock);
    *state = L2P_CUPTI_HELD;
    if (process_log.active && !l2p_activity_detached()) *why = "the activity records";
    /* turned on while no executable graph existed: whether graphs made under them survive
     * CUPTI's detaching was not measured */
    else if (graph_records) *why = "CUPTI's graph records";
    else if (l2p_counters_session_open()) *why = "a counter session";
    else st = l2p_cupti_release(state, why, handover);
    pthread_mutex_unlock(&process_lock);
    return st;
}

static uint64_t host_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int l2p_activity_detached(void) { return __atomic_load_n(&detached, __ATOMIC_ACQUIRE); }

l2p_status l2p_activity_detach(void)
{
    l2p_status st = L2P_OK;
    pthread_mutex_lock(&process_lock);
    if (!process_log.active || l2p_activity_detached())
        st = l2p_fail(L2P_ERR_STATE, "activity: not collecting with CUPTI");
    else if (graph_records)
        st = l2p_fail(L2P_ERR_STATE, "activity: CUPTI's graph records stay on to the end");
    if (st != L2P_OK) goto out;
    /* as l2p_activity_end: whatever CUPTI holds is delivered, then nothing more is asked */
    (void)cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    (void)set_recording(0);
    recording = 0;
    if (attributes) (void)cupti.attributes(0);
    attributes = 0;
    (void)cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&process_log.lock);
    /* stamps of two clocks never share a log: every record so far is CUPTI's */
    (void)l2p_activity_trim(&process_log, UINT64_MAX);
    detached_at = host_ns();
    __atomic_store_n(&detached, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&process_log.lock);
out:
    pthread_mutex_unlock(&process_lock);
    return st;
}

l2p_status l2p_activity_now(uint64_t *ns)
{
    if (l2p_activity_detached()) {
        *ns = host_ns();
        return L2P_OK;
    }
    l2p_status st = resolve();
    if (st != L2P_OK) return st;
    CUptiResult rc = cupti.stamp(ns);
    return rc == CUPTI_SUCCESS ? L2P_OK : l2p_cupti_fail(rc, "cuptiGetTimestamp", NULL);
}

l2p_activity *l2p_activity_log(void) { return &process_log; }

void l2p_activity_add_replay(const char *label, uint64_t start, uint64_t ns)
{
    /* a tag bit no user-space pointer has (as add_graph_record's): a label never shares a
     * name slot with a kernel's name pointer */
    const void *key = (const void *)((uintptr_t)label | ((uintptr_t)1 << 62));
    if (!process_log.active) return;
    /* detached, a pair begun before it is dropped (refused_detached) */
    l2p_activity_add_from(&process_log, L2P_RECORD_REPLAY, process_log.device, start,
                          start + ns, 0, key, label, NULL, NULL);
}
void l2p_activity_lock(l2p_activity *a) { pthread_mutex_lock(&a->lock); }
void l2p_activity_unlock(l2p_activity *a) { pthread_mutex_unlock(&a->lock); }
