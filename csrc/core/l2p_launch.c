#include "l2p_launch.h"

#include <stdio.h>
#include <stdlib.h>

#include "l2p_checks.h"
#include "l2p_grid.h"
#include "l2p_memory.h"
#include "l2p_stream.h"

#define INT32_LIMIT 2147483647LL
#define UINT32_LIMIT 4294967295ULL

const char *const l2p_stream_op_names[L2P_OP_COUNT + 1] = {"read", "write", "copy", "triad",
                                                           NULL};

size_t l2p_buf_count(const l2p_buf_desc *b)
{
    return b->present && b->itemsize ? b->nbytes / b->itemsize : 0;
}

/* "float32", "int64", ...: a dtype's name from its kind and size, for messages. */
static const char *dtype_name(const l2p_buf_desc *b, char *buf, size_t size)
{
    const char *base = b->kind == 'f' ? "float" : b->kind == 'i' ? "int" : b->kind == 'u' ? "uint"
                                                                                          : "?";
    snprintf(buf, size, "%s%zu", base, b->itemsize * 8);
    return buf;
}

l2p_status l2p_launch_check_gather(const l2p_buf_desc *out, const l2p_buf_desc *src,
                                   const l2p_buf_desc *map)
{
    char a[16], b[16];
    if (out->kind != src->kind || out->itemsize != src->itemsize)
        return l2p_fail(L2P_ERR_TYPE, "out: dtype %s differs from src's %s",
                        dtype_name(out, a, sizeof a), dtype_name(src, b, sizeof b));
    if (l2p_buf_count(out) != l2p_buf_count(map))
        return l2p_fail(L2P_ERR_VALUE, "out: %zu elements, but map has %zu", l2p_buf_count(out),
                        l2p_buf_count(map));
    return L2P_OK;
}

l2p_status l2p_launch_check_gather_texture(const l2p_buf_desc *src, size_t max_width)
{
    if (l2p_buf_count(src) > max_width)
        return l2p_fail(L2P_ERR_VALUE, "src: %zu elements exceed the device's largest 1-D linear "
                        "texture (%zu elements); use variant='restrict'", l2p_buf_count(src),
                        max_width);
    return L2P_OK;
}

l2p_status l2p_launch_random_map_range(const l2p_buf_desc *out, int given, long long *range)
{
    int is64 = out->itemsize == 8;
    if (!given) *range = (long long)l2p_buf_count(out);
    if (*range < 1 || (!is64 && *range > INT32_LIMIT))
        return l2p_fail(L2P_ERR_VALUE, "range: %lld is outside [1, %s]", *range,
                        is64 ? "2^63 - 1" : "2^31 - 1 (int32 map)");
    return L2P_OK;
}

/* Elements of `width` bytes in b. */
static long long elements(const l2p_buf_desc *b, long long width)
{
    return (long long)(b->nbytes / (size_t)width);
}

l2p_status l2p_launch_check_pattern(const l2p_pattern_check *p)
{
    long long total;
    int w = (int)p->width;
    if (p->width < 1 || p->width > L2P_PATTERN_WIDTH_MAX || (p->width & (p->width - 1)))
        return l2p_fail(L2P_ERR_VALUE, "width: %lld; allowed 1, 2, 4, 8, 16", p->width);
    L2P_TRY(l2p_check_launch_shape(p->blocks, p->threads));
    total = p->blocks * p->threads; /* < 2^41: no overflow */
    L2P_TRY(l2p_check_alignment(p->src.ptr, w, "src"));
    L2P_TRY(l2p_check_alignment(p->dst.ptr, w, "dst"));
    L2P_TRY(l2p_check_affine_range(p->store_offset, p->store_stride, total,
                                   elements(&p->dst, p->width), "store"));
    if (p->src2.present) {
        L2P_TRY(l2p_check_alignment(p->src2.ptr, w, "src2"));
        L2P_TRY(l2p_check_affine_range(p->broadcast_index, 0, 1, elements(&p->src2, p->width),
                                       "broadcast_index"));
    }
    if (p->index.present) return L2P_OK; /* l2p_launch_check_pattern_index reads it */
    return l2p_check_affine_range(p->load_offset, p->load_stride, total,
                                  elements(&p->src, p->width), "load");
}

l2p_status l2p_launch_check_pattern_index(int device, cudaStream_t stream,
                                          const l2p_pattern_check *p)
{
    long long total = p->blocks * p->threads;
    int capturing = 0;
    if (!p->index.present) return L2P_OK;
    if (p->index.itemsize != 4 || p->index.kind != 'i')
        return l2p_fail(L2P_ERR_TYPE, "index: entries must be int32");
    if (l2p_buf_count(&p->index) < (size_t)total)
        return l2p_fail(L2P_ERR_VALUE, "index: %zu entries for %lld threads",
                        l2p_buf_count(&p->index), total);
    L2P_TRY(l2p_stream_is_capturing(stream, &capturing));
    if (capturing)
        return l2p_fail(L2P_ERR_VALUE, "index: an indexed pattern checks its indices on the "
                        "host, which a stream capture forbids; launch it outside the capture");
    int32_t *host = malloc((size_t)total * 4 + 4);
    if (!host) return l2p_fail(L2P_ERR_NO_MEMORY, "index: no host memory for %lld entries", total);
    l2p_status rc = l2p_memory_to_host(device, host, (const void *)p->index.ptr, (size_t)total * 4);
    if (rc == L2P_OK)
        rc = l2p_check_index_range(host, total, elements(&p->src, p->width), "index");
    free(host);
    return rc;
}

l2p_status l2p_launch_check_streaming(int op, const l2p_buf_desc *dst, const l2p_buf_desc *src,
                                      const l2p_buf_desc *src2)
{
    if (op < 0 || op >= L2P_OP_COUNT)
        return l2p_fail(L2P_ERR_VALUE, "op: %d is outside [0, %d)", op, L2P_OP_COUNT);
    const int need[3] = {op != L2P_OP_READ, op != L2P_OP_WRITE, op == L2P_OP_TRIAD};
    const l2p_buf_desc *bufs[3] = {dst, src, src2};
    const char *names[3] = {"dst", "src", "src2"};
    const l2p_buf_desc *first = need[1] ? src : dst;
    for (int i = 0; i < 3; i++) /* every needed buffer first: `first` must be present */
        if (need[i] && !bufs[i]->present)
            return l2p_fail(L2P_ERR_TYPE, "%s: op '%s' needs this buffer", names[i],
                            l2p_stream_op_names[op]);
    for (int i = 0; i < 3; i++) {
        const l2p_buf_desc *b = bufs[i];
        if (!b->present) continue;
        if (b->nbytes != first->nbytes)
            return l2p_fail(L2P_ERR_VALUE, "%s: %zu bytes, but %s has %zu", names[i], b->nbytes,
                            need[1] ? "src" : "dst", first->nbytes);
        if (op == L2P_OP_TRIAD && (b->kind != 'f' || b->itemsize != 4)) {
            char t[16];
            return l2p_fail(L2P_ERR_TYPE, "%s: triad works on float32, got %s", names[i],
                            dtype_name(b, t, sizeof t));
        }
    }
    return L2P_OK;
}

l2p_status l2p_launch_check_l2_read(const l2p_buf_desc *src, long long repeats, long long width,
                                    long long loads, long long threads)
{
    /* repeats 0 and loads 0: the launcher's defaults (l2p_grid.h), in range by construction */
    if (width != L2P_L2_READ_WIDTH_MIN && width != L2P_L2_READ_WIDTH_MAX)
        return l2p_fail(L2P_ERR_VALUE, "width: %lld; allowed %d or %d", width,
                        L2P_L2_READ_WIDTH_MIN, L2P_L2_READ_WIDTH_MAX);
    if (loads != 0 && (loads < L2P_L2_READ_LOADS_MIN || loads > L2P_L2_READ_LOADS_MAX ||
                       (loads & (loads - 1))))
        return l2p_fail(L2P_ERR_VALUE, "loads: %lld; allowed a power of two in [%d, %d], or "
                        "None", loads, L2P_L2_READ_LOADS_MIN, L2P_L2_READ_LOADS_MAX);
    L2P_TRY(l2p_check_launch_shape(1, threads));
    if (repeats < 0 || repeats > L2P_REPEATS_MAX)
        return l2p_fail(L2P_ERR_VALUE, "repeats: %lld is outside [1, %lld]", repeats,
                        L2P_REPEATS_MAX);
    L2P_TRY(l2p_check_words(src->ptr, src->nbytes, (unsigned)width, "src"));
    /* with loads None the most chunks any choice makes (8 loads) */
    size_t chunks = l2p_l2_read_chunks(src->nbytes / (size_t)width, (unsigned)threads,
                                       loads ? (unsigned)loads : L2P_L2_READ_LOADS_MIN);
    if (chunks && (size_t)repeats > (size_t)INT32_LIMIT / chunks)
        return l2p_fail(L2P_ERR_VALUE, "repeats: %lld passes of %zu blocks exceed a grid's "
                        "2^31 - 1 blocks%s", repeats, chunks,
                        loads ? "" : " (with loads None, 8 loads per thread)");
    return L2P_OK;
}

l2p_status l2p_launch_check_sm_read(const l2p_buf_desc *src, long long sm, long long chunk,
                                    long long width, long long loads, long long threads)
{
    L2P_TRY(l2p_launch_check_l2_read(src, 1, width, loads, threads));
    if (sm < 0 || sm > L2P_SM_ID_MAX)
        return l2p_fail(L2P_ERR_VALUE, "sm: %lld is outside [0, %d]", sm, L2P_SM_ID_MAX);
    size_t chunks = l2p_l2_read_chunks(src->nbytes / (size_t)width, (unsigned)threads,
                                       (unsigned)loads);
    if (chunks == 0) return l2p_fail(L2P_ERR_VALUE, "src: empty (no chunk to read)");
    if (chunk < 0 || (size_t)chunk >= chunks)
        return l2p_fail(L2P_ERR_VALUE, "chunk: %lld is outside [0, %zu] (src's chunks of "
                        "%lld threads x %lld loads of %lld bytes)", chunk, chunks - 1, threads,
                        loads, width);
    return L2P_OK;
}

l2p_status l2p_launch_check_bulk_read(const l2p_buf_desc *src, long long chunk, int cc_major,
                                      int cc_minor)
{
    /* A misaligned source faults the copy engine, and the fault kills the context. */
    if (src->ptr % 16)
        return l2p_fail(L2P_ERR_VALUE, "src: address 0x%zx is not 16-byte aligned (the bulk "
                        "copy engine needs 16)", (size_t)src->ptr);
    if (chunk < L2P_BULK_CHUNK_MIN || chunk > L2P_BULK_CHUNK_MAX || chunk % 16)
        return l2p_fail(L2P_ERR_VALUE, "chunk: %lld bytes; allowed multiples of 16 in "
                        "[%d, %d]", chunk, L2P_BULK_CHUNK_MIN, L2P_BULK_CHUNK_MAX);
    if (src->nbytes < (size_t)chunk)
        return l2p_fail(L2P_ERR_VALUE, "src: %zu bytes, less than one chunk (%lld)", src->nbytes,
                        chunk);
    if (cc_major < 9)
        return l2p_fail(L2P_ERR_NOT_SUPPORTED, "bulk_read: the bulk copy engine needs compute "
                        "capability 9.0 or newer; this device is %d.%d", cc_major, cc_minor);
    return L2P_OK;
}

l2p_status l2p_launch_hot_cold_accesses(const l2p_buf_desc *hot, const l2p_buf_desc *cold,
                                        int given, long long *accesses)
{
    size_t hn = l2p_buf_count(hot), cn = l2p_buf_count(cold);
    if (hn == 0 || cn == 0 || hn > UINT32_LIMIT || cn > UINT32_LIMIT)
        return l2p_fail(L2P_ERR_VALUE, "hot, cold: sizes must be in [1, 2^32) elements (hot %zu, "
                        "cold %zu)", hn, cn);
    if (!given) *accesses = (long long)cn;
    if (*accesses < 1 || *accesses > L2P_ACCESSES_MAX)
        return l2p_fail(L2P_ERR_VALUE, "accesses: %lld is outside [1, 2^32 - 1]", *accesses);
    return L2P_OK;
}

l2p_status l2p_launch_check_hot_cold_read(const l2p_buf_desc *hot)
{
    if (hot->nbytes < 16)
        return l2p_fail(L2P_ERR_VALUE, "hot: must hold at least 16 bytes (one 16-byte word); "
                        "it holds %zu", hot->nbytes);
    return L2P_OK;
}

l2p_status l2p_launch_check_tax_probe(const l2p_buf_desc *table)
{
    size_t n = l2p_buf_count(table);
    if (n == 0 || n > 0xffffffffull)
        return l2p_fail(L2P_ERR_VALUE, "table: %zu words is outside [1, 2^32 - 1]", n);
    return L2P_OK;
}
