/* Statistics of a set of samples: the one percentile and median of the core (timing and the
 * tuner both use these). Pure C. */
#ifndef L2P_STATS_H
#define L2P_STATS_H

#include <stddef.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    size_t n;
    double median, min, max, mean, stdev; /* stdev: sample standard deviation (n - 1) */
    double q1, q3, iqr;                   /* quartiles by linear interpolation, as NumPy */
} l2p_stats;

/* Samples need not be sorted. n == 0 is an error naming `samples`. */
l2p_status l2p_stats_compute(const double *samples, size_t n, l2p_stats *out);

/* The studies' stopping rule: the samples are settled when their spread (IQR) is at most
 * `noise` (a fraction) of their median. */
int l2p_stats_settled(const l2p_stats *s, double noise);

/* NumPy's default ("linear") percentile, q in [0, 1], of n >= 1 sorted values. */
double l2p_percentile_sorted(const double *sorted, size_t n, double q);

/* The k-th smallest (k < n) of v, reordering v so that v[i] <= v[k] for i < k and
 * v[i] >= v[k] for i > k: Hoare's selection, linear on average. The tuner's bootstrap takes
 * thousands of medians; sorting for each would dominate a tune's own CPU time. */
double l2p_select_kth(double *v, size_t n, size_t k);

/* The one median of the core: NumPy's (the mean of the middle two for an even n) of n >= 1
 * values, by selection (reorders v; linear on average). */
double l2p_median(double *v, size_t n);

/* The mean of the middle two values lo <= hi, as every median of the core takes it: it cannot
 * overflow, and two equal subnormals give their value. */
double l2p_midpoint(double lo, double hi);

/* The median of a bootstrap resample of sorted[0..n) (n >= 1, ascending): n indices drawn by
 * `draw` (each below n), counted in counts[0..n), and the middle order statistics read off
 * the counts. The values are sorted, so the indices' order statistics are the values': O(n)
 * per resample where selecting over the drawn values would be O(n) with a far larger
 * constant (the tuner takes thousands of these per decision). */
double l2p_resample_median(const double *sorted, size_t n, unsigned *counts,
                           size_t (*draw)(void *rng, size_t n), void *rng);

/* Sort v (n >= 1 values) in place and give its median (l2p_median's). */
double l2p_median_sort(double *v, size_t n);

#ifdef __cplusplus
}
#endif
#endif
