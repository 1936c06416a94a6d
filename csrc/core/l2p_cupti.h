/* libcupti, loaded at run time and shared by the counters (l2p_counters.c), the launch log
 * (l2p_launchlog.c) and capture tracking (l2p_capture.c); and CUPTI's one callback subscriber,
 * shared by the last two.
 *
 * Nothing links against libcupti: it is dlopen'ed on first use, so the package imports and
 * works where CUPTI is missing, and only what needs CUPTI says it is missing. */
#ifndef L2P_CUPTI_H
#define L2P_CUPTI_H

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The loaded library's handle (dlopen), or L2P_ERR_NOT_SUPPORTED saying where it was looked
 * for and how to point at it (L2P_CUPTI_LIBRARY). Loaded once per process: a libcupti already
 * mapped into the process (PyTorch's) first, so the process holds one CUPTI; then
 * L2P_CUPTI_LIBRARY, the loader's paths, CUDA_HOME and the toolkit. */
l2p_status l2p_cupti_library(void **handle);
/* The file of the loaded library, or NULL (not loaded, or not found). */
const char *l2p_cupti_path(void);

/* The one mapping of a failed CUPTI call (rc: its CUptiResult) to a status: missing privileges
 * and unsupported devices are L2P_ERR_NOT_SUPPORTED with what to do, another subscriber
 * (CUPTI allows one per process) too; the rest L2P_ERR_CUPTI. Records cupti_code and the
 * call's name. `detail`, when not NULL, is appended in parentheses. */
l2p_status l2p_cupti_fail(int rc, const char *call, const char *detail);

/* ---- the one subscriber (CUPTI's callback API) ----
 * CUPTI takes one subscriber per process, and two parts of l2persist need driver-API callbacks
 * at once: the launch log (while discovery runs) and capture tracking (for a whole run). So
 * they share one subscriber, made at the first attach and removed at the last detach, with one
 * dispatcher: every driver-API callback goes to the handler of each client attached, and each
 * handler ignores the callback ids that are not its own. Each client enables only its own ids;
 * the clients' sets are disjoint (launches; capture begin and end), so one client's disabling
 * never switches off another's. A handler may still be called just after its client detached
 * (a callback already inside the dispatcher), so it must check its own state (the clients are
 * statics that live as long as the process). A driver call made from inside a handler is not
 * dispatched again (a per-thread guard). */

#define L2P_CUPTI_MAX_CLIENTS 4
#define L2P_CUPTI_MAX_CBIDS 32

/* A driver-API callback: cbid a CUPTI_DRIVER_TRACE_CBID_*, data its CUpti_CallbackData. */
typedef void (*l2p_cupti_handler)(unsigned cbid, const void *data);

typedef struct {
    const char *name;           /* in messages: "launch log", "capture tracking" */
    l2p_cupti_handler handler;
    const unsigned *cbids;      /* the driver-API callback ids it enables, */
    size_t n_cbids;             /* at most L2P_CUPTI_MAX_CBIDS, */
    size_t n_required;          /* of which the first n_required must enable; the rest may be
                                 * unknown to an older CUPTI (the one a process maps) */
    unsigned long enabled;      /* bit i: cbids[i] is enabled (attach sets it) */
    int attached;               /* between attach and detach */
    /* Where the client is handed over to a release (l2p_cupti_handover): whether a call's
     * entry withdraws that release (a capture begin: a graph made under CUPTI fails once it
     * is finalized). NULL: none does. */
    int (*vetoes)(unsigned cbid);
} l2p_cupti_client;

enum {
    L2P_CUPTI_ENABLE_NONE = 1,  /* attach: subscribe, enable nothing (a diagnostic) */
    L2P_CUPTI_KEEP_ENABLED = 2, /* detach: leave the client's ids enabled (a diagnostic) */
    L2P_CUPTI_FINALIZE = 4,     /* detach: cuptiFinalize once the subscriber is removed */
};

/* Attach a client: subscribe if no client is attached, then enable its ids. On failure
 * (no CUPTI, another tool holds the subscriber, a required id refused) nothing is left
 * attached or enabled. L2P_ERR_STATE where the client is attached already. */
l2p_status l2p_cupti_attach(l2p_cupti_client *client, unsigned flags);
/* Disable the client's ids and detach it; the last client out removes the subscriber.
 * Idempotent. */
void l2p_cupti_detach(l2p_cupti_client *client, unsigned flags);

/* ---- letting CUPTI go ----
 * CUPTI attached to a process costs every launch for as long as it stays, recording or not,
 * subscribed or not: an 8-kernel graph's replay +0.25-0.3 us from 9.6 us in every attached
 * state (records paused or ended, capture callbacks on or gone), and nothing once
 * cuptiFinalize ran (H200, scratch probe of 2026-11-28, three processes). Only cuptiFinalize
 * detaches it, and NVIDIA advises calling it at a CUDA call's exit callsite, where no other
 * thread of the process is inside CUPTI. So a release is a request: a subscriber is made that
 * takes every driver and runtime call, and the first call's exit, on whichever program thread
 * makes it, finalizes; the request returns at once. Any later CUPTI use of ours reclaims first
 * (a pending release is withdrawn; a finalize in progress is waited for), and CUPTI attaches
 * again lazily, as its documentation says, under a new generation. */

typedef enum {
    L2P_CUPTI_HELD = 0,      /* attached (or never loaded) */
    L2P_CUPTI_RELEASING = 1, /* finalize waits for a CUDA call's exit */
    L2P_CUPTI_RELEASED = 2,  /* finalized: detached until something of ours uses it again */
    L2P_CUPTI_WITHDRAWN = 3, /* a vetoing call came first: attached, the request's subscriber
                              * still on every call until a reclaim */
    L2P_CUPTI_FINALIZING = 4, /* a call's exit is inside cuptiFinalize (said "releasing") */
} l2p_cupti_hold;

/* A client handed over to a release in one step (the race it closes: capture tracking ended,
 * then a capture begun, then the finalize; that capture's graph would fail). Under the
 * subscriber's lock, with the request's domains already on: commit(store) decides, under the
 * client's own lock, whether nothing the client watched for happened, and only then calls
 * store(), which moves the state to RELEASING (no CUPTI call: the client's lock may be
 * awaited inside a callback). It returns NULL, or what keeps CUPTI (store not called). Once
 * handed, the client is detached, but its handler stays reachable for a callback that began
 * while the state was still held, and its vetoes() ids withdraw the release at their entry. */
typedef struct {
    l2p_cupti_client *client;
    const char *(*commit)(void (*store)(void));
} l2p_cupti_handover;

/* Request the release. *state: the state after the call; where it is L2P_CUPTI_HELD, *why
 * says what keeps it (a client attached, never loaded, another subscriber, a CUPTI without
 * cuptiFinalize, the handover's refusal). `handover` may be NULL; else its client may be the
 * one attached. Callers above (l2p_activity_release_cupti) first check their own users. */
l2p_status l2p_cupti_release(l2p_cupti_hold *state, const char **why,
                             const l2p_cupti_handover *handover);
/* Withdraw a pending release (RELEASING to WITHDRAWN): a handed client's handler saw what
 * forbids it. 1 where it was withdrawn here. */
int l2p_cupti_withdraw(void);
/* Vetoing calls that reached a request (seen; once any has, a later request with a handover is
 * refused: its capture was made under CUPTI and never counted), and those that met a finalize
 * already under way and went on after waiting 50 ms for it (late: their captures may have begun
 * under a CUPTI being finalized). */
void l2p_cupti_vetoes(unsigned long *seen, unsigned long *late);
l2p_cupti_hold l2p_cupti_hold_state(void);
/* Before any CUPTI call of ours after a release may have been asked: withdraw a pending one
 * (and a withdrawn one's subscriber goes), wait out a finalize in progress; after it, the
 * state is held again. */
l2p_cupti_hold l2p_cupti_reclaim(void); /* the state found: what the reclaim did */
/* How many times CUPTI was finalized in this process: what was set up in CUPTI under an older
 * generation (activity callbacks, the profiler's initialisation) must be set up again. */
unsigned l2p_cupti_generation(void);

#ifdef __cplusplus
}
#endif
#endif
