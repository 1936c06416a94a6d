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
    o->stage_rounds = 3;
    o->confirm_rounds = 6;
    o->max_confirm_rounds = 40;
    o->min_gain = 0.01;
    o->confidence = 0.95;
    o->seed = 0x6c32706572736973ull;
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
    double base = fmin(median_of(s->s[SEARCH][0], s->n_s[SEARCH][0]),
                       median_of(s->s[SEARCH][1], s->n_s[SEARCH][1]));
    size_t idx[L2P_LIVE_MAX_ARMS], n = 0;
    for (size_t a = 2; a < s->n_arms; a++) {
        s->r.search_median[a] = median_of(s->s[SEARCH][a], s->n_s[SEARCH][a]);
        if (s->alive[a]) idx[n++] = a;
    }
    for (size_t a = 0; a < 2; a++)
        s->r.search_median[a] = median_of(s->s[SEARCH][a], s->n_s[SEARCH][a]);
    (void)base; /* the order by median is the order by speedup over one baseline */
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
    double ratio, lo, hi;
    l2p_status st = l2p_tune_speedup_ci(b, nb, a, na, s->o.confidence, s->o.seed, &ratio, &lo,
                                        &hi);
    if (st != L2P_OK) return st;
    /* ratio = default / limit 0: limit 0 is better only when its interval says so. */
    r->baseline_decided = lo > 1 || hi < 1;
    r->baseline = lo > 1 ? 0 : 1;
    r->base_value[0] = median_of(a, na);
    r->base_value[1] = median_of(b, nb);
    if (r->winner < 0) {
        r->decided = r->baseline_decided || final;
        return L2P_OK;
    }
    const double *w = s->s[CONFIRM][r->winner];
    size_t nw = s->n_s[CONFIRM][r->winner];
    size_t rounds = (na == nb && nb == nw) ? na : 0;
    l2p_tune_verdict_t v;
    st = l2p_tune_verdict(a, na, b, nb, w, nw, rounds, s->o.min_gain, s->o.confidence,
                          s->o.seed, &v);
    if (st != L2P_OK) return st;
    /* The rule's baseline is the faster by median; a tie within noise keeps the default's. */
    r->helps = v.helps;
    r->slows = v.slows;
    r->speedup = v.speedup;
    r->ci_low = v.ci_low;
    r->ci_high = v.ci_high;
    r->winner_value = v.candidate_ms;
    /* Settled: it helps, or it slows, or even the interval's top misses the gain. */
    r->decided = v.helps || v.slows || v.ci_high < 1 + s->o.min_gain || final;
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
            s->due = s->round + s->o.stage_rounds;
            plan_round(s);
        }
        return L2P_OK;
    }
    l2p_status st = verdict(s, s->round >= s->o.max_confirm_rounds);
    if (st != L2P_OK) return st;
    if (s->r.decided) {
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

/* The `tries` heaviest targets (weight > 0, bytes > 0), heaviest first; ties keep the
 * targets' order. */
static size_t heaviest(const l2p_live_target *t, size_t n, size_t tries, int *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n && i < L2P_LIVE_MAX_TARGETS; i++) {
        if (!(t[i].weight > 0) || t[i].bytes == 0) continue;
        size_t j = k++;
        for (; j > 0 && t[out[j - 1]].weight < t[i].weight; j--) out[j] = out[j - 1];
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
    size_t nt = heaviest(t, n, tries, top);
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
