/* The tuner: which persisting-L2 set-aside and which access policy windows make a workload
 * fastest, and whether any of them beats doing nothing.
 *
 * Pure C, no CUDA: the caller passes an evaluation callback that installs a configuration,
 * runs the workload `repeat` times and returns the samples (ms). Everything else is decided
 * here: the search space (the set-aside in driver granules, per target a window or none, its
 * hit ratio and properties, one window per stream), an adaptive search that spends few
 * evaluations (a golden-section search along the guide's ridge hitRatio = set_aside / bytes,
 * a compass search on each hit ratio, the properties, then a polish of neighbours), and the
 * statistics that decide whether the winner is really faster than the baselines a user has
 * without l2persist: (a) limit 0 and no window, (b) the device's default limit, no window.
 * The winner is re-measured interleaved with both baselines and recommended only when the
 * bootstrap confidence interval of its speedup lies above 1 and the speedup reaches
 * min_gain; otherwise the better baseline is recommended ("no persistence").
 */
#ifndef L2P_TUNE_H
#define L2P_TUNE_H

#include <stddef.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

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
} l2p_tune_options;

enum { L2P_TUNE_BASELINE = 0, L2P_TUNE_RIDGE, L2P_TUNE_HIT_RATIO, L2P_TUNE_PROPS,
       L2P_TUNE_POLISH, L2P_TUNE_CONFIRM };

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
} l2p_tune_result;

/* Defaults: hit ratios 0.1 .. 1.0, props tuned, 12 + 4 evaluations per target, 10 samples,
 * 3 confirmation rounds, min_gain 0.01, confidence 0.95. The caller fills in the device and
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

/* median(base) / median(cand) with a percentile-bootstrap interval at `confidence`
 * (deterministic for a seed). NaN or non-positive samples are an error naming the argument. */
l2p_status l2p_tune_speedup_ci(const double *base, size_t n_base, const double *cand,
                               size_t n_cand, double confidence, unsigned long long seed,
                               double *ratio, double *lo, double *hi);

#ifdef __cplusplus
}
#endif
#endif
