/* See l2p_live.h. */
#include "l2p_live.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2p_policy.h"
#include "l2p_stats.h"
#include "l2p_tune.h"

enum { SEARCH = 0, CONFIRM = 1, DONE = 2 };

void l2p_live_options_default(l2p_live_options *o)
{
    memset(o, 0, sizeof *o);
    /* Two rounds in the first stage, one in each later one: an arm's search samples add up
     * over the stages (halve ranks by the median of all of them), so a later stage's round
     * is the third, fourth... sample of the arms still in it. Three rounds a stage took 105
     * search blocks of 16 arms; at the pace's cap each block costs the program its switch and
     * its recording (observing 1.9-2.9 % on the H200 zoo at 1011bb0: eager records cost 33-50
     * % per recorded unit, a 225-node decode graph's switch 9.1 ms), so halving the blocks
     * halves what observing costs before a decision. 2 + 1: 51 blocks of 16 arms. */
    o->stage_rounds = 2;
    o->next_stage_rounds = 1;
    o->confirm_rounds = 6;
    o->max_confirm_rounds = 40;
    o->min_gain = 0.01;
    o->confidence = 0.95;
    o->seed = 0x6c32706572736973ull;
    o->max_overhead = 0.01;
    /* Twenty blocks' worth (a twenty-first of the units recorded): at fifteen, the host-bound
     * server loop's rests stayed at the cap and observing it cost 1.90 % (H200, f5062e8) and
     * 2.10 % (H100, 06d9444), at the live study's 2 % bar; the search takes about 1.3 times as
     * long there, inside the 55 s budget. */
    o->max_rest_ratio = 20;
}

static l2p_status check_options(const l2p_live_options *o, size_t n_arms)
{
    if (n_arms < 2 || n_arms > L2P_LIVE_MAX_ARMS)
        return l2p_fail(L2P_ERR_VALUE, "arms: expected 2 to %d (the two baselines first), got %zu",
                        L2P_LIVE_MAX_ARMS, n_arms);
    if (o->confirm_only && n_arms != 3)
        return l2p_fail(L2P_ERR_VALUE, "arms: a confirmation alone takes 3 (limit 0, the "
                        "default, the plan), got %zu", n_arms);
    if (o->stage_rounds < 1 || o->stage_rounds > 8)
        return l2p_fail(L2P_ERR_VALUE, "stage_rounds: expected 1 to 8, got %zu", o->stage_rounds);
    if (o->next_stage_rounds < 1 || o->next_stage_rounds > 8)
        return l2p_fail(L2P_ERR_VALUE, "next_stage_rounds: expected 1 to 8, got %zu",
                        o->next_stage_rounds);
    if (o->confirm_rounds < 2 || o->confirm_rounds > 32)
        return l2p_fail(L2P_ERR_VALUE, "confirm_rounds: expected 2 to 32, got %zu",
                        o->confirm_rounds);
    if (o->max_confirm_rounds < o->confirm_rounds ||
        o->max_confirm_rounds > L2P_LIVE_MAX_SAMPLES)
        return l2p_fail(L2P_ERR_VALUE, "max_confirm_rounds: expected confirm_rounds (%zu) to %d, "
                        "got %zu", o->confirm_rounds, L2P_LIVE_MAX_SAMPLES, o->max_confirm_rounds);
    if (!(o->min_gain >= 0 && o->min_gain < 1))
        return l2p_fail(L2P_ERR_VALUE, "min_gain: expected [0, 1), got %g", o->min_gain);
    if (!(o->confidence > 0.5 && o->confidence < 1))
        return l2p_fail(L2P_ERR_VALUE, "confidence: expected (0.5, 1), got %g", o->confidence);
    if (!(o->target_halfwidth >= 0 && o->target_halfwidth <= 0.5))
        return l2p_fail(L2P_ERR_VALUE, "target_halfwidth: expected [0, 0.5] (0: off), got %g",
                        o->target_halfwidth);
    if (!(o->max_overhead >= 0 && o->max_overhead <= 0.5))
        return l2p_fail(L2P_ERR_VALUE, "max_overhead: expected [0, 0.5], got %g",
                        o->max_overhead);
    if (o->max_rest_ratio > L2P_LIVE_MAX_REST_RATIO)
        return l2p_fail(L2P_ERR_VALUE, "max_rest_ratio: expected 0 to %d, got %zu",
                        L2P_LIVE_MAX_REST_RATIO, o->max_rest_ratio);
    return L2P_OK;
}

/* The arms of the next round: the live ones, rotated by the round and reversed every other
 * round, so that no arm always follows the same one. */
static void plan_round(l2p_live *s)
{
    int live[L2P_LIVE_MAX_ARMS];
    size_t n = 0;
    for (size_t a = 0; a < s->n_arms; a++)
        if (s->alive[a]) live[n++] = (int)a;
    for (size_t i = 0; i < n; i++) {
        size_t k = (i + s->round) % n;
        s->order[i] = live[(s->round & 1) ? n - 1 - k : k];
    }
    s->n_order = n;
    s->at = 0;
    s->round_closed = 0;
}

static void start_phase(l2p_live *s, int phase)
{
    s->phase = phase;
    s->round = 0;
    s->due = phase == SEARCH ? s->o.stage_rounds : s->o.confirm_rounds;
    if (phase != DONE) plan_round(s);
    else s->r.done = 1;
}

l2p_status l2p_live_init(l2p_live *s, size_t n_arms, const l2p_live_options *o)
{
    l2p_status st = check_options(o, n_arms);
    if (st != L2P_OK) return st;
    memset(s, 0, sizeof *s);
    s->o = *o;
    s->n_arms = n_arms;
    for (size_t a = 0; a < n_arms; a++) {
        s->alive[a] = 1;
        s->r.search_median[a] = NAN;
    }
    s->r.winner = -1;
    s->r.baseline = 1;
    s->stage = 1;
    /* Only the baselines: nothing to search, confirm them against each other. */
    start_phase(s, (o->confirm_only || n_arms == 2) ? CONFIRM : SEARCH);
    if (o->confirm_only) s->r.winner = 2;
    return L2P_OK;
}

static double median_of(const double *v, size_t n)
{
    if (!n) return NAN;
    double *c = malloc(n * sizeof *c);
    if (!c) return NAN;
    memcpy(c, v, n * sizeof *c);
    double m = l2p_median_sort(c, n);
    free(c);
    return m;
}

/* After a search stage: keep the better half of the candidates (arms 2..), by their search
 * median against the better baseline's. */
static void halve(l2p_live *s)
{
    size_t idx[L2P_LIVE_MAX_ARMS], n = 0;
    for (size_t a = 2; a < s->n_arms; a++) {
        s->r.search_median[a] = median_of(s->s[SEARCH][a], s->n_s[SEARCH][a]);
        if (s->alive[a]) idx[n++] = a;
    }
    for (size_t a = 0; a < 2; a++)
        s->r.search_median[a] = median_of(s->s[SEARCH][a], s->n_s[SEARCH][a]);
    /* The order by median is the order by speedup over either baseline: no baseline needed. */
    /* insertion sort by median, fastest first */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && s->r.search_median[idx[j]] < s->r.search_median[idx[j - 1]];
             j--) {
            size_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    size_t keep = (n + 1) / 2;
    for (size_t i = keep; i < n; i++) {
        s->alive[idx[i]] = 0;
        s->r.stage_dropped[idx[i]] = s->stage;
    }
}

static size_t live_candidates(const l2p_live *s)
{
    size_t n = 0;
    for (size_t a = 2; a < s->n_arms; a++) n += (size_t)s->alive[a];
    return n;
}

static int last_candidate(const l2p_live *s)
{
    for (size_t a = 2; a < s->n_arms; a++)
        if (s->alive[a]) return (int)a;
    return -1;
}

/* A confirmation measured to a width (target_halfwidth > 0) of a candidate's speedup. */
static int wants_width(const l2p_live *s)
{
    return s->o.target_halfwidth > 0 && s->r.winner >= 0;
}

/* The candidate's interval (l2p_tune_verdict's, in r) within +-target_halfwidth of its
 * speedup on both sides: the bootstrap's percentile interval of a median ratio need not be
 * symmetric, and "within 1 %" must hold for either end. */
static int narrow_enough(const l2p_live *s)
{
    const l2p_live_result *r = &s->r;
    if (!wants_width(s) || !(r->speedup > 0)) return 0;
    double below = (r->speedup - r->ci_low) / r->speedup;
    double above = (r->ci_high - r->speedup) / r->speedup;
    return fmax(below, above) <= s->o.target_halfwidth;
}

/* The confirmation's verdict so far (l2p_tune_verdict; the baselines' own comparison by
 * l2p_tune_speedup_ci). Sets r.decided when the rule settled. */
static l2p_status verdict(l2p_live *s, int final)
{
    const double *a = s->s[CONFIRM][0], *b = s->s[CONFIRM][1];
    size_t na = s->n_s[CONFIRM][0], nb = s->n_s[CONFIRM][1];
    l2p_live_result *r = &s->r;
    r->confirm_rounds = s->round;
    if (na < 2 || nb < 2) {
        r->decided = 0;
        return L2P_OK;
    }
    r->base_value[0] = median_of(a, na);
    r->base_value[1] = median_of(b, nb);
    /* With no candidate, the baselines are judged against each other (the default as the
     * "candidate": only the baseline fields of the verdict are used). */
    const double *w = r->winner < 0 ? b : s->s[CONFIRM][r->winner];
    size_t nw = r->winner < 0 ? nb : s->n_s[CONFIRM][r->winner];
    size_t rounds = (na == nb && nb == nw) ? na : 0;
    l2p_tune_verdict_t v;
    l2p_status st = l2p_tune_verdict(a, na, b, nb, w, nw, rounds, s->o.min_gain,
                                     s->o.confidence, s->o.seed, &v);
    if (st != L2P_OK) return st;
    r->baseline_decided = v.baseline_decided;
    r->baseline = v.keep;
    if (r->winner < 0) {
        r->decided = r->baseline_decided || final;
        return L2P_OK;
    }
    /* The rule's baseline is the faster by median; a tie within noise keeps the default's. */
    r->helps = v.helps;
    r->slows = v.slows;
    r->speedup = v.speedup;
    r->ci_low = v.ci_low;
    r->ci_high = v.ci_high;
    r->winner_value = v.candidate_ms;
    /* Settled: it helps, or it slows, or even the interval's top misses the gain; or the
     * interval is as narrow as asked (one that still straddles the gain is then an answer:
     * inconclusive, measured). */
    int settled = v.helps || v.slows || v.ci_high < 1 + s->o.min_gain || narrow_enough(s);
    /* At the cap an interval that still reaches both above and below the least gain (the
     * rule settled neither way) is no "don't":
     * advise ends there undecided, and says the cap ended it (on two ranks whose samples
     * disagree, the mean's interval stays this wide). verify reads its interval itself. */
    r->capped = final && !settled;
    r->decided = settled || (final && wants_width(s));
    return L2P_OK;
}

/* Every issued block is recorded: decide what follows the round that just ended. */
static l2p_status end_of_rounds(l2p_live *s)
{
    if (s->phase == SEARCH) {
        halve(s);
        s->stage++;
        if (live_candidates(s) <= 1) {
            s->r.winner = last_candidate(s);
            for (size_t a = 2; a < s->n_arms; a++) s->alive[a] = (int)a == s->r.winner;
            start_phase(s, CONFIRM);
        } else {
            s->due = s->round + s->o.next_stage_rounds;
            plan_round(s);
        }
        return L2P_OK;
    }
    int final = s->round >= s->o.max_confirm_rounds;
    l2p_status st = verdict(s, final);
    if (st != L2P_OK) return st;
    /* With a width asked for, a settled rule does not end it: only the width or the cap. */
    if (wants_width(s) ? narrow_enough(s) || final : s->r.decided || final) {
        start_phase(s, DONE);
    } else {
        s->due = s->round + 1; /* one more round at a time */
        plan_round(s);
    }
    return L2P_OK;
}

int l2p_live_next(l2p_live *s)
{
    for (;;) {
        if (s->phase == DONE) return L2P_LIVE_DONE;
        if (s->at < s->n_order) {
            int arm = s->order[s->at++];
            s->pending[s->n_pending++] = arm;
            if (s->phase == SEARCH) s->r.search_blocks++;
            else s->r.confirm_blocks++;
            return arm;
        }
        if (!s->round_closed) { /* the round was issued whole */
            s->round++;
            s->round_closed = 1;
        }
        if (s->round < s->due) {
            plan_round(s);
            continue;
        }
        /* A decision is due: it needs every issued block's sample. */
        if (s->n_pending > s->pend_head) return L2P_LIVE_NEED;
        if (end_of_rounds(s) != L2P_OK) {
            start_phase(s, DONE);
            return L2P_LIVE_DONE;
        }
    }
}

int l2p_live_peek(const l2p_live *s)
{
    /* Only inside a round: its order is drawn when the round is planned, and the round after
     * may be a decision that needs this block's sample. */
    if (s->phase == DONE || s->at >= s->n_order) return L2P_LIVE_NEED;
    return s->order[s->at];
}

l2p_status l2p_live_record(l2p_live *s, double value)
{
    if (s->pend_head == s->n_pending)
        return l2p_fail(L2P_ERR_STATE, "live search: no block is waiting for a sample");
    if (!(value > 0) || !isfinite(value))
        return l2p_fail(L2P_ERR_VALUE, "value: expected a positive finite time per unit, got %g",
                        value);
    int arm = s->pending[s->pend_head++];
    int ph = s->phase == SEARCH ? SEARCH : CONFIRM;
    if (s->n_s[ph][arm] < L2P_LIVE_MAX_SAMPLES) s->s[ph][arm][s->n_s[ph][arm]++] = value;
    if (s->pend_head == s->n_pending) s->pend_head = s->n_pending = 0;
    return L2P_OK;
}

l2p_status l2p_live_finish(l2p_live *s)
{
    if (s->phase == DONE) return L2P_OK;
    if (s->phase == SEARCH) {
        halve(s); /* fills the search medians for the report */
        s->r.winner = -1;
        s->r.helps = s->r.slows = 0;
        s->r.decided = 0;
        start_phase(s, DONE);
        return L2P_OK;
    }
    s->round = s->n_s[CONFIRM][0];
    l2p_status st = verdict(s, 0);
    int decided = s->r.decided;
    if (st == L2P_OK) start_phase(s, DONE);
    s->r.decided = decided;
    if (!decided) s->r.helps = 0; /* an undecided plan is not recommended */
    return st;
}

/* ---- the candidate arms ---- */

static size_t round_to(size_t v, size_t g) { return g ? (v + g - 1) / g * g : v; }

static void add_window(l2p_live_arm *a, int target, double hit, int hit_prop, int miss_prop)
{
    if (a->n_win == L2P_LIVE_MAX_WIN) return;
    a->target[a->n_win] = target;
    a->hit_ratio[a->n_win] = hit;
    a->hit_prop[a->n_win] = hit_prop;
    a->miss_prop[a->n_win] = miss_prop;
    a->n_win++;
}

/* How much a window on t can matter: the GPU time of the kernels that use it, scaled down for
 * buffers under a sixteenth of the L2 (those stay in the L2 without any persistence: a 2 MiB
 * reduction buffer of the busiest kernel is no target, a table of half the L2 is). */
static double rank_key(const l2p_live_target *t, size_t l2_bytes)
{
    double small = (double)l2_bytes / 16;
    return t->weight * fmin(1.0, small > 0 ? (double)t->bytes / small : 1.0);
}

/* What the switch and the blocks may add: max_overhead less what the hooks already take,
 * a quarter of it at least (hooks that take it all must not stop the pace: the rests still
 * hide the switches and the recording as far as the cap lets them). */
static double watching_bound(double max_overhead, double hooks_share)
{
    if (!(hooks_share > 0)) return max_overhead; /* NaN (not known) or none */
    double left = max_overhead - hooks_share;
    return left > max_overhead / 4 ? left : max_overhead / 4;
}

size_t l2p_live_rest_units(double switch_s, double rest_s, double block_s, size_t units,
                           double max_overhead, double hooks_share, size_t max_rest_ratio,
                           size_t cycle, int *capped)
{
    if (capped) *capped = 0;
    if (!(max_overhead > 0) || units == 0) return 0;
    max_overhead = watching_bound(L2P_LIVE_OVERHEAD_AIM * max_overhead, hooks_share);
    size_t cap = units * max_rest_ratio;
    size_t measure = units < cap ? units : cap; /* one block's worth: a pair to measure */
    if (!(isfinite(rest_s) && rest_s > 0 && isfinite(block_s) && block_s > 0 &&
          isfinite(switch_s) && switch_s >= 0))
        return measure;
    double n = (double)units;
    double added = switch_s + n * (block_s > rest_s ? block_s - rest_s : 0.0);
    /* added <= max_overhead * (switch_s + r * rest_s + n * block_s), solved for r */
    double need = (added / max_overhead - switch_s - n * block_s) / rest_s;
    if (!(need > 0)) return cycle % L2P_LIVE_REMEASURE == 0 ? measure : 0;
    if (need > (double)cap) {
        /* the bound is out of reach on this program: the caller says so rather than let it
         * read as met */
        if (capped) *capped = 1;
        return cap;
    }
    return (size_t)ceil(need);
}

size_t l2p_live_rest_ratio(double time_left_s, size_t blocks_left, double switch_s,
                           double rest_s, double block_s, size_t units, size_t max_rest_ratio)
{
    if (!(time_left_s > 0) || !blocks_left || !units || !(isfinite(rest_s) && rest_s > 0) ||
        !(isfinite(block_s) && block_s > 0) || !(isfinite(switch_s) && switch_s >= 0))
        return max_rest_ratio;
    double cycle = L2P_LIVE_BUDGET_SHARE * time_left_s / (double)blocks_left;
    double r = (cycle - switch_s - (double)units * block_s) / (rest_s * (double)units);
    if (!(r > (double)max_rest_ratio)) return max_rest_ratio;
    return r >= L2P_LIVE_MAX_REST_RATIO ? L2P_LIVE_MAX_REST_RATIO : (size_t)r;
}

/* Rounds of `n` arms from the current one on, to round `due`: the current round's arms not
 * issued yet, then whole rounds. */
static size_t rounds_left(const l2p_live *s, size_t n)
{
    size_t left = s->round_closed ? 0 : s->n_order - s->at;
    size_t whole = s->round_closed ? s->round : s->round + 1; /* rounds counted after this */
    return left + (s->due > whole ? s->due - whole : 0) * n;
}

size_t l2p_live_blocks_left(const l2p_live *s)
{
    if (s->phase == DONE) return 0;
    size_t c = live_candidates(s);
    /* a confirmation measured to a width (verify) runs to max_confirm_rounds as often as not:
     * counting only its first rounds would spend the budget's room on them */
    if (s->phase == CONFIRM) {
        size_t n = s->r.winner >= 0 ? 3 : 2, left = rounds_left(s, n);
        if (wants_width(s) && s->o.max_confirm_rounds > s->due)
            left += (s->o.max_confirm_rounds - s->due) * n;
        return left;
    }
    size_t left = rounds_left(s, 2 + c);
    while (c > 1) {
        c = (c + 1) / 2; /* halve keeps the better half, rounded up */
        if (c > 1) left += s->o.next_stage_rounds * (2 + c);
    }
    size_t confirm = s->o.target_halfwidth > 0 ? s->o.max_confirm_rounds : s->o.confirm_rounds;
    return left + confirm * 3; /* a search leaves one candidate: it and the two baselines */
}

/* The `tries` highest-ranked targets (weight > 0, bytes > 0), best first; ties keep the
 * targets' order. */
static size_t heaviest(const l2p_live_target *t, size_t n, size_t tries, size_t l2_bytes,
                       int *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n && i < L2P_LIVE_MAX_TARGETS; i++) {
        if (!(t[i].weight > 0) || t[i].bytes == 0) continue;
        size_t j = k++;
        double key = rank_key(&t[i], l2_bytes);
        for (; j > 0 && rank_key(&t[out[j - 1]], l2_bytes) < key; j--) out[j] = out[j - 1];
        out[j] = (int)i;
    }
    return k < tries ? k : tries;
}

size_t l2p_live_arms(const l2p_live_target *t, size_t n, size_t granule, size_t persisting_max,
                     size_t l2_bytes, size_t tries, l2p_live_arm *out, size_t cap)
{
    size_t k = 0;
    if (cap < 2) return 0;
    memset(out, 0, cap * sizeof *out);
    out[k++].set_aside = 0;                      /* limit 0 */
    out[k++].set_aside = L2P_LIVE_DEFAULT_LIMIT; /* the default */
    int top[L2P_LIVE_MAX_TARGETS];
    if (tries > L2P_LIVE_MAX_WIN) tries = L2P_LIVE_MAX_WIN;
    size_t nt = heaviest(t, n, tries, l2_bytes, top);
    if (!nt || !persisting_max) return k;
    size_t levels[3] = {round_to(persisting_max / 4, granule), round_to(persisting_max / 2, granule),
                        persisting_max};
    for (size_t l = 0; l < 3; l++) {
        size_t level = levels[l] > persisting_max ? persisting_max : levels[l];
        if (!level || (l && level == levels[l - 1])) continue;
        uint64_t together = 0;
        for (size_t i = 0; i < nt && k < cap; i++) {
            l2p_live_arm *a = &out[k++];
            a->set_aside = level;
            add_window(a, top[i], fmin(1.0, (double)level / (double)t[top[i]].bytes),
                       L2P_ACCESS_PERSISTING, L2P_ACCESS_STREAMING);
            together += t[top[i]].bytes;
        }
        if (nt > 1 && k < cap) {
            l2p_live_arm *a = &out[k++];
            a->set_aside = level;
            for (size_t i = 0; i < nt; i++)
                add_window(a, top[i], fmin(1.0, (double)level / (double)together),
                           L2P_ACCESS_PERSISTING, L2P_ACCESS_STREAMING);
        }
    }
    for (size_t i = 0; i < nt && k < cap; i++) {
        if (t[top[i]].bytes < l2_bytes / 2) continue;
        l2p_live_arm *a = &out[k++];
        a->set_aside = 0;
        add_window(a, top[i], 1.0, L2P_ACCESS_STREAMING, L2P_ACCESS_STREAMING);
    }
    return k;
}

/* ---- signatures and locating saved windows ---- */

void l2p_live_signature(const char *const *names, size_t n, char *out, size_t cap)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        for (const unsigned char *p = (const unsigned char *)(names[i] ? names[i] : ""); *p; p++)
            h = (h ^ *p) * 0x100000001b3ull;
        h = (h ^ '\n') * 0x100000001b3ull;
    }
    snprintf(out, cap, "k%zu-%016llx", n, (unsigned long long)h);
}

int l2p_live_locate(const l2p_live_use *uses, size_t n, size_t node, unsigned param,
                    unsigned offset, int64_t delta, uint64_t bytes, uint64_t *base,
                    uint64_t *nbytes)
{
    for (size_t i = 0; i < n; i++) {
        const l2p_live_use *u = &uses[i];
        if (u->node != node || u->param != param || u->offset != offset) continue;
        uint64_t lo = u->range_start, hi = u->range_start + u->range_size;
        /* the buffer's start, as far from the word as when the plan was made, clamped into the
         * allocation (a smaller allocation in this run keeps the window inside it) */
        int64_t want = (int64_t)u->word + delta;
        uint64_t b = want < (int64_t)lo ? lo : (uint64_t)want;
        if (b >= hi) b = lo;
        *base = b;
        *nbytes = bytes < hi - b ? bytes : hi - b;
        return *nbytes > 0;
    }
    return 0;
}

/* ---- the live plan document ---- */

#define NODE_POS_MAX (1ll << 31) /* a kernel node's position in its graph */
#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x)

#define GRAPH_ROW                                                                            \
    {.name = "graph", .kind = L2P_LIVE_F_TEXT, .text = "k",                                   \
     .expect = "a graph signature ('k<count>-<hex>')"}

const l2p_live_field l2p_live_window_fields[L2P_LIVE_W_NFIELDS] = {
    [L2P_LIVE_W_GRAPH] = GRAPH_ROW,
    [L2P_LIVE_W_NODE] = {.name = "node", .kind = L2P_LIVE_F_INT, .flags = L2P_LIVE_F_SHOW,
                         .lo = 0, .hi = NODE_POS_MAX},
    [L2P_LIVE_W_PARAM] = {.name = "param", .kind = L2P_LIVE_F_INT, .flags = L2P_LIVE_F_SHOW,
                          .lo = 0, .hi = 4096},
    [L2P_LIVE_W_OFFSET] = {.name = "offset", .kind = L2P_LIVE_F_INT, .flags = L2P_LIVE_F_SHOW,
                           .lo = 0, .hi = 32768},
    [L2P_LIVE_W_DELTA] = {.name = "delta", .kind = L2P_LIVE_F_INT, .flags = L2P_LIVE_F_SHOW,
                          .lo = -(1ll << 48), .hi = 1ll << 48},
    [L2P_LIVE_W_BYTES] = {.name = "bytes", .kind = L2P_LIVE_F_INT, .flags = L2P_LIVE_F_SHOW,
                          .lo = 1, .hi = 1ll << 48},
    [L2P_LIVE_W_HIT_RATIO] = {.name = "hit_ratio", .kind = L2P_LIVE_F_RATIO,
                              .flags = L2P_LIVE_F_SHOW},
    [L2P_LIVE_W_HIT_PROP] = {.name = "hit_prop", .kind = L2P_LIVE_F_PROP,
                             .flags = L2P_LIVE_F_SHOW},
    [L2P_LIVE_W_MISS_PROP] = {.name = "miss_prop", .kind = L2P_LIVE_F_PROP,
                              .flags = L2P_LIVE_F_SHOW},
    [L2P_LIVE_W_NODES] = {.name = "nodes", .kind = L2P_LIVE_F_INTS, .lo = 0, .hi = NODE_POS_MAX,
                          .min_items = 1, .max_items = L2P_LIVE_PLAN_MAX_NODES,
                          .expect = "a non-empty list of node positions"},
    [L2P_LIVE_W_STREAM] = {.name = "stream", .kind = L2P_LIVE_F_TEXT,
                           .flags = L2P_LIVE_F_EXACT | L2P_LIVE_F_NULL | L2P_LIVE_F_SHOW,
                           .text = "launch"},
};

const l2p_live_field l2p_live_graph_fields[L2P_LIVE_G_NFIELDS] = {[L2P_LIVE_G_GRAPH] = GRAPH_ROW};

const l2p_live_field l2p_live_plan_fields[L2P_LIVE_P_NFIELDS] = {
    [L2P_LIVE_P_FORMAT] = {.name = "format", .kind = L2P_LIVE_F_TEXT,
                           .flags = L2P_LIVE_F_EXACT | L2P_LIVE_F_SHOW,
                           .text = L2P_LIVE_PLAN_FORMAT},
    [L2P_LIVE_P_DEVICE] = {.name = "device.name", .kind = L2P_LIVE_F_TEXT,
                           .expect = "the GPU's name (a non-empty string)"},
    /* absent in a hand-written plan (then read as "helps"); what advise writes otherwise.
     * verify checks a "don't" plan by a search, so a word it does not know is refused */
    [L2P_LIVE_P_VERDICT] = {.name = "verdict", .kind = L2P_LIVE_F_TEXT,
                            .flags = L2P_LIVE_F_CHOICE | L2P_LIVE_F_NULL | L2P_LIVE_F_SHOW,
                            .text = "helps|dont", .expect = "one of 'helps', 'dont'"},
    [L2P_LIVE_P_SET_ASIDE] = {.name = "set_aside", .kind = L2P_LIVE_F_INT,
                              .flags = L2P_LIVE_F_NULL | L2P_LIVE_F_SHOW, .lo = 0,
                              .hi = 1ll << 40},
    [L2P_LIVE_P_WINDOWS] = {.name = "windows", .kind = L2P_LIVE_F_LIST, .min_items = 0,
                            .max_items = L2P_LIVE_PLAN_MAX_WINDOWS,
                            .expect = "a list of at most " TEXT_OF(L2P_LIVE_PLAN_MAX_WINDOWS)
                                      " windows",
                            .fields = l2p_live_window_fields, .n_fields = L2P_LIVE_W_NFIELDS},
    /* absent in plans before it (apply then cannot tell a new shape from one advised) */
    [L2P_LIVE_P_GRAPHS] = {.name = "graphs", .kind = L2P_LIVE_F_LIST, .flags = L2P_LIVE_F_NULL,
                           .min_items = 0, .max_items = L2P_LIVE_PLAN_MAX_GRAPHS,
                           .expect = "a list of at most " TEXT_OF(L2P_LIVE_PLAN_MAX_GRAPHS)
                                     " graphs",
                           .fields = l2p_live_graph_fields, .n_fields = L2P_LIVE_G_NFIELDS},
};

static const char *const prop_names[] = {[L2P_ACCESS_NORMAL] = "normal",
                                         [L2P_ACCESS_STREAMING] = "streaming",
                                         [L2P_ACCESS_PERSISTING] = "persisting"};

const char *l2p_live_prop_name(int prop)
{
    return prop >= 0 && prop < 3 ? prop_names[prop] : NULL;
}

int l2p_live_prop_of(const char *name)
{
    for (int p = 0; name && p < 3; p++)
        if (strcmp(name, prop_names[p]) == 0) return p;
    return -1;
}

void l2p_live_field_expect(const l2p_live_field *f, int item, char *out, size_t cap)
{
    switch (item ? L2P_LIVE_F_INT : f->kind) {
    case L2P_LIVE_F_INT: snprintf(out, cap, "an int in [%lld, %lld]", f->lo, f->hi); break;
    case L2P_LIVE_F_RATIO: snprintf(out, cap, "a number in (0, 1]"); break;
    case L2P_LIVE_F_PROP:
        snprintf(out, cap, "one of %s, %s, %s", prop_names[0], prop_names[1], prop_names[2]);
        break;
    default:
        if (f->kind == L2P_LIVE_F_TEXT && (f->flags & L2P_LIVE_F_EXACT))
            snprintf(out, cap, "'%s'", f->text);
        else snprintf(out, cap, "%s", f->expect ? f->expect : "a value");
    }
}

/* Whether t is one of the '|'-separated words of `choices`, whole. */
static int is_choice(const char *choices, const char *t)
{
    size_t n = strlen(t);
    for (const char *c = choices; c && *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && strncmp(c, t, n) == 0) return 1;
        c = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* A double as Python's repr writes it, near enough: the shortest %g that reads back. */
static void show_real(double v, char *out, size_t cap)
{
    if (isnan(v)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, cap, v < 0 ? "-inf" : "inf");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(out, cap, "%.*g", p, v);
        if (strtod(out, NULL) == v) break;
    }
    if (!strpbrk(out, ".e") && strlen(out) + 3 <= cap) strcat(out, ".0");
}

/* A string as the message shows it: quoted and cut (None: not a string). */
static const char *show_text(const char *t, char *out, size_t cap)
{
    if (t) snprintf(out, cap, "'%.60s'", t);
    else snprintf(out, cap, "None");
    return out;
}

static l2p_status field_fail(const l2p_live_field *f, const char *where, const char *shown)
{
    char expect[128];
    l2p_live_field_expect(f, 0, expect, sizeof expect);
    return l2p_fail(L2P_ERR_VALUE, "%s%s%s: expected %s%s%s", where, *where ? "." : "",
                    f->name, expect, shown && (f->flags & L2P_LIVE_F_SHOW) ? ", got " : "",
                    shown && (f->flags & L2P_LIVE_F_SHOW) ? shown : "");
}

l2p_status l2p_live_item_check(const l2p_live_field *f, size_t k, long long v, const char *where)
{
    if (!where) where = "";
    char expect[128];
    if (v >= f->lo && v <= f->hi) return L2P_OK;
    l2p_live_field_expect(f, 1, expect, sizeof expect);
    return l2p_fail(L2P_ERR_VALUE, "%s%s%s[%zu]: expected %s, got %lld", where,
                    *where ? "." : "", f->name, k, expect, v);
}

l2p_status l2p_live_field_check(const l2p_live_field *f, const l2p_live_value *v,
                                const char *where)
{
    char shown[96];
    if (!where) where = "";
    if (v->null && (f->flags & L2P_LIVE_F_NULL)) return L2P_OK;
    switch (f->kind) {
    case L2P_LIVE_F_TEXT: {
        const char *t = v->null ? NULL : v->text;
        int ok = 0;
        if (t && (f->flags & L2P_LIVE_F_CHOICE)) ok = is_choice(f->text, t);
        else if (t && (f->flags & L2P_LIVE_F_EXACT)) ok = strcmp(t, f->text) == 0;
        else if (t && f->text) ok = strncmp(t, f->text, strlen(f->text)) == 0;
        else if (t) ok = *t != 0;
        if (ok) return L2P_OK;
        return field_fail(f, where, show_text(t, shown, sizeof shown));
    }
    case L2P_LIVE_F_INT:
        if (!v->null && v->i >= f->lo && v->i <= f->hi) return L2P_OK;
        if (v->null) snprintf(shown, sizeof shown, "None");
        else snprintf(shown, sizeof shown, "%lld", v->i);
        return field_fail(f, where, shown);
    case L2P_LIVE_F_RATIO:
        if (!v->null && isfinite(v->f) && v->f > 0 && v->f <= 1) return L2P_OK;
        if (v->null) snprintf(shown, sizeof shown, "None");
        else show_real(v->f, shown, sizeof shown);
        return field_fail(f, where, shown);
    case L2P_LIVE_F_PROP:
        if (!v->null && l2p_live_prop_of(v->text) >= 0) return L2P_OK;
        return field_fail(f, where, show_text(v->null ? NULL : v->text, shown, sizeof shown));
    case L2P_LIVE_F_LIST:
    case L2P_LIVE_F_INTS:
        if (v->null || v->n < f->min_items || v->n > f->max_items)
            return field_fail(f, where, NULL);
        for (size_t k = 0; f->kind == L2P_LIVE_F_INTS && v->items && k < v->n; k++)
            L2P_TRY(l2p_live_item_check(f, k, v->items[k], where));
        return L2P_OK;
    }
    return l2p_fail(L2P_ERR_VALUE, "%s%s%s: a field of no known kind (%d)", where,
                    *where ? "." : "", f->name ? f->name : "?", (int)f->kind);
}

l2p_status l2p_live_window_check(const l2p_live_value *v, const char *where)
{
    for (size_t i = 0; i < L2P_LIVE_W_NFIELDS; i++)
        L2P_TRY(l2p_live_field_check(&l2p_live_window_fields[i], &v[i], where));
    return L2P_OK;
}
