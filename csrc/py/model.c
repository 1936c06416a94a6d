/* The coalescing model (l2p_model) over NumPy arrays of thread addresses. */
#include "l2p_py.h"

#include "l2p_model.h"

static PyArrayObject *int_array(PyObject *obj, const char *name, int type)
{
    PyArrayObject *in = (PyArrayObject *)PyArray_FROMANY(obj, NPY_NOTYPE, 1, 1, 0);
    if (!in) return NULL;
    if (!PyArray_ISINTEGER(in) && !(type == NPY_BOOL && PyArray_ISBOOL(in))) {
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-D integer array, got dtype %R", name,
                     (PyObject *)PyArray_DESCR(in));
        Py_DECREF(in);
        return NULL;
    }
    PyArrayObject *out = (PyArrayObject *)PyArray_FROMANY((PyObject *)in, type, 1, 1,
                                                          NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST);
    Py_DECREF(in);
    return out;
}

/* Per-warp masks from `masks` (one int per warp) or `active` (one bool per thread). */
static int warp_masks(PyObject *masks_obj, PyObject *active_obj, size_t n, uint32_t **out)
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
    PyArrayObject *a = int_array(masks_obj != Py_None ? masks_obj : active_obj,
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
                PyErr_Format(PyExc_ValueError, "masks: warp %zu's mask 0x%llx has lanes beyond "
                             "the 32 of a warp (allowed 0..0xffffffff)", w, (long long)m[w]);
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

static PyObject *fn_analyze(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"addresses", "size", "rule", "store", "masks", "active", NULL};
    PyObject *addr_obj, *masks_obj = Py_None, *active_obj = Py_None, *result = NULL;
    int size = 4, store = 0, rule;
    const char *rule_name = "sectors";
    l2p_state *st = l2p_state_from_module(m);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$ispOO:analyze", names, &addr_obj, &size,
                                     &rule_name, &store, &masks_obj, &active_obj))
        return NULL;
    if (l2p_rule_parse(rule_name, &rule) != L2P_OK) return l2p_py_raise(st);
    PyArrayObject *addr = int_array(addr_obj, "addresses", NPY_INT64);
    if (!addr) return NULL;
    size_t n = (size_t)PyArray_DIM(addr, 0), warps = (n + 31) / 32;
    uint32_t *masks = NULL;
    l2p_access_stats *per_warp = PyMem_Calloc(warps + 1, sizeof *per_warp), total;
    if (!per_warp) {
        PyErr_NoMemory();
    } else if (warp_masks(masks_obj, active_obj, n, &masks) == 0) {
        l2p_status rc;
        Py_BEGIN_ALLOW_THREADS
        rc = l2p_model_analyze(PyArray_DATA(addr), n, masks, size, store, rule, per_warp, &total);
        Py_END_ALLOW_THREADS
        if (rc != L2P_OK) l2p_py_raise(st);
        else result = result_dict(per_warp, warps, &total);
    }
    PyMem_Free(masks);
    PyMem_Free(per_warp);
    Py_DECREF(addr);
    return result;
}

PyMethodDef l2p_model_functions[] = {
    {"analyze", (PyCFunction)(void (*)(void))fn_analyze, METH_VARARGS | METH_KEYWORDS,
     "analyze(addresses, *, size=4, rule='sectors', store=False, masks=None, "
     "active=None)\n--\n\nPer-warp arrays and totals of the coalescing model."},
    {NULL, NULL, 0, NULL}};
