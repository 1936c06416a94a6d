/* Streaming kernels over 16-byte words: read, write, copy, triad. Each thread keeps
 * L2P_UNROLL independent 16-byte accesses in flight per iteration of a grid-stride loop; the
 * grid is sized from the SM count by the caller. Then the L2-resident reads: l2_read and the
 * same chunk read from a chosen SM (sm_read); the bulk copy engine's (bulk_read) is in
 * bulk.cu, which says why it is apart. */
#include <climits>

#include "l2p_access.cuh"
#include "l2p_kernels.h"
#include "l2p_launch.cuh"
#include "l2p_sink.cuh"
#include "l2p_grid.h"

#define L2P_UNROLL 4

template <int F, int U = L2P_UNROLL>
__global__ void l2p_read_kernel(const uint4 *src, size_t n, int repeats, unsigned *sink)
{
    uint64_t pol = l2p_load_policy<F>();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t start = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (int r = 0; r < repeats; r++) {
        size_t i = start;
        for (; i + (U - 1) * stride < n; i += U * stride) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++) v[u] = l2p_load<F>(src + i + u * stride, pol);
#pragma unroll
            for (int u = 0; u < U; u++) acc ^= l2p_fold(v[u]);
        }
        for (; i < n; i += stride) acc ^= l2p_fold(l2p_load<F>(src + i, pol));
    }
    l2p_keep(acc, sink);
}

template <int S>
__global__ void l2p_write_kernel(uint4 *dst, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned k = (unsigned)i;
        l2p_store<S>(dst + i, make_uint4(k, k + 1, k + 2, k + 3));
    }
}

template <int F, int S>
__global__ void l2p_copy_kernel(uint4 *dst, const uint4 *src, size_t n)
{
    uint64_t pol = l2p_load_policy<F>();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (L2P_UNROLL - 1) * stride < n; i += L2P_UNROLL * stride) {
        uint4 v[L2P_UNROLL];
#pragma unroll
        for (int u = 0; u < L2P_UNROLL; u++) v[u] = l2p_load<F>(src + i + u * stride, pol);
#pragma unroll
        for (int u = 0; u < L2P_UNROLL; u++) l2p_store<S>(dst + i + u * stride, v[u]);
    }
    for (; i < n; i += stride) l2p_store<S>(dst + i, l2p_load<F>(src + i, pol));
}

__device__ __forceinline__ uint4 l2p_triad4(uint4 b, uint4 c, float s)
{
    float4 r;
    r.x = __uint_as_float(b.x) + s * __uint_as_float(c.x);
    r.y = __uint_as_float(b.y) + s * __uint_as_float(c.y);
    r.z = __uint_as_float(b.z) + s * __uint_as_float(c.z);
    r.w = __uint_as_float(b.w) + s * __uint_as_float(c.w);
    return make_uint4(__float_as_uint(r.x), __float_as_uint(r.y), __float_as_uint(r.z),
                      __float_as_uint(r.w));
}

template <int F, int S>
__global__ void l2p_triad_kernel(uint4 *dst, const uint4 *b, const uint4 *c, size_t n, float s)
{
    uint64_t pol = l2p_load_policy<F>();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (L2P_UNROLL - 1) * stride < n; i += L2P_UNROLL * stride) {
        uint4 x[L2P_UNROLL], y[L2P_UNROLL];
#pragma unroll
        for (int u = 0; u < L2P_UNROLL; u++) {
            x[u] = l2p_load<F>(b + i + u * stride, pol);
            y[u] = l2p_load<F>(c + i + u * stride, pol);
        }
#pragma unroll
        for (int u = 0; u < L2P_UNROLL; u++) l2p_store<S>(dst + i + u * stride, l2p_triad4(x[u], y[u], s));
    }
    for (; i < n; i += stride)
        l2p_store<S>(dst + i, l2p_triad4(l2p_load<F>(b + i, pol), l2p_load<F>(c + i, pol), s));
}

extern "C" cudaError_t l2p_launch_streaming(int op, void *dst, const void *src, const void *src2,
                                            size_t nbytes, float scalar, int load_flavour,
                                            int store_flavour, unsigned blocks, unsigned threads,
                                            unsigned *sink, cudaStream_t stream,
                                            const l2p_window *window)
{
    size_t n = nbytes / 16;
    dim3 grid(blocks), block(threads);
    if (n == 0) return cudaSuccess;
    switch (op) {
    case L2P_STREAM_READ:
        L2P_DISPATCH_LOAD(load_flavour, F,
            return l2p_launch(l2p_read_kernel<F>, grid, block, 0, stream, window,
                              (const uint4 *)src, n, 1, sink));
        break;
    case L2P_STREAM_WRITE:
        L2P_DISPATCH_STORE(store_flavour, S,
            return l2p_launch(l2p_write_kernel<S>, grid, block, 0, stream, window, (uint4 *)dst, n));
        break;
    case L2P_STREAM_COPY:
        L2P_DISPATCH_LOAD(load_flavour, F, L2P_DISPATCH_STORE(store_flavour, S,
            return l2p_launch(l2p_copy_kernel<F, S>, grid, block, 0, stream, window,
                              (uint4 *)dst, (const uint4 *)src, n)));
        break;
    case L2P_STREAM_TRIAD:
        L2P_DISPATCH_LOAD(load_flavour, F, L2P_DISPATCH_STORE(store_flavour, S,
            return l2p_launch(l2p_triad_kernel<F, S>, grid, block, 0, stream, window,
                              (uint4 *)dst, (const uint4 *)src, (const uint4 *)src2, n, scalar)));
        break;
    }
    return cudaErrorInvalidValue;
}

/* The L2-resident read (shape in csrc/core/l2p_grid.h): block b reads chunk b % chunks, one
 * row of blockDim.x words per load, rows `chunks` apart, L independent loads per thread. The
 * block's footprint exceeds the L1 and no block reads a word twice, so the loads are served
 * by the L2 whatever the load flavour; many short blocks keep every SM's load queue full.
 *
 * Why it is written this way (the scheme of te42kyfo/gpu-benches' L2 kernel, our own code):
 * - 8-byte words: __launch_bounds__(1024, 2) holds the kernel to 32 registers, so two
 *   1024-thread blocks (Hopper's 2048 resident threads) share each SM: while one block drains
 *   at its end, the other keeps loads in flight. The compiler issues the L loads in batches
 *   that fit those registers (about 12 in flight per thread). 16-byte words at 32 registers
 *   spill to local memory, so they run one 1024-thread block per SM and take more registers
 *   instead, for more 16-byte loads in flight: up to 16 loads, a minimum of 1 block lets
 *   the compiler use 64 registers (about 14 loads in flight, no spill); at 32 and 64 loads
 *   that spills, so they name no minimum (the 0): 42 registers, as before.
 * - The block's chunk is a 32-bit remainder (the launcher keeps chunks below 2^31) and the
 *   count of whole rows comes from the host: a 64-bit division is a long software sequence
 *   that every block would run before its first load. */
template <int F, typename T, int L>
__device__ __forceinline__ unsigned l2p_l2_read_chunk(const T *src, size_t n, unsigned chunks,
                                                      size_t full_rows, unsigned row, uint64_t pol)
{
    size_t row_words = blockDim.x, step = (size_t)chunks * row_words;
    const T *p = src + (size_t)row * row_words + threadIdx.x;
    unsigned acc = 0;
    /* Folding each value as it is used lets the compiler keep as many loads in flight as
     * the registers hold, without spilling them to local memory. */
    if (row + (size_t)(L - 1) * chunks < full_rows) { /* every row whole: no per-load test */
#pragma unroll
        for (int i = 0; i < L; i++) acc ^= l2p_fold(l2p_load<F>(p + i * step, pol));
    } else { /* blocks whose last rows run past the end of src: each load is tested */
#pragma unroll
        for (int i = 0; i < L; i++) {
            size_t e = (row + (size_t)i * chunks) * row_words + threadIdx.x;
            if (e < n) acc ^= l2p_fold(l2p_load<F>(src + e, pol));
        }
    }
    return acc;
}

template <int F, typename T, int L>
__global__ void __launch_bounds__(1024, sizeof(T) == 8 ? 2 : L <= 16 ? 1 : 0)
    l2p_l2_read_kernel(const T *src, size_t n, unsigned chunks, size_t full_rows, unsigned *sink)
{
    uint64_t pol = l2p_load_policy<F>();
    l2p_keep(l2p_l2_read_chunk<F, T, L>(src, n, chunks, full_rows, blockIdx.x % chunks, pol), sink);
}

/* The same read when every block's rows are whole and each offset fits an int (src a whole
 * number of threads x loads words, fewer than 2^31 of them): the body of gpu-benches'
 * kernel, with no whole-row test and int offsets, which the compiler turns into one
 * IMAD.WIDE per load (against a 64-bit add pair), so that the first load issues at the
 * 29th instruction rather than the 46th (SASS, sm_90, 8-byte words x 32 loads; both keep
 * 11 loads in flight). The difference shows in the shortest launches, where a block's start
 * is much of the launch: on the H200, 9-23 MiB x 3-10 passes, this body (then built with a
 * __restrict__ source, so ld.global.nc) read at 0.997-1.046x the original and the general one
 * at 0.982-1.023x (tools/investigations/l2read-vs-original, 9 interleaved rounds). */
template <int F, typename T, int L>
__global__ void __launch_bounds__(1024, sizeof(T) == 8 ? 2 : L <= 16 ? 1 : 0)
    l2p_l2_read_rows(const T *src, unsigned chunks, unsigned *sink)
{
    uint64_t pol = l2p_load_policy<F>();
    int step = (int)(blockDim.x * chunks), first = (int)((blockIdx.x % chunks) * blockDim.x + threadIdx.x);
    unsigned acc = 0;
#pragma unroll
    for (int i = 0; i < L; i++) acc ^= l2p_fold(l2p_load<F>(src + (step * i + first), pol));
    l2p_keep(acc, sink);
}

/* Whether l2_read launches l2p_l2_read_rows: n words are whole rows of `threads`, a whole
 * number of `loads` rows per chunk (so chunks x loads rows are exactly src), and every offset
 * fits an int. */
static bool l2_read_whole_rows(size_t n, unsigned threads, int loads)
{
    return threads > 0 && loads > 0 && n <= (size_t)INT_MAX && n % threads == 0 &&
           (n / threads) % (size_t)loads == 0;
}

#define L2P_DISPATCH_LOADS(l, L, ...)                    \
    switch (l) {                                         \
    case 8: { const int L = 8; __VA_ARGS__; } break;     \
    case 16: { const int L = 16; __VA_ARGS__; } break;   \
    case 32: { const int L = 32; __VA_ARGS__; } break;   \
    case 64: { const int L = 64; __VA_ARGS__; } break;   \
    default: return cudaErrorInvalidValue;               \
    }

/* The kernel l2_read launches with `loads` loads per thread: the one with no per-load test
 * when `rows` (l2_read_whole_rows), else the general one. */
template <int F, typename T>
static const void *l2_read_kernel_for(bool rows, int loads)
{
    switch (loads) {
#define L2P_KERNEL_CASE(L)                                                                    \
    case L: return rows ? (const void *)l2p_l2_read_rows<F, T, L>                            \
                        : (const void *)l2p_l2_read_kernel<F, T, L>;
        L2P_KERNEL_CASE(8) L2P_KERNEL_CASE(16) L2P_KERNEL_CASE(32) L2P_KERNEL_CASE(64)
#undef L2P_KERNEL_CASE
    }
    return NULL;
}

/* The blocks one SM holds of l2_read's kernel with `loads` loads per thread (its registers
 * decide: the launch bounds). */
template <int F, typename T>
static cudaError_t l2_read_occupancy(size_t n, int loads, unsigned threads, int *blocks_per_sm)
{
    const void *kernel = l2_read_kernel_for<F, T>(l2_read_whole_rows(n, threads, loads), loads);
    if (!kernel) return cudaErrorInvalidValue;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, kernel, (int)threads, 0);
}

/* repeats and loads as l2_read launches them: 0 asks for the defaults of l2p_grid.h (the
 * passes that read L2P_L2_READ_AUTO_BYTES; the loads l2p_l2_read_pick_loads picks from the
 * waves each candidate makes on the current device). */
template <int F, typename T>
static cudaError_t l2_read_shape_as(size_t nbytes, int repeats, int loads, unsigned threads,
                                    l2p_l2_read_shape *out)
{
    static const unsigned candidates[] = {64, 32, 8}; /* not 16: 8 always make more blocks */
    enum { N = sizeof candidates / sizeof candidates[0] };
    size_t n = nbytes / sizeof(T), blocks[N], resident[N];
    if (threads == 0 || threads > 1024) return cudaErrorInvalidValue;
    if (repeats == 0) /* the cap counts the most chunks any candidate makes */
        repeats = (int)l2p_l2_read_auto_repeats(nbytes, l2p_l2_read_chunks(n, threads, 8));
    if (loads == 0) {
        int dev, sms, per_sm;
        cudaError_t rc = cudaGetDevice(&dev);
        if (rc == cudaSuccess)
            rc = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        for (int i = 0; rc == cudaSuccess && i < N; i++) {
            rc = l2_read_occupancy<F, T>(n, (int)candidates[i], threads, &per_sm);
            blocks[i] = l2p_l2_read_chunks(n, threads, (unsigned)candidates[i]) * (size_t)repeats;
            resident[i] = (size_t)per_sm * (size_t)sms;
        }
        if (rc != cudaSuccess) return rc;
        loads = (int)candidates[l2p_l2_read_pick_loads(candidates, blocks, resident, N)];
    }
    out->repeats = repeats;
    out->loads = loads;
    out->registers = 0; /* the kernel's: l2_read_shape_and_kernel asks */
    out->shared_bytes = 0;
    out->whole_rows = l2_read_whole_rows(n, threads, loads);
    out->blocks = l2p_l2_read_chunks(n, threads, (unsigned)loads) * (size_t)repeats;
    out->bytes = n * sizeof(T) * (size_t)repeats;
    return cudaSuccess;
}

template <typename T>
static cudaError_t l2_read_as(const void *src, size_t nbytes, int repeats, int load_flavour,
                              int loads, unsigned threads, unsigned *sink, cudaStream_t stream,
                              const l2p_window *window)
{
    size_t n = nbytes / sizeof(T);
    l2p_l2_read_shape shape;
    if (n == 0 || repeats < 0) return cudaSuccess;
    L2P_DISPATCH_LOAD(load_flavour, F, {
        cudaError_t rc = l2_read_shape_as<F, T>(nbytes, repeats, loads, threads, &shape);
        if (rc != cudaSuccess) return rc;
        if (shape.blocks > 2147483647u) return cudaErrorInvalidValue;
        size_t chunks = shape.blocks / (size_t)shape.repeats;
        if (shape.whole_rows)
            L2P_DISPATCH_LOADS(shape.loads, L,
                return l2p_launch(l2p_l2_read_rows<F, T, L>, dim3((unsigned)shape.blocks),
                                  dim3(threads), 0, stream, window, (const T *)src,
                                  (unsigned)chunks, sink));
        L2P_DISPATCH_LOADS(shape.loads, L,
            return l2p_launch(l2p_l2_read_kernel<F, T, L>, dim3((unsigned)shape.blocks),
                              dim3(threads), 0, stream, window, (const T *)src, n,
                              (unsigned)chunks, n / threads, sink));
    });
    return cudaErrorInvalidValue;
}

/* The shape, and the registers and static shared memory of the kernel it launches (asked
 * here, not at each launch: one cudaFuncGetAttributes is host time a launch need not pay). */
template <int F, typename T>
static cudaError_t l2_read_shape_and_kernel(size_t nbytes, int repeats, int loads,
                                            unsigned threads, l2p_l2_read_shape *out)
{
    cudaFuncAttributes fa;
    cudaError_t rc = l2_read_shape_as<F, T>(nbytes, repeats, loads, threads, out);
    if (rc != cudaSuccess) return rc;
    const void *kernel = l2_read_kernel_for<F, T>(out->whole_rows, out->loads);
    if (!kernel) return cudaErrorInvalidValue;
    rc = cudaFuncGetAttributes(&fa, kernel);
    if (rc != cudaSuccess) return rc;
    out->registers = fa.numRegs;
    out->shared_bytes = fa.sharedSizeBytes;
    return cudaSuccess;
}

extern "C" cudaError_t l2p_l2_read_shape_of(size_t nbytes, int repeats, int load_flavour,
                                            int width, int loads, unsigned threads,
                                            l2p_l2_read_shape *out)
{
    if (width == 8)
        L2P_DISPATCH_LOAD(load_flavour, F,
                          return l2_read_shape_and_kernel<F, uint2>(nbytes, repeats, loads,
                                                                    threads, out));
    if (width == 16)
        L2P_DISPATCH_LOAD(load_flavour, F,
                          return l2_read_shape_and_kernel<F, uint4>(nbytes, repeats, loads,
                                                                    threads, out));
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t l2p_launch_l2_read(const void *src, size_t nbytes, int repeats,
                                          int load_flavour, int width, int loads,
                                          unsigned threads, unsigned *sink, cudaStream_t stream,
                                          const l2p_window *window)
{
    if (width == 8)
        return l2_read_as<uint2>(src, nbytes, repeats, load_flavour, loads, threads, sink,
                                 stream, window);
    if (width == 16)
        return l2_read_as<uint4>(src, nbytes, repeats, load_flavour, loads, threads, sink,
                                 stream, window);
    return cudaErrorInvalidValue;
}

/* ---- The L2-resident read from one chosen SM ----
 * Hopper's L2 is two partitions; which one serves a load depends on the SM that makes it.
 * sm_read reads one chunk of l2_read's shape, as l2_read's block b reads chunk b % chunks
 * (the device function above: the same rows, loads and default load), but from a block on
 * the SM whose %smid is `sm`, so that a chunk can be warmed from one SM and re-read from
 * another (tools/investigations/l2-partitions). Placement is chosen, not hoped for:
 * - The grid is one block per resident slot of the device (SM count x the kernel's
 *   occupancy): every slot is filled in the first wave, so the wanted SM gets blocks.
 * - A block on any other SM holds its slot for L2P_SM_READ_HOLD_NS of %globaltimer and
 *   exits without a load: no slot frees before the whole grid is dispatched, so no SM
 *   takes a second block in place of one that the wanted SM should have had.
 * - Exactly one block reads: the first on the wanted SM to claim the launch's counter.
 *   Blocks on one SM share its L1, so a second reader would see L1 hits, not L2 traffic.
 * The counters reset themselves (the last block to finish zeroes them), so graph replays
 * work without a host-side reset; they are device variables, so two sm_read launches must
 * not run at the same time. An id that no SM has reads nothing (the counters show 0 sectors
 * read: that is how a caller sees it). */
#define L2P_SM_READ_HOLD_NS 20000ull

__device__ unsigned l2p_sm_read_claims; /* blocks of this launch that found the wanted SM */
__device__ unsigned l2p_sm_read_exits;  /* blocks of this launch that have finished */

__device__ __forceinline__ unsigned l2p_smid(void)
{
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

__device__ __forceinline__ unsigned long long l2p_globaltimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

template <typename T, int L>
__global__ void __launch_bounds__(1024, sizeof(T) == 8 ? 2 : L <= 16 ? 1 : 0)
    l2p_sm_read_kernel(const T *src, size_t n, unsigned chunks, size_t full_rows, unsigned chunk,
                       unsigned sm, unsigned *sink)
{
    __shared__ int reader;
    if (threadIdx.x == 0)
        reader = l2p_smid() == sm && atomicAdd(&l2p_sm_read_claims, 1u) == 0u;
    __syncthreads();
    if (reader) {
        uint64_t pol = l2p_load_policy<L2P_LD_DEFAULT>();
        l2p_keep(l2p_l2_read_chunk<L2P_LD_DEFAULT, T, L>(src, n, chunks, full_rows, chunk, pol),
                 sink);
    } else if (threadIdx.x == 0) {
        unsigned long long start = l2p_globaltimer();
        while (l2p_globaltimer() - start < L2P_SM_READ_HOLD_NS) {
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence(); /* this block's claim is visible before its exit is counted */
        if (atomicAdd(&l2p_sm_read_exits, 1u) == gridDim.x - 1u) {
            atomicExch(&l2p_sm_read_claims, 0u);
            atomicExch(&l2p_sm_read_exits, 0u);
        }
    }
}

/* One block per resident slot of the current device (see above). */
template <typename K>
static cudaError_t l2p_one_wave(K kernel, unsigned threads, unsigned *blocks)
{
    int dev, sms, per_sm;
    cudaError_t rc = cudaGetDevice(&dev);
    if (rc == cudaSuccess) rc = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (rc == cudaSuccess)
        rc = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, (int)threads, 0);
    if (rc != cudaSuccess) return rc;
    *blocks = (unsigned)sms * (unsigned)(per_sm > 0 ? per_sm : 1);
    return cudaSuccess;
}

template <typename T, int L>
static cudaError_t sm_read_launch(const T *src, size_t n, unsigned chunks, unsigned chunk,
                                  unsigned sm, unsigned threads, unsigned *sink,
                                  cudaStream_t stream, const l2p_window *window)
{
    unsigned blocks;
    cudaError_t rc = l2p_one_wave(l2p_sm_read_kernel<T, L>, threads, &blocks);
    if (rc != cudaSuccess) return rc;
    return l2p_launch(l2p_sm_read_kernel<T, L>, dim3(blocks), dim3(threads), 0, stream, window,
                      src, n, chunks, n / threads, chunk, sm, sink);
}

template <typename T>
static cudaError_t sm_read_as(const void *src, size_t nbytes, unsigned chunk, unsigned sm,
                              int loads, unsigned threads, unsigned *sink, cudaStream_t stream,
                              const l2p_window *window)
{
    size_t n = nbytes / sizeof(T);
    if (threads == 0 || threads > 1024) return cudaErrorInvalidValue;
    size_t chunks = l2p_l2_read_chunks(n, threads, (unsigned)loads);
    if (chunk >= chunks || chunks > 2147483647u) return cudaErrorInvalidValue;
    L2P_DISPATCH_LOADS(loads, L,
        return sm_read_launch<T, L>((const T *)src, n, (unsigned)chunks, chunk, sm, threads,
                                    sink, stream, window));
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t l2p_launch_sm_read(const void *src, size_t nbytes, unsigned chunk,
                                          unsigned sm, int width, int loads, unsigned threads,
                                          unsigned *sink, cudaStream_t stream,
                                          const l2p_window *window)
{
    if (width == 8)
        return sm_read_as<uint2>(src, nbytes, chunk, sm, loads, threads, sink, stream, window);
    if (width == 16)
        return sm_read_as<uint4>(src, nbytes, chunk, sm, loads, threads, sink, stream, window);
    return cudaErrorInvalidValue;
}
