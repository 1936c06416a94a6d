/* The non-coherent cache study's gather, out[i] = src[map[i]], in three variants:
 * plain pointers, const __restrict__ (the read-only path, LDG.E.CONSTANT), and texture
 * object fetches. Data are 32-bit words, so int32 and float32 share one kernel. */
#include "l2p_kernels.h"
#include "l2p_launch.cuh"

template <typename M>
__device__ __forceinline__ bool l2p_gather_index(const M *map, size_t i, size_t src_n,
                                                 int *oob, size_t *j)
{
    M m = map[i];
    if (oob && (m < 0 || (size_t)m >= src_n)) {
        *oob = 1; /* racy but idempotent: any writer stores the same 1 */
        return false;
    }
    *j = (size_t)m;
    return true;
}

template <typename M>
__global__ void l2p_gather_plain(uint32_t *out, const uint32_t *src, size_t src_n,
                                 const M *map, size_t n, int *oob)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        size_t j;
        out[i] = l2p_gather_index(map, i, src_n, oob, &j) ? src[j] : 0u;
    }
}

template <typename M>
__global__ void l2p_gather_restrict(uint32_t *__restrict__ out, const uint32_t *__restrict__ src,
                                    size_t src_n, const M *__restrict__ map, size_t n, int *oob)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        size_t j;
        out[i] = l2p_gather_index(map, i, src_n, oob, &j) ? __ldg(src + j) : 0u;
    }
}

template <typename M>
__global__ void l2p_gather_texture(uint32_t *out, cudaTextureObject_t tex, size_t src_n,
                                   const M *map, size_t n, int *oob)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        size_t j;
        out[i] = l2p_gather_index(map, i, src_n, oob, &j) ? tex1Dfetch<unsigned int>(tex, (int)j)
                                                          : 0u;
    }
}

template <typename M>
static cudaError_t gather(int variant, uint32_t *out, const uint32_t *src, size_t src_n,
                          const M *map, size_t n, unsigned long long tex, int *oob,
                          cudaStream_t stream, const l2p_window *window)
{
    const unsigned threads = 256;
    dim3 grid(l2p_blocks_for(n, threads));
    if (n == 0) return cudaSuccess;
    switch (variant) {
    case L2P_GATHER_PLAIN:
        return l2p_launch(l2p_gather_plain<M>, grid, dim3(threads), 0, stream, window, out, src,
                          src_n, map, n, oob);
    case L2P_GATHER_RESTRICT:
        return l2p_launch(l2p_gather_restrict<M>, grid, dim3(threads), 0, stream, window, out,
                          src, src_n, map, n, oob);
    case L2P_GATHER_TEXTURE:
        return l2p_launch(l2p_gather_texture<M>, grid, dim3(threads), 0, stream, window, out,
                          (cudaTextureObject_t)tex, src_n, map, n, oob);
    default:
        return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t l2p_launch_gather(int variant, uint32_t *out, const uint32_t *src,
                                         size_t src_n, const void *map, int map_is_int64,
                                         size_t n, unsigned long long tex, int *oob,
                                         cudaStream_t stream, const l2p_window *window)
{
    if (map_is_int64)
        return gather(variant, out, src, src_n, (const int64_t *)map, n, tex, oob, stream, window);
    return gather(variant, out, src, src_n, (const int32_t *)map, n, tex, oob, stream, window);
}

/* splitmix64: a counter-based generator, so every element is independent of launch shape. */
__device__ __forceinline__ uint64_t l2p_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

template <typename M>
__global__ void l2p_random_map_kernel(M *map, size_t n, uint64_t range, uint64_t seed)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint64_t r = l2p_splitmix64(seed * 0x2545f4914f6cdd1dull + i);
        map[i] = (M)__umul64hi(r, range); /* uniform in [0, range) without a division */
    }
}

extern "C" cudaError_t l2p_launch_random_map(void *map, int map_is_int64, size_t n, size_t range,
                                             uint64_t seed, cudaStream_t stream)
{
    const unsigned threads = 256;
    dim3 grid(l2p_blocks_for(n, threads));
    if (n == 0) return cudaSuccess;
    if (map_is_int64)
        return l2p_launch(l2p_random_map_kernel<int64_t>, grid, dim3(threads), 0, stream, NULL,
                          (int64_t *)map, n, (uint64_t)range, seed);
    return l2p_launch(l2p_random_map_kernel<int32_t>, grid, dim3(threads), 0, stream, NULL,
                      (int32_t *)map, n, (uint64_t)range, seed);
}

/* The device's out-of-range flag of checked gathers: a device variable, so a checked gather
 * allocates nothing and can be captured; it is read (and cleared) at the next check. */
__device__ int l2p_gather_oob;

extern "C" cudaError_t l2p_device_gather_flag(int **out)
{
    return cudaGetSymbolAddress((void **)out, l2p_gather_oob);
}

extern "C" cudaError_t l2p_gather_flag_take(int *was_set)
{
    int zero = 0;
    cudaError_t rc = cudaMemcpyFromSymbol(was_set, l2p_gather_oob, sizeof(int));
    if (rc == cudaSuccess && *was_set) rc = cudaMemcpyToSymbol(l2p_gather_oob, &zero, sizeof(int));
    return rc;
}
