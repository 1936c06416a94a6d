/* A plan: one device's persisting-L2 set-aside and a window per carrier, installed and
 * restored as one transaction.
 *
 * Why one object: the set-aside belongs to the CUDA context (one per process: another
 * process's maximum left this process's writes untouched on the H200, its own slowed them
 * 4.9x), changing it waits for the whole device (0.53 ms on the H200), and windows live on
 * many carriers (streams, a graph's kernel nodes, single launches). The tuner, the advisor,
 * the atlas grid and the tax measurements all install plans, so that the order of the steps
 * and the restore rule have this one home:
 *
 *   install: read what each carrier has (nothing changed yet), set the limit when it differs,
 *            demote persisting lines (lines marked under an earlier plan would keep the
 *            set-aside), then write each slot's window; a failure puts back what was written
 *            (all or nothing).
 *   restore: each slot's window as found, demote persisting lines (while the plan's
 *            set-aside still holds them), then the limit as found.
 *
 * A carrier is a set of slots: a stream is one slot, a group of graph kernel nodes one slot per
 * node. A slot holds one window (the alternatives rule): two entries that put different
 * windows on one slot are refused; an entry without a window turns its slots off unless
 * another entry puts a window there. Entries that share a slot are alternatives for a search
 * (l2p_plan_groups). A LAUNCH carrier has no slot: its window is handed to the one launch
 * that asks for it (cudaLaunchKernelEx's attribute), so installing does nothing for it.
 *
 * The CUDA calls go through an ops table so that the transaction logic is tested without a
 * GPU (tests/c/test_plan.c); l2p_plan_cuda_ops() are the real ones.
 */
#ifndef L2P_PLAN_H
#define L2P_PLAN_H

#include <stddef.h>

#include "l2p_error.h"
#include "l2p_policy.h"
#include "l2p_tune.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { L2P_CARRIER_STREAM = 0, L2P_CARRIER_NODES = 1, L2P_CARRIER_LAUNCH = 2 } l2p_carrier;

typedef struct {
    int kind;     /* L2P_CARRIER_STREAM (a cudaStream_t) or L2P_CARRIER_NODES (a node) */
    void *handle; /* the cudaStream_t or cudaGraphNode_t */
} l2p_slot;

typedef struct {
    int carrier;       /* l2p_carrier */
    size_t first_slot; /* its slots: slots[first_slot .. first_slot + n_slots) */
    size_t n_slots;
    int on;            /* 0: the entry turns its slots off */
    l2p_window window; /* when on */
} l2p_plan_entry;

typedef struct {
    int device;
    int has_set_aside; /* 0: the plan leaves the persisting limit as found */
    size_t set_aside;  /* bytes asked of the driver (it rounds up to a granule) */
    size_t n_entries, cap_entries;
    l2p_plan_entry *entries;
    size_t n_slots, cap_slots;
    l2p_slot *slots;
} l2p_plan;

/* What the driver is asked (the real ones: l2p_plan_cuda_ops). */
typedef struct {
    /* `device` is the transaction's: a default stream's handle names that device's stream */
    l2p_status (*get_window)(int device, const l2p_slot *s, l2p_window *out);
    l2p_status (*set_window)(int device, const l2p_slot *s, const l2p_window *w); /* NULL: off */
    l2p_status (*get_limit)(int device, size_t *out);
    l2p_status (*set_limit)(int device, size_t limit, size_t *granted);
    l2p_status (*reset_lines)(int device);
} l2p_plan_ops;

const l2p_plan_ops *l2p_plan_cuda_ops(void);

void l2p_plan_init(l2p_plan *p, int device);
void l2p_plan_free(l2p_plan *p);
l2p_status l2p_plan_copy(const l2p_plan *from, l2p_plan *to);
/* Add an entry: `carrier` with its n slot handles (0 for a LAUNCH) and a window (NULL: none).
 * The entry is on when `on` and the window has bytes; an entry that is off keeps its window
 * as the target's extent (l2p_plan_configure). Refuses a second, different window on a slot. */
l2p_status l2p_plan_add(l2p_plan *p, int carrier, void *const *handles, size_t n,
                        const l2p_window *w, int on, size_t *index);
/* Set (has = 1) or clear the plan's set-aside; checked against persisting_max. */
l2p_status l2p_plan_set_aside(l2p_plan *p, int has, long long bytes, size_t persisting_max);

/* Each slot once, with the window it ends up with (on[i] = 0: off). `slots`, `wins`, `on`
 * have room for p->n_slots. Pure. */
size_t l2p_plan_resolve(const l2p_plan *p, l2p_slot *slots, l2p_window *wins, int *on);
/* Alternatives: group[i] of entry i; entries that share a slot (directly or through others)
 * share a group; groups numbered densely in order of first appearance. Pure. */
l2p_status l2p_plan_groups(const l2p_plan *p, int *group);
/* A copy of `targets` (its entries' windows give each target's extent) configured as the
 * tuner says: `set_aside`, and entry i on with win[i]'s hit ratio and properties, or off
 * (entries that are off come first). n_win must equal the number of entries. */
l2p_status l2p_plan_configure(const l2p_plan *targets, size_t set_aside, size_t n_win,
                              const l2p_tune_window *win, l2p_plan *out);

/* ---- the plan document (Plan.to_json / Plan.from_json) ----------------------------------
 * A saved plan names its buffers and carriers instead of addressing them, so that another
 * process can rebuild it over its own objects. Its values are checked here before any
 * device is asked about: a bad file is named first, not after "no CUDA device". */
#define L2P_PLAN_FORMAT "l2persist.plan/1"

/* "stream", "nodes" or "launch" for an l2p_carrier; NULL for anything else. */
const char *l2p_plan_kind_name(int kind);
/* The l2p_carrier named `name`, or -1 with an error naming the allowed kinds. */
int l2p_plan_kind_of(const char *name, const char *what);

/* One saved entry's values (the document's types are the extension's to convert). */
typedef struct {
    int kind;             /* l2p_carrier */
    int has_window;       /* the window's fields were saved (an entry without one turns its
                           * carrier's windows off) */
    long long offset;     /* into the named buffer, bytes */
    long long num_bytes;
    double hit_ratio;
    int hit_prop, miss_prop;
} l2p_plan_saved;

/* The values of a saved entry: offset and num_bytes >= 0, the window rule of
 * l2p_policy_make_window. `what` names the entry in the message ("plan.json: entries[3]"). */
l2p_status l2p_plan_check_saved(const l2p_plan_saved *e, const char *what);

/* An installed plan: what it found, to put back. */
typedef struct {
    int device;
    int active;
    const l2p_plan_ops *ops;
    size_t limit_found, limit_now;
    size_t asked_now;   /* the set-aside last asked for (the driver rounds it up to limit_now):
                         * asking again would synchronise the device for nothing */
    size_t n, cap;      /* slots touched; items slots and found each have room for */
    l2p_slot *slots;    /* every slot touched since begin */
    l2p_window *found;  /* each one's window as found */
} l2p_plan_txn;

/* Take `slot` (same kind and handle) out of the transaction: nothing is put back on it at the
 * end. For a carrier its owner destroyed while the plan was installed (a borrowed graph reset):
 * its handle is freed. */
void l2p_plan_txn_forget(l2p_plan_txn *t, const l2p_slot *slot);
/* Begin on `device`: read the limit. Nothing is changed. */
l2p_status l2p_plan_begin(l2p_plan_txn *t, int device, const l2p_plan_ops *ops);
/* Install p within the transaction (all or nothing: a failure puts back what this call
 * changed and returns the first error). Applying again switches plans; the restore still
 * returns to what begin found. granted: the limit the driver holds after it (may be NULL). */
l2p_status l2p_plan_apply(l2p_plan_txn *t, const l2p_plan *p, size_t *granted);
/* Restore what begin found (every step attempted; the first failure reported) and end. */
l2p_status l2p_plan_end(l2p_plan_txn *t);
/* Free the transaction's memory without touching the device (after end, or when the
 * device is gone). */
void l2p_plan_txn_free(l2p_plan_txn *t);

#ifdef __cplusplus
}
#endif
#endif
