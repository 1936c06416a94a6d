/* See l2p_cupti.h. */
#define _GNU_SOURCE
#include "l2p_cupti.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stdatomic.h>

#include <cupti.h> /* the callback API's types; its calls come through dlsym */

#ifndef L2P_CUDA_HOME
#define L2P_CUDA_HOME "/usr/local/cuda"
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void *library;
static char load_error[600];
static char loaded_path[512]; /* the file the handle is, for messages and the diagnostic */

/* dl_iterate_phdr: the first libcupti already mapped into the process. */
static int find_mapped(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    const char *name = info->dlpi_name, *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (!base || strncmp(base, "libcupti.so", 11) != 0) return 0;
    snprintf((char *)out, sizeof loaded_path, "%s", name);
    return 1;
}

/* The CUPTI this process already holds (PyTorch's kineto links libcupti.so.12 or .13 from
 * NVIDIA's wheels), if any. A second copy of CUPTI in one process would attach to the same
 * driver and runtimes beside the first; CUPTI's one-subscriber rule and its bookkeeping of
 * modules and callbacks hold within one copy only. L2P_CUPTI_IGNORE_MAPPED=1 (diagnostic:
 * tools/investigations/launchlog-diag) skips this and loads by the paths below, as before. */
static void *open_mapped(void)
{
    const char *ignore = getenv("L2P_CUPTI_IGNORE_MAPPED");
    char path[sizeof loaded_path] = "";
    if (ignore && strcmp(ignore, "0") != 0) return NULL;
    if (!dl_iterate_phdr(find_mapped, path) || !path[0]) return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    return h ? h : dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void *open_cupti(void)
{
    const char *env = getenv("L2P_CUPTI_LIBRARY"), *home = getenv("CUDA_HOME");
    const char *names[] = {"libcupti.so.13", "libcupti.so", "libcupti.so.12"};
    const char *dirs[] = {"lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"};
    char path[512];
    void *h = open_mapped();
    if (!h && env) h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    for (int pass = 0; !h && pass < 2; pass++) {
        const char *root = pass == 0 ? home : L2P_CUDA_HOME;
        for (size_t i = 0; root && !h && i < sizeof dirs / sizeof dirs[0]; i++) {
            snprintf(path, sizeof path, "%s/%s/libcupti.so", root, dirs[i]);
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    return h;
}

static _Atomic int load_tried; /* load ran (read without loading: the release) */

static void load(void)
{
    struct link_map *map = NULL;

    library = open_cupti();
    if (!library)
        snprintf(load_error, sizeof load_error,
                 "CUPTI (libcupti.so) was not found: install the CUDA toolkit's CUPTI or the "
                 "nvidia-cuda-cupti package, or set L2P_CUPTI_LIBRARY to its path (%s)",
                 dlerror());
    else if (dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name)
        snprintf(loaded_path, sizeof loaded_path, "%s", map->l_name);
    atomic_store(&load_tried, 1);
}

l2p_status l2p_cupti_library(void **handle)
{
    pthread_once(&load_once, load);
    *handle = library;
    return library ? L2P_OK : l2p_fail(L2P_ERR_NOT_SUPPORTED, "%s", load_error);
}

const char *l2p_cupti_path(void)
{
    pthread_once(&load_once, load);
    return library ? loaded_path : NULL;
}

static const char *result_text(CUptiResult rc)
{
    typedef CUptiResult (*get_string_fn)(CUptiResult, const char **);
    const char *text = NULL;
    get_string_fn get = library ? (get_string_fn)dlsym(library, "cuptiGetResultString") : NULL;
    if (!get || get(rc, &text) != CUPTI_SUCCESS || !text) text = "?";
    return text;
}

l2p_status l2p_cupti_fail(int code, const char *call, const char *detail)
{
    CUptiResult rc = (CUptiResult)code;
    const char *text = result_text(rc), *open = detail ? " (" : "", *close = detail ? ")" : "";
    l2p_status st = L2P_ERR_NOT_SUPPORTED;
    if (!detail) detail = "";
    if (rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
        rc == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
        l2p_fail(st, "%s failed: %s%s%s%s. Profiling counters are restricted to "
                 "administrators on this machine: run as root, or load the driver with "
                 "NVreg_RestrictProfilingToAdminUsers=0", call, text, open, detail, close);
    else if (rc == CUPTI_ERROR_NOT_SUPPORTED || rc == CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED ||
             rc == CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED)
        l2p_fail(st, "%s failed: %s%s%s%s (this device or mode cannot be profiled: vGPU, MIG, "
                 "CMP, or a driver without profiling support)", call, text, open, detail, close);
    else if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        l2p_fail(st, "%s failed: %s%s%s%s: CUPTI takes one subscriber per process, and another "
                 "tool (Nsight Systems or Compute, a profiler such as torch.profiler, cuda-gdb, "
                 "compute-sanitizer) holds it", call, text, open, detail, close);
    else
        st = l2p_fail(L2P_ERR_CUPTI, "%s failed: CUPTI error %d: %s%s%s%s", call, code, text,
                      open, detail, close);
    /* l2p_fail cleared the codes; record CUPTI's. */
    ((l2p_error *)l2p_last_error())->cupti_code = code;
    snprintf(((l2p_error *)l2p_last_error())->call, sizeof l2p_last_error()->call, "%s", call);
    return st;
}

/* ---- the one subscriber ---- */

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*subscribe_v2_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                       CUpti_SubscriberParams *);
typedef CUptiResult (*unsubscribe_fn)(CUpti_SubscriberHandle);
typedef CUptiResult (*enable_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                 CUpti_CallbackId);
typedef CUptiResult (*finalize_fn)(void);
typedef CUptiResult (*domain_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);

typedef struct {
    subscribe_fn subscribe;
    subscribe_v2_fn subscribe_v2; /* NULL before CUPTI 12.8: it names the other subscriber */
    unsubscribe_fn unsubscribe;
    enable_fn enable;
    finalize_fn finalize; /* L2P_CUPTI_FINALIZE and the release */
    domain_fn enable_domain; /* the release's subscriber takes whole domains */
} callback_calls;

static pthread_mutex_t sub_lock = PTHREAD_MUTEX_INITIALIZER; /* attach and detach */
static CUpti_SubscriberHandle subscriber;                    /* under sub_lock */
static size_t n_attached;                                    /* under sub_lock */
/* Read by the dispatcher without the lock: a slot holds a client or NULL. */
static l2p_cupti_client *_Atomic clients[L2P_CUPTI_MAX_CLIENTS];
static _Thread_local int in_callback; /* a driver call made by a handler itself */

/* The release (l2p_cupti.h): L2P_CUPTI_HELD, RELEASING, WITHDRAWN, RUNNING (a thread is inside
 * cuptiFinalize), RELEASED; in the low three bits of one word whose upper bits count the
 * threads inside a client's handler. Both in one word so that the finalize's move (RELEASING
 * with no handler running, to RUNNING) and a handler's way in (only while HELD) are each one
 * compare-and-swap: a handler that began while held (a capture begin on its way to the
 * handed client) is never finalized under, and withdraws the release before it leaves. The
 * state moves from RELEASING only by compare-and-swap: to RUNNING by the first outermost
 * call's exit, to WITHDRAWN by a vetoing call, back to HELD by a reclaim. */
enum { RELEASE_RUNNING = L2P_CUPTI_FINALIZING, STATE_BITS = 7, IN_HANDLER = 8 };
static _Atomic long release_word = L2P_CUPTI_HELD;
static _Atomic unsigned generation;
typedef int (*veto_fn)(unsigned cbid);
static _Atomic(finalize_fn) release_finalize; /* set before RELEASING is stored */
static _Atomic(veto_fn) release_veto;         /* likewise: the handed client's vetoes, or NULL */
/* Vetoing calls that reached a request (withdrawn by them, or found withdrawn already: their
 * captures were made under CUPTI, never counted by the client), and those that met a finalize
 * under way and outwaited VETO_WAIT_NS. */
static atomic_ulong vetoes_seen, vetoes_late;
#define VETO_WAIT_NS 50000000L
static l2p_cupti_client *handed;           /* under sub_lock: detached, still in its slot */
/* This thread's depth in the calls seen since the release's subscriber came: the runtime's
 * calls make driver calls inside them, and an inner call's exit is no place to finalize (the
 * outer call is still inside CUDA). A thread already inside a call when the domains came sees
 * an exit before any entry, which is never taken as outermost; but a driver call made inside
 * such a call (its entry seen) is: that case is not told apart. */
static _Thread_local int release_depth;
static _Thread_local unsigned release_depth_of; /* the request the depth counts in */
static _Atomic unsigned release_serial;         /* one more at each request */

static int release_state(void) { return (int)(atomic_load(&release_word) & STATE_BITS); }

/* from -> to, the handlers' count kept; 0 where the state was not `from`. */
static int move_state(int from, int to)
{
    long w = atomic_load(&release_word);
    while ((w & STATE_BITS) == from)
        if (atomic_compare_exchange_weak(&release_word, &w, (w & ~(long)STATE_BITS) | to))
            return 1;
    return 0;
}

/* A handler's way in: only while held. */
static int handlers_enter(void)
{
    long w = atomic_load(&release_word);
    while ((w & STATE_BITS) == L2P_CUPTI_HELD)
        if (atomic_compare_exchange_weak(&release_word, &w, w + IN_HANDLER)) return 1;
    return 0;
}

int l2p_cupti_withdraw(void) { return move_state(L2P_CUPTI_RELEASING, L2P_CUPTI_WITHDRAWN); }

void l2p_cupti_vetoes(unsigned long *seen, unsigned long *late)
{
    *seen = atomic_load(&vetoes_seen);
    *late = atomic_load(&vetoes_late);
}

static long since_ns(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* A vetoing call's entry: the release withdrawn. Where a finalize is already under way (another
 * thread's exit found no handler inside), the call waits for it to end, so that its capture
 * begins with CUPTI gone; a while at most, since a finalize that waited for the callbacks in
 * flight would wait for this one: one that outwaits it goes on, counted. */
static void veto(void)
{
    struct timespec t0;
    atomic_fetch_add(&vetoes_seen, 1);
    if (l2p_cupti_withdraw() || release_state() != RELEASE_RUNNING) return;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (release_state() == RELEASE_RUNNING) {
        if (since_ns(&t0) > VETO_WAIT_NS) {
            atomic_fetch_add(&vetoes_late, 1);
            return;
        }
        sched_yield();
    }
}

/* At the exit of an outermost call, on the program's thread that made it: detach. The
 * subscriber goes with CUPTI; whoever reclaims next forgets it (the lock is not taken here: a
 * thread holding it may be waiting inside CUPTI for this callback). A vetoing call's entry
 * withdraws instead (veto). */
static void release_at_exit(CUpti_CallbackDomain domain, unsigned cbid, const void *data)
{
    long expect = L2P_CUPTI_RELEASING; /* and no handler inside */
    unsigned serial = atomic_load(&release_serial);
    int enter = ((const CUpti_CallbackData *)data)->callbackSite == CUPTI_API_ENTER;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
    veto_fn vetoes = atomic_load(&release_veto);
    if (enter && domain == CUPTI_CB_DOMAIN_DRIVER_API && vetoes && vetoes(cbid)) {
        veto();
        return;
    }
    if (release_depth_of != serial) release_depth = 0, release_depth_of = serial;
    if (enter) {
        release_depth++;
        return;
    }
    if (release_depth <= 0 || --release_depth > 0) return; /* inner, or entered unseen */
    if (!atomic_compare_exchange_strong(&release_word, &expect, RELEASE_RUNNING)) return;
    (void)atomic_load(&release_finalize)();
    atomic_fetch_add(&generation, 1);
    atomic_store(&release_word, L2P_CUPTI_RELEASED);
}

static void CUPTIAPI dispatch(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const void *data)
{
    (void)userdata;
    if (in_callback) return; /* a driver call made by a handler itself */
    if (!handlers_enter()) { /* a release asked: no client is attached (one may be handed) */
        release_at_exit(domain, (unsigned)cbid, data);
        return;
    }
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        in_callback = 1;
        for (size_t i = 0; i < L2P_CUPTI_MAX_CLIENTS; i++) {
            l2p_cupti_client *c = atomic_load(&clients[i]);
            if (c) c->handler((unsigned)cbid, data);
        }
        in_callback = 0;
    }
    atomic_fetch_sub(&release_word, IN_HANDLER);
}

static l2p_status callback_api(const callback_calls **out)
{
    static callback_calls c;
    void *lib;
    L2P_TRY(l2p_cupti_library(&lib));
    c.subscribe = (subscribe_fn)dlsym(lib, "cuptiSubscribe");
    c.subscribe_v2 = (subscribe_v2_fn)dlsym(lib, "cuptiSubscribe_v2");
    c.unsubscribe = (unsubscribe_fn)dlsym(lib, "cuptiUnsubscribe");
    c.enable = (enable_fn)dlsym(lib, "cuptiEnableCallback");
    c.finalize = (finalize_fn)dlsym(lib, "cuptiFinalize");
    c.enable_domain = (domain_fn)dlsym(lib, "cuptiEnableDomain");
    if (!c.subscribe || !c.unsubscribe || !c.enable)
        return l2p_fail(L2P_ERR_NOT_SUPPORTED, "CUPTI lacks its callback API (cuptiSubscribe, "
                        "cuptiEnableCallback)");
    *out = &c;
    return L2P_OK;
}

static l2p_status subscribe(const callback_calls *c)
{
    CUpti_SubscriberHandle h = NULL;
    char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
    CUptiResult rc = CUPTI_SUCCESS;
    if (c->subscribe_v2) {
        CUpti_SubscriberParams p = {CUpti_SubscriberParams_STRUCT_SIZE};
        p.subscriberName = "l2persist";
        p.oldSubscriberName = other;
        p.oldSubscriberSize = sizeof other;
        rc = c->subscribe_v2(&h, dispatch, NULL, &p);
    }
    /* No v2, or a CUPTI older than our headers that refuses their struct size (the CUPTI
     * PyTorch maps may be a 12.x one): the plain call. */
    if (!c->subscribe_v2 || rc == CUPTI_ERROR_INVALID_PARAMETER) {
        other[0] = '\0';
        rc = c->subscribe(&h, dispatch, NULL);
    }
    if (rc != CUPTI_SUCCESS)
        return l2p_cupti_fail((int)rc, "cuptiSubscribe", other[0] ? other : NULL);
    subscriber = h;
    return L2P_OK;
}

/* Switch off the client's enabled ids. */
static void disable_ids(const callback_calls *c, l2p_cupti_client *client)
{
    for (size_t i = 0; i < client->n_cbids; i++)
        if (client->enabled & (1ul << i))
            (void)c->enable(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, client->cbids[i]);
    client->enabled = 0;
}

/* Enable the client's ids; an optional one CUPTI refuses is left off. */
static l2p_status enable_ids(const callback_calls *c, l2p_cupti_client *client)
{
    for (size_t i = 0; i < client->n_cbids; i++) {
        CUptiResult rc = c->enable(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, client->cbids[i]);
        if (rc == CUPTI_SUCCESS) client->enabled |= 1ul << i;
        else if (i < client->n_required) return l2p_cupti_fail((int)rc, "cuptiEnableCallback",
                                                                client->name);
    }
    return L2P_OK;
}

/* The client's enabled ids on again (after a domain was turned off). */
static void reenable_ids(const callback_calls *c, l2p_cupti_client *client)
{
    for (size_t i = 0; i < client->n_cbids; i++)
        if (client->enabled & (1ul << i))
            (void)c->enable(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, client->cbids[i]);
}

static void unsubscribe_if_last(const callback_calls *c, unsigned flags)
{
    if (n_attached || !subscriber) return;
    (void)c->unsubscribe(subscriber);
    subscriber = NULL;
    /* NVIDIA advises cuptiFinalize from an API exit callback, where no other thread is inside
     * CUPTI: a diagnostic only, and it undoes the counters' profiler initialisation. */
    if ((flags & L2P_CUPTI_FINALIZE) && c->finalize) {
        (void)c->finalize();
        atomic_fetch_add(&generation, 1);
    }
}

/* ---- the release ---- */

/* Under sub_lock: the handed client's slot emptied (no callback can reach it any more: the
 * subscriber is gone or going). */
static void forget_handed(void)
{
    for (size_t i = 0; handed && i < L2P_CUPTI_MAX_CLIENTS; i++)
        if (atomic_load(&clients[i]) == handed) atomic_store(&clients[i], NULL);
    handed = NULL;
    atomic_store(&release_veto, NULL);
}

/* Under sub_lock: the request's subscriber goes (no client holds it: a release is asked with
 * none attached but the handed one, and attaching reclaims first). */
static void drop_request(const callback_calls *c)
{
    (void)c->enable_domain(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    (void)c->enable_domain(0, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    forget_handed();
    (void)c->unsubscribe(subscriber);
    subscriber = NULL;
}

/* Under sub_lock; the state it found: RELEASING or WITHDRAWN (taken back), RELEASED (carried
 * out, finalized) or HELD. */
static l2p_cupti_hold reclaim_locked(const callback_calls *c)
{
    for (;;) {
        /* withdrawn before any call's exit, or by a vetoing call */
        l2p_cupti_hold found = L2P_CUPTI_RELEASING;
        if (move_state(L2P_CUPTI_RELEASING, L2P_CUPTI_HELD) ||
            (found = L2P_CUPTI_WITHDRAWN, move_state(L2P_CUPTI_WITHDRAWN, L2P_CUPTI_HELD))) {
            drop_request(c);
            return found;
        }
        int s = release_state();
        if (s == RELEASE_RUNNING) {
            sched_yield();
            continue;
        }
        if (s == L2P_CUPTI_RELEASED) {
            subscriber = NULL; /* went with CUPTI */
            forget_handed();
            move_state(L2P_CUPTI_RELEASED, L2P_CUPTI_HELD);
        }
        return (l2p_cupti_hold)s;
    }
}

l2p_cupti_hold l2p_cupti_reclaim(void)
{
    const callback_calls *c;
    if (release_state() == L2P_CUPTI_HELD) return L2P_CUPTI_HELD;
    if (callback_api(&c) != L2P_OK) { /* never loaded: nothing was released */
        l2p_clear_error();
        return L2P_CUPTI_HELD;
    }
    pthread_mutex_lock(&sub_lock);
    l2p_cupti_hold found = reclaim_locked(c);
    pthread_mutex_unlock(&sub_lock);
    return found;
}

l2p_cupti_hold l2p_cupti_hold_state(void) { return (l2p_cupti_hold)release_state(); }

unsigned l2p_cupti_generation(void) { return atomic_load(&generation); }

static void store_releasing(void) { (void)move_state(L2P_CUPTI_HELD, L2P_CUPTI_RELEASING); }

/* Under sub_lock, nothing attached but the handover's client: the release's subscriber, on
 * every driver and runtime call. NULL, or what kept CUPTI held. */
static const char *request_locked(const callback_calls *c, const l2p_cupti_handover *h)
{
    if (!c->finalize || !c->enable_domain) return "this CUPTI lacks cuptiFinalize";
    if (release_state() != L2P_CUPTI_HELD) return "a release was asked already";
    /* sticky: a capture begun under an earlier request was never counted by its client, and
     * CUPTI was not finalized under it */
    if (h && atomic_load(&vetoes_seen))
        return "a capture began while an earlier release was pending";
    static _Thread_local char refused[sizeof ((l2p_error *)0)->message];
    if (!subscriber && subscribe(c) != L2P_OK) { /* another tool holds it, or no device */
        snprintf(refused, sizeof refused, "%s", l2p_last_error()->message);
        l2p_clear_error();
        return refused;
    }
    atomic_store(&release_finalize, (finalize_fn)c->finalize);
    atomic_store(&release_veto, h ? (veto_fn)h->client->vetoes : NULL);
    atomic_fetch_add(&release_serial, 1);
    /* The domains on while still held (the dispatcher gives the calls to the clients then),
     * and the state moved only after: no program thread can finalize while this one is inside
     * CUPTI. */
    const char *why = NULL;
    if (c->enable_domain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS ||
        c->enable_domain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS)
        why = "CUPTI refused its callback domains";
    else if (!h) store_releasing();
    else why = h->commit(store_releasing); /* the client decides, under its own lock */
    if (why) { /* still held: the domains off again */
        atomic_store(&release_veto, NULL);
        (void)c->enable_domain(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
        (void)c->enable_domain(0, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
        if (!n_attached) {
            (void)c->unsubscribe(subscriber);
            subscriber = NULL;
        } else { /* a domain off turns its ids off too: the attached clients' back on */
            for (size_t i = 0; i < L2P_CUPTI_MAX_CLIENTS; i++) {
                l2p_cupti_client *cl = atomic_load(&clients[i]);
                if (cl && cl->attached) reenable_ids(c, cl);
            }
        }
        return why;
    }
    if (h && h->client->attached) { /* detached, its slot kept (l2p_cupti_handover) */
        h->client->attached = 0;
        n_attached--;
        handed = h->client;
    }
    return NULL;
}

l2p_status l2p_cupti_release(l2p_cupti_hold *state, const char **why,
                             const l2p_cupti_handover *handover)
{
    const callback_calls *c;
    *why = NULL;
    *state = l2p_cupti_hold_state();
    if (*state != L2P_CUPTI_HELD) return L2P_OK;
    if (!atomic_load(&load_tried) || !library) { /* not loaded here just to be let go */
        *why = "CUPTI was never loaded";
        return L2P_OK;
    }
    L2P_TRY(callback_api(&c));
    pthread_mutex_lock(&sub_lock);
    for (size_t i = 0; i < L2P_CUPTI_MAX_CLIENTS && !*why; i++) {
        l2p_cupti_client *cl = atomic_load(&clients[i]);
        if (cl && cl->attached && !(handover && cl == handover->client)) *why = cl->name;
    }
    if (!*why) *why = request_locked(c, handover);
    pthread_mutex_unlock(&sub_lock);
    *state = *why ? L2P_CUPTI_HELD : l2p_cupti_hold_state();
    return L2P_OK;
}

static size_t free_slot(void)
{
    size_t i = 0;
    while (i < L2P_CUPTI_MAX_CLIENTS && atomic_load(&clients[i])) i++;
    return i;
}

static l2p_status attach_locked(const callback_calls *c, l2p_cupti_client *client,
                                unsigned flags, size_t slot)
{
    if (!subscriber) L2P_TRY(subscribe(c));
    client->enabled = 0;
    l2p_status st = (flags & L2P_CUPTI_ENABLE_NONE) ? L2P_OK : enable_ids(c, client);
    if (st != L2P_OK) { /* neither call below records an error: the refusal stays */
        disable_ids(c, client);
        unsubscribe_if_last(c, 0);
        return st;
    }
    client->attached = 1;
    n_attached++;
    atomic_store(&clients[slot], client);
    return L2P_OK;
}

l2p_status l2p_cupti_attach(l2p_cupti_client *client, unsigned flags)
{
    const callback_calls *c;
    size_t slot;
    if (client->n_cbids > L2P_CUPTI_MAX_CBIDS || client->n_required > client->n_cbids)
        return l2p_fail(L2P_ERR_VALUE, "%s: %zu callback ids (at most %d)", client->name,
                        client->n_cbids, L2P_CUPTI_MAX_CBIDS);
    L2P_TRY(callback_api(&c));
    pthread_mutex_lock(&sub_lock);
    (void)reclaim_locked(c);
    l2p_status st = L2P_OK;
    if (client->attached)
        st = l2p_fail(L2P_ERR_STATE, "%s: already attached to CUPTI's subscriber",
                      client->name);
    else if ((slot = free_slot()) == L2P_CUPTI_MAX_CLIENTS)
        st = l2p_fail(L2P_ERR_STATE, "%s: no room for another CUPTI client", client->name);
    else
        st = attach_locked(c, client, flags, slot);
    pthread_mutex_unlock(&sub_lock);
    return st;
}

void l2p_cupti_detach(l2p_cupti_client *client, unsigned flags)
{
    const callback_calls *c;
    if (callback_api(&c) != L2P_OK) {
        l2p_clear_error();
        return;
    }
    pthread_mutex_lock(&sub_lock);
    if (client->attached) {
        for (size_t i = 0; i < L2P_CUPTI_MAX_CLIENTS; i++)
            if (atomic_load(&clients[i]) == client) atomic_store(&clients[i], NULL);
        if (!(flags & L2P_CUPTI_KEEP_ENABLED)) disable_ids(c, client);
        client->attached = 0;
        n_attached--;
        unsubscribe_if_last(c, flags);
    }
    pthread_mutex_unlock(&sub_lock);
}
