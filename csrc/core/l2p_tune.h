/* The tuner: which persisting-L2 set-aside and which access policy windows make a workload
 * fastest, and whether any of them beats doing nothing.
 *
 * Pure C, no CUDA: the caller passes an evaluation callback that installs a configuration,
 * runs the workload `repeat` times and returns the samples (ms). Everything else is decided
 * here: the search space (the set-aside in driver granules, per target a window or none, its
 * hit ratio and properties, one window per stream), an adaptive search that spends few
 * evaluations (a Fibonacci search along the guide's ridge hitRatio = set_aside / bytes, a
 * compass search on each hit ratio, the properties, a polish of neighbours, then a recheck
 * that re-measures the few fastest candidates interleaved, so that a drift of the device's
 * speed during the search cannot pick the winner, and prefers the smallest set-aside among
 * those within noise of the fastest: a set-aside taxes all other work), and the
 * statistics that decide whether the winner is really faster than the baselines a user has
 * without l2persist: (a) limit 0 and no window, (b) the device's default limit, no window.
 * The winner is re-measured interleaved with both baselines (in ABBA order, more rounds
 * while the verdict is undecided) and recommended only when the confidence interval of its
 * speedup lies above 1 and the speedup reaches min_gain (l2p_tune_verdict, the rule's one
 * home); otherwise the better baseline is recommended ("no persistence"). The interval is the
 * wider of a bootstrap of the samples and a t interval over the rounds' speedups, so that a
 * device drifting between rounds cannot make a flat landscape look like a gain.
 *
 * Known limit: an optimum at one point off the ridge with no gradient around it is found only
 * if the search measures that point (tests/test_tune_replay.py pins this).
 */
#ifndef L2P_TUNE_H
#define L2P_TUNE_H

#include <stddef.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default screen_keep (tune()'s parameter shows it through the bridge's row). */
#define L2P_TUNE_SCREEN_KEEP 4
/* The default recheck_rounds: a recommended pick re-measured against both baselines in this
 * many fresh interleaved rounds (more while undecided, as in the confirmation). */
#define L2P_TUNE_RECHECK_ROUNDS 3

#define L2P_TUNE_MAX_TARGETS 16
#define L2P_TUNE_MAX_LEVELS 64

typedef struct {
    int on;           /* 0: no window over this target */
    double hit_ratio; /* (0, 1] when on */
    int hit_prop;     /* L2P_ACCESS_PERSISTING or L2P_ACCESS_NORMAL */
    int miss_prop;    /* L2P_ACCESS_STREAMING or L2P_ACCESS_NORMAL */
} l2p_tune_window;

typedef struct {
    size_t set_aside; /* the persisting limit to ask the driver for, bytes */
    size_t n_targets;
    l2p_tune_window win[L2P_TUNE_MAX_TARGETS];
} l2p_tune_config;

/* Install cfg, run the workload `repeat` times and write that many samples (ms). A failure
 * (or a Python exception behind it) is returned as a status and ends the search. */
typedef l2p_status (*l2p_tune_eval_fn)(void *ctx, const l2p_tune_config *cfg, size_t repeat,
                                       double *samples);

typedef struct {
    /* The device. */
    size_t granule;        /* the driver's set-aside step (> 0) */
    size_t persisting_max; /* persisting_l2_cache_max_size */
    size_t default_limit;  /* the limit the device had before l2persist touched it */
    int set_aside_fixed;   /* the set-aside is default_limit and cannot change (an MPS
                            * client): only windows are searched, and both baselines are
                            * "no window" at that set-aside */
    /* The targets: window bytes (already fit to the max window) and their stream groups:
     * targets of one group share a stream, which holds one window at a time. */
    size_t n_targets;
    size_t target_bytes[L2P_TUNE_MAX_TARGETS];
    int group[L2P_TUNE_MAX_TARGETS];
    /* The search. */
    size_t n_hit_ratios;                      /* ascending levels in (0, 1] */
    double hit_ratios[L2P_TUNE_MAX_LEVELS];
    int tune_props;        /* also try hitProp NORMAL and missProp NORMAL */
    size_t max_evals;      /* distinct configurations measured, the baselines included */
    size_t repeat;         /* samples per evaluation */
    size_t confirm_rounds; /* interleaved re-measurements of the pick and the baselines */
    double min_gain;       /* the least speedup worth recommending (0.01: 1 %) */
    double confidence;     /* of the speedup's interval (0.95) */
    unsigned long long seed; /* of the bootstrap */
    size_t screen_keep;    /* (L2P_TUNE_SCREEN_KEEP) with more targets than this (> 0), or
                            * alternatives on one stream: one probe per target at a
                            * high-hit configuration first, then the search on the
                            * screen_keep fastest whose probe beat the better baseline (the
                            * fastest always); the others get no window. 0: no screening */
    size_t recheck_rounds; /* (L2P_TUNE_RECHECK_ROUNDS) a recommended pick is measured again
                            * against both baselines in this many fresh interleaved rounds,
                            * extended like the confirmation while the rule is undecided, and
                            * dropped for the better baseline only when the rule, decided, says
                            * it does not help (a pick that looked good in the rounds that
                            * chose it can fade). 0: not */
    unsigned phases;       /* L2P_TUNE_ALL (the default). For tests only: clearing a bit removes
                            * that part of the search or of the decision, so that a test can
                            * show that each part matters (tests/c/test_tune_replay.c). */
} l2p_tune_options;

/* The parts of the search and of the decision (bits of l2p_tune_options.phases). The ridge and
 * the confirmation always run. Without INTERVAL the bootstrap interval is ignored, without
 * MIN_GAIN the least gain is; without both, "helps" means "measured faster". */
enum {
    L2P_TUNE_PH_HIT_RATIO = 1u << 0, /* compass search of each hit ratio from the ridge */
    L2P_TUNE_PH_PROPS = 1u << 1,     /* hitProp / missProp NORMAL (also needs tune_props) */
    L2P_TUNE_PH_POLISH = 1u << 2,    /* neighbours of the best on every axis */
    L2P_TUNE_PH_RECHECK = 1u << 3,   /* the top candidates re-measured interleaved */
    L2P_TUNE_PH_INTERVAL = 1u << 4,  /* helps only when the interval lies above 1 */
    L2P_TUNE_PH_MIN_GAIN = 1u << 5,  /* helps only when the speedup reaches min_gain */
    L2P_TUNE_ALL = (1u << 6) - 1
};

enum { L2P_TUNE_BASELINE = 0, L2P_TUNE_RIDGE, L2P_TUNE_HIT_RATIO, L2P_TUNE_PROPS,
       L2P_TUNE_POLISH, L2P_TUNE_CONFIRM, L2P_TUNE_RECHECK, L2P_TUNE_SCREEN };

typedef struct {
    l2p_tune_config config;
    double median, q1, q3;
    size_t n;
    int phase; /* L2P_TUNE_BASELINE .. L2P_TUNE_POLISH: which step asked for it */
} l2p_tune_trial;

typedef struct {
    l2p_tune_trial *trials; /* every configuration measured, in order (owned) */
    size_t n_trials;
    size_t evals;           /* == n_trials: what the budget counts */
    size_t n_levels;
    size_t levels[L2P_TUNE_MAX_LEVELS]; /* the set-aside levels searched, bytes */
    l2p_tune_config found;       /* the fastest configuration the search found */
    l2p_tune_config recommended; /* found, or the better baseline */
    int persistence_helps;       /* found beats the better baseline beyond noise */
    int baseline;                /* the better baseline: 0 (a) limit 0, 1 (b) default */
    double base_ms[2];           /* confirmed medians of (a) and (b) */
    double aside_ms;             /* (c): found's set-aside with every window off */
    double found_ms;             /* confirmed median of found (d) */
    double speedup, ci_low, ci_high; /* better baseline / found, with its interval */
    size_t rechecked;            /* candidates re-measured by the recheck */
    size_t confirm_rounds;       /* rounds the confirmation took (more when undecided) */
    size_t screened;             /* targets probed by the screening (0: none) */
    double screen_ms[L2P_TUNE_MAX_TARGETS]; /* each target's probe median */
    int kept[L2P_TUNE_MAX_TARGETS];         /* searched after the screening (all without) */
    int smaller_preferred;       /* the recheck took a smaller set-aside within noise of the
                                  * fastest candidate */
    int held;                    /* the pick in the fresh rounds of recheck_rounds: -1 not
                                  * run, 1 still helps, 0 dropped (recommended: the baseline) */
    size_t held_rounds;          /* rounds those took (more than recheck_rounds: undecided) */
    double held_speedup, held_ci_low, held_ci_high; /* the pick's speedup there */
} l2p_tune_result;

/* Defaults: hit ratios 0.1 .. 1.0, props tuned, 14 + 4 evaluations per searched target (plus
 * one per screened target), no screening, 10 samples,
 * 3 confirmation rounds, 3 recheck rounds, min_gain 0.01, confidence 0.95. The caller fills in the device and
 * the targets. */
void l2p_tune_options_default(l2p_tune_options *o);

/* The set-aside levels: 0, each granule multiple up to the max (the last one is the max), and
 * the default limit; ascending, without repeats. Returns how many were written. */
size_t l2p_tune_set_aside_levels(size_t granule, size_t persisting_max, size_t default_limit,
                                 size_t *levels, size_t cap);

l2p_status l2p_tune_check_options(const l2p_tune_options *o);

/* Run the search and the confirmation. On failure the result is freed and the status of the
 * failing evaluation returned. */
l2p_status l2p_tune_run(const l2p_tune_options *o, l2p_tune_eval_fn eval, void *ctx,
                        l2p_tune_result *out);
void l2p_tune_result_free(l2p_tune_result *r);

/* The better-baseline rule, the one place it is written: the baseline is the faster (by
 * median) of (a) limit 0 and (b) the default limit, both without a window; the candidate helps
 * when median(baseline) / median(candidate) reaches 1 + min_gain and the bootstrap interval
 * of that speedup at `confidence` lies above 1. Its mirror: the candidate slows the work when
 * the interval lies below 1 and the speedup is at most 1 / (1 + min_gain). */
typedef struct {
    int baseline;                    /* 0: (a) limit 0, 1: (b) the default limit */
    double baseline_ms, candidate_ms; /* medians */
    double speedup, ci_low, ci_high;
    int helps, slows;
    int baseline_decided;            /* the interval of default / limit 0 excludes 1 */
    int keep;                        /* the baseline to keep when the candidate does not help:
                                      * limit 0 only where it is decided faster, else the
                                      * default (it changes nothing) */
} l2p_tune_verdict_t;

/* rounds: 0 or 1 when the samples are independent; n when all three sequences were measured
 * in n interleaved rounds of equal size (each sequence's length a multiple of n): the
 * interval is then also at least the t interval of the per-round speedups, so that a drift
 * between rounds widens it. */
l2p_status l2p_tune_verdict(const double *limit0, size_t n_limit0, const double *deflt,
                            size_t n_default, const double *cand, size_t n_cand, size_t rounds,
                            double min_gain, double confidence, unsigned long long seed,
                            l2p_tune_verdict_t *out);

/* Scoped or process-wide: setting the persisting limit costs switch_ms and synchronises the
 * device, so a limit set around a phase and released after it costs 2 * switch_ms per phase.
 * Scoping pays when that is at most L2P_TUNE_SCOPE_SHARE of what the phase saves; a phase of
 * `min_calls` calls of the tuned function (each saving base_ms - found_ms) is the shortest
 * that pays. Shorter phases (one kernel inside a pipeline) keep the limit for the process. */
#define L2P_TUNE_SCOPE_SHARE 0.25
typedef struct {
    double saving_ms;   /* per call: base_ms - found_ms (<= 0: nothing to scope) */
    double overhead_ms; /* per phase: 2 * switch_ms */
    size_t min_calls;   /* the shortest phase, in calls, where scoping pays; 0: no saving */
} l2p_tune_scope_t;

l2p_status l2p_tune_scope(double switch_ms, double base_ms, double found_ms,
                          l2p_tune_scope_t *out);

/* median(base) / median(cand) with a percentile-bootstrap interval at `confidence`
 * (deterministic for a seed). NaN or non-positive samples are an error naming the argument. */
l2p_status l2p_tune_speedup_ci(const double *base, size_t n_base, const double *cand,
                               size_t n_cand, double confidence, unsigned long long seed,
                               double *ratio, double *lo, double *hi);

#ifdef __cplusplus
}
#endif
#endif
