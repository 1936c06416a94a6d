/* The kernel suite's launch checks: what each kernel needs of its buffers and arguments
 * beyond one argument's own range (which the binder checks from the row). Pure C on plain
 * integers, so that C callers get the same checks and tests/c can test them without a GPU.
 * Each returns L2P_OK or fails with a message that names the argument and the allowed range. */
#ifndef L2P_LAUNCH_H
#define L2P_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ranges of single arguments that the checks below enforce. The kernel rows (csrc/py/kernels.c)
 * take their ranges from these, so a row and its check cannot disagree. */
#define L2P_PATTERN_WIDTH_MAX 16       /* pattern: width, a power of two in [1, this] */
#define L2P_L2_READ_WIDTH_MIN 8        /* l2_read: width, 8 or 16 */
#define L2P_L2_READ_WIDTH_MAX 16
#define L2P_L2_READ_LOADS_MIN 8        /* l2_read: loads, a power of two in [MIN, MAX] */
#define L2P_L2_READ_LOADS_MAX 64
#define L2P_REPEATS_MAX 2147483647LL   /* l2_read, bulk_read: repeats in [1, this] */
#define L2P_BULK_CHUNK_MIN 16          /* bulk_read: chunk, a multiple of 16 in [MIN, MAX] */
#define L2P_BULK_CHUNK_MAX 49152
#define L2P_ACCESSES_MAX 4294967295LL  /* hot_cold: accesses in [1, this] (32-bit thread ids) */
#define L2P_SM_ID_MAX 1023             /* sm_read: sm, an SM identifier (%smid) in [0, this] */
#define L2P_CHUNK_MAX 2147483646LL     /* sm_read: chunk in [0, this] (a grid's blocks) */

/* A device buffer as the checks see it. An absent optional buffer is all zero (present 0). */
typedef struct {
    int present;
    uintptr_t ptr;
    size_t nbytes;
    size_t itemsize; /* bytes per element */
    char kind;       /* NumPy's dtype kind: 'f', 'i', 'u', ... */
} l2p_buf_desc;

/* Elements of a buffer (0 for an absent one). */
size_t l2p_buf_count(const l2p_buf_desc *b);

/* gather: out and src of one dtype, out and map of one length. */
l2p_status l2p_launch_check_gather(const l2p_buf_desc *out, const l2p_buf_desc *src,
                                   const l2p_buf_desc *map);
/* gather, variant texture: src fits the device's largest 1-D linear texture. */
l2p_status l2p_launch_check_gather_texture(const l2p_buf_desc *src, size_t max_width);

/* random_map: the range (`*range`, or out's length when not given) lies in [1, 2^31 - 1] for
 * an int32 map, [1, 2^63 - 1] for an int64 one. Sets *range to the range to use. */
l2p_status l2p_launch_random_map_range(const l2p_buf_desc *out, int given, long long *range);

/* pattern: the coalescing study's kernel; `blocks * threads` threads, each reading element
 * load_offset + t * load_stride of src (or index[t], checked by l2p_launch_check_pattern_index)
 * and writing store_offset + t * store_stride of dst, in `width`-byte elements. */
typedef struct {
    l2p_buf_desc src, dst, src2, index;
    long long blocks, threads, width;
    long long load_offset, load_stride, store_offset, store_stride, broadcast_index;
} l2p_pattern_check;
l2p_status l2p_launch_check_pattern(const l2p_pattern_check *p);
/* The index buffer's entries, copied to the host: `index` holds int32 entries in [0, src's
 * element count) for every thread. The copy is synchronous, so an indexed pattern is refused
 * while `stream` captures (it would break the capture). */
l2p_status l2p_launch_check_pattern_index(int device, cudaStream_t stream,
                                          const l2p_pattern_check *p);

/* streaming's ops, in the order of kernels/l2p_kernels.h's L2P_STREAM_* (kernels.c asserts it),
 * and their names (NULL-terminated). */
enum { L2P_OP_READ = 0, L2P_OP_WRITE, L2P_OP_COPY, L2P_OP_TRIAD, L2P_OP_COUNT };
extern const char *const l2p_stream_op_names[L2P_OP_COUNT + 1];

/* streaming: op (L2P_OP_*) needs dst unless it reads, src unless it writes, src2 for a
 * triad; all given buffers have one size; a triad works on float32. */
l2p_status l2p_launch_check_streaming(int op, const l2p_buf_desc *dst, const l2p_buf_desc *src,
                                      const l2p_buf_desc *src2);

/* l2_read: src as words of `width` bytes, and repeats * chunks blocks within a grid. */
l2p_status l2p_launch_check_l2_read(const l2p_buf_desc *src, long long repeats, long long width,
                                    long long loads, long long threads);

/* sm_read: l2_read's shape (width, loads, threads as l2_read checks them), `sm` in
 * [0, L2P_SM_ID_MAX] (not every id is an SM's: %smid may have holes, and an id that no SM has
 * reads nothing), `chunk` one of src's chunks of that shape. */
l2p_status l2p_launch_check_sm_read(const l2p_buf_desc *src, long long sm, long long chunk,
                                    long long width, long long loads, long long threads);

/* bulk_read: src 16-byte aligned and at least one chunk, the chunk a multiple of 16, and a
 * device of compute capability 9.0 or newer (the bulk copy engine). */
l2p_status l2p_launch_check_bulk_read(const l2p_buf_desc *src, long long chunk, int cc_major,
                                      int cc_minor);

/* hot_cold: hot and cold in [1, 2^32) elements; *accesses defaults (given 0) to cold's
 * length. */
l2p_status l2p_launch_hot_cold_accesses(const l2p_buf_desc *hot, const l2p_buf_desc *cold,
                                        int given, long long *accesses);

/* hot_cold_read: hot holds at least one 16-byte word. */
l2p_status l2p_launch_check_hot_cold_read(const l2p_buf_desc *hot);
/* tax_probe: the table's 32-bit words are indexed by 32-bit integers. */
l2p_status l2p_launch_check_tax_probe(const l2p_buf_desc *table);

#ifdef __cplusplus
}
#endif
#endif
