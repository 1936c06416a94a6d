/* C tests of the tuner on synthetic cost surfaces: flat, a single optimum, noisy, the optimum
 * at "no persistence", the default limit better than none, stream groups, failures, and its
 * statistics, a drift the recheck outlasts, an undecided verdict the confirmation extends. The
 * geometry is an H200's: granule 3.75 MiB, max 37.5 MiB, default 11.25 MiB. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l2p_policy.h"
#include "l2p_stats.h"
#include "l2p_test.h"
#include "l2p_tune.h"

int l2p_test_passed, l2p_test_failed;

#define GRANULE 3932160u
#define PMAX (10u * GRANULE)
#define DEFAULT_LIMIT (3u * GRANULE)
#define MIB (1u << 20)

typedef double (*cost_fn)(const l2p_tune_config *c, const void *arg);

typedef struct {
    cost_fn cost;
    const void *arg;
    double noise;            /* relative, uniform in [-noise, noise] */
    unsigned long long rng;
    size_t calls;
    int fail_at;             /* fail on this call (1-based), 0: never */
    int both_on_in_group;    /* a config with two windows on in group 0 was asked for */
    size_t fast_from, fast_to; /* calls in [fast_from, fast_to] (1-based) run fast_by faster:
                                * the device drifted for a moment; 0: never */
    double fast_by;
    size_t fade_from;        /* calls from this one (1-based) see no gain: cost 1.0; 0: never */
} harness;

static double uniform(unsigned long long *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

static l2p_status eval(void *ctx, const l2p_tune_config *c, size_t repeat, double *samples)
{
    harness *h = ctx;
    h->calls++;
    if (h->fail_at && (int)h->calls == h->fail_at)
        return l2p_fail(L2P_ERR_VALUE, "synthetic failure");
    if (c->n_targets >= 2 && c->win[0].on && c->win[1].on) h->both_on_in_group = 1;
    double t = h->fade_from && h->calls >= h->fade_from ? 1.0 : h->cost(c, h->arg);
    if (h->fast_from && h->calls >= h->fast_from && h->calls <= h->fast_to) t *= 1.0 - h->fast_by;
    for (size_t i = 0; i < repeat; i++)
        samples[i] = t * (1.0 + h->noise * (2.0 * uniform(&h->rng) - 1.0));
    return L2P_OK;
}

static void options(l2p_tune_options *o, size_t n_targets, size_t bytes)
{
    l2p_tune_options_default(o);
    o->granule = GRANULE;
    o->persisting_max = PMAX;
    o->default_limit = DEFAULT_LIMIT;
    o->n_targets = n_targets;
    for (size_t i = 0; i < n_targets; i++) {
        o->target_bytes[i] = bytes;
        o->group[i] = (int)i;
    }
}

/* ---- surfaces ---- */

static double flat(const l2p_tune_config *c, const void *arg)
{
    (void)c;
    (void)arg;
    return 1.0;
}

/* Like the hot/cold kernel: the set-aside alone costs time, persisting bytes that fit the
 * set-aside save time, persisting bytes beyond it thrash. */
typedef struct {
    double hot_bytes, penalty, gain, thrash;
} hot_cold_shape;

static double hot_cold(const l2p_tune_config *c, const void *arg)
{
    const hot_cold_shape *k = arg;
    double s = (double)c->set_aside, t = 1.0 + k->penalty * s / PMAX;
    if (c->win[0].on) {
        double p = c->win[0].hit_ratio * k->hot_bytes;
        double fit = p < s ? p : s;
        double saved = k->gain * fit / k->hot_bytes;
        if (c->win[0].hit_prop != L2P_ACCESS_PERSISTING) saved = 0.0;
        if (c->win[0].miss_prop == L2P_ACCESS_STREAMING) saved *= 1.02;
        t -= saved;
        if (p > s) t += k->thrash * (p - s) / k->hot_bytes;
    }
    return t;
}

static double penalty_only(const l2p_tune_config *c, const void *arg)
{
    (void)arg;
    return 1.0 + 0.3 * (double)c->set_aside / PMAX + (c->win[0].on ? 0.05 : 0.0);
}

/* The default limit (and only it) is 10 % faster than none; windows do nothing. */
static double default_best(const l2p_tune_config *c, const void *arg)
{
    (void)arg;
    return c->set_aside == DEFAULT_LIMIT ? 0.9 : 1.0 + 0.01 * (double)c->set_aside / PMAX;
}

/* The exhaustive grid of the bar: set-aside 0, the default, every second granule up
 * to the max, x hit ratios 0.1 .. 1.0 (PERSISTING / STREAMING), plus the two baselines. */
static double grid_best(cost_fn f, const void *arg, size_t *points)
{
    size_t levels[] = {0, DEFAULT_LIMIT, 2 * GRANULE, 4 * GRANULE, 6 * GRANULE, 8 * GRANULE,
                       10 * GRANULE};
    l2p_tune_config c;
    double best = INFINITY;
    *points = 0;
    memset(&c, 0, sizeof c);
    c.n_targets = 1;
    for (size_t s = 0; s < sizeof levels / sizeof *levels; s++)
        for (int h = 0; h <= 10; h++) {
            c.set_aside = levels[s];
            c.win[0].on = h > 0;
            c.win[0].hit_ratio = h / 10.0;
            c.win[0].hit_prop = L2P_ACCESS_PERSISTING;
            c.win[0].miss_prop = L2P_ACCESS_STREAMING;
            double t = f(&c, arg);
            if (t < best) best = t;
            if (h > 0) (*points)++;
        }
    return best;
}

/* ---- tests ---- */

static void test_levels(void)
{
    size_t lv[L2P_TUNE_MAX_LEVELS];
    size_t n = l2p_tune_set_aside_levels(GRANULE, PMAX, DEFAULT_LIMIT, lv, L2P_TUNE_MAX_LEVELS);
    CHECK(n == 11); /* 0 and 1..10 granules; the default is 3 granules */
    CHECK(lv[0] == 0 && lv[1] == GRANULE && lv[10] == PMAX);
    /* a max that is not a granule multiple ends on the max; an odd default is its own level */
    n = l2p_tune_set_aside_levels(1000, 2500, 1234, lv, L2P_TUNE_MAX_LEVELS);
    CHECK(n == 5);
    CHECK(lv[0] == 0 && lv[1] == 1000 && lv[2] == 1234 && lv[3] == 2000 && lv[4] == 2500);
}

static void test_options_rejected(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {flat, NULL, 0, 1, 0, 0, 0};
    options(&o, 0, MIB);
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "targets") != NULL);
    options(&o, 1, 0);
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_ERR_VALUE);
    options(&o, 1, MIB);
    o.hit_ratios[3] = 1.5;
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "hit_ratios") != NULL);
    options(&o, 1, MIB);
    o.min_gain = NAN;
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_ERR_VALUE);
    options(&o, 1, MIB);
    o.granule = 0;
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_ERR_NOT_SUPPORTED);
    CHECK(h.calls == 0);
}

static void test_flat(double noise)
{
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {flat, NULL, noise, 7, 0, 0, 0};
    options(&o, 1, 16 * MIB);
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(!r.persistence_helps);
    CHECK(r.recommended.win[0].on == 0);
    CHECK(r.recommended.set_aside == 0 || r.recommended.set_aside == DEFAULT_LIMIT);
    CHECK(r.ci_low <= 1.0 + 1e-12);
    CHECK(r.evals <= 18); /* the default budget: 14 + 4 per target */
    l2p_tune_result_free(&r);
}

static void test_single_optimum(double noise, double hot_mib)
{
    hot_cold_shape k = {hot_mib * MIB, 0.4, 0.9, 0.6};
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {hot_cold, &k, noise, 11, 0, 0, 0};
    size_t grid_points;
    double best = grid_best(hot_cold, &k, &grid_points);
    options(&o, 1, (size_t)k.hot_bytes);
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(r.persistence_helps);
    CHECK(r.speedup > 1.0 && r.ci_low > 1.0 && r.ci_low <= r.speedup && r.speedup <= r.ci_high);
    /* the pick's true cost is within 2 % of the grid's best, with a quarter of its points */
    double picked = hot_cold(&r.recommended, &k);
    CHECK(picked <= best * 1.02);
    if (!(picked <= best * 1.02))
        fprintf(stderr, "  hot %g MiB noise %g: picked %.4f grid best %.4f\n", hot_mib, noise,
                picked, best);
    CHECK(4 * r.evals <= grid_points);
    CHECK(r.n_trials == r.evals);
    CHECK(r.trials[0].phase == L2P_TUNE_BASELINE && r.trials[0].config.set_aside == 0);
    l2p_tune_result_free(&r);
}

static void test_no_persistence_best(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {penalty_only, NULL, 0.01, 3, 0, 0, 0};
    options(&o, 1, 8 * MIB);
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(!r.persistence_helps);
    CHECK(r.recommended.set_aside == 0 && !r.recommended.win[0].on);
    CHECK(r.baseline == 0);
    l2p_tune_result_free(&r);
}

static void test_default_better(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {default_best, NULL, 0.0, 3, 0, 0, 0};
    options(&o, 1, 8 * MIB);
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(r.baseline == 1);
    CHECK(r.recommended.set_aside == DEFAULT_LIMIT && !r.recommended.win[0].on);
    CHECK(fabs(r.base_ms[1] - 0.9) < 1e-9 && fabs(r.base_ms[0] - 1.0) < 1e-9);
    l2p_tune_result_free(&r);
}

/* An MPS client: the set-aside is the server's (here 4 granules) and cannot change. Every
 * trial keeps it; the windows are still searched and the best hit ratio found; the baseline is
 * "no window" at that set-aside. */
static void test_fixed_set_aside(double noise)
{
    hot_cold_shape k = {12.0 * MIB, 0.4, 0.9, 0.6};
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {hot_cold, &k, noise, 5, 0, 0, 0};
    options(&o, 1, (size_t)k.hot_bytes);
    o.default_limit = 4 * GRANULE;
    o.set_aside_fixed = 1;
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(r.n_levels == 1 && r.levels[0] == 4 * GRANULE);
    int kept = 1;
    for (size_t i = 0; i < r.n_trials; i++) kept &= r.trials[i].config.set_aside == 4 * GRANULE;
    CHECK(kept);
    CHECK(fabs(r.base_ms[0] - r.base_ms[1]) < 1e-12); /* (a) and (b) are the same point */
    CHECK(r.persistence_helps && r.recommended.win[0].on);
    /* the best a window can do at 15 MiB over a 12 MiB hot set: all of it persisting */
    l2p_tune_config best = r.recommended;
    best.win[0].hit_ratio = 1.0;
    best.win[0].hit_prop = L2P_ACCESS_PERSISTING;
    best.win[0].miss_prop = L2P_ACCESS_STREAMING;
    CHECK(hot_cold(&r.recommended, &k) <= hot_cold(&best, &k) * 1.02);
    l2p_tune_result_free(&r);
    /* A server set-aside of 0: nothing to gain, and nothing else is tried. */
    options(&o, 1, (size_t)k.hot_bytes);
    o.default_limit = 0;
    o.set_aside_fixed = 1;
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(!r.persistence_helps && r.recommended.set_aside == 0);
    l2p_tune_result_free(&r);
}

static void test_group_one_window(void)
{
    hot_cold_shape k = {8.0 * MIB, 0.2, 0.5, 0.3};
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {hot_cold, &k, 0.0, 3, 0, 0, 0};
    options(&o, 2, 8 * MIB);
    o.group[1] = o.group[0]; /* one stream: at most one window at a time */
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(!h.both_on_in_group);
    CHECK(r.evals <= 20);
    l2p_tune_result_free(&r);
}

/* Two targets on one stream (alternatives), the larger first: a window on it only costs (a
 * streamed input), a window on the second (an atomically updated table) pays once the
 * set-aside holds it. The H100's Bloom filter (keys 64 MiB, bits 40 MiB) had this shape, and
 * a ridge walked over the group's first target found nothing there to follow; the screening
 * now probes alternatives and the ridge walks the best probe. */
static double alt_second(const l2p_tune_config *c, const void *arg)
{
    (void)arg;
    double s = (double)c->set_aside, t = 1.0 + 0.3 * s / PMAX;
    if (c->win[0].on) t += 0.05;
    if (c->win[1].on) {
        double p = c->win[1].hit_ratio * 24.0 * MIB, fit = p < s ? p : s;
        t -= 0.5 * fit / (24.0 * MIB);
    }
    return t;
}

static void test_alternatives_follow_the_best_probe(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {alt_second, NULL, 0.01, 5, 0, 0, 0};
    options(&o, 2, 64 * MIB);
    o.target_bytes[1] = 24 * MIB;
    o.group[1] = o.group[0];
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(!h.both_on_in_group);
    CHECK(r.screened == 2 && r.kept[1]);
    CHECK(r.persistence_helps && r.recommended.win[1].on && !r.recommended.win[0].on);
    CHECK(r.speedup > 1.2);
    CHECK(r.evals <= 14 + 2 + 4 * 2);
    l2p_tune_result_free(&r);
}

/* The recheck: the device ran 10 % faster for a moment during the search (the
 * first probe after the baselines), and that lucky trial, at a set-aside too large, had the
 * fastest median of the search. Re-measured interleaved with the other top candidates it
 * loses; the pick is the true optimum. A search that keeps its fastest median recommends the
 * lucky one, 2-3 % slower than the optimum. */
static void test_recheck_outlasts_a_lucky_trial(void)
{
    hot_cold_shape k = {8.0 * MIB, 0.1, 0.3, 0.3};
    l2p_tune_options o;
    l2p_tune_result r;
    size_t grid_points;
    double best = grid_best(hot_cold, &k, &grid_points);
    for (unsigned long long seed = 1; seed <= 4; seed++) {
        harness h = {hot_cold, &k, 0.002, seed, 0, 0, 0, 3, 3, 0.10};
        options(&o, 1, (size_t)k.hot_bytes);
        CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
        /* the lucky trial (call 3) was the search's fastest median */
        size_t fastest = 0;
        for (size_t i = 1; i < r.n_trials; i++)
            if (r.trials[i].median < r.trials[fastest].median) fastest = i;
        CHECK(fastest == 2);
        double lucky = hot_cold(&r.trials[2].config, &k), picked = hot_cold(&r.recommended, &k);
        CHECK(lucky > best * 1.02); /* it is truly worse than the best */
        CHECK(r.rechecked >= 2 && r.persistence_helps);
        CHECK(picked <= best * 1.005);
        if (!(picked <= best * 1.005))
            fprintf(stderr, "  lucky trial, seed %llu: picked %.4f (set-aside %zu) lucky %.4f "
                    "best %.4f\n", seed, picked, r.recommended.set_aside, lucky, best);
        l2p_tune_result_free(&r);
    }
}

/* A real gain of 3 % (any persisting window over a set-aside) under +-5 % noise per sample. */
static double small_gain(const l2p_tune_config *c, const void *arg)
{
    (void)arg;
    int on = c->win[0].on && c->win[0].hit_prop == L2P_ACCESS_PERSISTING && c->set_aside > 0;
    return on ? 0.97 : 1.0;
}

/* The confirmation: after confirm_rounds the interval of a real 3 % gain under
 * +-5 % noise still reaches below 1 (the t interval over 3 rounds is wide); the verdict is
 * undecided, and more rounds narrow it until the gain is shown. A confirmation that stops at
 * confirm_rounds says "no persistence" about a real gain. A clear gain is decided at once. */
static void test_confirmation_adds_rounds_while_undecided(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    int helped = 0, extended = 0;
    for (unsigned long long seed = 1; seed <= 10; seed++) {
        harness h = {small_gain, NULL, 0.05, seed, 0, 0, 0};
        options(&o, 1, 8 * MIB);
        CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
        helped += r.persistence_helps;
        extended += r.confirm_rounds > o.confirm_rounds;
        /* the looks come at confirm_rounds x 1, 2, 4, 8 */
        CHECK(r.confirm_rounds == 3 || r.confirm_rounds == 6 || r.confirm_rounds == 12 ||
              r.confirm_rounds == 24);
        l2p_tune_result_free(&r);
    }
    if (helped < 9 || extended < 5)
        fprintf(stderr, "  undecided confirmation: helps in %d, extended in %d of 10\n", helped,
                extended);
    CHECK(helped >= 9);  /* 10 of 10 today; 2 of 10 stop at 3 rounds with a decided help */
    CHECK(extended >= 5); /* 8 of 10 today */
    /* a clear gain (30 %) is decided after confirm_rounds */
    hot_cold_shape k = {8.0 * MIB, 0.1, 0.3, 0.3};
    harness h = {hot_cold, &k, 0.01, 3, 0, 0, 0};
    options(&o, 1, 8 * MIB);
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(r.persistence_helps && r.confirm_rounds == o.confirm_rounds);
    l2p_tune_result_free(&r);
}

/* A real gain of 1.28x (any persisting window over a set-aside), as the allocate-per-call
 * workload of issue 38 showed against an exhaustive grid. */
static double gain_128(const l2p_tune_config *c, const void *arg)
{
    (void)arg;
    int on = c->win[0].on && c->win[0].hit_prop == L2P_ACCESS_PERSISTING && c->set_aside > 0;
    return on ? 1.0 / 1.28 : 1.0;
}

/* The rule's own arithmetic behind a dropped gain: three rounds in which the candidate is
 * 1.28x faster in two and even in one. The pooled medians say 1.28x, but the t interval over 3
 * rounds (2 degrees of freedom) reaches below 1: a single look at 3 rounds calls it "does not
 * help", which is how one noisy round of three vetoed a real gain. */
static void test_three_rounds_one_noisy_is_undecided(void)
{
    double a[30], b[30], c[30];
    l2p_tune_verdict_t v;
    for (size_t i = 0; i < 30; i++) {
        double wiggle = 1.0 + 0.002 * (double)(i % 5);
        a[i] = 1.05 * wiggle;
        b[i] = 1.0 * wiggle;
        c[i] = (i < 10 ? 1.0 : 1.0 / 1.28) * wiggle; /* round 0: the hiccup */
    }
    CHECK(l2p_tune_verdict(a, 30, b, 30, c, 30, 3, 0.01, 0.95, 7, &v) == L2P_OK);
    CHECK(v.speedup > 1.25 && !v.helps && v.ci_low < 1.0 && v.ci_high > 1.01);
}

/* The recheck of a recommended pick (recheck_rounds): a real 1.28x gain whose first fresh
 * round is a hiccup (the pick's samples of that round as slow as the baseline) is undecided
 * at 3 rounds; the recheck extends, as the confirmation does, and the pick holds. A pick
 * whose gain is gone after the confirmation is dropped for the better baseline. */
static void test_recheck_of_the_pick(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    for (unsigned long long seed = 1; seed <= 3; seed++) {
        harness h = {gain_128, NULL, 0.01, seed, 0, 0, 0};
        options(&o, 1, 16 * MIB);
        CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
        CHECK(r.persistence_helps && r.held == 1 && r.held_rounds == o.recheck_rounds);
        CHECK(r.held_ci_low <= r.held_speedup && r.held_speedup <= r.held_ci_high);
        size_t total = h.calls;
        l2p_tune_result_free(&r);
        /* the recheck's 3 rounds of (a), (b), the pick come last; round 0 runs forwards */
        harness hic = {gain_128, NULL, 0.01, seed, 0, 0, 0, total - 9 + 3, total - 9 + 3,
                       -0.28, 0};
        CHECK(l2p_tune_run(&o, eval, &hic, &r) == L2P_OK);
        CHECK(r.persistence_helps && r.held == 1 && r.held_rounds > o.recheck_rounds);
        CHECK(r.recommended.win[0].on && r.held_speedup > 1.2);
        l2p_tune_result_free(&r);
        harness fade = {gain_128, NULL, 0.01, seed, 0, 0, 0, 0, 0, 0.0, total - 9 + 1};
        CHECK(l2p_tune_run(&o, eval, &fade, &r) == L2P_OK);
        CHECK(!r.persistence_helps && r.held == 0 && !r.recommended.win[0].on);
        CHECK(r.speedup > 1.2); /* the confirmation had said it helps */
        l2p_tune_result_free(&r);
    }
    harness none = {gain_128, NULL, 0.01, 1, 0, 0, 0};
    options(&o, 1, 16 * MIB);
    o.recheck_rounds = 0;
    CHECK(l2p_tune_run(&o, eval, &none, &r) == L2P_OK);
    CHECK(r.persistence_helps && r.held == -1 && r.held_rounds == 0);
    l2p_tune_result_free(&r);
    o.recheck_rounds = 1001;
    CHECK(l2p_tune_check_options(&o) == L2P_ERR_VALUE);
}

static void test_failure_stops(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {flat, NULL, 0.0, 3, 0, 4, 0};
    options(&o, 1, 8 * MIB);
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "synthetic") != NULL);
    CHECK(h.calls == 4);
    CHECK(r.trials == NULL && r.n_trials == 0);
}

static void test_speedup_ci(void)
{
    double a[20], b[20], ratio, lo, hi;
    for (int i = 0; i < 20; i++) {
        a[i] = 2.0 + 0.01 * (i % 5);
        b[i] = 1.0 + 0.01 * (i % 5);
    }
    CHECK(l2p_tune_speedup_ci(a, 20, a, 20, 0.95, 1, &ratio, &lo, &hi) == L2P_OK);
    CHECK(ratio == 1.0 && lo <= 1.0 && hi >= 1.0);
    CHECK(l2p_tune_speedup_ci(a, 20, b, 20, 0.95, 1, &ratio, &lo, &hi) == L2P_OK);
    CHECK(ratio > 1.9 && lo > 1.8 && hi < 2.1 && lo <= ratio && ratio <= hi);
    b[3] = NAN;
    CHECK(l2p_tune_speedup_ci(a, 20, b, 20, 0.95, 1, &ratio, &lo, &hi) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "cand") != NULL);
    b[3] = -1.0;
    CHECK(l2p_tune_speedup_ci(a, 20, b, 20, 0.95, 1, &ratio, &lo, &hi) == L2P_ERR_VALUE);
    CHECK(l2p_tune_speedup_ci(a, 0, a, 20, 0.95, 1, &ratio, &lo, &hi) == L2P_ERR_VALUE);
}

/* The better-baseline rule in one place: the faster baseline is chosen, a tie goes to limit
 * 0, the gain must reach min_gain and the interval must lie above 1. */
static void test_verdict(void)
{
    double a[30], b[30], c[30];
    l2p_tune_verdict_t v;
    for (int i = 0; i < 30; i++) {
        double wiggle = 0.002 * ((i * 7) % 5 - 2);
        a[i] = 1.00 + wiggle;
        b[i] = 0.98 + wiggle;
        c[i] = 0.90 + wiggle;
    }
    CHECK(l2p_tune_verdict(a, 30, b, 30, c, 30, 1, 0.01, 0.95, 1, &v) == L2P_OK);
    CHECK(v.baseline == 1 && fabs(v.baseline_ms - 0.98) < 1e-12);
    CHECK(fabs(v.candidate_ms - 0.90) < 1e-12 && fabs(v.speedup - 0.98 / 0.90) < 1e-12);
    CHECK(v.helps && v.ci_low > 1.0 && v.ci_low <= v.speedup && v.speedup <= v.ci_high);
    /* a tie between the baselines goes to limit 0 (no set-aside, no tax) */
    CHECK(l2p_tune_verdict(a, 30, a, 30, c, 30, 1, 0.01, 0.95, 1, &v) == L2P_OK);
    CHECK(v.baseline == 0);
    /* 0.5 % faster, however sure, is below min_gain 1 %; with min_gain 0.1 % it helps */
    for (int i = 0; i < 30; i++) c[i] = a[i] / 1.005;
    CHECK(l2p_tune_verdict(a, 30, a, 30, c, 30, 1, 0.01, 0.95, 1, &v) == L2P_OK);
    CHECK(!v.helps && v.ci_low > 1.0);
    CHECK(l2p_tune_verdict(a, 30, a, 30, c, 30, 1, 0.001, 0.95, 1, &v) == L2P_OK);
    CHECK(v.helps && !v.slows);
    /* the mirror: 0.5 % slower, however sure, does not "slow the work" at min_gain 1 %; 5 %
     * slower does; a helping candidate never slows */
    for (int i = 0; i < 30; i++) c[i] = a[i] * 1.005;
    CHECK(l2p_tune_verdict(a, 30, a, 30, c, 30, 1, 0.01, 0.95, 1, &v) == L2P_OK);
    CHECK(!v.helps && !v.slows && v.ci_high < 1.0);
    for (int i = 0; i < 30; i++) c[i] = a[i] * 1.05;
    CHECK(l2p_tune_verdict(a, 30, a, 30, c, 30, 1, 0.01, 0.95, 1, &v) == L2P_OK);
    CHECK(!v.helps && v.slows);
    /* 3 % faster in every round but one that drifted: the rounds' interval reaches below 1 */
    for (int i = 0; i < 30; i++) {
        double drift = i < 10 ? 1.0 : i < 20 ? 1.08 : 0.92;
        b[i] = a[i] * drift;
        c[i] = a[i] / 1.03 * (i < 10 ? 1.0 : i < 20 ? 0.92 : 1.08);
    }
    CHECK(l2p_tune_verdict(b, 30, b, 30, c, 30, 1, 0.01, 0.95, 1, &v) == L2P_OK);
    double iid_low = v.ci_low;
    CHECK(l2p_tune_verdict(b, 30, b, 30, c, 30, 3, 0.01, 0.95, 1, &v) == L2P_OK);
    CHECK(v.ci_low < iid_low && v.ci_low < 1.0 && !v.helps);
    /* bad input names its argument */
    CHECK(l2p_tune_verdict(a, 30, b, 30, c, 30, 7, 0.01, 0.95, 1, &v) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "rounds") != NULL);
    CHECK(l2p_tune_verdict(a, 0, b, 30, c, 30, 1, 0.01, 0.95, 1, &v) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "limit0") != NULL);
    c[4] = NAN;
    CHECK(l2p_tune_verdict(a, 30, b, 30, c, 30, 1, 0.01, 0.95, 1, &v) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "candidate") != NULL);
    CHECK(l2p_tune_verdict(a, 30, b, 30, a, 30, 1, 1.5, 0.95, 1, &v) == L2P_ERR_VALUE);
}

/* Scoped or process-wide: the fewest calls per phase for which setting and releasing the
 * limit (2 x 0.5 ms, a device synchronisation each) costs at most a quarter of the saving. */
static void test_scope(void)
{
    l2p_tune_scope_t s;
    CHECK(l2p_tune_scope(0.5, 1.2, 1.0, &s) == L2P_OK); /* saves 0.2 ms a call */
    CHECK(fabs(s.saving_ms - 0.2) < 1e-12 && s.overhead_ms == 1.0);
    CHECK(s.min_calls == 20); /* 1.0 <= 0.25 * 20 * 0.2 */
    CHECK(l2p_tune_scope(0.5, 100.0, 50.0, &s) == L2P_OK); /* a long phase: one call pays */
    CHECK(s.min_calls == 1);
    CHECK(l2p_tune_scope(0.5, 1.0, 1.1, &s) == L2P_OK); /* slower: nothing to scope */
    CHECK(s.min_calls == 0 && s.saving_ms < 0.0);
    CHECK(l2p_tune_scope(0.0, 1.0, 0.5, &s) == L2P_OK && s.min_calls == 1);
    CHECK(l2p_tune_scope(-1.0, 1.0, 0.5, &s) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "switch_ms") != NULL);
    CHECK(l2p_tune_scope(0.5, 0.0, 0.5, &s) == L2P_ERR_VALUE);
    CHECK(l2p_tune_scope(0.5, 1.0, INFINITY, &s) == L2P_ERR_VALUE);
}

/* The test-only phase mask: unknown bits are refused; without the interval and min_gain
 * ("helps whenever faster") a flat surface with noise is called a help. */
static void test_phases(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {flat, NULL, 0.03, 7, 0, 0, 0};
    options(&o, 1, 16 * MIB);
    o.phases = 1u << 12;
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "phases") != NULL);
    int faster = 0, ruled = 0;
    for (unsigned long long seed = 1; seed <= 40; seed++) {
        h.rng = seed;
        options(&o, 1, 16 * MIB);
        CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
        ruled += r.persistence_helps;
        l2p_tune_result_free(&r);
        o.phases = L2P_TUNE_ALL & ~(unsigned)(L2P_TUNE_PH_INTERVAL | L2P_TUNE_PH_MIN_GAIN);
        o.recheck_rounds = 0; /* the rule alone: fresh rounds would drop some noise picks */
        CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
        faster += r.persistence_helps;
        l2p_tune_result_free(&r);
    }
    if (ruled > 2 || faster < 8) fprintf(stderr, "  phases: %d / %d of 40\n", ruled, faster);
    CHECK(ruled <= 2); /* the bar: at most 5 % false "helps" */
    CHECK(faster >= 8);
}

/* Screening: six targets, only target 4 gains (a window over it at a set-aside that holds
 * it); with screen_keep 2 each is probed once, the search runs on the fastest whose probe
 * beat the better baseline (only target 4: the other probes are slower than limit 0), and the
 * dropped ones never get a window after the screening. */
static double one_of_six(const l2p_tune_config *c, const void *arg)
{
    (void)arg;
    double t = 1.0 + 0.1 * (double)c->set_aside / PMAX;
    for (size_t i = 0; i < c->n_targets; i++)
        if (c->win[i].on) t += i == 4 ? -0.4 * c->win[i].hit_ratio : 0.02;
    return t;
}

/* Targets 1 and 4 gain, 4 more than 1; the rest cost a little. */
static double two_of_six(const l2p_tune_config *c, const void *arg)
{
    (void)arg;
    double t = 1.0 + 0.1 * (double)c->set_aside / PMAX;
    for (size_t i = 0; i < c->n_targets; i++)
        if (c->win[i].on) t += i == 4 ? -0.4 * c->win[i].hit_ratio
                               : i == 1 ? -0.3 * c->win[i].hit_ratio : 0.02;
    return t;
}

static int kept_count(const l2p_tune_result *r, size_t n)
{
    int kept = 0;
    for (size_t i = 0; i < n; i++) kept += r->kept[i];
    return kept;
}

/* Only probes that beat the better baseline are searched, at most screen_keep of them. */
static void test_screening_keeps_gainers(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {two_of_six, NULL, 0.01, 9, 0, 0, 0};
    for (size_t keep = 1; keep <= 4; keep++) {
        options(&o, 6, 16 * MIB);
        o.screen_keep = keep;
        CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
        CHECK(r.screened == 6 && r.kept[4]);
        CHECK(kept_count(&r, 6) == (keep < 2 ? 1 : 2));
        CHECK(keep < 2 || r.kept[1]);
        CHECK(r.persistence_helps && r.recommended.win[4].on);
        l2p_tune_result_free(&r);
    }
}

static void test_screening(void)
{
    l2p_tune_options o;
    l2p_tune_result r;
    harness h = {one_of_six, NULL, 0.01, 9, 0, 0, 0};
    options(&o, 6, 16 * MIB);
    o.screen_keep = 2;
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(r.screened == 6 && r.kept[4]);
    int screen_trials = 0, dropped_windows = 0;
    CHECK(kept_count(&r, 6) == 1);
    for (size_t t = 0; t < r.n_trials; t++) {
        if (r.trials[t].phase == L2P_TUNE_SCREEN) {
            screen_trials++;
            continue;
        }
        for (size_t i = 0; i < 6; i++)
            dropped_windows += r.trials[t].config.win[i].on && !r.kept[i];
    }
    CHECK(screen_trials == 6 && dropped_windows == 0);
    if (r.evals > 14 + 6 + 4 * 1) fprintf(stderr, "  screening: %zu evals\n", r.evals);
    CHECK(r.evals <= 14 + 6 + 4 * 1);
    CHECK(r.persistence_helps && r.recommended.win[4].on);
    l2p_tune_result_free(&r);
    /* no screening with as many targets as screen_keep, or with screen_keep 0 */
    options(&o, 2, 16 * MIB);
    o.screen_keep = 2;
    CHECK(l2p_tune_run(&o, eval, &h, &r) == L2P_OK);
    CHECK(r.screened == 0 && r.kept[0] && r.kept[1]);
    l2p_tune_result_free(&r);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The one median (l2p_stats), which the bootstrap takes by selection: on random values with
 * many repeats, odd and even counts, it equals the sorted reference, and the selection leaves
 * the k-th value in place with smaller ones before it and larger ones after it. */
static void test_median_by_selection(void)
{
    unsigned long long s = 12345;
    double v[64], ref[64], w[64];
    for (int trial = 0; trial < 500; trial++) {
        size_t n = 1 + (size_t)(trial % 64);
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            v[i] = (double)((s >> 33) % (trial % 3 ? 1000u : 5u)); /* repeats when % 5 */
        }
        memcpy(ref, v, n * sizeof *v);
        qsort(ref, n, sizeof *ref, cmp_dbl);
        double want = n % 2 ? ref[n / 2] : 0.5 * (ref[n / 2 - 1] + ref[n / 2]);
        memcpy(w, v, n * sizeof *v);
        CHECK(l2p_median(w, n) == want);
        memcpy(w, v, n * sizeof *v);
        size_t k = (size_t)trial % n;
        CHECK(l2p_select_kth(w, n, k) == ref[k]);
        int parted = 1;
        for (size_t i = 0; i < n; i++)
            parted &= i < k ? w[i] <= w[k] : w[i] >= w[k];
        CHECK(parted);
    }
    double big[2] = {1.7e308, 1.6e308}; /* the mean of the middle two does not overflow */
    double m = l2p_median(big, 2);
    CHECK(isfinite(m) && m > 1.6e308 && m < 1.7e308);
    double tiny[2] = {5e-324, 5e-324}; /* two equal subnormals: that value, not 0 */
    CHECK(l2p_median(tiny, 2) == 5e-324);
    double wide[2] = {-1.7e308, 1.7e308}; /* opposite signs: no overflow of the gap */
    CHECK(l2p_median(wide, 2) == 0.0);
}

/* A replayable draw for l2p_resample_median: the indices it gave are kept, so the test can
 * resample the values explicitly and take the one median of them. */
typedef struct {
    unsigned long long s;
    size_t got[64], n_got;
} draw_log;

static size_t logged_draw(void *rng, size_t n)
{
    draw_log *d = rng;
    d->s = d->s * 6364136223846793005ull + 1442695040888963407ull;
    size_t i = (size_t)((d->s >> 33) % n);
    d->got[d->n_got++] = i;
    return i;
}

/* The bootstrap's resample median read off index counts equals l2p_median over the values
 * those same indices pick, odd and even n, with repeats, down to n = 1. */
static void test_resample_median_by_counts(void)
{
    unsigned long long s = 777;
    double sorted[64], picked[64];
    unsigned counts[64];
    draw_log d = {.s = 99};
    for (int trial = 0; trial < 2000; trial++) {
        size_t n = 1 + (size_t)(trial % 64);
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            sorted[i] = (double)((s >> 33) % (trial % 3 ? 1000u : 4u));
        }
        qsort(sorted, n, sizeof *sorted, cmp_dbl);
        d.n_got = 0;
        double got = l2p_resample_median(sorted, n, counts, logged_draw, &d);
        CHECK(d.n_got == n);
        for (size_t i = 0; i < n; i++) picked[i] = sorted[d.got[i]];
        CHECK(got == l2p_median(picked, n));
    }
}

int main(void)
{
    test_resample_median_by_counts();
    test_fixed_set_aside(0.0);
    test_fixed_set_aside(0.02);
    test_levels();
    test_options_rejected();
    test_flat(0.0);
    test_flat(0.03);
    for (double hot = 4; hot <= 64; hot *= 2) {
        test_single_optimum(0.0, hot);
        test_single_optimum(0.02, hot);
    }
    test_no_persistence_best();
    test_default_better();
    test_group_one_window();
    test_alternatives_follow_the_best_probe();
    test_recheck_outlasts_a_lucky_trial();
    test_three_rounds_one_noisy_is_undecided();
    test_recheck_of_the_pick();
    test_confirmation_adds_rounds_while_undecided();
    test_failure_stops();
    test_median_by_selection();
    test_speedup_ci();
    test_verdict();
    test_scope();
    test_phases();
    test_screening();
    test_screening_keeps_gainers();
    printf("test_tune: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
