/* Streams and graphs: creation, capture, kernel nodes and lazy instantiation. */
#ifndef L2P_STREAM_H
#define L2P_STREAM_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "l2p_error.h"
#include "l2p_life.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A non-blocking stream on `device` (it does not synchronize with the legacy stream 0). */
l2p_status l2p_stream_create(int device, cudaStream_t *out);
l2p_status l2p_stream_destroy(int device, cudaStream_t stream);
/* Wait for a stream's work; `device` is the stream's (see l2p_stream_enter). */
l2p_status l2p_stream_synchronize(int device, cudaStream_t stream);
/* Whether a handle is one of the default streams' (NULL, cudaStreamLegacy,
 * cudaStreamPerThread): those name the current device's stream. */
int l2p_stream_is_default(cudaStream_t stream);
/* Before a call on `stream` of `device`: a default stream's handle needs its device current
 * (a process that drives several GPUs from one thread would otherwise reach whichever GPU it
 * had current), so for those `device` is entered and *prev is the device to put back with
 * l2p_stream_leave; for any other stream nothing changes (*prev = -1). */
l2p_status l2p_stream_enter(int device, cudaStream_t stream, int *prev);
void l2p_stream_leave(int prev);
/* The device a stream belongs to (cudaStreamGetDevice). */
l2p_status l2p_stream_device(cudaStream_t stream, int *device);

/* Make `consumer` wait on the device for the work queued so far on `producer` (an event
 * recorded on one, waited on by the other; no host synchronisation). */
l2p_status l2p_stream_order(int device, cudaStream_t producer, cudaStream_t consumer);

/* Whether the stream is capturing (the legacy stream: whether any capture forbids it). */
l2p_status l2p_stream_is_capturing(cudaStream_t stream, int *capturing);

/* Capture: thread-local mode, so other threads' CUDA calls are not disturbed. */
l2p_status l2p_capture_begin(cudaStream_t stream);
/* Capture in relaxed mode: for capturing someone else's code to discover its buffers, where a
 * cudaMalloc or a free of theirs must not break the capture (the graph is scanned, and
 * replayed only by the tuner while those buffers live). */
l2p_status l2p_capture_begin_relaxed(cudaStream_t stream);
/* Ends capture; *graph is NULL when capture was invalidated (and the status says why). */
l2p_status l2p_capture_end(cudaStream_t stream, cudaGraph_t *graph);

typedef struct {
    cudaGraph_t graph;
    cudaGraphExec_t exec; /* NULL until the first launch, and after a node changed */
    l2p_life life;          /* its device and the context it was captured in */
    int borrowed;           /* 1: another library owns `graph` (as_graph); only exec is ours */
} l2p_graph;

/* Take ownership of a captured graph on g->life.device, noting the context it belongs to. */
void l2p_graph_adopt(l2p_graph *g, cudaGraph_t graph);

/* The kernel nodes of a graph and of its child graphs (depth first, in the order the driver
 * lists them); call with nodes NULL to get the count. */
l2p_status l2p_graph_list_kernels(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count);
/* The same for an l2p_graph. */
l2p_status l2p_graph_kernel_nodes(const l2p_graph *g, cudaGraphNode_t *nodes, size_t *count);
/* Instantiate when needed, then launch on `stream`. */
l2p_status l2p_graph_launch(l2p_graph *g, cudaStream_t stream);
/* Drop the instantiated graph, so the next launch sees node changes; by l2p_handle's rule,
 * as l2p_graph_destroy (not destroyed after a reset of the device). */
void l2p_graph_invalidate(l2p_graph *g);
/* Release the executable and (unless borrowed) the graph by l2p_handle's rule (l2p_life.h):
 * neither after a reset of the device. */
void l2p_graph_destroy(l2p_graph *g);

#ifdef __cplusplus
}
#endif
#endif
