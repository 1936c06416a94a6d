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

/* NumPy's default ("linear") percentile, q in [0, 1], of n >= 1 sorted values. */
double l2p_percentile_sorted(const double *sorted, size_t n, double q);

/* The k-th smallest (k < n) of v, reordering v so that v[i] <= v[k] for i < k and
 * v[i] >= v[k] for i > k: Hoare's selection, linear on average. The tuner's bootstrap takes
 * thousands of medians; sorting for each would dominate a tune's own CPU time. */
double l2p_select_kth(double *v, size_t n, size_t k);

/* The one median of the core: NumPy's (the mean of the middle two for an even n) of n >= 1
 * values, by selection (reorders v; linear on average). */
double l2p_median(double *v, size_t n);

/* Sort v (n >= 1 values) in place and give its median (l2p_median's). */
double l2p_median_sort(double *v, size_t n);

#ifdef __cplusplus
}
#endif
#endif
