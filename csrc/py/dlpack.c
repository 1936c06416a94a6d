/* Interop of DeviceBuffer with other libraries, both ways: importing anything that exposes
 * __cuda_array_interface__ (v3) or __dlpack__, and exporting ours through both protocols
 * (with stream ordering and export lifetimes). */
#include "l2p_py.h"
#include "params.h"

#include "dlpack.h"
#include "l2p_memory.h"

/* Exports hand out the memory: it must still exist (not after a device reset). */
#define ALIVE_OR_NULL(b) \
    do { if (l2p_buffer_check_alive(b) < 0) return NULL; } while (0)

/* ---- foreign objects: __cuda_array_interface__ and DLPack ---- */

static int contiguous_strides(int ndim, const Py_ssize_t *shape, const int64_t *strides,
                              Py_ssize_t itemsize, int in_elements)
{
    int64_t expect = in_elements ? 1 : itemsize;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] != 1 && strides[i] != expect) return 0;
        expect *= shape[i];
    }
    return 1;
}

static int wait_foreign_stream(l2p_state *st, int device, PyObject *stream_obj)
{
    if (!stream_obj || stream_obj == Py_None) return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(stream_obj);
    if (PyErr_Occurred()) return -1;
    cudaStream_t s = v == 1 ? cudaStreamLegacy : v == 2 ? cudaStreamPerThread : (cudaStream_t)v;
    l2p_status rc;
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_stream_synchronize(device, s); /* 1 / 2: the data's device's default streams */
    Py_END_ALLOW_THREADS
    return rc == L2P_OK ? 0 : l2p_py_raise_int(st);
}

static int pointer_device(l2p_state *st, const void *ptr, int *device)
{
    if (!ptr) return l2p_py_device_index(st, Py_None, device);
    return l2p_memory_pointer_device(ptr, device) == L2P_OK ? 0 : l2p_py_raise_int(st);
}

static int cai_strides_ok(PyObject *cai, int ndim, const Py_ssize_t *shape, Py_ssize_t itemsize,
                          const char *name)
{
    int64_t strides[NPY_MAXDIMS];
    PyObject *s = PyDict_GetItemString(cai, "strides");
    if (!s || s == Py_None) return 0;
    if (!PyTuple_Check(s) || PyTuple_GET_SIZE(s) != ndim) goto bad;
    for (int i = 0; i < ndim; i++) {
        strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(s, i));
        if (PyErr_Occurred()) return -1;
    }
    if (contiguous_strides(ndim, shape, strides, itemsize, 0)) return 0;
bad:
    PyErr_Format(PyExc_ValueError, "%s%sonly C-contiguous device arrays can be wrapped (copy it "
                 "to a contiguous array first)", L2P_ARG_NAME(name));
    return -1;
}

PyObject *l2p_buffer_from_cai(l2p_state *st, PyObject *obj, PyObject *cai, const char *name)
{
    PyObject *shape_obj, *typestr, *data;
    PyArray_Descr *dtype = NULL;
    Py_ssize_t shape[NPY_MAXDIMS];
    int ndim, device;
    if (!PyDict_Check(cai))
        return PyErr_Format(PyExc_TypeError, "%s%s__cuda_array_interface__ is not a dict",
                            L2P_ARG_NAME(name));
    shape_obj = PyDict_GetItemString(cai, "shape");
    typestr = PyDict_GetItemString(cai, "typestr");
    data = PyDict_GetItemString(cai, "data");
    if (!shape_obj || !typestr || !data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1)
        return PyErr_Format(PyExc_ValueError, "%s%s__cuda_array_interface__ lacks shape, "
                            "typestr or data", L2P_ARG_NAME(name));
    if (l2p_buffer_parse_shape(shape_obj, &ndim, shape) < 0 ||
        l2p_buffer_parse_dtype(typestr, &dtype) < 0)
        return NULL;
    if (cai_strides_ok(cai, ndim, shape, PyDataType_ELSIZE(dtype), name) < 0) goto fail;
    PyObject *mask = PyDict_GetItemString(cai, "mask");
    if (mask && mask != Py_None) {
        PyErr_Format(PyExc_ValueError, "%s%smasked device arrays are not supported",
                     L2P_ARG_NAME(name));
        goto fail;
    }
    void *ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    if (PyErr_Occurred() || pointer_device(st, ptr, &device) < 0 ||
        wait_foreign_stream(st, device, PyDict_GetItemString(cai, "stream")) < 0)
        goto fail;
    l2p_BufferObject *b = l2p_buffer_alloc(st, ndim, shape, dtype, device);
    Py_DECREF(dtype);
    if (!b) return NULL;
    b->ptr = ptr;
    b->base = Py_NewRef(obj);
    return (PyObject *)b;
fail:
    Py_XDECREF(dtype);
    return NULL;
}

static PyArray_Descr *descr_from_dl(l2p_DLDataType t, const char *name)
{
    char kind;
    switch (t.code) {
    case L2P_DL_INT: kind = 'i'; break;
    case L2P_DL_UINT: kind = 'u'; break;
    case L2P_DL_FLOAT: kind = 'f'; break;
    case L2P_DL_COMPLEX: kind = 'c'; break;
    case L2P_DL_BOOL: kind = 'b'; break;
    default: kind = 0;
    }
    if (!kind || t.lanes != 1 || t.bits % 8) {
        PyErr_Format(PyExc_TypeError, "%s%sDLPack dtype (code %d, %d bits, %d lanes) has no "
                     "NumPy equivalent", L2P_ARG_NAME(name), t.code, t.bits, t.lanes);
        return NULL;
    }
    char typestr[16];
    snprintf(typestr, sizeof typestr, "<%c%d", kind, t.bits / 8);
    PyObject *s = PyUnicode_FromString(typestr);
    PyArray_Descr *d = NULL;
    if (s) PyArray_DescrConverter(s, &d);
    Py_XDECREF(s);
    return d;
}

static int dl_shape(l2p_DLTensor *t, int *ndim, Py_ssize_t *shape, Py_ssize_t itemsize,
                    const char *name)
{
    if (t->ndim < 0 || t->ndim > NPY_MAXDIMS) {
        PyErr_Format(PyExc_ValueError, "%s%sDLPack tensor has %d dimensions (at most %d)",
                     L2P_ARG_NAME(name), t->ndim, NPY_MAXDIMS);
        return -1;
    }
    *ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) shape[i] = (Py_ssize_t)t->shape[i];
    if (t->strides && !contiguous_strides(t->ndim, shape, t->strides, itemsize, 1)) {
        PyErr_Format(PyExc_ValueError, "%s%sonly C-contiguous device tensors can be wrapped "
                     "(call .contiguous() or copy first)", L2P_ARG_NAME(name));
        return -1;
    }
    if (t->device.device_type != L2P_DL_CUDA && t->device.device_type != L2P_DL_CUDA_MANAGED) {
        PyErr_Format(PyExc_ValueError, "%s%sDLPack tensor lives on device type %d, not CUDA (2)",
                     L2P_ARG_NAME(name), t->device.device_type);
        return -1;
    }
    return 0;
}

/* Refuse host arrays (NumPy has __dlpack__ too) before asking for a capsule. */
static int dlpack_on_cuda(PyObject *obj, const char *name)
{
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    int type = -1;
    if (!dev) return -1;
    if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2)
        type = (int)PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
    Py_DECREF(dev);
    if (PyErr_Occurred()) return -1;
    if (type == L2P_DL_CUDA || type == L2P_DL_CUDA_MANAGED) return 0;
    PyErr_Format(PyExc_TypeError, "%s%sa %s array (DLPack device type %d) is not device memory; "
                 "copy it with l2persist.to_device()", L2P_ARG_NAME(name), Py_TYPE(obj)->tp_name,
                 type);
    return -1;
}

/* The producer's capsule, asked for the stream the launch will use (DLPack: 1 is the legacy
 * stream, 2 the per-thread one); a producer that takes no stream= is asked without. */
static PyObject *dlpack_capsule(l2p_state *st, PyObject *obj)
{
    if (!st->import_stream_set) return PyObject_CallMethod(obj, "__dlpack__", NULL);
    uintptr_t h = (uintptr_t)st->import_stream;
    PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
    PyObject *args = PyTuple_New(0), *kw = Py_BuildValue("{s:K}", "stream",
                                                        (unsigned long long)(h ? h : 1));
    PyObject *cap = meth && args && kw ? PyObject_Call(meth, args, kw) : NULL;
    if (!cap && meth && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        cap = PyObject_CallNoArgs(meth);
    }
    Py_XDECREF(meth);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return cap;
}

PyObject *l2p_buffer_from_dlpack(l2p_state *st, PyObject *obj, const char *name)
{
    if (dlpack_on_cuda(obj, name) < 0) return NULL;
    PyObject *cap = dlpack_capsule(st, obj);
    if (!cap) return NULL;
    l2p_DLManagedTensor *mt = (l2p_DLManagedTensor *)PyCapsule_GetPointer(cap, "dltensor");
    if (!mt) {
        Py_DECREF(cap);
        return NULL;
    }
    l2p_DLTensor *t = &mt->dl_tensor;
    int ndim;
    Py_ssize_t shape[NPY_MAXDIMS];
    PyArray_Descr *dtype = descr_from_dl(t->dtype, name);
    if (!dtype || dl_shape(t, &ndim, shape, PyDataType_ELSIZE(dtype), name) < 0) {
        Py_XDECREF(dtype);
        Py_DECREF(cap);
        return NULL;
    }
    /* A producer's device id indexes per-device state: check it before anything uses it. */
    if (l2p_device_check(t->device.device_id) != L2P_OK) {
        Py_DECREF(dtype);
        Py_DECREF(cap);
        return l2p_py_raise(st);
    }
    l2p_BufferObject *b = l2p_buffer_alloc(st, ndim, shape, dtype, t->device.device_id);
    Py_DECREF(dtype);
    if (b) {
        b->ptr = (char *)t->data + t->byte_offset;
        b->dl_managed = mt; /* ours now: the capsule must not delete it */
        b->base = Py_NewRef(obj);
        PyCapsule_SetName(cap, "used_dltensor");
    }
    Py_DECREF(cap);
    return (PyObject *)b;
}

/* ---- export ---- */

PyObject *l2p_buffer_cai(PyObject *self, void *c)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    (void)c;
    ALIVE_OR_NULL(b);
    l2p_buffer_pin_cai(b); /* see buffer_release_relaxed: the free waits for consumers */
    PyObject *stream = Py_None;
    if (b->stream && !l2p_py_stream_closed((l2p_StreamObject *)b->stream)) {
        cudaStream_t h = l2p_py_stream_handle((l2p_StreamObject *)b->stream);
        /* CAI v3 forbids 0: the legacy default stream is 1. */
        stream = h ? PyLong_FromVoidPtr(h) : PyLong_FromLong(1);
    }
    else
        Py_INCREF(stream);
    PyObject *typestr = PyObject_GetAttrString((PyObject *)b->dtype, "str");
    PyObject *d = Py_BuildValue("{s:N,s:N,s:(N,O),s:i,s:O,s:N}", "shape", l2p_buffer_shape_tuple(b),
                                "typestr", typestr, "data", PyLong_FromVoidPtr(b->ptr), Py_False,
                                "version", 3, "strides", Py_None, "stream", stream);
    return d;
}

/* ---- DLPack export ---- */

typedef struct {
    PyObject *owner;
    int64_t shape[NPY_MAXDIMS];
} dl_context;

static void dl_deleter(l2p_DLManagedTensor *t)
{
    dl_context *ctx = (dl_context *)t->manager_ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    l2p_buffer_unpin((l2p_BufferObject *)ctx->owner); /* the last user frees a closed buffer */
    Py_XDECREF(ctx->owner);
    PyGILState_Release(g);
    PyMem_RawFree(ctx);
    PyMem_RawFree(t);
}

static void dl_capsule_destructor(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, "dltensor")) return; /* consumed: the consumer deletes it */
    l2p_DLManagedTensor *t = (l2p_DLManagedTensor *)PyCapsule_GetPointer(cap, "dltensor");
    if (t && t->deleter) t->deleter(t);
}

static int dl_dtype(PyArray_Descr *d, l2p_DLDataType *out)
{
    switch (d->kind) {
    case 'i': out->code = L2P_DL_INT; break;
    case 'u': out->code = L2P_DL_UINT; break;
    case 'f': out->code = L2P_DL_FLOAT; break;
    case 'c': out->code = L2P_DL_COMPLEX; break;
    case 'b': out->code = L2P_DL_BOOL; break;
    default:
        PyErr_Format(PyExc_BufferError, "dtype %R has no DLPack equivalent", (PyObject *)d);
        return -1;
    }
    out->bits = (uint8_t)(PyDataType_ELSIZE(d) * 8);
    out->lanes = 1;
    return 0;
}

/* The consumer's stream must see our work: its stream waits (on the device, no host sync)
 * for the stream we last launched on. DLPack: None means the legacy default stream, 1 the
 * legacy stream, 2 the per-thread default stream, -1 no synchronisation, else a handle. */
static int dl_sync(l2p_BufferObject *b, PyObject *stream)
{
    long long v = 1;
    cudaStream_t consumer;
    if (stream != Py_None) {
        if (PyBool_Check(stream) || !PyLong_Check(stream)) {
            PyErr_Format(PyExc_TypeError, "stream: expected None or an int (DLPack), got %s",
                         Py_TYPE(stream)->tp_name);
            return -1;
        }
        v = PyLong_AsLongLong(stream);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v == 0 || v < -1) {
            PyErr_Format(PyExc_ValueError, "stream: %lld is not a CUDA stream for DLPack (None, "
                         "-1, 1, 2 or a handle)", v);
            return -1;
        }
    }
    l2p_StreamObject *ours = (l2p_StreamObject *)b->stream;
    if (v == -1 || !ours || l2p_py_stream_closed(ours)) return 0;
    consumer = v == 1 ? cudaStreamLegacy : v == 2 ? cudaStreamPerThread : (cudaStream_t)(uintptr_t)v;
    if (l2p_stream_order(b->device, l2p_py_stream_handle(ours), consumer) != L2P_OK)
        return l2p_py_raise_int(l2p_state_from_type(Py_TYPE(b)));
    return 0;
}

typedef struct {
    PyObject *stream, *max_version, *dl_device, *copy;
} dlpack_args;

static PyObject *dlpack_impl(PyObject *self, const void *args)
{
    const dlpack_args *a = args;
    PyObject *stream = a->stream;
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    ALIVE_OR_NULL(b);
    if (a->copy == Py_True)
        return PyErr_Format(PyExc_BufferError, "copy=True: DeviceBuffer exports without copying");
    l2p_DLManagedTensor *t = PyMem_RawCalloc(1, sizeof *t);
    dl_context *ctx = PyMem_RawCalloc(1, sizeof *ctx);
    if (!t || !ctx) goto fail_mem;
    if (dl_dtype(b->dtype, &t->dl_tensor.dtype) < 0 || dl_sync(b, stream) < 0) goto fail;
    for (int i = 0; i < b->ndim; i++) ctx->shape[i] = b->shape[i];
    ctx->owner = Py_NewRef(self);
    t->dl_tensor.data = b->ptr;
    t->dl_tensor.device.device_type = L2P_DL_CUDA;
    t->dl_tensor.device.device_id = b->device;
    t->dl_tensor.ndim = b->ndim;
    t->dl_tensor.shape = ctx->shape;
    t->manager_ctx = ctx;
    t->deleter = dl_deleter;
    l2p_buffer_pin(b);
    PyObject *cap = PyCapsule_New(t, "dltensor", dl_capsule_destructor);
    if (!cap) dl_deleter(t);
    return cap;
fail_mem:
    PyErr_NoMemory();
fail:
    PyMem_RawFree(t);
    PyMem_RawFree(ctx);
    return NULL;
}

L2P_DEFINE_FN(dlpack_fn, dlpack_args, dlpack_impl, "__dlpack__",
              "A DLPack capsule of the buffer (no copy), ordered after the buffer's last "
              "stream for the consumer's stream.", "object",
              L2P_PARAM(dlpack_args, stream, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "int | None", .doc = "the consumer's stream: None, -1 (no "
                        "sync), 1, 2 or a handle"),
              L2P_PARAM(dlpack_args, max_version, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "tuple[int, int] | None", .doc = "the newest DLPack version "
                        "the consumer reads (the capsule is the unversioned one)"),
              L2P_PARAM(dlpack_args, dl_device, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "tuple[int, int] | None", .doc = "the device the consumer "
                        "wants (the buffer's own)"),
              L2P_PARAM(dlpack_args, copy, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "bool | None", .doc = "True is refused: no copies"));

const l2p_fn *const l2p_buffer_method_rows[] = {&dlpack_fn, NULL};

PyObject *l2p_buffer_dlpack_device(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    return Py_BuildValue("(ii)", L2P_DL_CUDA, ((l2p_BufferObject *)self)->device);
}

