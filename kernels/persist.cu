/* Persistence kernels: the CUDA Best Practices guide's hot/cold kernel (and a read-only
 * variant), and a hot set re-read while a cold stream passes, with a flavour for each. */
#include "l2p_access.cuh"
#include "l2p_kernels.h"
#include "l2p_launch.cuh"
#include "l2p_sink.cuh"

/* 32-bit indices: 64-bit modulo costs ~10x more and would make the kernel compute-bound. */
__global__ void l2p_hot_cold_kernel(int32_t *hot, unsigned hot_n, int32_t *cold, unsigned cold_n,
                                    unsigned threads)
{
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads) return;
    unsigned h = t % hot_n, c = t % cold_n;
    hot[h] = 2 * hot[h];
    cold[c] = 2 * cold[c];
}

__global__ void l2p_hot_cold_read_only_kernel(const int32_t *hot, unsigned hot_n,
                                              const int32_t *cold, unsigned cold_n,
                                              unsigned threads, unsigned *sink)
{
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads) return;
    unsigned v = (unsigned)hot[t % hot_n] + (unsigned)cold[t % cold_n];
    l2p_keep(v, sink);
}

extern "C" cudaError_t l2p_launch_hot_cold(int32_t *hot, size_t hot_n, int32_t *cold,
                                           size_t cold_n, size_t threads, int read_only,
                                           unsigned *sink, cudaStream_t stream,
                                           const l2p_window *window)
{
    const unsigned block = 256;
    if (threads == 0) return cudaSuccess;
    if (hot_n == 0 || cold_n == 0 || threads > 0xffffffffull || hot_n > 0xffffffffull ||
        cold_n > 0xffffffffull)
        return cudaErrorInvalidValue;
    dim3 grid((unsigned)((threads + block - 1) / block));
    if (read_only)
        return l2p_launch(l2p_hot_cold_read_only_kernel, grid, dim3(block), 0, stream, window,
                          (const int32_t *)hot, (unsigned)hot_n, (const int32_t *)cold,
                          (unsigned)cold_n, (unsigned)threads, sink);
    return l2p_launch(l2p_hot_cold_kernel, grid, dim3(block), 0, stream, window, hot,
                      (unsigned)hot_n, cold, (unsigned)cold_n, (unsigned)threads);
}

template <int FH, int FC>
__global__ void l2p_hot_cold_read_kernel(const uint4 *hot, size_t hot_n, const uint4 *cold,
                                         size_t cold_n, unsigned *sink)
{
    uint64_t ph = l2p_load_policy<FH>(), pc = l2p_load_policy<FC>();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned acc = 0;
    size_t h = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) % hot_n, hstep = stride % hot_n;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < cold_n; i += stride) {
        acc ^= l2p_fold(l2p_load<FC>(cold + i, pc)) + l2p_fold(l2p_load<FH>(hot + h, ph));
        h += hstep; /* h = i % hot_n without a division per element */
        if (h >= hot_n) h -= hot_n;
    }
    l2p_keep(acc, sink);
}

extern "C" cudaError_t l2p_launch_hot_cold_read(const void *hot, size_t hot_bytes,
                                                const void *cold, size_t cold_bytes,
                                                int hot_flavour, int cold_flavour,
                                                unsigned blocks, unsigned threads, unsigned *sink,
                                                cudaStream_t stream, const l2p_window *window)
{
    size_t hn = hot_bytes / 16, cn = cold_bytes / 16;
    dim3 grid(blocks), block(threads);
    if (cn == 0) return cudaSuccess;
    if (hn == 0) return cudaErrorInvalidValue;
    L2P_DISPATCH_LOAD(hot_flavour, FH, L2P_DISPATCH_LOAD(cold_flavour, FC,
        return l2p_launch(l2p_hot_cold_read_kernel<FH, FC>, grid, block, 0, stream, window,
                          (const uint4 *)hot, hn, (const uint4 *)cold, cn, sink)));
    return cudaErrorInvalidValue;
}
