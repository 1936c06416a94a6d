/* Keeping reads alive. A kernel that only reads folds what it read into one word and stores it
 * to the device's sink word only when the word equals L2P_MAGIC: the compiler must keep every
 * load (the store depends on them), and the store itself almost never happens, so it costs no
 * traffic. One value, one home: every kernel that reads for timing includes this header. */
#ifndef L2P_SINK_CUH
#define L2P_SINK_CUH

#include "l2p_kernels.h" /* L2P_MAGIC: the host reads it too (sink_take, SINK_MAGIC) */

/* Store acc to *sink only when it equals L2P_MAGIC. */
__device__ __forceinline__ void l2p_keep(unsigned acc, unsigned *sink)
{
    if (acc == L2P_MAGIC) sink[0] = acc;
}

#endif
