/* The one mapping from core errors to Python exceptions, and the exception classes. */
#include "l2p_py.h"

static PyObject *new_exception(PyObject *m, const char *name, PyObject *bases, const char *doc)
{
    char qualified[96];
    PyObject *exc;
    snprintf(qualified, sizeof qualified, "l2persist.%s", name);
    exc = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
    if (exc && PyModule_AddObjectRef(m, name, exc) < 0) Py_CLEAR(exc);
    return exc;
}

int l2p_add_exceptions(PyObject *m, l2p_state *st);
int l2p_add_exceptions(PyObject *m, l2p_state *st)
{
    PyObject *bases;
    st->CudaError = new_exception(m, "CudaError", PyExc_RuntimeError,
                                  "A CUDA (or CUPTI) call failed. .code is the runtime's error "
                                  "code, .name its name, .call the call that failed.");
    if (!st->CudaError) return -1;
    bases = PyTuple_Pack(2, st->CudaError, PyExc_MemoryError);
    if (!bases) return -1;
    st->CudaMemoryError = new_exception(m, "CudaMemoryError", bases,
                                        "Device memory ran out (also a MemoryError).");
    Py_DECREF(bases);
    if (!st->CudaMemoryError) return -1;
    st->NotSupportedError = new_exception(m, "NotSupportedError", st->CudaError,
                                          "The device, driver or mode lacks the feature "
                                          "(for instance the persisting-L2 set-aside on MIG).");
    if (!st->NotSupportedError) return -1;
    st->NoDeviceError = new_exception(m, "NoDeviceError", st->CudaError,
                                      "No usable CUDA device; the message gives the runtime's "
                                      "reason.");
    return st->NoDeviceError ? 0 : -1;
}

static PyObject *exception_type(l2p_state *st, const l2p_error *e)
{
    switch (e->status) {
    case L2P_ERR_VALUE:
    case L2P_ERR_STATE: return PyExc_ValueError;
    case L2P_ERR_TYPE: return PyExc_TypeError;
    case L2P_ERR_NOT_SUPPORTED: return st->NotSupportedError;
    case L2P_ERR_NO_DEVICE: return st->NoDeviceError;
    case L2P_ERR_NO_MEMORY: return e->cuda_code ? st->CudaMemoryError : PyExc_MemoryError;
    default: return st->CudaError;
    }
}

static int set_cuda_attributes(PyObject *exc, const l2p_error *e)
{
    int code = e->status == L2P_ERR_CUPTI ? e->cupti_code : e->cuda_code;
    const char *name = e->status == L2P_ERR_CUPTI ? "CUPTI_ERROR"
                                                  : cudaGetErrorName((cudaError_t)e->cuda_code);
    PyObject *v = PyLong_FromLong(code);
    if (!v || PyObject_SetAttrString(exc, "code", v) < 0) goto fail;
    Py_DECREF(v);
    v = PyUnicode_FromString(name);
    if (!v || PyObject_SetAttrString(exc, "name", v) < 0) goto fail;
    Py_DECREF(v);
    v = PyUnicode_FromString(e->call);
    if (!v || PyObject_SetAttrString(exc, "call", v) < 0) goto fail;
    Py_DECREF(v);
    return 0;
fail:
    Py_XDECREF(v);
    return -1;
}

PyObject *l2p_py_raise(l2p_state *st)
{
    const l2p_error *e = l2p_last_error();
    PyObject *type = exception_type(st, e);
    PyObject *exc;
    if (e->status == L2P_OK) {
        PyErr_SetString(PyExc_SystemError, "l2persist: a core call failed without an error");
        return NULL;
    }
    if (e->status == L2P_ERR_CALLBACK && PyErr_Occurred()) return NULL; /* the callback's own */
    exc = PyObject_CallFunction(type, "s", e->message);
    if (!exc) return NULL;
    if (PyObject_IsSubclass(type, st->CudaError) == 1 && set_cuda_attributes(exc, e) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

int l2p_py_raise_int(l2p_state *st)
{
    l2p_py_raise(st);
    return -1;
}
