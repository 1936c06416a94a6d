/* Event timing of a Python callable, with the statistics computed in C. */
#include "l2p_py.h"

#include "l2p_kernels.h"
#include "l2p_memory.h"
#include "l2p_timing.h"

#include <math.h>
#include <string.h>

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

/* One timed call: events around fn() on the stream. */
static int time_one(l2p_state *st, l2p_timer *t, PyObject *fn, cudaStream_t stream, double *ms)
{
    l2p_status rc;
    if (l2p_timer_start(t, stream) != L2P_OK) return l2p_py_raise_int(st);
    PyObject *r = PyObject_CallNoArgs(fn);
    if (!r) return -1;
    Py_DECREF(r);
    if (l2p_timer_stop(t, stream) != L2P_OK) return l2p_py_raise_int(st);
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_timer_elapsed_ms(t, ms);
    Py_END_ALLOW_THREADS
    return rc == L2P_OK ? 0 : l2p_py_raise_int(st);
}

static int count_arg(PyObject *obj, const char *name, long min, long *out)
{
    if (PyBool_Check(obj) || !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int >= %ld", name, min);
        return -1;
    }
    *out = PyLong_AsLong(obj);
    if (*out == -1 && PyErr_Occurred()) return -1;
    if (*out < min || *out > 1000000) {
        PyErr_Format(PyExc_ValueError, "%s: %ld is outside [%ld, 1000000]", name, *out, min);
        return -1;
    }
    return 0;
}

/* A per-device buffer of 2x the L2, written before each sample when flush_l2 is asked for.
 * Writing it evicts normal lines; lines held by the persisting set-aside stay. */
static int flush_buffer(l2p_state *st, int device, void **ptr, size_t *nbytes)
{
    unsigned long long now = 0;
    if (l2p_device_context_id(device, &now) != L2P_OK) return l2p_py_raise_int(st);
    if (st->flush[device] && now && st->flush_ctx[device] && now != st->flush_ctx[device])
        st->flush[device] = NULL; /* the device was reset: that memory is gone, not ours to free */
    if (!st->flush[device]) {
        l2p_device_props p;
        if (l2p_device_get_properties(device, &p) != L2P_OK ||
            l2p_memory_alloc(device, 2 * p.l2_cache_size, &st->flush[device]) != L2P_OK)
            return l2p_py_raise_int(st);
        st->flush_bytes[device] = 2 * p.l2_cache_size;
        st->flush_ctx[device] = now;
    }
    *ptr = st->flush[device];
    *nbytes = st->flush_bytes[device];
    return 0;
}

typedef struct {
    l2p_state *st;
    PyObject *fn;
    cudaStream_t stream;
    l2p_timer timer;
    void *flush;          /* NULL: no flush */
    unsigned long long hold_ns; /* spin queued before each sample; 0: none */
    size_t flush_bytes;
    l2p_graph graph;      /* graph.graph NULL: call fn each time */
} timing_run;

/* Capture fn once into a graph on the (non-default) stream. */
static int capture_fn(timing_run *r)
{
    if (l2p_capture_begin(r->stream) != L2P_OK) return l2p_py_raise_int(r->st);
    PyObject *res = PyObject_CallNoArgs(r->fn);
    Py_XDECREF(res);
    cudaGraph_t g = NULL;
    l2p_status rc = l2p_capture_end(r->stream, &g);
    if (!res) {
        if (g) (void)cudaGraphDestroy(g);
        return -1;
    }
    if (rc != L2P_OK) return l2p_py_raise_int(r->st);
    l2p_graph_adopt(&r->graph, g);
    return 0;
}

static int run_sample(timing_run *r, double *ms)
{
    l2p_status rc = L2P_OK;
    if (r->flush)
        rc = l2p_memory_set(r->timer.device, r->flush, 0x5a, r->flush_bytes, r->stream);
    if (rc == L2P_OK && r->hold_ns) {
        cudaError_t e = l2p_launch_spin(r->hold_ns, r->stream);
        if (e != cudaSuccess) rc = l2p_fail_cuda(e, "l2p_launch_spin");
    }
    if (rc == L2P_OK && r->graph.graph) {
        if (l2p_timer_start(&r->timer, r->stream) != L2P_OK ||
            l2p_graph_launch(&r->graph, r->stream) != L2P_OK ||
            l2p_timer_stop(&r->timer, r->stream) != L2P_OK)
            return l2p_py_raise_int(r->st);
        Py_BEGIN_ALLOW_THREADS
        rc = l2p_timer_elapsed_ms(&r->timer, ms);
        Py_END_ALLOW_THREADS
        return rc == L2P_OK ? 0 : l2p_py_raise_int(r->st);
    }
    if (rc != L2P_OK) return l2p_py_raise_int(r->st);
    return time_one(r->st, &r->timer, r->fn, r->stream, ms);
}

static PyObject *collect(timing_run *r, long warmup, long repeat)
{
    PyObject *samples = PyList_New(0);
    for (long i = 0; samples && i < warmup + repeat; i++) {
        double ms;
        if (run_sample(r, &ms) < 0) Py_CLEAR(samples);
        else if (i >= warmup) {
            PyObject *v = PyFloat_FromDouble(ms);
            if (!v || PyList_Append(samples, v) < 0) Py_CLEAR(samples);
            Py_XDECREF(v);
        }
    }
    return samples;
}

static PyObject *fn_time_calls(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"fn", "stream", "warmup", "repeat", "device", "flush_l2", "graph",
                            "hold_us", NULL};
    PyObject *fn, *stream_obj = Py_None, *warm_obj = NULL, *rep_obj = NULL, *dev = Py_None;
    PyObject *stream_ref, *samples = NULL;
    long warmup = 3, repeat = 20;
    int index, flush = 0, graph = 0;
    double hold_us = 0.0;
    timing_run r;
    memset(&r, 0, sizeof r);
    r.st = l2p_state_from_module(m);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOOppd:time_calls", names, &fn, &stream_obj,
                                     &warm_obj, &rep_obj, &dev, &flush, &graph, &hold_us))
        return NULL;
    if (!(hold_us >= 0.0 && hold_us <= 1e6))
        return l2p_fail(L2P_ERR_VALUE, "hold_us: %g is outside [0, 1e6]", hold_us),
               l2p_py_raise(r.st);
    r.hold_ns = (unsigned long long)(hold_us * 1e3);
    if (!PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "fn: expected a callable");
    if ((warm_obj && count_arg(warm_obj, "warmup", 0, &warmup) < 0) ||
        (rep_obj && count_arg(rep_obj, "repeat", 1, &repeat) < 0) ||
        l2p_py_stream_arg(r.st, stream_obj, &r.stream, &stream_ref) < 0)
        return NULL;
    if (graph && !r.stream)
        return PyErr_Format(PyExc_ValueError, "stream: graph=True captures fn on a stream; pass "
                            "stream= (the legacy default stream cannot be captured)");
    if (stream_ref) index = ((l2p_StreamObject *)stream_ref)->device;
    else if (r.stream) { /* a foreign stream: its events and flush buffer go on its device */
        if (l2p_stream_device(r.stream, &index) != L2P_OK) return l2p_py_raise(r.st);
    } else if (l2p_py_device_index(r.st, dev, &index) < 0) return NULL;
    if (dev != Py_None && (stream_ref || r.stream)) {
        int asked;
        if (l2p_py_device_index(r.st, dev, &asked) < 0) return NULL;
        if (asked != index)
            return PyErr_Format(PyExc_ValueError, "device: %d, but the stream belongs to "
                                "device %d", asked, index);
    }
    r.fn = fn;
    r.graph.device = index;
    if (flush && flush_buffer(r.st, index, &r.flush, &r.flush_bytes) < 0) return NULL;
    if (l2p_timer_create(index, &r.timer) != L2P_OK) return l2p_py_raise(r.st);
    int prev;
    if (l2p_device_enter(index, &prev) != L2P_OK) {
        l2p_timer_destroy(&r.timer);
        return l2p_py_raise(r.st);
    }
    if (!graph || capture_fn(&r) == 0) samples = collect(&r, warmup, repeat);
    l2p_device_leave(prev);
    l2p_graph_destroy(&r.graph);
    l2p_timer_destroy(&r.timer);
    return samples;
}

PyMethodDef l2p_timing_functions[] = {
    {"stats", fn_stats, METH_O,
     "stats(samples)\n--\n\nN, median, min, max, mean, stdev, q1, q3, iqr (NumPy's "
     "linear percentiles), computed in C."},
    {"time_calls", (PyCFunction)(void (*)(void))fn_time_calls, METH_VARARGS | METH_KEYWORDS,
     "time_calls(fn, *, stream=None, warmup=3, repeat=20, device=None, "
     "flush_l2=False, graph=False, hold_us=50.0)\n--\n\nCall fn() warmup + repeat times between "
     "CUDA events on the stream (or capture it once and replay the graph); the repeat "
     "samples in ms."},
    {NULL, NULL, 0, NULL}};
