/* Python entry points of the kernels in kernels/: argument checks, then the C launcher. */
#include "l2p_py.h"

#include "l2p_kernels.h"

/* What every launch needs: the device, the stream and an optional per-launch window. */
typedef struct {
    l2p_state *st;
    int device;
    cudaStream_t stream;
    PyObject *stream_obj;
    const l2p_window *window;
} launch_ctx;

static int ctx_init(launch_ctx *c, PyObject *m, int device, PyObject *stream, PyObject *window)
{
    c->st = l2p_state_from_module(m);
    c->device = device;
    if (l2p_py_stream_arg(c->st, stream, &c->stream, &c->stream_obj) < 0 ||
        l2p_py_window_arg(c->st, window, &c->window) < 0)
        return -1;
    return 0;
}

/* A buffer argument of one dtype (NPY_NOTYPE: any). New reference in *out. */
static int buffer_arg(l2p_state *st, PyObject *obj, const char *name, int type_num,
                      l2p_BufferObject **out)
{
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
    if (type_num != NPY_NOTYPE && (*out)->dtype->type_num != type_num) {
        PyArray_Descr *want = PyArray_DescrFromType(type_num);
        PyErr_Format(PyExc_TypeError, "%s: dtype must be %R, got %R", name, (PyObject *)want,
                     (PyObject *)(*out)->dtype);
        Py_XDECREF(want);
        Py_CLEAR(*out);
        return -1;
    }
    return 0;
}

/* Launch on the right device, report a failed launch as CudaError, remember the stream. */
static PyObject *finish(launch_ctx *c, cudaError_t rc, const char *what, l2p_BufferObject *used)
{
    if (rc != cudaSuccess) {
        l2p_fail_cuda(rc, what);
        return l2p_py_raise(c->st);
    }
    if (used && l2p_buffer_note_use(used, c->stream_obj) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *k_noop(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"stream", "window", "device", NULL};
    PyObject *stream = Py_None, *window = Py_None, *device = Py_None;
    launch_ctx c;
    int index, prev;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOO:noop", names, &stream, &window, &device))
        return NULL;
    if (l2p_py_device_index(l2p_state_from_module(m), device, &index) < 0 ||
        ctx_init(&c, m, index, stream, window) < 0)
        return NULL;
    if (l2p_device_enter(index, &prev) != L2P_OK) return l2p_py_raise(c.st);
    cudaError_t rc = l2p_launch_noop(c.stream, c.window);
    l2p_device_leave(prev);
    return finish(&c, rc, "l2p_launch_noop", NULL);
}

static PyObject *k_scale_shift(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"data", "scale", "shift", "stream", "window", NULL};
    PyObject *data_obj, *stream = Py_None, *window = Py_None;
    double scale = 2.0, shift = 1.0;
    l2p_BufferObject *data;
    launch_ctx c;
    int prev;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|dd$OO:scale_shift", names, &data_obj, &scale,
                                     &shift, &stream, &window))
        return NULL;
    if (buffer_arg(l2p_state_from_module(m), data_obj, "data", NPY_FLOAT32, &data) < 0)
        return NULL;
    PyObject *r = NULL;
    if (ctx_init(&c, m, data->device, stream, window) == 0) {
        if (l2p_device_enter(data->device, &prev) != L2P_OK) {
            l2p_py_raise(c.st);
        } else {
            cudaError_t rc = l2p_launch_scale_shift((float *)data->ptr, data->nbytes / 4,
                                                    (float)scale, (float)shift, c.stream, c.window);
            l2p_device_leave(prev);
            r = finish(&c, rc, "l2p_launch_scale_shift", data);
        }
    }
    Py_DECREF(data);
    return r;
}

PyMethodDef l2p_kernel_functions[] = {
    {"noop", (PyCFunction)(void (*)(void))k_noop, METH_VARARGS | METH_KEYWORDS,
     "noop(*, stream=None, window=None, device=None): launch an empty kernel (1 thread)."},
    {"scale_shift", (PyCFunction)(void (*)(void))k_scale_shift, METH_VARARGS | METH_KEYWORDS,
     "scale_shift(data, scale=2.0, shift=1.0, *, stream=None, window=None): "
     "data = data * scale + shift over a float32 buffer, in place."},
    {NULL, NULL, 0, NULL}};
