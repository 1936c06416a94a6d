/* Did a plan arm's windows land on its kernels (see l2p_live.h, l2p_live_landed). */
#include "l2p_live.h"

/* The meant window that seen is (same base, bytes at most the meant ones), or -1. */
static long meant_index(const l2p_window_seen *meant, size_t n_meant, const l2p_window_seen *s)
{
    for (size_t j = 0; j < n_meant; j++)
        if (s->bytes && s->base == meant[j].base && s->bytes <= meant[j].bytes) return (long)j;
    return -1;
}

l2p_status l2p_live_landed(const l2p_window_seen *meant, size_t n_meant,
                           const l2p_window_seen *seen, const uint64_t *counts, size_t n_seen,
                           uint64_t bare, l2p_landed *out)
{
    if ((n_meant && !meant) || (n_seen && (!seen || !counts)) || !out)
        return l2p_fail(L2P_ERR_VALUE, "landed: an array is NULL with a count");
    if (n_meant > L2P_ACTIVITY_WINDOWS)
        return l2p_fail(L2P_ERR_VALUE, "meant: expected at most %d windows, got %zu",
                        L2P_ACTIVITY_WINDOWS, n_meant);
    out->kernels = bare;
    out->meant = out->foreign = 0;
    out->missing = n_meant;
    /* which meant windows some kernel carried: a bit each (an arm has a few) */
    unsigned char carried[L2P_ACTIVITY_WINDOWS] = {0};
    for (size_t i = 0; i < n_seen; i++) {
        out->kernels += counts[i];
        if (!counts[i]) continue;
        long j = meant_index(meant, n_meant, &seen[i]);
        if (j < 0) {
            out->foreign += counts[i];
            continue;
        }
        out->meant += counts[i];
        if (!carried[j]) {
            carried[j] = 1;
            out->missing--;
        }
    }
    return L2P_OK;
}
