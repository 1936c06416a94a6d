#include "l2p_policy.h"

#include <math.h>

size_t l2p_policy_default_set_aside(size_t l2_cache_size, size_t persisting_max)
{
    size_t three_quarters = l2_cache_size / 4 * 3 + (l2_cache_size % 4) * 3 / 4;
    return three_quarters < persisting_max ? three_quarters : persisting_max;
}

l2p_status l2p_policy_set_aside_fraction(double fraction, size_t persisting_max, size_t *out)
{
    if (!(fraction >= 0.0 && fraction <= 1.0))
        return l2p_fail(L2P_ERR_VALUE,
                        "fraction: %g is outside [0, 1] (a fraction of "
                        "persisting_l2_cache_max_size = %zu bytes)",
                        fraction, persisting_max);
    *out = (size_t)floor(fraction * (double)persisting_max);
    return L2P_OK;
}

l2p_status l2p_policy_check_limit(long long requested, size_t persisting_max)
{
    if (requested < 0 || (unsigned long long)requested > persisting_max)
        return l2p_fail(L2P_ERR_VALUE,
                        "persisting_l2_limit: %lld bytes is outside [0, %zu] "
                        "(persisting_l2_cache_max_size)",
                        requested, persisting_max);
    return L2P_OK;
}

const char *l2p_access_property_name(int prop)
{
    switch (prop) {
    case L2P_ACCESS_NORMAL: return "NORMAL";
    case L2P_ACCESS_STREAMING: return "STREAMING";
    case L2P_ACCESS_PERSISTING: return "PERSISTING";
    default: return NULL;
    }
}

static l2p_status check_props(int hit_prop, int miss_prop)
{
    if (!l2p_access_property_name(hit_prop))
        return l2p_fail(L2P_ERR_VALUE, "hit_prop: %d is not an AccessProperty "
                        "(NORMAL=0, STREAMING=1, PERSISTING=2)", hit_prop);
    if (!l2p_access_property_name(miss_prop))
        return l2p_fail(L2P_ERR_VALUE, "miss_prop: %d is not an AccessProperty "
                        "(NORMAL=0, STREAMING=1, PERSISTING=2)", miss_prop);
    if (miss_prop == L2P_ACCESS_PERSISTING)
        return l2p_fail(L2P_ERR_VALUE, "miss_prop: PERSISTING is not allowed for misses "
                        "(the driver rejects it); use STREAMING or NORMAL");
    return L2P_OK;
}

/* Fit [offset, offset + want) into the target and under max_window. */
static l2p_status fit_range(size_t target_bytes, long long offset, long long want,
                            size_t max_window, int clamp, size_t *num_bytes)
{
    size_t room, n;
    if (offset < 0 || (unsigned long long)offset > target_bytes)
        return l2p_fail(L2P_ERR_VALUE, "offset: %lld is outside the target's [0, %zu] bytes",
                        offset, target_bytes);
    room = target_bytes - (size_t)offset;
    n = want < 0 ? room : (size_t)want;
    if (n > room) {
        if (!clamp)
            return l2p_fail(L2P_ERR_VALUE, "num_bytes: %zu is past the end of the target "
                            "(allowed 0..%zu from offset %lld; pass clamp=True to cut it)",
                            n, room, offset);
        n = room;
    }
    if (n > max_window) {
        if (!clamp)
            return l2p_fail(L2P_ERR_VALUE, "num_bytes: %zu is above access_policy_max_window_size "
                            "(%zu); pass clamp=True to cut the window to it", n, max_window);
        n = max_window;
    }
    *num_bytes = n;
    return L2P_OK;
}

l2p_status l2p_policy_make_window(uintptr_t target_ptr, size_t target_bytes, long long offset,
                                  long long num_bytes, double hit_ratio, int hit_prop,
                                  int miss_prop, size_t max_window, int clamp, l2p_window *out)
{
    size_t n = 0;
    if (!(hit_ratio >= 0.0 && hit_ratio <= 1.0))
        return l2p_fail(L2P_ERR_VALUE, "hit_ratio: %g is outside [0, 1]", hit_ratio);
    L2P_TRY(check_props(hit_prop, miss_prop));
    L2P_TRY(fit_range(target_bytes, offset, num_bytes, max_window, clamp, &n));
    out->base_ptr = target_ptr + (size_t)offset;
    out->num_bytes = n;
    out->hit_ratio = (float)hit_ratio;
    out->hit_prop = hit_prop;
    out->miss_prop = miss_prop;
    return L2P_OK;
}

static l2p_status check_weights(size_t n, const double *weights)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!(weights[i] >= 0.0) || isinf(weights[i]))
            return l2p_fail(L2P_ERR_VALUE, "weight: entry %zu is %g; weights must be finite "
                            "and >= 0", i, weights[i]);
        total += weights[i];
    }
    if (n > 0 && total <= 0.0)
        return l2p_fail(L2P_ERR_VALUE, "weight: all weights are 0; at least one must be > 0");
    return L2P_OK;
}

/* One water-filling round over the windows not yet saturated. Returns 1 when a window was
 * capped at hit ratio 1 (so the rest must be shared again), 0 when the split is final. */
static int fill_round(size_t n, const size_t *num_bytes, const double *weights,
                      double budget, unsigned char *done, double *hit_ratio)
{
    double total_w = 0.0;
    int capped = 0;
    for (size_t i = 0; i < n; i++)
        if (!done[i]) total_w += weights[i];
    if (total_w <= 0.0) return 0;
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        double share = budget * weights[i] / total_w;
        if (num_bytes[i] == 0 || share >= (double)num_bytes[i]) {
            hit_ratio[i] = num_bytes[i] == 0 ? 0.0 : 1.0;
            done[i] = 1;
            capped = 1;
        } else {
            hit_ratio[i] = share / (double)num_bytes[i];
        }
    }
    return capped;
}

l2p_status l2p_policy_plan_windows(size_t n, const size_t *bytes, const double *weights,
                                   size_t set_aside, size_t max_window, size_t *num_bytes,
                                   double *hit_ratio)
{
    unsigned char done[256] = {0};
    if (n > sizeof done)
        return l2p_fail(L2P_ERR_VALUE, "targets: %zu windows; at most %zu can share a set-aside",
                        n, sizeof done);
    L2P_TRY(check_weights(n, weights));
    for (size_t i = 0; i < n; i++) {
        num_bytes[i] = bytes[i] < max_window ? bytes[i] : max_window;
        hit_ratio[i] = 0.0;
        if (weights[i] == 0.0) done[i] = 1;
    }
    for (;;) {
        double used = 0.0;
        for (size_t i = 0; i < n; i++)
            if (done[i]) used += hit_ratio[i] * (double)num_bytes[i];
        if (!fill_round(n, num_bytes, weights, (double)set_aside - used, done, hit_ratio)) break;
    }
    return L2P_OK;
}
