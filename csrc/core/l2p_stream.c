#include "l2p_stream.h"

#include <stdlib.h>

#include "l2p_device.h"
#include "l2p_release.h"

l2p_status l2p_stream_create(int device, cudaStream_t *out)
{
    int prev;
    cudaError_t rc;
    L2P_TRY(l2p_device_enter(device, &prev));
    rc = cudaStreamCreateWithFlags(out, cudaStreamNonBlocking);
    l2p_device_leave(prev);
    return rc == cudaSuccess ? L2P_OK : l2p_fail_cuda(rc, "cudaStreamCreateWithFlags");
}

l2p_status l2p_stream_destroy(int device, cudaStream_t stream)
{
    return l2p_release(device, L2P_RELEASE_STREAM, (void *)stream);
}

int l2p_stream_is_default(cudaStream_t stream)
{
    return stream == NULL || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

l2p_status l2p_stream_enter(int device, cudaStream_t stream, int *prev)
{
    *prev = -1;
    return l2p_stream_is_default(stream) ? l2p_device_enter(device, prev) : L2P_OK;
}

void l2p_stream_leave(int prev)
{
    if (prev >= 0) l2p_device_leave(prev);
}

l2p_status l2p_stream_synchronize(int device, cudaStream_t stream)
{
    int prev;
    L2P_TRY(l2p_stream_enter(device, stream, &prev));
    cudaError_t rc = cudaStreamSynchronize(stream);
    l2p_stream_leave(prev);
    return rc == cudaSuccess ? L2P_OK : l2p_fail_cuda(rc, "cudaStreamSynchronize(stream)");
}

l2p_status l2p_stream_device(cudaStream_t stream, int *device)
{
    /* A query, but global capture mode refuses it on a capturing stream
     * (cudaErrorStreamCaptureUnsupported: l2persist.launch inside a capture failed on the
     * H200); relaxed for this thread, it neither fails nor touches the capture. */
    int mode = l2p_capture_relax();
    cudaError_t rc = cudaStreamGetDevice(stream, device);
    l2p_capture_restore(mode);
    if (rc != cudaSuccess) return l2p_fail_cuda(rc, "cudaStreamGetDevice(stream, device)");
    return L2P_OK;
}

l2p_status l2p_stream_order(int device, cudaStream_t producer, cudaStream_t consumer)
{
    cudaEvent_t ev;
    int prev;
    cudaError_t rc;
    if (producer == consumer) return L2P_OK;
    L2P_TRY(l2p_device_enter(device, &prev));
    rc = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (rc == cudaSuccess) {
        rc = cudaEventRecord(ev, producer);
        if (rc == cudaSuccess) rc = cudaStreamWaitEvent(consumer, ev, 0);
        /* released once the wait has been satisfied */
        if (l2p_release(device, L2P_RELEASE_EVENT, (void *)ev) != L2P_OK) l2p_clear_error();
    }
    l2p_device_leave(prev);
    return rc == cudaSuccess ? L2P_OK : l2p_fail_cuda(rc, "cudaStreamWaitEvent");
}

l2p_status l2p_stream_is_capturing(cudaStream_t stream, int *capturing)
{
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    L2P_CUDA_TRY(cudaStreamIsCapturing(stream, &status));
    *capturing = status != cudaStreamCaptureStatusNone;
    return L2P_OK;
}

l2p_status l2p_capture_begin(cudaStream_t stream)
{
    L2P_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    return L2P_OK;
}

l2p_status l2p_capture_begin_relaxed(cudaStream_t stream)
{
    L2P_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    return L2P_OK;
}

l2p_status l2p_capture_end(cudaStream_t stream, cudaGraph_t *graph)
{
    *graph = NULL;
    cudaError_t rc = cudaStreamEndCapture(stream, graph);
    if (rc != cudaSuccess) {
        if (*graph) {
            int device = 0;
            if (cudaGetDevice(&device) != cudaSuccess ||
                l2p_release(device, L2P_RELEASE_GRAPH, (void *)*graph) != L2P_OK)
                l2p_clear_error();
        }
        *graph = NULL;
        (void)cudaGetLastError();
        return l2p_fail_cuda(rc, "cudaStreamEndCapture");
    }
    return L2P_OK;
}

/* Depth-first over the graph and the graphs of its child-graph nodes (a replay of another
 * graph captured into this one, a library's sub-graph): their kernels are this graph's work. */
static cudaError_t list_kernels(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t cap,
                                size_t *kept, int depth)
{
    size_t n = 0;
    cudaError_t rc = cudaGraphGetNodes(graph, NULL, &n);
    if (rc != cudaSuccess || n == 0) return rc; /* an empty capture (work on another stream):
                                                  * a node array with a count of 0 is
                                                  * cudaErrorInvalidValue */
    cudaGraphNode_t *all = (cudaGraphNode_t *)calloc(n ? n : 1, sizeof *all);
    if (!all) return cudaErrorMemoryAllocation;
    rc = cudaGraphGetNodes(graph, all, &n);
    for (size_t i = 0; rc == cudaSuccess && i < n; i++) {
        enum cudaGraphNodeType t;
        cudaGraph_t child;
        rc = cudaGraphNodeGetType(all[i], &t);
        if (rc == cudaSuccess && t == cudaGraphNodeTypeKernel) {
            if (nodes && *kept < cap) nodes[*kept] = all[i];
            (*kept)++;
        } else if (rc == cudaSuccess && t == cudaGraphNodeTypeGraph && depth < 16) {
            rc = cudaGraphChildGraphNodeGetGraph(all[i], &child);
            if (rc == cudaSuccess) rc = list_kernels(child, nodes, cap, kept, depth + 1);
        }
    }
    free(all);
    return rc;
}

l2p_status l2p_graph_list_kernels(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count)
{
    size_t kept = 0;
    cudaError_t rc = list_kernels(graph, nodes, nodes ? *count : 0, &kept, 0);
    if (rc == cudaErrorMemoryAllocation)
        return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory listing graph nodes");
    if (rc != cudaSuccess) return l2p_fail_cuda(rc, "cudaGraphGetNodes");
    *count = kept;
    return L2P_OK;
}

l2p_status l2p_graph_kernel_nodes(const l2p_graph *g, cudaGraphNode_t *nodes, size_t *count)
{
    return l2p_graph_list_kernels(g->graph, nodes, count);
}

void l2p_graph_adopt(l2p_graph *g, cudaGraph_t graph)
{
    g->graph = graph;
    g->life.ctx = 0;
    /* Without a context id the graph is never reported stale (as before ids existed). */
    if (graph && l2p_life_begin(&g->life, g->life.device) != L2P_OK) l2p_clear_error();
}

l2p_status l2p_graph_launch(l2p_graph *g, cudaStream_t stream)
{
    int prev;
    cudaError_t rc = cudaSuccess;
    l2p_release_drain(); /* a safe point for releases deferred during a capture */
    L2P_TRY(l2p_device_enter(g->life.device, &prev));
    /* Its kernels and memory belonged to a context a reset destroyed: launching would crash
     * or poison the new one. */
    l2p_status stale = l2p_life_check(&g->life, g->life.ctx ? l2p_context_id_current() : 0,
                                      "launch", "graph was captured", "capture it again");
    if (stale != L2P_OK) {
        l2p_device_leave(prev);
        return stale;
    }
    if (!g->exec) rc = cudaGraphInstantiate(&g->exec, g->graph, 0);
    if (rc == cudaSuccess) rc = cudaGraphLaunch(g->exec, stream);
    l2p_device_leave(prev);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        return l2p_fail_cuda(rc, g->exec ? "cudaGraphLaunch" : "cudaGraphInstantiate");
    }
    return L2P_OK;
}

/* The graph's objects as handles over its life (l2p_life.h): the executable is always ours,
 * the graph unless borrowed. Made when released: l2p_graph keeps its plain fields, which the
 * timing loop and the extension read. */
static l2p_handle graph_handle(const l2p_graph *g, l2p_release_kind kind, void *obj,
                               unsigned flags)
{
    l2p_handle h;
    l2p_handle_init(&h, g->life, kind, obj, flags);
    return h;
}

static void close_exec(l2p_graph *g, int gone)
{
    l2p_handle exec = graph_handle(g, L2P_RELEASE_GRAPH_EXEC, (void *)g->exec, 0);
    if (l2p_handle_close(&exec, gone) != L2P_OK) l2p_clear_error();
    g->exec = NULL;
}

/* Whether the device was reset since the graph was captured (l2p_life_gone), asked only when
 * there is something to release, with the thread's capture mode relaxed: the context query
 * must not break a capture running on this thread (l2p_release.h). */
static int graph_gone(const l2p_graph *g)
{
    if (!g->graph && !g->exec) return 0;
    int mode = l2p_capture_relax();
    int gone = l2p_life_gone(&g->life);
    l2p_capture_restore(mode);
    return gone;
}

/* A node changed: the executable goes by the same rule as at destroy (forgotten, not
 * destroyed, after a reset: its handle may be someone else's by now). */
void l2p_graph_invalidate(l2p_graph *g)
{
    if (g->exec) close_exec(g, graph_gone(g));
}

void l2p_graph_destroy(l2p_graph *g)
{
    int gone = graph_gone(g);
    /* gone with a reset context: the handles are not ours to destroy (the handle's rule) */
    close_exec(g, gone);
    l2p_handle graph = graph_handle(g, L2P_RELEASE_GRAPH, (void *)g->graph,
                                    g->borrowed ? L2P_HANDLE_BORROWED : 0); /* its owner's */
    if (l2p_handle_close(&graph, gone) != L2P_OK) l2p_clear_error();
    g->graph = NULL;
}
