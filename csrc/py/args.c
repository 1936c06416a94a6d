/* Argument converters shared by every type: devices, sizes, streams, windows. */
#include "l2p_py.h"

int l2p_py_int_arg(PyObject *obj, const char *name, long long *out)
{
    if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int, got %s", name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *v = PyNumber_Index(obj);
    if (!v) return -1;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (overflow > 0) *out = LLONG_MAX;
    if (overflow < 0) *out = LLONG_MIN;
    if (*out == -1 && PyErr_Occurred()) return -1;
    return 0;
}

int l2p_py_bool_arg(PyObject *obj, const char *name, int *out)
{
    /* True / False, NumPy's bool, or the ints 0 and 1: a str, None or a list is a mistake
     * that truth-testing would take as a value ("no" is true). */
    if (PyBool_Check(obj) || PyArray_IsScalar(obj, Bool)) {
        *out = PyObject_IsTrue(obj);
        return *out < 0 ? -1 : 0;
    }
    if (PyLong_CheckExact(obj)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (!overflow && (v == 0 || v == 1)) {
            *out = (int)v;
            return 0;
        }
        if (PyErr_Occurred()) return -1;
    }
    PyErr_Format(PyExc_TypeError, "%s: expected a bool (True or False), got %s %R", name,
                 Py_TYPE(obj)->tp_name, obj);
    return -1;
}

int l2p_py_size_arg(PyObject *obj, const char *name, long long *out)
{
    if (l2p_py_int_arg(obj, name, out) < 0) return -1;
    if (*out < 0) { /* one place that keeps every size and count argument non-negative */
        PyErr_Format(PyExc_ValueError, "%s: %lld is negative; expected an int >= 0", name, *out);
        return -1;
    }
    return 0;
}

static int current_device(l2p_state *st, int *index)
{
    int n;
    cudaError_t why;
    l2p_device_count(&n, &why);
    if (n == 0) {
        l2p_device_check(0); /* records the no-device error with the runtime's reason */
        return l2p_py_raise_int(st);
    }
    if (cudaGetDevice(index) != cudaSuccess) {
        (void)cudaGetLastError();
        *index = 0;
    }
    return 0;
}

int l2p_py_device_index(l2p_state *st, PyObject *obj, int *index)
{
    if (obj == NULL || obj == Py_None) return current_device(st, index);
    if (PyObject_TypeCheck(obj, st->Device)) {
        *index = ((l2p_DeviceObject *)obj)->index;
        return 0;
    }
    if (PyBool_Check(obj) || !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "device: expected None, an int index or a Device, got %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < INT_MIN || v > INT_MAX) { /* in range: the core names the count */
        PyErr_Format(PyExc_ValueError, "device: %S is outside [0, device_count()) (a device "
                     "index; or a Device, or None for the current one)", obj);
        return -1;
    }
    *index = (int)v;
    if (l2p_device_check(*index) != L2P_OK) return l2p_py_raise_int(st);
    return 0;
}

/* A stream handle from a foreign object's protocol: an int in [0, 2^64 - 1]. `source` says
 * where it came from ("__cuda_stream__()[1]", ".cuda_stream", ".ptr"). Steals v. */
static int handle_value(PyObject *v, const char *source, uintptr_t *handle)
{
    if (PyBool_Check(v) || !PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "stream: %s is a %s; expected an int handle in "
                     "[0, 2^64 - 1]", source, Py_TYPE(v)->tp_name);
        Py_DECREF(v);
        return -1;
    }
    unsigned long long h = PyLong_AsUnsignedLongLong(v);
    if (h == (unsigned long long)-1 && PyErr_Occurred()) {
        int overflow = 0;
        PyErr_Clear();
        long long s = PyLong_AsLongLongAndOverflow(v, &overflow); /* negative, or beyond */
        if (s == -1 && PyErr_Occurred()) PyErr_Clear();
        if (overflow)
            PyErr_Format(PyExc_ValueError, "stream: %s is an int %s 64 bits; expected an int "
                         "handle in [0, 2^64 - 1]", source, overflow > 0 ? "above" : "below");
        else
            PyErr_Format(PyExc_ValueError, "stream: %s is %lld, outside [0, 2^64 - 1] (a "
                         "stream handle)", source, s);
        Py_DECREF(v);
        return -1;
    }
    Py_DECREF(v);
    *handle = (uintptr_t)h;
    return 0;
}

/* A bare int: only the default streams' values. A wrong handle crashes the driver at the
 * launch and cannot be checked before it. */
static int bare_int_handle(PyObject *obj, uintptr_t *handle)
{
    int overflow = 0;
    long long h = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (h == -1 && PyErr_Occurred()) return -1;
    if (overflow || h < 0 || h > 2) {
        char shown[32];
        if (overflow) snprintf(shown, sizeof shown, "an int outside 64 bits");
        else snprintf(shown, sizeof shown, "%lld", h);
        PyErr_Format(PyExc_ValueError, "stream: a bare int handle (%s) cannot be checked and a "
                     "wrong one crashes the driver; an int must be 0 / 1 (legacy) / 2 "
                     "(per-thread), the default streams; otherwise pass the stream object (a "
                     "Stream, cuda.core's, CuPy's or PyTorch's, or anything with "
                     "__cuda_stream__)", shown);
        return -1;
    }
    *handle = (uintptr_t)h;
    return 0;
}

/* A foreign stream's handle: __cuda_stream__ (cuda.core protocol), .cuda_stream (PyTorch),
 * .ptr (CuPy), or a plain int. */
static int foreign_stream_handle(PyObject *obj, uintptr_t *handle)
{
    PyObject *v = NULL;
    const char *source;
    if (PyObject_HasAttrString(obj, "__cuda_stream__")) {
        PyObject *pair = PyObject_CallMethod(obj, "__cuda_stream__", NULL);
        if (!pair) return -1;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            Py_DECREF(pair);
            PyErr_SetString(PyExc_TypeError, "stream: __cuda_stream__() must return "
                            "(version, handle)");
            return -1;
        }
        v = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
        Py_DECREF(pair);
        source = "__cuda_stream__()'s handle";
    } else if (PyObject_HasAttrString(obj, "cuda_stream")) {
        v = PyObject_GetAttrString(obj, "cuda_stream");
        source = ".cuda_stream";
    } else if (PyObject_HasAttrString(obj, "__cuda_array_interface__") ||
               PyObject_HasAttrString(obj, "__dlpack__") ||
               PyObject_HasAttrString(obj, "mem")) {
        /* A buffer, array or CuPy MemoryPointer has a .ptr too: memory, not a stream. */
        PyErr_Format(PyExc_TypeError, "stream: %s is device memory, not a stream",
                     Py_TYPE(obj)->tp_name);
        return -1;
    } else if (PyObject_HasAttrString(obj, "ptr") && !PyLong_Check(obj)) {
        v = PyObject_GetAttrString(obj, "ptr");
        source = ".ptr";
    } else if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        return bare_int_handle(obj, handle);
    } else {
        PyErr_Format(PyExc_TypeError, "stream: expected None, a Stream, an object with "
                     "__cuda_stream__ (or CuPy's .ptr, PyTorch's .cuda_stream) or 0 / 1 / 2 "
                     "(the default streams), got %s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    return v ? handle_value(v, source, handle) : -1;
}

int l2p_py_stream_arg(l2p_state *st, PyObject *obj, cudaStream_t *handle, PyObject **stream)
{
    *stream = NULL;
    if (obj == NULL || obj == Py_None) {
        *handle = NULL; /* the legacy default stream */
        return 0;
    }
    if (PyObject_TypeCheck(obj, st->Stream)) {
        l2p_StreamObject *s = (l2p_StreamObject *)obj;
        /* its closed state only: the launch asks the context, once for all its objects */
        if (l2p_py_stream_usable(s, L2P_LIFE_UNASKED) < 0) return -1;
        *handle = l2p_py_stream_handle(s);
        *stream = obj;
        return 0;
    }
    uintptr_t h;
    if (foreign_stream_handle(obj, &h) < 0) return -1;
    *handle = (cudaStream_t)h;
    return 0;
}

int l2p_py_window_arg(l2p_state *st, PyObject *obj, const l2p_window **w)
{
    *w = NULL;
    if (obj == NULL || obj == Py_None) return 0;
    if (!PyObject_TypeCheck(obj, st->AccessPolicyWindow)) {
        PyErr_Format(PyExc_TypeError, "window: expected None or an AccessPolicyWindow, got %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *w = &((l2p_WindowObject *)obj)->w;
    return 0;
}
