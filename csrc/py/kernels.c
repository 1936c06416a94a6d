/* The kernel table: one row per kernel of kernels/ (binder.h says how a row is read and how
 * to add one). Each row's `launch` only passes converted values to its C launcher; `check`
 * holds the relations between arguments that one argument's spec cannot say. `threads`
 * means threads per block everywhere. */
#include "binder.h"
#include "params.h"

#include "l2p_checks.h"
#include "l2p_flavour.h"
#include "l2p_grid.h"
#include "l2p_kernels.h"
#include "l2p_launch.h"
#include "l2p_memory.h"
#include "l2p_seedmap.h"
#include "l2p_tax.h"

#include <float.h>

/* Each kernel lists its arguments once, in an X-macro beside its glue: X(kernel, id, row).
 * The list makes both the row's arguments (named after `id`) and the enum the glue reads
 * them by (ARG_kernel_id), so the two cannot disagree. */
#define ARG_ID(kernel, id, row) ARG_##kernel##_##id,
#define ARG_ROW(kernel, id, row) {.name = #id, row},
#define BUF(k, w, al, fl) .type = L2P_A_BUFFER, .flags = fl, .kinds = k, .widths = w, .align = al
#define INT(d, l, h, fl) .type = L2P_A_INT, .flags = fl, .lo = l, .hi = h, .ival = d
/* Every float argument reaches its launcher as a C float: finite in float32's range. */
#define FLT(d, fl) .type = L2P_A_FLOAT, .flags = fl, .flo = -FLT_MAX, .fhi = FLT_MAX, .fval = d
#define CHOICE(c, d, fl) .type = L2P_A_CHOICE, .flags = fl, .choices = c, .ival = d
#define BOOL(d, fl) .type = L2P_A_BOOL, .flags = fl, .ival = d
#define OBJECT(conv, dft, pyt, fl) \
    .type = L2P_A_OBJECT, .flags = fl, .convert = conv, .deftext = dft, .pytype = pyt
#define KW L2P_A_KWONLY
#define OPT L2P_A_OPTIONAL
#define W4 L2P_W(4)
#define W48 (L2P_W(4) | L2P_W(8))
#define LOADS l2p_load_flavour_names
#define STORES l2p_store_flavour_names

static size_t count_of(l2p_BufferObject *b) { return b->nbytes / (size_t)PyDataType_ELSIZE(b->dtype); }

/* A buffer as the core's launch checks see it (all zero when absent). */
static l2p_buf_desc desc_of(l2p_BufferObject *b)
{
    l2p_buf_desc d = {0};
    if (!b) return d;
    d.present = 1;
    d.ptr = (uintptr_t)b->ptr;
    d.nbytes = b->nbytes;
    d.itemsize = (size_t)PyDataType_ELSIZE(b->dtype);
    d.kind = b->dtype->kind;
    return d;
}

/* ---- noop, scale_shift ---- */

static cudaError_t noop_launch(l2p_call *c) { return l2p_launch_noop(c->stream, c->window); }

#define SCALE_SHIFT_ARGS(X)                  \
    X(scale_shift, data, BUF("f", W4, 0, 0)) \
    X(scale_shift, scale, FLT(2.0, 0))       \
    X(scale_shift, shift, FLT(1.0, 0))
enum { SCALE_SHIFT_ARGS(ARG_ID) };

static cudaError_t scale_shift_launch(l2p_call *c)
{
    l2p_BufferObject *d = L2P_BUF(c, ARG_scale_shift_data);
    return l2p_launch_scale_shift((float *)d->ptr, d->nbytes / 4, (float)L2P_FLT(c, ARG_scale_shift_scale),
                                  (float)L2P_FLT(c, ARG_scale_shift_shift), c->stream, c->window);
}

#define SPIN_ARGS(X)                         \
    X(spin, ns, INT(0, 0, 60000000000LL, 0))
enum { SPIN_ARGS(ARG_ID) };

static cudaError_t spin_launch(l2p_call *c)
{
    return l2p_launch_spin((unsigned long long)L2P_INT(c, ARG_spin_ns), c->stream);
}

/* ---- gather ---- */

#define GATHER_ARGS(X)                                                            \
    X(gather, out, BUF("iuf", W4, 0, 0))                                          \
    X(gather, src, BUF("iuf", W4, 0, 0))                                          \
    X(gather, map, BUF("i", W48, 0, 0))                                           \
    X(gather, variant, CHOICE(gather_variants, 0, 0))                             \
    X(gather, check, OBJECT(check_convert, "True", "bool | Literal['sync']", KW)) \
    X(gather, texture, CHOICE(texture_modes, 0, KW))
enum { GATHER_ARGS(ARG_ID) };
enum { CHECK_OFF = 0, CHECK_ASYNC = 1, CHECK_SYNC = 2 };

/* gather's scratch: the texture object and the device's out-of-range flag. */
typedef struct {
    unsigned long long tex;
    int *flag;
} gather_scratch;
L2P_SCRATCH_FITS(gather_scratch);
#define G_SCRATCH(c) L2P_SCRATCH(c, gather_scratch)
static const char *const gather_variants[] = {"plain", "restrict", "texture", NULL};
static const char *const texture_modes[] = {"cached", "per_launch", NULL};

static int check_convert(PyObject *obj, long long *out)
{
    if (!obj || obj == Py_True) *out = CHECK_ASYNC;
    else if (obj == Py_False) *out = CHECK_OFF;
    else if (PyUnicode_Check(obj) && PyUnicode_CompareWithASCIIString(obj, "sync") == 0)
        *out = CHECK_SYNC;
    else {
        PyErr_Format(PyExc_ValueError, "check: %R is not one of True, False, 'sync'", obj);
        return -1;
    }
    return 0;
}

/* The texture object of src: cached on the buffer, or made for this launch only. */
static int gather_texture(l2p_call *c, l2p_BufferObject *src, int per_launch)
{
    size_t max_width;
    if (l2p_call_core(c, l2p_texture_max_width(c->device, &max_width)) < 0) return -1;
    l2p_buf_desc d = desc_of(src);
    if (l2p_call_core(c, l2p_launch_check_gather_texture(&d, max_width)) < 0) return -1;
    if (!per_launch && src->texture) {
        G_SCRATCH(c)->tex = src->texture;
        return 0;
    }
    unsigned long long *tex = &G_SCRATCH(c)->tex;
    if (l2p_call_core(c, l2p_texture_create(c->device, src->ptr, src->nbytes, tex)) < 0)
        return -1;
    if (!per_launch) src->texture = G_SCRATCH(c)->tex;
    return 0;
}

/* The device's out-of-range flag: a device variable, so checked gathers allocate nothing and
 * capture; the error surfaces at the next Stream.synchronize() or gather_errors(). */
static int gather_flag(l2p_call *c)
{
    int prev;
    cudaError_t rc;
    if (l2p_call_core(c, l2p_device_enter(c->device, &prev)) < 0) return -1;
    rc = l2p_device_gather_flag(&G_SCRATCH(c)->flag);
    l2p_device_leave(prev);
    if (rc == cudaSuccess) return 0;
    l2p_fail_cuda(rc, "cudaGetSymbolAddress(l2p_gather_oob)");
    return l2p_py_raise_int(c->st);
}

static int gather_check(l2p_call *c)
{
    l2p_buf_desc out = desc_of(L2P_BUF(c, ARG_gather_out)), src = desc_of(L2P_BUF(c, ARG_gather_src)),
                 map = desc_of(L2P_BUF(c, ARG_gather_map));
    if (l2p_call_core(c, l2p_launch_check_gather(&out, &src, &map)) < 0) return -1;
    if (L2P_INT(c, ARG_gather_check) != CHECK_OFF && gather_flag(c) < 0) return -1;
    /* A synchronous check must not report an earlier launch's entries as this one's. */
    if (L2P_INT(c, ARG_gather_check) == CHECK_SYNC && l2p_py_gather_flag_raise(c->st, c->device) != 0)
        return -1;
    if (L2P_INT(c, ARG_gather_variant) == L2P_GATHER_TEXTURE)
        return gather_texture(c, L2P_BUF(c, ARG_gather_src), L2P_INT(c, ARG_gather_texture) == 1);
    return 0;
}

static cudaError_t gather_launch(l2p_call *c)
{
    l2p_BufferObject *out = L2P_BUF(c, ARG_gather_out), *src = L2P_BUF(c, ARG_gather_src), *map = L2P_BUF(c, ARG_gather_map);
    return l2p_launch_gather((int)L2P_INT(c, ARG_gather_variant), (uint32_t *)out->ptr,
                             (const uint32_t *)src->ptr, src->nbytes / 4, map->ptr,
                             PyDataType_ELSIZE(map->dtype) == 8, count_of(out), G_SCRATCH(c)->tex, G_SCRATCH(c)->flag,
                             c->stream, c->window);
}

static int sync_stream(l2p_call *c)
{
    l2p_status rc;
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_stream_synchronize(c->device, c->stream);
    Py_END_ALLOW_THREADS
    return l2p_call_core(c, rc);
}

/* check='sync' waits and raises here; a per-launch texture (the seed's way) is destroyed
 * once the kernel that reads it has finished. */
static int gather_after(l2p_call *c, int launched)
{
    int rc = 0;
    if (launched && L2P_INT(c, ARG_gather_check) == CHECK_SYNC)
        rc = sync_stream(c) < 0 || l2p_py_gather_flag_raise(c->st, c->device) != 0 ? -1 : 0;
    if (L2P_INT(c, ARG_gather_texture) == 1 && G_SCRATCH(c)->tex) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        if (launched) (void)sync_stream(c);
        PyErr_Clear();
        PyErr_Restore(t, v, tb);
        l2p_texture_destroy(c->device, G_SCRATCH(c)->tex);
    }
    return rc;
}

/* ---- random_map ---- */

#define RANDOM_MAP_ARGS(X)                               \
    X(random_map, out, BUF("i", W48, 0, 0))              \
    X(random_map, seed, INT(0, 0, LLONG_MAX, 0))         \
    X(random_map, range, INT(0, 1, LLONG_MAX, KW | OPT))
enum { RANDOM_MAP_ARGS(ARG_ID) };

static int random_map_check(l2p_call *c)
{
    l2p_buf_desc out = desc_of(L2P_BUF(c, ARG_random_map_out));
    return l2p_call_core(c, l2p_launch_random_map_range(&out, c->v[ARG_random_map_range].given,
                                                        &L2P_INT(c, ARG_random_map_range)));
}

static cudaError_t random_map_launch(l2p_call *c)
{
    l2p_BufferObject *out = L2P_BUF(c, ARG_random_map_out);
    return l2p_launch_random_map(out->ptr, PyDataType_ELSIZE(out->dtype) == 8, count_of(out),
                                 (size_t)L2P_INT(c, ARG_random_map_range), (uint64_t)L2P_INT(c, ARG_random_map_seed),
                                 c->stream);
}

/* ---- coalescing patterns ---- */

#define PATTERN_ARGS(X)                                          \
    X(pattern, src, BUF(NULL, 0, 0, 0))                          \
    X(pattern, dst, BUF(NULL, 0, 0, 0))                          \
    X(pattern, threads, THREADS(32, KW))                         \
    X(pattern, blocks, BLOCKS(1, KW))                            \
    X(pattern, width, INT(4, 1, L2P_PATTERN_WIDTH_MAX, L2P_A_POW2)) \
    X(pattern, load_offset, INT(0, LLONG_MIN, LLONG_MAX, 0))     \
    X(pattern, load_stride, INT(1, LLONG_MIN, LLONG_MAX, 0))     \
    X(pattern, store_offset, INT(0, LLONG_MIN, LLONG_MAX, 0))    \
    X(pattern, store_stride, INT(1, LLONG_MIN, LLONG_MAX, 0))    \
    X(pattern, index, BUF("i", W4, 0, OPT))                      \
    X(pattern, src2, BUF(NULL, 0, 0, OPT))                       \
    X(pattern, broadcast_index, INT(0, LLONG_MIN, LLONG_MAX, 0)) \
    X(pattern, load, CHOICE(LOADS, 0, 0))                        \
    X(pattern, store, CHOICE(STORES, 0, 0))
enum { PATTERN_ARGS(ARG_ID) };

/* Indices are checked on the host (l2p_launch_check_pattern_index): patterns are small, and
 * a bad index would fault. */
static int pattern_check(l2p_call *c)
{
    l2p_pattern_check p = {
        .src = desc_of(L2P_BUF(c, ARG_pattern_src)), .dst = desc_of(L2P_BUF(c, ARG_pattern_dst)),
        .src2 = desc_of(L2P_BUF(c, ARG_pattern_src2)), .index = desc_of(L2P_BUF(c, ARG_pattern_index)),
        .blocks = L2P_INT(c, ARG_pattern_blocks), .threads = L2P_INT(c, ARG_pattern_threads),
        .width = L2P_INT(c, ARG_pattern_width), .load_offset = L2P_INT(c, ARG_pattern_load_offset),
        .load_stride = L2P_INT(c, ARG_pattern_load_stride), .store_offset = L2P_INT(c, ARG_pattern_store_offset),
        .store_stride = L2P_INT(c, ARG_pattern_store_stride), .broadcast_index = L2P_INT(c, ARG_pattern_broadcast_index)};
    if (l2p_call_core(c, l2p_launch_check_pattern(&p)) < 0) return -1;
    return l2p_call_core(c, l2p_launch_check_pattern_index(c->device, c->stream, &p));
}

static cudaError_t pattern_launch(l2p_call *c)
{
    l2p_BufferObject *src2 = L2P_BUF(c, ARG_pattern_src2), *index = L2P_BUF(c, ARG_pattern_index);
    l2p_pattern_args a = {
        .src = L2P_BUF(c, ARG_pattern_src)->ptr, .dst = L2P_BUF(c, ARG_pattern_dst)->ptr,
        .src2 = src2 ? src2->ptr : NULL, .index = index ? (const int32_t *)index->ptr : NULL,
        .load_offset = L2P_INT(c, ARG_pattern_load_offset), .load_stride = L2P_INT(c, ARG_pattern_load_stride),
        .store_offset = L2P_INT(c, ARG_pattern_store_offset), .store_stride = L2P_INT(c, ARG_pattern_store_stride),
        .broadcast_index = L2P_INT(c, ARG_pattern_broadcast_index), .blocks = (unsigned)L2P_INT(c, ARG_pattern_blocks),
        .threads = (unsigned)L2P_INT(c, ARG_pattern_threads), .width = (int)L2P_INT(c, ARG_pattern_width),
        .load_flavour = (int)L2P_INT(c, ARG_pattern_load), .store_flavour = (int)L2P_INT(c, ARG_pattern_store)};
    return l2p_launch_pattern(&a, c->stream, c->window);
}

/* ---- streaming ---- */

#define STREAMING_ARGS(X)                          \
    X(streaming, op, CHOICE(stream_ops, -1, 0))    \
    X(streaming, dst, BUF(NULL, 0, 16, KW | OPT))  \
    X(streaming, src, BUF(NULL, 0, 16, KW | OPT))  \
    X(streaming, src2, BUF(NULL, 0, 16, KW | OPT)) \
    X(streaming, scalar, FLT(3.0, KW))             \
    X(streaming, load, CHOICE(LOADS, 0, KW))       \
    X(streaming, store, CHOICE(STORES, 0, KW))     \
    X(streaming, blocks, BLOCKS(0, KW | OPT))      \
    X(streaming, threads, THREADS(0, KW | OPT))
enum { STREAMING_ARGS(ARG_ID) };
#define stream_ops l2p_stream_op_names
_Static_assert((int)L2P_STREAM_READ == (int)L2P_OP_READ && (int)L2P_STREAM_WRITE == (int)L2P_OP_WRITE &&
               (int)L2P_STREAM_COPY == (int)L2P_OP_COPY && (int)L2P_STREAM_TRIAD == (int)L2P_OP_TRIAD,
               "l2p_launch.h's ops follow l2p_kernels.h's");

static int streaming_check(l2p_call *c)
{
    l2p_buf_desc dst = desc_of(L2P_BUF(c, ARG_streaming_dst)), src = desc_of(L2P_BUF(c, ARG_streaming_src)),
                 src2 = desc_of(L2P_BUF(c, ARG_streaming_src2));
    return l2p_call_core(c, l2p_launch_check_streaming((int)L2P_INT(c, ARG_streaming_op), &dst, &src, &src2));
}

static void *ptr_of(l2p_BufferObject *b) { return b ? b->ptr : NULL; }

static cudaError_t streaming_launch(l2p_call *c)
{
    int op = (int)L2P_INT(c, ARG_streaming_op);
    l2p_BufferObject *first = L2P_BUF(c, op != L2P_STREAM_WRITE ? ARG_streaming_src : ARG_streaming_dst);
    return l2p_launch_streaming(op, ptr_of(L2P_BUF(c, ARG_streaming_dst)), ptr_of(L2P_BUF(c, ARG_streaming_src)),
                                ptr_of(L2P_BUF(c, ARG_streaming_src2)), first->nbytes,
                                (float)L2P_FLT(c, ARG_streaming_scalar), (int)L2P_INT(c, ARG_streaming_load),
                                (int)L2P_INT(c, ARG_streaming_store), (unsigned)L2P_INT(c, ARG_streaming_blocks),
                                (unsigned)L2P_INT(c, ARG_streaming_threads), c->sink, c->stream, c->window);
}

/* ---- L2-resident reads ---- */

/* l2_read's shape (l2p_grid.h), which sm_read shares: it reads one of l2_read's chunks.
 * l2_read's loads may be None (chosen from the launch); sm_read's chunk needs a number. */
#define L2_READ_SHAPE_ARGS(X, k, loads_default, loads_flags)                          \
    X(k, width, INT(8, L2P_L2_READ_WIDTH_MIN, L2P_L2_READ_WIDTH_MAX, KW | L2P_A_POW2)) \
    X(k, loads, INT(loads_default, L2P_L2_READ_LOADS_MIN, L2P_L2_READ_LOADS_MAX,       \
                    KW | L2P_A_POW2 | (loads_flags)))                                  \
    X(k, threads, THREADS(1024, KW))

#define L2_READ_ARGS(X)                                \
    X(l2_read, src, BUF(NULL, 0, 0, 0))                \
    X(l2_read, repeats, INT(0, 1, L2P_REPEATS_MAX, OPT))     \
    X(l2_read, load, CHOICE(LOADS, 0, KW))             \
    L2_READ_SHAPE_ARGS(X, l2_read, 0, OPT)
enum { L2_READ_ARGS(ARG_ID) };

static int l2_read_check(l2p_call *c)
{
    l2p_buf_desc src = desc_of(L2P_BUF(c, ARG_l2_read_src));
    return l2p_call_core(c, l2p_launch_check_l2_read(&src, L2P_INT(c, ARG_l2_read_repeats),
                                                     L2P_INT(c, ARG_l2_read_width), L2P_INT(c, ARG_l2_read_loads),
                                                     L2P_INT(c, ARG_l2_read_threads)));
}

static cudaError_t l2_read_launch(l2p_call *c)
{
    l2p_BufferObject *src = L2P_BUF(c, ARG_l2_read_src);
    return l2p_launch_l2_read(src->ptr, src->nbytes, (int)L2P_INT(c, ARG_l2_read_repeats),
                              (int)L2P_INT(c, ARG_l2_read_load), (int)L2P_INT(c, ARG_l2_read_width),
                              (int)L2P_INT(c, ARG_l2_read_loads), (unsigned)L2P_INT(c, ARG_l2_read_threads), c->sink,
                              c->stream, c->window);
}

/* One chunk of l2_read's shape read from one chosen SM (tools/investigations/l2-partitions). */
#define SM_READ_ARGS(X)                             \
    X(sm_read, src, BUF(NULL, 0, 0, 0))             \
    X(sm_read, sm, INT(0, 0, L2P_SM_ID_MAX, 0))     \
    X(sm_read, chunk, INT(0, 0, L2P_CHUNK_MAX, 0))  \
    L2_READ_SHAPE_ARGS(X, sm_read, 64, 0)
enum { SM_READ_ARGS(ARG_ID) };

static int sm_read_check(l2p_call *c)
{
    l2p_buf_desc src = desc_of(L2P_BUF(c, ARG_sm_read_src));
    return l2p_call_core(c, l2p_launch_check_sm_read(
                                &src, L2P_INT(c, ARG_sm_read_sm), L2P_INT(c, ARG_sm_read_chunk),
                                L2P_INT(c, ARG_sm_read_width), L2P_INT(c, ARG_sm_read_loads),
                                L2P_INT(c, ARG_sm_read_threads)));
}

static cudaError_t sm_read_launch(l2p_call *c)
{
    l2p_BufferObject *src = L2P_BUF(c, ARG_sm_read_src);
    return l2p_launch_sm_read(src->ptr, src->nbytes, (unsigned)L2P_INT(c, ARG_sm_read_chunk),
                              (unsigned)L2P_INT(c, ARG_sm_read_sm),
                              (int)L2P_INT(c, ARG_sm_read_width), (int)L2P_INT(c, ARG_sm_read_loads),
                              (unsigned)L2P_INT(c, ARG_sm_read_threads), c->sink, c->stream,
                              c->window);
}

#define BULK_READ_ARGS(X)                            \
    X(bulk_read, src, BUF(NULL, 0, 0, 0))            \
    X(bulk_read, repeats, INT(10, 1, L2P_REPEATS_MAX, 0)) \
    X(bulk_read, chunk, INT(16384, L2P_BULK_CHUNK_MIN, L2P_BULK_CHUNK_MAX, KW)) \
    X(bulk_read, blocks, BLOCKS(0, KW | OPT))
enum { BULK_READ_ARGS(ARG_ID) };

static int bulk_read_check(l2p_call *c)
{
    int major = 0, minor = 0;
    l2p_buf_desc src = desc_of(L2P_BUF(c, ARG_bulk_read_src));
    if (l2p_call_core(c, l2p_device_cc(c->device, &major, &minor)) < 0) return -1;
    return l2p_call_core(c, l2p_launch_check_bulk_read(&src, L2P_INT(c, ARG_bulk_read_chunk), major,
                                                       minor));
}

static cudaError_t bulk_read_launch(l2p_call *c)
{
    l2p_BufferObject *src = L2P_BUF(c, ARG_bulk_read_src);
    return l2p_launch_bulk_read(src->ptr, src->nbytes, (int)L2P_INT(c, ARG_bulk_read_repeats),
                                (unsigned)L2P_INT(c, ARG_bulk_read_chunk), (unsigned)L2P_INT(c, ARG_bulk_read_blocks),
                                c->stream, c->window);
}

/* ---- persistence ---- */

#define HOT_COLD_ARGS(X)                                   \
    X(hot_cold, hot, BUF("i", W4, 0, 0))                   \
    X(hot_cold, cold, BUF("i", W4, 0, 0))                  \
    X(hot_cold, accesses, INT(0, 1, L2P_ACCESSES_MAX, KW | OPT)) \
    X(hot_cold, read_only, BOOL(0, KW))
enum { HOT_COLD_ARGS(ARG_ID) };

static int hot_cold_check(l2p_call *c)
{
    l2p_buf_desc hot = desc_of(L2P_BUF(c, ARG_hot_cold_hot)), cold = desc_of(L2P_BUF(c, ARG_hot_cold_cold));
    return l2p_call_core(c, l2p_launch_hot_cold_accesses(&hot, &cold, c->v[ARG_hot_cold_accesses].given,
                                                         &L2P_INT(c, ARG_hot_cold_accesses)));
}

static cudaError_t hot_cold_launch(l2p_call *c)
{
    l2p_BufferObject *hot = L2P_BUF(c, ARG_hot_cold_hot), *cold = L2P_BUF(c, ARG_hot_cold_cold);
    return l2p_launch_hot_cold((int32_t *)hot->ptr, count_of(hot), (int32_t *)cold->ptr,
                               count_of(cold), (size_t)L2P_INT(c, ARG_hot_cold_accesses),
                               (int)L2P_INT(c, ARG_hot_cold_read_only), c->sink, c->stream, c->window);
}

#define HOT_COLD_READ_ARGS(X)                         \
    X(hot_cold_read, hot, BUF(NULL, 0, 16, 0))        \
    X(hot_cold_read, cold, BUF(NULL, 0, 16, 0))       \
    X(hot_cold_read, hot_load, CHOICE(LOADS, 0, KW))  \
    X(hot_cold_read, cold_load, CHOICE(LOADS, 0, KW)) \
    X(hot_cold_read, blocks, BLOCKS(0, KW | OPT))     \
    X(hot_cold_read, threads, THREADS(0, KW | OPT))
enum { HOT_COLD_READ_ARGS(ARG_ID) };

static int hot_cold_read_check(l2p_call *c)
{
    l2p_buf_desc hot = desc_of(L2P_BUF(c, ARG_hot_cold_read_hot));
    return l2p_call_core(c, l2p_launch_check_hot_cold_read(&hot));
}

static cudaError_t hot_cold_read_launch(l2p_call *c)
{
    l2p_BufferObject *hot = L2P_BUF(c, ARG_hot_cold_read_hot), *cold = L2P_BUF(c, ARG_hot_cold_read_cold);
    return l2p_launch_hot_cold_read(hot->ptr, hot->nbytes, cold->ptr, cold->nbytes,
                                    (int)L2P_INT(c, ARG_hot_cold_read_hot_load), (int)L2P_INT(c, ARG_hot_cold_read_cold_load),
                                    (unsigned)L2P_INT(c, ARG_hot_cold_read_blocks),
                                    (unsigned)L2P_INT(c, ARG_hot_cold_read_threads), c->sink, c->stream,
                                    c->window);
}

/* ---- the table ---- */

/* Launch shapes: the core's ranges (l2p_checks.h). */
#define BLOCKS(d, fl) INT(d, 1, L2P_BLOCKS_MAX, (fl) | L2P_A_BLOCKS)
#define THREADS(d, fl) INT(d, 1, L2P_THREADS_MAX, (fl) | L2P_A_THREADS)


/* ---- the set-aside tax probe ---- */

static const char *const tax_patterns[] = {"random", "streaming", NULL};

#define TAX_PROBE_ARGS(X)                                         \
    X(tax_probe, table, BUF("iu", W4, 0, 0))                      \
    X(tax_probe, kind, CHOICE(l2p_tax_kind_names, -1, 0))         \
    X(tax_probe, pattern, CHOICE(tax_patterns, 0, KW))            \
    X(tax_probe, accesses, INT(0, 1, LLONG_MAX, KW | OPT))        \
    X(tax_probe, seed, INT(1, 0, 4294967295LL, KW))               \
    X(tax_probe, blocks, BLOCKS(0, KW | OPT))                     \
    X(tax_probe, threads, THREADS(0, KW | OPT))                   \
    X(tax_probe, companion, BUF("iu", W4, 0, KW | OPT))           \
    X(tax_probe, companion_words, INT(0, LLONG_MIN, LLONG_MAX, KW)) \
    X(tax_probe, row_words, INT(1, LLONG_MIN, LLONG_MAX, KW))       \
    X(tax_probe, arrays, INT(1, LLONG_MIN, LLONG_MAX, KW))
enum { TAX_PROBE_ARGS(ARG_ID) };

static int tax_probe_check(l2p_call *c)
{
    l2p_buf_desc t = desc_of(L2P_BUF(c, ARG_tax_probe_table));
    if (l2p_call_core(c, l2p_launch_check_tax_probe(&t)) < 0) return -1;
    /* the shape's ranges are the core's (l2p_tax_check_shape) */
    if (l2p_call_core(c, l2p_tax_check_shape(L2P_INT(c, ARG_tax_probe_pattern) == 0,
                                             count_of(L2P_BUF(c, ARG_tax_probe_table)),
                                             L2P_INT(c, ARG_tax_probe_row_words),
                                             L2P_INT(c, ARG_tax_probe_arrays))) < 0)
        return -1;
    /* the default: four accesses per word */
    if (!c->v[ARG_tax_probe_accesses].given)
        L2P_INT(c, ARG_tax_probe_accesses) = 4 * (long long)count_of(L2P_BUF(c, ARG_tax_probe_table));
    l2p_BufferObject *comp = L2P_BUF(c, ARG_tax_probe_companion);
    /* the companion's range and size are the core's (l2p_tax_check_companion); a sweep over
     * arrays reads one part's length of it per word, every pass */
    long long arrays = L2P_INT(c, ARG_tax_probe_arrays), per = L2P_INT(c, ARG_tax_probe_accesses);
    if (arrays > 1) per = (long long)(count_of(L2P_BUF(c, ARG_tax_probe_table)) / (size_t)arrays);
    return l2p_call_core(c, l2p_tax_check_companion(comp != NULL, comp ? count_of(comp) : 0,
                                                    L2P_INT(c, ARG_tax_probe_companion_words),
                                                    per));
}

static cudaError_t tax_probe_launch(l2p_call *c)
{
    l2p_BufferObject *t = L2P_BUF(c, ARG_tax_probe_table);
    return l2p_launch_tax_probe((int)L2P_INT(c, ARG_tax_probe_kind),
                                L2P_INT(c, ARG_tax_probe_pattern) == 0, (uint32_t *)t->ptr,
                                count_of(t), (unsigned long long)L2P_INT(c, ARG_tax_probe_accesses),
                                (unsigned)L2P_INT(c, ARG_tax_probe_seed),
                                (const uint32_t *)ptr_of(L2P_BUF(c, ARG_tax_probe_companion)),
                                (unsigned)L2P_INT(c, ARG_tax_probe_companion_words),
                                (unsigned)L2P_INT(c, ARG_tax_probe_row_words),
                                (unsigned)L2P_INT(c, ARG_tax_probe_arrays),
                                (unsigned)L2P_INT(c, ARG_tax_probe_blocks),
                                (unsigned)L2P_INT(c, ARG_tax_probe_threads), c->sink, c->stream,
                                c->window);
}

const l2p_kernel l2p_kernel_table[] = {
    {"noop", "Launch an empty kernel (1 thread): what a launch costs.", L2P_K_DEVICE, NULL, NULL,
     noop_launch, NULL, {{0}}},
    {"spin", "One thread spins for `ns` nanoseconds of the GPU's clock: queued first, it keeps "
     "the GPU busy while the host enqueues what follows (so host launch costs can be timed).",
     L2P_K_DEVICE | L2P_K_NO_WINDOW, NULL, NULL, spin_launch, NULL,
     {SPIN_ARGS(ARG_ROW)}},
    {"scale_shift", "data = data * scale + shift over a float32 buffer, in place (the guide "
     "example's kernels).", 0, NULL, NULL, scale_shift_launch, NULL,
     {SCALE_SHIFT_ARGS(ARG_ROW)}},
    {"gather", "out[i] = src[map[i]] on 32-bit data with an int32 or int64 map. check=True records "
     "out-of-range entries on the device (raised at the next Stream.synchronize() or "
     "gather_errors()); check='sync' waits and raises now; out-of-range outputs are 0. "
     "texture='per_launch' makes and destroys a texture object per call (the study's way).",
     0, NULL, gather_check, gather_launch, gather_after,
     {GATHER_ARGS(ARG_ROW)}},
    {"random_map", "Fill an int32/int64 buffer with indices uniform in [0, range) (default: its "
     "size), on the device.", L2P_K_NO_WINDOW, NULL, random_map_check, random_map_launch, NULL,
     {RANDOM_MAP_ARGS(ARG_ROW)}},
    {"pattern", "The coalescing study's kernel: blocks x threads threads, thread t loads `width` "
     "bytes at element load_offset + t * load_stride (or index[t]) of src, optionally adds "
     "src2[broadcast_index], and stores at store_offset + t * store_stride of dst.",
     0, NULL, pattern_check, pattern_launch, NULL,
     {PATTERN_ARGS(ARG_ROW)}},
    {"streaming", "STREAM-style read / write / copy / triad over 16-byte words (triad: dst = src "
     "+ scalar * src2 on float32); blocks and threads default to 4 x 512 per SM.", L2P_K_SINK,
     l2p_streaming_grid, streaming_check, streaming_launch, NULL,
     {STREAMING_ARGS(ARG_ROW)}},
    {"l2_read", "Read src `repeats` times in one launch, in words of `width` bytes, each thread "
     "making `loads` independent loads, one per row of `threads` words (a block's footprint "
     "exceeds L1, so the L2 serves them); repeats x ceil(rows / loads) blocks. repeats None: "
     "enough passes to read 4 GiB per launch (the launch's 2-3 us ramp under 1 %); loads "
     "None: chosen from the waves each choice makes (64 once they make 4 waves; 8 when even "
     "8 fill under one wave; else 32, gpu-benches' own shape). l2_read_shape() says what a "
     "call launches.", L2P_K_SINK,
     NULL, l2_read_check, l2_read_launch, NULL,
     {L2_READ_ARGS(ARG_ROW)}},
    {"sm_read", "Read chunk `chunk` of src as l2_read's block `chunk` reads it (the same "
     "width, loads, threads; default load) from one block on the SM whose %smid is `sm`; the "
     "other blocks exit without a load, so the SM, and with it the L2 partition that serves "
     "the loads, is chosen. An id that no SM has reads nothing (0 sectors). Two sm_read "
     "launches must not run at the same time (they share a device counter).", L2P_K_SINK,
     NULL, sm_read_check, sm_read_launch, NULL,
     {SM_READ_ARGS(ARG_ROW)}},
    {"bulk_read", "Read src `repeats` times through the bulk copy engine into shared memory "
     "(sm_90+); blocks default to 2 per SM.", 0, l2p_bulk_read_grid, bulk_read_check, bulk_read_launch,
     NULL,
     {BULK_READ_ARGS(ARG_ROW)}},
    {"hot_cold", "The Best Practices guide's kernel on int32 buffers: `accesses` threads (default: "
     "cold's size), thread t doubling hot[t % len(hot)] and cold[t % len(cold)] (read_only: "
     "summing them instead).", L2P_K_SINK, NULL, hot_cold_check, hot_cold_launch, NULL,
     {HOT_COLD_ARGS(ARG_ROW)}},
    {"hot_cold_read", "Stream cold once while re-reading hot cyclically (16-byte words), each "
     "with its own load flavour.", L2P_K_SINK, l2p_streaming_grid, hot_cold_read_check,
     hot_cold_read_launch, NULL,
     {HOT_COLD_READ_ARGS(ARG_ROW)}},
    {"tax_probe", "The set-aside tax probe: `accesses` (default: 4 per word) 4-byte reads, "
     "writes, read-modify-writes or atomicAdds over a 32-bit table at random (from `seed`) or "
     "streaming positions; blocks and threads default to 4 x 512 per SM. companion (a 32-bit "
     "buffer of companion_words x accesses words) with companion_words=k in [1, 16]: each "
     "access also reads k words of it, coalesced and each once, and adds them to what it "
     "writes (a stream of k bytes per byte written, as real writes read their inputs). "
     "row_words (random only; 1, 2, 4, ..., 32 dividing the table): accesses go in whole rows "
     "of that many words at random rows (rows of 32 words: a warp writes a 128-byte line "
     "whole, as an embedding backward does); arrays (streaming only, [1, 16]): the table is "
     "that many equal arrays and access i touches position p = i % (words / arrays) of each "
     "(a sweep over param, m and v side by side, as an optimizer step), reading words "
     "j * len + p of companion (companion_words arrays of one part's length len, re-read every "
     "pass, as its gradient).",
     L2P_K_SINK,
     l2p_streaming_grid, tax_probe_check, tax_probe_launch, NULL,
     {TAX_PROBE_ARGS(ARG_ROW)}},
    {NULL, NULL, 0, NULL, NULL, NULL, NULL, {{0}}}};
