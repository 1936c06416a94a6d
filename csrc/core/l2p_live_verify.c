/* verify's exit status from its interval (see l2p_live.h, l2p_live_verify_status). */
#include <math.h>

#include "l2p_live.h"

l2p_status l2p_live_verify_status(int baseline_plan, int decided, int helps, double ci_low,
                                  double ci_high, double min_gain, int *status)
{
    if (!(min_gain >= 0 && min_gain < 1))
        return l2p_fail(L2P_ERR_VALUE, "min_gain: expected [0, 1), got %g", min_gain);
    if (ci_low == 0 && ci_high == 0) {
        /* no interval. A baseline plan's search that decided without one compared no arm:
         * only the two baselines could be tried (no window reaches the program's kernels, as
         * when advise said "don't"), so no arm helps now and the plan holds (cupy_only on the
         * H200 at 1011bb0 was called inconclusive). Otherwise the search ended (the program
         * exited) before its verdict. */
        *status = (baseline_plan && decided) ? L2P_VERIFY_HOLDS : L2P_VERIFY_INCONCLUSIVE;
        return L2P_OK;
    }
    if (!(isfinite(ci_low) && isfinite(ci_high) && ci_low > 0 && ci_low <= ci_high))
        return l2p_fail(L2P_ERR_VALUE, "ci_low, ci_high: expected 0 < ci_low <= ci_high, both "
                        "finite, got %g, %g", ci_low, ci_high);
    double need = 1 + min_gain;
    int no_gain = ci_high < need; /* the whole interval short of the least gain that counts */
    if (baseline_plan)
        /* a "don't" plan (or a plan that is a baseline) was answered by advise's search: it
         * fails when an arm helps now, holds when none could */
        *status = helps ? L2P_VERIFY_FAILS : no_gain ? L2P_VERIFY_HOLDS : L2P_VERIFY_INCONCLUSIVE;
    else
        /* holds only where the whole interval is past the least gain: an interval reaching
         * below it holds "does not help" too, whatever the point estimate says */
        *status = (helps && ci_low >= need) ? L2P_VERIFY_HOLDS
                  : no_gain                 ? L2P_VERIFY_FAILS
                                            : L2P_VERIFY_INCONCLUSIVE;
    return L2P_OK;
}
