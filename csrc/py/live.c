/* Watching a running program (l2p_activity.h, l2p_live.h): the activity log, the live search,
 * its candidate arms, graph signatures and the plan document's check. l2persist.process.live
 * drives these from the program's own calls; nothing here calls the program's work.
 *
 * One live search per process (as CUPTI gives one activity log per process): its state is a
 * static here, used under the GIL. */
#include "l2p_py.h"
#include "params.h"

#include <math.h>
#include <string.h>

#include "l2p_activity.h"
#include "l2p_live.h"
#include "l2p_policy.h"

static l2p_live *search;     /* the process's live search, or NULL */

static PyObject *raise_core(PyObject *m) { return l2p_py_raise(l2p_state_from_module(m)); }

/* ---- sequences ---- */

/* obj as n unsigned 64-bit ints (PyMem_Free *out); -1 with a TypeError naming `what`. */
static int u64_list(PyObject *obj, const char *what, uint64_t **out, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(obj, what);
    if (!seq) return -1;
    *n = PySequence_Fast_GET_SIZE(seq);
    *out = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof **out);
    if (!*out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        unsigned long long v = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "%s[%zd]: expected an int in [0, 2^64 - 1]", what, i);
            PyMem_Free(*out);
            Py_DECREF(seq);
            return -1;
        }
        (*out)[i] = v;
    }
    Py_DECREF(seq);
    return 0;
}

/* ---- the activity log ---- */

typedef struct {
    int device;
} device_args;

static PyObject *activity_begin_impl(PyObject *m, const void *args)
{
    const device_args *a = args;
    if (l2p_activity_begin(a->device) != L2P_OK) return raise_core(m);
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(activity_begin_fn, device_args, activity_begin_impl, "activity_begin",
              "Start collecting the device's kernel records (CUPTI activity, concurrent "
              "kernels) into the process's log, emptied first. NotSupportedError without CUPTI "
              "or where another tool collects.", "None",
              L2P_PARAM(device_args, device, L2P_P_DEVICE, .doc = "the device whose kernels "
                        "are kept; None: the current one"));

static PyObject *activity_end_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    Py_BEGIN_ALLOW_THREADS
    l2p_activity_end();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(activity_end_fn, l2p_no_args, activity_end_impl, "activity_end",
              "Stop collecting (the log keeps its records); idempotent.", "None", L2P_NO_PARAMS);

static PyObject *activity_flush_impl(PyObject *m, const void *args)
{
    (void)args;
    l2p_status st;
    Py_BEGIN_ALLOW_THREADS
    st = l2p_activity_flush();
    Py_END_ALLOW_THREADS
    if (st != L2P_OK) return raise_core(m);
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(activity_flush_fn, l2p_no_args, activity_flush_impl, "activity_flush",
              "Deliver the records CUPTI holds into the log.", "None", L2P_NO_PARAMS);

static PyObject *activity_now_impl(PyObject *m, const void *args)
{
    (void)args;
    uint64_t ns = 0;
    if (l2p_activity_now(&ns) != L2P_OK) return raise_core(m);
    return PyLong_FromUnsignedLongLong(ns);
}
L2P_DEFINE_FN(activity_now_fn, l2p_no_args, activity_now_impl, "activity_now",
              "CUPTI's clock (ns), the one the records' stamps use.", "int", L2P_NO_PARAMS);

typedef struct {
    PyObject *bounds;
} blocks_args;

/* The per-name rows as {name: [ns per block]}, only names with time in some block. */
static PyObject *by_name_dict(const l2p_activity *a, const double *by, size_t nb)
{
    PyObject *d = PyDict_New();
    for (size_t k = 0; d && k < a->n_names; k++) {
        const double *row = by + k * nb;
        double sum = 0;
        for (size_t b = 0; b < nb; b++) sum += row[b];
        if (sum <= 0) continue;
        PyObject *list = PyList_New((Py_ssize_t)nb);
        for (size_t b = 0; list && b < nb; b++) {
            PyObject *f = PyFloat_FromDouble(row[b]);
            if (!f) Py_CLEAR(list);
            else PyList_SET_ITEM(list, (Py_ssize_t)b, f);
        }
        if (!list || PyDict_SetItemString(d, a->names[k], list) < 0) Py_CLEAR(d);
        Py_XDECREF(list);
    }
    return d;
}

static PyObject *activity_blocks_impl(PyObject *m, const void *args)
{
    const blocks_args *a = args;
    uint64_t *bounds = NULL;
    Py_ssize_t n = 0;
    if (u64_list(a->bounds, "bounds", &bounds, &n) < 0) return NULL;
    l2p_activity *log = l2p_activity_log();
    PyObject *res = NULL;
    if (n < 2) {
        PyErr_Format(PyExc_ValueError, "bounds: expected at least 2 stamps, got %zd", n);
        goto out;
    }
    l2p_activity_lock(log);
    size_t nb = (size_t)n - 1, names = log->n_names;
    double *gpu = PyMem_Calloc(nb, sizeof *gpu);
    double *by = PyMem_Calloc(names ? names * nb : 1, sizeof *by);
    l2p_status st = gpu && by ? l2p_activity_blocks(log, bounds, (size_t)n, gpu, by, names)
                              : L2P_ERR_NO_MEMORY;
    PyObject *rows = st == L2P_OK ? by_name_dict(log, by, nb) : NULL;
    size_t dropped = log->dropped, records = log->n;
    l2p_activity_unlock(log);
    if (st == L2P_ERR_NO_MEMORY) PyErr_NoMemory();
    else if (st != L2P_OK) raise_core(m);
    PyObject *totals = rows ? PyList_New((Py_ssize_t)nb) : NULL;
    for (size_t b = 0; totals && b < nb; b++) {
        PyObject *f = PyFloat_FromDouble(gpu[b]);
        if (!f) Py_CLEAR(totals);
        else PyList_SET_ITEM(totals, (Py_ssize_t)b, f);
    }
    if (totals) res = Py_BuildValue("{sOsOsnsn}", "gpu_ns", totals, "by_name", rows, "records",
                                    (Py_ssize_t)records, "dropped", (Py_ssize_t)dropped);
    Py_XDECREF(totals);
    Py_XDECREF(rows);
    PyMem_Free(gpu);
    PyMem_Free(by);
out:
    PyMem_Free(bounds);
    return res;
}
L2P_DEFINE_FN(activity_blocks_fn, blocks_args, activity_blocks_impl, "activity_blocks",
              "The log's kernels summed into blocks cut at increasing CUPTI stamps (a kernel "
              "belongs to the block its start falls in): {'gpu_ns': [per block], 'by_name': "
              "{kernel: [per block]}, 'records': n, 'dropped': n}.", "dict",
              L2P_PARAM(blocks_args, bounds, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "the blocks' bounds (ns, increasing)"));

/* ---- the live search ---- */

typedef struct {
    long long n_arms;
    int confirm_only;
    double min_gain, confidence;
    long long stage_rounds, confirm_rounds, max_confirm_rounds, seed;
} live_begin_args;

static PyObject *live_begin_impl(PyObject *m, const void *args)
{
    const live_begin_args *a = args;
    l2p_live_options o;
    l2p_live_options_default(&o);
    o.confirm_only = a->confirm_only;
    o.min_gain = a->min_gain;
    o.confidence = a->confidence;
    o.stage_rounds = (size_t)a->stage_rounds;
    o.confirm_rounds = (size_t)a->confirm_rounds;
    o.max_confirm_rounds = (size_t)a->max_confirm_rounds;
    o.seed = (unsigned long long)a->seed;
    l2p_live *s = search ? search : PyMem_Calloc(1, sizeof *s);
    if (!s) return PyErr_NoMemory();
    search = s;
    if (l2p_live_init(s, (size_t)a->n_arms, &o) != L2P_OK) {
        PyMem_Free(search);
        search = NULL;
        return raise_core(m);
    }
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(live_begin_fn, live_begin_args, live_begin_impl, "live_begin",
              "Start the process's live search over n_arms arms (l2p_live.h): arm 0 is limit 0, "
              "arm 1 the device's default, both without windows.", "None",
              L2P_PARAM(live_begin_args, n_arms, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 2,
                        .hi = L2P_LIVE_MAX_ARMS, .what = "arms", .doc = "the arms, baselines "
                        "first"),
              L2P_PARAM(live_begin_args, confirm_only, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .ival = 0, .doc = "verify: arm 2 (the plan) straight to the "
                        "confirmation"),
              L2P_PARAM(live_begin_args, min_gain, L2P_P_FLOAT, .flo = 0.0, .fhi = 0.5,
                        .fval = 0.01, .doc = "the least gain worth a plan"),
              L2P_PARAM(live_begin_args, confidence, L2P_P_FLOAT, .flo = 0.51, .fhi = 0.999,
                        .fval = 0.95, .doc = "of the intervals"),
              L2P_PARAM(live_begin_args, stage_rounds, L2P_P_INT, .lo = 1, .hi = 8, .ival = 3,
                        .what = "rounds", .doc = "rounds per halving stage"),
              L2P_PARAM(live_begin_args, confirm_rounds, L2P_P_INT, .lo = 2, .hi = 32, .ival = 6,
                        .what = "rounds", .doc = "the confirmation's first rounds"),
              L2P_PARAM(live_begin_args, max_confirm_rounds, L2P_P_INT, .lo = 2,
                        .hi = L2P_LIVE_MAX_SAMPLES, .ival = 40, .what = "rounds",
                        .doc = "confirmation rounds at most while undecided"),
              L2P_PARAM(live_begin_args, seed, L2P_P_INT, .lo = 0, .hi = LLONG_MAX,
                        .ival = 0x6c32706572736973ll, .what = "a seed",
                        .doc = "the bootstrap's seed"));

static int have_search(void)
{
    if (search) return 0;
    PyErr_SetString(PyExc_RuntimeError, "live search: live_begin was not called");
    return -1;
}

static PyObject *live_next_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    if (have_search() < 0) return NULL;
    return PyLong_FromLong(l2p_live_next(search));
}
L2P_DEFINE_FN(live_next_fn, l2p_no_args, live_next_impl, "live_next",
              "The arm of the next block; -2: record the pending blocks' samples first; -1: "
              "done.", "int", L2P_NO_PARAMS);

typedef struct {
    double value;
} record_args;

static PyObject *live_record_impl(PyObject *m, const void *args)
{
    const record_args *a = args;
    if (have_search() < 0) return NULL;
    if (l2p_live_record(search, a->value) != L2P_OK) return raise_core(m);
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(live_record_fn, record_args, live_record_impl, "live_record",
              "The oldest pending block's GPU time per unit of work.", "None",
              L2P_PARAM(record_args, value, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .doc = "the block's GPU time per unit (> 0)"));

static PyObject *result_dict(const l2p_live *s)
{
    const l2p_live_result *r = &s->r;
    PyObject *med = PyList_New((Py_ssize_t)s->n_arms), *drop = PyList_New((Py_ssize_t)s->n_arms);
    for (size_t a = 0; med && drop && a < s->n_arms; a++) {
        PyList_SET_ITEM(med, (Py_ssize_t)a, PyFloat_FromDouble(r->search_median[a]));
        PyList_SET_ITEM(drop, (Py_ssize_t)a, PyLong_FromSize_t(r->stage_dropped[a]));
    }
    PyObject *d = med && drop ? Py_BuildValue(
        "{sisisisisisisisi sdsdsd sdsdsd snsnsn sOsO}", "done", r->done, "decided", r->decided,
        "winner", r->winner, "helps", r->helps, "slows", r->slows, "baseline", r->baseline,
        "baseline_decided", r->baseline_decided, "phase", s->phase,
        "limit0", r->base_value[0], "default", r->base_value[1], "winner_value", r->winner_value,
        "speedup", r->speedup, "ci_low", r->ci_low, "ci_high", r->ci_high,
        "search_blocks", (Py_ssize_t)r->search_blocks, "confirm_blocks",
        (Py_ssize_t)r->confirm_blocks, "confirm_rounds", (Py_ssize_t)r->confirm_rounds,
        "search_median", med, "stage_dropped", drop) : NULL;
    Py_XDECREF(med);
    Py_XDECREF(drop);
    return d;
}

static PyObject *live_finish_impl(PyObject *m, const void *args)
{
    (void)args;
    if (have_search() < 0) return NULL;
    if (l2p_live_finish(search) != L2P_OK) return raise_core(m);
    return result_dict(search);
}
L2P_DEFINE_FN(live_finish_fn, l2p_no_args, live_finish_impl, "live_finish",
              "Stop the search (the budget ran out, or it is done) and return its result.",
              "dict", L2P_NO_PARAMS);

static PyObject *live_result_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    if (have_search() < 0) return NULL;
    return result_dict(search);
}
L2P_DEFINE_FN(live_result_fn, l2p_no_args, live_result_impl, "live_result",
              "The search's state and result so far.", "dict", L2P_NO_PARAMS);

/* ---- candidate arms ---- */

typedef struct {
    PyObject *bytes, *weights;
    long long granule, persisting_max, l2_bytes, tries;
} arms_args;

static const char *prop_name(int p)
{
    return p == L2P_ACCESS_PERSISTING ? "persisting" : p == L2P_ACCESS_STREAMING ? "streaming"
                                                                                  : "normal";
}

static PyObject *arm_dict(const l2p_live_arm *a)
{
    PyObject *wins = PyList_New((Py_ssize_t)a->n_win);
    for (size_t w = 0; wins && w < a->n_win; w++) {
        PyObject *t = Py_BuildValue("(idss)", a->target[w], a->hit_ratio[w],
                                    prop_name(a->hit_prop[w]), prop_name(a->miss_prop[w]));
        if (!t) Py_CLEAR(wins);
        else PyList_SET_ITEM(wins, (Py_ssize_t)w, t);
    }
    if (!wins) return NULL;
    PyObject *aside = a->set_aside == L2P_LIVE_DEFAULT_LIMIT ? Py_NewRef(Py_None)
                                                             : PyLong_FromSize_t(a->set_aside);
    PyObject *d = aside ? Py_BuildValue("{sOsO}", "set_aside", aside, "windows", wins) : NULL;
    Py_XDECREF(aside);
    Py_DECREF(wins);
    return d;
}

static PyObject *live_arms_impl(PyObject *m, const void *args)
{
    (void)m;
    const arms_args *a = args;
    uint64_t *bytes = NULL;
    Py_ssize_t n = 0, nw = 0;
    if (u64_list(a->bytes, "bytes", &bytes, &n) < 0) return NULL;
    PyObject *ws = PySequence_Fast(a->weights, "weights: expected a sequence of numbers");
    l2p_live_target *t = ws ? PyMem_Calloc((size_t)(n ? n : 1), sizeof *t) : NULL;
    l2p_live_arm *arms = t ? PyMem_Calloc(L2P_LIVE_MAX_ARMS, sizeof *arms) : NULL;
    PyObject *res = NULL;
    if (ws && (nw = PySequence_Fast_GET_SIZE(ws)) != n) {
        PyErr_Format(PyExc_ValueError, "weights: expected %zd (one per target), got %zd", n, nw);
        goto out;
    }
    if (ws && !arms) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; arms && i < n; i++) {
        double w = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(ws, i));
        if ((w == -1 && PyErr_Occurred()) || !isfinite(w) || w < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "weights[%zd]: expected a finite number >= 0", i);
            goto out;
        }
        t[i].bytes = bytes[i];
        t[i].weight = w;
    }
    if (!arms) goto out;
    size_t k = l2p_live_arms(t, (size_t)n, (size_t)a->granule, (size_t)a->persisting_max,
                             (size_t)a->l2_bytes, (size_t)a->tries, arms, L2P_LIVE_MAX_ARMS);
    res = PyList_New((Py_ssize_t)k);
    for (size_t i = 0; res && i < k; i++) {
        PyObject *d = arm_dict(&arms[i]);
        if (!d) Py_CLEAR(res);
        else PyList_SET_ITEM(res, (Py_ssize_t)i, d);
    }
out:
    Py_XDECREF(ws);
    PyMem_Free(bytes);
    PyMem_Free(t);
    PyMem_Free(arms);
    return res;
}
L2P_DEFINE_FN(live_arms_fn, arms_args, live_arms_impl, "live_arms",
              "The live search's arms for these targets (l2p_live_arms): [{'set_aside': bytes "
              "or None (the default), 'windows': [(target, hit_ratio, hit_prop, miss_prop)]}], "
              "limit 0 and the default first.", "list[dict]",
              L2P_PARAM(arms_args, bytes, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "per target, its bytes"),
              L2P_PARAM(arms_args, weights, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "per target, the GPU time of the "
                        "kernels that use it"),
              L2P_PARAM(arms_args, granule, L2P_P_INT, .flags = L2P_P_REQUIRED | L2P_P_KWONLY,
                        .lo = 1, .hi = LLONG_MAX, .what = "bytes", .doc = "the set-aside's "
                        "granule"),
              L2P_PARAM(arms_args, persisting_max, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = LLONG_MAX, .what = "bytes", .doc = "persistingL2CacheMaxSize"),
              L2P_PARAM(arms_args, l2_bytes, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1,
                        .hi = LLONG_MAX, .what = "bytes", .doc = "l2CacheSize"),
              L2P_PARAM(arms_args, tries, L2P_P_INT, .lo = 1, .hi = L2P_LIVE_MAX_WIN, .ival = 3,
                        .what = "targets", .doc = "the heaviest targets tried"));

/* ---- signatures and saved windows ---- */

typedef struct {
    PyObject *names;
} signature_args;

static PyObject *graph_signature_impl(PyObject *m, const void *args)
{
    (void)m;
    const signature_args *a = args;
    PyObject *seq = PySequence_Fast(a->names, "names: expected a sequence of kernel names");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const char **names = PyMem_Calloc((size_t)(n ? n : 1), sizeof *names);
    PyObject *res = NULL;
    for (Py_ssize_t i = 0; names && i < n; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
        names[i] = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        if (!names[i]) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "names[%zd]: expected str, got %s", i,
                             Py_TYPE(s)->tp_name);
            goto out;
        }
    }
    if (!names) {
        PyErr_NoMemory();
        goto out;
    }
    char sig[40];
    l2p_live_signature(names, (size_t)n, sig, sizeof sig);
    res = PyUnicode_FromString(sig);
out:
    PyMem_Free(names);
    Py_DECREF(seq);
    return res;
}
L2P_DEFINE_FN(graph_signature_fn, signature_args, graph_signature_impl, "graph_signature",
              "A graph's stable name: its kernels in node order, hashed ('k<count>-<hex>'); "
              "the same capture in the next run has the same one.", "str",
              L2P_PARAM(signature_args, names, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[str]", .doc = "the kernel names in node order"));

typedef struct {
    PyObject *uses;
    long long node, param, offset, delta, bytes;
} locate_args;

static PyObject *live_locate_impl(PyObject *m, const void *args)
{
    (void)m;
    const locate_args *a = args;
    PyObject *seq = PySequence_Fast(a->uses, "uses: expected a sequence of tuples");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    l2p_live_use *u = PyMem_Calloc((size_t)(n ? n : 1), sizeof *u);
    PyObject *res = NULL;
    if (!u) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long node, word, lo, size;
        unsigned param, offset;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KIIKKK", &node, &param,
                              &offset, &word, &lo, &size)) {
            PyErr_Format(PyExc_TypeError, "uses[%zd]: expected (node, param, offset, word, "
                         "range_start, range_size) ints", i);
            goto out;
        }
        u[i] = (l2p_live_use){(size_t)node, param, offset, word, lo, size};
    }
    uint64_t base, nbytes;
    if (l2p_live_locate(u, (size_t)n, (size_t)a->node, (unsigned)a->param,
                        (unsigned)a->offset, a->delta, (uint64_t)a->bytes, &base, &nbytes))
        res = Py_BuildValue("(KK)", (unsigned long long)base, (unsigned long long)nbytes);
    else
        res = Py_NewRef(Py_None);
out:
    PyMem_Free(u);
    Py_DECREF(seq);
    return res;
}
L2P_DEFINE_FN(live_locate_fn, locate_args, live_locate_impl, "live_locate",
              "Where a saved window lands in a new capture (l2p_live_locate): (base, bytes), or "
              "None when the graph has no pointer at (node, param, offset).",
              "tuple[int, int] | None",
              L2P_PARAM(locate_args, uses, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[tuple[int, int, int, int, int, int]]",
                        .doc = "the new scan's (node, param, offset, word, range_start, "
                        "range_size)"),
              L2P_PARAM(locate_args, node, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = INT_MAX, .what = "a position", .doc = "the kernel node's position"),
              L2P_PARAM(locate_args, param, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = 4096, .what = "an index", .doc = "the parameter"),
              L2P_PARAM(locate_args, offset, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = 32768, .what = "bytes", .doc = "the word's offset in it"),
              L2P_PARAM(locate_args, delta, L2P_P_INT, .flags = L2P_P_REQUIRED,
                        .lo = -(1ll << 48), .hi = 1ll << 48, .what = "bytes",
                        .doc = "the buffer's start minus the word, when saved"),
              L2P_PARAM(locate_args, bytes, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1,
                        .hi = 1ll << 48, .what = "bytes", .doc = "the window's bytes, when "
                        "saved"));

const l2p_fn *const l2p_live_fns[] = {
    &activity_begin_fn, &activity_end_fn, &activity_flush_fn, &activity_now_fn,
    &activity_blocks_fn, &live_begin_fn, &live_next_fn, &live_record_fn, &live_finish_fn,
    &live_result_fn, &live_arms_fn, &graph_signature_fn, &live_locate_fn, NULL};
