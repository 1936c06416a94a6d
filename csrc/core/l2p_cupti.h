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

#ifdef __cplusplus
}
#endif
#endif
