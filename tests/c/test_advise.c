/* The advisor's search and decision (l2p_advise.h) on synthetic landscapes, without a GPU:
 * a workload that gains from a window over its table, workloads that only pay the set-aside's
 * tax, the weights that decide between them, must_not_slow, a carrier two workloads want,
 * and the evaluation count growing linearly with the workloads. */
#include <math.h>
#include <string.h>

#include "l2p_advise.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

#define MIB (1024.0 * 1024.0)
#define GRAN ((size_t)(3.75 * MIB))

typedef struct {
    int kind[L2P_ADVISE_MAX_WORK];   /* 0: gains with a window; 1: taxed; 2: indifferent;
                                      * 3: gains `weak` with a window */
    double gain, tax;                /* the gainer's best gain; the taxed one's at the max */
    unsigned long long rng;
    size_t calls;
    size_t fade_after;               /* > 0: the gain is gone after this many evaluations */
    double thrash;                   /* interleaved only: ms each gainer loses while another
                                      * gainer's window is on too (their lines evict each
                                      * other's); blocks never see it */
    double offset_per_work;          /* interleaved only: workload w takes w * this more */
    size_t mix_calls;
    double weak;
    double noise;                    /* > 0: each sample +-noise / 2 (else +-0.2 %) */
    double phase[L2P_ADVISE_MAX_WORK]; /* > 0: each evaluation of workload w has all its
                                      * samples scaled by one factor 1 +-phase[w] / 2 (a noisy
                                      * phase: one evaluation's median moves as a whole) */
    double drift[L2P_ADVISE_MAX_WORK]; /* > 0: workload w's times also scaled by 1 +-drift[w]
                                      * / 2, one factor per block of drift_every evaluations (a
                                      * device phase that outlasts an evaluation: levels
                                      * measured minutes apart meet different phases) */
    size_t drift_every;
    unsigned long long seed0;        /* the drift's blocks' seed */
} world;

static double noise(world *wd)
{
    wd->rng ^= wd->rng << 13;
    wd->rng ^= wd->rng >> 7;
    wd->rng ^= wd->rng << 17;
    return ((double)(wd->rng % 10001) / 10000.0 - 0.5) * (wd->noise > 0 ? wd->noise : 0.004);
}

/* A gainer: 1 ms at limit 0; with a window over its 40 MiB table at hitRatio h and set-aside
 * s, the persisted share min(h * 40 MiB, s) / 40 MiB saves up to `gain`, best near 26 MiB
 * (more set-aside taxes its own streaming). Taxed: 1 ms + tax * (s / max)^2. */
static double true_ms(const world *wd, size_t work, const l2p_advise_config *cfg)
{
    double s = (double)cfg->set_aside, max = 10 * (double)GRAN, t = 1.0;
    if (wd->kind[work] == 0 && wd->fade_after && wd->calls > wd->fade_after) {
        t = 1.0; /* the gain faded: every configuration alike */
    } else if (wd->kind[work] == 0 || wd->kind[work] == 3) {
        double persisted = 0.0, g = wd->kind[work] == 3 ? wd->weak : wd->gain;
        for (size_t k = 0; k < cfg->n; k++)
            if (cfg->win[k].on && (size_t)k == work) {
                double covered = cfg->win[k].hit_ratio * 40 * MIB;
                persisted = (covered < s ? covered : s) / (40 * MIB);
            }
        t = 1.0 - g * persisted + 0.6 * g * pow(s / max, 4.0);
    } else if (wd->kind[work] == 1) {
        t = 1.0 + wd->tax * (s / max) * (s / max);
    }
    return t;
}

static l2p_status eval(void *ctx, size_t work, const l2p_advise_config *cfg, size_t repeat,
                       double *samples)
{
    world *wd = ctx;
    wd->calls++;
    double t = true_ms(wd, work, cfg);
    if (wd->phase[work] > 0) {
        double keep = wd->noise, u;
        wd->noise = wd->phase[work];
        u = noise(wd);
        wd->noise = keep;
        t *= 1.0 + u;
    }
    if (wd->drift[work] > 0) {
        unsigned long long h = (wd->calls / wd->drift_every + 1) * 0x9e3779b97f4a7c15ull ^ wd->seed0;
        h ^= h >> 31;
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        t *= 1.0 + wd->drift[work] * ((double)(h % 10001) / 10000.0 - 0.5);
    }
    for (size_t i = 0; i < repeat; i++) samples[i] = t * (1.0 + noise(wd));
    return L2P_OK;
}

/* The workloads interleaved: each call is the block world's time, plus what interleaving
 * costs. */
static l2p_status mix(void *ctx, const l2p_advise_config *cfg, size_t repeat, double *samples)
{
    world *wd = ctx;
    size_t gainers_on = 0, n_work = 0;
    wd->mix_calls++;
    for (size_t k = 0; k < cfg->n; k++) {
        gainers_on += cfg->win[k].on && wd->kind[k] == 0;
        n_work = k + 1; /* target k belongs to workload k */
    }
    for (size_t w = 0; w < n_work; w++)
        for (size_t j = 0; j < repeat; j++) {
            double t;
            L2P_TRY(eval(ctx, w, cfg, 1, &t));
            wd->calls--; /* counted as mix calls */
            if (wd->kind[w] == 0 && gainers_on > 1) t += wd->thrash;
            samples[w * repeat + j] = t + (double)w * wd->offset_per_work;
        }
    return L2P_OK;
}

/* n workloads, target k belongs to workload k (40 MiB), each in its own group. */
static void options(l2p_advise_options *o, size_t n)
{
    l2p_advise_options_default(o);
    o->granule = GRAN;
    o->persisting_max = 10 * GRAN;
    o->default_limit = 3 * GRAN;
    o->n_work = n;
    o->n_targets = n;
    for (size_t i = 0; i < n; i++) {
        o->coef[i] = 1.0;
        o->owner[i] = (int)i;
        o->bytes[i] = (size_t)(40 * MIB);
        o->group[i] = (int)i;
    }
}

static void test_gainer_alone(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    world wd = {{0}, 0.3, 0.0, 42, 0};
    options(&o, 1);
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(r.helps);
    CHECK(r.found_set_aside >= 5 * GRAN && r.found_set_aside <= 9 * GRAN);
    CHECK(r.found[0].on);
    CHECK(r.work[0].speedup > 1.15 && r.work[0].ci_low > 1.0);
    CHECK(r.speedup > 1.15 && r.ci_low > 1.0 && r.blocked_by == -1);
    CHECK(r.recommended_set_aside == r.found_set_aside);
    CHECK(r.work[0].n_windows == 1);
    CHECK(r.evals == wd.calls);
    l2p_advise_result_free(&r);
}

/* One gainer and taxed workloads: the weights decide. */
static void test_weights_decide(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    world wd = {{0, 1, 1}, 0.2, 0.6, 7, 0};
    options(&o, 3);
    o.coef[0] = 10.0; /* the gainer dominates the process's time */
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(r.helps);
    CHECK(r.work[1].tax > 1.0 && r.work[2].tax > 1.0); /* each workload's own tax reported */
    CHECK(r.work[1].slows);
    size_t heavy = r.found_set_aside;
    l2p_advise_result_free(&r);
    o.coef[0] = 1.0; /* now the taxed ones weigh 2 of 3: a smaller set-aside, or none */
    o.coef[1] = o.coef[2] = 3.0;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(r.found_set_aside < heavy);
    l2p_advise_result_free(&r);
    o.coef[0] = 0.05; /* the gainer is a rounding error: "don't" */
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(!r.helps);
    CHECK(r.recommended_set_aside == 0 || r.recommended_set_aside == o.default_limit);
    l2p_advise_result_free(&r);
}

static void test_must_not_slow(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    world wd = {{0, 1}, 0.3, 0.08, 9, 0};
    options(&o, 2);
    o.coef[0] = 20.0;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    int slowed = r.work[1].slows;
    CHECK(r.helps);
    l2p_advise_result_free(&r);
    o.must_not_slow[1] = 1;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    if (slowed) { /* the pick would slow workload 1: blocked */
        CHECK(!r.helps && r.blocked_by == 1);
    } else {
        CHECK(r.helps && !r.work[1].slows);
    }
    CHECK(r.blocked_by == -1 || r.blocked_by == 1);
    l2p_advise_result_free(&r);
}

/* Two gainers whose windows go on one stream (one group): one keeps it. */
static void test_shared_carrier(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    world wd = {{0, 0}, 0.3, 0.0, 3, 0};
    options(&o, 2);
    o.group[1] = 0;
    o.coef[1] = 2.0;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(r.found[0].on + r.found[1].on == 1);
    CHECK(r.found[1].on); /* the heavier one */
    CHECK(r.work[0].n_windows == 0 && r.work[1].n_windows == 1);
    l2p_advise_result_free(&r);
}

static void test_linear_evals(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    world wd = {{0}, 0.3, 0.0, 5, 0};
    options(&o, 2);
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    size_t two = r.evals;
    l2p_advise_result_free(&r);
    options(&o, 20);
    for (int i = 0; i < 20; i++) wd.kind[i] = i % 2;
    wd.tax = 0.05;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(r.evals <= 12 * two); /* 10x the workloads: about 10x the evaluations */
    CHECK(r.evals >= 5 * two);
    l2p_advise_result_free(&r);
}

/* A gain that fades after the confirmation: the recheck drops the plan; one that holds is
 * kept, with the recheck's figures reported. */
static void test_recheck(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    world wd = {{0}, 0.3, 0.0, 11, 0, 0};
    options(&o, 1);
    o.recheck_rounds = 3;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(r.helps && r.rechecked && r.recheck_held && r.recheck_speedup > 1.15);
    size_t before_recheck = r.evals - 3 * 4; /* a round: 4 arms of the one workload */
    l2p_advise_result_free(&r);
    wd.calls = 0;
    wd.fade_after = before_recheck;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(!r.helps && r.rechecked && !r.recheck_held);
    CHECK(r.recommended_set_aside == 0 || r.recommended_set_aside == o.default_limit);
    CHECK(r.recheck_speedup < 1.02);
    l2p_advise_result_free(&r);
    o.recheck_rounds = 65;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_ERR_VALUE);
}

/* Two gainers, each faster with its window when timed alone; interleaved, their windows evict
 * each other's lines and the plan is slower than no set-aside: the confirmation, run
 * interleaved, says "don't", where blocks said "helps". Its samples are the mix's, each
 * workload's own (the offsets), one mix call per arm and round. */
static void test_interleaved_confirmation(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    world wd = {{0, 0}, 0.3, 0.0, 21, 0, 0, 0.3, 0.0, 0};
    options(&o, 2);
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(r.helps && wd.mix_calls == 0);
    l2p_advise_result_free(&r);
    CHECK(l2p_advise_run(&o, eval, mix, &wd, &r) == L2P_OK);
    CHECK(!r.helps && r.speedup < 1.0);
    CHECK(wd.mix_calls == 4 * r.confirm_rounds);
    CHECK(r.work[0].slows && r.work[1].slows);
    l2p_advise_result_free(&r);

    world w3 = {{2, 1, 2}, 0.3, 0.1, 22, 0, 0, 0.0, 0.1, 0};
    options(&o, 3);
    CHECK(l2p_advise_run(&o, eval, mix, &w3, &r) == L2P_OK);
    for (size_t w = 0; w < 3; w++) /* limit 0: kinds 1 and 2 take 1 ms in blocks */
        CHECK(fabs(r.work[w].base_ms[0] - (1.0 + 0.1 * (double)w)) < 0.01);
    l2p_advise_result_free(&r);
}

/* A window that saves less than min_gain / 2 of its workload's time is not part of a plan
 * (it would take set-aside from the others for noise); one that saves more is. */
static void test_window_worth_its_set_aside(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    /* workload 0 sets the level; workload 1 gains at most 1.5 % x its persisted share (about
     * 0.65 at that level: under 1 %) */
    world wd = {{0, 3}, 0.3, 0.0, 23, 0};
    wd.weak = 0.015;
    options(&o, 2);
    o.min_gain = 0.02;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(r.helps && r.found[0].on && !r.found[1].on);
    l2p_advise_result_free(&r);
    wd.weak = 0.1; /* about 6 %: worth it */
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
    CHECK(r.helps && r.found[0].on && r.found[1].on);
    l2p_advise_result_free(&r);
}

/* The confirmation, as tune's: a gain of about 3 % under +-6 % noise per sample is still
 * undecided after confirm_rounds (its interval straddles 1 with a gain worth having inside),
 * so rounds are added (up to 4x) until it is decided; a confirmation that stops at
 * confirm_rounds says "don't" about a real gain. A clear gain is decided at once. */
static void test_confirmation_adds_rounds_while_undecided(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    int helped = 0, extended = 0;
    for (unsigned long long seed = 1; seed <= 10; seed++) {
        world wd = {{0}, 0.06, 0.0, seed * 7919, 0};
        wd.noise = 0.12;
        options(&o, 1);
        o.recheck_rounds = 0; /* the confirmation alone: a recheck judges a marginal gain again */
        CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
        CHECK(r.confirm_rounds >= o.confirm_rounds && r.confirm_rounds <= 4 * o.confirm_rounds);
        helped += r.helps;
        extended += r.confirm_rounds > o.confirm_rounds;
        l2p_advise_result_free(&r);
    }
    if (helped < 6 || extended < 6)
        fprintf(stderr, "  undecided confirmation: helps in %d, extended in %d of 10\n", helped,
                extended);
    CHECK(helped >= 6);   /* 8 of 10 today; 1 of 10 when the confirmation stops at 3 rounds */
    CHECK(extended >= 6); /* 9 of 10 today */
    world clear = {{0}, 0.3, 0.0, 3, 0};
    options(&o, 1);
    CHECK(l2p_advise_run(&o, eval, NULL, &clear, &r) == L2P_OK);
    CHECK(r.helps && r.confirm_rounds == o.confirm_rounds);
    l2p_advise_result_free(&r);
}

/* The recheck adds rounds while undecided, as the confirmation does: a real gain of about 3 %
 * under +-6 % noise per sample, recommended by the confirmation, is kept by a recheck that
 * extends (a single look at 3 rounds dropped it: the H100's advisor study lost a plan its recheck
 * re-measured at 1.068x, interval 0.979-1.184x). A gain that faded is still dropped
 * (test_recheck). */
static void test_recheck_adds_rounds_while_undecided(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    int rechecked = 0, held = 0, extended = 0;
    for (unsigned long long seed = 1; seed <= 20; seed++) {
        world wd = {{0}, 0.06, 0.0, seed * 7919, 0};
        wd.noise = 0.12;
        options(&o, 1);
        CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
        if (r.rechecked) {
            rechecked++;
            held += r.recheck_held;
            extended += r.rechecked_rounds > o.recheck_rounds;
            CHECK(r.rechecked_rounds >= o.recheck_rounds &&
                  r.rechecked_rounds <= 4 * o.recheck_rounds);
        }
        l2p_advise_result_free(&r);
    }
    fprintf(stderr, "  undecided recheck: rechecked %d of 20, held %d, extended %d\n", rechecked,
            held, extended);
    CHECK(rechecked >= 10);
    CHECK(held * 10 >= rechecked * 8);
    CHECK(extended >= 1);
}

/* The true weighted total of `level` (no noise), each gainer's window at the ridge (its best:
 * a higher hit ratio persists no more than the set-aside holds). */
static double level_truth(const world *wd, const l2p_advise_options *o, size_t level)
{
    l2p_tune_window win[L2P_ADVISE_MAX_WORK] = {{0}};
    l2p_advise_config c = {level, o->n_targets, win};
    double total = 0.0;
    for (size_t w = 0; w < o->n_work; w++) {
        memset(win, 0, sizeof win);
        if (level > 0 && (wd->kind[w] == 0 || wd->kind[w] == 3)) {
            double hr = (double)level / (40 * MIB);
            win[w] = (l2p_tune_window){1, hr > 1.0 ? 1.0 : hr, 0, 0};
        }
        total += o->coef[w] * true_ms(wd, w, &c);
    }
    return total;
}

/* The re-measure before the pick (issue 38 item 5). A gainer, a taxed workload and one with
 * no target (an eager phase), of equal weight: the true totals of levels 0..10 granules are
 * 3.000 2.973 2.950 2.931 2.916 2.908 2.909 2.920 2.945 2.987 3.049, so the levels within
 * min_gain / 2 (1 %) of the least are 4-7 granules and a wrong level costs 1-5 %. The third
 * workload's time drifts by up to +-18 % in phases of 10 evaluations (the H200's eager
 * median ranged 0.40-0.58 ms between runs), every evaluation moves by up to +-1 % as a whole
 * and each sample by +-0.5 %, at the advisor study's full-mode search_repeat of 4. This
 * landscape is made up here: the advisor study's three traffic mixes stay held out (they are
 * the bar that judges the advisor; nothing is fitted to them). Over 50 seeds the single
 * pass's pick (pass_set_aside: the same samples, before the re-measure) and the pick after it
 * are scored against the truth: the re-measure must land within 1 % of the true least
 * clearly more often, miss by more than min_gain less often, and never land on a level worse
 * than the pass's by more than the drift's share of the total. (Over 200 seeds: within 1 %
 * 147 against the pass's 121, a miss beyond 2 % 30 against 53.) */
static void test_remeasure_recovers_the_best_level(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    int ok_pass = 0, ok_re = 0, big_pass = 0, big_re = 0;
    double least = INFINITY;
    options(&o, 3);
    o.n_targets = 2; /* workload 2 has none */
    o.search_repeat = 4;
    o.recheck_rounds = 0;
    o.confirm_rounds = 1;
    for (unsigned long long seed = 1; seed <= 50; seed++) {
        world wd = {{0, 1, 2}, 0.3, 0.15, seed * 7919 + 13, 0};
        wd.noise = 0.01;
        wd.phase[0] = wd.phase[1] = 0.02;
        wd.drift[2] = 0.36;
        wd.drift_every = 10;
        wd.seed0 = seed * 31337;
        if (seed == 1)
            for (size_t k = 0; k <= 10; k++) {
                double t = level_truth(&wd, &o, k * GRAN);
                least = t < least ? t : least;
            }
        CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_OK);
        CHECK(r.n_remeasured == o.remeasure_levels);
        double pass = level_truth(&wd, &o, r.pass_set_aside) / least - 1.0;
        double re = level_truth(&wd, &o, r.found_set_aside) / least - 1.0;
        ok_pass += pass <= o.min_gain / 2.0 + 1e-12;
        ok_re += re <= o.min_gain / 2.0 + 1e-12;
        big_pass += pass > o.min_gain;
        big_re += re > o.min_gain;
        CHECK(re <= pass + wd.drift[2] / 3.0 / 2.0);
        l2p_advise_result_free(&r);
    }
    fprintf(stderr, "  re-measure: the pick within 1 %% of the true least in %d of 50 seeds, "
            "beyond 2 %% in %d (the single pass: %d, %d)\n", ok_re, big_re, ok_pass, big_pass);
    CHECK(ok_re >= ok_pass + 4); /* 41 against 36 today */
    CHECK(big_re + 4 <= big_pass); /* 6 against 11 today */
}

/* With (almost) no noise the re-measure agrees with the pass: the same level, the smallest
 * within 1 % of the least (4 granules), at remeasure_levels * remeasure_rounds more
 * evaluations per workload; 0 turns it off (the pass's pick, the evaluations of before). */
static void test_remeasure_quiet_and_off(void)
{
    l2p_advise_options o, d;
    l2p_advise_result on, off;
    world wd = {{0, 1}, 0.3, 0.15, 77, 0};
    options(&o, 2);
    CHECK(o.remeasure_levels >= 2 && o.remeasure_rounds >= 1); /* on by default */
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &on) == L2P_OK);
    CHECK(on.n_remeasured == o.remeasure_levels);
    CHECK(on.found_set_aside == on.pass_set_aside && on.found_set_aside == 4 * GRAN);
    size_t remeasured = 0;
    for (size_t k = 0; k < on.n_levels; k++) remeasured += !isnan(on.remeasured_total[k]);
    CHECK(remeasured == o.remeasure_levels);
    o.remeasure_levels = 0;
    wd.rng = 77;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &off) == L2P_OK);
    CHECK(off.n_remeasured == 0 && off.found_set_aside == on.found_set_aside);
    CHECK(off.found_set_aside == off.pass_set_aside);
    /* the search and the confirmation alike, the re-measure's evaluations apart */
    l2p_advise_options_default(&d);
    CHECK(on.evals - off.evals == d.remeasure_levels * d.remeasure_rounds * 2 +
                                  4 * (on.confirm_rounds - off.confirm_rounds) * 2);
    l2p_advise_result_free(&on);
    l2p_advise_result_free(&off);
    options(&o, 2);
    o.remeasure_rounds = 0; /* no rounds: off too */
    wd.rng = 77;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &off) == L2P_OK);
    CHECK(off.n_remeasured == 0);
    l2p_advise_result_free(&off);
    o.remeasure_levels = 17;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &off) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "remeasure_levels") != NULL);
    options(&o, 2);
    o.remeasure_rounds = 65;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &off) == L2P_ERR_VALUE);
}

static void test_options(void)
{
    l2p_advise_options o;
    l2p_advise_result r;
    world wd = {{0}, 0.3, 0.0, 5, 0};
    options(&o, 1);
    o.coef[0] = 0.0;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "weight") != NULL);
    options(&o, 1);
    o.owner[0] = 3;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_ERR_VALUE);
    options(&o, 0);
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_ERR_VALUE);
    options(&o, 1);
    o.repeat = 1;
    CHECK(l2p_advise_run(&o, eval, NULL, &wd, &r) == L2P_ERR_VALUE);
    CHECK(r.found == NULL);
}

int main(void)
{
    test_gainer_alone();
    test_weights_decide();
    test_must_not_slow();
    test_shared_carrier();
    test_linear_evals();
    test_recheck();
    test_recheck_adds_rounds_while_undecided();
    test_interleaved_confirmation();
    test_window_worth_its_set_aside();
    test_confirmation_adds_rounds_while_undecided();
    test_remeasure_recovers_the_best_level();
    test_remeasure_quiet_and_off();
    test_options();
    printf("test_advise: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
