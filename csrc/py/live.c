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
#include "l2p_capture.h"
#include "l2p_device.h"
#include "l2p_live.h"
#include "l2p_plan.h"
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

static PyObject *context_active_impl(PyObject *m, const void *args)
{
    const device_args *a = args;
    int active = 0;
    if (l2p_device_context_active(a->device, &active) != L2P_OK) return raise_core(m);
    return PyBool_FromLong(active);
}
L2P_DEFINE_FN(context_active_fn, device_args, context_active_impl, "context_active",
              "Whether the device's primary context is active (the program made it), asked "
              "without making one (l2p_device_context_active).", "bool",
              L2P_PARAM(device_args, device, L2P_P_DEVICE, .doc = "the device; None: the "
                        "current one"));

static PyObject *driver_initialised_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    int on = 0;
    l2p_driver_initialised(&on);
    return PyBool_FromLong(on);
}
L2P_DEFINE_FN(driver_initialised_fn, l2p_no_args, driver_initialised_impl, "driver_initialised",
              "Whether the process has initialised CUDA's driver already (cuInit ran), asked "
              "without loading or initialising it (l2p_driver_initialised).", "bool",
              L2P_NO_PARAMS);

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
              "The log's clock (ns), the one its records' stamps use: CUPTI's, or the host's "
              "CLOCK_MONOTONIC once detached (activity_detach).", "int", L2P_NO_PARAMS);

static PyObject *activity_detach_impl(PyObject *m, const void *args)
{
    (void)args;
    l2p_status st;
    Py_BEGIN_ALLOW_THREADS /* the flushes wait for CUPTI's buffer thread */
    st = l2p_activity_detach();
    Py_END_ALLOW_THREADS
    if (st != L2P_OK) return raise_core(m);
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(activity_detach_fn, l2p_no_args, activity_detach_impl, "activity_detach",
              "Go on collecting without CUPTI: the kernel records off and dropped, the log's "
              "clock the host's (activity_now), its only records the replays' event pairs; "
              "activity_record and activity_flush do nothing from here, activity_attributes "
              "raises; activity_end ends it. Nothing of the log holds CUPTI then "
              "(cupti_release may let it go).", "None", L2P_NO_PARAMS);

static PyObject *activity_detached_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    return PyBool_FromLong(l2p_activity_detached());
}
L2P_DEFINE_FN(activity_detached_fn, l2p_no_args, activity_detached_impl, "activity_detached",
              "Whether the log collects detached from CUPTI (activity_detach).", "bool",
              L2P_NO_PARAMS);

static const char *hold_word(l2p_cupti_hold h)
{
    return h == L2P_CUPTI_RELEASED ? "released"
           : h == L2P_CUPTI_RELEASING || h == L2P_CUPTI_FINALIZING ? "releasing"
           : h == L2P_CUPTI_WITHDRAWN ? "withdrawn" : "held";
}

typedef struct {
    int hand_captures;
} cupti_release_args;

static PyObject *cupti_release_impl(PyObject *m, const void *args)
{
    l2p_cupti_hold state = L2P_CUPTI_HELD;
    const char *why = NULL;
    const l2p_cupti_handover *h =
        ((const cupti_release_args *)args)->hand_captures ? l2p_capture_handover() : NULL;
    l2p_status st;
    Py_BEGIN_ALLOW_THREADS /* may wait for a finalize in flight, or a begin on another thread */
    st = l2p_activity_release_cupti(&state, &why, h);
    Py_END_ALLOW_THREADS
    if (st != L2P_OK) return raise_core(m);
    return Py_BuildValue("(sz)", hold_word(state), why);
}
L2P_DEFINE_FN(cupti_release_fn, cupti_release_args, cupti_release_impl, "cupti_release",
              "Let CUPTI go from the process where nothing of l2persist needs it any more "
              "(attached, it costs every launch): the first CUDA call's exit on any thread "
              "detaches it (cuptiFinalize). Returns (state, why): 'releasing' or 'released', "
              "or 'held' with what keeps it (the records collecting, the launch log or capture "
              "tracking attached, another subscriber, never loaded). Any later CUPTI use of "
              "l2persist's (activity_begin, activity_now, the counters) attaches it again.",
              "tuple[str, str | None]",
              L2P_PARAM(cupti_release_args, hand_captures, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .ival = 0, .doc = "capture tracking handed over in the same step: "
                        "held where any capture was counted, else its count ends with the "
                        "request, and a capture begun before the finalize withdraws it "
                        "('withdrawn': CUPTI stays; l2p_capture.h)"));

static PyObject *cupti_state_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    return PyUnicode_FromString(hold_word(l2p_cupti_hold_state()));
}
L2P_DEFINE_FN(cupti_state_fn, l2p_no_args, cupti_state_impl, "cupti_state",
              "'held', 'releasing' (cupti_release asked; no CUDA call has ended since), "
              "'withdrawn' (a capture began first: attached until cupti_reclaim) or "
              "'released'.", "str", L2P_NO_PARAMS);

static PyObject *cupti_reclaim_impl(PyObject *m, const void *args)
{
    l2p_cupti_hold found;
    (void)m;
    (void)args;
    Py_BEGIN_ALLOW_THREADS /* waits out a finalize in flight */
    found = l2p_cupti_reclaim();
    Py_END_ALLOW_THREADS
    return PyUnicode_FromString(hold_word(found));
}
L2P_DEFINE_FN(cupti_reclaim_fn, l2p_no_args, cupti_reclaim_impl, "cupti_reclaim",
              "Withdraw a release no CUDA call has carried out yet (the program is ending: "
              "CUPTI is not finalized inside its exit), take off one a capture withdrew, or "
              "forget one that was carried out; the state is 'held' after. Returns the state "
              "it found: 'releasing' or 'withdrawn' (taken back), 'released' or 'held'. "
              "Idempotent.", "str", L2P_NO_PARAMS);

typedef struct {
    PyObject *bounds;
    int timing; /* l2p_timing_source */
} blocks_args;

/* activity_blocks' timing choices, in l2p_timing_source's order */
static const char *const timing_names[] = {"nodes", "events", NULL};

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

/* Two lists of nb floats, a row each of ns and n (rows of n_keys x nb), as a tuple. */
static PyObject *row_pair(const double *ns, const double *n, size_t nb)
{
    PyObject *a = PyList_New((Py_ssize_t)nb), *b = PyList_New((Py_ssize_t)nb);
    for (size_t i = 0; a && b && i < nb; i++) {
        PyObject *x = PyFloat_FromDouble(ns[i]), *y = PyFloat_FromDouble(n[i]);
        if (!x || !y) {
            Py_XDECREF(x);
            Py_XDECREF(y);
            Py_CLEAR(a);
            break;
        }
        PyList_SET_ITEM(a, (Py_ssize_t)i, x);
        PyList_SET_ITEM(b, (Py_ssize_t)i, y);
    }
    PyObject *t = a && b ? PyTuple_Pack(2, a, b) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return t;
}

/* The per-launch-key rows as {key id: ([ns per block], [launches per block])}, only keys that
 * launched in some block. */
static PyObject *by_key_dict(size_t n_keys, const double *kns, const double *kn, size_t nb)
{
    PyObject *d = PyDict_New();
    for (size_t k = 0; d && k < n_keys; k++) {
        double sum = 0;
        for (size_t b = 0; b < nb; b++) sum += kn[k * nb + b];
        if (sum <= 0) continue;
        PyObject *key = PyLong_FromSize_t(k), *pair = row_pair(kns + k * nb, kn + k * nb, nb);
        if (!key || !pair || PyDict_SetItem(d, key, pair) < 0) Py_CLEAR(d);
        Py_XDECREF(key);
        Py_XDECREF(pair);
    }
    return d;
}

static PyObject *float_list(const double *v, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *f = PyFloat_FromDouble(v[i]);
        if (!f) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, f);
    }
    return list;
}

/* The blocks' bounds as n >= 2 stamps (PyMem_Free *out); -1 with a ValueError otherwise. */
static int block_bounds(PyObject *obj, uint64_t **out, Py_ssize_t *n)
{
    if (u64_list(obj, "bounds", out, n) < 0) return -1;
    if (*n >= 2) return 0;
    PyErr_Format(PyExc_ValueError, "bounds: expected at least 2 stamps, got %zd", *n);
    PyMem_Free(*out);
    *out = NULL;
    return -1;
}

static PyObject *activity_blocks_impl(PyObject *m, const void *args)
{
    const blocks_args *a = args;
    uint64_t *bounds = NULL;
    Py_ssize_t n = 0;
    if (block_bounds(a->bounds, &bounds, &n) < 0) return NULL;
    l2p_activity *log = l2p_activity_log();
    PyObject *res = NULL;
    l2p_activity_lock(log);
    size_t nb = (size_t)n - 1, names = log->n_names, keys = log->n_lkeys;
    double *gpu = PyMem_Calloc(nb, sizeof *gpu);
    double *by = PyMem_Calloc(names ? names * nb : 1, sizeof *by);
    double *kns = PyMem_Calloc(keys ? keys * nb : 1, sizeof *kns);
    double *kn = PyMem_Calloc(keys ? keys * nb : 1, sizeof *kn);
    double *nodes = PyMem_Calloc(nb, sizeof *nodes);
    size_t spanning = 0;
    l2p_status st = gpu && by && kns && kn && nodes
                        ? l2p_activity_blocks(log, bounds, (size_t)n,
                                              (l2p_timing_source)a->timing, gpu, by, names,
                                              kns, kn, keys, nodes, &spanning)
                        : L2P_ERR_NO_MEMORY;
    PyObject *rows = st == L2P_OK ? by_name_dict(log, by, nb) : NULL;
    size_t dropped = log->dropped, records = log->n;
    l2p_activity_unlock(log);
    if (st == L2P_ERR_NO_MEMORY) PyErr_NoMemory();
    else if (st != L2P_OK) raise_core(m);
    PyObject *per_key = rows ? by_key_dict(keys, kns, kn, nb) : NULL;
    PyObject *totals = per_key ? float_list(gpu, nb) : NULL;
    PyObject *left = totals ? float_list(nodes, nb) : NULL;
    if (left) res = Py_BuildValue("{sOsOsOsnsnsnsO}", "gpu_ns", totals, "by_name", rows,
                                  "by_key", per_key, "records", (Py_ssize_t)records,
                                  "dropped", (Py_ssize_t)dropped, "spanning",
                                  (Py_ssize_t)spanning, "graph_nodes", left);
    Py_XDECREF(totals);
    Py_XDECREF(left);
    Py_XDECREF(rows);
    Py_XDECREF(per_key);
    PyMem_Free(gpu);
    PyMem_Free(by);
    PyMem_Free(kns);
    PyMem_Free(kn);
    PyMem_Free(nodes);
    PyMem_Free(bounds);
    return res;
}
L2P_DEFINE_FN(activity_blocks_fn, blocks_args, activity_blocks_impl, "activity_blocks",
              "The log's kernels summed into blocks cut at increasing CUPTI stamps (a kernel "
              "belongs to the block its start falls in; one that ends past its block's end is "
              "impossible where blocks end after a synchronization, and is counted in "
              "'spanning', not summed): {'gpu_ns': [per block], 'by_name': {kernel: [per "
              "block]}, 'by_key': {launch key id: ([ns per block], [launches per block])}, "
              "'records': n, 'dropped': n, 'spanning': n, 'graph_nodes': [graph nodes' records "
              "left out per block]}.", "dict",
              L2P_PARAM(blocks_args, bounds, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "the blocks' bounds (ns, increasing)"),
              L2P_PARAM(blocks_args, timing, L2P_P_CHOICE, .flags = L2P_P_KWONLY,
                        .choices = timing_names, .ival = L2P_TIMING_NODES,
                        .doc = "what times graphs: 'nodes' (their kernels' records) or "
                        "'events' (events around each hooked replay; the nodes' records are "
                        "counted in 'graph_nodes', not summed)"));

/* Launch key id -> (name, grid, block): the log's key table, read under its lock. */
static PyObject *activity_keys_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    l2p_activity *log = l2p_activity_log();
    l2p_activity_lock(log);
    size_t n = log->n_lkeys;
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const l2p_launch_key *k = &log->lkeys[i];
        const char *name = k->name < log->n_names && log->names[k->name] ? log->names[k->name]
                                                                          : "";
        const uint32_t *s = k->shape;
        PyObject *t = Py_BuildValue("(s(III)(III))", name, s[0], s[1], s[2], s[3], s[4], s[5]);
        if (!t) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    l2p_activity_unlock(log);
    return list;
}
L2P_DEFINE_FN(activity_keys_fn, l2p_no_args, activity_keys_impl, "activity_keys",
              "The log's launch keys, indexed by key id (activity_blocks' 'by_key'): [(kernel "
              "name (mangled), (grid x, y, z), (block x, y, z))]; id 0 is the other launches "
              "(past the key table's room).", "list[tuple[str, tuple[int, int, int], "
              "tuple[int, int, int]]]", L2P_NO_PARAMS);

typedef struct {
    PyObject *before;
} trim_args;

static PyObject *activity_trim_impl(PyObject *m, const void *args)
{
    (void)m;
    const trim_args *a = args;
    unsigned long long before = PyLong_AsUnsignedLongLong(a->before);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "before: expected an int in [0, 2^64 - 1] (a CUPTI "
                        "stamp, ns)");
        return NULL;
    }
    l2p_activity *log = l2p_activity_log();
    l2p_activity_lock(log);
    size_t dropped = l2p_activity_trim(log, (uint64_t)before);
    l2p_activity_unlock(log);
    return PyLong_FromSize_t(dropped);
}
L2P_DEFINE_FN(activity_trim_fn, trim_args, activity_trim_impl, "activity_trim",
              "Drop the log's records that start before `before` (blocks already summed): each "
              "activity_blocks call scans the whole log. Returns how many were dropped.", "int",
              L2P_PARAM(trim_args, before, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "int", .doc = "a CUPTI stamp (ns)"));

typedef struct {
    int on;
} recording_args;

/* A switch of the records (CUPTI may wait on its buffers: the GIL is let go). */
static PyObject *switch_records(PyObject *m, l2p_status (*fn)(int), int on)
{
    l2p_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fn(on);
    Py_END_ALLOW_THREADS
    if (st != L2P_OK) return raise_core(m);
    Py_RETURN_NONE;
}

static PyObject *activity_record_impl(PyObject *m, const void *args)
{
    return switch_records(m, l2p_activity_record, ((const recording_args *)args)->on);
}
L2P_DEFINE_FN(activity_record_fn, recording_args, activity_record_impl, "activity_record",
              "Pause (False) or resume (True) the kernel records while collecting (a paused "
              "log costs a launch almost nothing). ValueError when not collecting.", "None",
              L2P_PARAM(recording_args, on, L2P_P_BOOL, .flags = L2P_P_REQUIRED,
                        .doc = "record kernels"));

static PyObject *activity_graphs_impl(PyObject *m, const void *args)
{
    return switch_records(m, l2p_activity_graphs, ((const recording_args *)args)->on);
}
L2P_DEFINE_FN(activity_graphs_fn, recording_args, activity_graphs_impl, "activity_graphs",
              "Graph-level records on or off while collecting (l2p_activity_graphs): one record "
              "per graph launch, named 'graph:<id>', and none per node. Only for "
              "tools/investigations/graph-records: turning them on while an executable graph "
              "made without them exists crashed its next launch. ValueError when not "
              "collecting.", "None",
              L2P_PARAM(recording_args, on, L2P_P_BOOL, .flags = L2P_P_REQUIRED,
                        .doc = "graph-level records"));

static PyObject *activity_attributes_impl(PyObject *m, const void *args)
{
    return switch_records(m, l2p_activity_attributes, ((const recording_args *)args)->on);
}
L2P_DEFINE_FN(activity_attributes_fn, recording_args, activity_attributes_impl,
              "activity_attributes",
              "Collect each kernel record's launch attributes (its access policy window) or not, "
              "while collecting (l2p_activity_attributes): the records then show which window "
              "each kernel ran under (activity_windows), where this CUPTI can "
              "(NotSupportedError where it cannot); ValueError when not collecting.", "None",
              L2P_PARAM(recording_args, on, L2P_P_BOOL, .flags = L2P_P_REQUIRED,
                        .doc = "collect launch attributes"));

/* {id: count} of one block's row (ids with a count only). */
static PyObject *window_row(const uint64_t *row)
{
    PyObject *d = PyDict_New();
    for (size_t id = 0; d && id <= L2P_ACTIVITY_WINDOWS; id++) {
        if (!row[id]) continue;
        PyObject *k = PyLong_FromSize_t(id), *v = PyLong_FromUnsignedLongLong(row[id]);
        if (!k || !v || PyDict_SetItem(d, k, v) < 0) Py_CLEAR(d);
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    return d;
}

/* {id: (base, bytes)} of the log's windows; the last id ("another window") maps to None. */
static PyObject *window_table(const l2p_activity *log)
{
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i <= log->n_windows; i++) {
        size_t id = i < log->n_windows ? i + 1 : L2P_ACTIVITY_WINDOWS;
        PyObject *k = PyLong_FromSize_t(id);
        PyObject *v = i < log->n_windows
                          ? Py_BuildValue("(KK)", (unsigned long long)log->windows[i].base,
                                          (unsigned long long)log->windows[i].bytes)
                          : Py_NewRef(Py_None);
        if (!k || !v || PyDict_SetItem(d, k, v) < 0) Py_CLEAR(d);
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    return d;
}

static PyObject *activity_windows_impl(PyObject *m, const void *args)
{
    const blocks_args *a = args;
    uint64_t *bounds = NULL;
    Py_ssize_t n = 0;
    if (block_bounds(a->bounds, &bounds, &n) < 0) return NULL;
    PyObject *res = NULL;
    const size_t nb = (size_t)n - 1, cols = L2P_ACTIVITY_WINDOWS + 1;
    uint64_t *counts = PyMem_Calloc(nb * cols, sizeof *counts);
    if (!counts) {
        PyErr_NoMemory();
        goto out;
    }
    l2p_activity *log = l2p_activity_log();
    l2p_activity_lock(log);
    l2p_status st = l2p_activity_block_windows(log, bounds, (size_t)n, counts);
    PyObject *table = st == L2P_OK ? window_table(log) : NULL;
    l2p_activity_unlock(log);
    PyObject *rows = table ? PyList_New((Py_ssize_t)nb) : NULL;
    for (size_t b = 0; rows && b < nb; b++) {
        PyObject *r = window_row(counts + b * cols);
        if (!r) Py_CLEAR(rows);
        else PyList_SET_ITEM(rows, (Py_ssize_t)b, r);
    }
    if (st != L2P_OK) raise_core(m);
    else if (rows) res = Py_BuildValue("{sOsO}", "windows", table, "counts", rows);
    Py_XDECREF(table);
    Py_XDECREF(rows);
    PyMem_Free(counts);
out:
    PyMem_Free(bounds);
    return res;
}
L2P_DEFINE_FN(activity_windows_fn, blocks_args, activity_windows_impl, "activity_windows",
              "The windows the log's kernels ran under, per block cut as activity_blocks cuts: "
              "{'windows': {id: (base, bytes), or None for windows past the table}, 'counts': "
              "[{id: kernels} per block]} (id 0: no window seen, or launch attributes not "
              "collected then: activity_attributes).", "dict",
              L2P_PARAM(blocks_args, bounds, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "the blocks' bounds (ns, increasing)"));

/* A sequence of (base, bytes[, count]) as windows (and counts where want_count). */
static int window_list(PyObject *obj, const char *what, int want_count, l2p_window_seen **w,
                       uint64_t **counts, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(obj, what);
    if (!seq) return -1;
    *n = PySequence_Fast_GET_SIZE(seq);
    *w = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof **w);
    *counts = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof **counts);
    int rc = *w && *counts ? 0 : -1;
    if (rc < 0) PyErr_NoMemory();
    for (Py_ssize_t i = 0; rc == 0 && i < *n; i++) {
        unsigned long long v[3] = {0, 0, 0};
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        int ok = PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 2 + want_count;
        /* range-checked (PyArg's "K" would wrap a negative count) */
        for (Py_ssize_t j = 0; ok && j < 2 + want_count; j++) {
            v[j] = PyLong_Check(PyTuple_GET_ITEM(t, j))
                       ? PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, j))
                       : (unsigned long long)-1;
            ok = !PyErr_Occurred() && PyLong_Check(PyTuple_GET_ITEM(t, j));
        }
        unsigned long long base = v[0], bytes = v[1], c = v[2];
        if (!ok) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s[%zd]: expected a tuple (base, bytes%s) of ints "
                         "in [0, 2^64 - 1]", what, i, want_count ? ", count" : "");
            rc = -1;
            break;
        }
        (*w)[i].base = base;
        (*w)[i].bytes = bytes;
        (*counts)[i] = c;
    }
    Py_DECREF(seq);
    if (rc < 0) {
        PyMem_Free(*w);
        PyMem_Free(*counts);
        *w = NULL;
        *counts = NULL;
    }
    return rc;
}

typedef struct {
    PyObject *meant, *seen;
    long long bare;
} landed_args;

static PyObject *live_landed_impl(PyObject *m, const void *args)
{
    const landed_args *a = args;
    l2p_window_seen *meant = NULL, *seen = NULL;
    uint64_t *unused = NULL, *counts = NULL;
    Py_ssize_t n_meant = 0, n_seen = 0;
    PyObject *res = NULL;
    if (window_list(a->meant, "meant", 0, &meant, &unused, &n_meant) < 0 ||
        window_list(a->seen, "seen", 1, &seen, &counts, &n_seen) < 0)
        goto out;
    l2p_landed r;
    if (l2p_live_landed(meant, (size_t)n_meant, seen, counts, (size_t)n_seen,
                        (uint64_t)a->bare, &r) != L2P_OK)
        raise_core(m);
    else
        res = Py_BuildValue("{sKsKsKsn}", "kernels", (unsigned long long)r.kernels, "meant",
                            (unsigned long long)r.meant, "foreign",
                            (unsigned long long)r.foreign, "missing", (Py_ssize_t)r.missing);
out:
    PyMem_Free(meant);
    PyMem_Free(unused);
    PyMem_Free(seen);
    PyMem_Free(counts);
    return res;
}
L2P_DEFINE_FN(live_landed_fn, landed_args, live_landed_impl, "live_landed",
              "Whether an arm's windows landed on its kernels (l2p_live_landed): the windows it "
              "meant against those its blocks' records carried. {'kernels': records, 'meant': "
              "those under a window the arm meant, 'foreign': those under one it did not, "
              "'missing': meant windows no kernel carried}.", "dict",
              L2P_PARAM(landed_args, meant, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[tuple[int, int]]",
                        .doc = "(base, bytes) of each window the arm installed"),
              L2P_PARAM(landed_args, seen, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[tuple[int, int, int]]",
                        .doc = "(base, bytes, kernels) of each window the records carried"),
              L2P_PARAM(landed_args, bare, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = LLONG_MAX, .what = "kernels",
                        .doc = "kernels that carried no window"));

/* ---- the live search ---- */

typedef struct {
    long long n_arms;
    int confirm_only;
    l2p_opt min_gain, confidence, stage_rounds, next_stage_rounds, confirm_rounds,
        max_confirm_rounds, seed;
    l2p_opt target_halfwidth;
} live_begin_args;

static PyObject *live_begin_impl(PyObject *m, const void *args)
{
    const live_begin_args *a = args;
    l2p_live_options o;
    l2p_live_options_default(&o); /* the one home of the defaults: None keeps them */
    o.confirm_only = a->confirm_only;
    if (a->min_gain.given) o.min_gain = a->min_gain.f;
    if (a->confidence.given) o.confidence = a->confidence.f;
    if (a->stage_rounds.given) o.stage_rounds = (size_t)a->stage_rounds.i;
    if (a->next_stage_rounds.given) o.next_stage_rounds = (size_t)a->next_stage_rounds.i;
    if (a->confirm_rounds.given) o.confirm_rounds = (size_t)a->confirm_rounds.i;
    if (a->max_confirm_rounds.given) o.max_confirm_rounds = (size_t)a->max_confirm_rounds.i;
    if (a->seed.given) o.seed = (unsigned long long)a->seed.i;
    if (a->target_halfwidth.given) o.target_halfwidth = a->target_halfwidth.f;
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
              "arm 1 the device's default, both without windows. Options left None take the "
              "core's defaults (live_defaults()).", "None",
              L2P_PARAM(live_begin_args, n_arms, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 2,
                        .hi = L2P_LIVE_MAX_ARMS, .what = "arms", .doc = "the arms, baselines "
                        "first"),
              L2P_PARAM(live_begin_args, confirm_only, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .ival = 0, .doc = "verify: arm 2 (the plan) straight to the "
                        "confirmation"),
              L2P_PARAM(live_begin_args, min_gain, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .flo = 0.0, .fhi = 0.5, .doc = "the least gain worth a plan"),
              L2P_PARAM(live_begin_args, confidence, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .flo = 0.51, .fhi = 0.999, .doc = "of the intervals"),
              L2P_PARAM(live_begin_args, stage_rounds, L2P_P_INT, .flags = L2P_P_NONE, .lo = 1,
                        .hi = 8, .what = "rounds", .doc = "rounds of the first halving stage"),
              L2P_PARAM(live_begin_args, confirm_rounds, L2P_P_INT, .flags = L2P_P_NONE,
                        .lo = 2, .hi = 32, .what = "rounds",
                        .doc = "the confirmation's first rounds"),
              L2P_PARAM(live_begin_args, max_confirm_rounds, L2P_P_INT, .flags = L2P_P_NONE,
                        .lo = 2, .hi = L2P_LIVE_MAX_SAMPLES, .what = "rounds",
                        .doc = "confirmation rounds at most while undecided"),
              L2P_PARAM(live_begin_args, seed, L2P_P_INT, .flags = L2P_P_NONE, .lo = 0,
                        .hi = LLONG_MAX, .what = "a seed", .doc = "the bootstrap's seed"),
              L2P_PARAM(live_begin_args, target_halfwidth, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .flo = 0.0, .fhi = 0.5, .doc = "confirm until the speedup's interval "
                        "is within +-this (relative; 0: off; verify: live_defaults()"
                        "['verify_halfwidth'])"),
              L2P_PARAM(live_begin_args, next_stage_rounds, L2P_P_INT, .flags = L2P_P_NONE,
                        .lo = 1, .hi = 8, .what = "rounds",
                        .doc = "rounds of each later stage (an arm's samples add up)"));

static PyObject *live_defaults_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    l2p_live_options o;
    l2p_live_options_default(&o);
    return Py_BuildValue("{sdsdsnsnsnsnsdsdsnsdsn}", "min_gain", o.min_gain, "confidence",
                         o.confidence, "stage_rounds", (Py_ssize_t)o.stage_rounds,
                         "next_stage_rounds", (Py_ssize_t)o.next_stage_rounds,
                         "confirm_rounds", (Py_ssize_t)o.confirm_rounds, "max_confirm_rounds",
                         (Py_ssize_t)o.max_confirm_rounds, "max_overhead", o.max_overhead,
                         "overhead_aim", L2P_LIVE_OVERHEAD_AIM, "max_rest_ratio", (Py_ssize_t)o.max_rest_ratio,
                         "verify_halfwidth", L2P_LIVE_VERIFY_HALFWIDTH, "plan_max_graphs",
                         (Py_ssize_t)L2P_LIVE_PLAN_MAX_GRAPHS);
}
L2P_DEFINE_FN(live_defaults_fn, l2p_no_args, live_defaults_impl, "live_defaults",
              "The live search's defaults (l2p_live_options_default, their one home), and "
              "the plan's cap on the graphs it lists.", "dict",
              L2P_NO_PARAMS);

typedef struct {
    long long units;
    l2p_opt switch_s, rest_s, block_s, max_overhead, max_rest_ratio, hooks_share;
    long long cycle;
} rest_args;

static double opt_time(l2p_opt t)
{
    return t.given ? t.f : NAN; /* None: not known yet */
}

static PyObject *live_rest_units_impl(PyObject *m, const void *args)
{
    (void)m;
    const rest_args *a = args;
    l2p_live_options o;
    l2p_live_options_default(&o);
    if (a->max_overhead.given) o.max_overhead = a->max_overhead.f;
    if (a->max_rest_ratio.given) o.max_rest_ratio = (size_t)a->max_rest_ratio.i;
    int capped = 0;
    size_t units = l2p_live_rest_units(opt_time(a->switch_s), opt_time(a->rest_s),
                                       opt_time(a->block_s), (size_t)a->units, o.max_overhead,
                                       opt_time(a->hooks_share), o.max_rest_ratio,
                                       (size_t)a->cycle, &capped);
    return Py_BuildValue("(nO)", (Py_ssize_t)units, capped ? Py_True : Py_False);
}
L2P_DEFINE_FN(live_rest_units_fn, rest_args, live_rest_units_impl, "live_rest_units",
              "How many units the watcher lets run unrecorded before its next block so that "
              "observing (watching and the hooks) adds at most max_overhead of the program's "
              "wall time (l2p_live_rest_units), and whether the bound needed more than "
              "max_rest_ratio blocks' worth (capped: out of reach on this program). Times in seconds (rest_s "
              "and block_s per unit); a time not known yet (None) gives one block's worth. "
              "Options left None take the core's defaults (live_defaults()).",
              "tuple[int, bool]",
              L2P_PARAM(rest_args, units, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1,
                        .hi = 1 << 30, .what = "units", .doc = "a block's units"),
              L2P_PARAM(rest_args, switch_s, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .doc = "a switch's wall time"),
              L2P_PARAM(rest_args, rest_s, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .doc = "wall time per unit, unrecorded"),
              L2P_PARAM(rest_args, block_s, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .doc = "wall time per unit, recorded"),
              L2P_PARAM(rest_args, max_overhead, L2P_P_FLOAT, .flags = L2P_P_NONE, .flo = 0.0,
                        .fhi = 0.5, .doc = "watching's share of the wall time at most"),
              L2P_PARAM(rest_args, max_rest_ratio, L2P_P_INT, .flags = L2P_P_NONE, .lo = 0,
                        .hi = L2P_LIVE_MAX_REST_RATIO, .what = "blocks",
                        .doc = "rest units per block unit at most"),
              L2P_PARAM(rest_args, cycle, L2P_P_INT, .lo = 0, .hi = LLONG_MAX, .ival = 1,
                        .what = "a count", .doc = "the cycle (from 0): every few still "
                        "measure"),
              L2P_PARAM(rest_args, hooks_share, L2P_P_FLOAT, .flags = L2P_P_NONE, .flo = 0.0,
                        .fhi = 1.0, .doc = "the share of the wall time the per-call hooks "
                        "already take (None: not known): max_overhead bounds it and watching "
                        "together"));

typedef struct {
    PyObject *reference, *blocks;
    long long n_blocks;
    double units;
} mix_args;

/* Item i of a ([ns...], [n...]) pair as two doubles; -1 with a ValueError naming `what`. */
static int pair_at(PyObject *pair, Py_ssize_t i, const char *what, PyObject *key, double *ns,
                   double *n)
{
    PyObject *a = NULL, *b = NULL, *x = NULL, *y = NULL;
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) goto bad;
    a = PyTuple_GET_ITEM(pair, 0);
    b = PyTuple_GET_ITEM(pair, 1);
    if (!PySequence_Check(a) || !PySequence_Check(b) || PySequence_Size(a) <= i ||
        PySequence_Size(b) <= i)
        goto bad;
    x = PySequence_GetItem(a, i);
    y = PySequence_GetItem(b, i);
    *ns = x ? PyFloat_AsDouble(x) : -1;
    *n = y ? PyFloat_AsDouble(y) : -1;
    Py_XDECREF(x);
    Py_XDECREF(y);
    if (PyErr_Occurred()) goto bad;
    return 0;
bad:
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s[%R]: expected ([ns per block], [launches per block]) "
                 "with an item at %zd (activity_blocks' 'by_key')", what, key, i);
    return -1;
}

/* The reference's keys in its order, with their ns and launches, and the blocks' rows of the
 * same keys (zero where a key did not launch in them). */
static int mix_arrays(const mix_args *a, size_t nk, double *rns, double *rn, double *kns,
                      double *kn)
{
    PyObject *key, *pair;
    Py_ssize_t pos = 0;
    size_t k = 0, nb = (size_t)a->n_blocks;
    while (PyDict_Next(a->reference, &pos, &key, &pair) && k < nk) {
        if (pair_at(pair, 0, "reference", key, &rns[k], &rn[k]) < 0) return -1;
        PyObject *row = PyDict_GetItemWithError(a->blocks, key);
        if (!row && PyErr_Occurred()) return -1;
        for (size_t b = 0; row && b < nb; b++)
            if (pair_at(row, (Py_ssize_t)b, "blocks", key, &kns[k * nb + b], &kn[k * nb + b]) < 0)
                return -1;
        k++;
    }
    return 0;
}

static PyObject *live_mix_impl(PyObject *m, const void *args)
{
    const mix_args *a = args;
    if (!PyDict_Check(a->reference) || !PyDict_Check(a->blocks)) {
        PyErr_SetString(PyExc_TypeError, "reference and blocks: expected dicts (activity_blocks' "
                        "'by_key')");
        return NULL;
    }
    size_t nk = (size_t)PyDict_Size(a->reference), nb = (size_t)a->n_blocks;
    double *rns = PyMem_Calloc(nk + 1, sizeof *rns), *rn = PyMem_Calloc(nk + 1, sizeof *rn);
    double *kns = PyMem_Calloc(nk * nb + 1, sizeof *kns);
    double *kn = PyMem_Calloc(nk * nb + 1, sizeof *kn);
    double *out = PyMem_Calloc(nb + 1, sizeof *out), *share = PyMem_Calloc(nb + 1, sizeof *share);
    PyObject *res = NULL;
    if (!rns || !rn || !kns || !kn || !out || !share) PyErr_NoMemory();
    else if (mix_arrays(a, nk, rns, rn, kns, kn) == 0) {
        if (l2p_live_mix(rns, rn, nk, a->units, kns, kn, nb, out, share) != L2P_OK)
            raise_core(m);
        else {
            PyObject *o = float_list(out, nb), *sh = float_list(share, nb);
            if (o && sh) res = PyTuple_Pack(2, o, sh);
            Py_XDECREF(o);
            Py_XDECREF(sh);
        }
    }
    PyMem_Free(rns);
    PyMem_Free(rn);
    PyMem_Free(kns);
    PyMem_Free(kn);
    PyMem_Free(out);
    PyMem_Free(share);
    return res;
}
L2P_DEFINE_FN(live_mix_fn, mix_args, live_mix_impl, "live_mix",
              "Each block's GPU time per unit of work at the reference's mix (l2p_live_mix): "
              "every launch key the reference saw, its launches there priced at its time per "
              "launch in the block; keys absent from a block keep their share at the present "
              "keys' ratio. Returns ([ms per unit per block], [the reference's GPU-time share "
              "present in each block]).", "tuple[list[float], list[float]]",
              L2P_PARAM(mix_args, reference, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "dict", .doc = "activity_blocks' 'by_key' of the reference "
                        "stretch (one block)"),
              L2P_PARAM(mix_args, blocks, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "dict", .doc = "activity_blocks' 'by_key' of the blocks"),
              L2P_PARAM(mix_args, n_blocks, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1,
                        .hi = 1 << 20, .what = "blocks", .doc = "the blocks' count"),
              L2P_PARAM(mix_args, units, L2P_P_FLOAT, .flags = L2P_P_REQUIRED, .flo = 1e-9,
                        .fhi = 1e18, .doc = "the reference's units of work"));

typedef struct {
    int baseline_plan, decided, helps;
    double ci_low, ci_high, min_gain;
} verify_status_args;

static PyObject *live_verify_status_impl(PyObject *m, const void *args)
{
    const verify_status_args *a = args;
    int st;
    if (l2p_live_verify_status(a->baseline_plan, a->decided, a->helps, a->ci_low, a->ci_high,
                               a->min_gain, &st) != L2P_OK)
        return raise_core(m);
    return PyLong_FromLong(st);
}
L2P_DEFINE_FN(live_verify_status_fn, verify_status_args, live_verify_status_impl,
              "live_verify_status",
              "verify's exit status from its interval (l2p_live_verify_status): 0 the plan holds "
              "(its whole interval past 1 + min_gain; for a baseline plan: no arm helps, or "
              "its search decided with none to compare), 1 it no longer helps (the whole interval "
              "short of it; for a baseline plan: an arm of advise's search helps now), 3 "
              "inconclusive (the interval reaches both sides, or none where the search did "
              "not decide).", "int",
              L2P_PARAM(verify_status_args, baseline_plan, L2P_P_BOOL, .flags = L2P_P_REQUIRED,
                        .doc = "the plan is a baseline (a \"don't\"): advise's arms were "
                        "searched"),
              L2P_PARAM(verify_status_args, decided, L2P_P_BOOL, .flags = L2P_P_REQUIRED,
                        .doc = "the search reached its verdict (for a baseline plan with no "
                        "interval: only the baselines could be tried, so the plan holds)"),
              L2P_PARAM(verify_status_args, helps, L2P_P_BOOL, .flags = L2P_P_REQUIRED,
                        .doc = "the core's verdict on the plan (or on the search's winner)"),
              L2P_PARAM(verify_status_args, ci_low, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .doc = "the interval's low end (speedup over the better baseline)"),
              L2P_PARAM(verify_status_args, ci_high, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .doc = "the interval's high end"),
              L2P_PARAM(verify_status_args, min_gain, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = 0.01, .doc = "the least gain that counts, in [0, 1)"));

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

static PyObject *live_peek_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    if (have_search() < 0) return NULL;
    return PyLong_FromLong(l2p_live_peek(search));
}
L2P_DEFINE_FN(live_peek_fn, l2p_no_args, live_peek_impl, "live_peek",
              "The arm live_next would return now, without taking it; -2 where that is not "
              "known yet (a round or a decision is due).", "int", L2P_NO_PARAMS);

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
        "{sisisisisisisisisi sdsdsd sdsdsd snsnsn sOsO}", "done", r->done, "decided", r->decided,
        "capped", r->capped,
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

static PyObject *live_blocks_left_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    if (have_search() < 0) return NULL;
    return PyLong_FromSize_t(l2p_live_blocks_left(search));
}
L2P_DEFINE_FN(live_blocks_left_fn, l2p_no_args, live_blocks_left_impl, "live_blocks_left",
              "The blocks the search issues at least before it is done, from where it is "
              "(l2p_live_blocks_left: confirmation rounds past the first are not counted).",
              "int", L2P_NO_PARAMS);

typedef struct {
    double time_left_s;
    long long blocks_left, units;
    l2p_opt switch_s, rest_s, block_s, max_rest_ratio;
} rest_ratio_args;

static PyObject *live_rest_ratio_impl(PyObject *m, const void *args)
{
    (void)m;
    const rest_ratio_args *a = args;
    l2p_live_options o;
    l2p_live_options_default(&o);
    if (a->max_rest_ratio.given) o.max_rest_ratio = (size_t)a->max_rest_ratio.i;
    return PyLong_FromSize_t(l2p_live_rest_ratio(
        a->time_left_s, (size_t)a->blocks_left, opt_time(a->switch_s), opt_time(a->rest_s),
        opt_time(a->block_s), (size_t)a->units, o.max_rest_ratio));
}
L2P_DEFINE_FN(live_rest_ratio_fn, rest_ratio_args, live_rest_ratio_impl, "live_rest_ratio",
              "The rests' cap in blocks' worth that the time left allows (l2p_live_rest_ratio): "
              "at least max_rest_ratio, more where the budget leaves room, at most "
              "L2P_LIVE_MAX_REST_RATIO; give it to live_rest_units as its max_rest_ratio.", "int",
              L2P_PARAM(rest_ratio_args, time_left_s, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .flo = -1e9, .fhi = 1e9, .doc = "the budget's seconds left"),
              L2P_PARAM(rest_ratio_args, blocks_left, L2P_P_INT, .flags = L2P_P_REQUIRED,
                        .lo = 0, .hi = LLONG_MAX, .what = "blocks",
                        .doc = "live_blocks_left()"),
              L2P_PARAM(rest_ratio_args, units, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1,
                        .hi = 1 << 30, .what = "units", .doc = "a block's units"),
              L2P_PARAM(rest_ratio_args, switch_s, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .doc = "a switch's wall time"),
              L2P_PARAM(rest_ratio_args, rest_s, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .doc = "wall time per unit, unrecorded"),
              L2P_PARAM(rest_ratio_args, block_s, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .doc = "wall time per unit, recorded"),
              L2P_PARAM(rest_ratio_args, max_rest_ratio, L2P_P_INT, .flags = L2P_P_NONE,
                        .lo = 0, .hi = L2P_LIVE_MAX_REST_RATIO, .what = "blocks",
                        .doc = "the floor (None: the core's default)"));

/* ---- candidate arms ---- */

typedef struct {
    PyObject *bytes, *weights;
    long long granule, persisting_max, l2_bytes, tries;
} arms_args;

static PyObject *arm_dict(const l2p_live_arm *a)
{
    PyObject *wins = PyList_New((Py_ssize_t)a->n_win);
    for (size_t w = 0; wins && w < a->n_win; w++) {
        PyObject *t = Py_BuildValue("(idss)", a->target[w], a->hit_ratio[w],
                                    l2p_live_prop_name(a->hit_prop[w]),
                                    l2p_live_prop_name(a->miss_prop[w]));
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
    PyObject *kernels;
} signature_args;

/* An item of a sequence argument parsed by `row` (a tuple of its parameters) into `out`: the
 * converters and words of every argument, the item's place in front ("uses[3]: node: ..."). */
static int parse_item(const l2p_fn *row, PyObject *m, const char *seq, Py_ssize_t i,
                      const char *part, PyObject *item, void *out)
{
    if (!PyTuple_Check(item)) {
        PyErr_Format(PyExc_TypeError, "%s[%zd]%s: expected a tuple %s(...), got %s", seq, i,
                     part, row->name, Py_TYPE(item)->tp_name);
        return -1;
    }
    if (l2p_fn_parse(row, m, PySequence_Fast_ITEMS(item), PyTuple_GET_SIZE(item), NULL,
                     out) == 0)
        return 0;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    if (text) PyErr_Format(type, "%s[%zd]%s: %U", seq, i, part, text);
    else PyErr_Restore(Py_XNewRef(type), Py_XNewRef(value), Py_XNewRef(tb));
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -1;
}

typedef struct {
    long long x, y, z;
} dim3_args;
static const l2p_fn dim3_row = {
    .name = "dim3", .args_size = sizeof(dim3_args),
    .params = (const l2p_param[]){
        L2P_PARAM(dim3_args, x, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = UINT_MAX),
        L2P_PARAM(dim3_args, y, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = UINT_MAX),
        L2P_PARAM(dim3_args, z, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = UINT_MAX),
        {0}}};

/* A scan's kernel tuple (Graph._scan): what a signature reads of it is the name and shape. */
typedef struct {
    long long index, shared_mem;
    PyObject *name, *grid, *block, *num_params;
} scan_kernel_args;
static const l2p_fn scan_kernel_row = {
    .name = "kernel", .args_size = sizeof(scan_kernel_args),
    .params = (const l2p_param[]){
        L2P_PARAM(scan_kernel_args, index, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                  .hi = LLONG_MAX, .what = "a node position"),
        L2P_PARAM(scan_kernel_args, name, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                  .pytype = "str"),
        L2P_PARAM(scan_kernel_args, grid, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                  .pytype = "tuple[int, int, int]"),
        L2P_PARAM(scan_kernel_args, block, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                  .pytype = "tuple[int, int, int]"),
        L2P_PARAM(scan_kernel_args, shared_mem, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                  .hi = UINT_MAX, .what = "bytes"),
        L2P_PARAM(scan_kernel_args, num_params, L2P_P_OBJECT, .pytype = "int"),
        {0}}};

/* One kernel as the signature sees it: its name and launch shape ("name grid block shared"),
 * from a scan's (index, name, grid, block, shared_mem, num_params) tuple. Two decode graphs
 * of different batch sizes run the same kernels with other grids: the shape tells them apart. */
static PyObject *kernel_key(PyObject *m, PyObject *item, Py_ssize_t i)
{
    scan_kernel_args k = {0};
    dim3_args g = {0}, b = {0};
    if (parse_item(&scan_kernel_row, m, "kernels", i, "", item, &k) < 0) return NULL;
    const char *name = PyUnicode_Check(k.name) ? PyUnicode_AsUTF8(k.name) : NULL;
    if (!name) {
        PyErr_Clear();
        return PyErr_Format(PyExc_TypeError, "kernels[%zd]: name: expected a str, got %s", i,
                            Py_TYPE(k.name)->tp_name);
    }
    if (parse_item(&dim3_row, m, "kernels", i, ".grid", k.grid, &g) < 0 ||
        parse_item(&dim3_row, m, "kernels", i, ".block", k.block, &b) < 0)
        return NULL;
    return PyUnicode_FromFormat("%s %u,%u,%u %u,%u,%u %u", name, (unsigned)g.x, (unsigned)g.y,
                                (unsigned)g.z, (unsigned)b.x, (unsigned)b.y, (unsigned)b.z,
                                (unsigned)k.shared_mem);
}

static PyObject *graph_signature_impl(PyObject *m, const void *args)
{
    const signature_args *a = args;
    PyObject *seq = PySequence_Fast(a->kernels, "kernels: expected a sequence of a scan's "
                                    "kernel tuples");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const char **names = PyMem_Calloc((size_t)(n ? n : 1), sizeof *names);
    PyObject *keys = PyList_New(0), *res = NULL;
    if (!names || !keys) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = kernel_key(m, PySequence_Fast_GET_ITEM(seq, i), i);
        if (!k || PyList_Append(keys, k) < 0) {
            Py_XDECREF(k);
            goto out;
        }
        Py_DECREF(k);
        if (!(names[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(keys, i)))) goto out;
    }
    char sig[40];
    l2p_live_signature(names, (size_t)n, sig, sizeof sig);
    res = PyUnicode_FromString(sig);
out:
    PyMem_Free(names);
    Py_XDECREF(keys);
    Py_DECREF(seq);
    return res;
}
L2P_DEFINE_FN(graph_signature_fn, signature_args, graph_signature_impl, "graph_signature",
              "A graph's stable name: its kernels in node order, each by name and launch shape, "
              "hashed ('k<count>-<hex>'); the same capture in the next run has the same one.",
              "str",
              L2P_PARAM(signature_args, kernels, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[tuple]", .doc = "the kernels of Graph._scan, in "
                        "node order"));

typedef struct {
    PyObject *uses;
    long long node, param, offset, delta, bytes;
} locate_args;

/* One pointer word of a scan (l2p_live_use); the ranges are live_locate's own rows'. */
typedef struct {
    long long node, param, offset, word, range_start, range_size;
} use_args;
static const l2p_fn use_row = {
    .name = "use", .args_size = sizeof(use_args),
    .params = (const l2p_param[]){
        L2P_PARAM(use_args, node, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = INT_MAX,
                  .what = "a position"),
        L2P_PARAM(use_args, param, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = 4096,
                  .what = "an index"),
        L2P_PARAM(use_args, offset, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = 32768,
                  .what = "bytes"),
        L2P_PARAM(use_args, word, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = LLONG_MAX,
                  .what = "an address"),
        L2P_PARAM(use_args, range_start, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                  .hi = LLONG_MAX, .what = "an address"),
        L2P_PARAM(use_args, range_size, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                  .hi = LLONG_MAX, .what = "bytes"),
        {0}}};

static PyObject *live_locate_impl(PyObject *m, const void *args)
{
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
        use_args v = {0};
        if (parse_item(&use_row, m, "uses", i, "", PySequence_Fast_GET_ITEM(seq, i), &v) < 0)
            goto out;
        u[i] = (l2p_live_use){(size_t)v.node, (unsigned)v.param, (unsigned)v.offset,
                              (uint64_t)v.word, (uint64_t)v.range_start, (uint64_t)v.range_size};
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

typedef struct {
    PyObject *words;
} ranges_args;

/* One pointer word of the hot graphs (l2p_live_word). */
typedef struct {
    long long group, node, param, offset, kernel, word, range_start, range_size;
    double weight;
} word_args;
static const l2p_fn word_row = {
    .name = "word", .args_size = sizeof(word_args),
    .params = (const l2p_param[]){
        L2P_PARAM(word_args, group, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                  .hi = INT_MAX, .what = "an index"),
        L2P_PARAM(word_args, node, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = INT_MAX,
                  .what = "a position"),
        L2P_PARAM(word_args, param, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = 4096,
                  .what = "an index"),
        L2P_PARAM(word_args, offset, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = 32768,
                  .what = "bytes"),
        L2P_PARAM(word_args, kernel, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                  .hi = LLONG_MAX, .what = "an id"),
        L2P_PARAM(word_args, word, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0, .hi = LLONG_MAX,
                  .what = "an address"),
        L2P_PARAM(word_args, range_start, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                  .hi = LLONG_MAX, .what = "an address"),
        L2P_PARAM(word_args, range_size, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1,
                  .hi = LLONG_MAX, .what = "bytes"),
        L2P_PARAM(word_args, weight, L2P_P_FLOAT, .flags = L2P_P_REQUIRED, .flo = 0,
                  .fhi = 1e300),
        {0}}};

/* (ranges, range_of): each range (address, size, weight, readers, pieces), and each word's
 * (-1: taken for no pointer). */
static PyObject *ranges_result(const l2p_live_range *r, size_t nr, const size_t *of, size_t n)
{
    PyObject *ranges = PyList_New((Py_ssize_t)nr), *idx = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; ranges && idx && i < nr; i++) {
        PyObject *t = Py_BuildValue("(KKdnn)", (unsigned long long)r[i].address,
                                    (unsigned long long)r[i].size, r[i].weight,
                                    (Py_ssize_t)r[i].readers, (Py_ssize_t)r[i].pieces);
        if (!t) goto fail;
        PyList_SET_ITEM(ranges, (Py_ssize_t)i, t);
    }
    for (size_t i = 0; ranges && idx && i < n; i++) {
        PyObject *v = of[i] == L2P_LIVE_NO_RANGE ? PyLong_FromLong(-1) : PyLong_FromSize_t(of[i]);
        if (!v) goto fail;
        PyList_SET_ITEM(idx, (Py_ssize_t)i, v);
    }
    if (ranges && idx) {
        PyObject *res = PyTuple_Pack(2, ranges, idx);
        Py_DECREF(ranges);
        Py_DECREF(idx);
        return res;
    }
fail:
    Py_XDECREF(ranges);
    Py_XDECREF(idx);
    return NULL;
}

static PyObject *live_ranges_impl(PyObject *m, const void *args)
{
    const ranges_args *a = args;
    PyObject *seq = PySequence_Fast(a->words, "words: expected a sequence of tuples");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    l2p_live_word *w = PyMem_Calloc((size_t)(n ? n : 1), sizeof *w);
    size_t *of = PyMem_Calloc((size_t)(n ? n : 1), sizeof *of);
    l2p_live_range *r = NULL;
    size_t nr = 0;
    PyObject *res = NULL;
    if (!w || !of) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        word_args v = {0};
        if (parse_item(&word_row, m, "words", i, "", PySequence_Fast_GET_ITEM(seq, i), &v) < 0)
            goto out;
        w[i] = (l2p_live_word){(size_t)v.group, (size_t)v.node, (unsigned)v.param,
                               (unsigned)v.offset, (uint64_t)v.kernel, (uint64_t)v.word,
                               (uint64_t)v.range_start, (uint64_t)v.range_size, v.weight};
    }
    if (l2p_live_ranges(w, (size_t)n, &r, &nr, of) != L2P_OK) raise_core(m);
    else res = ranges_result(r, nr, of, (size_t)n);
out:
    free(r);
    PyMem_Free(w);
    PyMem_Free(of);
    Py_DECREF(seq);
    return res;
}
L2P_DEFINE_FN(live_ranges_fn, ranges_args, live_ranges_impl, "live_ranges",
              "The targets the hot graphs' pointer words split their allocations into "
              "(l2p_live_ranges): a tensor inside a shared segment is its own range, the slices "
              "of a flat tensor read per layer by the same kernels one range, each weighed by "
              "its own readers. Returns ([(address, size, weight, readers, pieces)] by "
              "address, [each word's range, -1 for an odd word: taken for no pointer]).",
              "tuple[list[tuple[int, int, float, int, int]], list[int]]",
              L2P_PARAM(ranges_args, words, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[tuple[int, int, int, int, int, int, int, int, "
                        "float]]", .doc = "(group, node, param, offset, kernel, word, "
                        "range_start, range_size, weight) per pointer word: the graph, the "
                        "node, where the word sits, the node's kernel (an id, equal for equal "
                        "kernels), the address and its allocation, the node's GPU time"));

/* ---- the live plan document ---- */
/* Its rules are the core's (l2p_live_plan_fields, l2p_live_window_fields: the format, each
 * field's kind and range, the caps); here the parsed JSON is walked by them and only its types
 * are judged, with the rows' words. Every mistake is a ValueError "plan <source>: <field>:
 * expected ...", the way the CLI reports a bad file (exit 2). */

/* d[name] (borrowed), following "a.b" one object down; None when absent or not an object. */
static PyObject *doc_get(PyObject *d, const char *name)
{
    const char *dot = strchr(name, '.');
    PyObject *v = NULL;
    if (PyDict_Check(d) && dot) {
        PyObject *key = PyUnicode_FromStringAndSize(name, dot - name);
        v = key ? PyDict_GetItemWithError(d, key) : NULL;
        Py_XDECREF(key);
        PyErr_Clear(); /* a key that is not there, or not hashable here: absent */
        return v ? doc_get(v, dot + 1) : Py_None;
    }
    v = PyDict_Check(d) ? PyDict_GetItemString(d, name) : NULL;
    return v ? v : Py_None;
}

/* The field's name in the messages: "<where>.<name>" ("<name>" at the top), "[item]" added
 * for an item of a list (item >= 0). */
static void field_name(char *out, size_t cap, const char *where, const l2p_live_field *f,
                       Py_ssize_t item)
{
    int n = snprintf(out, cap, "%s%s%s", where, *where ? "." : "", f->name);
    if (item >= 0 && n >= 0 && (size_t)n < cap) snprintf(out + n, cap - (size_t)n, "[%zd]", item);
}

/* A value of the wrong JSON type: "plan <at><field>: expected <the row's words>[, got <value>]"
 * (an item of an INTS row always shows the value). */
static int type_fail(const char *at, const l2p_live_field *f, const char *where,
                     Py_ssize_t item, PyObject *obj)
{
    char expect[160], name[160];
    l2p_live_field_expect(f, item >= 0, expect, sizeof expect);
    field_name(name, sizeof name, where, f, item);
    if (item < 0 && !(f->flags & L2P_LIVE_F_SHOW)) {
        PyErr_Format(PyExc_ValueError, "plan %s%s: expected %s", at, name, expect);
        return -1;
    }
    PyObject *r = PyObject_Repr(obj);
    if (!r) { /* an int beyond the str() digit limit */
        PyErr_Clear();
        r = PyUnicode_FromString("a value too large to print");
    }
    if (r) PyErr_Format(PyExc_ValueError, "plan %s%s: expected %s, got %.60U", at, name, expect, r);
    Py_XDECREF(r);
    return -1;
}

/* The core's judgement of a value, with the source in front. */
static int core_fail(const char *at)
{
    PyErr_Format(PyExc_ValueError, "plan %s%s", at, l2p_last_error()->message);
    return -1;
}

/* An int (no bool) that fits a long long; 0, or -1 without an exception set. */
static int doc_int(PyObject *obj, long long *out)
{
    int overflow = 0;
    if (!PyLong_Check(obj) || PyBool_Check(obj)) return -1;
    *out = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

/* A string without NUL characters as UTF-8, or NULL without an exception set. */
static const char *doc_text(PyObject *obj)
{
    Py_ssize_t n;
    const char *t = PyUnicode_Check(obj) ? PyUnicode_AsUTF8AndSize(obj, &n) : NULL;
    if (!t) PyErr_Clear();
    return t && strlen(t) == (size_t)n ? t : NULL;
}

static int check_object(const char *at, const l2p_live_field *rows, size_t n, PyObject *d,
                        const char *where);

/* One field of the object d: its JSON type here, its value by the core; a list's items too. */
static int check_field(const char *at, const l2p_live_field *f, PyObject *d, const char *where)
{
    PyObject *obj = doc_get(d, f->name);
    l2p_live_value v = {0};
    int ok = 1;
    v.null = obj == Py_None;
    if (!v.null) switch (f->kind) {
        case L2P_LIVE_F_TEXT:
        case L2P_LIVE_F_PROP: ok = (v.text = doc_text(obj)) != NULL; break;
        case L2P_LIVE_F_INT: ok = doc_int(obj, &v.i) == 0; break;
        case L2P_LIVE_F_RATIO:
            ok = (PyLong_Check(obj) || PyFloat_Check(obj)) && !PyBool_Check(obj);
            if (ok && (v.f = PyFloat_AsDouble(obj)) == -1.0 && PyErr_Occurred()) {
                PyErr_Clear(); /* an int too large for a double */
                ok = 0;
            }
            break;
        case L2P_LIVE_F_LIST:
        case L2P_LIVE_F_INTS:
            ok = PyList_Check(obj);
            if (ok) v.n = (size_t)PyList_GET_SIZE(obj);
            break;
        }
    if (!ok) return type_fail(at, f, where, -1, obj);
    if (l2p_live_field_check(f, &v, where) != L2P_OK) /* an int ratio shown as given ("0") */
        return f->kind == L2P_LIVE_F_RATIO && PyLong_Check(obj) ? type_fail(at, f, where, -1, obj)
                                                                : core_fail(at);
    if (v.null || (f->kind != L2P_LIVE_F_LIST && f->kind != L2P_LIVE_F_INTS)) return 0;
    char sub[160];
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(obj); k++) {
        PyObject *item = PyList_GET_ITEM(obj, k);
        if (f->kind == L2P_LIVE_F_INTS) {
            long long x;
            if (doc_int(item, &x) < 0) return type_fail(at, f, where, k, item);
            if (l2p_live_item_check(f, (size_t)k, x, where) != L2P_OK) return core_fail(at);
            continue;
        }
        field_name(sub, sizeof sub, where, f, k);
        if (!PyDict_Check(item)) {
            PyErr_Format(PyExc_ValueError, "plan %s%s: expected an object, got %s", at, sub,
                         Py_TYPE(item)->tp_name);
            return -1;
        }
        if (check_object(at, f->fields, f->n_fields, item, sub) < 0) return -1;
    }
    return 0;
}

static int check_object(const char *at, const l2p_live_field *rows, size_t n, PyObject *d,
                        const char *where)
{
    for (size_t i = 0; i < n; i++)
        if (check_field(at, &rows[i], d, where) < 0) return -1;
    return 0;
}

/* Every number anywhere in the document finite, in fields no row names too ("speedup",
 * "ci"): JSON has no NaN or Infinity, yet Python's json reads and writes them (and 1e999 as
 * inf), and a plan that carries one was not measured. The whole document is walked here, the
 * one place its JSON is walked; a nesting deeper than the interpreter allows is refused. */
static int check_finite(const char *at, PyObject *obj, const char *where)
{
    if (PyFloat_Check(obj)) {
        if (isfinite(PyFloat_AS_DOUBLE(obj))) return 0;
        PyErr_Format(PyExc_ValueError, "plan %s%s: expected a finite number, got %R", at,
                     *where ? where : "document", obj);
        return -1;
    }
    if (!PyDict_Check(obj) && !PyList_Check(obj)) return 0;
    if (Py_EnterRecursiveCall("")) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "plan %s%s: nested too deeply to be a plan document", at,
                     *where ? where : "document");
        return -1;
    }
    char sub[200];
    int r = 0;
    if (PyList_Check(obj)) {
        for (Py_ssize_t i = 0; r == 0 && i < PyList_GET_SIZE(obj); i++) {
            snprintf(sub, sizeof sub, "%s[%zd]", where, i);
            r = check_finite(at, PyList_GET_ITEM(obj, i), sub);
        }
    } else {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (r == 0 && PyDict_Next(obj, &pos, &key, &value)) {
            const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
            if (!k) PyErr_Clear();
            snprintf(sub, sizeof sub, "%s%s%.60s", where, *where ? "." : "", k ? k : "?");
            r = check_finite(at, value, sub);
        }
    }
    Py_LeaveRecursiveCall();
    return r;
}

typedef struct {
    PyObject *doc, *source;
} live_plan_check_args;

/* doc["format"] == text (doc a dict) */
static int is_format(PyObject *doc, const char *text)
{
    PyObject *f = PyDict_GetItemString(doc, "format");
    return f && PyUnicode_Check(f) && PyUnicode_CompareWithASCIIString(f, text) == 0;
}

static PyObject *live_plan_check_impl(PyObject *m, const void *args)
{
    (void)m;
    const live_plan_check_args *a = args;
    PyObject *at_obj;
    if (a->source == Py_None || (PyUnicode_Check(a->source) && !PyUnicode_GET_LENGTH(a->source)))
        at_obj = PyUnicode_FromString("");
    else if (PyUnicode_Check(a->source))
        at_obj = PyUnicode_FromFormat("%R: ", a->source);
    else
        return PyErr_Format(PyExc_TypeError, "source: expected a str (a file name) or None, "
                            "got %s", Py_TYPE(a->source)->tp_name);
    const char *at = at_obj ? PyUnicode_AsUTF8(at_obj) : NULL;
    int r = -1;
    if (!at) goto out;
    if (!PyDict_Check(a->doc))
        PyErr_Format(PyExc_ValueError, "plan %sdocument: expected an object, got %s", at,
                     Py_TYPE(a->doc)->tp_name);
    else if (is_format(a->doc, L2P_PLAN_FORMAT))
        /* the other plan document: say what it is and how it is used */
        PyErr_Format(PyExc_ValueError, "plan %sformat: '%s' is an in-process plan "
                     "(Plan.to_json, l2persist.advise(workloads)): its windows name buffers of "
                     "one process, so load it in the program with "
                     "l2persist.Plan.from_json(path, buffers=..., carriers=...); apply / verify / "
                     "L2PERSIST_PLAN take what `python -m l2persist advise -- COMMAND` writes "
                     "('%s')", at, L2P_PLAN_FORMAT, L2P_LIVE_PLAN_FORMAT);
    else if (check_finite(at, a->doc, "") == 0)
        r = check_object(at, l2p_live_plan_fields, L2P_LIVE_P_NFIELDS, a->doc, "");
out:
    Py_XDECREF(at_obj);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(live_plan_check_fn, live_plan_check_args, live_plan_check_impl, "live_plan_check",
              "Check a parsed live plan document (what `advise --` writes; l2p_live.h's rules): "
              "its format, device.name, set_aside (null or bytes) and each window's graph, "
              "pointer word, bytes, hit_ratio, properties and nodes. Raises ValueError "
              "'plan <source>: <field>: expected ...' naming the field.", "None",
              L2P_PARAM(live_plan_check_args, doc, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "object", .doc = "the parsed JSON"),
              L2P_PARAM(live_plan_check_args, source, L2P_P_OBJECT, .pytype = "str | None",
                        .doc = "where it came from, for the messages (a file name); None or "
                        "'': not named"));

static PyObject *live_plan_format_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    return PyUnicode_FromString(L2P_LIVE_PLAN_FORMAT);
}
L2P_DEFINE_FN(live_plan_format_fn, l2p_no_args, live_plan_format_impl, "live_plan_format",
              "The live plan document's format name (L2P_LIVE_PLAN_FORMAT; the core owns the "
              "document).", "str", L2P_NO_PARAMS);

const l2p_fn *const l2p_live_fns[] = {
    &activity_begin_fn, &activity_end_fn, &activity_flush_fn, &activity_now_fn,
    &activity_detach_fn, &activity_detached_fn,
    &cupti_release_fn, &cupti_state_fn, &cupti_reclaim_fn,
    &activity_blocks_fn, &activity_keys_fn, &activity_trim_fn, &activity_record_fn, &live_begin_fn, &live_next_fn, &live_peek_fn, &live_record_fn, &live_finish_fn,
    &live_result_fn, &live_defaults_fn, &live_arms_fn, &graph_signature_fn, &live_locate_fn,
    &live_plan_check_fn, &live_plan_format_fn, &live_rest_units_fn, &live_mix_fn, &live_verify_status_fn, &activity_graphs_fn, &context_active_fn, &driver_initialised_fn,
    &live_ranges_fn, &activity_attributes_fn, &activity_windows_fn, &live_landed_fn, &live_blocks_left_fn, &live_rest_ratio_fn, NULL};
