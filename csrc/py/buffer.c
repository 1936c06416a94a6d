/* The l2persist.DeviceBuffer type: its methods, views and attributes. Its lifetime is in
 * buffer_life.c, making buffers in buffer_new.c, interop (__cuda_array_interface__ v3 and
 * DLPack, both ways) in dlpack.c. */
#include "l2p_py.h"
#include "params.h"

#include <structmember.h>

#include "dlpack.h"
#include "l2p_memory.h"

static l2p_state *buf_state(PyObject *self) { return l2p_state_from_type(Py_TYPE(self)); }

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
    PyArrayObject *a = l2p_buffer_host_array(obj);
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
    int rc = l2p_buffer_copy_in(buf_state(self), b, a);
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
    if (l2p_buffer_release((l2p_BufferObject *)self) != L2P_OK) return l2p_py_raise(buf_state(self));
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
    if (l2p_buffer_release((l2p_BufferObject *)self) != L2P_OK) return l2p_py_raise(buf_state(self));
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
    v->base = Py_NewRef(self); /* its memory's lifetime is the owner's (l2p_buffer_life) */
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
    (void)l2p_buffer_release((l2p_BufferObject *)self); /* breaking a cycle: the memory goes too */
    return 0;
}

static void buf_dealloc(PyObject *self)
{
    l2p_BufferObject *b = (l2p_BufferObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (b->weakreflist) PyObject_ClearWeakRefs(self);
    (void)l2p_buffer_release(b); /* never raises from dealloc; a failed free is dropped */
    if (b->cai_pinned) { /* the CAI export's pin: its consumers are gone with the last reference */
        b->cai_pinned = 0; /* set on owners only (l2p_buffer_pin_cai) */
        if (l2p_handle_unpin(&b->mem) != L2P_OK) l2p_clear_error();
    }
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
    /* Made once: a second module (a sub-interpreter) reuses the list. Testing rows[0] inside
     * the loop stopped it after the first part, and __dlpack__ went missing (seen on the H100:
     * DLPack consumers failed, "no attribute '__dlpack__'"). */
    int made = rows[0] != NULL;
    for (int p = 0; p < 2 && !made; p++)
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
