/* Event timing of a Python callable, with the statistics computed in C. */
#include "l2p_py.h"

#include "l2p_kernels.h"
#include "l2p_timing.h"

#include <math.h>

#define L2P_STR_(x) #x
#define L2P_STR(x) L2P_STR_(x)

static PyObject *stats_dict(const l2p_stats *s)
{
    return Py_BuildValue("{s:n,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "n", (Py_ssize_t)s->n,
                         "median", s->median, "min", s->min, "max", s->max, "mean", s->mean,
                         "stdev", s->stdev, "q1", s->q1, "q3", s->q3, "iqr", s->iqr);
}

static int samples_arg(PyObject *obj, double **out, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(obj, "samples: expected a sequence of numbers");
    if (!seq) return -1;
    *n = PySequence_Fast_GET_SIZE(seq);
    *out = PyMem_Calloc((size_t)*n + 1, sizeof **out);
    if (!*out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        (*out)[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (!isfinite((*out)[i]) && !PyErr_Occurred()) /* NaN or inf: not a time */
            PyErr_Format(PyExc_ValueError, "samples: entry %zd is %s, not a finite time", i,
                         isnan((*out)[i]) ? "NaN" : "infinite");
        if (PyErr_Occurred()) {
            Py_DECREF(seq);
            PyMem_Free(*out);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

static PyObject *fn_stats(PyObject *m, PyObject *obj)
{
    double *v;
    Py_ssize_t n;
    l2p_stats s;
    if (samples_arg(obj, &v, &n) < 0) return NULL;
    l2p_status rc = l2p_stats_compute(v, (size_t)n, &s);
    PyMem_Free(v);
    if (rc != L2P_OK) return l2p_py_raise(l2p_state_from_module(m));
    return stats_dict(&s);
}

static int count_arg(PyObject *obj, const char *name, long min, long *out)
{
    if (PyBool_Check(obj) || !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int in [%ld, %d]", name, min,
                     L2P_TIME_MAX_COUNT);
        return -1;
    }
    int overflow = 0;
    *out = PyLong_AsLongAndOverflow(obj, &overflow);
    if (*out == -1 && PyErr_Occurred()) return -1;
    if (overflow || *out < min || *out > L2P_TIME_MAX_COUNT) {
        PyErr_Format(PyExc_ValueError, "%s: %S is outside [%ld, %d]", name, obj, min,
                     L2P_TIME_MAX_COUNT);
        return -1;
    }
    return 0;
}

/* The core's callback: call the user's fn (the GIL is held here). */
static l2p_status call_fn(void *fn, cudaStream_t stream)
{
    (void)stream; /* fn enqueues on the stream it was given by the caller */
    PyObject *r = PyObject_CallNoArgs((PyObject *)fn);
    if (!r) return l2p_fail(L2P_ERR_CALLBACK, "fn raised");
    Py_DECREF(r);
    return L2P_OK;
}

static void *release_gil(void) { return PyEval_SaveThread(); }
static void take_gil(void *token) { PyEval_RestoreThread((PyThreadState *)token); }

static cudaError_t spin(unsigned long long ns, cudaStream_t stream)
{
    return l2p_launch_spin(ns, stream);
}

/* The device of the run: the stream's, else device=; both given must agree. */
static int run_device(l2p_state *st, PyObject *stream_ref, cudaStream_t stream, PyObject *dev,
                      int *index)
{
    if (stream_ref) *index = ((l2p_StreamObject *)stream_ref)->device;
    else if (stream) { /* a foreign stream: its events and flush buffer go on its device */
        if (l2p_stream_device(stream, index) != L2P_OK) return l2p_py_raise_int(st);
    } else return l2p_py_device_index(st, dev, index);
    if (dev != Py_None) {
        int asked;
        if (l2p_py_device_index(st, dev, &asked) < 0) return -1;
        if (asked != *index) {
            PyErr_Format(PyExc_ValueError, "device: %d, but the stream belongs to device %d",
                         asked, *index);
            return -1;
        }
    }
    return 0;
}

static PyObject *samples_list(const double *v, long n)
{
    PyObject *list = PyList_New(n);
    for (long i = 0; list && i < n; i++) {
        PyObject *f = PyFloat_FromDouble(v[i]);
        if (!f) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, f);
    }
    return list;
}

static PyObject *fn_time_calls(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"fn", "stream", "warmup", "repeat", "device", "flush_l2", "graph",
                            "hold_us", NULL};
    PyObject *fn, *stream_obj = Py_None, *warm_obj = NULL, *rep_obj = NULL, *dev = Py_None;
    PyObject *stream_ref, *samples = NULL;
    int flush = 0, graph = 0;
    l2p_state *st = l2p_state_from_module(m);
    l2p_timing_run r = {.warmup = L2P_TIME_WARMUP, .repeat = L2P_TIME_REPEAT,
                        .hold_us = L2P_TIME_HOLD_US, .enqueue = call_fn, .spin = spin,
                        .wait_begin = release_gil, .wait_end = take_gil};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOOppd:time_calls", names, &fn, &stream_obj,
                                     &warm_obj, &rep_obj, &dev, &flush, &graph, &r.hold_us))
        return NULL;
    if (!PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "fn: expected a callable");
    if ((warm_obj && count_arg(warm_obj, "warmup", 0, &r.warmup) < 0) ||
        (rep_obj && count_arg(rep_obj, "repeat", 1, &r.repeat) < 0) ||
        l2p_py_stream_arg(st, stream_obj, &r.stream, &stream_ref) < 0)
        return NULL;
    r.ctx = fn;
    r.graph = graph;
    r.flush = flush ? &st->flush : NULL;
    if (l2p_timing_check(&r) != L2P_OK) return l2p_py_raise(st);
    if (run_device(st, stream_ref, r.stream, dev, &r.device) < 0) return NULL;
    double *v = PyMem_Calloc((size_t)r.repeat, sizeof *v);
    if (!v) return PyErr_NoMemory();
    if (l2p_time_samples(&r, v) == L2P_OK) samples = samples_list(v, r.repeat);
    else if (!PyErr_Occurred()) l2p_py_raise(st); /* else fn's own exception stands */
    PyMem_Free(v);
    return samples;
}

PyMethodDef l2p_timing_functions[] = {
    {"stats", fn_stats, METH_O,
     "stats(samples)\n--\n\nN, median, min, max, mean, stdev, q1, q3, iqr (NumPy's "
     "linear percentiles), computed in C."},
    {"time_calls", (PyCFunction)(void (*)(void))fn_time_calls, METH_VARARGS | METH_KEYWORDS,
     "time_calls(fn, *, stream=None, warmup=" L2P_STR(L2P_TIME_WARMUP) ", repeat="
     L2P_STR(L2P_TIME_REPEAT) ", device=None, flush_l2=False, graph=False, hold_us="
     L2P_STR(L2P_TIME_HOLD_US) ")\n--\n\nCall fn() warmup + repeat times between CUDA events "
     "on the stream (or capture it once and replay the graph); the repeat samples in ms. "
     "Before each sample, flush_l2 writes a buffer of twice the L2, and a one-thread kernel "
     "spins for hold_us microseconds so the events time the GPU, not the host's launches."},
    {NULL, NULL, 0, NULL}};
