/* Python entry points of the kernels in kernels/: argument conversion, checks through the
 * core (csrc/core/l2p_checks, l2p_flavour), then the C launcher on the buffers' device. */
#include "l2p_py.h"

#include "l2p_checks.h"
#include "l2p_flavour.h"
#include "l2p_kernels.h"
#include "l2p_memory.h"

/* What every launch needs: the device, the stream and an optional per-launch window. */
typedef struct {
    l2p_state *st;
    int device, prev;
    cudaStream_t stream;
    PyObject *stream_obj;
    const l2p_window *window;
    l2p_BufferObject *used[4]; /* buffers the launch touches (borrowed) */
    int n_used;
} launch_ctx;

static int ctx_init(launch_ctx *c, PyObject *m, int device, PyObject *stream, PyObject *window)
{
    c->st = l2p_state_from_module(m);
    c->device = device;
    c->n_used = 0;
    if (l2p_py_stream_arg(c->st, stream, &c->stream, &c->stream_obj) < 0 ||
        l2p_py_window_arg(c->st, window, &c->window) < 0)
        return -1;
    return 0;
}

/* A buffer argument; NULL obj or None gives *out NULL when optional. */
static int buffer_arg(l2p_state *st, PyObject *obj, const char *name, int optional,
                      l2p_BufferObject **out)
{
    *out = NULL;
    if (!obj || obj == Py_None) {
        if (optional) return 0;
        PyErr_Format(PyExc_TypeError, "%s: a device buffer is required", name);
        return -1;
    }
    PyObject *b = l2p_buffer_as_buffer(st, obj);
    if (!b) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_Format(t ? t : PyExc_TypeError, "%s: %S", name, v ? v : Py_None);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        return -1;
    }
    *out = (l2p_BufferObject *)b;
    return 0;
}

static int check_kind(l2p_BufferObject *b, const char *name, const char *kinds, int itemsize)
{
    if (strchr(kinds, b->dtype->kind) && PyDataType_ELSIZE(b->dtype) == itemsize) return 0;
    PyErr_Format(PyExc_TypeError, "%s: dtype %R is not allowed here (want %d-byte %s)", name,
                 (PyObject *)b->dtype, itemsize,
                 strcmp(kinds, "f") == 0 ? "float" : strcmp(kinds, "iu") == 0 ? "int" : "int or float");
    return -1;
}

static int same_device(launch_ctx *c, l2p_BufferObject *b, const char *name)
{
    if (!b) return 0;
    if (b->device != c->device) {
        PyErr_Format(PyExc_ValueError, "%s: buffer is on device %d, the launch on device %d",
                     name, b->device, c->device);
        return -1;
    }
    if (c->n_used < 4) c->used[c->n_used++] = b;
    return 0;
}

static int flavour_arg(l2p_state *st, const char *name, const char *arg, int store, int *out)
{
    l2p_status rc = store ? l2p_store_flavour_parse(name, arg, out)
                          : l2p_load_flavour_parse(name, arg, out);
    return rc == L2P_OK ? 0 : l2p_py_raise_int(st);
}

static int core_ok(launch_ctx *c, l2p_status rc) { return rc == L2P_OK ? 0 : l2p_py_raise_int(c->st); }

/* Run a launcher on the context's device; report a failed launch; remember the stream. */
static PyObject *finish(launch_ctx *c, cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess) {
        l2p_fail_cuda(rc, what);
        return l2p_py_raise(c->st);
    }
    for (int i = 0; i < c->n_used; i++)
        if (l2p_buffer_note_use(c->used[i], c->stream_obj) < 0) return NULL;
    Py_RETURN_NONE;
}

#define LAUNCH(c, what, call)                                             \
    do {                                                                  \
        if (l2p_device_enter((c)->device, &(c)->prev) != L2P_OK) {        \
            l2p_py_raise((c)->st);                                        \
            goto done;                                                    \
        }                                                                 \
        cudaError_t rc_ = (call);                                         \
        l2p_device_leave((c)->prev);                                      \
        result = finish((c), rc_, what);                                  \
    } while (0)

/* The device's scratch word the read kernels may write (never in practice). It is a device
 * variable of the kernel module, not an allocation: no launch path allocates, so every kernel
 * can be the first call inside a stream capture. */
static unsigned *sink_for(launch_ctx *c)
{
    unsigned *sink = NULL;
    cudaError_t rc = cudaSuccess;
    if (l2p_device_enter(c->device, &c->prev) != L2P_OK) {
        l2p_py_raise(c->st);
        return NULL;
    }
    rc = l2p_device_sink(&sink);
    l2p_device_leave(c->prev);
    if (rc != cudaSuccess) {
        l2p_fail_cuda(rc, "cudaGetSymbolAddress(l2p_sink_word)");
        l2p_py_raise(c->st);
        return NULL;
    }
    return sink;
}

static void release(l2p_BufferObject **bs, int n)
{
    for (int i = 0; i < n; i++) Py_XDECREF(bs[i]);
}

/* ---- noop, scale_shift ---- */

static PyObject *k_noop(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"stream", "window", "device", NULL};
    PyObject *stream = Py_None, *window = Py_None, *device = Py_None, *result = NULL;
    launch_ctx c;
    int index;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOO:noop", names, &stream, &window, &device))
        return NULL;
    if (l2p_py_device_index(l2p_state_from_module(m), device, &index) < 0 ||
        ctx_init(&c, m, index, stream, window) < 0)
        return NULL;
    LAUNCH(&c, "l2p_launch_noop", l2p_launch_noop(c.stream, c.window));
done:
    return result;
}

static PyObject *k_scale_shift(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"data", "scale", "shift", "stream", "window", NULL};
    PyObject *data_obj, *stream = Py_None, *window = Py_None, *result = NULL;
    double scale = 2.0, shift = 1.0;
    l2p_BufferObject *data;
    launch_ctx c;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|dd$OO:scale_shift", names, &data_obj, &scale,
                                     &shift, &stream, &window))
        return NULL;
    if (buffer_arg(l2p_state_from_module(m), data_obj, "data", 0, &data) < 0) return NULL;
    if (data->dtype->type_num != NPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "data: dtype must be float32, got %R", (PyObject *)data->dtype);
        goto done;
    }
    if (ctx_init(&c, m, data->device, stream, window) < 0 || same_device(&c, data, "data") < 0)
        goto done;
    LAUNCH(&c, "l2p_launch_scale_shift",
           l2p_launch_scale_shift((float *)data->ptr, data->nbytes / 4, (float)scale,
                                  (float)shift, c.stream, c.window));
done:
    Py_DECREF(data);
    return result;
}

/* ---- gather ---- */

static int gather_variant(const char *name, int *out)
{
    static const char *const v[] = {"plain", "restrict", "texture"};
    for (int i = 0; i < 3; i++)
        if (strcmp(name, v[i]) == 0) {
            *out = i;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "variant: '%s' is not one of plain, restrict, texture", name);
    return -1;
}

/* The texture object of src: cached on the buffer, or made for this launch only. */
static int gather_texture(launch_ctx *c, l2p_BufferObject *src, int per_launch,
                          unsigned long long *tex)
{
    size_t max_width;
    if (l2p_texture_max_width(c->device, &max_width) != L2P_OK) return l2p_py_raise_int(c->st);
    if (src->nbytes / 4 > max_width) {
        PyErr_Format(PyExc_ValueError, "src: %zu elements exceed the device's largest 1-D linear "
                     "texture (%zu elements); use variant='restrict'", src->nbytes / 4, max_width);
        return -1;
    }
    if (!per_launch && src->texture) {
        *tex = src->texture;
        return 0;
    }
    if (l2p_texture_create(c->device, src->ptr, src->nbytes, tex) != L2P_OK)
        return l2p_py_raise_int(c->st);
    if (!per_launch) src->texture = *tex;
    return 0;
}

enum { CHECK_OFF = 0, CHECK_ASYNC = 1, CHECK_SYNC = 2 };

/* Raise for a set flag; 1 when raised, 0 when clear, -1 on a CUDA error. */
int l2p_py_gather_flag_raise(l2p_state *st, int device)
{
    int prev, was_set = 0;
    cudaError_t rc;
    if (l2p_device_enter(device, &prev) != L2P_OK) return l2p_py_raise_int(st);
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_gather_flag_take(&was_set);
    Py_END_ALLOW_THREADS
    l2p_device_leave(prev);
    if (rc != cudaSuccess) {
        l2p_fail_cuda(rc, "cudaMemcpyFromSymbol(l2p_gather_oob)");
        return l2p_py_raise_int(st);
    }
    if (!was_set) return 0;
    PyErr_Format(PyExc_ValueError, "map: a checked gather on device %d read map entries outside "
                 "its src (their outputs are 0)", device);
    return 1;
}

/* check (default True): the kernel records out-of-range map entries in the device's flag; no
 * allocation and no host sync, so checked gathers capture and cost what the kernel costs. The
 * error surfaces at the next Stream.synchronize() or kernels.gather_errors(). check="sync"
 * waits for this launch and raises here. */
static PyObject *gather_checked(launch_ctx *c, int variant, l2p_BufferObject *out,
                                l2p_BufferObject *src, l2p_BufferObject *map, int check,
                                unsigned long long tex)
{
    PyObject *result = NULL;
    int *flag = NULL;
    int is64 = PyDataType_ELSIZE(map->dtype) == 8;
    if (check != CHECK_OFF) {
        cudaError_t rc;
        if (l2p_device_enter(c->device, &c->prev) != L2P_OK) return l2p_py_raise(c->st);
        rc = l2p_device_gather_flag(&flag);
        l2p_device_leave(c->prev);
        if (rc != cudaSuccess) {
            l2p_fail_cuda(rc, "cudaGetSymbolAddress(l2p_gather_oob)");
            return l2p_py_raise(c->st);
        }
    }
    if (check == CHECK_SYNC && l2p_py_gather_flag_raise(c->st, c->device) != 0) return NULL;
    LAUNCH(c, "l2p_launch_gather",
           l2p_launch_gather(variant, (uint32_t *)out->ptr, (const uint32_t *)src->ptr,
                             src->nbytes / 4, map->ptr, is64, out->nbytes / 4, tex, flag,
                             c->stream, c->window));
    if (result && check == CHECK_SYNC) {
        l2p_status rc;
        Py_BEGIN_ALLOW_THREADS
        rc = l2p_stream_synchronize(c->stream);
        Py_END_ALLOW_THREADS
        if (rc != L2P_OK) {
            Py_CLEAR(result);
            l2p_py_raise(c->st);
        } else if (l2p_py_gather_flag_raise(c->st, c->device) != 0) Py_CLEAR(result);
    }
done:
    return result;
}

static int check_arg(PyObject *obj, int *out)
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

static PyObject *k_gather_errors(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"device", NULL};
    PyObject *dev = Py_None;
    int index;
    l2p_state *st = l2p_state_from_module(m);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:gather_errors", names, &dev) ||
        l2p_py_device_index(st, dev, &index) < 0)
        return NULL;
    l2p_status sync;
    Py_BEGIN_ALLOW_THREADS
    sync = l2p_device_synchronize(index);
    Py_END_ALLOW_THREADS
    if (sync != L2P_OK) return l2p_py_raise(st);
    int r = l2p_py_gather_flag_raise(st, index);
    if (r < 0) return NULL;
    if (r == 1) PyErr_Clear();
    return PyBool_FromLong(r);
}

static PyObject *k_gather(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"out", "src", "map", "variant", "check", "texture", "stream",
                            "window", NULL};
    PyObject *o_obj, *s_obj, *m_obj, *stream = Py_None, *window = Py_None, *result = NULL;
    const char *variant_name = "plain", *texture_mode = "cached";
    int check = CHECK_ASYNC, variant;
    PyObject *check_obj = NULL;
    l2p_BufferObject *b[3] = {NULL, NULL, NULL};
    l2p_state *st = l2p_state_from_module(m);
    launch_ctx c;
    unsigned long long tex = 0;
    int per_launch;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|s$OsOO:gather", names, &o_obj, &s_obj, &m_obj,
                                     &variant_name, &check_obj, &texture_mode, &stream, &window) ||
        check_arg(check_obj, &check) < 0)
        return NULL;
    if (gather_variant(variant_name, &variant) < 0) return NULL;
    per_launch = strcmp(texture_mode, "per_launch") == 0;
    if (!per_launch && strcmp(texture_mode, "cached") != 0)
        return PyErr_Format(PyExc_ValueError, "texture: '%s' is not one of cached, per_launch",
                            texture_mode);
    if (buffer_arg(st, o_obj, "out", 0, &b[0]) < 0 || buffer_arg(st, s_obj, "src", 0, &b[1]) < 0 ||
        buffer_arg(st, m_obj, "map", 0, &b[2]) < 0)
        goto done;
    if (check_kind(b[0], "out", "iuf", 4) < 0 || check_kind(b[1], "src", "iuf", 4) < 0 ||
        (check_kind(b[2], "map", "i", 4) < 0 && (PyErr_Clear(), check_kind(b[2], "map", "i", 8) < 0)))
        goto done;
    if (!PyArray_EquivTypes(b[0]->dtype, b[1]->dtype)) {
        PyErr_Format(PyExc_TypeError, "out: dtype %R differs from src's %R",
                     (PyObject *)b[0]->dtype, (PyObject *)b[1]->dtype);
        goto done;
    }
    if (b[0]->nbytes / 4 != b[2]->nbytes / PyDataType_ELSIZE(b[2]->dtype)) {
        PyErr_Format(PyExc_ValueError, "out: %zu elements, but map has %zu", b[0]->nbytes / 4,
                     b[2]->nbytes / PyDataType_ELSIZE(b[2]->dtype));
        goto done;
    }
    if (ctx_init(&c, m, b[0]->device, stream, window) < 0 || same_device(&c, b[0], "out") < 0 ||
        same_device(&c, b[1], "src") < 0 || same_device(&c, b[2], "map") < 0)
        goto done;
    if (variant == L2P_GATHER_TEXTURE && gather_texture(&c, b[1], per_launch, &tex) < 0) goto done;
    result = gather_checked(&c, variant, b[0], b[1], b[2], check, tex);
    if (per_launch && tex) {
        /* The seed's way: one texture object per launch, destroyed after the kernel ran. */
        Py_BEGIN_ALLOW_THREADS
        (void)l2p_stream_synchronize(c.stream);
        Py_END_ALLOW_THREADS
        l2p_texture_destroy(c.device, tex);
    }
done:
    release(b, 3);
    return result;
}

static int map_dtype_is64(l2p_state *st, PyObject *dtype_obj, int *is64)
{
    PyArray_Descr *d = NULL;
    (void)st;
    if (!PyArray_DescrConverter2(dtype_obj, &d)) return -1;
    *is64 = d ? d->type_num == NPY_INT64 : 0;
    int ok = !d || d->type_num == NPY_INT32 || d->type_num == NPY_INT64;
    if (!ok) PyErr_Format(PyExc_TypeError, "dtype: map dtype must be int32 or int64, got %R", (PyObject *)d);
    Py_XDECREF(d);
    return ok ? 0 : -1;
}

static PyObject *k_random_map(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"out", "seed", "range", "stream", NULL};
    PyObject *o_obj, *range_obj = Py_None, *stream = Py_None, *result = NULL;
    unsigned long long seed = 0;
    long long range;
    l2p_BufferObject *out;
    launch_ctx c;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|K$OO:random_map", names, &o_obj, &seed,
                                     &range_obj, &stream))
        return NULL;
    if (buffer_arg(l2p_state_from_module(m), o_obj, "out", 0, &out) < 0) return NULL;
    int is64 = PyDataType_ELSIZE(out->dtype) == 8;
    if (check_kind(out, "out", "i", is64 ? 8 : 4) < 0) goto done;
    size_t n = out->nbytes / (is64 ? 8 : 4);
    range = (long long)n;
    if (range_obj != Py_None && l2p_py_size_arg(range_obj, "range", &range) < 0) goto done;
    if (range < 1 || (!is64 && range > 2147483647LL)) {
        PyErr_Format(PyExc_ValueError, "range: %lld is outside [1, %s]", range,
                     is64 ? "2^63" : "2^31 - 1 (int32 map)");
        goto done;
    }
    if (ctx_init(&c, m, out->device, stream, Py_None) < 0 || same_device(&c, out, "out") < 0)
        goto done;
    LAUNCH(&c, "l2p_launch_random_map",
           l2p_launch_random_map(out->ptr, is64, n, (size_t)range, (uint64_t)seed, c.stream));
done:
    Py_DECREF(out);
    return result;
}

static PyObject *k_seed_map(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"n", "range", "dtype", "seed", NULL};
    PyObject *range_obj = Py_None, *dtype_obj = Py_None;
    long long n, range;
    unsigned int seed = 0;
    int is64;
    (void)m;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "L|O$OI:seed_map", names, &n, &range_obj,
                                     &dtype_obj, &seed))
        return NULL;
    if (map_dtype_is64(l2p_state_from_module(m), dtype_obj, &is64) < 0) return NULL;
    range = n;
    if (range_obj != Py_None && l2p_py_size_arg(range_obj, "range", &range) < 0) return NULL;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "n: %lld must be >= 0", n);
    if (range < 1 || range > 2147483647LL)
        return PyErr_Format(PyExc_ValueError, "range: %lld is outside [1, 2^31 - 1] (rand() "
                            "yields 31 bits)", range);
    npy_intp dims[1] = {(npy_intp)n};
    PyArrayObject *a = (PyArrayObject *)PyArray_SimpleNew(1, dims, is64 ? NPY_INT64 : NPY_INT32);
    if (!a) return NULL;
    Py_BEGIN_ALLOW_THREADS
    if (is64) l2p_seed_map_int64((int64_t *)PyArray_DATA(a), (size_t)n, (uint64_t)range, seed);
    else l2p_seed_map_int32((int32_t *)PyArray_DATA(a), (size_t)n, (uint32_t)range, seed);
    Py_END_ALLOW_THREADS
    return (PyObject *)a;
}

/* ---- coalescing patterns ---- */

static int pattern_index(launch_ctx *c, l2p_BufferObject *idx, long long total, long long limit)
{
    if (!idx) return 0;
    if (check_kind(idx, "index", "i", 4) < 0) return -1;
    if ((long long)(idx->nbytes / 4) < total) {
        PyErr_Format(PyExc_ValueError, "index: %zu entries for %lld threads", idx->nbytes / 4, total);
        return -1;
    }
    /* Indices are checked on the host: patterns are small, and a bad index would fault. */
    int32_t *host = PyMem_Malloc((size_t)total * 4 + 4);
    if (!host) {
        PyErr_NoMemory();
        return -1;
    }
    l2p_status rc = l2p_memory_to_host(idx->device, host, idx->ptr, (size_t)total * 4);
    if (rc == L2P_OK) rc = l2p_check_index_range(host, total, limit, "index");
    PyMem_Free(host);
    return core_ok(c, rc);
}

static int pattern_checks(launch_ctx *c, l2p_pattern_args *a, l2p_BufferObject **b)
{
    long long total = (long long)a->blocks * a->threads, w = a->width;
    long long src_n = (long long)(b[0]->nbytes / (size_t)w), dst_n = (long long)(b[1]->nbytes / (size_t)w);
    if (core_ok(c, l2p_check_width(w, "width")) < 0 ||
        core_ok(c, l2p_check_alignment((uintptr_t)b[0]->ptr, a->width, "src")) < 0 ||
        core_ok(c, l2p_check_alignment((uintptr_t)b[1]->ptr, a->width, "dst")) < 0 ||
        core_ok(c, l2p_check_affine_range(a->store_offset, a->store_stride, total, dst_n,
                                          "store")) < 0)
        return -1;
    if (b[2] && (core_ok(c, l2p_check_alignment((uintptr_t)b[2]->ptr, a->width, "src2")) < 0 ||
                 core_ok(c, l2p_check_affine_range(a->broadcast_index, 0, 1,
                                                   (long long)(b[2]->nbytes / (size_t)w),
                                                   "broadcast_index")) < 0))
        return -1;
    if (b[3]) return pattern_index(c, b[3], total, src_n);
    return core_ok(c, l2p_check_affine_range(a->load_offset, a->load_stride, total, src_n, "load"));
}

static PyObject *k_pattern(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"src", "dst", "threads", "blocks", "width", "load_offset",
                            "load_stride", "store_offset", "store_stride", "index", "src2",
                            "broadcast_index", "load", "store", "stream", "window", NULL};
    PyObject *s_obj, *d_obj, *idx_obj = Py_None, *s2_obj = Py_None, *stream = Py_None;
    PyObject *window = Py_None, *result = NULL;
    long long threads = 32, blocks = 1, width = 4;
    const char *load = "default", *store = "wb";
    l2p_pattern_args a;
    l2p_BufferObject *b[4] = {NULL, NULL, NULL, NULL};
    l2p_state *st = l2p_state_from_module(m);
    launch_ctx c;
    memset(&a, 0, sizeof a);
    a.load_stride = a.store_stride = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$LLLLLLLOOLssOO:pattern", names, &s_obj, &d_obj,
                                     &threads, &blocks, &width, &a.load_offset, &a.load_stride,
                                     &a.store_offset, &a.store_stride, &idx_obj, &s2_obj,
                                     &a.broadcast_index, &load, &store, &stream, &window))
        return NULL;
    if (core_ok(&(launch_ctx){.st = st}, l2p_check_launch_shape(blocks, threads)) < 0 ||
        core_ok(&(launch_ctx){.st = st}, l2p_check_width(width, "width")) < 0 ||
        flavour_arg(st, load, "load", 0, &a.load_flavour) < 0 ||
        flavour_arg(st, store, "store", 1, &a.store_flavour) < 0)
        return NULL;
    a.blocks = (unsigned)blocks;
    a.threads = (unsigned)threads;
    a.width = (int)width;
    if (buffer_arg(st, s_obj, "src", 0, &b[0]) < 0 || buffer_arg(st, d_obj, "dst", 0, &b[1]) < 0 ||
        buffer_arg(st, s2_obj, "src2", 1, &b[2]) < 0 || buffer_arg(st, idx_obj, "index", 1, &b[3]) < 0)
        goto done;
    if (ctx_init(&c, m, b[0]->device, stream, window) < 0 || same_device(&c, b[0], "src") < 0 ||
        same_device(&c, b[1], "dst") < 0 || same_device(&c, b[2], "src2") < 0 ||
        same_device(&c, b[3], "index") < 0 || pattern_checks(&c, &a, b) < 0)
        goto done;
    a.src = b[0]->ptr;
    a.dst = b[1]->ptr;
    a.src2 = b[2] ? b[2]->ptr : NULL;
    a.index = b[3] ? (const int32_t *)b[3]->ptr : NULL;
    LAUNCH(&c, "l2p_launch_pattern", l2p_launch_pattern(&a, c.stream, c.window));
done:
    release(b, 4);
    return result;
}

/* ---- streaming ---- */

static int grid_args_for(launch_ctx *c, void (*shape)(int, unsigned *, unsigned *),
                         PyObject *blocks_obj, PyObject *threads_obj, unsigned *blocks,
                         unsigned *threads);

static int grid_args(launch_ctx *c, PyObject *blocks_obj, PyObject *threads_obj,
                     unsigned *blocks, unsigned *threads)
{
    return grid_args_for(c, l2p_streaming_grid, blocks_obj, threads_obj, blocks, threads);
}

static int grid_args_for(launch_ctx *c, void (*shape)(int, unsigned *, unsigned *),
                         PyObject *blocks_obj, PyObject *threads_obj, unsigned *blocks,
                         unsigned *threads)
{
    int sms;
    if (l2p_device_sm_count(c->device, &sms) != L2P_OK) return l2p_py_raise_int(c->st);
    shape(sms, blocks, threads);
    long long b = *blocks, t = *threads;
    if ((blocks_obj != Py_None && l2p_py_size_arg(blocks_obj, "blocks", &b) < 0) ||
        (threads_obj != Py_None && l2p_py_size_arg(threads_obj, "threads", &t) < 0))
        return -1;
    if (core_ok(c, l2p_check_launch_shape(b, t)) < 0) return -1;
    *blocks = (unsigned)b;
    *threads = (unsigned)t;
    return 0;
}

static const char *const stream_ops[] = {"read", "write", "copy", "triad"};

static PyObject *k_streaming(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"op", "dst", "src", "src2", "scalar", "load", "store", "blocks",
                            "threads", "stream", "window", NULL};
    const char *op_name, *load = "default", *store = "wb";
    PyObject *d_obj = Py_None, *s_obj = Py_None, *s2_obj = Py_None, *stream = Py_None;
    PyObject *window = Py_None, *blocks_obj = Py_None, *threads_obj = Py_None, *result = NULL;
    double scalar = 3.0;
    int op = -1, lf, sf;
    unsigned blocks, threads, *sink;
    l2p_BufferObject *b[3] = {NULL, NULL, NULL};
    l2p_state *st = l2p_state_from_module(m);
    launch_ctx c;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$OOOdssOOOO:streaming", names, &op_name, &d_obj,
                                     &s_obj, &s2_obj, &scalar, &load, &store, &blocks_obj,
                                     &threads_obj, &stream, &window))
        return NULL;
    for (int i = 0; i < 4; i++)
        if (strcmp(op_name, stream_ops[i]) == 0) op = i;
    if (op < 0) return PyErr_Format(PyExc_ValueError, "op: '%s' is not one of read, write, copy, triad", op_name);
    if (flavour_arg(st, load, "load", 0, &lf) < 0 || flavour_arg(st, store, "store", 1, &sf) < 0)
        return NULL;
    int need_dst = op != L2P_STREAM_READ, need_src = op != L2P_STREAM_WRITE;
    if (buffer_arg(st, d_obj, "dst", !need_dst, &b[0]) < 0 ||
        buffer_arg(st, s_obj, "src", !need_src, &b[1]) < 0 ||
        buffer_arg(st, s2_obj, "src2", op != L2P_STREAM_TRIAD, &b[2]) < 0)
        goto done;
    l2p_BufferObject *first = need_src ? b[1] : b[0];
    size_t nbytes = first->nbytes;
    const char *bn[3] = {"dst", "src", "src2"};
    if (ctx_init(&c, m, first->device, stream, window) < 0) goto done;
    for (int i = 0; i < 3; i++) {
        if (!b[i]) continue;
        if (same_device(&c, b[i], bn[i]) < 0 ||
            core_ok(&c, l2p_check_words16((uintptr_t)b[i]->ptr, b[i]->nbytes, bn[i])) < 0)
            goto done;
        if (b[i]->nbytes != nbytes) {
            PyErr_Format(PyExc_ValueError, "%s: %zu bytes, but %s has %zu", bn[i], b[i]->nbytes,
                         need_src ? "src" : "dst", nbytes);
            goto done;
        }
    }
    if (op == L2P_STREAM_TRIAD &&
        (check_kind(b[0], "dst", "f", 4) < 0 || check_kind(b[1], "src", "f", 4) < 0 ||
         check_kind(b[2], "src2", "f", 4) < 0))
        goto done;
    if (grid_args(&c, blocks_obj, threads_obj, &blocks, &threads) < 0 || !(sink = sink_for(&c)))
        goto done;
    LAUNCH(&c, "l2p_launch_streaming",
           l2p_launch_streaming(op, b[0] ? b[0]->ptr : NULL, b[1] ? b[1]->ptr : NULL,
                                b[2] ? b[2]->ptr : NULL, nbytes, (float)scalar, lf, sf, blocks,
                                threads, sink, c.stream, c.window));
done:
    release(b, 3);
    return result;
}

static PyObject *k_l2_read(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"src", "repeats", "load", "unroll", "blocks", "threads", "stream",
                            "window", NULL};
    PyObject *s_obj, *stream = Py_None, *window = Py_None, *blocks_obj = Py_None;
    PyObject *threads_obj = Py_None, *result = NULL;
    int repeats = 10, lf, unroll = 8;
    const char *load = "cg";
    unsigned blocks, threads, *sink;
    l2p_BufferObject *src;
    l2p_state *st = l2p_state_from_module(m);
    launch_ctx c;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i$siOOOO:l2_read", names, &s_obj, &repeats,
                                     &load, &unroll, &blocks_obj, &threads_obj, &stream, &window))
        return NULL;
    if (repeats < 1) return PyErr_Format(PyExc_ValueError, "repeats: %d must be >= 1", repeats);
    if (unroll != 1 && unroll != 2 && unroll != 4 && unroll != 8 && unroll != 16)
        return PyErr_Format(PyExc_ValueError, "unroll: %d is not one of 1, 2, 4, 8, 16", unroll);
    if (flavour_arg(st, load, "load", 0, &lf) < 0 || buffer_arg(st, s_obj, "src", 0, &src) < 0)
        return NULL;
    if (ctx_init(&c, m, src->device, stream, window) < 0 || same_device(&c, src, "src") < 0 ||
        core_ok(&c, l2p_check_words16((uintptr_t)src->ptr, src->nbytes, "src")) < 0 ||
        grid_args_for(&c, l2p_l2_read_grid, blocks_obj, threads_obj, &blocks, &threads) < 0 ||
        !(sink = sink_for(&c)))
        goto done;
    LAUNCH(&c, "l2p_launch_l2_read",
           l2p_launch_l2_read(src->ptr, src->nbytes, repeats, lf, unroll, blocks, threads, sink,
                              c.stream, c.window));
done:
    Py_DECREF(src);
    return result;
}

static PyObject *k_bulk_read(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"src", "repeats", "chunk", "blocks", "stream", "window", NULL};
    PyObject *s_obj, *stream = Py_None, *window = Py_None, *blocks_obj = Py_None, *result = NULL;
    int repeats = 10;
    long long chunk = 16384;
    l2p_BufferObject *src;
    l2p_device_props p;
    launch_ctx c;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i$LOOO:bulk_read", names, &s_obj, &repeats,
                                     &chunk, &blocks_obj, &stream, &window))
        return NULL;
    if (repeats < 1) return PyErr_Format(PyExc_ValueError, "repeats: %d must be >= 1", repeats);
    if (chunk < 16 || chunk % 16 || chunk > 49152)
        return PyErr_Format(PyExc_ValueError, "chunk: %lld bytes; allowed multiples of 16 in "
                            "[16, 49152]", chunk);
    if (buffer_arg(l2p_state_from_module(m), s_obj, "src", 0, &src) < 0) return NULL;
    if ((uintptr_t)src->ptr % 16) { /* the bulk copy engine faults on it: the context dies */
        PyErr_Format(PyExc_ValueError, "src: address 0x%zx is not 16-byte aligned (the bulk "
                     "copy engine needs 16)", (size_t)(uintptr_t)src->ptr);
        goto done;
    }
    if (ctx_init(&c, m, src->device, stream, window) < 0 || same_device(&c, src, "src") < 0)
        goto done;
    if (l2p_device_get_properties(c.device, &p) != L2P_OK) {
        l2p_py_raise(c.st);
        goto done;
    }
    if (p.cc_major < 9) {
        l2p_fail(L2P_ERR_NOT_SUPPORTED, "bulk_read: the bulk copy engine needs compute "
                 "capability 9.0 or newer; this device is %d.%d", p.cc_major, p.cc_minor);
        l2p_py_raise(c.st);
        goto done;
    }
    if (src->nbytes < (size_t)chunk) {
        PyErr_Format(PyExc_ValueError, "src: %zu bytes, less than one chunk (%lld)", src->nbytes,
                     chunk);
        goto done;
    }
    long long blocks = 2LL * p.multiprocessor_count;
    if (blocks_obj != Py_None && l2p_py_size_arg(blocks_obj, "blocks", &blocks) < 0) goto done;
    if (core_ok(&c, l2p_check_launch_shape(blocks, 32)) < 0) goto done;
    LAUNCH(&c, "l2p_launch_bulk_read",
           l2p_launch_bulk_read(src->ptr, src->nbytes, repeats, (unsigned)chunk, (unsigned)blocks,
                                c.stream, c.window));
done:
    Py_DECREF(src);
    return result;
}

/* ---- persistence ---- */

static PyObject *k_hot_cold(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"hot", "cold", "threads", "read_only", "stream", "window", NULL};
    PyObject *h_obj, *c_obj, *threads_obj = Py_None, *stream = Py_None, *window = Py_None;
    PyObject *result = NULL;
    int read_only = 0;
    long long threads;
    unsigned *sink;
    l2p_BufferObject *b[2] = {NULL, NULL};
    l2p_state *st = l2p_state_from_module(m);
    launch_ctx c;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$OpOO:hot_cold", names, &h_obj, &c_obj,
                                     &threads_obj, &read_only, &stream, &window))
        return NULL;
    if (buffer_arg(st, h_obj, "hot", 0, &b[0]) < 0 || buffer_arg(st, c_obj, "cold", 0, &b[1]) < 0 ||
        check_kind(b[0], "hot", "i", 4) < 0 || check_kind(b[1], "cold", "i", 4) < 0)
        goto done;
    size_t hn = b[0]->nbytes / 4, cn = b[1]->nbytes / 4;
    threads = (long long)cn;
    if (threads_obj != Py_None && l2p_py_size_arg(threads_obj, "threads", &threads) < 0) goto done;
    if (hn == 0 || cn == 0 || hn > 0xffffffffu || cn > 0xffffffffu || threads > 0xffffffffLL) {
        PyErr_Format(PyExc_ValueError, "hot, cold, threads: sizes must be in [1, 2^32) elements "
                     "(hot %zu, cold %zu, threads %lld)", hn, cn, threads);
        goto done;
    }
    if (ctx_init(&c, m, b[0]->device, stream, window) < 0 || same_device(&c, b[0], "hot") < 0 ||
        same_device(&c, b[1], "cold") < 0 || !(sink = sink_for(&c)))
        goto done;
    LAUNCH(&c, "l2p_launch_hot_cold",
           l2p_launch_hot_cold((int32_t *)b[0]->ptr, hn, (int32_t *)b[1]->ptr, cn,
                               (size_t)threads, read_only, sink, c.stream, c.window));
done:
    release(b, 2);
    return result;
}

static PyObject *k_hot_cold_read(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"hot", "cold", "hot_load", "cold_load", "blocks", "threads",
                            "stream", "window", NULL};
    PyObject *h_obj, *c_obj, *stream = Py_None, *window = Py_None, *blocks_obj = Py_None;
    PyObject *threads_obj = Py_None, *result = NULL;
    const char *hl = "default", *cl = "default";
    int hf, cf;
    unsigned blocks, threads, *sink;
    l2p_BufferObject *b[2] = {NULL, NULL};
    l2p_state *st = l2p_state_from_module(m);
    launch_ctx c;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$ssOOOO:hot_cold_read", names, &h_obj, &c_obj,
                                     &hl, &cl, &blocks_obj, &threads_obj, &stream, &window))
        return NULL;
    if (flavour_arg(st, hl, "hot_load", 0, &hf) < 0 || flavour_arg(st, cl, "cold_load", 0, &cf) < 0)
        return NULL;
    if (buffer_arg(st, h_obj, "hot", 0, &b[0]) < 0 || buffer_arg(st, c_obj, "cold", 0, &b[1]) < 0)
        goto done;
    if (ctx_init(&c, m, b[0]->device, stream, window) < 0 || same_device(&c, b[0], "hot") < 0 ||
        same_device(&c, b[1], "cold") < 0 ||
        core_ok(&c, l2p_check_words16((uintptr_t)b[0]->ptr, b[0]->nbytes, "hot")) < 0 ||
        core_ok(&c, l2p_check_words16((uintptr_t)b[1]->ptr, b[1]->nbytes, "cold")) < 0)
        goto done;
    if (b[0]->nbytes == 0) {
        PyErr_SetString(PyExc_ValueError, "hot: must hold at least 16 bytes");
        goto done;
    }
    if (grid_args(&c, blocks_obj, threads_obj, &blocks, &threads) < 0 || !(sink = sink_for(&c)))
        goto done;
    LAUNCH(&c, "l2p_launch_hot_cold_read",
           l2p_launch_hot_cold_read(b[0]->ptr, b[0]->nbytes, b[1]->ptr, b[1]->nbytes, hf, cf,
                                    blocks, threads, sink, c.stream, c.window));
done:
    release(b, 2);
    return result;
}

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) (PyCFunction)(void (*)(void))(f)

PyMethodDef l2p_kernel_functions[] = {
    {"noop", FN(k_noop), KW,
     "noop(*, stream=None, window=None, device=None): launch an empty kernel (1 thread)."},
    {"scale_shift", FN(k_scale_shift), KW,
     "scale_shift(data, scale=2.0, shift=1.0, *, stream=None, window=None): "
     "data = data * scale + shift over a float32 buffer, in place."},
    {"gather", FN(k_gather), KW,
     "gather(out, src, map, variant='plain', *, check=True, texture='cached', stream=None, "
     "window=None): out[i] = src[map[i]] (32-bit data; int32 or int64 map). check=True records "
     "out-of-range entries on the device (raised at the next Stream.synchronize() or "
     "gather_errors()); check='sync' waits and raises now; out-of-range outputs are 0."},
    {"gather_errors", FN(k_gather_errors), KW,
     "gather_errors(device=None)\n--\n\nWhether a checked gather on the device read map "
     "entries outside its src since the last check (waits for the device's work; clears the "
     "flag)."},
    {"random_map", FN(k_random_map), KW,
     "random_map(out, seed=0, *, range=None, stream=None): fill an int32/int64 buffer with "
     "indices uniform in [0, range) (default: its size), on the device."},
    {"seed_map", FN(k_seed_map), KW,
     "seed_map(n, range=None, *, dtype=int32, seed=0): the study's host map, srand(seed); "
     "rand() % range, with glibc's generator reproduced exactly."},
    {"pattern", FN(k_pattern), KW,
     "pattern(src, dst, *, threads=32, blocks=1, width=4, load_offset=0, load_stride=1, "
     "store_offset=0, store_stride=1, index=None, src2=None, broadcast_index=0, "
     "load='default', store='wb', stream=None, window=None)."},
    {"streaming", FN(k_streaming), KW,
     "streaming(op, *, dst=None, src=None, src2=None, scalar=3.0, load='default', store='wb', "
     "blocks=None, threads=None, stream=None, window=None)."},
    {"l2_read", FN(k_l2_read), KW,
     "l2_read(src, repeats=10, *, load='cg', unroll=8, blocks=None, threads=None, "
     "stream=None, window=None): read src `repeats` times in one launch, `unroll` 16-byte "
     "loads in flight per thread."},
    {"bulk_read", FN(k_bulk_read), KW,
     "bulk_read(src, repeats=10, *, chunk=16384, blocks=2*SMs, stream=None, window=None): "
     "read src `repeats` times through the bulk copy engine into shared memory (sm_90+)."},
    {"hot_cold", FN(k_hot_cold), KW,
     "hot_cold(hot, cold, *, threads=None, read_only=False, stream=None, window=None): the "
     "Best Practices guide's kernel on int32 buffers."},
    {"hot_cold_read", FN(k_hot_cold_read), KW,
     "hot_cold_read(hot, cold, *, hot_load='default', cold_load='default', blocks=None, "
     "threads=None, stream=None, window=None)."},
    {NULL, NULL, 0, NULL}};
