/* The live search's objective, per launch key (see l2p_live.h, l2p_live_mix). */
#include <math.h>
#include <string.h>

#include "l2p_live.h"

int l2p_live_waits_on_peers(const char *kernel)
{
    /* NCCL's device kernels, mangled or not: ncclDevKernel_AllReduce_Sum_u64_RING_LL (2.19
     * and later), ncclKernel_AllReduce_RING_LL_Sum_float (before) */
    return kernel && (strstr(kernel, "ncclDevKernel_") || strstr(kernel, "ncclKernel_"));
}

/* Sum over the keys the reference saw: each key's launches in the reference, priced at its GPU
 * time per launch in block b. present: the reference's GPU time in keys that launched in b. */
static double priced(const double *ref_ns, const double *ref_n, size_t n_keys,
                     const double *key_ns, const double *key_n, size_t n_blocks, size_t b,
                     double *present)
{
    double sum = 0, seen = 0;
    for (size_t k = 0; k < n_keys; k++) {
        double launches = key_n[k * n_blocks + b];
        if (!(ref_n[k] > 0) || !(launches > 0)) continue;
        sum += ref_n[k] * key_ns[k * n_blocks + b] / launches;
        seen += ref_ns[k];
    }
    *present = seen;
    return sum;
}

l2p_status l2p_live_mix(const double *ref_ns, const double *ref_n, size_t n_keys,
                        double ref_units, const double *key_ns, const double *key_n,
                        size_t n_blocks, double *out, double *share)
{
    if (!(ref_units > 0) || !isfinite(ref_units))
        return l2p_fail(L2P_ERR_VALUE, "units: expected a finite number > 0, got %g", ref_units);
    double total = 0;
    for (size_t k = 0; k < n_keys; k++) {
        if (!(ref_ns[k] >= 0) || !(ref_n[k] >= 0) || !isfinite(ref_ns[k]) || !isfinite(ref_n[k]))
            return l2p_fail(L2P_ERR_VALUE, "reference: key %zu has %g ns over %g launches", k,
                            ref_ns[k], ref_n[k]);
        if (ref_n[k] > 0) total += ref_ns[k];
    }
    if (!(total > 0))
        return l2p_fail(L2P_ERR_VALUE, "reference: no GPU time in any launch key");
    for (size_t b = 0; b < n_blocks; b++) {
        double present = 0;
        double sum = priced(ref_ns, ref_n, n_keys, key_ns, key_n, n_blocks, b, &present);
        share[b] = present / total;
        /* keys that did not launch in the block are priced at the others' ratio to the
         * reference (their share of it is scaled back in) */
        out[b] = present > 0 ? sum * (total / present) / ref_units / 1e6 : 0.0;
    }
    return L2P_OK;
}
