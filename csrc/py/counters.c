/* Hardware counters of a Python region: the pass loop of l2p_counters around a callable. */
#include "l2p_py.h"
#include "params.h"

#include "l2p_counters.h"

static int metric_list(PyObject *obj, const char ***names, Py_ssize_t *n, PyObject **keep)
{
    *keep = PySequence_Fast(obj, "metrics: expected a sequence of metric names");
    if (!*keep) return -1;
    *n = PySequence_Fast_GET_SIZE(*keep);
    *names = PyMem_Calloc((size_t)*n + 1, sizeof **names);
    if (!*names) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(*keep, i);
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "metrics: entry %zd is %s, not a str", i,
                         Py_TYPE(s)->tp_name);
            return -1;
        }
        if (!((*names)[i] = PyUnicode_AsUTF8(s))) return -1;
    }
    return 0;
}

static int call_optional(PyObject *fn)
{
    if (!fn || fn == Py_None) return 0;
    PyObject *r = PyObject_CallNoArgs(fn);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static int synchronize(l2p_state *st, int device)
{
    l2p_status rc;
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_device_synchronize(device);
    Py_END_ALLOW_THREADS
    return rc == L2P_OK ? 0 : l2p_py_raise_int(st);
}

/* After fn: its work finished. Where the wait fails because fn reset the device, the
 * session's own refusal ("was reset") says more than the driver's code. */
static int synchronize_pass(l2p_state *st, l2p_profiler *p, int device)
{
    if (synchronize(st, device) == 0) return 0;
    if (l2p_profiler_alive(p) != L2P_OK) {
        PyErr_Clear();
        return l2p_py_raise_int(st);
    }
    return -1;
}

/* Run fn once per pass. Starting a pass invalidates the L2, so warmup runs inside the pass
 * but outside the user range: its work is not counted and its cache state reaches fn. With
 * per_kernel every launch is a range, so warmup runs before the pass instead. */
static int run_passes(l2p_state *st, l2p_profiler *p, int device, PyObject *fn, PyObject *warmup,
                      int per_kernel, size_t *passes_run)
{
    int done = 0;
    for (*passes_run = 0; !done; (*passes_run)++) {
        if (*passes_run > 256) {
            PyErr_SetString(PyExc_RuntimeError, "counters: CUPTI asked for more than 256 passes");
            return -1;
        }
        if (per_kernel && (call_optional(warmup) < 0 || synchronize(st, device) < 0)) return -1;
        if (l2p_profiler_begin_pass(p) != L2P_OK) return l2p_py_raise_int(st);
        if (!per_kernel && (call_optional(warmup) < 0 || synchronize(st, device) < 0)) return -1;
        if (l2p_profiler_push(p) != L2P_OK) return l2p_py_raise_int(st);
        if (call_optional(fn) < 0 || synchronize_pass(st, p, device) < 0) return -1;
        if (l2p_profiler_end_pass(p, &done) != L2P_OK) return l2p_py_raise_int(st);
    }
    return 0;
}

static PyObject *collect_ranges(l2p_state *st, l2p_profiler *p, Py_ssize_t n_metrics)
{
    size_t n;
    char name[512];
    if (l2p_profiler_decode(p, &n) != L2P_OK) return l2p_py_raise(st);
    double *values = PyMem_Calloc((size_t)n_metrics + 1, sizeof *values);
    PyObject *ranges = values ? PyList_New(0) : PyErr_NoMemory();
    for (size_t i = 0; ranges && i < n; i++) {
        if (l2p_profiler_range(p, i, name, sizeof name, values) != L2P_OK) {
            Py_CLEAR(ranges);
            l2p_py_raise(st);
            break;
        }
        PyObject *vals = PyList_New(n_metrics);
        for (Py_ssize_t k = 0; vals && k < n_metrics; k++) {
            PyObject *v = PyFloat_FromDouble(values[k]);
            if (!v) Py_CLEAR(vals);
            else PyList_SET_ITEM(vals, k, v);
        }
        PyObject *item = vals ? Py_BuildValue("(sN)", name, vals) : NULL;
        if (!item || PyList_Append(ranges, item) < 0) Py_CLEAR(ranges);
        Py_XDECREF(item);
    }
    PyMem_Free(values);
    return ranges;
}

typedef struct {
    PyObject *fn, *metrics;
    int device;
    PyObject *warmup;
    int per_kernel;
    long long max_ranges;
} measure_args;

static PyObject *measure_impl(PyObject *m, const void *args)
{
    const measure_args *a = args;
    PyObject *keep = NULL, *result = NULL;
    Py_ssize_t n = 0;
    const char **metrics = NULL;
    l2p_profiler *p = NULL;
    l2p_state *st = l2p_state_from_module(m);
    size_t passes_run = 0;
    if (a->warmup != Py_None && !PyCallable_Check(a->warmup))
        return PyErr_Format(PyExc_TypeError, "warmup: expected a callable or None");
    if (metric_list(a->metrics, &metrics, &n, &keep) < 0) goto done;
    if (l2p_profiler_open(a->device, metrics, (size_t)n, a->per_kernel, (size_t)a->max_ranges,
                          &p) != L2P_OK) {
        l2p_py_raise(st);
        goto done;
    }
    /* Whatever fn does, close() ends the pass in flight so the next session can start. */
    if (run_passes(st, p, a->device, a->fn, a->warmup, a->per_kernel, &passes_run) == 0) {
        PyObject *ranges = collect_ranges(st, p, n);
        if (ranges) result = Py_BuildValue("{s:n,s:n,s:N}", "passes", (Py_ssize_t)passes_run,
                                           "planned_passes", (Py_ssize_t)l2p_profiler_passes(p),
                                           "ranges", ranges);
    }
done:
    l2p_profiler_close(p);
    PyMem_Free(metrics);
    Py_XDECREF(keep);
    return result;
}
L2P_DEFINE_FN(measure_fn, measure_args, measure_impl, "measure",
              "Run fn once per CUPTI pass; {'passes', 'planned_passes', 'ranges': [(name, "
              "values)]}.", "dict[str, object]",
              L2P_PARAM(measure_args, fn, L2P_P_CALLABLE, .flags = L2P_P_REQUIRED,
                        .doc = "the work to measure, called once per pass"),
              L2P_PARAM(measure_args, metrics, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[str]", .doc = "raw CUPTI metric names"),
              L2P_PARAM(measure_args, device, L2P_P_DEVICE, .flags = L2P_P_KWONLY,
                        .doc = "the device (index or Device); None: the current one"),
              L2P_PARAM(measure_args, warmup, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "Callable[[], object] | None", .doc = "called before each "
                        "pass, outside the measured range (None: nothing)"),
              L2P_PARAM(measure_args, per_kernel, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .doc = "one range per kernel rather than one for the whole call"),
              L2P_PARAM(measure_args, max_ranges, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = 256, .lo = 1, .hi = 100000, .what = "ranges",
                        .doc = "the most ranges (kernels) a pass records"));

static PyObject *friendly_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    size_t n = l2p_counter_friendly_count();
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *t = Py_BuildValue("(sss)", l2p_counter_friendly_name(i),
                                    l2p_counter_friendly_metric(i), l2p_counter_friendly_doc(i));
        if (!t) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *available_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    if (l2p_counters_load() == L2P_OK) return Py_BuildValue("(Os)", Py_True, "");
    return Py_BuildValue("(Os)", Py_False, l2p_last_error()->message);
}

static void append_name(const char *name, void *ctx)
{
    PyObject *list = (PyObject *)ctx, *s = PyUnicode_FromString(name);
    if (s) PyList_Append(list, s);
    Py_XDECREF(s);
}

typedef struct {
    int device;
} base_metrics_args;

static PyObject *base_metrics_impl(PyObject *m, const void *args)
{
    const base_metrics_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    PyObject *list = PyList_New(0);
    if (list && l2p_counters_base_metrics(a->device, append_name, list) != L2P_OK) {
        Py_DECREF(list);
        return l2p_py_raise(st);
    }
    if (list && PyErr_Occurred()) Py_CLEAR(list);
    return list;
}

L2P_DEFINE_FN(friendly_fn, l2p_no_args, friendly_impl, "counter_friendly",
              "[(friendly name, raw metric, doc)].", "list[tuple[str, str, str]]", L2P_NO_PARAMS);
L2P_DEFINE_FN(available_fn, l2p_no_args, available_impl, "counters_available",
              "(True, '') when libcupti loads, else (False, why).", "tuple[bool, str]",
              L2P_NO_PARAMS);
L2P_DEFINE_FN(base_metrics_fn, base_metrics_args, base_metrics_impl, "base_metrics",
              "The chip's base metric names, from CUPTI.", "list[str]",
              L2P_PARAM(base_metrics_args, device, L2P_P_DEVICE, .doc = "the device (index or "
                        "Device); None: the current one"));

const l2p_fn *const l2p_counter_fns[] = {&measure_fn, &friendly_fn, &available_fn,
                                         &base_metrics_fn, NULL};
