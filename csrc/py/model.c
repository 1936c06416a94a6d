/* The coalescing model (l2p_model) over NumPy arrays of thread addresses. */
#include "l2p_py.h"
#include "params.h"

#include "l2p_model.h"

/* A uint64 array of addresses: every value within the model's range, or the core's error (the
 * cast to int64 would wrap values above 2**63 into negative ones). */
static int unsigned_fits(l2p_state *st, PyArrayObject *in)
{
    PyArrayObject *u = (PyArrayObject *)PyArray_FROMANY((PyObject *)in, NPY_UINT64, 1, 1,
                                                        NPY_ARRAY_CARRAY);
    if (!u) return -1;
    const uint64_t *v = PyArray_DATA(u);
    l2p_status rc = L2P_OK;
    for (npy_intp i = 0; rc == L2P_OK && i < PyArray_DIM(u, 0); i++)
        rc = l2p_model_check_unsigned((size_t)i, v[i]);
    Py_DECREF(u);
    return rc == L2P_OK ? 0 : l2p_py_raise_int(st);
}

static PyArrayObject *int_array(l2p_state *st, PyObject *obj, const char *name, int type)
{
    if (obj == Py_None || PyUnicode_Check(obj) || PyBytes_Check(obj) ||
        !(PySequence_Check(obj) || PyObject_CheckBuffer(obj) ||
          PyObject_HasAttrString(obj, "__array__") ||
          PyObject_HasAttrString(obj, "__array_interface__"))) {
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-D sequence or array of ints, got %s",
                     name, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *in = (PyArrayObject *)PyArray_FROMANY(obj, NPY_NOTYPE, 1, 1, 0);
    if (!in) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_Format(PyExc_ValueError, "%s: expected a 1-D sequence or array of ints (%S)",
                     name, v ? v : Py_None);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        return NULL;
    }
    if (PyArray_SIZE(in) == 0) {
        PyErr_Format(PyExc_ValueError, "%s: empty; expected at least one entry", name);
        Py_DECREF(in);
        return NULL;
    }
    if (!PyArray_ISINTEGER(in) && !(type == NPY_BOOL && PyArray_ISBOOL(in))) {
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-D integer array, got dtype %R", name,
                     (PyObject *)PyArray_DESCR(in));
        Py_DECREF(in);
        return NULL;
    }
    if (type == NPY_INT64 && PyArray_ISUNSIGNED(in) && PyArray_ITEMSIZE(in) == 8 &&
        unsigned_fits(st, in) < 0) {
        Py_DECREF(in);
        return NULL;
    }
    PyArrayObject *out = (PyArrayObject *)PyArray_FROMANY((PyObject *)in, type, 1, 1,
                                                          NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST);
    Py_DECREF(in);
    return out;
}

/* Per-warp masks from `masks` (one int per warp) or `active` (one bool per thread). */
static int warp_masks(l2p_state *st, PyObject *masks_obj, PyObject *active_obj, size_t n,
                      uint32_t **out)
{
    size_t warps = (n + 31) / 32;
    *out = NULL;
    if (masks_obj == Py_None && active_obj == Py_None) return 0;
    if (masks_obj != Py_None && active_obj != Py_None) {
        PyErr_SetString(PyExc_TypeError, "give masks or active, not both");
        return -1;
    }
    *out = PyMem_Calloc(warps + 1, sizeof **out);
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    PyArrayObject *a = int_array(st, masks_obj != Py_None ? masks_obj : active_obj,
                                 masks_obj != Py_None ? "masks" : "active",
                                 masks_obj != Py_None ? NPY_INT64 : NPY_BOOL);
    if (!a) return -1;
    npy_intp len = PyArray_DIM(a, 0);
    int rc = 0;
    if (masks_obj != Py_None) {
        const int64_t *m = PyArray_DATA(a);
        if ((size_t)len != warps) {
            PyErr_Format(PyExc_ValueError, "masks: %zd masks for %zu warps", (Py_ssize_t)len, warps);
            rc = -1;
        }
        for (size_t w = 0; rc == 0 && w < warps; w++) {
            if (m[w] < 0 || m[w] > 0xffffffffLL) {
                /* PyErr_Format has no %llx: the mask's hex digits are made here */
                char hex[24];
                snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)m[w]);
                PyErr_Format(PyExc_ValueError, "masks: warp %zu's mask %s has lanes beyond the "
                             "32 of a warp (allowed 0 .. 0xffffffff)", w, hex);
                rc = -1;
            } else {
                (*out)[w] = (uint32_t)m[w];
            }
        }
    } else {
        const npy_bool *b = PyArray_DATA(a);
        if ((size_t)len != n) {
            PyErr_Format(PyExc_ValueError, "active: %zd flags for %zu threads", (Py_ssize_t)len, n);
            rc = -1;
        }
        for (size_t t = 0; rc == 0 && t < n; t++)
            if (b[t]) (*out)[t / 32] |= 1u << (t % 32);
    }
    Py_DECREF(a);
    return rc;
}

#define N_FIELDS 7
static const char *const field_names[N_FIELDS] = {"requests", "transactions", "replays", "sectors",
                                                  "lines", "bytes_requested", "bytes_moved"};

static uint64_t field(const l2p_access_stats *s, int i)
{
    const uint64_t v[N_FIELDS] = {s->requests, s->transactions, s->replays, s->sectors, s->lines,
                                  s->bytes_requested, s->bytes_moved};
    return v[i];
}

static PyObject *result_dict(const l2p_access_stats *per_warp, size_t warps,
                             const l2p_access_stats *total)
{
    PyObject *d = PyDict_New(), *tot = PyDict_New();
    for (int i = 0; d && tot && i < N_FIELDS; i++) {
        npy_intp dims[1] = {(npy_intp)warps};
        PyArrayObject *a = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_UINT64);
        PyObject *v = PyLong_FromUnsignedLongLong(field(total, i));
        if (!a || !v || PyDict_SetItemString(tot, field_names[i], v) < 0) {
            Py_XDECREF(a);
            Py_XDECREF(v);
            Py_CLEAR(d);
            break;
        }
        uint64_t *p = PyArray_DATA(a);
        for (size_t w = 0; w < warps; w++) p[w] = field(&per_warp[w], i);
        if (PyDict_SetItemString(d, field_names[i], (PyObject *)a) < 0) Py_CLEAR(d);
        Py_DECREF(a);
        Py_DECREF(v);
    }
    PyObject *eff = PyFloat_FromDouble(l2p_model_efficiency(total));
    if (d && tot && eff && PyDict_SetItemString(tot, "efficiency", eff) == 0 &&
        PyDict_SetItemString(d, "total", tot) == 0) {
        Py_DECREF(tot);
        Py_DECREF(eff);
        return d;
    }
    Py_XDECREF(eff);
    Py_XDECREF(tot);
    Py_XDECREF(d);
    return NULL;
}

typedef struct {
    PyObject *addresses;
    long long size;
    int rule, store;
    PyObject *masks, *active;
} analyze_args;

static PyObject *analyze_impl(PyObject *m, const void *args)
{
    const analyze_args *a = args;
    PyObject *result = NULL;
    l2p_state *st = l2p_state_from_module(m);
    PyArrayObject *addr = int_array(st, a->addresses, "addresses", NPY_INT64);
    if (!addr) return NULL;
    size_t n = (size_t)PyArray_DIM(addr, 0), warps = (n + 31) / 32;
    uint32_t *masks = NULL;
    l2p_access_stats *per_warp = PyMem_Calloc(warps + 1, sizeof *per_warp), total;
    if (!per_warp) {
        PyErr_NoMemory();
    } else if (warp_masks(st, a->masks, a->active, n, &masks) == 0) {
        l2p_status rc;
        Py_BEGIN_ALLOW_THREADS
        rc = l2p_model_analyze(PyArray_DATA(addr), n, masks, (int)a->size, a->store, a->rule,
                               per_warp, &total);
        Py_END_ALLOW_THREADS
        if (rc != L2P_OK) l2p_py_raise(st);
        else result = result_dict(per_warp, warps, &total);
    }
    PyMem_Free(masks);
    PyMem_Free(per_warp);
    Py_DECREF(addr);
    return result;
}
L2P_DEFINE_FN(analyze_fn, analyze_args, analyze_impl, "analyze",
              "Per-warp arrays and totals of the coalescing model.", "dict[str, object]",
              L2P_PARAM(analyze_args, addresses, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int] | numpy.ndarray",
                        .doc = "one byte address per thread, 32 threads a warp"),
              L2P_PARAM(analyze_args, size, L2P_P_INT, .flags = L2P_P_KWONLY, .ival = 4, .lo = 1,
                        .hi = 16, .what = "bytes per access", .doc = "each thread's access "
                        "width: 1, 2, 4, 8 or 16"),
              L2P_PARAM(analyze_args, rule, L2P_P_CHOICE, .flags = L2P_P_KWONLY,
                        .choices = l2p_rule_names, .ival = L2P_RULE_SECTORS,
                        .doc = "the hardware's rule"),
              L2P_PARAM(analyze_args, store, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .doc = "stores rather than loads"),
              L2P_PARAM(analyze_args, masks, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "Sequence[int] | None", .doc = "one active-lane mask per warp "
                        "(None: all active)"),
              L2P_PARAM(analyze_args, active, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "Sequence[bool] | None", .doc = "one bool per thread, instead "
                        "of masks"));

/* Address patterns: the arithmetic and its range in the core, the arguments' ranges in the
 * rows (l2persist.coalescing's contiguous / strided / broadcast call these). */
#define MAX_THREADS (1LL << 24)
#define MAX_ELEMENT (1LL << 40)

/* out, once the core filled it (rc L2P_OK); else NULL with the core's error raised. */
static PyObject *filled(l2p_state *st, PyArrayObject *out, l2p_status rc)
{
    if (rc == L2P_OK) return (PyObject *)out;
    Py_DECREF(out);
    return l2p_py_raise(st);
}

static PyObject *strided_array(l2p_state *st, long long threads, long long size, long long offset,
                               long long stride, long long base, const char *args)
{
    npy_intp dims[1] = {(npy_intp)threads};
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT64);
    if (!out) return NULL;
    return filled(st, out, l2p_model_strided(PyArray_DATA(out), (size_t)threads, (int)size,
                                             offset, stride, base, args));
}

#define THREADS_ROW(S)                                                                         \
    L2P_PARAM(S, threads, L2P_P_INT, .ival = 32, .lo = 1, .hi = MAX_THREADS, .what = "threads", \
              .doc = "how many threads (32 a warp)")
#define SIZE_ROW(S)                                                                            \
    L2P_PARAM(S, size, L2P_P_INT, .ival = 4, .lo = 1, .hi = 16, .what = "bytes per access",      \
              .doc = "each element's size: 1, 2, 4, 8 or 16")
#define ELEMENT_ROW(S, field, dflt, text)                                                      \
    L2P_PARAM(S, field, L2P_P_INT, .ival = dflt, .lo = -MAX_ELEMENT, .hi = MAX_ELEMENT,         \
              .what = "elements", .doc = text)

typedef struct {
    long long threads, size, offset, stride, base;
} strided_args;

static PyObject *strided_impl(PyObject *m, const void *args)
{
    const strided_args *a = args;
    return strided_array(l2p_state_from_module(m), a->threads, a->size, a->offset, a->stride,
                         a->base, "offset, stride, base");
}
L2P_DEFINE_FN(strided_fn, strided_args, strided_impl, "strided_addresses",
              "Thread t's byte address base + (offset + t * stride) * size, as an int64 array.",
              "numpy.ndarray", THREADS_ROW(strided_args), SIZE_ROW(strided_args),
              ELEMENT_ROW(strided_args, offset, 0, "the first thread's element"),
              ELEMENT_ROW(strided_args, stride, 1, "elements between neighbouring threads"),
              L2P_PARAM(strided_args, base, L2P_P_INT, .lo = -MAX_ELEMENT, .hi = MAX_ELEMENT,
                        .what = "bytes", .doc = "the byte address of element 0"));

typedef struct {
    long long threads, size, element, base;
} broadcast_args;

static PyObject *broadcast_impl(PyObject *m, const void *args)
{
    const broadcast_args *a = args;
    return strided_array(l2p_state_from_module(m), a->threads, a->size, a->element, 0, a->base,
                         "element, base");
}
L2P_DEFINE_FN(broadcast_fn, broadcast_args, broadcast_impl, "broadcast_addresses",
              "Every thread at byte address base + element * size, as an int64 array.",
              "numpy.ndarray", THREADS_ROW(broadcast_args), SIZE_ROW(broadcast_args),
              ELEMENT_ROW(broadcast_args, element, 0, "the element every thread accesses"),
              L2P_PARAM(broadcast_args, base, L2P_P_INT, .lo = -MAX_ELEMENT, .hi = MAX_ELEMENT,
                        .what = "bytes", .doc = "the byte address of element 0"));

/* rng.<method>(*call_args) as a C-contiguous int64 array of n values: a numpy Generator's
 * draw, so that the patterns below draw exactly what they drew when they were Python. */
static PyArrayObject *draw(PyObject *rng, const char *method, PyObject *call_args, npy_intp n)
{
    if (!call_args) return NULL;
    PyObject *fn = PyObject_GetAttrString(rng, method);
    if (!fn) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "rng: expected a numpy.random.Generator (with .%s), got %s",
                     method, Py_TYPE(rng)->tp_name);
        Py_DECREF(call_args);
        return NULL;
    }
    PyObject *r = PyObject_CallObject(fn, call_args);
    Py_DECREF(fn);
    Py_DECREF(call_args);
    if (!r) return NULL;
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(r, NPY_INT64, 1, 1,
                                                        NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST);
    Py_DECREF(r);
    if (a && PyArray_DIM(a, 0) != n) {
        PyErr_Format(PyExc_ValueError, "rng: .%s gave %zd values, expected %zd", method,
                     (Py_ssize_t)PyArray_DIM(a, 0), (Py_ssize_t)n);
        Py_CLEAR(a);
    }
    return a;
}

#define RNG_ROW(S)                                                                             \
    L2P_PARAM(S, rng, L2P_P_OBJECT, .flags = L2P_P_REQUIRED, .doc = "a numpy.random.Generator")

typedef struct {
    PyObject *rng;
    long long threads, size, line;
} lines_args;

/* The permutation of each line, drawn one line at a time (rng.permutation(128 / size)). */
static int64_t *line_perms(PyObject *rng, npy_intp per_line, npy_intp lines)
{
    int64_t *perm = PyMem_Malloc((size_t)(per_line * lines) * sizeof *perm);
    if (!perm) return (int64_t *)PyErr_NoMemory();
    for (npy_intp j = 0; j < lines; j++) {
        PyArrayObject *p = draw(rng, "permutation", Py_BuildValue("(n)", per_line), per_line);
        if (!p) {
            PyMem_Free(perm);
            return NULL;
        }
        memcpy(perm + j * per_line, PyArray_DATA(p), (size_t)per_line * sizeof *perm);
        Py_DECREF(p);
    }
    return perm;
}

static PyObject *lines_impl(PyObject *m, const void *args)
{
    const lines_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    if (l2p_model_lines(NULL, 0, (int)a->size, a->line, NULL) != L2P_OK) return l2p_py_raise(st);
    npy_intp per_line = 128 / (npy_intp)a->size, dims[1] = {(npy_intp)a->threads};
    int64_t *perm = line_perms(a->rng, per_line, (dims[0] + per_line - 1) / per_line);
    PyArrayObject *out = perm ? (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT64) : NULL;
    PyObject *r = out ? filled(st, out, l2p_model_lines(PyArray_DATA(out), (size_t)dims[0],
                                                        (int)a->size, a->line, perm))
                      : NULL;
    PyMem_Free(perm);
    return r;
}
L2P_DEFINE_FN(lines_fn, lines_args, lines_impl, "permuted_line_addresses",
              "Threads that fill 128-byte lines in order from line `line`, each line's elements "
              "in a random order (rng.permutation per line), as an int64 array of byte "
              "addresses.", "numpy.ndarray", RNG_ROW(lines_args), THREADS_ROW(lines_args),
              SIZE_ROW(lines_args),
              L2P_PARAM(lines_args, line, L2P_P_INT, .lo = 0, .hi = MAX_ELEMENT, .what = "lines",
                        .doc = "the first 128-byte line"));

typedef struct {
    PyObject *rng;
    long long threads, size, elements;
} scatter_args;

static PyObject *scatter_impl(PyObject *m, const void *args)
{
    const scatter_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    if (l2p_model_scatter(NULL, 0, (int)a->size, NULL, a->elements) != L2P_OK)
        return l2p_py_raise(st);
    npy_intp dims[1] = {(npy_intp)a->threads};
    PyArrayObject *pick = draw(a->rng, "integers", Py_BuildValue("(iLn)", 0, a->elements,
                                                                  dims[0]), dims[0]);
    PyArrayObject *out = pick ? (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT64) : NULL;
    PyObject *r = out ? filled(st, out, l2p_model_scatter(PyArray_DATA(out), (size_t)dims[0],
                                                          (int)a->size, PyArray_DATA(pick),
                                                          a->elements))
                      : NULL;
    Py_XDECREF(pick);
    return r;
}
L2P_DEFINE_FN(scatter_fn, scatter_args, scatter_impl, "scatter_addresses",
              "Threads at uniformly random elements of the first `elements` "
              "(rng.integers(0, elements, threads)), as an int64 array of byte addresses.",
              "numpy.ndarray", RNG_ROW(scatter_args), THREADS_ROW(scatter_args),
              SIZE_ROW(scatter_args),
              L2P_PARAM(scatter_args, elements, L2P_P_INT, .ival = 4096, .lo = 1,
                        .hi = MAX_ELEMENT, .what = "elements", .doc = "how many elements"));

const l2p_fn *const l2p_model_fns[] = {&analyze_fn, &strided_fn, &broadcast_fn, &lines_fn,
                                       &scatter_fn, NULL};
