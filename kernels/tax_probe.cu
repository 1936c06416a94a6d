/* The set-aside tax probe: 4-byte reads, writes, read-modify-writes or atomicAdds over a
 * table of n words, at random (uniform) or streaming (coalesced, cyclic) positions, with no
 * window and no persisting access: what a set-aside costs work that never asks for it.
 * A companion stream (words > 0) reads `words` more 4-byte words per access from a buffer
 * of words * accesses words, each once and coalesced, as real writes read their indices and
 * values alongside (k = words bytes streamed per byte written); the words read feed the
 * value written (a zero companion leaves every result as without one).
 * Shaped variants (the access shapes of foreign work, l2p_tax_shape): random positions taken
 * as whole rows of 2^row_shift words (row i / 2^row_shift of the access order at a random
 * row: a warp writes a 128-byte row whole, as an embedding backward writes its rows), or a
 * streaming sweep over `arrays` arrays side by side (the table split in `arrays` equal parts,
 * each access touching position p of every one, as an optimizer step reads and writes param,
 * m and v; its companion is `words` arrays of one part's length, read at p each pass). The
 * unshaped kernel is the one every earlier row was measured with, unchanged. */
#include <stdint.h>

#include "l2p_kernels.h"
#include "l2p_launch.cuh"
#include "l2p_sink.cuh"

/* A per-thread seed that differs in every bit between neighbouring threads (Murmur3's mix). */
__device__ static inline unsigned l2p_tax_mix(unsigned x)
{
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

/* KIND: 0 read, 1 write, 2 read-modify-write, 3 atomicAdd (l2p_tax_kind's order). Indices
 * stay 32-bit (the table has fewer than 2^32 words): 64-bit division would make the random
 * variant compute-bound. */
template <int KIND>
__device__ static inline void l2p_tax_touch(unsigned *table, unsigned idx, unsigned x, unsigned c,
                                            unsigned &acc)
{
    if (KIND == 0) acc += table[idx] + c;
    else if (KIND == 1) table[idx] = x ^ c;
    else if (KIND == 2) table[idx] = table[idx] * 3u + 1u + c;
    else atomicAdd(&table[idx], 1u + c);
}

/* SHAPED with RANDOM: rows of 2^row_shift words, rows = n >> row_shift (n a multiple of the
 * row, the check's); the row of access i is a hash of i >> row_shift (stateless, so that the
 * lanes of one row agree). SHAPED streaming: `arrays` parts of len = n / arrays words. */
template <int KIND, int RANDOM>
__global__ void l2p_tax_probe_shaped(unsigned *table, unsigned n, unsigned long long accesses,
                                     unsigned seed, const unsigned *companion, unsigned words,
                                     unsigned row_shift, unsigned arrays, unsigned *sink)
{
    unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned rows = n >> row_shift, mask = (1u << row_shift) - 1u, len = n / arrays;
    unsigned pos = (unsigned)(t % len), step = (unsigned)(stride % len), acc = 0;
    for (unsigned long long i = t; i < accesses; i += stride) {
        unsigned c = 0; /* random: fresh words (access i's); a sweep: position pos's, re-read
                           every pass as an optimizer re-reads its gradient */
        for (unsigned j = 0; j < words; j++)
            c += RANDOM ? companion[j * accesses + i] : companion[(size_t)j * len + pos];
        if (RANDOM) {
            unsigned h = l2p_tax_mix(seed ^ l2p_tax_mix((unsigned)(i >> row_shift)));
            unsigned idx = (__umulhi(h, rows) << row_shift) | ((unsigned)i & mask);
            l2p_tax_touch<KIND>(table, idx, h, c, acc);
        } else {
            for (unsigned a = 0; a < arrays; a++)
                l2p_tax_touch<KIND>(table, a * len + pos, pos, c, acc);
            pos += step;
            if (pos >= len) pos -= len;
        }
    }
    if (KIND == 0) l2p_keep(acc, sink);
}

template <int KIND, int RANDOM>
__global__ void l2p_tax_probe_kernel(unsigned *table, unsigned n, unsigned long long accesses,
                                     unsigned seed, const unsigned *companion, unsigned words,
                                     unsigned *sink)
{
    unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned x = l2p_tax_mix(seed ^ l2p_tax_mix((unsigned)t)) | 1u; /* xorshift: nonzero */
    unsigned pos = (unsigned)(t % n), step = (unsigned)(stride % n), acc = 0;
    for (unsigned long long i = t; i < accesses; i += stride) {
        unsigned idx;
        if (RANDOM) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            idx = __umulhi(x, n); /* uniform in [0, n) without a division */
        } else {
            idx = pos; /* pos = i % n, kept without a division per access */
            pos += step;
            if (pos >= n) pos -= n;
        }
        unsigned c = 0; /* the companion words of access i: consecutive i, consecutive words */
        for (unsigned j = 0; j < words; j++) c += companion[j * accesses + i];
        if (KIND == 0) acc += table[idx] + c;
        else if (KIND == 1) table[idx] = x ^ c;
        else if (KIND == 2) table[idx] = table[idx] * 3u + 1u + c;
        else atomicAdd(&table[idx], 1u + c);
    }
    if (KIND == 0) l2p_keep(acc, sink);
}

template <int RANDOM>
static cudaError_t launch_kind(int kind, unsigned *table, unsigned n, unsigned long long accesses,
                               unsigned seed, const unsigned *companion, unsigned words,
                               dim3 grid, dim3 block, unsigned *sink, cudaStream_t stream,
                               const l2p_window *window)
{
    switch (kind) {
    case 0: return l2p_launch(l2p_tax_probe_kernel<0, RANDOM>, grid, block, 0, stream, window,
                              table, n, accesses, seed, companion, words, sink);
    case 1: return l2p_launch(l2p_tax_probe_kernel<1, RANDOM>, grid, block, 0, stream, window,
                              table, n, accesses, seed, companion, words, sink);
    case 2: return l2p_launch(l2p_tax_probe_kernel<2, RANDOM>, grid, block, 0, stream, window,
                              table, n, accesses, seed, companion, words, sink);
    case 3: return l2p_launch(l2p_tax_probe_kernel<3, RANDOM>, grid, block, 0, stream, window,
                              table, n, accesses, seed, companion, words, sink);
    }
    return cudaErrorInvalidValue;
}

template <int RANDOM>
static cudaError_t launch_shaped(int kind, unsigned *table, unsigned n, unsigned long long accesses,
                                 unsigned seed, const unsigned *companion, unsigned words,
                                 unsigned row_shift, unsigned arrays, dim3 grid, dim3 block,
                                 unsigned *sink, cudaStream_t stream, const l2p_window *window)
{
    switch (kind) {
    case 0: return l2p_launch(l2p_tax_probe_shaped<0, RANDOM>, grid, block, 0, stream, window,
                              table, n, accesses, seed, companion, words, row_shift, arrays, sink);
    case 1: return l2p_launch(l2p_tax_probe_shaped<1, RANDOM>, grid, block, 0, stream, window,
                              table, n, accesses, seed, companion, words, row_shift, arrays, sink);
    case 2: return l2p_launch(l2p_tax_probe_shaped<2, RANDOM>, grid, block, 0, stream, window,
                              table, n, accesses, seed, companion, words, row_shift, arrays, sink);
    case 3: return l2p_launch(l2p_tax_probe_shaped<3, RANDOM>, grid, block, 0, stream, window,
                              table, n, accesses, seed, companion, words, row_shift, arrays, sink);
    }
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t l2p_launch_tax_probe(int kind, int random, uint32_t *table, size_t n,
                                            unsigned long long accesses, unsigned seed,
                                            const uint32_t *companion, unsigned words,
                                            unsigned row_words, unsigned arrays,
                                            unsigned blocks, unsigned threads, unsigned *sink,
                                            cudaStream_t stream, const l2p_window *window)
{
    if (accesses == 0) return cudaSuccess;
    if (n == 0 || n > 0xffffffffull || blocks == 0 || threads == 0 || (words && !companion))
        return cudaErrorInvalidValue;
    if (row_words != 1 || arrays != 1) {
        /* the core's check (l2p_tax_check_shape) keeps these; a launch never relies on it */
        if (row_words == 0 || row_words > 32 || (row_words & (row_words - 1)) || arrays == 0 ||
            arrays > n || n % row_words || (row_words > 1 && !random) || (arrays > 1 && random))
            return cudaErrorInvalidValue;
        unsigned shift = 0;
        while ((1u << shift) < row_words) shift++;
        if (random)
            return launch_shaped<1>(kind, table, (unsigned)n, accesses, seed, companion, words,
                                    shift, 1, dim3(blocks), dim3(threads), sink, stream, window);
        return launch_shaped<0>(kind, table, (unsigned)n, accesses, seed, companion, words, 0,
                                arrays, dim3(blocks), dim3(threads), sink, stream, window);
    }
    if (random)
        return launch_kind<1>(kind, table, (unsigned)n, accesses, seed, companion, words,
                              dim3(blocks), dim3(threads), sink, stream, window);
    return launch_kind<0>(kind, table, (unsigned)n, accesses, seed, companion, words,
                          dim3(blocks), dim3(threads), sink, stream, window);
}
