/* The live search (l2p_live.h) and the activity log's blocks (l2p_activity.h) without a GPU:
 * a program whose arms have known true costs under noise, driven the way the watcher drives
 * it (next, then samples when it says NEED); the candidate arms built from targets; records
 * cut into blocks by their start stamps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l2p_activity.h"
#include "l2p_live.h"
#include "l2p_policy.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

#define MIB ((size_t)1 << 20)

static double uniform(unsigned long long *rng)
{
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*rng >> 11) / 9007199254740992.0;
}

/* Drive a search to its end: arm a's block costs truth[a] * (1 +- noise). Returns blocks. */
static size_t drive(l2p_live *s, const double *truth, double noise, unsigned long long seed)
{
    int queue[L2P_LIVE_MAX_ARMS * 8];
    size_t nq = 0, blocks = 0;
    for (int guard = 0; guard < 100000; guard++) {
        int arm = l2p_live_next(s);
        if (arm == L2P_LIVE_DONE) break;
        if (arm == L2P_LIVE_NEED) {
            for (size_t i = 0; i < nq; i++) {
                double v = truth[queue[i]] * (1 + noise * (2 * uniform(&seed) - 1));
                CHECK(l2p_live_record(s, v) == L2P_OK);
            }
            nq = 0;
            continue;
        }
        CHECK(arm >= 0 && (size_t)arm < s->n_arms);
        queue[nq++] = arm;
        blocks++;
    }
    return blocks;
}

static void test_finds_the_best_arm(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    double truth[10] = {1.0, 1.02, 1.01, 0.99, 0.93, 1.1, 1.0, 0.97, 1.05, 0.98};
    int wins = 0, helps = 0;
    for (unsigned seed = 1; seed <= 10; seed++) {
        l2p_live s;
        CHECK(l2p_live_init(&s, 10, &o) == L2P_OK);
        drive(&s, truth, 0.01, seed);
        CHECK(s.r.done);
        wins += s.r.winner == 4;
        helps += s.r.helps && s.r.winner == 4;
        /* limit 0 is better by 2 %: the interval tells them apart */
        CHECK(s.r.baseline == 0);
    }
    CHECK(wins == 10);
    CHECK(helps == 10);
}

static void test_no_gain_says_dont(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    double truth[6] = {1.0, 1.0, 1.003, 1.02, 1.001, 1.1};
    int helps = 0, decided = 0, default_kept = 0;
    for (unsigned seed = 1; seed <= 10; seed++) {
        l2p_live s;
        CHECK(l2p_live_init(&s, 6, &o) == L2P_OK);
        drive(&s, truth, 0.01, seed);
        helps += s.r.helps;
        decided += s.r.decided;
        /* limit 0 and the default are the same: the default (it changes nothing) stays */
        default_kept += s.r.baseline == 1;
    }
    CHECK(helps == 0);
    CHECK(decided == 10);
    CHECK(default_kept >= 9);
}

/* A mutant that skipped the confirmation would pick on the search's samples alone; the
 * confirmation's fresh rounds must be there: blocks beyond the search. */
static void test_confirmation_runs_fresh_blocks(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    double truth[4] = {1.0, 1.0, 0.95, 1.0};
    l2p_live s;
    CHECK(l2p_live_init(&s, 4, &o) == L2P_OK);
    size_t blocks = drive(&s, truth, 0.005, 7);
    /* one stage, 4 arms: 2 candidates -> 1 */
    CHECK(s.r.search_blocks == o.stage_rounds * 4);
    CHECK(s.r.confirm_blocks >= 3 * o.confirm_rounds);
    CHECK(blocks == s.r.search_blocks + s.r.confirm_blocks);
    CHECK(s.r.winner == 2 && s.r.helps);
    CHECK_NEAR(s.r.speedup, 1 / 0.95, 0.01);
    CHECK(s.r.stage_dropped[3] == 1 && s.r.stage_dropped[2] == 0);
}

/* Under noise the confirmation adds rounds until decided, and stops at its cap. */
static void test_more_rounds_while_undecided(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    o.confirm_only = 1;
    double truth[3] = {1.0, 1.0, 1.0 / 1.03};
    l2p_live s;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    drive(&s, truth, 0.05, 3);
    CHECK(s.r.confirm_rounds > o.confirm_rounds);
    CHECK(s.r.confirm_rounds <= o.max_confirm_rounds);
    CHECK(s.r.search_blocks == 0);
    o.max_confirm_rounds = o.confirm_rounds;
    double flat[3] = {1.0, 1.0, 1.0};
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    drive(&s, flat, 0.2, 5);
    CHECK(s.r.confirm_rounds == o.confirm_rounds);
    CHECK(!s.r.helps);
}

/* advise's cap: an interval that still holds both the least gain and none when the rounds run
 * out is undecided (capped), not a "don't"; one that settled before the cap is not capped, and
 * a flat candidate measured tightly is a decided "don't". verify (a width asked for) reads its
 * interval itself: there the cap is the confirmation's end, decided. */
static void test_the_cap_leaves_a_wide_interval_undecided(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    o.confirm_only = 1;
    o.max_confirm_rounds = 10;
    l2p_live s;
    double slight[3] = {1.0, 1.0, 1.0 / 1.02};
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    drive(&s, slight, 0.3, 11);
    CHECK(s.r.done && s.r.confirm_rounds == 10);
    CHECK(s.r.capped && !s.r.decided && !s.r.helps);
    CHECK(s.r.ci_low < 1 && s.r.ci_high >= 1 + o.min_gain);
    double clear[3] = {1.0, 1.0, 1.0 / 1.10};
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    drive(&s, clear, 0.01, 11);
    CHECK(s.r.done && s.r.decided && s.r.helps && !s.r.capped);
    double flat[3] = {1.0, 1.0, 1.0};
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    drive(&s, flat, 0.001, 11);
    CHECK(s.r.done && s.r.decided && !s.r.helps && !s.r.capped);
    o.target_halfwidth = 0.0005;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    drive(&s, slight, 0.3, 11);
    CHECK(s.r.done && s.r.confirm_rounds == 10 && s.r.decided && s.r.capped);
}

/* The speedup's interval relative to the speedup, the wider side (the stop's measure). */
static double halfwidth(const l2p_live_result *r)
{
    return fmax(r->speedup - r->ci_low, r->ci_high - r->speedup) / r->speedup;
}

/* verify's width (target_halfwidth): a plan that helps 5 % under 2 % noise is settled by the
 * rule in the first rounds, on an interval several per cent wide; with a width asked for, the
 * confirmation goes on until the interval is that narrow, a narrower width takes more rounds,
 * and the cap still ends a width out of reach. Off (0, the default), nothing changes. */
static void test_verify_measures_to_a_width(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    CHECK(o.target_halfwidth == 0);
    o.confirm_only = 1;
    o.max_confirm_rounds = 200;
    double truth[3] = {1.0, 1.0, 1.0 / 1.05};
    l2p_live s;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    drive(&s, truth, 0.02, 9);
    size_t off_rounds = s.r.confirm_rounds;
    CHECK(s.r.decided && s.r.helps && halfwidth(&s.r) > 2 * L2P_LIVE_VERIFY_HALFWIDTH);
    size_t rounds[2];
    const double widths[2] = {2 * L2P_LIVE_VERIFY_HALFWIDTH, L2P_LIVE_VERIFY_HALFWIDTH};
    for (int i = 0; i < 2; i++) {
        o.target_halfwidth = widths[i];
        CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
        drive(&s, truth, 0.02, 9);
        rounds[i] = s.r.confirm_rounds;
        CHECK(s.r.done && s.r.decided && s.r.helps);
        CHECK(halfwidth(&s.r) <= widths[i]);
        CHECK(rounds[i] < o.max_confirm_rounds);
        CHECK(s.r.confirm_blocks == 3 * rounds[i]);
        CHECK_NEAR(s.r.speedup, 1.05, 2 * widths[i]);
    }
    CHECK(off_rounds < rounds[0] && rounds[0] < rounds[1]);
    /* out of reach: the cap ends it, decided (the cap is the confirmation's own end) */
    o.target_halfwidth = 0.0005;
    o.max_confirm_rounds = 30;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    drive(&s, truth, 0.05, 4);
    CHECK(s.r.confirm_rounds == 30 && s.r.decided && halfwidth(&s.r) > 0.0005);
    /* the budget ends it before the width: the rule's verdict stands (a plan that helps
     * beyond doubt is not made "undecided" by a width it had no time to reach) */
    o.max_confirm_rounds = 200;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    unsigned long long rng = 21;
    while (s.n_s[1][0] < 8) { /* 8 rounds' samples (phase 1: the confirmation's) */
        int arm = l2p_live_next(&s);
        CHECK(arm != L2P_LIVE_DONE);
        if (arm == L2P_LIVE_DONE) break;
        while (arm == L2P_LIVE_NEED && s.pend_head < s.n_pending)
            CHECK(l2p_live_record(&s, truth[s.pending[s.pend_head]] *
                                          (1 + 0.02 * (2 * uniform(&rng) - 1))) == L2P_OK);
    }
    CHECK(l2p_live_finish(&s) == L2P_OK);
    CHECK(s.r.done && s.r.decided && s.r.helps && halfwidth(&s.r) > 0.0005);
}

/* l2p_live_peek: inside a round it names the arm the next call takes, and it takes nothing
 * (asked twice it says the same); where a round or a decision is due it says NEED. */
static void test_peek(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    double truth[6] = {1.0, 1.01, 0.96, 1.0, 1.02, 0.99};
    l2p_live s;
    CHECK(l2p_live_init(&s, 6, &o) == L2P_OK);
    CHECK(l2p_live_peek(&s) == s.order[0]); /* init plans the first round */
    int queue[L2P_LIVE_MAX_ARMS * 8];
    size_t nq = 0, known = 0, blocks = 0;
    unsigned long long rng = 5;
    for (int guard = 0; guard < 100000; guard++) {
        int ahead = l2p_live_peek(&s);
        CHECK(l2p_live_peek(&s) == ahead);
        int arm = l2p_live_next(&s);
        if (ahead != L2P_LIVE_NEED) {
            CHECK(arm == ahead);
            known++;
        }
        if (arm == L2P_LIVE_DONE) break;
        if (arm == L2P_LIVE_NEED) {
            CHECK(ahead == L2P_LIVE_NEED);
            for (size_t i = 0; i < nq; i++)
                CHECK(l2p_live_record(&s, truth[queue[i]] * (1 + 0.01 * (2 * uniform(&rng) - 1)))
                      == L2P_OK);
            nq = 0;
            continue;
        }
        queue[nq++] = arm;
        blocks++;
    }
    CHECK(s.r.done && s.r.winner == 2);
    CHECK(l2p_live_peek(&s) == L2P_LIVE_NEED);
    CHECK(known >= blocks / 2); /* all but each round's first block are known ahead */
}

static void test_finish_early(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    l2p_live s;
    CHECK(l2p_live_init(&s, 8, &o) == L2P_OK);
    for (int i = 0; i < 5; i++) CHECK(l2p_live_next(&s) >= 0);
    for (int i = 0; i < 5; i++) CHECK(l2p_live_record(&s, 1.0) == L2P_OK);
    CHECK(l2p_live_record(&s, 1.0) == L2P_ERR_STATE); /* nothing pending */
    CHECK(l2p_live_finish(&s) == L2P_OK);
    CHECK(s.r.done && !s.r.decided && !s.r.helps && s.r.winner == -1);
    CHECK(l2p_live_next(&s) == L2P_LIVE_DONE);
}

static void test_rotation(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    o.stage_rounds = 3;
    l2p_live s;
    CHECK(l2p_live_init(&s, 5, &o) == L2P_OK);
    int first[3];
    for (int r = 0; r < 3; r++) {
        int seen = 0;
        for (int i = 0; i < 5; i++) {
            int a = l2p_live_next(&s);
            if (i == 0) first[r] = a;
            seen |= 1 << a;
        }
        CHECK(seen == 31); /* each arm once a round */
    }
    CHECK(first[0] != first[1] && first[1] != first[2]);
    CHECK(l2p_live_next(&s) == L2P_LIVE_NEED);
}

/* The first stage's rounds, then next_stage_rounds a stage: the samples add up, so a later
 * stage's round is one more sample of each arm still in; the halving ranks by all of them. */
static void test_later_stages_add_a_round(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    CHECK(o.stage_rounds == 2 && o.next_stage_rounds == 1);
    double truth[6] = {1.0, 1.0, 0.99, 0.97, 0.93, 1.01};
    l2p_live s;
    CHECK(l2p_live_init(&s, 6, &o) == L2P_OK);
    drive(&s, truth, 0.002, 3);
    /* 6 arms x 2 rounds, then 2 baselines + 2 candidates x 1 round */
    CHECK(s.r.search_blocks == 6 * 2 + 4 * 1);
    CHECK(s.r.winner == 4 && s.r.helps);
    CHECK(s.r.stage_dropped[5] == 1 && s.r.stage_dropped[2] == 1);
    CHECK(s.r.stage_dropped[3] == 2 && s.r.stage_dropped[4] == 0);
    o.next_stage_rounds = 3;
    CHECK(l2p_live_init(&s, 6, &o) == L2P_OK);
    drive(&s, truth, 0.002, 3);
    CHECK(s.r.search_blocks == 6 * 2 + 4 * 3);
    o.next_stage_rounds = 0;
    CHECK(l2p_live_init(&s, 6, &o) == L2P_ERR_VALUE);
    o.next_stage_rounds = 9;
    CHECK(l2p_live_init(&s, 6, &o) == L2P_ERR_VALUE);
}

/* The blocks left count down to 0 as the search issues them, whatever the samples say. */
static void test_blocks_left(void)
{
    l2p_live_options o;
    l2p_live_options_default(&o);
    l2p_live s;
    /* 16 arms: 2 x 16, then 1 x (2 + 7), 1 x (2 + 4), 1 x (2 + 2); confirm 6 x 3 */
    CHECK(l2p_live_init(&s, 16, &o) == L2P_OK);
    CHECK(l2p_live_blocks_left(&s) == 32 + 9 + 6 + 4 + 18);
    double truth[16];
    for (int i = 0; i < 16; i++) truth[i] = 1.0 - 0.004 * i;
    /* drive block by block, checking the count falls by one per block issued */
    size_t issued = 0, before = l2p_live_blocks_left(&s);
    uint64_t rng = 5;
    for (;;) {
        int arm = l2p_live_next(&s);
        if (arm == L2P_LIVE_DONE) break;
        if (arm == L2P_LIVE_NEED) {
            while (s.pend_head < s.n_pending) {
                int a = s.pending[s.pend_head];
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                CHECK(l2p_live_record(&s, truth[a] * (1 + 1e-4 * (double)(rng >> 60))) ==
                      L2P_OK);
            }
            continue;
        }
        issued++;
        size_t now = l2p_live_blocks_left(&s);
        /* confirmation rounds past the first six are not counted ahead: then it stays 0 */
        CHECK(now == before - 1 || (before == 0 && now == 0) || s.phase == 1);
        before = now;
    }
    CHECK(issued >= 32 + 9 + 6 + 4 + 18);
    CHECK(l2p_live_blocks_left(&s) == 0);
    /* only the two baselines: the confirmation alone, two arms a round */
    l2p_live_options_default(&o);
    CHECK(l2p_live_init(&s, 2, &o) == L2P_OK);
    CHECK(l2p_live_blocks_left(&s) == o.confirm_rounds * 2);
    /* verify: a confirmation to a width counts to its cap of rounds, three arms a round */
    o.confirm_only = 1;
    o.target_halfwidth = 0.01;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    CHECK(l2p_live_blocks_left(&s) == o.max_confirm_rounds * 3);
    CHECK(l2p_live_next(&s) >= 0 && l2p_live_blocks_left(&s) == o.max_confirm_rounds * 3 - 1);
    /* the cap the budget allows: 30 s over 60 blocks at 0.75 -> 0.375 s a cycle; a block of
     * 100 units at 0.2 ms recorded, 0.1 ms rested, a 5 ms switch: (0.375 - 0.005 - 0.02) /
     * (1e-4 * 100) = 35 blocks' worth */
    CHECK(l2p_live_rest_ratio(30, 60, 5e-3, 1e-4, 2e-4, 100, 20) == 35);
    CHECK(l2p_live_rest_ratio(3, 60, 5e-3, 1e-4, 2e-4, 100, 20) == 20);  /* tight: the floor */
    CHECK(l2p_live_rest_ratio(3000, 60, 5e-3, 1e-4, 2e-4, 100, 20) == L2P_LIVE_MAX_REST_RATIO);
    CHECK(l2p_live_rest_ratio(30, 0, 5e-3, 1e-4, 2e-4, 100, 20) == 20);
    CHECK(l2p_live_rest_ratio(-1, 60, 5e-3, 1e-4, 2e-4, 100, 20) == 20);
    CHECK(l2p_live_rest_ratio(30, 60, NAN, 1e-4, 2e-4, 100, 20) == 20);
    CHECK(l2p_live_rest_ratio(30, 60, 5e-3, 0, 2e-4, 100, 20) == 20);
    CHECK(l2p_live_rest_ratio(30, 60, 5e-3, 1e-4, INFINITY, 100, 20) == 20);
}

static void test_options(void)
{
    l2p_live_options o;
    l2p_live s;
    l2p_live_options_default(&o);
    CHECK(l2p_live_init(&s, 1, &o) == L2P_ERR_VALUE);
    CHECK(l2p_live_init(&s, L2P_LIVE_MAX_ARMS + 1, &o) == L2P_ERR_VALUE);
    o.confirm_only = 1;
    CHECK(l2p_live_init(&s, 4, &o) == L2P_ERR_VALUE);
    l2p_live_options_default(&o);
    o.min_gain = -0.1;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_ERR_VALUE);
    l2p_live_options_default(&o);
    o.confidence = 1.0;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_ERR_VALUE);
    l2p_live_options_default(&o);
    o.target_halfwidth = -0.01;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_ERR_VALUE);
    o.target_halfwidth = NAN;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_ERR_VALUE);
    l2p_live_options_default(&o);
    CHECK(l2p_live_init(&s, 3, &o) == L2P_OK);
    (void)l2p_live_next(&s);
    CHECK(l2p_live_record(&s, -1.0) == L2P_ERR_VALUE);
    CHECK(l2p_live_record(&s, NAN) == L2P_ERR_VALUE);
}

/* The share of a cycle that watching adds, with r rest units. */
static double watched_share(double sw, double rest, double block, size_t n, size_t r)
{
    double added = sw + (double)n * (block > rest ? block - rest : 0.0);
    return added / (sw + (double)r * rest + (double)n * block);
}

static void test_rest_units(void)
{
    /* a host-bound loop: 90 us per unit unwatched, 5 % more recorded, a 2 ms switch */
    double sw = 2e-3, rest = 90e-6, block = 94.5e-6;
    int capped = -1;
    size_t n = 222, r = l2p_live_rest_units(sw, rest, block, n, 0.02, NAN, 64, 1, &capped);
    CHECK(r > 0 && r < 64 * n && !capped);
    /* aimed under the bound (L2P_LIVE_OVERHEAD_AIM of it): the fewest rests that keep it */
    const double aim = L2P_LIVE_OVERHEAD_AIM;
    CHECK(aim > 0.5 && aim < 1.0);
    CHECK(watched_share(sw, rest, block, n, r) <= aim * 0.02 + 1e-12);
    CHECK(watched_share(sw, rest, block, n, r - 1) > aim * 0.02);
    /* the ceiling binds: a 20 ms switch cannot be hidden in 9 blocks' worth, and says so */
    CHECK(l2p_live_rest_units(20e-3, rest, block, n, 0.01, NAN, 9, 1, &capped) == 9 * n &&
          capped);
    /* a ceiling above the need is within reach; one below it binds, and says so */
    size_t above = (r + n - 1) / n, below = (r - 1) / n;
    CHECK(below > 0);
    CHECK(l2p_live_rest_units(sw, rest, block, n, 0.02, NAN, above, 1, &capped) == r &&
          !capped);
    CHECK(l2p_live_rest_units(sw, rest, block, n, 0.02, NAN, below, 1, &capped) == below * n &&
          capped);
    /* the hooks' share comes off the aimed bound: watching gets the rest of it (the fewest
     * rests that keep the switch and the block under 0.8 x 2 % - 0.5 %), a quarter of it at
     * least */
    size_t r_h = l2p_live_rest_units(sw, rest, block, n, 0.02, 0.005, 64, 1, NULL);
    size_t r_same = l2p_live_rest_units(sw, rest, block, n, 0.02 - 0.005 / aim, NAN, 64, 1, NULL);
    CHECK(r_h + 1 >= r_same && r_h <= r_same + 1 && r_h > r);
    CHECK(watched_share(sw, rest, block, n, r_h) <= aim * 0.02 - 0.005 + 1e-12);
    CHECK(l2p_live_rest_units(sw, rest, block, n, 0.02, 0.019, 64, 1, NULL) ==
          l2p_live_rest_units(sw, rest, block, n, 0.005, NAN, 64, 1, NULL));
    CHECK(l2p_live_rest_units(sw, rest, block, n, 0.02, 0.0, 64, 1, NULL) == r);
    CHECK(l2p_live_rest_units(sw, rest, block, n, 0.02, INFINITY, 64, 1, NULL) ==
          l2p_live_rest_units(sw, rest, block, n, 0.005, NAN, 64, 1, NULL));
    /* watching that costs nothing needs no rest; max_overhead 0 asks for none */
    CHECK(l2p_live_rest_units(0.0, rest, rest, n, 0.01, NAN, 9, 1, NULL) == 0);
    /* ... except every L2P_LIVE_REMEASURE-th cycle, which still measures a pair */
    CHECK(l2p_live_rest_units(0.0, rest, rest, n, 0.01, NAN, 9, L2P_LIVE_REMEASURE, NULL) == n);
    CHECK(l2p_live_rest_units(0.0, rest, rest, n, 0.0, NAN, 9, L2P_LIVE_REMEASURE, NULL) == 0);
    CHECK(l2p_live_rest_units(sw, rest, block, n, 0.0, NAN, 9, 1, NULL) == 0);
    /* a recorded block that ran faster than the rest (noise) counts no excess */
    CHECK(l2p_live_rest_units(0.0, rest, 0.9 * rest, n, 0.01, NAN, 9, 1, NULL) == 0);
    /* costs not known yet: one block's worth (capped), to go on measuring */
    CHECK(l2p_live_rest_units(NAN, rest, block, n, 0.01, NAN, 9, 1, NULL) == n);
    CHECK(l2p_live_rest_units(sw, 0.0, block, n, 0.01, NAN, 9, 1, NULL) == n);
    CHECK(l2p_live_rest_units(sw, rest, INFINITY, n, 0.01, NAN, 9, 1, NULL) == n);
    CHECK(l2p_live_rest_units(sw, rest, block, n, 0.01, NAN, 0, 1, NULL) == 0);
    CHECK(l2p_live_rest_units(sw, rest, block, 0, 0.01, NAN, 9, 1, NULL) == 0);
    /* the options' checks */
    l2p_live_options o;
    l2p_live s;
    l2p_live_options_default(&o);
    CHECK(o.max_overhead == 0.01 && o.max_rest_ratio == 20);
    o.max_overhead = 0.6;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_ERR_VALUE);
    l2p_live_options_default(&o);
    o.max_rest_ratio = L2P_LIVE_MAX_REST_RATIO + 1;
    CHECK(l2p_live_init(&s, 3, &o) == L2P_ERR_VALUE);
}

static void test_arms(void)
{
    size_t gran = 3932160, max = 10 * gran, l2 = 16 * gran;
    l2p_live_target t[4] = {{8 * MIB, 1.0}, {200 * MIB, 5.0}, {4 * MIB, 0.0}, {2 * MIB, 2.0}};
    l2p_live_arm a[L2P_LIVE_MAX_ARMS];
    size_t n = l2p_live_arms(t, 4, gran, max, l2, 3, a, L2P_LIVE_MAX_ARMS);
    CHECK(a[0].set_aside == 0 && a[0].n_win == 0);
    CHECK(a[1].set_aside == L2P_LIVE_DEFAULT_LIMIT && a[1].n_win == 0);
    /* 3 levels x (3 alone + 1 together) + 1 streaming (the 200 MiB target) */
    CHECK(n == 2 + 3 * 4 + 1);
    CHECK(a[2].n_win == 1 && a[2].target[0] == 1); /* heaviest first */
    CHECK(a[3].target[0] == 3 && a[4].target[0] == 0);
    CHECK(a[2].set_aside % gran == 0 && a[2].set_aside >= max / 4);
    CHECK_NEAR(a[2].hit_ratio[0], (double)a[2].set_aside / (200.0 * MIB), 1e-12);
    CHECK(a[3].hit_ratio[0] == 1.0);
    CHECK(a[5].n_win == 3 && a[5].hit_prop[0] == L2P_ACCESS_PERSISTING);
    CHECK(a[n - 1].set_aside == 0 && a[n - 1].hit_prop[0] == L2P_ACCESS_STREAMING &&
          a[n - 1].target[0] == 1);
    for (size_t i = 2; i < n; i++)
        for (size_t w = 0; w < a[i].n_win; w++) CHECK(a[i].target[w] != 2); /* weight 0 */
    /* a small buffer of the busiest kernels ranks under a table of the L2's size */
    l2p_live_target small[2] = {{1 * MIB, 10.0}, {32 * MIB, 4.0}}; /* 10 * 1/3.75 < 4 */
    CHECK(l2p_live_arms(small, 2, gran, max, l2, 1, a, L2P_LIVE_MAX_ARMS) == 2 + 3 + 1);
    CHECK(a[2].target[0] == 1);
    CHECK(l2p_live_arms(t, 4, gran, 0, l2, 3, a, L2P_LIVE_MAX_ARMS) == 2); /* MIG / no max */
    CHECK(l2p_live_arms(t, 0, gran, max, l2, 3, a, L2P_LIVE_MAX_ARMS) == 2);
}

/* Graphs timed by their nodes' records or by events around each replay (l2p_replays.h): each
 * timing sums its own records and the eager kernels, never both for one graph; the nodes left
 * out are counted; a replay is never "spanning" (its start is the host's stamp) and carries no
 * window. */
static void test_activity_timing(void)
{
    l2p_activity a;
    CHECK(l2p_activity_init(&a, 1) == L2P_OK);
    static const char ek[] = "eager_kernel", nk[] = "node_kernel", rl[] = "replay:g1";
    const l2p_window_seen w1 = {0x1000, 4096};
    l2p_activity_add(&a, 1, 200, 210, 7, ek, ek, NULL, NULL);                   /* block 0 */
    l2p_activity_add_from(&a, L2P_RECORD_NODE, 1, 220, 250, 7, nk, nk, NULL, &w1); /* block 0 */
    l2p_activity_add_from(&a, L2P_RECORD_NODE, 1, 250, 270, 7, nk, nk, NULL, &w1); /* block 0 */
    l2p_activity_add_from(&a, L2P_RECORD_REPLAY, 1, 215, 275, 0, rl, rl, NULL, NULL); /* 0 */
    /* a replay whose events end past the block's bound: its start says where it belongs */
    l2p_activity_add_from(&a, L2P_RECORD_REPLAY, 1, 390, 450, 0, rl, rl, NULL, NULL); /* 1 */
    uint64_t bounds[3] = {200, 300, 400};
    double gpu[2], kns[4 * 2], kn[4 * 2], nodes[2];
    size_t spanning = 9;
    CHECK(l2p_activity_blocks(&a, bounds, 3, L2P_TIMING_NODES, gpu, NULL, 0, kns, kn, 4, nodes,
                              &spanning) == L2P_OK);
    CHECK(gpu[0] == 10 + 30 + 20 && gpu[1] == 0 && spanning == 0);
    CHECK(nodes[0] == 0 && nodes[1] == 0);
    CHECK(l2p_activity_blocks(&a, bounds, 3, L2P_TIMING_EVENTS, gpu, NULL, 0, kns, kn, 4, nodes,
                              &spanning) == L2P_OK);
    CHECK(gpu[0] == 10 + 60 && gpu[1] == 60 && spanning == 0);
    CHECK(nodes[0] == 2 && nodes[1] == 0);
    uint32_t rkey = a.recs[3].key;
    CHECK(rkey != a.recs[1].key && kn[rkey * 2 + 0] == 1 && kns[rkey * 2 + 1] == 60);
    CHECK(strcmp(a.names[a.recs[3].name], "replay:g1") == 0);
    /* the window counts see the nodes, never a replay (it would read as a kernel under none) */
    uint64_t counts[2 * (L2P_ACTIVITY_WINDOWS + 1)];
    CHECK(l2p_activity_block_windows(&a, bounds, 3, counts) == L2P_OK);
    CHECK(counts[0] == 1 && counts[1] == 2 && counts[L2P_ACTIVITY_WINDOWS + 1] == 0);
    l2p_activity_free(&a);
}

/* A kernel name's address comes back as another kernel's (its module unloaded, another loaded
 * at the same place): the records after the change go to the new name, those before keep the
 * old one, and a name seen before under another address keeps its id. */
static void test_activity_reused_name_address(void)
{
    l2p_activity a;
    CHECK(l2p_activity_init(&a, 1) == L2P_OK);
    static char buf[64];
    static const char other[] = "candidate_b";
    strcpy(buf, "candidate_a");
    l2p_activity_add(&a, 1, 100, 110, 7, buf, buf, NULL, NULL);
    l2p_activity_add(&a, 1, 120, 130, 7, buf, buf, NULL, NULL);
    strcpy(buf, "candidate_b"); /* the same address, another kernel */
    l2p_activity_add(&a, 1, 140, 150, 7, buf, buf, NULL, NULL);
    l2p_activity_add(&a, 1, 160, 170, 7, other, other, NULL, NULL);
    strcpy(buf, "candidate_a"); /* and back */
    l2p_activity_add(&a, 1, 180, 190, 7, buf, buf, NULL, NULL);
    CHECK(a.n == 5);
    CHECK(strcmp(a.names[a.recs[0].name], "candidate_a") == 0 && a.recs[1].name == a.recs[0].name);
    CHECK(strcmp(a.names[a.recs[2].name], "candidate_b") == 0 && a.recs[2].name != a.recs[0].name);
    CHECK(a.recs[3].name == a.recs[2].name && a.recs[4].name == a.recs[0].name);
    CHECK(a.recs[2].key != a.recs[0].key && a.recs[3].key == a.recs[2].key);
    CHECK(a.n_names == 3); /* "(other kernels)" and the two */
    l2p_activity_free(&a);
}

static void test_activity_blocks(void)
{
    l2p_activity a;
    CHECK(l2p_activity_init(&a, 1) == L2P_OK);
    static const char k1[] = "kernel_one", k2[] = "kernel_two";
    l2p_activity_add(&a, 1, 100, 110, 7, k1, k1, NULL, NULL);  /* before the first bound: no block */
    l2p_activity_add(&a, 1, 200, 230, 7, k1, k1, NULL, NULL);  /* block 0 */
    l2p_activity_add(&a, 1, 250, 255, 9, k2, k2, NULL, NULL);  /* block 0 */
    l2p_activity_add(&a, 0, 260, 900, 9, k2, k2, NULL, NULL);  /* another device: ignored */
    l2p_activity_add(&a, 1, 300, 340, 7, k2, k2, NULL, NULL);  /* block 1 (start on the bound) */
    l2p_activity_add(&a, 1, 399, 450, 7, k1, k1, NULL, NULL);  /* block 1: by start, ends past the bound */
    l2p_activity_add(&a, 1, 400, 401, 7, k1, k1, NULL, NULL);  /* on the last bound: no block */
    CHECK(a.n == 6);
    CHECK(a.n_names == 3);
    CHECK(strcmp(a.names[a.recs[1].name], "kernel_one") == 0);
    uint64_t bounds[3] = {200, 300, 400};
    double gpu[2], by[3 * 2];
    CHECK(l2p_activity_blocks(&a, bounds, 3, L2P_TIMING_NODES, gpu, by, 3, NULL, NULL, 0, NULL,
                              NULL) == L2P_OK);
    CHECK(gpu[0] == 35 && gpu[1] == 91);
    CHECK(by[1 * 2 + 0] == 30 && by[2 * 2 + 0] == 5 && by[1 * 2 + 1] == 51 && by[2 * 2 + 1] == 40);
    CHECK(by[0] == 0 && by[1] == 0);
    uint64_t bad[3] = {200, 200, 400};
    CHECK(l2p_activity_blocks(&a, bad, 3, L2P_TIMING_NODES, gpu, NULL, 0, NULL, NULL, 0, NULL,
                              NULL) == L2P_ERR_VALUE);
    CHECK(l2p_activity_blocks(&a, bounds, 1, L2P_TIMING_NODES, gpu, NULL, 0, NULL, NULL, 0, NULL,
                              NULL) == L2P_ERR_VALUE);
    /* strict: the record that ends past its block's end is not summed, but counted */
    size_t spanning = 99;
    CHECK(l2p_activity_blocks(&a, bounds, 3, L2P_TIMING_NODES, gpu, by, 3, NULL, NULL, 0, NULL,
                              &spanning) == L2P_OK);
    CHECK(spanning == 1 && gpu[0] == 35 && gpu[1] == 40 && by[1 * 2 + 1] == 0);
    /* trim: block 0 summed, its records (and the one before it) go; block 1's sums stay */
    CHECK(l2p_activity_trim(&a, 300) == 3);
    CHECK(a.n == 3 && a.recs[0].start == 300 && a.recs[1].start == 399 && a.recs[2].start == 400);
    CHECK(l2p_activity_blocks(&a, bounds, 3, L2P_TIMING_NODES, gpu, by, 3, NULL, NULL, 0, NULL,
                              NULL) == L2P_OK);
    CHECK(gpu[0] == 0 && gpu[1] == 91 && by[1 * 2 + 1] == 51 && by[2 * 2 + 1] == 40);
    CHECK(l2p_activity_trim(&a, 300) == 0 && a.n == 3); /* nothing older is left */
    CHECK(a.n_names == 3);                              /* the names stay */
    l2p_activity_clear(&a);
    CHECK(a.n == 0 && a.n_names == 1);
    l2p_activity_add(&a, 1, 5, 4, 7, k2, k2, NULL, NULL); /* end before start: a zero duration */
    CHECK(a.recs[0].end == a.recs[0].start && a.recs[0].name == 1);
    /* names cut as a scan cuts them (L2P_KERNEL_NAME_MAX - 1): two kernels that agree that
     * far share one id, and the kept name equals a scan's */
    static char long1[600], long2[600];
    memset(long1, 'x', sizeof long1 - 1);
    memcpy(long2, long1, sizeof long2);
    long2[500] = 'y';
    l2p_activity_add(&a, 1, 10, 20, 7, long1, long1, NULL, NULL);
    l2p_activity_add(&a, 1, 20, 25, 7, long2, long2, NULL, NULL);
    CHECK(a.n_names == 3 && a.recs[1].name == 2 && a.recs[2].name == 2);
    CHECK(strlen(a.names[2]) == L2P_KERNEL_NAME_MAX - 1);
    CHECK(strncmp(a.names[2], long1, L2P_KERNEL_NAME_MAX - 1) == 0);
    l2p_activity_add(&a, 1, 30, 35, 7, k1, k1, NULL, NULL); /* a short name: whole */
    CHECK(a.n_names == 4 && strcmp(a.names[3], "kernel_one") == 0);
    CHECK(a.n_keys == 4); /* k2, long1, long2, k1: the table counts keys, not names */
    l2p_activity_clear(&a);
    CHECK(a.n_keys == 0);
    /* the table's bound is on keys: many kernels of one cut name fill it, and past 3/4 of it
     * a new key counts as "(other kernels)" while the names stay two */
    static char many[L2P_ACTIVITY_NAMES];
    size_t kept = 0;
    for (size_t i = 0; i < L2P_ACTIVITY_NAMES; i++) {
        l2p_activity_add(&a, 1, 40, 41, 7, &many[i], long1, NULL, NULL);
        kept += a.recs[a.n - 1].name == 1;
    }
    CHECK(kept == L2P_ACTIVITY_NAMES * 3 / 4 && a.n_names == 2 && a.n_keys == kept);
    CHECK(a.recs[a.n - 1].name == L2P_ACTIVITY_OTHER);
    l2p_activity_free(&a);
    l2p_activity_free(&a); /* idempotent */
}

/* Launch keys: one per kernel and launch shape; per block, their GPU time and launches. */
static void test_activity_launch_keys(void)
{
    l2p_activity a;
    CHECK(l2p_activity_init(&a, 1) == L2P_OK);
    static const char k1[] = "gemv";
    const uint32_t b1[6] = {1, 1, 1, 128, 1, 1}, b8[6] = {8, 1, 1, 128, 1, 1};
    l2p_activity_add(&a, 1, 100, 110, 7, k1, k1, b1, NULL); /* block 0: batch 1, 10 ns */
    l2p_activity_add(&a, 1, 120, 150, 7, k1, k1, b8, NULL); /* block 0: batch 8, 30 ns */
    l2p_activity_add(&a, 1, 200, 212, 7, k1, k1, b1, NULL); /* block 1: batch 1, 12 ns */
    l2p_activity_add(&a, 1, 220, 232, 7, k1, k1, b1, NULL); /* block 1: batch 1, 12 ns */
    CHECK(a.n_names == 2 && a.n_lkeys == 3);           /* one name, two shapes (+ "other") */
    CHECK(a.recs[0].key == 1 && a.recs[1].key == 2 && a.recs[2].key == 1);
    CHECK(a.lkeys[2].shape[0] == 8 && a.lkeys[2].name == a.recs[0].name);
    uint64_t bounds[3] = {100, 200, 300};
    double gpu[2], kns[3 * 2], kn[3 * 2];
    CHECK(l2p_activity_blocks(&a, bounds, 3, L2P_TIMING_NODES, gpu, NULL, 0, kns, kn, 3, NULL,
                              NULL) == L2P_OK);
    CHECK(kns[1 * 2 + 0] == 10 && kn[1 * 2 + 0] == 1 && kns[1 * 2 + 1] == 24 && kn[1 * 2 + 1] == 2);
    CHECK(kns[2 * 2 + 0] == 30 && kn[2 * 2 + 0] == 1 && kn[2 * 2 + 1] == 0);
    CHECK(kn[0] == 0 && kn[1] == 0);
    l2p_activity_clear(&a);
    CHECK(a.n_lkeys == 1);
    /* past 3/4 of the key table, new shapes count as key 0 */
    size_t kept = 0;
    for (uint32_t i = 0; i < L2P_ACTIVITY_KEYS; i++) {
        const uint32_t sh[6] = {i + 1, 1, 1, 32, 1, 1};
        l2p_activity_add(&a, 1, 40, 41, 7, k1, k1, sh, NULL);
        kept += a.recs[a.n - 1].key != 0;
    }
    CHECK(kept == L2P_ACTIVITY_KEYS * 3 / 4 - 1);
    l2p_activity_free(&a);
}

/* The objective at the reference's mix: a block's sample does not move with how many launches
 * of each key it holds, only with their time per launch. */
static void test_live_mix(void)
{
    /* the reference: key 0 ("small") 10 launches of 100 ns, key 1 ("big") 5 of 400 ns; 5 units */
    const double ref_ns[2] = {1000, 2000}, ref_n[2] = {10, 5};
    /* block 0: the same per-launch times, another mix (3 small, 9 big); block 1: big 10 %
     * faster, mix as the reference; block 2: only small, 10 % faster; block 3: nothing */
    const double key_ns[2 * 4] = {300, 1000, 270, 0, 3600, 1800, 0, 0};
    const double key_n[2 * 4] = {3, 10, 3, 0, 9, 5, 0, 0};
    double out[4], share[4];
    CHECK(l2p_live_mix(ref_ns, ref_n, 2, 5, key_ns, key_n, 4, out, share) == L2P_OK);
    CHECK(fabs(out[0] - 3000.0 / 5 / 1e6) < 1e-15);              /* the mix does not enter */
    CHECK(fabs(out[1] - (1000 + 5 * 360.0) / 5 / 1e6) < 1e-15);  /* big 10 % faster */
    CHECK(fabs(out[2] - 900.0 * 3 / 5 / 1e6) < 1e-15 && fabs(share[2] - 1.0 / 3) < 1e-12);
    CHECK(out[3] == 0 && share[3] == 0 && share[0] == 1);
    /* the old objective, every kernel over the units: block 0 would read 3900 / 5 */
    CHECK(l2p_live_mix(ref_ns, ref_n, 2, 0, key_ns, key_n, 4, out, share) == L2P_ERR_VALUE);
    const double none[2] = {0, 0};
    CHECK(l2p_live_mix(none, none, 2, 5, key_ns, key_n, 4, out, share) == L2P_ERR_VALUE);
    const double bad[2] = {NAN, 5};
    CHECK(l2p_live_mix(bad, ref_n, 2, 5, key_ns, key_n, 4, out, share) == L2P_ERR_VALUE);
}

/* verify's rule: a plan holds only with its whole interval past 1 + min_gain; a "don't" plan
 * fails when an arm helps now. Each case sits on one side of an edge. */
static void test_verify_status(void)
{
    int st = -1;
    CHECK(l2p_live_verify_status(0, 1, 1, 1.02, 1.04, 0.01, &st) == L2P_OK && st == L2P_VERIFY_HOLDS);
    /* the core says helps from its point estimate, but the interval reaches below 1.01 */
    CHECK(l2p_live_verify_status(0, 1, 1, 1.009, 1.04, 0.01, &st) == L2P_OK &&
          st == L2P_VERIFY_INCONCLUSIVE);
    CHECK(l2p_live_verify_status(0, 1, 0, 0.97, 1.0099, 0.01, &st) == L2P_OK && st == L2P_VERIFY_FAILS);
    CHECK(l2p_live_verify_status(0, 1, 0, 0.97, 1.01, 0.01, &st) == L2P_OK &&
          st == L2P_VERIFY_INCONCLUSIVE);
    /* a "don't" plan: an arm that helps now fails it, whatever its interval */
    CHECK(l2p_live_verify_status(1, 1, 1, 1.02, 1.04, 0.01, &st) == L2P_OK && st == L2P_VERIFY_FAILS);
    CHECK(l2p_live_verify_status(1, 1, 0, 0.99, 1.009, 0.01, &st) == L2P_OK && st == L2P_VERIFY_HOLDS);
    CHECK(l2p_live_verify_status(1, 1, 0, 0.99, 1.02, 0.01, &st) == L2P_OK &&
          st == L2P_VERIFY_INCONCLUSIVE);
    /* a search cut short by the program's exit leaves no interval: inconclusive, either plan */
    CHECK(l2p_live_verify_status(0, 0, 0, 0, 0, 0.01, &st) == L2P_OK && st == L2P_VERIFY_INCONCLUSIVE);
    CHECK(l2p_live_verify_status(1, 0, 0, 0, 0, 0.01, &st) == L2P_OK && st == L2P_VERIFY_INCONCLUSIVE);
    /* a "don't" plan's search that decided with no interval compared no arm (only the
     * baselines reach the program): nothing helps now, the plan holds; a plan that is not a
     * baseline always has its own arm, so no interval there stays inconclusive */
    CHECK(l2p_live_verify_status(1, 1, 0, 0, 0, 0.01, &st) == L2P_OK && st == L2P_VERIFY_HOLDS);
    CHECK(l2p_live_verify_status(0, 1, 0, 0, 0, 0.01, &st) == L2P_OK && st == L2P_VERIFY_INCONCLUSIVE);
    /* min_gain 0: the edge is 1 itself */
    CHECK(l2p_live_verify_status(0, 1, 1, 1.0, 1.1, 0, &st) == L2P_OK && st == L2P_VERIFY_HOLDS);
    st = 7;
    CHECK(l2p_live_verify_status(0, 1, 1, 1.02, 1.04, 1.0, &st) == L2P_ERR_VALUE && st == 7);
    CHECK(l2p_live_verify_status(0, 1, 1, 1.04, 1.02, 0.01, &st) == L2P_ERR_VALUE);
    CHECK(l2p_live_verify_status(0, 1, 1, NAN, 1.02, 0.01, &st) == L2P_ERR_VALUE);
    CHECK(l2p_live_verify_status(0, 1, 1, 0, 1.02, 0.01, &st) == L2P_ERR_VALUE);
}

static void test_signature_and_locate(void)
{
    const char *a[3] = {"gemv", "index_add", "gemv"}, *b[3] = {"gemv", "gemv", "index_add"};
    char sa[32], sb[32], sc[32];
    l2p_live_signature(a, 3, sa, sizeof sa);
    l2p_live_signature(b, 3, sb, sizeof sb);
    l2p_live_signature(a, 2, sc, sizeof sc);
    CHECK(strncmp(sa, "k3-", 3) == 0 && strlen(sa) == 19);
    CHECK(strcmp(sa, sb) != 0); /* the order counts */
    CHECK(strncmp(sc, "k2-", 3) == 0);
    const char *a2[3] = {"gemv", "index_add", "gemv"};
    l2p_live_signature(a2, 3, sb, sizeof sb);
    CHECK(strcmp(sa, sb) == 0); /* same kernels, same signature */
    l2p_live_use u[2] = {{0, 1, 0, 0x7000100, 0x7000000, 0x1000}, {2, 0, 8, 0x9000000, 0x9000000,
                                                                  0x400}};
    uint64_t base = 0, n = 0;
    CHECK(l2p_live_locate(u, 2, 0, 1, 0, -0x100, 0x800, &base, &n) == 1);
    CHECK(base == 0x7000000 && n == 0x800);
    CHECK(l2p_live_locate(u, 2, 2, 0, 8, 0, 0x1000, &base, &n) == 1);
    CHECK(base == 0x9000000 && n == 0x400); /* clipped to the new allocation */
    CHECK(l2p_live_locate(u, 2, 0, 1, 0, -0x200, 0x800, &base, &n) == 1);
    CHECK(base == 0x7000000); /* a start before the allocation is clamped into it */
    CHECK(l2p_live_locate(u, 2, 1, 0, 0, 0, 0x800, &base, &n) == 0); /* no such word */
}

/* The live plan document's rules (l2p_live_plan_fields, l2p_live_window_fields): a good
 * window passes; each bad value fails with a message naming its field. */
static void good_window(l2p_live_value *v, long long *nodes)
{
    memset(v, 0, L2P_LIVE_W_NFIELDS * sizeof *v);
    nodes[0] = 3;
    nodes[1] = 5;
    v[L2P_LIVE_W_GRAPH].text = "k12-0123456789abcdef";
    v[L2P_LIVE_W_NODE].i = 3;
    v[L2P_LIVE_W_PARAM].i = 1;
    v[L2P_LIVE_W_OFFSET].i = 0;
    v[L2P_LIVE_W_DELTA].i = -256;
    v[L2P_LIVE_W_BYTES].i = 1ll << 24;
    v[L2P_LIVE_W_HIT_RATIO].f = 0.5;
    v[L2P_LIVE_W_HIT_PROP].text = "persisting";
    v[L2P_LIVE_W_MISS_PROP].text = "streaming";
    v[L2P_LIVE_W_NODES].n = 2;
    v[L2P_LIVE_W_NODES].items = nodes;
    v[L2P_LIVE_W_STREAM].null = 1; /* a graph's window */
}

/* The window with field i given a bad value fails, naming "windows[0].<name>" and `words`. */
static void bad_window(int i, l2p_live_value bad, const char *name, const char *words)
{
    l2p_live_value v[L2P_LIVE_W_NFIELDS];
    long long nodes[2];
    char field[64];
    good_window(v, nodes);
    if (!bad.items && i == L2P_LIVE_W_NODES && bad.n) bad.items = nodes;
    v[i] = bad;
    l2p_clear_error();
    CHECK(l2p_live_window_check(v, "windows[0]") == L2P_ERR_VALUE);
    const char *msg = l2p_last_error()->message;
    snprintf(field, sizeof field, "windows[0].%s: expected ", name);
    CHECK(strncmp(msg, field, strlen(field)) == 0);
    CHECK(strstr(msg, words) != NULL);
    if (strncmp(msg, field, strlen(field)) != 0 || !strstr(msg, words))
        fprintf(stderr, "  message: %s\n", msg);
}

static void test_plan_window_check(void)
{
    l2p_live_value v[L2P_LIVE_W_NFIELDS];
    long long nodes[2];
    good_window(v, nodes);
    CHECK(l2p_live_window_check(v, "windows[0]") == L2P_OK);
    v[L2P_LIVE_W_HIT_RATIO].f = 1.0; /* the ends: 1 is in, the caps are in */
    v[L2P_LIVE_W_NODE].i = 1ll << 31;
    v[L2P_LIVE_W_DELTA].i = -(1ll << 48);
    v[L2P_LIVE_W_HIT_PROP].text = "normal";
    CHECK(l2p_live_window_check(v, "windows[0]") == L2P_OK);

    v[L2P_LIVE_W_STREAM] = (l2p_live_value){.text = "launch"}; /* a stream window */
    CHECK(l2p_live_window_check(v, "windows[0]") == L2P_OK);
    bad_window(L2P_LIVE_W_STREAM, (l2p_live_value){.text = "pool"}, "stream", "'launch', got");
    bad_window(L2P_LIVE_W_STREAM, (l2p_live_value){.text = ""}, "stream", "'launch'");

    bad_window(L2P_LIVE_W_GRAPH, (l2p_live_value){.text = "x12-00"}, "graph", "graph signature");
    bad_window(L2P_LIVE_W_GRAPH, (l2p_live_value){.text = NULL}, "graph", "graph signature");
    bad_window(L2P_LIVE_W_NODE, (l2p_live_value){.i = -1}, "node",
               "an int in [0, 2147483648], got -1");
    bad_window(L2P_LIVE_W_NODE, (l2p_live_value){.i = (1ll << 31) + 1}, "node", "2147483649");
    bad_window(L2P_LIVE_W_PARAM, (l2p_live_value){.i = 4097}, "param", "[0, 4096], got 4097");
    bad_window(L2P_LIVE_W_OFFSET, (l2p_live_value){.i = 32769}, "offset", "[0, 32768]");
    bad_window(L2P_LIVE_W_DELTA, (l2p_live_value){.i = (1ll << 48) + 1}, "delta",
               "[-281474976710656, 281474976710656]");
    bad_window(L2P_LIVE_W_BYTES, (l2p_live_value){.i = 0}, "bytes", "[1, 281474976710656], got 0");
    bad_window(L2P_LIVE_W_HIT_RATIO, (l2p_live_value){.f = NAN}, "hit_ratio",
               "a number in (0, 1], got nan");
    bad_window(L2P_LIVE_W_HIT_RATIO, (l2p_live_value){.f = 2.0}, "hit_ratio", "got 2.0");
    bad_window(L2P_LIVE_W_HIT_RATIO, (l2p_live_value){.f = 0.0}, "hit_ratio", "got 0.0");
    bad_window(L2P_LIVE_W_HIT_RATIO, (l2p_live_value){.f = INFINITY}, "hit_ratio", "got inf");
    bad_window(L2P_LIVE_W_HIT_RATIO, (l2p_live_value){.f = 1.25}, "hit_ratio", "got 1.25");
    bad_window(L2P_LIVE_W_HIT_PROP, (l2p_live_value){.text = "bogus"}, "hit_prop",
               "one of normal, streaming, persisting, got 'bogus'");
    bad_window(L2P_LIVE_W_MISS_PROP, (l2p_live_value){.text = "PERSISTING"}, "miss_prop",
               "got 'PERSISTING'");
    bad_window(L2P_LIVE_W_NODES, (l2p_live_value){.n = 0}, "nodes", "non-empty list");
    bad_window(L2P_LIVE_W_NODES, (l2p_live_value){.n = L2P_LIVE_PLAN_MAX_NODES + 1}, "nodes",
               "node positions");
    long long bad_nodes[2] = {3, -5};
    l2p_live_value bn = {.n = 2, .items = bad_nodes};
    bad_window(L2P_LIVE_W_NODES, bn, "nodes[1]", "[0, 2147483648], got -5");

    /* the document's own fields, and the names they go by */
    const l2p_live_field *p = l2p_live_plan_fields;
    CHECK(strcmp(p[L2P_LIVE_P_FORMAT].text, L2P_LIVE_PLAN_FORMAT) == 0);
    CHECK(l2p_live_field_check(&p[L2P_LIVE_P_FORMAT],
                               &(l2p_live_value){.text = L2P_LIVE_PLAN_FORMAT}, "") == L2P_OK);
    CHECK(l2p_live_field_check(&p[L2P_LIVE_P_FORMAT], &(l2p_live_value){.text = "l2persist.plan/1"},
                               "") == L2P_ERR_VALUE);
    CHECK(strcmp(l2p_last_error()->message, "format: expected 'l2persist-live-plan/1', got "
                 "'l2persist.plan/1'") == 0);
    CHECK(l2p_live_field_check(&p[L2P_LIVE_P_DEVICE], &(l2p_live_value){.text = ""}, "") ==
          L2P_ERR_VALUE);
    CHECK(strncmp(l2p_last_error()->message, "device.name: ", 13) == 0);
    CHECK(l2p_live_field_check(&p[L2P_LIVE_P_DEVICE], &(l2p_live_value){.text = "NVIDIA H200"},
                               "") == L2P_OK);
    /* the graphs advise saw: absent (plans before them), or a list of graphs by signature */
    const l2p_live_field *seen = &p[L2P_LIVE_P_GRAPHS];
    CHECK(seen->kind == L2P_LIVE_F_LIST && seen->fields == l2p_live_graph_fields);
    CHECK(l2p_live_field_check(seen, &(l2p_live_value){.null = 1}, "") == L2P_OK);
    CHECK(l2p_live_field_check(seen, &(l2p_live_value){.n = L2P_LIVE_PLAN_MAX_GRAPHS}, "") ==
          L2P_OK);
    CHECK(l2p_live_field_check(seen, &(l2p_live_value){.n = L2P_LIVE_PLAN_MAX_GRAPHS + 1},
                               "") == L2P_ERR_VALUE);
    CHECK(l2p_live_field_check(&l2p_live_graph_fields[L2P_LIVE_G_GRAPH],
                               &(l2p_live_value){.text = "k3-00ff"}, "graphs[0]") == L2P_OK);
    CHECK(l2p_live_field_check(&l2p_live_graph_fields[L2P_LIVE_G_GRAPH],
                               &(l2p_live_value){.text = "x3-00ff"}, "graphs[0]") ==
          L2P_ERR_VALUE);
    CHECK(strncmp(l2p_last_error()->message, "graphs[0].graph: expected a graph signature",
                  43) == 0);
    /* the verdict: absent, or one of advise's two words whole (not a prefix, not longer) */
    const l2p_live_field *verdict = &p[L2P_LIVE_P_VERDICT];
    CHECK(l2p_live_field_check(verdict, &(l2p_live_value){.null = 1}, "") == L2P_OK);
    CHECK(l2p_live_field_check(verdict, &(l2p_live_value){.text = "helps"}, "") == L2P_OK);
    CHECK(l2p_live_field_check(verdict, &(l2p_live_value){.text = "dont"}, "") == L2P_OK);
    const char *not_verdicts[] = {"maybe", "help", "helpsx", "don", "dont|helps", "", "|"};
    for (size_t k = 0; k < sizeof not_verdicts / sizeof *not_verdicts; k++)
        CHECK(l2p_live_field_check(verdict, &(l2p_live_value){.text = not_verdicts[k]}, "") ==
              L2P_ERR_VALUE);
    CHECK(l2p_live_field_check(verdict, &(l2p_live_value){.text = "maybe"}, "") ==
          L2P_ERR_VALUE);
    CHECK(strcmp(l2p_last_error()->message, "verdict: expected one of 'helps', 'dont', got "
                 "'maybe'") == 0);
    CHECK(l2p_live_field_check(&p[L2P_LIVE_P_SET_ASIDE], &(l2p_live_value){.null = 1}, "") ==
          L2P_OK);
    CHECK(l2p_live_field_check(&p[L2P_LIVE_P_SET_ASIDE], &(l2p_live_value){.i = 1ll << 40},
                               "") == L2P_OK);
    CHECK(l2p_live_field_check(&p[L2P_LIVE_P_SET_ASIDE], &(l2p_live_value){.i = -1}, "") ==
          L2P_ERR_VALUE);
    CHECK(strcmp(l2p_last_error()->message,
                 "set_aside: expected an int in [0, 1099511627776], got -1") == 0);
    CHECK(l2p_live_field_check(&p[L2P_LIVE_P_WINDOWS], &(l2p_live_value){.n = 0}, "") == L2P_OK);
    CHECK(l2p_live_field_check(&p[L2P_LIVE_P_WINDOWS],
                               &(l2p_live_value){.n = L2P_LIVE_PLAN_MAX_WINDOWS + 1},
                               "") == L2P_ERR_VALUE);
    CHECK(strcmp(l2p_last_error()->message, "windows: expected a list of at most 4096 windows") ==
          0);
    CHECK(p[L2P_LIVE_P_WINDOWS].fields == l2p_live_window_fields);
    for (int i = 0; i < L2P_LIVE_W_NFIELDS; i++) CHECK(l2p_live_window_fields[i].name != NULL);

    for (int q = 0; q < 3; q++) CHECK(l2p_live_prop_of(l2p_live_prop_name(q)) == q);
    CHECK(l2p_live_prop_of("persisting") == L2P_ACCESS_PERSISTING);
    CHECK(l2p_live_prop_of("Persisting") == -1 && l2p_live_prop_of(NULL) == -1);
    CHECK(l2p_live_prop_name(3) == NULL);
}

/* Windows seen on kernels: interned by (base, bytes), counted per block, past the table one
 * "another window" id; then whether an arm's windows landed. */
static void test_activity_windows(void)
{
    l2p_activity a;
    CHECK(l2p_activity_init(&a, 1) == L2P_OK);
    static const char k1[] = "kernel_one";
    const l2p_window_seen w1 = {0x1000, 4096}, w2 = {0x9000, 512}, none = {0x5000, 0};
    l2p_activity_add(&a, 1, 200, 210, 7, k1, k1, NULL, &w1);   /* block 0 */
    l2p_activity_add(&a, 1, 220, 230, 7, k1, k1, NULL, &w1);   /* block 0 */
    l2p_activity_add(&a, 1, 240, 250, 7, k1, k1, NULL, NULL);  /* block 0: no window */
    l2p_activity_add(&a, 1, 260, 270, 7, k1, k1, NULL, &none); /* block 0: zero bytes = none */
    l2p_activity_add(&a, 1, 300, 310, 7, k1, k1, NULL, &w2);   /* block 1 */
    l2p_activity_add(&a, 1, 390, 450, 7, k1, k1, NULL, &w2);   /* spans block 1's end: out */
    CHECK(a.n_windows == 2);
    CHECK(a.recs[0].window == 1 && a.recs[2].window == 0 && a.recs[3].window == 0);
    CHECK(a.recs[4].window == 2 && a.windows[1].base == 0x9000 && a.windows[1].bytes == 512);
    const uint64_t bounds[3] = {200, 300, 400};
    const size_t cols = L2P_ACTIVITY_WINDOWS + 1;
    uint64_t *counts = calloc(2 * cols, sizeof *counts);
    CHECK(l2p_activity_block_windows(&a, bounds, 3, counts) == L2P_OK);
    CHECK(counts[0] == 2 && counts[1] == 2 && counts[2] == 0);
    CHECK(counts[cols + 0] == 0 && counts[cols + 1] == 0 && counts[cols + 2] == 1);
    const uint64_t bad[3] = {200, 200, 400};
    CHECK(l2p_activity_block_windows(&a, bad, 3, counts) == L2P_ERR_VALUE);
    /* past the table: one shared id */
    for (uint64_t i = 0; i < L2P_ACTIVITY_WINDOWS + 5; i++) {
        const l2p_window_seen w = {0x100000 + i * 0x1000, 64};
        l2p_activity_add(&a, 1, 500, 501, 7, k1, k1, NULL, &w);
    }
    CHECK(a.n_windows == L2P_ACTIVITY_WINDOWS - 1);
    CHECK(a.recs[a.n - 1].window == L2P_ACTIVITY_WINDOWS);
    l2p_activity_clear(&a);
    CHECK(a.n_windows == 0);
    free(counts);
    l2p_activity_free(&a);

    /* landed: the arm's window on 5 kernels (one cut shorter by the driver), 2 bare */
    const l2p_window_seen meant[2] = {{0x1000, 8192}, {0x9000, 512}};
    const l2p_window_seen seen[3] = {{0x1000, 8192}, {0x1000, 4096}, {0x7000, 64}};
    uint64_t n[3] = {3, 2, 0};
    l2p_landed out;
    CHECK(l2p_live_landed(meant, 2, seen, n, 3, 2, &out) == L2P_OK);
    CHECK(out.kernels == 7 && out.meant == 5 && out.foreign == 0 && out.missing == 1);
    n[2] = 4; /* a window the arm did not mean, on 4 kernels */
    CHECK(l2p_live_landed(meant, 2, seen, n, 3, 2, &out) == L2P_OK);
    CHECK(out.kernels == 11 && out.meant == 5 && out.foreign == 4 && out.missing == 1);
    /* a bigger window than meant at the same base is not the arm's */
    const l2p_window_seen big = {0x9000, 1024};
    const uint64_t one = 1;
    CHECK(l2p_live_landed(meant, 2, &big, &one, 1, 0, &out) == L2P_OK);
    CHECK(out.foreign == 1 && out.missing == 2);
    /* a baseline means none: every window is foreign */
    CHECK(l2p_live_landed(NULL, 0, seen, n, 3, 0, &out) == L2P_OK);
    CHECK(out.kernels == 9 && out.foreign == 9 && out.meant == 0 && out.missing == 0);
    CHECK(l2p_live_landed(NULL, 1, seen, n, 3, 0, &out) == L2P_ERR_VALUE);
    CHECK(l2p_live_landed(meant, L2P_ACTIVITY_WINDOWS + 1, seen, n, 3, 0, &out) ==
          L2P_ERR_VALUE);
}

int main(void)
{
    test_signature_and_locate();
    test_finds_the_best_arm();
    test_no_gain_says_dont();
    test_confirmation_runs_fresh_blocks();
    test_more_rounds_while_undecided();
    test_the_cap_leaves_a_wide_interval_undecided();
    test_verify_measures_to_a_width();
    test_peek();
    test_finish_early();
    test_rotation();
    test_later_stages_add_a_round();
    test_blocks_left();
    test_options();
    test_arms();
    test_rest_units();
    test_activity_blocks();
    test_activity_timing();
    test_activity_reused_name_address();
    test_activity_windows();
    test_activity_launch_keys();
    test_live_mix();
    test_verify_status();
    test_plan_window_check();
    printf("test_live: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
