/* The advisor: one persisting set-aside for a whole process and each workload's windows,
 * chosen on the weighted total time of the process's own workloads.
 *
 * Why a joint search: the set-aside belongs to the CUDA context, so a process has one, and
 * every kernel pays it, windowed or not (with no window anywhere, the H200's maximum made a
 * PyTorch training step 1.18x, its inference forward 1.31x and a torch_geometric step 1.24x
 * slower; 7 granules 1.03-1.05x). A set-aside that helps one graph may cost the others more
 * than it saves: the objective is sum_i coef_i * t_i over the workloads, each timed at the
 * candidate set-aside with its own best windows (the tax is then measured on the user's own
 * work, not on a probe).
 *
 * The search, pure C over an evaluation callback (l2p_tune's conventions):
 *   1. each workload at limit 0 and at the default limit, no window (the baselines);
 *   2. per set-aside level (a coarse pass over the levels, then the neighbours of the best):
 *      each workload with no window (its tax), with a window on each of its largest targets
 *      alone at the guide's ridge (hitRatio = set-aside / bytes), and with the best window of
 *      each of its alternatives groups together; its best of those is its time at the level.
 *      A window counts only if it saves at least min_gain / 2 of the workload's time without
 *      one: a noise-level window still takes set-aside from the others (the H200 advisor
 *      study's first plan gave a decode graph three windows at 1.001x);
 *   3. the level with the least weighted total, or the smallest within min_gain / 2 of it
 *      (a set-aside taxes work the advisor does not see), its windows' hit ratios polished.
 *      Before the pick (remeasure_levels, remeasure_rounds): the pass's pick and the next
 *      best levels by the pass's totals, remeasure_levels in all, each with its windows, are
 *      measured again in remeasure_rounds fresh rounds (levels in ABBA order, every workload
 *      at each), and the pick is made on their pooled medians. One pass gives each level one
 *      median of search_repeat samples, the least of several tries (biased low, and a noisy
 *      or drifting phase moves whole medians): on the H100 the advisor study's balanced mix
 *      got "don't" at 1.003x where a grid found 1.058x at a level the pass had measured;
 *   4. windows two workloads want on one carrier (a shared stream or node): the one with the
 *      larger weighted saving keeps it;
 *   5. the confirmation, in fresh interleaved rounds after the search: per workload (a) limit
 *      0, (b) the default, (c) the chosen set-aside without windows and (d) the whole plan,
 *      arms in ABBA order. With a mix callback, each arm runs the workloads interleaved call
 *      by call under one installation (the search times each alone, in blocks, on clean
 *      lines: a plan whose windows evict each other's lines, or whose total persisting
 *      footprint exceeds the set-aside, is judged here as the process would run it). Each workload's verdict and the weighted total's follow
 *      l2p_tune_verdict (the rule's one home; the totals' samples are the weighted sums of the
 *      workloads' samples of the same index). More rounds while the total is undecided;
 *   6. (recheck_rounds) a recommended plan measured again in fresh rounds, by the same rule
 *      and, as the confirmation, with rounds added (up to 4x) while undecided.
 * Evaluations grow linearly with the workloads: 2 + (levels searched) * (2 + targets tried)
 * per workload, remeasure_levels * remeasure_rounds per workload (when two or more levels
 * were searched), then 4 per workload per round.
 *
 * The advice is "don't" (the better process-wide baseline, no windows) unless the weighted
 * total helps by the rule and no workload marked must_not_slow slows by the rule's mirror.
 */
#ifndef L2P_ADVISE_H
#define L2P_ADVISE_H

#include <stddef.h>

#include "l2p_error.h"
#include "l2p_tune.h"

#ifdef __cplusplus
extern "C" {
#endif

#define L2P_ADVISE_MAX_WORK 64
#define L2P_ADVISE_MAX_TARGETS 512 /* all workloads' targets together */

typedef struct {
    size_t set_aside;
    size_t n;              /* all workloads' targets */
    l2p_tune_window *win;  /* n windows (owned by whoever made the config) */
} l2p_advise_config;

/* Install cfg (every workload's targets: those of other workloads are off while one is
 * timed, except in the confirmation's plan arm), run workload `work` `repeat` times, write the
 * samples (ms). */
typedef l2p_status (*l2p_advise_eval_fn)(void *ctx, size_t work, const l2p_advise_config *cfg,
                                         size_t repeat, double *samples);

/* Install cfg once and run the workloads interleaved, as the process runs them: `repeat`
 * rounds of one call of each workload in turn, no reset of persisting lines between calls
 * (one workload's persisting lines meet the others' accesses, and each workload's windows
 * compete with the others' for the one set-aside). samples[w * repeat + j]: workload w's
 * call in round j (ms). Used by the confirmation and the recheck when given. */
typedef l2p_status (*l2p_advise_mix_fn)(void *ctx, const l2p_advise_config *cfg, size_t repeat,
                                        double *samples);

typedef struct {
    size_t granule, persisting_max, default_limit;
    int set_aside_fixed;      /* an MPS client: only windows are searched, at default_limit */
    size_t n_work;
    double coef[L2P_ADVISE_MAX_WORK];    /* objective = sum coef[i] * ms of workload i (> 0) */
    int must_not_slow[L2P_ADVISE_MAX_WORK];
    size_t n_targets;                    /* all targets */
    int owner[L2P_ADVISE_MAX_TARGETS];   /* the workload of each target */
    size_t bytes[L2P_ADVISE_MAX_TARGETS];
    int group[L2P_ADVISE_MAX_TARGETS];   /* targets of one group share a carrier slot */
    size_t tries;          /* targets tried alone per workload and level, largest first (3) */
    size_t search_repeat;  /* samples per evaluation in the search (8) */
    size_t repeat;         /* samples per arm and round in the confirmation (10) */
    size_t confirm_rounds; /* (3); up to 4x while the total is undecided */
    size_t recheck_rounds; /* (3) a recommended plan is re-measured in this many fresh rounds
                            * after the confirmation (up to 4x while undecided) and dropped
                            * if it no longer helps */
    size_t remeasure_levels; /* (3) levels whose plans are re-measured before the level is
                              * picked: the pass's pick and the next best by the pass's
                              * totals; 0 or 1: the pass's medians decide */
    size_t remeasure_rounds; /* (4) fresh rounds of that re-measure (0: none) */
    double min_gain, confidence;
    unsigned long long seed;
} l2p_advise_options;

typedef struct {
    int baseline;          /* 0: limit 0, 1: the default is its better baseline */
    double base_ms[2];     /* confirmed medians of (a) and (b) */
    double aside_ms;       /* (c) the chosen set-aside, no window */
    double plan_ms;        /* (d) under the plan */
    double speedup, ci_low, ci_high; /* better baseline / plan */
    double tax;            /* aside_ms / better baseline (> 1: the set-aside costs it) */
    int helps, slows;
    size_t n_windows;      /* windows the plan gives it */
} l2p_advise_work;

typedef struct {
    size_t n_levels;
    size_t levels[L2P_TUNE_MAX_LEVELS];
    double level_total[L2P_TUNE_MAX_LEVELS]; /* the search's weighted total (NaN: not searched) */
    double remeasured_total[L2P_TUNE_MAX_LEVELS]; /* the re-measure's weighted total of
                                  * pooled medians (NaN: not re-measured) */
    size_t n_remeasured;         /* levels re-measured (0: the re-measure did not run) */
    size_t pass_set_aside;       /* the level the single pass's medians would have picked */
    size_t found_set_aside;      /* the search's pick */
    l2p_tune_window *found;      /* its windows (n_targets, owned) */
    int helps;                   /* the advice: install found; else the better baseline */
    int blocked_by;              /* -1, or a must_not_slow workload that the plan slows */
    int baseline;                /* the better process-wide baseline: 0 limit 0, 1 default */
    int keep;                    /* the baseline a "don't" installs: limit 0 only where the
                                  * confirmation tells it faster, else the default */
    size_t recommended_set_aside;
    double total_base_ms, total_plan_ms, speedup, ci_low, ci_high; /* weighted totals */
    l2p_advise_work work[L2P_ADVISE_MAX_WORK];
    size_t evals, confirm_rounds;
    int rechecked, recheck_held;  /* the recheck ran; the plan still helped in it */
    size_t rechecked_rounds;      /* its rounds (more than recheck_rounds: undecided at first) */
    double recheck_speedup, recheck_ci_low, recheck_ci_high;
} l2p_advise_result;

void l2p_advise_options_default(l2p_advise_options *o);
l2p_status l2p_advise_check_options(const l2p_advise_options *o);
/* mix may be NULL: the confirmation then times each workload in blocks, like the search. */
l2p_status l2p_advise_run(const l2p_advise_options *o, l2p_advise_eval_fn eval,
                          l2p_advise_mix_fn mix, void *ctx, l2p_advise_result *out);
void l2p_advise_result_free(l2p_advise_result *r);

#ifdef __cplusplus
}
#endif
#endif
