/* Making DeviceBuffers: shapes and dtypes as NumPy takes them, empty / zeros / to_device,
 * as_buffer (wrapping foreign memory), and the device-to-device copy. */
#include "l2p_py.h"
#include "params.h"

#include "l2p_memory.h"

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
    l2p_status rc;
    void *ptr = NULL;
    size_t nbytes = b->nbytes;
    l2p_life life = {device, 0};
    /* cudaMalloc and the zeroing (a legacy-stream memset and its sync) wait for the device:
     * let other threads run. Nobody else can see the buffer yet. */
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_memory_alloc(device, nbytes, &ptr);
    if (rc == L2P_OK && zero) rc = l2p_memory_set(device, ptr, 0, nbytes, NULL);
    if (rc == L2P_OK) rc = l2p_life_begin(&life, device);
    Py_END_ALLOW_THREADS
    b->ptr = ptr;
    /* Ours from here (freed at close, even when the zeroing failed); context 0 when unknown. */
    l2p_handle_init(&b->mem, life, L2P_RELEASE_MEMORY, ptr, 0);
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
PyArrayObject *l2p_buffer_host_array(PyObject *obj)
{
    return (PyArrayObject *)PyArray_FromAny(obj, NULL, 0, 0,
                                            NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
}

/* Host copies drop the GIL: the memory is pinned so a close() from another thread defers. */
int l2p_buffer_copy_in(l2p_state *st, l2p_BufferObject *b, PyArrayObject *a)
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
    PyArrayObject *a = l2p_buffer_host_array(t->array);
    if (!a) return NULL;
    PyObject *shape = PyTuple_New(PyArray_NDIM(a));
    for (int i = 0; shape && i < PyArray_NDIM(a); i++) {
        PyObject *d = PyLong_FromSsize_t(PyArray_DIM(a, i));
        if (!d) Py_CLEAR(shape);
        else PyTuple_SET_ITEM(shape, i, d);
    }
    PyObject *b = shape ? make_buffer(st, shape, (PyObject *)PyArray_DESCR(a), device, 0) : NULL;
    Py_XDECREF(shape);
    if (b && l2p_buffer_copy_in(st, (l2p_BufferObject *)b, a) < 0) Py_CLEAR(b);
    Py_DECREF(a);
    return b;
}
L2P_DEFINE_FN(to_device_fn, to_device_args, to_device_impl, "to_device",
              "Copy a host array (anything NumPy accepts) to the device.", "DeviceBuffer",
              L2P_PARAM(to_device_args, array, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "ArrayLike", .doc = "the host data"),
              L2P_PARAM(to_device_args, device, L2P_P_OBJECT, .pytype = "DeviceLike",
                        .doc = "the device (index or Device); None: the current one"));

PyObject *l2p_buffer_as_buffer(l2p_state *st, PyObject *obj, const char *name)
{
    if (PyObject_TypeCheck(obj, st->DeviceBuffer)) {
        if (l2p_buffer_usable((l2p_BufferObject *)obj, L2P_LIFE_UNASKED,
                              name ? name : "buffer") < 0)
            return NULL;
        return Py_NewRef(obj);
    }
    PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (cai) {
        PyObject *b = l2p_buffer_from_cai(st, obj, cai, name);
        Py_DECREF(cai);
        return b;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    PyErr_Clear();
    if (PyObject_HasAttrString(obj, "__dlpack__")) return l2p_buffer_from_dlpack(st, obj, name);
    return PyErr_Format(PyExc_TypeError, "%s%sexpected a DeviceBuffer or an object exposing "
                        "__cuda_array_interface__ or __dlpack__ (CuPy, PyTorch, Numba, JAX), "
                        "got %s", L2P_ARG_NAME(name), Py_TYPE(obj)->tp_name);
}

typedef struct {
    PyObject *obj;
} as_buffer_args;

static PyObject *as_buffer_impl(PyObject *m, const void *args)
{
    return l2p_buffer_as_buffer(l2p_state_from_module(m), ((const as_buffer_args *)args)->obj,
                                "obj");
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
    l2p_BufferObject *d = (l2p_BufferObject *)l2p_buffer_as_buffer(st, a->dst, "dst");
    l2p_BufferObject *s = d ? (l2p_BufferObject *)l2p_buffer_as_buffer(st, a->src, "src") : NULL;
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
    if (stream_ref && l2p_py_stream_device((l2p_StreamObject *)stream_ref) != d->device) {
        PyErr_Format(PyExc_ValueError, "stream: it belongs to device %d, the buffers to device "
                     "%d", l2p_py_stream_device((l2p_StreamObject *)stream_ref), d->device);
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
