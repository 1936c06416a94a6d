/* Foreign graphs, discovery and capture safety: module-level functions. */
#include "l2p_py.h"

#include "l2p_launchex.h"
#include "l2p_release.h"

static PyObject *release_pending(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    return PyLong_FromSize_t(l2p_release_pending());
}

static PyObject *release_drain(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    l2p_release_drain();
    return PyLong_FromSize_t(l2p_release_pending());
}

static l2p_state *mod_state(PyObject *m) { return l2p_state_from_module(m); }

/* _borrow_graph(handle, device, owner): a Graph over a foreign cudaGraph_t. The handle is the
 * caller's word (l2persist.as_graph finds it in the owner object). */
static PyObject *borrow_graph(PyObject *m, PyObject *args)
{
    unsigned long long handle;
    PyObject *device_obj, *owner;
    int device;
    if (!PyArg_ParseTuple(args, "KOO:_borrow_graph", &handle, &device_obj, &owner)) return NULL;
    if (!handle) {
        PyErr_SetString(PyExc_ValueError, "graph: a cudaGraph_t handle must be nonzero");
        return NULL;
    }
    if (l2p_py_device_index(mod_state(m), device_obj, &device) < 0) return NULL;
    return l2p_graph_borrow(mod_state(m), (cudaGraph_t)(uintptr_t)handle, device, owner);
}

/* _capture_begin_relaxed(stream): begin a relaxed-mode capture on an l2persist Stream or a
 * foreign stream (discovery captures someone else's code). */
static PyObject *capture_begin_relaxed(PyObject *m, PyObject *stream_obj)
{
    cudaStream_t h;
    PyObject *stream;
    if (l2p_py_stream_arg(mod_state(m), stream_obj, &h, &stream) < 0) return NULL;
    if (!h) {
        PyErr_SetString(PyExc_ValueError, "stream: capture needs a stream other than the legacy "
                        "default stream (None)");
        return NULL;
    }
    if (l2p_capture_begin_relaxed(h) != L2P_OK) return l2p_py_raise(mod_state(m));
    Py_RETURN_NONE;
}

/* _capture_end(stream, refs): end the capture; a Graph owning the captured graph, keeping refs
 * (a list) alive. Raises when the capture was invalidated. */
static PyObject *capture_end(PyObject *m, PyObject *args)
{
    PyObject *stream_obj, *refs, *stream;
    cudaStream_t h;
    cudaGraph_t graph = NULL;
    int device = 0;
    if (!PyArg_ParseTuple(args, "OO!:_capture_end", &stream_obj, &PyList_Type, &refs)) return NULL;
    if (l2p_py_stream_arg(mod_state(m), stream_obj, &h, &stream) < 0) return NULL;
    if (l2p_stream_device(h, &device) != L2P_OK) return l2p_py_raise(mod_state(m));
    if (l2p_capture_end(h, &graph) != L2P_OK) return l2p_py_raise(mod_state(m));
    return l2p_graph_new(mod_state(m), graph, device, refs);
}

/* One launch argument: a buffer (anything l2persist imports) -> its address; int, float, bool
 * and NumPy scalars -> their value, written at the parameter's width by the core. `keep`
 * collects the imported buffers until the launch is queued. */
static int launch_arg(l2p_state *st, PyObject *o, Py_ssize_t i, l2p_arg *a, PyObject *keep)
{
    if (PyBool_Check(o) || PyLong_Check(o) || PyArray_IsScalar(o, Integer)) {
        PyObject *n = PyNumber_Index(o);
        if (!n) return -1;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(n, &overflow);
        if (!overflow) {
            a->kind = L2P_ARG_INT;
            a->v.i = v;
        } else {
            a->kind = L2P_ARG_UINT;
            a->v.u = PyLong_AsUnsignedLongLong(n);
        }
        Py_DECREF(n);
        if (PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "args[%zd]: the integer does not fit 64 bits", i);
            return -1;
        }
        return 0;
    }
    if (PyFloat_Check(o) || PyArray_IsScalar(o, Floating)) {
        a->kind = L2P_ARG_FLOAT;
        a->v.f = PyFloat_AsDouble(o);
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *b = l2p_buffer_as_buffer(st, o);
    if (!b) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "args[%zd]: expected a device buffer (DeviceBuffer, "
                     "__cuda_array_interface__ or DLPack), an int or a float, got %s", i,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    int rc = PyList_Append(keep, b);
    l2p_BufferObject *buf = (l2p_BufferObject *)b;
    a->kind = L2P_ARG_POINTER;
    a->v.u = (uint64_t)(uintptr_t)buf->ptr;
    if (rc == 0 && l2p_buffer_check_alive(buf) < 0) rc = -1;
    Py_DECREF(b);
    return rc;
}

/* _launch_ex(func, is_kernel, grid, block, args, stream, window, shared_mem, device) */
static PyObject *launch_ex(PyObject *m, PyObject *args)
{
    unsigned long long func;
    int is_kernel;
    unsigned grid[3], block[3];
    PyObject *argseq, *stream_obj, *window_obj, *device_obj, *stream;
    long long shared;
    l2p_state *st = mod_state(m);
    if (!PyArg_ParseTuple(args, "Kp(III)(III)OOOLO:_launch_ex", &func, &is_kernel, &grid[0],
                          &grid[1], &grid[2], &block[0], &block[1], &block[2], &argseq,
                          &stream_obj, &window_obj, &shared, &device_obj))
        return NULL;
    if (shared < 0 || shared > 0xffffffffLL) {
        PyErr_Format(PyExc_ValueError, "shared_mem: must be in 0..4294967295 bytes, got %lld",
                     shared);
        return NULL;
    }
    cudaStream_t h;
    const l2p_window *w;
    int device;
    if (l2p_py_stream_arg(st, stream_obj, &h, &stream) < 0 ||
        l2p_py_window_arg(st, window_obj, &w) < 0)
        return NULL;
    if (h) {
        if (l2p_stream_device(h, &device) != L2P_OK) return l2p_py_raise(st);
    } else if (l2p_py_device_index(st, device_obj, &device) < 0) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(argseq, "args: expected a sequence of kernel arguments");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    l2p_arg *a = PyMem_Calloc((size_t)n + 1, sizeof *a);
    PyObject *keep = PyList_New(0);
    PyObject *r = NULL;
    if (!a || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (launch_arg(st, PySequence_Fast_GET_ITEM(seq, i), i, &a[i], keep) < 0) goto done;
    if (l2p_launch_ex(device, (void *)(uintptr_t)func, is_kernel, grid, block, (unsigned)shared,
                      h, w, a, (size_t)n) != L2P_OK) {
        l2p_py_raise(st);
        goto done;
    }
    r = Py_NewRef(Py_None);
done:
    Py_XDECREF(keep);
    PyMem_Free(a);
    Py_DECREF(seq);
    return r;
}

PyMethodDef l2p_foreign_functions[] = {
    {"_launch_ex", launch_ex, METH_VARARGS,
     "_launch_ex(func, is_kernel, grid, block, args, stream, window, shared_mem, device)\n--\n\n"
     "cuLaunchKernelEx of a CUfunction (or CUkernel) with an optional window (use "
     "l2persist.launch)."},
    {"_borrow_graph", borrow_graph, METH_VARARGS,
     "_borrow_graph(handle, device, owner)\n--\n\nA Graph over a foreign cudaGraph_t, never "
     "destroyed by l2persist (use l2persist.as_graph)."},
    {"_capture_begin_relaxed", capture_begin_relaxed, METH_O,
     "_capture_begin_relaxed(stream)\n--\n\nBegin a relaxed-mode capture (discovery)."},
    {"_capture_end", capture_end, METH_VARARGS,
     "_capture_end(stream, refs)\n--\n\nEnd a capture; the Graph (keeps refs alive)."},
    {"_release_pending", release_pending, METH_NOARGS,
     "_release_pending()\n--\n\nReleases (frees, destroys) deferred because a capture refused "
     "them; drained at the next allocation, graph launch and at teardown."},
    {"_release_drain", release_drain, METH_NOARGS,
     "_release_drain()\n--\n\nRetry the deferred releases now; returns how many still wait."},
    {NULL, NULL, 0, NULL}};
