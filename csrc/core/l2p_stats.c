#include "l2p_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double l2p_percentile_sorted(const double *sorted, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)floor(pos);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - (double)lo);
}

double l2p_select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break; /* v[j+1 .. i-1] all equal the pivot: k is in place */
    }
    return v[k];
}

double l2p_median(double *v, size_t n)
{
    double hi = l2p_select_kth(v, n, n / 2);
    if (n % 2) return hi;
    double lo = v[0]; /* the largest of the lower half, which the selection left below n / 2 */
    for (size_t i = 1; i < n / 2; i++) lo = v[i] > lo ? v[i] : lo;
    return l2p_midpoint(lo, hi);
}

double l2p_midpoint(double lo, double hi)
{
    /* Of one sign, lo + half the gap (lo <= hi): it cannot overflow, and equal values give
     * that value (halving two subnormals first would round both to 0). Of opposite signs the
     * gap may overflow, and halving each first cannot. */
    if ((lo < 0.0) != (hi < 0.0)) return 0.5 * lo + 0.5 * hi;
    return lo + 0.5 * (hi - lo);
}

double l2p_resample_median(const double *sorted, size_t n, unsigned *counts,
                           size_t (*draw)(void *rng, size_t n), void *rng)
{
    memset(counts, 0, n * sizeof *counts);
    for (size_t i = 0; i < n; i++) counts[draw(rng, n)]++;
    /* cum: how many drawn indices lie below j; order statistic r sits at the j where
     * cum <= r < cum + counts[j]. */
    size_t r_hi = n / 2, r_lo = n % 2 ? r_hi : r_hi - 1, cum = 0, j = 0;
    while (cum + counts[j] <= r_lo) cum += counts[j++];
    double lo = sorted[j];
    while (cum + counts[j] <= r_hi) cum += counts[j++];
    return n % 2 ? sorted[j] : l2p_midpoint(lo, sorted[j]);
}

double l2p_median_sort(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return l2p_median(v, n); /* on sorted values the selection moves nothing */
}

l2p_status l2p_stats_compute(const double *samples, size_t n, l2p_stats *out)
{
    double *s, sum = 0.0, sq = 0.0;
    if (n == 0) return l2p_fail(L2P_ERR_VALUE, "samples: at least 1 sample is needed, got 0");
    s = (double *)malloc(n * sizeof *s);
    if (!s) return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory sorting %zu samples", n);
    memcpy(s, samples, n * sizeof *s);
    out->median = l2p_median_sort(s, n);
    for (size_t i = 0; i < n; i++) sum += s[i];
    out->n = n;
    out->mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) sq += (s[i] - out->mean) * (s[i] - out->mean);
    out->stdev = n > 1 ? sqrt(sq / (double)(n - 1)) : 0.0;
    out->min = s[0];
    out->max = s[n - 1];
    out->q1 = l2p_percentile_sorted(s, n, 0.25);
    out->q3 = l2p_percentile_sorted(s, n, 0.75);
    out->iqr = out->q3 - out->q1;
    free(s);
    return L2P_OK;
}

int l2p_stats_settled(const l2p_stats *s, double noise)
{
    return s->n > 0 && s->iqr <= noise * s->median;
}
