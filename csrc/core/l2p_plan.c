#include "l2p_plan.h"

#include <stdlib.h>
#include <string.h>

#include "l2p_checks.h"
#include "l2p_device.h"
#include "l2p_window.h"

/* ---- the plan itself (pure) ------------------------------------------------------------- */

void l2p_plan_init(l2p_plan *p, int device)
{
    memset(p, 0, sizeof *p);
    p->device = device;
}

void l2p_plan_free(l2p_plan *p)
{
    free(p->entries);
    free(p->slots);
    l2p_plan_init(p, p->device);
}

/* Grow *arr (of *cap items of `size`) to hold `need` (l2p_grow). */
static l2p_status grow(void **arr, size_t *cap, size_t need, size_t size)
{
    if (l2p_grow(arr, cap, need, size, 8)) return L2P_OK;
    return l2p_fail(L2P_ERR_NO_MEMORY, "plan: out of host memory");
}

l2p_status l2p_plan_copy(const l2p_plan *from, l2p_plan *to)
{
    l2p_plan_init(to, from->device);
    to->has_set_aside = from->has_set_aside;
    to->set_aside = from->set_aside;
    if (grow((void **)&to->entries, &to->cap_entries, from->n_entries, sizeof *to->entries) ||
        grow((void **)&to->slots, &to->cap_slots, from->n_slots, sizeof *to->slots)) {
        l2p_plan_free(to);
        return L2P_ERR_NO_MEMORY;
    }
    if (from->n_entries) memcpy(to->entries, from->entries, from->n_entries * sizeof *to->entries);
    if (from->n_slots) memcpy(to->slots, from->slots, from->n_slots * sizeof *to->slots);
    to->n_entries = from->n_entries;
    to->n_slots = from->n_slots;
    return L2P_OK;
}

static int same_slot(const l2p_slot *a, const l2p_slot *b)
{
    return a->kind == b->kind && a->handle == b->handle;
}

static int same_window(const l2p_window *a, const l2p_window *b)
{
    return a->base_ptr == b->base_ptr && a->num_bytes == b->num_bytes &&
           a->hit_ratio == b->hit_ratio && a->hit_prop == b->hit_prop &&
           a->miss_prop == b->miss_prop;
}

/* The window entry e puts on `slot`, when it covers that slot and is on; else NULL. */
static const l2p_window *entry_window_on(const l2p_plan *p, const l2p_plan_entry *e,
                                         const l2p_slot *slot)
{
    if (!e->on) return NULL;
    for (size_t k = 0; k < e->n_slots; k++)
        if (same_slot(&p->slots[e->first_slot + k], slot)) return &e->window;
    return NULL;
}

/* The alternatives rule: no slot gets two different windows. */
static l2p_status check_one_window(const l2p_plan *p, const l2p_plan_entry *e)
{
    for (size_t k = 0; e->on && k < e->n_slots; k++) {
        const l2p_slot *s = &p->slots[e->first_slot + k];
        for (size_t j = 0; j < p->n_entries; j++) {
            const l2p_window *w = entry_window_on(p, &p->entries[j], s);
            if (w && !same_window(w, &e->window))
                return l2p_fail(L2P_ERR_VALUE,
                                "window: the %s already holds another window of this plan "
                                "(entry %zu); a %s holds one window at a time, so windows on "
                                "it are alternatives",
                                s->kind == L2P_CARRIER_STREAM ? "stream" : "kernel node", j,
                                s->kind == L2P_CARRIER_STREAM ? "stream" : "node");
        }
    }
    return L2P_OK;
}

l2p_status l2p_plan_add(l2p_plan *p, int carrier, void *const *handles, size_t n,
                        const l2p_window *w, int on, size_t *index)
{
    if (carrier < L2P_CARRIER_STREAM || carrier > L2P_CARRIER_LAUNCH)
        return l2p_fail(L2P_ERR_VALUE, "carrier: %d is not a stream, node group or launch",
                        carrier);
    if (carrier == L2P_CARRIER_STREAM && n != 1)
        return l2p_fail(L2P_ERR_VALUE, "carrier: a stream is one slot, got %zu", n);
    if (carrier == L2P_CARRIER_NODES && n == 0)
        return l2p_fail(L2P_ERR_VALUE, "nodes: at least one kernel node is needed");
    if (carrier == L2P_CARRIER_LAUNCH) n = 0;
    L2P_TRY(grow((void **)&p->entries, &p->cap_entries, p->n_entries + 1, sizeof *p->entries));
    L2P_TRY(grow((void **)&p->slots, &p->cap_slots, p->n_slots + n, sizeof *p->slots));
    l2p_plan_entry e = {.carrier = carrier, .first_slot = p->n_slots, .n_slots = n,
                        .on = on && w && w->num_bytes};
    if (w) e.window = *w; /* kept when off too: a target's extent for l2p_plan_configure */
    for (size_t k = 0; k < n; k++)
        p->slots[p->n_slots + k] = (l2p_slot){.kind = carrier, .handle = handles[k]};
    L2P_TRY(check_one_window(p, &e));
    p->entries[p->n_entries] = e;
    p->n_slots += n;
    if (index) *index = p->n_entries;
    p->n_entries++;
    return L2P_OK;
}

l2p_status l2p_plan_set_aside(l2p_plan *p, int has, long long bytes, size_t persisting_max)
{
    if (has && l2p_policy_check_limit(bytes, persisting_max) != L2P_OK)
        return l2p_fail(L2P_ERR_VALUE, "set_aside: %lld bytes is outside [0, %zu] "
                        "(persisting_l2_cache_max_size)", bytes, persisting_max);
    p->has_set_aside = has != 0;
    p->set_aside = has ? (size_t)bytes : 0;
    return L2P_OK;
}

size_t l2p_plan_resolve(const l2p_plan *p, l2p_slot *slots, l2p_window *wins, int *on)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_slots; i++) {
        size_t k = 0;
        while (k < n && !same_slot(&slots[k], &p->slots[i])) k++;
        if (k == n) {
            slots[n] = p->slots[i];
            on[n] = 0;
            n++;
        }
    }
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < p->n_entries && !on[k]; j++) {
            const l2p_window *w = entry_window_on(p, &p->entries[j], &slots[k]);
            if (w) {
                wins[k] = *w;
                on[k] = 1;
            }
        }
    return n;
}

static int find(int *parent, int i)
{
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

static int entries_share_slot(const l2p_plan *p, const l2p_plan_entry *a, const l2p_plan_entry *b)
{
    for (size_t x = 0; x < a->n_slots; x++)
        for (size_t y = 0; y < b->n_slots; y++)
            if (same_slot(&p->slots[a->first_slot + x], &p->slots[b->first_slot + y])) return 1;
    return 0;
}

l2p_status l2p_plan_groups(const l2p_plan *p, int *group)
{
    size_t n = p->n_entries;
    int *parent = malloc((n ? n : 1) * sizeof *parent);
    if (!parent) return l2p_fail(L2P_ERR_NO_MEMORY, "plan: out of host memory");
    for (size_t i = 0; i < n; i++) parent[i] = (int)i;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (entries_share_slot(p, &p->entries[i], &p->entries[j]))
                parent[find(parent, (int)i)] = find(parent, (int)j);
    /* dense numbers, in the order in which each group is first met */
    int next = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < i && find(parent, (int)j) != find(parent, (int)i)) j++;
        group[i] = j < i ? group[j] : next++;
    }
    free(parent);
    return L2P_OK;
}

l2p_status l2p_plan_configure(const l2p_plan *targets, size_t set_aside, size_t n_win,
                              const l2p_tune_window *win, l2p_plan *out)
{
    if (n_win != targets->n_entries)
        return l2p_fail(L2P_ERR_VALUE, "config: %zu windows for a plan of %zu targets", n_win,
                        targets->n_entries);
    l2p_plan_init(out, targets->device);
    out->has_set_aside = 1;
    out->set_aside = set_aside;
    /* Off entries first: an off entry shares its slots with the alternatives that are on. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < targets->n_entries; i++) {
            const l2p_plan_entry *e = &targets->entries[i];
            const l2p_tune_window *tw = &win[i];
            if ((tw->on != 0) != pass) continue;
            l2p_window w = e->window;
            w.hit_ratio = (float)tw->hit_ratio;
            w.hit_prop = tw->hit_prop;
            w.miss_prop = tw->miss_prop;
            void *h[1];
            void **handles = e->n_slots ? NULL : h;
            if (e->n_slots) {
                handles = malloc(e->n_slots * sizeof *handles);
                if (!handles) {
                    l2p_plan_free(out);
                    return l2p_fail(L2P_ERR_NO_MEMORY, "plan: out of host memory");
                }
                for (size_t k = 0; k < e->n_slots; k++)
                    handles[k] = targets->slots[e->first_slot + k].handle;
            }
            l2p_status st = l2p_plan_add(out, e->carrier, handles, e->n_slots, &w, tw->on,
                                         NULL);
            if (e->n_slots) free(handles);
            if (st != L2P_OK) {
                l2p_plan_free(out);
                return st;
            }
        }
    return L2P_OK;
}

/* ---- the plan document ------------------------------------------------------------------ */

static const char *const kind_names[] = {"stream", "nodes", "launch"};

const char *l2p_plan_kind_name(int kind)
{
    return kind >= L2P_CARRIER_STREAM && kind <= L2P_CARRIER_LAUNCH ? kind_names[kind] : NULL;
}

int l2p_plan_kind_of(const char *name, const char *what)
{
    for (int k = L2P_CARRIER_STREAM; k <= L2P_CARRIER_LAUNCH; k++)
        if (strcmp(name, kind_names[k]) == 0) return k;
    l2p_fail(L2P_ERR_VALUE, "%s: '%.64s' is not a carrier kind ('stream', 'nodes' or "
             "'launch')", what, name);
    return -1;
}

l2p_status l2p_plan_check_saved(const l2p_plan_saved *e, const char *what)
{
    if (!l2p_plan_kind_name(e->kind))
        return l2p_fail(L2P_ERR_VALUE, "%s: kind %d is not a carrier kind", what, e->kind);
    if (!e->has_window) return L2P_OK;
    if (e->offset < 0)
        return l2p_fail(L2P_ERR_VALUE, "%s: offset %lld is negative (bytes into the buffer, "
                        ">= 0)", what, e->offset);
    if (e->num_bytes < 0)
        return l2p_fail(L2P_ERR_VALUE, "%s: num_bytes %lld is negative (bytes, >= 0)", what,
                        e->num_bytes);
    if (l2p_check_window_rule(e->hit_ratio, e->hit_prop, e->miss_prop) != L2P_OK) {
        l2p_error why = *l2p_last_error(); /* the policy's words, with the entry named */
        return l2p_fail(why.status, "%s: %s", what, why.message);
    }
    return L2P_OK;
}

/* ---- the transaction ----------------------------------------------------------------- */

l2p_status l2p_plan_begin(l2p_plan_txn *t, int device, const l2p_plan_ops *ops)
{
    memset(t, 0, sizeof *t);
    t->device = device;
    t->ops = ops ? ops : l2p_plan_cuda_ops();
    L2P_TRY(t->ops->get_limit(device, &t->limit_found));
    t->limit_now = t->asked_now = t->limit_found;
    t->active = 1;
    return L2P_OK;
}

static long txn_find(const l2p_plan_txn *t, const l2p_slot *s)
{
    for (size_t i = 0; i < t->n; i++)
        if (same_slot(&t->slots[i], s)) return (long)i;
    return -1;
}

/* Read the window of each slot the transaction has not seen yet (nothing changes). */
static l2p_status remember(l2p_plan_txn *t, const l2p_slot *slots, size_t n)
{
    /* slots and found share t->cap; found is resized only when the capacity grew, so never
     * to 0 bytes: realloc(p, 0) frees p and returns NULL (glibc), which read as "out of
     * memory" left found pointing at freed memory, freed again by l2p_plan_txn_free (a
     * plan without slots, e.g. tax.measure's, applied twice in one transaction) */
    size_t cap = t->cap;
    L2P_TRY(grow((void **)&t->slots, &cap, t->n + n, sizeof *t->slots));
    if (cap != t->cap) {
        void *f = realloc(t->found, cap * sizeof *t->found);
        if (!f) return l2p_fail(L2P_ERR_NO_MEMORY, "plan: out of host memory");
        t->found = f;
        t->cap = cap; /* both arrays hold cap items from here on */
    }
    size_t added = 0;
    for (size_t i = 0; i < n; i++) {
        if (txn_find(t, &slots[i]) >= 0) continue;
        l2p_window w;
        l2p_status st = t->ops->get_window(t->device, &slots[i], &w);
        if (st != L2P_OK) {
            t->n -= added; /* forget the half-read batch: nothing was changed */
            return st;
        }
        t->slots[t->n] = slots[i];
        t->found[t->n] = w;
        t->n++;
        added++;
    }
    return L2P_OK;
}

/* Put windows back (as `wins`) on slots[0..n); every one attempted, the first error kept. */
static l2p_status put_back(l2p_plan_txn *t, const l2p_slot *slots, const l2p_window *wins,
                           size_t n)
{
    l2p_status first = L2P_OK;
    for (size_t i = n; i-- > 0;) {
        l2p_status st = t->ops->set_window(t->device, &slots[i], &wins[i]);
        if (first == L2P_OK) first = st;
    }
    return first;
}

typedef struct {
    size_t n;
    l2p_slot *slots;
    l2p_window *wins, *before;
    int *on;
} resolved;

static void resolved_free(resolved *r)
{
    free(r->slots);
    free(r->wins);
    free(r->before);
    free(r->on);
}

static l2p_status resolve_alloc(const l2p_plan *p, resolved *r)
{
    size_t n = p->n_slots ? p->n_slots : 1;
    r->slots = malloc(n * sizeof *r->slots);
    r->wins = malloc(n * sizeof *r->wins);
    r->before = malloc(n * sizeof *r->before);
    r->on = malloc(n * sizeof *r->on);
    if (!r->slots || !r->wins || !r->before || !r->on) {
        resolved_free(r);
        return l2p_fail(L2P_ERR_NO_MEMORY, "plan: out of host memory");
    }
    r->n = l2p_plan_resolve(p, r->slots, r->wins, r->on);
    return L2P_OK;
}

/* Write the resolved windows; on a failure put back the ones written and return it. */
static l2p_status write_slots(l2p_plan_txn *t, resolved *r)
{
    for (size_t i = 0; i < r->n; i++) {
        /* what the slot has now (this transaction may have changed it already) */
        l2p_status st = t->ops->get_window(t->device, &r->slots[i], &r->before[i]);
        if (st == L2P_OK)
            st = t->ops->set_window(t->device, &r->slots[i], r->on[i] ? &r->wins[i] : NULL);
        if (st != L2P_OK) {
            l2p_error keep = *l2p_last_error();
            put_back(t, r->slots, r->before, i);
            l2p_fail(keep.status, "%s", keep.message);
            return st;
        }
    }
    return L2P_OK;
}

l2p_status l2p_plan_apply(l2p_plan_txn *t, const l2p_plan *p, size_t *granted)
{
    if (!t->active) return l2p_fail(L2P_ERR_STATE, "plan: not installed");
    if (p->device != t->device)
        return l2p_fail(L2P_ERR_VALUE, "plan: for device %d, installed on device %d",
                        p->device, t->device);
    resolved r = {0};
    L2P_TRY(resolve_alloc(p, &r));
    l2p_status st = remember(t, r.slots, r.n);
    size_t limit_before = t->limit_now;
    size_t asked_before = t->asked_now;
    if (st == L2P_OK && p->has_set_aside && p->set_aside != t->limit_now &&
        p->set_aside != t->asked_now) {
        size_t got = 0;
        st = t->ops->set_limit(t->device, p->set_aside, &got);
        if (st == L2P_OK) { /* the driver rounds up to a granule */
            t->limit_now = got;
            t->asked_now = p->set_aside;
        }
    }
    /* Lines marked persisting under the last configuration would keep the set-aside. */
    if (st == L2P_OK) st = t->ops->reset_lines(t->device);
    if (st == L2P_OK) st = write_slots(t, &r);
    if (st != L2P_OK && t->limit_now != limit_before) {
        l2p_error keep = *l2p_last_error();
        size_t got;
        if (t->ops->set_limit(t->device, limit_before, &got) == L2P_OK) t->limit_now = got;
        t->asked_now = asked_before;
        l2p_fail(keep.status, "%s", keep.message);
    }
    resolved_free(&r);
    if (st == L2P_OK && granted) *granted = t->limit_now;
    return st;
}

l2p_status l2p_plan_end(l2p_plan_txn *t)
{
    if (!t->active) return L2P_OK;
    t->active = 0;
    l2p_status first = put_back(t, t->slots, t->found, t->n);
    /* Demote lines while the plan's set-aside still holds them, then the limit as found. */
    l2p_status st = t->ops->reset_lines(t->device);
    if (first == L2P_OK) first = st;
    if (t->limit_now != t->limit_found) {
        size_t got;
        st = t->ops->set_limit(t->device, t->limit_found, &got);
        if (first == L2P_OK) first = st;
        if (st == L2P_OK) t->limit_now = got;
    }
    return first;
}

void l2p_plan_txn_forget(l2p_plan_txn *t, const l2p_slot *slot)
{
    size_t kept = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->slots[i].kind == slot->kind && t->slots[i].handle == slot->handle) continue;
        t->slots[kept] = t->slots[i];
        t->found[kept] = t->found[i];
        kept++;
    }
    t->n = kept;
}

void l2p_plan_txn_free(l2p_plan_txn *t)
{
    free(t->slots);
    free(t->found);
    t->slots = NULL;
    t->found = NULL;
    t->n = t->cap = 0;
    t->active = 0;
}

/* ---- the real driver calls ----------------------------------------------------------- */

static l2p_status cuda_get_window(int device, const l2p_slot *s, l2p_window *out)
{
    if (s->kind == L2P_CARRIER_STREAM)
        return l2p_stream_get_window(device, (cudaStream_t)s->handle, out);
    return l2p_graph_node_get_window((cudaGraphNode_t)s->handle, out);
}

static l2p_status cuda_set_window(int device, const l2p_slot *s, const l2p_window *w)
{
    if (s->kind == L2P_CARRIER_STREAM)
        return l2p_stream_set_window(device, (cudaStream_t)s->handle, w);
    return l2p_graph_node_set_window((cudaGraphNode_t)s->handle, w);
}

static l2p_status cuda_set_limit(int device, size_t limit, size_t *granted)
{
    return l2p_device_set_persisting_limit(device, (long long)limit, granted);
}

static const l2p_plan_ops cuda_ops = {
    .get_window = cuda_get_window,
    .set_window = cuda_set_window,
    .get_limit = l2p_device_get_persisting_limit,
    .set_limit = cuda_set_limit,
    .reset_lines = l2p_device_reset_persisting,
};

const l2p_plan_ops *l2p_plan_cuda_ops(void) { return &cuda_ops; }
