/* Access policy windows on CUDA objects: streams, graph kernel nodes and launch attributes.
 * The policy (what a valid window is) lives in l2p_policy; this file only moves windows
 * between l2p_window and the runtime's cudaAccessPolicyWindow. */
#ifndef L2P_WINDOW_H
#define L2P_WINDOW_H

#include <cuda_runtime_api.h>

#include "l2p_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A NULL window, or one of num_bytes 0, becomes the disabling window (num_bytes = 0). */
struct cudaAccessPolicyWindow l2p_window_to_cuda(const l2p_window *w);
l2p_window l2p_window_from_cuda(const struct cudaAccessPolicyWindow *w);

/* Fill a launch attribute for cudaLaunchKernelEx; returns how many attributes (0 or 1). */
unsigned l2p_window_launch_attribute(const l2p_window *w, cudaLaunchAttribute *attr);

/* A stream's window; `device` is the stream's: a default stream's handle is read and set with
 * it current (l2p_stream_enter). */
l2p_status l2p_stream_get_window(int device, cudaStream_t stream, l2p_window *out);
l2p_status l2p_stream_set_window(int device, cudaStream_t stream, const l2p_window *w);

l2p_status l2p_graph_node_get_window(cudaGraphNode_t node, l2p_window *out);
l2p_status l2p_graph_node_set_window(cudaGraphNode_t node, const l2p_window *w);

#ifdef __cplusplus
}
#endif
#endif
