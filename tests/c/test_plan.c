/* The plan (l2p_plan.h) without a GPU: the alternatives rule, the resolution of each slot's
 * window, the groups a search sees, a tuner configuration turned into a plan, and the
 * transaction through a fake driver: the order of the steps, all or nothing on a failure at
 * every step, the restore to what was found also after several plans were applied; and the
 * plan document's rule for a saved entry, checked before any device is asked. */
#include <string.h>

#include "l2p_checks.h"
#include "l2p_plan.h"
#include "l2p_test.h"
#include "l2p_stream.h"

int l2p_test_passed, l2p_test_failed;

/* ---- a fake driver: 8 slots per kind, a limit, a log of calls, a failure on call k ---- */
#define NS 8
static l2p_window fake_win[2][NS];
static size_t fake_limit, fake_granule = 100;
static int fake_calls, fail_at = -1, fake_resets;
static char fake_log[512];

static void fake_reset(size_t limit)
{
    memset(fake_win, 0, sizeof fake_win);
    fake_limit = limit;
    fake_calls = fake_resets = 0;
    fail_at = -1;
    fake_log[0] = 0;
}

static l2p_status maybe_fail(const char *what)
{
    strncat(fake_log, what, sizeof fake_log - strlen(fake_log) - 1);
    if (fake_calls++ == fail_at) return l2p_fail(L2P_ERR_CUDA, "fake %s failed", what);
    return L2P_OK;
}

static int fake_devices_seen; /* bit d: a window op was asked on device d */

static l2p_status f_get(int device, const l2p_slot *s, l2p_window *out)
{
    fake_devices_seen |= 1 << device;
    L2P_TRY(maybe_fail("g"));
    *out = fake_win[s->kind][(size_t)s->handle];
    return L2P_OK;
}

static l2p_status f_set(int device, const l2p_slot *s, const l2p_window *w)
{
    fake_devices_seen |= 1 << device;
    L2P_TRY(maybe_fail("w"));
    l2p_window off = {0};
    fake_win[s->kind][(size_t)s->handle] = w && w->num_bytes ? *w : off;
    return L2P_OK;
}

static l2p_status f_get_limit(int device, size_t *out)
{
    (void)device;
    L2P_TRY(maybe_fail("L"));
    *out = fake_limit;
    return L2P_OK;
}

static l2p_status f_set_limit(int device, size_t limit, size_t *granted)
{
    (void)device;
    L2P_TRY(maybe_fail("S"));
    fake_limit = (limit + fake_granule - 1) / fake_granule * fake_granule; /* rounds up */
    *granted = fake_limit;
    return L2P_OK;
}

static l2p_status f_reset(int device)
{
    (void)device;
    L2P_TRY(maybe_fail("R"));
    fake_resets++;
    return L2P_OK;
}

static const l2p_plan_ops fake = {f_get, f_set, f_get_limit, f_set_limit, f_reset};

static l2p_window win(uintptr_t base, size_t bytes, double hr)
{
    l2p_window w = {base, bytes, (float)hr, L2P_ACCESS_PERSISTING, L2P_ACCESS_STREAMING};
    return w;
}

static void *H(size_t i) { return (void *)i; }

static void test_alternatives_rule(void)
{
    l2p_plan p;
    l2p_plan_init(&p, 0);
    l2p_window a = win(0x1000, 64, 0.5), b = win(0x9000, 64, 0.5);
    void *s1[] = {H(1)}, *nodes[] = {H(2), H(3)}, *node3[] = {H(3)};
    CHECK(l2p_plan_add(&p, L2P_CARRIER_STREAM, s1, 1, &a, 1, NULL) == L2P_OK);
    /* the same window again on the same stream is no conflict; a different one is */
    CHECK(l2p_plan_add(&p, L2P_CARRIER_STREAM, s1, 1, &a, 1, NULL) == L2P_OK);
    CHECK(l2p_plan_add(&p, L2P_CARRIER_STREAM, s1, 1, &b, 1, NULL) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "stream holds one window") != NULL);
    CHECK(p.n_entries == 2); /* the refused entry left nothing behind */
    CHECK(l2p_plan_add(&p, L2P_CARRIER_NODES, nodes, 2, &a, 1, NULL) == L2P_OK);
    CHECK(l2p_plan_add(&p, L2P_CARRIER_NODES, node3, 1, &b, 1, NULL) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "kernel node") != NULL);
    /* an entry that turns node 3 off is allowed: the window on it wins */
    CHECK(l2p_plan_add(&p, L2P_CARRIER_NODES, node3, 1, NULL, 0, NULL) == L2P_OK);
    /* bad carriers */
    CHECK(l2p_plan_add(&p, 7, s1, 1, &a, 1, NULL) == L2P_ERR_VALUE);
    CHECK(l2p_plan_add(&p, L2P_CARRIER_STREAM, nodes, 2, &a, 1, NULL) == L2P_ERR_VALUE);
    CHECK(l2p_plan_add(&p, L2P_CARRIER_NODES, nodes, 0, &a, 1, NULL) == L2P_ERR_VALUE);
    size_t idx = 99;
    CHECK(l2p_plan_add(&p, L2P_CARRIER_LAUNCH, NULL, 0, &b, 1, &idx) == L2P_OK && idx == 4);
    l2p_slot slots[16];
    l2p_window wins[16];
    int on[16];
    size_t n = l2p_plan_resolve(&p, slots, wins, on);
    CHECK(n == 3); /* stream 1, nodes 2 and 3: each once; the launch has no slot */
    CHECK(on[0] && wins[0].base_ptr == 0x1000);
    CHECK(on[2] && slots[2].handle == H(3) && wins[2].base_ptr == 0x1000);
    int group[8];
    CHECK(l2p_plan_groups(&p, group) == L2P_OK);
    CHECK(group[0] == 0 && group[1] == 0);  /* one stream */
    CHECK(group[2] == 1 && group[3] == 1);  /* node 3 shared */
    CHECK(group[4] == 2);                   /* the launch alone */
    CHECK(l2p_plan_set_aside(&p, 1, 500, 400) == L2P_ERR_VALUE);
    CHECK(l2p_plan_set_aside(&p, 1, -1, 400) == L2P_ERR_VALUE);
    CHECK(l2p_plan_set_aside(&p, 1, 300, 400) == L2P_OK && p.has_set_aside && p.set_aside == 300);
    l2p_plan_free(&p);
}

/* Every window read and write of a transaction is asked with its device (the plan's): a
 * default stream's handle names the current device's stream, and the real driver calls make
 * that device current for those handles only (l2p_stream_enter). */
static void test_window_ops_get_the_device(void)
{
    l2p_plan p;
    l2p_plan_txn t;
    l2p_plan_init(&p, 3);
    l2p_window a = win(0x1000, 64, 0.5);
    void *legacy[] = {NULL}, *own[] = {H(5)};
    CHECK(l2p_plan_add(&p, L2P_CARRIER_STREAM, legacy, 1, &a, 1, NULL) == L2P_OK);
    CHECK(l2p_plan_add(&p, L2P_CARRIER_STREAM, own, 1, &a, 1, NULL) == L2P_OK);
    fake_reset(0);
    fake_devices_seen = 0;
    CHECK(l2p_plan_begin(&t, 3, &fake) == L2P_OK);
    CHECK(l2p_plan_apply(&t, &p, NULL) == L2P_OK);
    CHECK(fake_win[0][0].base_ptr == 0x1000 && fake_win[0][5].base_ptr == 0x1000);
    CHECK(l2p_plan_end(&t) == L2P_OK);
    CHECK(fake_win[0][0].num_bytes == 0 && fake_win[0][5].num_bytes == 0);
    CHECK(fake_devices_seen == 1 << 3); /* reads, writes and the put-back: device 3 only */
    CHECK(l2p_stream_is_default(NULL) && !l2p_stream_is_default((cudaStream_t)H(5)));
    CHECK(l2p_stream_is_default(cudaStreamLegacy) && l2p_stream_is_default(cudaStreamPerThread));
    l2p_plan_txn_free(&t); /* ASan: the transaction's slots were left */
    l2p_plan_free(&p);
}

static void test_groups_transitive(void)
{
    /* a-b share node 1, b-c share node 2: one group, though a and c share nothing */
    l2p_plan p;
    l2p_plan_init(&p, 0);
    void *ab[] = {H(0), H(1)}, *bc[] = {H(1), H(2)}, *c[] = {H(2), H(3)}, *s[] = {H(5)};
    CHECK(l2p_plan_add(&p, L2P_CARRIER_STREAM, s, 1, NULL, 0, NULL) == L2P_OK);
    CHECK(l2p_plan_add(&p, L2P_CARRIER_NODES, ab, 2, NULL, 0, NULL) == L2P_OK);
    CHECK(l2p_plan_add(&p, L2P_CARRIER_NODES, c, 2, NULL, 0, NULL) == L2P_OK);
    CHECK(l2p_plan_add(&p, L2P_CARRIER_NODES, bc, 2, NULL, 0, NULL) == L2P_OK);
    int g[4];
    CHECK(l2p_plan_groups(&p, g) == L2P_OK);
    CHECK(g[0] == 0 && g[1] == 1 && g[2] == 1 && g[3] == 1);
    /* a stream and a node with the same handle value are different slots */
    void *n5[] = {H(5)};
    CHECK(l2p_plan_add(&p, L2P_CARRIER_NODES, n5, 1, NULL, 0, NULL) == L2P_OK);
    int g2[5];
    CHECK(l2p_plan_groups(&p, g2) == L2P_OK && g2[4] == 2);
    l2p_plan_free(&p);
}

static void test_configure(void)
{
    l2p_plan t, out;
    l2p_plan_init(&t, 3);
    l2p_window a = win(0x1000, 64, 1.0), b = win(0x9000, 32, 1.0);
    void *s1[] = {H(1)};
    /* two alternatives on one stream: the extents are kept, only one may be on */
    CHECK(l2p_plan_add(&t, L2P_CARRIER_STREAM, s1, 1, &a, 0, NULL) == L2P_OK); /* extent, off */
    CHECK(l2p_plan_add(&t, L2P_CARRIER_STREAM, s1, 1, &b, 0, NULL) == L2P_OK);
    CHECK(!t.entries[0].on && t.entries[0].window.base_ptr == 0x1000);
    l2p_tune_config cfg = {.set_aside = 250, .n_targets = 2};
    cfg.win[1] = (l2p_tune_window){1, 0.25, L2P_ACCESS_PERSISTING, L2P_ACCESS_NORMAL};
    CHECK(l2p_plan_configure(&t, cfg.set_aside, cfg.n_targets, cfg.win, &out) == L2P_OK);
    CHECK(out.device == 3 && out.has_set_aside && out.set_aside == 250);
    l2p_slot sl[4];
    l2p_window w[4];
    int on[4];
    CHECK(l2p_plan_resolve(&out, sl, w, on) == 1);
    CHECK(on[0] && w[0].base_ptr == 0x9000 && w[0].num_bytes == 32);
    CHECK_NEAR(w[0].hit_ratio, 0.25, 1e-6);
    CHECK(w[0].miss_prop == L2P_ACCESS_NORMAL);
    l2p_plan_free(&out);
    cfg.win[0] = cfg.win[1]; /* both on one stream: refused by the alternatives rule */
    CHECK(l2p_plan_configure(&t, cfg.set_aside, cfg.n_targets, cfg.win, &out) == L2P_ERR_VALUE);
    cfg.n_targets = 1;
    CHECK(l2p_plan_configure(&t, cfg.set_aside, cfg.n_targets, cfg.win, &out) == L2P_ERR_VALUE);
    l2p_plan_free(&t);
}

/* A plan: limit 300, window a on stream 1, window b on nodes 2 and 3, node 4 off. */
static void sample_plan(l2p_plan *p, l2p_window *a, l2p_window *b)
{
    l2p_plan_init(p, 0);
    *a = win(0x1000, 64, 0.5);
    *b = win(0x9000, 64, 0.7);
    void *s1[] = {H(1)}, *nodes[] = {H(2), H(3)}, *n4[] = {H(4)};
    l2p_plan_add(p, L2P_CARRIER_STREAM, s1, 1, a, 1, NULL);
    l2p_plan_add(p, L2P_CARRIER_NODES, nodes, 2, b, 1, NULL);
    l2p_plan_add(p, L2P_CARRIER_NODES, n4, 1, NULL, 0, NULL);
    l2p_plan_set_aside(p, 1, 300, 1000);
}

static int state_is_found(const l2p_window *found_n4)
{
    return fake_limit == 100 && fake_win[0][1].num_bytes == 0 && fake_win[1][2].num_bytes == 0 &&
           fake_win[1][3].num_bytes == 0 && fake_win[1][4].base_ptr == found_n4->base_ptr &&
           fake_win[1][4].num_bytes == found_n4->num_bytes;
}

static void test_install_restore(void)
{
    l2p_plan p;
    l2p_window a, b, old = win(0x5000, 16, 1.0);
    sample_plan(&p, &a, &b);
    fake_reset(100);
    fake_win[1][4] = old; /* node 4 had a window of its own */
    l2p_plan_txn t;
    size_t granted = 0;
    CHECK(l2p_plan_begin(&t, 0, &fake) == L2P_OK);
    CHECK(l2p_plan_apply(&t, &p, &granted) == L2P_OK);
    CHECK(granted == 300 && fake_limit == 300);
    CHECK(fake_win[0][1].base_ptr == 0x1000 && fake_win[1][2].base_ptr == 0x9000);
    CHECK(fake_win[1][3].base_ptr == 0x9000 && fake_win[1][4].num_bytes == 0);
    /* the order: limit read, each slot read, limit set, lines reset, then windows written */
    CHECK(strncmp(fake_log, "LggggSR", 7) == 0);
    CHECK(fake_resets == 1);
    /* a second plan in the same transaction: the limit unchanged is not set again */
    l2p_plan q;
    l2p_plan_init(&q, 0);
    void *s1[] = {H(1)}, *s6[] = {H(6)};
    l2p_window c = win(0x7000, 8, 1.0);
    l2p_plan_add(&q, L2P_CARRIER_STREAM, s1, 1, NULL, 0, NULL);
    l2p_plan_add(&q, L2P_CARRIER_STREAM, s6, 1, &c, 1, NULL); /* a slot begin never saw */
    l2p_plan_set_aside(&q, 1, 250, 1000); /* rounds to 300: already held */
    fake_log[0] = 0;
    CHECK(l2p_plan_apply(&t, &q, &granted) == L2P_OK && granted == 300);
    CHECK(strchr(fake_log, 'S') != NULL); /* 250 != 300 asked: the driver is asked */
    fake_log[0] = 0; /* asked again: 250 was just granted as 300, no second synchronisation */
    CHECK(l2p_plan_apply(&t, &q, &granted) == L2P_OK && granted == 300);
    CHECK(strchr(fake_log, 'S') == NULL);
    CHECK(fake_win[0][1].num_bytes == 0 && fake_win[0][6].base_ptr == 0x7000);
    CHECK(fake_win[1][2].base_ptr == 0x9000); /* q does not name the nodes: left as they are */
    CHECK(l2p_plan_end(&t) == L2P_OK);
    CHECK(state_is_found(&old) && fake_win[0][6].num_bytes == 0);
    CHECK(fake_resets == 4);
    CHECK(l2p_plan_end(&t) == L2P_OK); /* idempotent */
    CHECK(l2p_plan_apply(&t, &p, NULL) == L2P_ERR_STATE);
    l2p_plan_txn_free(&t);
    /* a plan without a set-aside leaves the limit alone */
    fake_reset(100);
    p.has_set_aside = 0;
    CHECK(l2p_plan_begin(&t, 0, &fake) == L2P_OK);
    CHECK(l2p_plan_apply(&t, &p, &granted) == L2P_OK && granted == 100);
    CHECK(strchr(fake_log, 'S') == NULL);
    CHECK(l2p_plan_end(&t) == L2P_OK && strchr(fake_log, 'S') == NULL);
    l2p_plan_txn_free(&t);
    /* another device's plan is refused */
    q.device = 1;
    CHECK(l2p_plan_begin(&t, 0, &fake) == L2P_OK);
    CHECK(l2p_plan_apply(&t, &q, NULL) == L2P_ERR_VALUE);
    l2p_plan_end(&t);
    l2p_plan_txn_free(&t);
    l2p_plan_free(&p);
    l2p_plan_free(&q);
}

/* A failure at every call of the apply leaves the device as found (all or nothing), and the
 * error reported is the failing call's. */
static void test_all_or_nothing(void)
{
    l2p_plan p;
    l2p_window a, b, old = win(0x5000, 16, 1.0);
    sample_plan(&p, &a, &b);
    int failures = 0;
    for (int k = 1; k < 40; k++) {
        fake_reset(100);
        fake_win[1][4] = old;
        l2p_plan_txn t;
        CHECK(l2p_plan_begin(&t, 0, &fake) == L2P_OK); /* call 0 */
        fail_at = k;
        l2p_status st = l2p_plan_apply(&t, &p, NULL);
        fail_at = -1;
        if (st != L2P_OK) {
            failures++;
            CHECK(strstr(l2p_last_error()->message, "fake") != NULL);
            /* what the apply changed is back; the lines may have been demoted (harmless) */
            CHECK(state_is_found(&old));
        }
        CHECK(l2p_plan_end(&t) == L2P_OK);
        CHECK(state_is_found(&old));
        l2p_plan_txn_free(&t);
        if (st == L2P_OK) break; /* k passed the last call */
    }
    CHECK(failures >= 10); /* 4 reads, the limit, the reset, 4 reads + 4 writes */
    l2p_plan_free(&p);
}

/* Plans without a slot (a set-aside only: tax.measure's session and its two arms) applied
 * again and again in one transaction. The transaction's arrays once were resized to 0 bytes
 * here: realloc(p, 0) freed them and returned NULL, the second apply failed "out of host
 * memory" and l2p_plan_txn_free freed the array again (tools/investigations/tax-validate aborted: "double
 * free detected in tcache 2"). */
static void test_set_aside_only_plans(void)
{
    l2p_plan session, arm[2];
    l2p_plan_txn t;
    size_t granted = 0;
    fake_reset(100);
    l2p_plan_init(&session, 0);
    for (int i = 0; i < 2; i++) {
        l2p_plan_init(&arm[i], 0);
        CHECK(l2p_plan_set_aside(&arm[i], 1, i ? 250 : 0, 1000) == L2P_OK);
    }
    CHECK(l2p_plan_begin(&t, 0, &fake) == L2P_OK);
    CHECK(l2p_plan_apply(&t, &session, &granted) == L2P_OK && granted == 100);
    for (int round = 0; round < 6; round++) {
        l2p_status st = l2p_plan_apply(&t, &arm[round % 2], &granted);
        CHECK(st == L2P_OK);
        if (st != L2P_OK) {
            printf("  apply %d: %s\n", round, l2p_last_error()->message);
            break;
        }
        CHECK(granted == (round % 2 ? 300u : 0u) && fake_limit == granted);
    }
    CHECK(l2p_plan_end(&t) == L2P_OK && fake_limit == 100);
    l2p_plan_txn_free(&t);
    CHECK(t.slots == NULL && t.found == NULL);
    l2p_plan_txn_free(&t); /* idempotent */
    /* a slot after slot-less applies: both arrays grow together, the window comes back */
    l2p_plan q;
    l2p_window w = win(0x7000, 8, 1.0);
    void *s2[] = {H(2)};
    l2p_plan_init(&q, 0);
    CHECK(l2p_plan_add(&q, L2P_CARRIER_STREAM, s2, 1, &w, 1, NULL) == L2P_OK);
    CHECK(l2p_plan_begin(&t, 0, &fake) == L2P_OK);
    CHECK(l2p_plan_apply(&t, &session, NULL) == L2P_OK);
    CHECK(l2p_plan_apply(&t, &arm[1], NULL) == L2P_OK);
    CHECK(l2p_plan_apply(&t, &q, NULL) == L2P_OK && fake_win[0][2].base_ptr == 0x7000);
    CHECK(t.n == 1 && t.cap >= 1);
    CHECK(l2p_plan_end(&t) == L2P_OK && fake_win[0][2].num_bytes == 0 && fake_limit == 100);
    l2p_plan_txn_free(&t);
    l2p_plan_free(&q);
    for (int i = 0; i < 2; i++) l2p_plan_free(&arm[i]);
    l2p_plan_free(&session);
}

/* The saved entry's rule: the kinds by name, offsets and sizes not negative, and the window
 * rule of l2p_policy_make_window, each message naming the entry and the field. */
static void test_saved_entries(void)
{
    CHECK(l2p_plan_kind_of("nodes", "k") == L2P_CARRIER_NODES);
    CHECK(l2p_plan_kind_of("launch", "k") == L2P_CARRIER_LAUNCH);
    CHECK(l2p_plan_kind_of("bogus", "entries[2]['kind']") == -1);
    CHECK(strstr(l2p_last_error()->message, "entries[2]['kind']: 'bogus' is not a carrier kind"));
    CHECK(l2p_plan_kind_of("Stream", "k") == -1); /* names are exact */
    CHECK(l2p_plan_kind_name(L2P_CARRIER_STREAM) && !strcmp(l2p_plan_kind_name(0), "stream"));
    CHECK(l2p_plan_kind_name(3) == NULL && l2p_plan_kind_name(-1) == NULL);

    l2p_plan_saved ok = {.kind = L2P_CARRIER_STREAM, .has_window = 1, .offset = 0,
                         .num_bytes = 4096, .hit_ratio = 0.6, .hit_prop = 2, .miss_prop = 1};
    CHECK(l2p_plan_check_saved(&ok, "e") == L2P_OK);
    l2p_plan_saved e = ok;
    e.hit_ratio = 2.0;
    CHECK(l2p_plan_check_saved(&e, "plan.json: entries[0]") == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "plan.json: entries[0]: hit_ratio: 2 is outside"));
    e = ok;
    e.hit_ratio = NAN;
    CHECK(l2p_plan_check_saved(&e, "e") == L2P_ERR_VALUE);
    e = ok;
    e.hit_prop = 99;
    CHECK(l2p_plan_check_saved(&e, "e") == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "e: hit_prop: 99 is not an AccessProperty"));
    e = ok;
    e.miss_prop = 2; /* PERSISTING misses: the driver refuses them */
    CHECK(l2p_plan_check_saved(&e, "e") == L2P_ERR_VALUE);
    e = ok;
    e.offset = -1;
    CHECK(l2p_plan_check_saved(&e, "e") == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "e: offset -1 is negative"));
    e = ok;
    e.num_bytes = -5;
    CHECK(l2p_plan_check_saved(&e, "e") == L2P_ERR_VALUE);
    e = ok;
    e.kind = 7;
    CHECK(l2p_plan_check_saved(&e, "e") == L2P_ERR_VALUE);
    /* an entry without a window (it turns its carrier off) has no window values to judge */
    e = ok;
    e.has_window = 0;
    e.hit_ratio = 2.0;
    e.offset = -1;
    CHECK(l2p_plan_check_saved(&e, "e") == L2P_OK);
    /* the window rule alone, as AccessPolicyWindow checks it before its target */
    CHECK(l2p_check_window_rule(1.0, 0, 0) == L2P_OK);
    CHECK(l2p_check_window_rule(0.0, 1, 1) == L2P_OK);
    CHECK(l2p_check_window_rule(-0.1, 2, 1) == L2P_ERR_VALUE);
    CHECK(l2p_check_window_rule(0.5, 3, 1) == L2P_ERR_VALUE);
}

/* A carrier forgotten while installed (its owner destroyed the graph) gets no window put back
 * at the end, and no call at all: every other slot is restored; a stream slot with the same
 * handle as a forgotten node is another carrier and is restored. */
static void test_forget(void)
{
    l2p_plan p;
    l2p_window a, b;
    sample_plan(&p, &a, &b);
    fake_reset(100);
    l2p_window own = win(0x5000, 16, 1.0);
    fake_win[1][3] = own; /* node 3 had a window: what it finds moves with it */
    l2p_plan_txn t;
    CHECK(l2p_plan_begin(&t, 0, &fake) == L2P_OK);
    CHECK(l2p_plan_apply(&t, &p, NULL) == L2P_OK);
    CHECK(fake_win[1][2].base_ptr == 0x9000 && fake_win[1][3].base_ptr == 0x9000);
    size_t before = t.n;
    l2p_slot gone = {L2P_CARRIER_NODES, H(2)}, other = {L2P_CARRIER_NODES, H(1)};
    l2p_plan_txn_forget(&t, &gone);
    l2p_plan_txn_forget(&t, &other); /* node 1 was never touched: nothing to forget */
    CHECK(t.n == before - 1);
    fake_log[0] = 0;
    CHECK(l2p_plan_end(&t) == L2P_OK);
    CHECK(fake_win[1][2].base_ptr == 0x9000);               /* left alone: not written */
    CHECK(fake_win[1][3].base_ptr == 0x5000 && fake_win[1][3].num_bytes == 16); /* its own */
    CHECK(fake_win[0][1].num_bytes == 0 && fake_win[1][4].num_bytes == 0);    /* restored */
    CHECK(fake_limit == 100);
    CHECK(strlen(fake_log) == before - 1 + 2); /* a write per slot left, lines reset, limit */
    l2p_plan_txn_free(&t);
    l2p_plan_free(&p);
}

int main(void)
{
    test_alternatives_rule();
    test_groups_transitive();
    test_window_ops_get_the_device();
    test_configure();
    test_install_restore();
    test_all_or_nothing();
    test_set_aside_only_plans();
    test_saved_entries();
    test_forget();
    printf("test_plan: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
