/* Coalescing patterns: every thread t loads one element of `width` bytes (at
 * load_offset + t * load_stride, or at index[t]), optionally adds src2[broadcast_index], and
 * stores it at store_offset + t * store_stride. One launch shape, one access per thread, so
 * counters read per request match what a warp's addresses predict. */
#include "l2p_access.cuh"
#include "l2p_kernels.h"
#include "l2p_launch.cuh"

template <int W, int F, int S>
__global__ void l2p_pattern_kernel(l2p_pattern_args a)
{
    typedef typename l2p_word<W>::type T;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t pol = l2p_load_policy<F>();
    long long i = a.index ? (long long)a.index[t] : a.load_offset + t * a.load_stride;
    T v = l2p_load<F>((const T *)a.src + i, pol);
    if (a.src2) v = l2p_mix(v, l2p_load<F>((const T *)a.src2 + a.broadcast_index, pol));
    l2p_store<S>((T *)a.dst + a.store_offset + t * a.store_stride, v);
}

extern "C" cudaError_t l2p_launch_pattern(const l2p_pattern_args *a, cudaStream_t stream,
                                          const l2p_window *window)
{
    dim3 grid(a->blocks), block(a->threads);
    L2P_DISPATCH_WIDTH(a->width, W,
        L2P_DISPATCH_LOAD(a->load_flavour, F,
            L2P_DISPATCH_STORE(a->store_flavour, S,
                return l2p_launch(l2p_pattern_kernel<W, F, S>, grid, block, 0, stream, window,
                                  *a))));
    return cudaErrorInvalidValue;
}
