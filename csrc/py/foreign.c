/* Foreign graphs, discovery and capture safety: module-level functions; and the hooks through
 * which the binding reaches the Python package. */
#include "l2p_py.h"
#include "params.h"

#include <stddef.h>

#include "l2p_launchex.h"
#include "l2p_launchlog.h"
#include "l2p_release.h"

static PyObject *release_pending(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    return PyLong_FromSize_t(l2p_release_pending());
}
L2P_DEFINE_FN(release_pending_fn, l2p_no_args, release_pending, "_release_pending",
              "Releases (frees, destroys) deferred because a capture refused them; drained at "
              "the next allocation, graph launch and at teardown.", "int", L2P_NO_PARAMS);

static PyObject *release_drain(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    l2p_release_drain();
    return PyLong_FromSize_t(l2p_release_pending());
}
L2P_DEFINE_FN(release_drain_fn, l2p_no_args, release_drain, "_release_drain",
              "Retry the deferred releases now; returns how many still wait.", "int",
              L2P_NO_PARAMS);

static l2p_state *mod_state(PyObject *m) { return l2p_state_from_module(m); }

/* A Graph over a foreign cudaGraph_t. The handle is the caller's word (l2persist.as_graph
 * finds it in the owner object). */
typedef struct {
    long long handle;
    int device;
    PyObject *owner;
} borrow_args;

static PyObject *borrow_graph(PyObject *m, const void *args)
{
    const borrow_args *a = args;
    return l2p_graph_borrow(mod_state(m), (cudaGraph_t)(uintptr_t)a->handle, a->device, a->owner);
}
L2P_DEFINE_FN(borrow_graph_fn, borrow_args, borrow_graph, "_borrow_graph",
              "A Graph over a foreign cudaGraph_t, never destroyed by l2persist (use "
              "l2persist.as_graph).", "Graph",
              L2P_PARAM(borrow_args, handle, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1,
                        .hi = LLONG_MAX, .what = "a nonzero cudaGraph_t handle",
                        .doc = "the cudaGraph_t, as an int"),
              L2P_PARAM(borrow_args, device, L2P_P_DEVICE, .flags = L2P_P_REQUIRED,
                        .doc = "the device the graph belongs to"),
              L2P_PARAM(borrow_args, owner, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "object", .doc = "the foreign object the graph lives as long "
                        "as (kept alive by the Graph)"));

/* A stream argument that may not be the legacy stream (a capture needs a real one). */
static int capture_stream(const l2p_stream_val *s)
{
    if (s->handle) return 0;
    PyErr_SetString(PyExc_ValueError, "stream: capture needs a stream other than the legacy "
                    "default stream (None)");
    return -1;
}

typedef struct {
    l2p_stream_val stream;
    PyObject *refs;
} capture_args;

/* Begin a relaxed-mode capture on an l2persist Stream or a foreign stream (discovery
 * captures someone else's code). */
static PyObject *capture_begin_relaxed(PyObject *m, const void *args)
{
    const capture_args *a = args;
    if (capture_stream(&a->stream) < 0) return NULL;
    if (l2p_capture_begin_relaxed(a->stream.handle) != L2P_OK) return l2p_py_raise(mod_state(m));
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(capture_begin_fn, capture_args, capture_begin_relaxed, "_capture_begin_relaxed",
              "Begin a relaxed-mode capture (discovery).", "None",
              L2P_PARAM(capture_args, stream, L2P_P_STREAM, .flags = L2P_P_REQUIRED,
                        .doc = "a Stream or a foreign stream (not the legacy stream)"));

/* End the capture: a Graph owning the captured graph, keeping refs alive. Raises when the
 * capture was invalidated. */
static PyObject *capture_end(PyObject *m, const void *args)
{
    const capture_args *a = args;
    cudaGraph_t graph = NULL;
    int device = 0;
    if (!PyList_Check(a->refs)) {
        PyErr_Format(PyExc_TypeError, "refs: expected a list, got %s", Py_TYPE(a->refs)->tp_name);
        return NULL;
    }
    if (capture_stream(&a->stream) < 0) return NULL;
    /* The capture ends first, whatever happened during it: a stream left capturing (after an
     * invalidated capture, where other stream queries fail) would refuse all later work. */
    if (l2p_capture_end(a->stream.handle, &graph) != L2P_OK) return l2p_py_raise(mod_state(m));
    if (l2p_stream_device(a->stream.handle, &device) != L2P_OK) {
        PyObject *err = l2p_py_raise(mod_state(m));
        int here = 0;
        if (cudaGetDevice(&here) != cudaSuccess ||
            l2p_release(here, L2P_RELEASE_GRAPH, (void *)graph) != L2P_OK)
            l2p_clear_error();
        return err;
    }
    return l2p_graph_new(mod_state(m), graph, device, a->refs);
}
L2P_DEFINE_FN(capture_end_fn, capture_args, capture_end, "_capture_end",
              "End a capture; the Graph (keeps refs alive).", "Graph",
              L2P_PARAM(capture_args, stream, L2P_P_STREAM, .flags = L2P_P_REQUIRED,
                        .doc = "the stream the capture began on"),
              L2P_PARAM(capture_args, refs, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "list[object]", .doc = "objects the Graph keeps alive"));

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
    PyObject *b = l2p_buffer_as_buffer(st, o, NULL);
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

/* grid or block: an int or a sequence of 1-3 ints, each in [1, 2^32 - 1], padded with 1s:
 * the one check of a launch shape (l2persist.launch hands its arguments here as given). */
static int dims3(PyObject *obj, const char *name, unsigned out[3])
{
    PyObject *seq = PyLong_Check(obj) && !PyBool_Check(obj) ? PyTuple_Pack(1, obj)
                    : PyBool_Check(obj) || PyUnicode_Check(obj) ? NULL
                    : PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected an int or a tuple of 1-3 ints, got %s", name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 3) {
        PyErr_Format(PyExc_ValueError, "%s: 1-3 dimensions, each in 1..4294967295, got %R", name,
                     obj);
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < 3; i++) {
        long long v = 1;
        if (i < n && l2p_py_ranged_int(PySequence_Fast_GET_ITEM(seq, i), name, "a dimension", 1,
                                       0xffffffffLL, &v) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        out[i] = (unsigned)v;
    }
    Py_DECREF(seq);
    return 0;
}

typedef struct {
    long long func;
    int is_kernel;
    PyObject *grid, *block, *args;
    l2p_stream_val stream;
    l2p_window_val window;
    long long shared_mem;
    PyObject *device; /* resolved after the shape: a bad shape is named without a GPU */
} launch_ex_args;

/* The launch's device: the stream's, else the device argument's. */
static PyObject *launch_ex(PyObject *m, const void *args)
{
    const launch_ex_args *a = args;
    unsigned grid[3], block[3];
    l2p_state *st = mod_state(m);
    int device;
    if (dims3(a->grid, "grid", grid) < 0 || dims3(a->block, "block", block) < 0 ||
        l2p_py_device_index(st, a->device, &device) < 0)
        return NULL;
    /* Our Stream knows its device; asking the driver about a capturing stream is refused
     * (cudaErrorStreamCaptureUnsupported: a launch inside s.capture() failed on the H200). */
    if (a->stream.obj)
        device = l2p_py_stream_device((l2p_StreamObject *)a->stream.obj);
    else if (a->stream.handle && l2p_stream_device(a->stream.handle, &device) != L2P_OK)
        return l2p_py_raise(st);
    PyObject *seq = PySequence_Fast(a->args, "args: expected a sequence of kernel arguments");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    l2p_arg *la = PyMem_Calloc((size_t)n + 1, sizeof *la);
    PyObject *keep = PyList_New(0);
    PyObject *r = NULL;
    if (!la || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (launch_arg(st, PySequence_Fast_GET_ITEM(seq, i), i, &la[i], keep) < 0) goto done;
    if (l2p_launch_ex(device, (void *)(uintptr_t)a->func, a->is_kernel, grid, block,
                      (unsigned)a->shared_mem, a->stream.handle, a->window.w, la, (size_t)n) !=
        L2P_OK) {
        l2p_py_raise(st);
        goto done;
    }
    r = Py_NewRef(Py_None);
done:
    Py_XDECREF(keep);
    PyMem_Free(la);
    Py_DECREF(seq);
    return r;
}
L2P_DEFINE_FN(launch_ex_fn, launch_ex_args, launch_ex, "_launch_ex",
              "cuLaunchKernelEx of a CUfunction (or CUkernel) with an optional window (use "
              "l2persist.launch).", "None",
              L2P_PARAM(launch_ex_args, func, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1,
                        .hi = LLONG_MAX, .what = "a CUfunction or CUkernel handle",
                        .doc = "the function's handle, as an int"),
              L2P_PARAM(launch_ex_args, is_kernel, L2P_P_BOOL, .flags = L2P_P_REQUIRED,
                        .doc = "True: func is a CUkernel (library-level), False: a CUfunction"),
              L2P_PARAM(launch_ex_args, grid, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "int | Sequence[int]", .doc = "blocks of the grid: (x[, y[, z]]), 1-3 ints"),
              L2P_PARAM(launch_ex_args, block, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "int | Sequence[int]", .doc = "threads per block: (x[, y[, z]]), 1-3 ints"),
              L2P_PARAM(launch_ex_args, args, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[object]", .doc = "the kernel's arguments: buffers "
                        "(their address), ints, floats, NumPy scalars"),
              L2P_PARAM(launch_ex_args, stream, L2P_P_STREAM,
                        .doc = "a Stream, a foreign stream, or None (the legacy stream)"),
              L2P_PARAM(launch_ex_args, window, L2P_P_WINDOW,
                        .doc = "the launch's access policy window, or None"),
              L2P_PARAM(launch_ex_args, shared_mem, L2P_P_INT, .lo = 0, .hi = 0xffffffffLL,
                        .what = "bytes", .doc = "dynamic shared memory per block"),
              L2P_PARAM(launch_ex_args, device, L2P_P_OBJECT, .pytype = "DeviceLike",
                        .doc = "the device when stream is None; None: the current device"));

/* Each logged launch's stream, as the launch gave it. Only the launch knows where a kernel
 * ran: a capture does not (PyTorch's capture makes its own stream the current one, and a
 * kernel launched on another stream is not captured at all), nor does the caller's stream=
 * (eager PyTorch work runs on PyTorch's current stream, CuPy's on the one it is given). */
static PyObject *launch_streams(const l2p_launch_log *log)
{
    PyObject *list = PyList_New((Py_ssize_t)log->n_launches);
    for (size_t k = 0; list && k < log->n_launches; k++) {
        PyObject *h = PyLong_FromVoidPtr(log->launches[k].stream);
        if (!h) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)k, h);
    }
    return list;
}

/* Launch k's stream appended to the scan's kernel tuple k (the scan has one kernel per logged
 * launch, in order), so that the tuples keep Graph._scan's shape plus one item. */
static int with_streams(PyObject *kernels, PyObject *streams)
{
    Py_ssize_t n = PyList_GET_SIZE(kernels);
    if (n != PyList_GET_SIZE(streams)) {
        PyErr_Format(PyExc_SystemError, "launch log: %zd kernels scanned for %zd launches", n,
                     PyList_GET_SIZE(streams));
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *last = PyTuple_Pack(1, PyList_GET_ITEM(streams, k));
        PyObject *t = last ? PySequence_Concat(PyList_GET_ITEM(kernels, k), last) : NULL;
        Py_XDECREF(last);
        if (!t) return -1;
        PyList_SetItem(kernels, k, t); /* steals t; drops the 6-item tuple */
    }
    return 0;
}

/* The streams fn destroyed after launching on them, while the log was on (a stream made per
 * call: CuPy frees its Stream as fn returns): each handle whose last logged launch is marked
 * stream_gone, as ints. Such a handle must never be used again. */
static PyObject *gone_streams(const l2p_launch_log *log)
{
    void *few[64];
    size_t n = l2p_launch_log_gone(log, few, 64);
    void **all = n <= 64 ? few : PyMem_Calloc(n, sizeof *all);
    if (!all) return PyErr_NoMemory();
    if (all != few) l2p_launch_log_gone(log, all, n);
    PyObject *gone = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; gone && i < n; i++) {
        PyObject *h = PyLong_FromVoidPtr(all[i]);
        if (!h) Py_CLEAR(gone);
        else PyList_SET_ITEM(gone, (Py_ssize_t)i, h);
    }
    if (all != few) PyMem_Free(all);
    return gone;
}

/* Discovery without capture (l2p_launchlog.h): run fn for real with its kernel launches
 * logged, then scan their argument bytes as Graph._scan scans a graph's nodes. */
typedef struct {
    PyObject *fn;
    PyObject *offers;
    int device;
} launch_log_args;

/* The scan of a log that ended: its (kernels, records, uses) tuples, each kernel's tuple ending
 * with its launch's stream; the log is freed either way. */
static PyObject *log_tuples(l2p_state *st, l2p_launch_log *log, PyObject *offers)
{
    l2p_graph_scan sc;
    l2p_status scanned = l2p_launch_log_scan(log, &sc);
    PyObject *streams = scanned == L2P_OK ? launch_streams(log) : NULL;
    l2p_launch_log_free(log);
    if (scanned != L2P_OK) return l2p_py_raise(st);
    if (!streams) {
        l2p_graph_scan_free(&sc);
        return NULL;
    }
    PyObject *scan = l2p_py_scan_tuples(st, &sc, offers); /* frees sc */
    if (scan && with_streams(PyTuple_GET_ITEM(scan, 0), streams) < 0) Py_CLEAR(scan);
    Py_DECREF(streams);
    return scan;
}

static PyObject *launch_log(PyObject *m, const void *args)
{
    const launch_log_args *a = args;
    l2p_state *st = mod_state(m);
    l2p_launch_log log;
    if (l2p_launch_log_begin(a->device, &log) != L2P_OK) return l2p_py_raise(st);
    PyObject *r = PyObject_CallNoArgs(a->fn);
    int ran = r != NULL;
    Py_XDECREF(r); /* inside the log: a stream freed with fn's result is a destroy it sees */
    l2p_launch_log_end(&log);
    size_t dropped = log.dropped, cap = log.max_launches;
    if (!ran) {
        l2p_launch_log_free(&log);
        return NULL;
    }
    PyObject *gone = gone_streams(&log);
    PyObject *scan = gone ? log_tuples(st, &log, a->offers) : NULL;
    if (!gone) l2p_launch_log_free(&log);
    if (scan && dropped &&
        PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "launch log: %zu kernel launches "
                         "were not logged (the log holds %zu launches and %zu MiB of "
                         "arguments, and needs each launch's function); buffers only "
                         "they use are not among those found", dropped, cap,
                         (size_t)(L2P_LAUNCH_LOG_MAX_BYTES >> 20)) < 0)
        Py_CLEAR(scan);
    PyObject *out = scan ? Py_BuildValue("(OOOO)", PyTuple_GET_ITEM(scan, 0),
                                         PyTuple_GET_ITEM(scan, 1), PyTuple_GET_ITEM(scan, 2),
                                         gone) : NULL;
    Py_XDECREF(scan);
    Py_XDECREF(gone);
    return out;
}
L2P_DEFINE_FN(launch_log_fn, launch_log_args, launch_log, "_launch_log",
              "Run fn once for real, logging its kernel launches through CUPTI's callback API, "
              "and scan their arguments: the raw discovery of eager work that cannot be "
              "captured (l2persist.process.discover), in Graph._scan's (kernels, records, uses) "
              "tuples, one kernel per launch, each kernel's tuple ending with the stream the "
              "launch was queued on (its cudaStream_t as an int, 0 for the legacy default "
              "stream); and last the streams fn destroyed after launching on them (handles "
              "never to be used again: no window, no timing on them).",
              "tuple[list[tuple[int, str, tuple[int, int, int], tuple[int, int, int], int, "
              "int, int]], list[tuple[int, int, int]], list[tuple[int, int, int, int, int]], "
              "list[int]]",
              L2P_PARAM(launch_log_args, fn, L2P_P_CALLABLE, .flags = L2P_P_REQUIRED,
                        .pytype = "Callable[[], object]", .doc = "the work, called once with no "
                        "arguments"),
              L2P_PARAM(launch_log_args, offers, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[tuple[int, int]]",
                        .doc = "the (ptr, nbytes) buffers on offer"),
              L2P_PARAM(launch_log_args, device, L2P_P_DEVICE,
                        .doc = "the device whose launches are logged; None: the current device"));

/* ---- the watcher's launch log ----
 * A running program is never called by l2persist (l2persist.process.live), so its eager
 * launches are logged across its own calls: begun at one of them, taken at a later one.
 * CUPTI takes one subscriber per process, so there is one such log, kept here. */
static l2p_launch_log watch_log;
static int watch_log_on;

typedef struct {
    int device;
} watch_begin_args;

static PyObject *watch_log_begin(PyObject *m, const void *args)
{
    const watch_begin_args *a = args;
    if (watch_log_on) {
        PyErr_SetString(PyExc_RuntimeError, "launch log: already logging (one per process)");
        return NULL;
    }
    if (l2p_launch_log_begin(a->device, &watch_log) != L2P_OK) return l2p_py_raise(mod_state(m));
    watch_log_on = 1;
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(watch_log_begin_fn, watch_begin_args, watch_log_begin, "_launch_log_begin",
              "Start logging the device's kernel launches (CUPTI's callback API) until "
              "_launch_log_take: the watcher's discovery of a running program's eager work. "
              "RuntimeError while a log is on; CUPTI's errors (another subscriber) raised.",
              "None",
              L2P_PARAM(watch_begin_args, device, L2P_P_DEVICE,
                        .doc = "the device whose launches are logged; None: the current device"));

typedef struct {
    PyObject *offers;
    int discard;
} watch_take_args;

static PyObject *watch_log_take(PyObject *m, const void *args)
{
    const watch_take_args *a = args;
    if (!watch_log_on) {
        if (a->discard) Py_RETURN_NONE; /* idempotent at exit */
        PyErr_SetString(PyExc_RuntimeError, "launch log: not logging (_launch_log_begin first)");
        return NULL;
    }
    l2p_launch_log_end(&watch_log); /* the callbacks are off from here */
    watch_log_on = 0;
    size_t dropped = watch_log.dropped;
    if (a->discard) {
        l2p_launch_log_free(&watch_log);
        Py_RETURN_NONE;
    }
    PyObject *none = a->offers == Py_None ? PyTuple_New(0) : NULL;
    PyObject *scan = log_tuples(mod_state(m), &watch_log, none ? none : a->offers);
    Py_XDECREF(none);
    if (!scan) return NULL;
    PyObject *r = Py_BuildValue("(OOOn)", PyTuple_GET_ITEM(scan, 0), PyTuple_GET_ITEM(scan, 1),
                                PyTuple_GET_ITEM(scan, 2), (Py_ssize_t)dropped);
    Py_DECREF(scan);
    return r;
}
L2P_DEFINE_FN(watch_log_take_fn, watch_take_args, watch_log_take, "_launch_log_take",
              "Stop the log _launch_log_begin started and scan it: _launch_log's (kernels, "
              "records, uses) plus how many launches were not logged (past the log's caps). "
              "discard: stop and free it, scanning nothing (None; nothing to stop is no error).",
              "tuple[list[tuple[int, str, tuple[int, int, int], tuple[int, int, int], int, "
              "int, int, int]], list[tuple[int, int, int]], list[tuple[int, int, int, int, "
              "int]], int] | None",
              L2P_PARAM(watch_take_args, offers, L2P_P_OBJECT, .pytype = "Sequence[tuple[int, "
                        "int]] | None", .doc = "the (ptr, nbytes) buffers on offer (None: none)"),
              L2P_PARAM(watch_take_args, discard, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .doc = "stop and free the log without scanning it"));

/* ---- hooks: how the binding reaches the Python package without importing it ----
 * A few methods hand over to the package's Python: a window set on a borrowed graph must reach
 * its owner (PyTorch instantiates again), Graph.buffers() and Graph.nodes_window() build the
 * package's tables and carriers, Device.set_aside_tax() assembles the tax, and
 * DeviceProperties are formatted for people. An import of l2persist.* from here would tie the
 * binding to the package's layout and run the package's import from inside a method; instead
 * the package hands its callables over when it is imported (_set_hooks), they are kept in the
 * module's `_hooks` dict (module.c makes it empty), and a method calls what it was given
 * (l2p_py_hook, used by graph.c and device.c). */
typedef struct {
    PyObject *owner_changed, *owner_handle, *graph_buffers, *node_group, *set_aside_tax,
        *record_repr, *record_html;
} hooks_args;

static const struct {
    const char *name;
    size_t offset;
} hook_rows[] = {
    {"owner_changed", offsetof(hooks_args, owner_changed)},
    {"owner_handle", offsetof(hooks_args, owner_handle)},
    {"graph_buffers", offsetof(hooks_args, graph_buffers)},
    {"node_group", offsetof(hooks_args, node_group)},
    {"set_aside_tax", offsetof(hooks_args, set_aside_tax)},
    {"record_repr", offsetof(hooks_args, record_repr)},
    {"record_html", offsetof(hooks_args, record_html)},
};
#define N_HOOKS (sizeof hook_rows / sizeof hook_rows[0])

static PyObject *hook_of(const hooks_args *a, size_t i)
{
    return *(PyObject *const *)((const char *)a + hook_rows[i].offset);
}

static PyObject *set_hooks_impl(PyObject *m, const void *args)
{
    const hooks_args *a = args;
    /* Every hook is checked before any is kept: a bad call changes nothing. */
    for (size_t i = 0; i < N_HOOKS; i++) {
        PyObject *fn = hook_of(a, i);
        if (fn != Py_None && !PyCallable_Check(fn)) {
            PyErr_Format(PyExc_TypeError, "%s: expected a callable or None, got %s",
                         hook_rows[i].name, Py_TYPE(fn)->tp_name);
            return NULL;
        }
    }
    PyObject *hooks = PyObject_GetAttrString(m, "_hooks"); /* made empty at import */
    if (!hooks) return NULL;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < N_HOOKS; i++)
        if (hook_of(a, i) != Py_None)
            rc = PyDict_SetItemString(hooks, hook_rows[i].name, hook_of(a, i));
    Py_DECREF(hooks);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}
#define HOOK_PARAM(field, type, what)                                                          \
    L2P_PARAM(hooks_args, field, L2P_P_OBJECT, .flags = L2P_P_KWONLY, .pytype = type,          \
              .doc = what "; None: keep the one registered")
L2P_DEFINE_FN(set_hooks_fn, hooks_args, set_hooks_impl, "_set_hooks",
              "Register the Python package's callables that the binding calls (l2persist "
              "registers them when it is imported; the binding imports nothing from it).",
              "None",
              HOOK_PARAM(owner_changed, "Callable[[Graph], object] | None",
                         "called after a window of a borrowed graph's node changed"),
              HOOK_PARAM(owner_handle, "Callable[[object], int | None] | None",
                         "the raw graph a borrowed graph's owner holds now (0: none; None: "
                         "it cannot tell)"),
              HOOK_PARAM(graph_buffers, "Callable[[Graph, object], object] | None",
                         "Graph.buffers(candidates)"),
              HOOK_PARAM(node_group, "Callable[[Graph, object], object] | None",
                         "Graph.nodes_window(nodes)"),
              HOOK_PARAM(set_aside_tax, "Callable[..., object] | None",
                         "Device.set_aside_tax(set_aside, probe=, stream=, work=)"),
              HOOK_PARAM(record_repr, "Callable[[str, object], str] | None",
                         "repr of DeviceProperties"),
              HOOK_PARAM(record_html, "Callable[[str, object], str] | None",
                         "DeviceProperties._repr_html_()"));
#undef HOOK_PARAM

PyObject *l2p_py_hook(PyTypeObject *type, const char *name)
{
    /* Every type of the extension is made from the module (PyType_FromModuleAndSpec) and none
     * can be subclassed, so the object's own type knows the module. */
    PyObject *m = PyType_GetModule(type); /* borrowed */
    if (!m) return NULL;
    PyObject *hooks = PyObject_GetAttrString(m, "_hooks");
    if (!hooks) return NULL;
    PyObject *fn = PyDict_Check(hooks) ? PyDict_GetItemString(hooks, name) : NULL;
    Py_XINCREF(fn);
    Py_DECREF(hooks);
    if (!fn)
        PyErr_Format(PyExc_RuntimeError, "l2persist._core: no '%s' hook is registered: the "
                     "binding reaches the Python package only through the hooks l2persist "
                     "registers when it is imported (import l2persist)", name);
    return fn;
}

const l2p_fn *const l2p_foreign_fns[] = {&launch_ex_fn, &borrow_graph_fn, &capture_begin_fn,
                                         &capture_end_fn, &launch_log_fn, &watch_log_begin_fn,
                                         &watch_log_take_fn, &release_pending_fn,
                                         &release_drain_fn, &set_hooks_fn, NULL};
