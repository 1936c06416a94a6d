/* Persisting-L2 policy arithmetic: pure C, no CUDA calls, unit-tested on any machine.
 *
 * Everything a user could get wrong about the set-aside and access policy windows is decided
 * here once: the guide's default set-aside, limit validation, window validation and clamping,
 * and how concurrent windows share one set-aside through their hit ratios.
 */
#ifndef L2P_POLICY_H
#define L2P_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaAccessProperty values, repeated so this header needs no CUDA. */
enum { L2P_ACCESS_NORMAL = 0, L2P_ACCESS_STREAMING = 1, L2P_ACCESS_PERSISTING = 2 };

typedef struct {
    uintptr_t base_ptr;
    size_t num_bytes;
    float hit_ratio;
    int hit_prop;
    int miss_prop;
} l2p_window;

/* The guide's rule: min(0.75 * l2_cache_size, persisting_l2_cache_max_size). */
size_t l2p_policy_default_set_aside(size_t l2_cache_size, size_t persisting_max);

/* A set-aside given as a fraction in [0, 1] of persisting_l2_cache_max_size. */
l2p_status l2p_policy_set_aside_fraction(double fraction, size_t persisting_max, size_t *out);

/* A requested persisting limit must lie in [0, persisting_max]. */
l2p_status l2p_policy_check_limit(long long requested, size_t persisting_max);

/* Name of an access property ("NORMAL", ...), or NULL when the value is not one. */
const char *l2p_access_property_name(int prop);

/* Build a validated window over [target_ptr + offset, + num_bytes) of a target of
 * target_bytes. num_bytes < 0 means "to the end of the target". Without clamp, a window
 * past the target or above max_window is an error naming the bound; with clamp it is cut
 * to fit. hit_ratio must be in [0, 1]; miss_prop must not be PERSISTING. */
l2p_status l2p_policy_make_window(uintptr_t target_ptr, size_t target_bytes, long long offset,
                                  long long num_bytes, double hit_ratio, int hit_prop,
                                  int miss_prop, size_t max_window, int clamp, l2p_window *out);

/* Share a set-aside among n concurrent windows. bytes[i] is each target's size (cut to
 * max_window), weights[i] >= 0 its claim. hit_ratio[i] is chosen so that
 * sum(hit_ratio[i] * num_bytes[i]) <= set_aside, by weight, water-filling the share a
 * window cannot use (its hit ratio is capped at 1) over the others. */
l2p_status l2p_policy_plan_windows(size_t n, const size_t *bytes, const double *weights,
                                   size_t set_aside, size_t max_window, size_t *num_bytes,
                                   double *hit_ratio);

#ifdef __cplusplus
}
#endif
#endif
