/* l2persist.DeviceBuffer: NumPy-shaped device memory, its views, its lifetime. Interop
 * (__cuda_array_interface__ v3 and DLPack, both ways) is in dlpack.c. */
#include "l2p_py.h"
#include "params.h"

#include <structmember.h>

#include "dlpack.h"
#include "l2p_memory.h"

static l2p_state *buf_state(PyObject *self) { return l2p_state_from_type(Py_TYPE(self)); }

/* Bytes of a C-contiguous array; -1 with ValueError for a negative dimension or a size that
 * overflows (every import and allocation goes through here, so nbytes always matches the
 * shape that is exported again). */
static int shape_bytes(int ndim, const Py_ssize_t *shape, size_t itemsize, size_t *out)
{
    size_t n = itemsize;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "shape: dimension %d is %zd; sizes must be >= 0", i,
                         shape[i]);
            return -1;
        }
        if (shape[i] != 0 && n > (size_t)PY_SSIZE_T_MAX / (size_t)shape[i]) {
            PyErr_Format(PyExc_ValueError, "shape: the size overflows (dimension %d is %zd); at "
                         "most %zd bytes", i, shape[i], PY_SSIZE_T_MAX);
            return -1;
        }
        n *= (size_t)shape[i];
    }
    *out = n;
    return 0;
}

int l2p_buffer_check_open(l2p_BufferObject *b)
{
    /* A view is usable only while every buffer it hangs from is open. */
    for (l2p_BufferObject *p = b; p; ) {
        if (p->closed) {
            PyErr_SetString(PyExc_ValueError, p == b ? "buffer: this DeviceBuffer is closed"
                                                     : "buffer: the DeviceBuffer this view "
                                                       "belongs to is closed");
            return -1;
        }
        PyObject *base = p->base;
        p = (base && PyObject_TypeCheck(base, Py_TYPE(b))) ? (l2p_BufferObject *)base : NULL;
    }
    return 0;
}

static int raise_reset(l2p_BufferObject *b, const char *name)
{
    PyErr_Format(PyExc_ValueError, "%s: device %d was reset (cudaDeviceReset, by l2persist's "
                 "user or another library) after this DeviceBuffer was allocated: its memory is "
                 "gone and its addresses may belong to new allocations. Allocate it again",
                 name, b->device);
    return -1;
}

int l2p_buffer_check_context(l2p_BufferObject *b, unsigned long long now, const char *name)
{
    return (!b->ctx || !now || now == b->ctx) ? 0 : raise_reset(b, name);
}

int l2p_buffer_check_alive(l2p_BufferObject *b)
{
    if (l2p_buffer_check_open(b) < 0) return -1;
    return l2p_device_context_gone(b->device, b->ctx) ? raise_reset(b, "buffer") : 0;
}

/* Whether our memory still belongs to the device's current context (not after a reset). */
static int memory_is_ours(l2p_BufferObject *b) { return !l2p_device_context_gone(b->device, b->ctx); }

int l2p_buffer_note_use(l2p_BufferObject *b, PyObject *stream)
{
    l2p_StreamObject *s = (l2p_StreamObject *)stream;
    if (!stream) return 0;
    /* The view and every buffer it hangs from: an export or close of the parent must see
     * work launched through the view. */
    for (l2p_BufferObject *p = b; p;) {
        Py_XSETREF(p->stream, Py_NewRef(stream));
        p = (p->base && Py_TYPE(p->base) == Py_TYPE(b)) ? (l2p_BufferObject *)p->base : NULL;
    }
    /* Captured work keeps its buffers alive as long as the Graph lives. */
    if (s->capture_refs && PyList_Append(s->capture_refs, (PyObject *)b) < 0) return -1;
    return 0;
}

l2p_BufferObject *l2p_buffer_alloc(l2p_state *st, int ndim, const Py_ssize_t *shape,
                                   PyArray_Descr *dtype, int device)
{
    size_t nbytes;
    if (shape_bytes(ndim, shape, (size_t)PyDataType_ELSIZE(dtype), &nbytes) < 0) return NULL;
    l2p_BufferObject *b = PyObject_GC_New(l2p_BufferObject, st->DeviceBuffer);
    if (!b) return NULL;
    b->ptr = NULL;
    b->ndim = ndim;
    for (int i = 0; i < ndim; i++) b->shape[i] = shape[i];
    b->dtype = (PyArray_Descr *)Py_NewRef((PyObject *)dtype);
    b->nbytes = nbytes;
    b->device = device;
    b->closed = 0;
    b->owns = 0;
    b->base = NULL;
    b->dl_managed = NULL;
    b->stream = NULL;
    b->texture = 0;
    b->users = 0;
    b->free_pending = 0;
    b->cai_exported = 0;
    b->ctx = 0;
    b->weakreflist = NULL;
    PyObject_GC_Track(b);
    return b;
}

/* The buffer that owns the memory a view or wrapper reaches (itself when it owns it). */
void l2p_buffer_pin(l2p_BufferObject *b) { l2p_buffer_owner(b)->users++; }

/* The deferred free of a closed owner, once nobody can reach the memory any more. */
static void free_deferred(l2p_BufferObject *root)
{
    root->free_pending = 0;
    if (memory_is_ours(root)) /* nobody to report an error to */
        (void)l2p_memory_free(root->device, root->ptr);
    root->ptr = NULL;
}

void l2p_buffer_unpin(l2p_BufferObject *b)
{
    l2p_BufferObject *root = l2p_buffer_owner(b);
    /* A CAI consumer may still read it: that free waits for the last reference. */
    if (--root->users == 0 && root->free_pending && !root->cai_exported) free_deferred(root);
}

l2p_BufferObject *l2p_buffer_owner(l2p_BufferObject *b)
{
    while (!b->owns && b->base && Py_TYPE(b->base) == Py_TYPE(b))
        b = (l2p_BufferObject *)b->base;
    return b;
}

/* Wait for the work l2persist last queued on this buffer (on one of our Streams). */
static void wait_for_use(l2p_BufferObject *b)
{
    l2p_StreamObject *s = (l2p_StreamObject *)b->stream;
    if (!s || s->closed) return;
    cudaStream_t h = s->handle;
    Py_BEGIN_ALLOW_THREADS
    (void)l2p_stream_synchronize(h);
    Py_END_ALLOW_THREADS
}

/* Memory another library lent us is handed back once our work on it is done: when this
 * wrapper holds the producer's last reference or a consumed DLPack tensor. */
static int lends_last_reference(l2p_BufferObject *b)
{
    if (b->owns) return 0;
    if (b->dl_managed) return 1;
    return b->base && Py_TYPE(b->base) != Py_TYPE(b) && Py_REFCNT(b->base) == 1;
}

static l2p_status buf_release(l2p_BufferObject *b)
{
    l2p_status st = L2P_OK;
    if (b->closed) return L2P_OK;
    b->closed = 1;
    /* After a device reset the memory, the texture object and the stream are gone, and their
     * addresses and handles may be someone else's by now: touch none of them. */
    int gone = !memory_is_ours(b);
    /* A kernel may still read the texture or the borrowed memory: wait for it first. */
    if (!gone && (b->texture || lends_last_reference(b))) wait_for_use(b);
    if (!gone) l2p_texture_destroy(b->device, b->texture); /* before the memory it reads goes */
    b->texture = 0;
    if (b->owns && (b->users > 0 || b->cai_exported) && !gone) {
        /* A consumer (PyTorch, CuPy, JAX) still holds a DLPack view of this memory, or another
         * thread is copying it, or a CUDA-array-interface consumer may hold us: freeing it now
         * would let the next allocation show through. The buffer is closed for us; the last
         * DLPack user (l2p_buffer_unpin) or, after a CAI export, the last reference
         * (buf_dealloc) frees the memory. */
        b->free_pending = 1;
        Py_CLEAR(b->stream);
        return L2P_OK;
    }
    if (b->owns && !gone) {
        int device = b->device;
        void *ptr = b->ptr;
        Py_BEGIN_ALLOW_THREADS /* cudaFree waits for the device: let other threads run */
        st = l2p_memory_free(device, ptr);
        Py_END_ALLOW_THREADS
    }
    if (b->dl_managed) {
        l2p_DLManagedTensor *t = (l2p_DLManagedTensor *)b->dl_managed;
        b->dl_managed = NULL;
        if (t->deleter) t->deleter(t);
    }
    b->ptr = NULL;
    Py_CLEAR(b->base);
    Py_CLEAR(b->stream);
    return st;
}

/* ---- argument parsing: shapes and dtypes as NumPy takes them ---- */

int l2p_buffer_parse_shape(PyObject *obj, int *ndim, Py_ssize_t *shape)
{
    PyArray_Dims dims = {NULL, 0};
    if (!PyArray_IntpConverter(obj, &dims)) return -1;
    int ok = 0;
    for (int i = 0; i < dims.len; i++) {
        if (dims.ptr[i] < 0) {
            PyErr_Format(PyExc_ValueError, "shape: dimension %d is %zd; dimensions must be >= 0",
                         i, (Py_ssize_t)dims.ptr[i]);
            ok = -1;
            break;
        }
        shape[i] = dims.ptr[i];
    }
    *ndim = dims.len;
    PyDimMem_FREE(dims.ptr);
    return ok;
}

int l2p_buffer_parse_dtype(PyObject *obj, PyArray_Descr **out)
{
    *out = NULL;
    if (!PyArray_DescrConverter2(obj, out)) return -1;
    if (!*out) *out = PyArray_DescrFromType(NPY_DOUBLE); /* NumPy's default */
    if (PyDataType_REFCHK(*out) || PyDataType_ELSIZE(*out) == 0) {
        PyErr_Format(PyExc_TypeError, "dtype: %R is not a fixed-size dtype without Python "
                     "objects", (PyObject *)*out);
        Py_CLEAR(*out);
        return -1;
    }
    return 0;
}

static PyObject *make_buffer(l2p_state *st, PyObject *shape_obj, PyObject *dtype_obj,
                             PyObject *device_obj, int zero)
{
    int ndim, device;
    Py_ssize_t shape[NPY_MAXDIMS];
    PyArray_Descr *dtype;
    if (l2p_buffer_parse_shape(shape_obj, &ndim, shape) < 0 ||
        l2p_buffer_parse_dtype(dtype_obj, &dtype) < 0)
        return NULL;
    if (l2p_py_device_index(st, device_obj, &device) < 0) {
        Py_DECREF(dtype);
        return NULL;
    }
    l2p_BufferObject *b = l2p_buffer_alloc(st, ndim, shape, dtype, device);
    Py_DECREF(dtype);
    if (!b) return NULL;
    b->owns = 1;
    l2p_status rc;
    void *ptr = NULL;
    size_t nbytes = b->nbytes;
    unsigned long long ctx = 0;
    /* cudaMalloc and the zeroing (a legacy-stream memset and its sync) wait for the device:
     * let other threads run. Nobody else can see the buffer yet. */
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_memory_alloc(device, nbytes, &ptr);
    if (rc == L2P_OK && zero) rc = l2p_memory_set(device, ptr, 0, nbytes, NULL);
    if (rc == L2P_OK) rc = l2p_device_context_id(device, &ctx);
    Py_END_ALLOW_THREADS
    b->ptr = ptr;
    b->ctx = ctx;
    if (rc != L2P_OK) {
        l2p_py_raise(st);
        Py_DECREF(b);
        return NULL;
    }
    return (PyObject *)b;
}

typedef struct {
    PyObject *shape, *dtype, *device;
} alloc_args;

static PyObject *empty_impl(PyObject *m, const void *args)
{
    const alloc_args *a = args;
    return make_buffer(l2p_state_from_module(m), a->shape, a->dtype, a->device, 0);
}

static PyObject *zeros_impl(PyObject *m, const void *args)
{
    const alloc_args *a = args;
    return make_buffer(l2p_state_from_module(m), a->shape, a->dtype, a->device, 1);
}

#define ALLOC_PARAMS                                                                         \
    L2P_PARAM(alloc_args, shape, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,                      \
              .pytype = "int | Sequence[int]", .doc = "an int or a tuple of ints, as NumPy"), \
        L2P_PARAM(alloc_args, dtype, L2P_P_OBJECT, .pytype = "DTypeLike",                    \
                  .doc = "anything numpy.dtype accepts; None: float64"),                     \
        L2P_PARAM(alloc_args, device, L2P_P_OBJECT, .pytype = "DeviceLike",                  \
                  .doc = "the device (index or Device); None: the current one")
L2P_DEFINE_FN(empty_fn, alloc_args, empty_impl, "empty", "An uninitialised DeviceBuffer.",
              "DeviceBuffer", ALLOC_PARAMS);
L2P_DEFINE_FN(zeros_fn, alloc_args, zeros_impl, "zeros", "A zero-filled DeviceBuffer.",
              "DeviceBuffer", ALLOC_PARAMS);

/* A C-contiguous ndarray of obj (new reference). */
static PyArrayObject *host_array(PyObject *obj)
{
    return (PyArrayObject *)PyArray_FromAny(obj, NULL, 0, 0,
                                            NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
}

/* Host copies drop the GIL: the memory is pinned so a close() from another thread defers. */
static int copy_in(l2p_state *st, l2p_BufferObject *b, PyArrayObject *a)
{
    l2p_status rc;
    int device = b->device;
    void *dst = b->ptr, *src = PyArray_DATA(a);
    size_t n = b->nbytes;
    l2p_buffer_pin(b);
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_memory_to_device(device, dst, src, n);
    Py_END_ALLOW_THREADS
    l2p_buffer_unpin(b);
    return rc == L2P_OK ? 0 : l2p_py_raise_int(st);
}

typedef struct {
    PyObject *array, *device;
} to_device_args;

static PyObject *to_device_impl(PyObject *m, const void *args)
{
    const to_device_args *t = args;
    PyObject *device = t->device;
    l2p_state *st = l2p_state_from_module(m);
    PyArrayObject *a = host_array(t->array);
    if (!a) return NULL;
    PyObject *shape = PyTuple_New(PyArray_NDIM(a));
    for (int i = 0; shape && i < PyArray_NDIM(a); i++) {
        PyObject *d = PyLong_FromSsize_t(PyArray_DIM(a, i));
        if (!d) Py_CLEAR(shape);
        else PyTuple_SET_ITEM(shape, i, d);
    }
    PyObject *b = shape ? make_buffer(st, shape, (PyObject *)PyArray_DESCR(a), device, 0) : NULL;
    Py_XDECREF(shape);
    if (b && copy_in(st, (l2p_BufferObject *)b, a) < 0) Py_CLEAR(b);
    Py_DECREF(a);
    return b;
}
L2P_DEFINE_FN(to_device_fn, to_device_args, to_device_impl, "to_device",
              "Copy a host array (anything NumPy accepts) to the device.", "DeviceBuffer",
              L2P_PARAM(to_device_args, array, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "ArrayLike", .doc = "the host data"),
              L2P_PARAM(to_device_args, device, L2P_P_OBJECT, .pytype = "DeviceLike",
                        .doc = "the device (index or Device); None: the current one"));

PyObject *l2p_buffer_as_buffer(l2p_state *st, PyObject *obj)
{
    if (PyObject_TypeCheck(obj, st->DeviceBuffer)) {
        if (l2p_buffer_check_open((l2p_BufferObject *)obj) < 0) return NULL;
        return Py_NewRef(obj);
    }
    PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (cai) {
        PyObject *b = l2p_buffer_from_cai(st, obj, cai);
        Py_DECREF(cai);
        return b;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    PyErr_Clear();
    if (PyObject_HasAttrString(obj, "__dlpack__")) return l2p_buffer_from_dlpack(st, obj);
    return PyErr_Format(PyExc_TypeError, "expected a DeviceBuffer or an object exposing "
                        "__cuda_array_interface__ or __dlpack__ (CuPy, PyTorch, Numba, JAX), "
                        "got %s", Py_TYPE(obj)->tp_name);
}

typedef struct {
    PyObject *obj;
} as_buffer_args;

static PyObject *as_buffer_impl(PyObject *m, const void *args)
{
    return l2p_buffer_as_buffer(l2p_state_from_module(m), ((const as_buffer_args *)args)->obj);
}
L2P_DEFINE_FN(as_buffer_fn, as_buffer_args, as_buffer_impl, "as_buffer",
              "Wrap, without copying, a DeviceBuffer or any object exposing "
              "__cuda_array_interface__ or __dlpack__; the object is kept alive.", "DeviceBuffer",
              L2P_PARAM(as_buffer_args, obj, L2P_P_OBJECT, .flags = L2P_P_REQUIRED | L2P_P_POSONLY,
                        .pytype = "BufferLike", .doc = "the device memory to wrap"));

typedef struct {
    PyObject *dst, *src;
    l2p_stream_val stream;
} copy_args;

static PyObject *copy_impl(PyObject *m, const void *args)
{
    const copy_args *a = args;
    PyObject *stream_ref = a->stream.obj, *result = NULL;
    l2p_state *st = l2p_state_from_module(m);
    cudaStream_t stream = a->stream.handle;
    l2p_BufferObject *d = (l2p_BufferObject *)l2p_buffer_as_buffer(st, a->dst);
    l2p_BufferObject *s = d ? (l2p_BufferObject *)l2p_buffer_as_buffer(st, a->src) : NULL;
    if (!s) goto done;
    if (d->nbytes != s->nbytes) {
        PyErr_Format(PyExc_ValueError, "dst: %zu bytes, but src has %zu", d->nbytes, s->nbytes);
        goto done;
    }
    if (d->device != s->device) {
        PyErr_Format(PyExc_ValueError, "src: buffer is on device %d, dst on device %d; copy "
                     "works within one device", s->device, d->device);
        goto done;
    }
    if (l2p_buffer_check_alive(d) < 0 || l2p_buffer_check_alive(s) < 0) goto done;
    if (stream_ref && ((l2p_StreamObject *)stream_ref)->device != d->device) {
        PyErr_Format(PyExc_ValueError, "stream: it belongs to device %d, the buffers to device "
                     "%d", ((l2p_StreamObject *)stream_ref)->device, d->device);
        goto done;
    }
    if (l2p_memory_device_to_device(d->device, d->ptr, s->ptr, s->nbytes, stream) != L2P_OK) {
        l2p_py_raise(st);
        goto done;
    }
    /* Like a launch: a captured copy keeps dst and src alive with its graph. */
    if (l2p_buffer_note_use(d, stream_ref) < 0 || l2p_buffer_note_use(s, stream_ref) < 0) goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(d);
    Py_XDECREF(s);
    return result;
}

L2P_DEFINE_FN(copy_fn, copy_args, copy_impl, "copy",
              "cudaMemcpyAsync device to device (same byte count, same device).", "None",
              L2P_PARAM(copy_args, dst, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "BufferLike", .doc = "the destination"),
              L2P_PARAM(copy_args, src, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "BufferLike", .doc = "the source, as many bytes as dst"),
              L2P_PARAM(copy_args, stream, L2P_P_STREAM, .flags = L2P_P_KWONLY,
                        .doc = "where the copy runs; None: the legacy default stream"));

const l2p_fn *const l2p_buffer_fns[] = {&copy_fn, &empty_fn, &zeros_fn, &to_device_fn,
                                        &as_buffer_fn, NULL};

/* ---- DeviceBuffer methods ---- */


#define OPEN_OR_NULL(b) \
    do { if (l2p_buffer_check_open(b) < 0) return NULL; } while (0)
/* For the operations that touch the memory. */
#define ALIVE_OR_NULL(b) \
    do { if (l2p_buffer_check_alive(b) < 0) return NULL; } while (0)

static PyObject *buf_to_numpy(PyObject *self, PyObject *noargs)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    npy_intp dims[NPY_MAXDIMS];
    l2p_status rc;
    (void)noargs;
    ALIVE_OR_NULL(b);
    for (int i = 0; i < b->ndim; i++) dims[i] = b->shape[i];
    Py_INCREF(b->dtype);
    PyArrayObject *a = (PyArrayObject *)PyArray_NewFromDescr(&PyArray_Type, b->dtype, b->ndim,
                                                             dims, NULL, NULL, 0, NULL);
    if (!a) return NULL;
    int device = b->device;
    void *dst = PyArray_DATA(a), *src = b->ptr;
    size_t n = b->nbytes;
    l2p_buffer_pin(b); /* a close() from another thread during the copy waits for it */
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_memory_to_host(device, dst, src, n);
    Py_END_ALLOW_THREADS
    l2p_buffer_unpin(b);
    if (rc != L2P_OK) {
        Py_DECREF(a);
        return l2p_py_raise(buf_state(self));
    }
    return (PyObject *)a;
}

static int same_shape(l2p_BufferObject *b, PyArrayObject *a)
{
    if (PyArray_NDIM(a) != b->ndim) return 0;
    for (int i = 0; i < b->ndim; i++)
        if (PyArray_DIM(a, i) != b->shape[i]) return 0;
    return 1;
}

static PyObject *buf_copy_from(PyObject *self, PyObject *obj)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    ALIVE_OR_NULL(b);
    PyArrayObject *a = host_array(obj);
    if (!a) return NULL;
    if (!same_shape(b, a) || !PyArray_EquivTypes(PyArray_DESCR(a), b->dtype)) {
        PyObject *shape = l2p_buffer_shape_tuple(b);
        PyObject *ashape = PyObject_GetAttrString((PyObject *)a, "shape");
        if (shape && ashape)
            PyErr_Format(PyExc_ValueError, "array: shape %R and dtype %R do not match the "
                         "buffer's shape %R and dtype %R", ashape, (PyObject *)PyArray_DESCR(a),
                         shape, (PyObject *)b->dtype);
        Py_XDECREF(shape);
        Py_XDECREF(ashape);
        Py_DECREF(a);
        return NULL;
    }
    int rc = copy_in(buf_state(self), b, a);
    Py_DECREF(a);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *buf_fill_bytes(PyObject *self, PyObject *arg)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    ALIVE_OR_NULL(b);
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v < 0 || v > 255) return PyErr_Format(PyExc_ValueError, "byte: %ld is outside [0, 255]", v);
    l2p_status rc;
    int device = b->device;
    void *dst = b->ptr;
    size_t n = b->nbytes;
    l2p_buffer_pin(b); /* the memset waits for the device: pinned against a concurrent close() */
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_memory_set(device, dst, (int)v, n, NULL);
    Py_END_ALLOW_THREADS
    l2p_buffer_unpin(b);
    if (rc != L2P_OK) return l2p_py_raise(buf_state(self));
    Py_RETURN_NONE;
}

static PyObject *buf_close(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    if (buf_release((l2p_BufferObject *)self) != L2P_OK) return l2p_py_raise(buf_state(self));
    Py_RETURN_NONE;
}

static PyObject *buf_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    OPEN_OR_NULL((l2p_BufferObject *)self);
    return Py_NewRef(self);
}

static PyObject *buf_exit(PyObject *self, PyObject *args)
{
    (void)args;
    if (buf_release((l2p_BufferObject *)self) != L2P_OK) return l2p_py_raise(buf_state(self));
    Py_RETURN_FALSE;
}

PyObject *l2p_buffer_shape_tuple(l2p_BufferObject *b)
{
    PyObject *t = PyTuple_New(b->ndim);
    for (int i = 0; t && i < b->ndim; i++) {
        PyObject *d = PyLong_FromSsize_t(b->shape[i]);
        if (!d) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, d);
    }
    return t;
}

/* ---- views ---- */

static PyObject *buf_subscript(PyObject *self, PyObject *key)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    Py_ssize_t start, stop, step, len;
    OPEN_OR_NULL(b);
    if (!PySlice_Check(key))
        return PyErr_Format(PyExc_TypeError, "index: DeviceBuffer supports slices buf[a:b] only, "
                            "got %s", Py_TYPE(key)->tp_name);
    if (b->ndim != 1)
        return PyErr_Format(PyExc_ValueError, "index: slicing needs a 1-D buffer, this one has "
                            "%d dimensions", b->ndim);
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
    len = PySlice_AdjustIndices(b->shape[0], &start, &stop, step);
    if (step != 1)
        return PyErr_Format(PyExc_ValueError, "index: slice step must be 1 (views share memory), "
                            "got %zd", step);
    l2p_BufferObject *v = l2p_buffer_alloc(buf_state(self), 1, &len, b->dtype, b->device);
    if (!v) return NULL;
    v->ptr = b->ptr + (size_t)start * (size_t)PyDataType_ELSIZE(b->dtype);
    v->base = Py_NewRef(self);
    v->ctx = b->ctx;
    v->stream = Py_XNewRef(b->stream);
    return (PyObject *)v;
}

static Py_ssize_t buf_length(PyObject *self)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    if (b->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d DeviceBuffer");
        return -1;
    }
    return b->shape[0];
}

/* ---- attributes ---- */

static PyObject *buf_get_shape(PyObject *self, void *c)
{
    (void)c;
    return l2p_buffer_shape_tuple((l2p_BufferObject *)self);
}

static PyObject *buf_get_dtype(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef((PyObject *)((l2p_BufferObject *)self)->dtype);
}

static PyObject *buf_get_size(PyObject *self, void *c)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    (void)c;
    size_t item = (size_t)PyDataType_ELSIZE(b->dtype);
    return PyLong_FromSize_t(item ? b->nbytes / item : 0);
}

static PyObject *buf_get_nbytes(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(((l2p_BufferObject *)self)->nbytes);
}

static PyObject *buf_get_ptr(PyObject *self, void *c)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    (void)c;
    OPEN_OR_NULL(b);
    return PyLong_FromVoidPtr(b->ptr);
}

static PyObject *buf_get_device(PyObject *self, void *c)
{
    (void)c;
    return l2p_device_new(buf_state(self), ((l2p_BufferObject *)self)->device);
}

static PyObject *buf_get_closed(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((l2p_BufferObject *)self)->closed);
}

static PyObject *buf_get_base(PyObject *self, void *c)
{
    PyObject *base = ((l2p_BufferObject *)self)->base;
    (void)c;
    return Py_NewRef(base ? base : Py_None);
}

static PyObject *buf_repr(PyObject *self)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    PyObject *shape = l2p_buffer_shape_tuple(b);
    PyObject *r = PyUnicode_FromFormat("l2persist.DeviceBuffer(shape=%R, dtype=%R, device=%d%s)",
                                       shape, (PyObject *)b->dtype, b->device,
                                       b->closed ? ", closed" : "");
    Py_XDECREF(shape);
    return r;
}

static int buf_traverse(PyObject *self, visitproc visit, void *arg)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(b->base);
    Py_VISIT(b->stream);
    return 0;
}

static int buf_clear(PyObject *self)
{
    (void)buf_release((l2p_BufferObject *)self); /* breaking a cycle: the memory goes too */
    return 0;
}

static void buf_dealloc(PyObject *self)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (b->weakreflist) PyObject_ClearWeakRefs(self);
    (void)buf_release(b); /* never raises from dealloc; a failed free is dropped */
    if (b->free_pending && b->users == 0) free_deferred(b); /* closed after a CAI export */
    Py_CLEAR(b->dtype);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef buf_getset[] = {
    {"shape", buf_get_shape, NULL, "tuple[int, ...]: The shape, as NumPy's.", NULL},
    {"dtype", buf_get_dtype, NULL, "numpy.dtype: The NumPy dtype.", NULL},
    {"size", buf_get_size, NULL, "int: Number of elements.", NULL},
    {"nbytes", buf_get_nbytes, NULL, "int: Number of bytes.", NULL},
    {"ptr", buf_get_ptr, NULL, "int: The device address.", NULL},
    {"device", buf_get_device, NULL, "Device: The Device holding the memory.", NULL},
    {"closed", buf_get_closed, NULL, "bool: Whether close() was called.", NULL},
    {"base", buf_get_base, NULL, "object: The parent of a view, or the wrapped foreign object.", NULL},
    {"__cuda_array_interface__", l2p_buffer_cai, NULL, "dict[str, object]: CUDA Array Interface, version 3.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

L2P_NOARGS_METHOD(buf_to_numpy_fn, buf_to_numpy, "to_numpy", "Copy to a new host ndarray.", "numpy.ndarray");
L2P_ONE_ARG_METHOD(buf_copy_from_fn, buf_copy_from, "copy_from", "Copy a host array of the same shape and dtype in.", "None", "array", "ArrayLike",
                   "host data of the buffer's shape and dtype");
L2P_ONE_ARG_METHOD(buf_fill_bytes_fn, buf_fill_bytes, "fill_bytes", "Memset every byte.", "None", "byte", "int",
                   "the byte value, in [0, 255]");
L2P_NOARGS_METHOD(buf_close_fn, buf_close, "close", "Free the memory (owned buffers) or release the wrapped object; idempotent.", "None");
L2P_NOARGS_METHOD(buf_enter_fn, buf_enter, "__enter__", "Returns self.", "DeviceBuffer");
L2P_EXIT_METHOD(buf_exit_fn, buf_exit, "Closes (restores).");
L2P_NOARGS_METHOD(buf_dlpack_device_fn, l2p_buffer_dlpack_device, "__dlpack_device__", "(kDLCUDA, device index).", "tuple[int, int]");
static const l2p_fn *const buf_rows[] = {&buf_to_numpy_fn, &buf_copy_from_fn, &buf_fill_bytes_fn, &buf_close_fn, &buf_enter_fn, &buf_exit_fn, &buf_dlpack_device_fn, NULL};

/* Methods not from rows (none left but the slots). */
static PyMethodDef buf_methods[] = {
    {NULL, NULL, 0, NULL}};

static PyMemberDef buf_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(l2p_BufferObject, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot buf_slots[] = {
    {Py_tp_doc, "DeviceBuffer: device memory with a NumPy shape and dtype. Make one with "
                "l2persist.empty, zeros, to_device or as_buffer."},
    {Py_tp_getset, buf_getset},
    {Py_tp_methods, buf_methods},
    {Py_tp_members, buf_members},
    {Py_tp_repr, buf_repr},
    {Py_tp_traverse, buf_traverse},
    {Py_tp_clear, buf_clear},
    {Py_tp_dealloc, buf_dealloc},
    {Py_mp_subscript, buf_subscript},
    {Py_mp_length, buf_length},
    {0, NULL}};

static PyType_Spec buf_spec = {"l2persist.DeviceBuffer", sizeof(l2p_BufferObject), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                   Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
                               buf_slots};

int l2p_add_buffer_type(PyObject *m, l2p_state *st)
{
    /* This file's rows and dlpack.c's, in one list made once (its address keys the table). */
    static const l2p_fn *rows[16];
    const l2p_fn *const *parts[2] = {buf_rows, l2p_buffer_method_rows};
    size_t n = 0;
    for (int p = 0; p < 2 && !rows[0]; p++)
        for (size_t i = 0; parts[p][i]; i++) {
            if (n + 1 >= sizeof rows / sizeof rows[0]) { /* keep the NULL end */
                PyErr_SetString(PyExc_SystemError, "DeviceBuffer: more method rows than fit");
                return -1;
            }
            rows[n++] = parts[p][i];
        }
    st->DeviceBuffer = l2p_make_type_rows(m, &buf_spec, NULL, rows);
    return st->DeviceBuffer ? 0 : -1;
}
