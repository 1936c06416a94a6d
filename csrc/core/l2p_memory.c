#include "l2p_memory.h"

#include <stdint.h>
#include <string.h>

#include "l2p_device.h"
#include "l2p_release.h"

l2p_status l2p_memory_alloc(int device, size_t nbytes, void **out)
{
    int prev;
    cudaError_t rc;
    *out = NULL;
    if (nbytes == 0) return L2P_OK;
    l2p_release_drain(); /* a safe point: releases refused during a capture go now */
    L2P_TRY(l2p_device_enter(device, &prev));
    rc = cudaMalloc(out, nbytes);
    l2p_device_leave(prev);
    if (rc != cudaSuccess) {
        *out = NULL;
        (void)cudaGetLastError(); /* out-of-memory must not stick to the next launch check */
        if (rc != cudaErrorMemoryAllocation) /* a dead context, a reset device: not memory */
            return l2p_fail_cuda(rc, "cudaMalloc");
        return l2p_fail_cuda_msg(L2P_ERR_NO_MEMORY, rc, "cudaMalloc",
                                 "could not allocate %zu bytes on device %d", nbytes, device);
    }
    return L2P_OK;
}

l2p_status l2p_memory_free(int device, void *ptr)
{
    return l2p_release(device, L2P_RELEASE_MEMORY, ptr); /* never breaks a capture */
}

static l2p_status copy(int device, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    int prev;
    cudaError_t rc;
    if (n == 0) return L2P_OK;
    L2P_TRY(l2p_device_enter(device, &prev));
    rc = cudaMemcpy(dst, src, n, kind);
    l2p_device_leave(prev);
    return rc == cudaSuccess ? L2P_OK : l2p_fail_cuda(rc, "cudaMemcpy");
}

l2p_status l2p_memory_to_device(int device, void *dst, const void *src, size_t nbytes)
{
    return copy(device, dst, src, nbytes, cudaMemcpyHostToDevice);
}

l2p_status l2p_memory_to_host(int device, void *dst, const void *src, size_t nbytes)
{
    return copy(device, dst, src, nbytes, cudaMemcpyDeviceToHost);
}

l2p_status l2p_memory_device_to_device(int device, void *dst, const void *src, size_t nbytes,
                                       cudaStream_t stream)
{
    int prev;
    cudaError_t rc;
    if (nbytes == 0) return L2P_OK;
    L2P_TRY(l2p_device_enter(device, &prev));
    rc = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream);
    l2p_device_leave(prev);
    return rc == cudaSuccess ? L2P_OK : l2p_fail_cuda(rc, "cudaMemcpyAsync");
}

l2p_status l2p_memory_set(int device, void *dst, int byte, size_t nbytes, cudaStream_t stream)
{
    int prev;
    cudaError_t rc;
    if (nbytes == 0) return L2P_OK;
    L2P_TRY(l2p_device_enter(device, &prev));
    rc = cudaMemsetAsync(dst, byte, nbytes, stream);
    if (rc == cudaSuccess && stream == NULL) rc = cudaStreamSynchronize(NULL);
    l2p_device_leave(prev);
    return rc == cudaSuccess ? L2P_OK : l2p_fail_cuda(rc, "cudaMemsetAsync");
}

l2p_status l2p_memory_pointer_device(const void *ptr, int *device)
{
    struct cudaPointerAttributes a;
    cudaError_t rc = cudaPointerGetAttributes(&a, ptr);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        return l2p_fail_cuda(rc, "cudaPointerGetAttributes");
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return l2p_fail(L2P_ERR_VALUE, "pointer 0x%llx is not CUDA device memory (type %d)",
                        (unsigned long long)(uintptr_t)ptr, (int)a.type);
    *device = a.device;
    return L2P_OK;
}

l2p_status l2p_texture_create(int device, const void *ptr, size_t nbytes,
                              unsigned long long *tex)
{
    struct cudaResourceDesc res;
    struct cudaTextureDesc desc;
    cudaTextureObject_t t = 0;
    int prev;
    memset(&res, 0, sizeof res);
    memset(&desc, 0, sizeof desc);
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = (void *)ptr;
    res.res.linear.desc = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindUnsigned);
    res.res.linear.sizeInBytes = nbytes;
    desc.readMode = cudaReadModeElementType;
    L2P_TRY(l2p_device_enter(device, &prev));
    cudaError_t rc = cudaCreateTextureObject(&t, &res, &desc, NULL);
    l2p_device_leave(prev);
    if (rc != cudaSuccess) return l2p_fail_cuda(rc, "cudaCreateTextureObject");
    *tex = (unsigned long long)t;
    return L2P_OK;
}

void l2p_texture_destroy(int device, unsigned long long tex)
{
    if (l2p_release(device, L2P_RELEASE_TEXTURE, (void *)(size_t)tex) != L2P_OK)
        l2p_clear_error(); /* a destroy that fails leaves nothing to do */
}

l2p_status l2p_texture_max_width(int device, size_t *out)
{
    int v = 0;
    L2P_CUDA_TRY(cudaDeviceGetAttribute(&v, cudaDevAttrMaxTexture1DLinearWidth, device));
    *out = (size_t)v;
    return L2P_OK;
}
