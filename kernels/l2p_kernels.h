/* C-callable kernel launchers. Each returns the launch's cudaError_t and takes an optional
 * per-launch access policy window (NULL: none; the stream's own attribute then applies). */
#ifndef L2P_KERNELS_H
#define L2P_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "l2p_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An empty kernel of one block of one thread: what a launch costs. */
cudaError_t l2p_launch_noop(cudaStream_t stream, const l2p_window *window);

/* data[i] = data[i] * scale + shift over n floats (the guide example's kernels A, B, C). */
cudaError_t l2p_launch_scale_shift(float *data, size_t n, float scale, float shift,
                                   cudaStream_t stream, const l2p_window *window);

#ifdef __cplusplus
}
#endif
#endif
