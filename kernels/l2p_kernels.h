/* C-callable kernel launchers. Each returns the launch's cudaError_t and takes an optional
 * per-launch access policy window (NULL: none; the stream's own attribute then applies).
 * Arguments are validated by the caller (csrc/py/kernels.c through the core); the launchers
 * only refuse values no caller should pass (cudaErrorInvalidValue). */
#ifndef L2P_KERNELS_H
#define L2P_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "l2p_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a read kernel's words must fold to for it to store to the sink (l2p_sink.cuh). */
#define L2P_MAGIC 0x9e3779b9u

/* The current device's scratch word for the read kernels' `sink` (a device variable: no
 * allocation, so capture-safe). */
cudaError_t l2p_device_sink(unsigned **out);

/* Read the current device's sink word and clear it (the caller waits for the device first):
 * what a read kernel stored when the words a thread read folded to L2P_MAGIC
 * (kernels/l2p_sink.cuh). A test plants the magic in one word and sees whether the read
 * covered it. */
cudaError_t l2p_sink_take(unsigned *value);

/* An empty kernel of one block of one thread: what a launch costs. */
cudaError_t l2p_launch_noop(cudaStream_t stream, const l2p_window *window);

/* data[i] = data[i] * scale + shift over n floats (the guide example's kernels A, B, C). */
cudaError_t l2p_launch_scale_shift(float *data, size_t n, float scale, float shift,
                                   cudaStream_t stream, const l2p_window *window);

/* ---- gather: out[i] = src[map[i]] on 32-bit words (int32 or float32) ---- */
enum { L2P_GATHER_PLAIN = 0, L2P_GATHER_RESTRICT = 1, L2P_GATHER_TEXTURE = 2 };

/* `oob` (optional, device int): set to 1 when a map entry is outside [0, src_n); such
 * entries write 0 instead of reading out of bounds. `tex` is used by the texture variant. */
cudaError_t l2p_launch_gather(int variant, uint32_t *out, const uint32_t *src, size_t src_n,
                              const void *map, int map_is_int64, size_t n,
                              unsigned long long tex, int *oob, cudaStream_t stream,
                              const l2p_window *window);

/* The current device's flag for `oob` (a device variable: capture-safe), and reading it:
 * *was_set gets its value and the flag is cleared (synchronous, on the legacy stream). */
cudaError_t l2p_device_gather_flag(int **out);
cudaError_t l2p_gather_flag_take(int *was_set);

/* map[i] uniform in [0, range), from a counter-based hash of (seed, i). */
cudaError_t l2p_launch_random_map(void *map, int map_is_int64, size_t n, size_t range,
                                  uint64_t seed, cudaStream_t stream);

/* ---- coalescing patterns ---- */
typedef struct {
    const void *src;          /* loads: element i of `width` bytes */
    const void *src2;         /* optional second source, read at broadcast_index */
    void *dst;                /* stores: element store_offset + t * store_stride */
    const int32_t *index;     /* optional: thread t loads element index[t] */
    long long load_offset, load_stride;
    long long store_offset, store_stride;
    long long broadcast_index;
    unsigned blocks, threads; /* the launch shape; every thread loads once and stores once */
    int width;                /* 1, 2, 4, 8, 16 */
    int load_flavour, store_flavour;
} l2p_pattern_args;

cudaError_t l2p_launch_pattern(const l2p_pattern_args *a, cudaStream_t stream,
                               const l2p_window *window);

/* ---- streaming over 16-byte words (nbytes a multiple of 16) ---- */
enum { L2P_STREAM_READ = 0, L2P_STREAM_WRITE, L2P_STREAM_COPY, L2P_STREAM_TRIAD };

/* read: src; write: dst; copy: dst = src; triad (float32): dst = src + scalar * src2.
 * `sink` receives a value only when the data hash to a magic number: it keeps reads alive. */
cudaError_t l2p_launch_streaming(int op, void *dst, const void *src, const void *src2,
                                 size_t nbytes, float scalar, int load_flavour,
                                 int store_flavour, unsigned blocks, unsigned threads,
                                 unsigned *sink, cudaStream_t stream, const l2p_window *window);

/* Read nbytes `repeats` times inside one launch, in words of `width` (8 or 16) bytes, each
 * thread making `loads` (8, 16, 32, 64) independent loads; the shape is l2p_grid.h's
 * (repeats * chunks blocks of `threads` threads). An L2-resident buffer stays in L2.
 * repeats 0 and loads 0 take l2p_grid.h's defaults, as l2p_l2_read_shape_of says. */
cudaError_t l2p_launch_l2_read(const void *src, size_t nbytes, int repeats, int load_flavour,
                               int width, int loads, unsigned threads, unsigned *sink,
                               cudaStream_t stream, const l2p_window *window);

/* The shape l2_read launches with on the current device: repeats 0 and loads 0 take the
 * defaults of l2p_grid.h (loads from each candidate kernel's occupancy). */
typedef struct {
    int repeats, loads;
    size_t blocks; /* repeats x chunks */
    size_t bytes;  /* read per launch: repeats x the buffer's whole words */
    /* the kernel launched: its registers per thread and static shared memory per block
     * (filled by l2p_l2_read_shape_of only) */
    int registers;
    size_t shared_bytes;
    /* 1: every block's rows are whole and l2p_l2_read_rows runs (no per-load test); the
     * launch branches on it */
    int whole_rows;
} l2p_l2_read_shape;
cudaError_t l2p_l2_read_shape_of(size_t nbytes, int repeats, int load_flavour, int width,
                                 int loads, unsigned threads, l2p_l2_read_shape *out);

/* One chunk of l2_read's shape (chunk < its chunk count of nbytes; default load) read by one
 * block on the SM whose %smid is `sm`; every other block exits without a load. An id that no
 * SM has reads nothing. Launches must not overlap (they share a device counter). */
cudaError_t l2p_launch_sm_read(const void *src, size_t nbytes, unsigned chunk, unsigned sm,
                               int width, int loads, unsigned threads, unsigned *sink,
                               cudaStream_t stream, const l2p_window *window);

/* The L2-resident read through the bulk copy engine (sm_90+): `blocks` blocks each stream
 * chunks of `chunk` bytes (a multiple of 16, at most nbytes) into shared memory, 4 stages deep.
 * Reads the first nbytes / chunk * chunk bytes, `repeats` times. */
cudaError_t l2p_launch_bulk_read(const void *src, size_t nbytes, int repeats, unsigned chunk,
                                 unsigned blocks, cudaStream_t stream, const l2p_window *window);

/* One thread spins until `ns` nanoseconds of %globaltimer have passed: queued before a timed
 * region, it lets the host enqueue the region's launches before the GPU reaches them. */
cudaError_t l2p_launch_spin(unsigned long long ns, cudaStream_t stream);

/* ---- persistence ---- */
/* The Best Practices guide's kernel over `threads` threads:
 * hot[t % hot_n] = 2 * hot[t % hot_n]; cold[t % cold_n] = 2 * cold[t % cold_n].
 * read_only: the same accesses, summed into `sink` instead of written back. */
cudaError_t l2p_launch_hot_cold(int32_t *hot, size_t hot_n, int32_t *cold, size_t cold_n,
                                size_t threads, int read_only, unsigned *sink,
                                cudaStream_t stream, const l2p_window *window);

/* Stream cold (16-byte words) once while re-reading hot (16-byte words, cyclically), each
 * with its own load flavour. */
cudaError_t l2p_launch_hot_cold_read(const void *hot, size_t hot_bytes, const void *cold,
                                     size_t cold_bytes, int hot_flavour, int cold_flavour,
                                     unsigned blocks, unsigned threads, unsigned *sink,
                                     cudaStream_t stream, const l2p_window *window);

/* ---- the set-aside tax probe (tax_probe.cu) ---- */
/* `accesses` 4-byte accesses over table[0, n): kind 0 read, 1 write, 2 read-modify-write,
 * 3 atomicAdd (l2p_tax_kind's order); random: uniform positions from `seed`, else streaming
 * (thread t of the grid-stride loop takes i % n). Reads fold into `sink`. words > 0: access i
 * also reads companion[j * accesses + i] for j < words (the companion stream; the buffer
 * holds words * accesses words) and adds them to what it writes. row_words (random only; a
 * power of two up to 32, dividing n): accesses go in whole rows of that many words at random
 * rows; arrays (streaming only; 1 up to n): access i touches position p = i % (n / arrays) of
 * each of `arrays` equal parts of the table and reads companion[j * (n / arrays) + p] (a
 * buffer of words * (n / arrays) words, re-read every pass). 1 and 1: the probe every
 * earlier row was measured with. */
cudaError_t l2p_launch_tax_probe(int kind, int random, uint32_t *table, size_t n,
                                 unsigned long long accesses, unsigned seed,
                                 const uint32_t *companion, unsigned words, unsigned row_words,
                                 unsigned arrays, unsigned blocks,
                                 unsigned threads, unsigned *sink, cudaStream_t stream,
                                 const l2p_window *window);

#ifdef __cplusplus
}
#endif
#endif
