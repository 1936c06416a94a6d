#include "l2p_window.h"

#include <string.h>

#include "l2p_stream.h"

struct cudaAccessPolicyWindow l2p_window_to_cuda(const l2p_window *w)
{
    struct cudaAccessPolicyWindow c;
    memset(&c, 0, sizeof c);
    if (w && w->num_bytes) {
        c.base_ptr = (void *)w->base_ptr;
        c.num_bytes = w->num_bytes;
        c.hitRatio = w->hit_ratio;
        c.hitProp = (enum cudaAccessProperty)w->hit_prop;
        c.missProp = (enum cudaAccessProperty)w->miss_prop;
    }
    return c;
}

l2p_window l2p_window_from_cuda(const struct cudaAccessPolicyWindow *c)
{
    l2p_window w;
    w.base_ptr = (uintptr_t)c->base_ptr;
    w.num_bytes = c->num_bytes;
    w.hit_ratio = c->hitRatio;
    w.hit_prop = (int)c->hitProp;
    w.miss_prop = (int)c->missProp;
    return w;
}

unsigned l2p_window_launch_attribute(const l2p_window *w, cudaLaunchAttribute *attr)
{
    if (!w) return 0;
    memset(attr, 0, sizeof *attr);
    attr->id = cudaLaunchAttributeAccessPolicyWindow;
    attr->val.accessPolicyWindow = l2p_window_to_cuda(w);
    return 1;
}

/* The attribute read (set == NULL) or set on `stream`, with its device current where the
 * handle is a default stream's (l2p_stream_enter). */
static l2p_status stream_window(int device, cudaStream_t stream, const l2p_window *set,
                                l2p_window *out)
{
    cudaStreamAttrValue v;
    cudaError_t rc;
    int prev;
    L2P_TRY(l2p_stream_enter(device, stream, &prev));
    memset(&v, 0, sizeof v);
    if (set) {
        v.accessPolicyWindow = l2p_window_to_cuda(set);
        rc = cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v);
    } else {
        rc = cudaStreamGetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v);
    }
    l2p_stream_leave(prev);
    if (rc != cudaSuccess)
        return l2p_fail_cuda(rc, set ? "cudaStreamSetAttribute(stream, accessPolicyWindow)"
                                     : "cudaStreamGetAttribute(stream, accessPolicyWindow)");
    if (out) *out = l2p_window_from_cuda(&v.accessPolicyWindow);
    return L2P_OK;
}

l2p_status l2p_stream_get_window(int device, cudaStream_t stream, l2p_window *out)
{
    return stream_window(device, stream, NULL, out);
}

l2p_status l2p_stream_set_window(int device, cudaStream_t stream, const l2p_window *w)
{
    static const l2p_window off; /* num_bytes 0: the disabling window */
    return stream_window(device, stream, w ? w : &off, NULL);
}

l2p_status l2p_graph_node_get_window(cudaGraphNode_t node, l2p_window *out)
{
    cudaKernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    L2P_CUDA_TRY(cudaGraphKernelNodeGetAttribute(node, cudaKernelNodeAttributeAccessPolicyWindow,
                                                 &v));
    *out = l2p_window_from_cuda(&v.accessPolicyWindow);
    return L2P_OK;
}

l2p_status l2p_graph_node_set_window(cudaGraphNode_t node, const l2p_window *w)
{
    cudaKernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow = l2p_window_to_cuda(w);
    L2P_CUDA_TRY(cudaGraphKernelNodeSetAttribute(node, cudaKernelNodeAttributeAccessPolicyWindow,
                                                 &v));
    return L2P_OK;
}
