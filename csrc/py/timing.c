/* Event timing of a Python callable, with the statistics computed in C. */
#include "l2p_py.h"
#include "params.h"

#include "l2p_kernels.h"
#include "l2p_timing.h"

#include <math.h>


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

typedef struct {
    PyObject *samples;
    l2p_opt noise;
} stats_args;

static PyObject *stats_impl(PyObject *m, const void *args)
{
    const stats_args *a = args;
    double *v;
    Py_ssize_t n;
    l2p_stats s;
    if (samples_arg(a->samples, &v, &n) < 0) return NULL;
    l2p_status rc = l2p_stats_compute(v, (size_t)n, &s);
    PyMem_Free(v);
    if (rc != L2P_OK) return l2p_py_raise(l2p_state_from_module(m));
    PyObject *d = stats_dict(&s);
    if (d && a->noise.given) { /* the studies' stopping rule (l2p_stats_settled) */
        PyObject *b = PyBool_FromLong(l2p_stats_settled(&s, a->noise.f));
        int r = PyDict_SetItemString(d, "settled", b);
        Py_DECREF(b);
        if (r < 0) Py_CLEAR(d);
    }
    return d;
}
L2P_DEFINE_FN(stats_fn, stats_args, stats_impl, "stats",
              "n, median, min, max, mean, stdev, q1, q3, iqr (NumPy's linear percentiles), "
              "computed in C; with noise=, also settled.", "dict[str, float]",
              L2P_PARAM(stats_args, samples, L2P_P_OBJECT, .flags = L2P_P_REQUIRED | L2P_P_POSONLY,
                        .pytype = "Sequence[float]", .doc = "finite times (at least one)"),
              L2P_PARAM(stats_args, noise, L2P_P_FLOAT, .flags = L2P_P_NONE | L2P_P_KWONLY,
                        .flo = 0.0, .fhi = 1e9, .doc = "also say whether the samples are "
                        "settled: IQR <= noise x median (the studies' stopping rule); None: "
                        "not asked"));

/* The ranges of warmup, repeat and hold_us are the core's (l2p_timing_check). */

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
    if (stream_ref) *index = l2p_py_stream_device((l2p_StreamObject *)stream_ref);
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

typedef struct {
    PyObject *fn;
    l2p_stream_val stream;
    long long warmup, repeat;
    PyObject *device;
    int flush_l2, graph;
    double hold_us;
} time_calls_args;

static PyObject *time_calls_impl(PyObject *m, const void *args)
{
    const time_calls_args *a = args;
    PyObject *samples = NULL;
    l2p_state *st = l2p_state_from_module(m);
    l2p_timing_run r = {.stream = a->stream.handle, .enqueue = call_fn, .ctx = a->fn,
                        .warmup = (long)a->warmup, .repeat = (long)a->repeat,
                        .hold_us = a->hold_us, .spin = spin, .graph = a->graph,
                        .flush = a->flush_l2 ? &st->flush : NULL, .wait_begin = release_gil,
                        .wait_end = take_gil};
    if (l2p_timing_check(&r) != L2P_OK) return l2p_py_raise(st);
    if (run_device(st, a->stream.obj, r.stream, a->device, &r.device) < 0) return NULL;
    double *v = PyMem_Calloc((size_t)r.repeat, sizeof *v);
    if (!v) return PyErr_NoMemory();
    if (r.graph) l2p_py_gc_hold(); /* fn runs inside a capture */
    l2p_status rc = l2p_time_samples(&r, v);
    if (r.graph) l2p_py_gc_release();
    if (rc == L2P_OK) samples = samples_list(v, r.repeat);
    else if (!PyErr_Occurred()) l2p_py_raise(st); /* else fn's own exception stands */
    PyMem_Free(v);
    return samples;
}
L2P_DEFINE_FN(time_calls_fn, time_calls_args, time_calls_impl, "time_calls",
              "Call fn() warmup + repeat times between CUDA events on the stream (or capture "
              "it once and replay the graph); the repeat samples in ms.", "list[float]",
              L2P_PARAM(time_calls_args, fn, L2P_P_CALLABLE, .flags = L2P_P_REQUIRED,
                        .doc = "enqueues the work to time on `stream`"),
              L2P_PARAM(time_calls_args, stream, L2P_P_STREAM, .flags = L2P_P_KWONLY,
                        .doc = "where the events (and the flush, the hold) go; None: the "
                        "legacy default stream"),
              L2P_PARAM(time_calls_args, warmup, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = L2P_TIME_WARMUP, .lo = LONG_MIN, .hi = LONG_MAX,
                        .what = "calls", .doc = "untimed calls first, in [0, 1000000]"),
              L2P_PARAM(time_calls_args, repeat, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = L2P_TIME_REPEAT, .lo = LONG_MIN, .hi = LONG_MAX,
                        .what = "samples", .doc = "timed calls, in [1, 1000000]"),
              L2P_PARAM(time_calls_args, device, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "DeviceLike", .doc = "the device when no stream names it "
                        "(None: the current one); must match the stream's"),
              L2P_PARAM(time_calls_args, flush_l2, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .doc = "write a buffer of twice the L2 before each sample (outside "
                        "the timed region)"),
              L2P_PARAM(time_calls_args, graph, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .doc = "capture fn once and time graph replays (needs stream=)"),
              L2P_PARAM(time_calls_args, hold_us, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = L2P_TIME_HOLD_US, .doc = "a one-thread spin before each "
                        "sample, so the events time the GPU and not the host's launches; 0: "
                        "none; at most 1e6"));

const l2p_fn *const l2p_timing_fns[] = {&stats_fn, &time_calls_fn, NULL};
