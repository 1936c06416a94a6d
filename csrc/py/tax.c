/* The set-aside tax model (l2p_tax): predictions, the fits and the measurement rows. */
#include "l2p_py.h"

#include "l2p_tax.h"

/* A chip from (cc_major, cc_minor, l2_cache_size, granule, persisting_max). */
static int chip_arg(PyObject *cc, long long l2, long long granule, long long pmax,
                    l2p_tax_chip *out)
{
    int major, minor;
    if (!PyTuple_Check(cc) || !PyArg_ParseTuple(cc, "ii:compute_capability", &major, &minor)) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "compute_capability: expected (major, minor)");
        }
        return -1;
    }
    if (l2 < 0 || granule < 0 || pmax < 0) {
        PyErr_Format(PyExc_ValueError, "%s: must be >= 0", l2 < 0 ? "l2_cache_size" :
                     granule < 0 ? "granule" : "persisting_max");
        return -1;
    }
    *out = (l2p_tax_chip){major, minor, (size_t)l2, (size_t)granule, (size_t)pmax};
    return 0;
}

#define CHIP_ARGS "compute_capability", "l2_cache_size", "set_aside", "granule", "persisting_max"

static PyObject *model_dict(const l2p_tax_model *m)
{
    PyObject *pen = PyDict_New();
    for (int k = 0; pen && k < L2P_TAX_KIND_COUNT; k++) {
        PyObject *v = PyFloat_FromDouble(m->penalty[k]);
        if (!v || PyDict_SetItemString(pen, l2p_tax_kind_name(k), v) < 0) Py_CLEAR(pen);
        Py_XDECREF(v);
    }
    if (!pen) return NULL;
    return Py_BuildValue("{s:n,s:n,s:n,s:d,s:d,s:d,s:n,s:O,s:N,s:n,s:n,s:s,s:O}",
                         "l2_bytes", (Py_ssize_t)m->l2_bytes, "set_aside",
                         (Py_ssize_t)m->set_aside, "granule", (Py_ssize_t)m->granule,
                         "capacity_coeff", m->capacity_coeff, "onset_fraction",
                         m->onset_fraction, "base_fraction", m->base_fraction, "base_bytes",
                         (Py_ssize_t)m->base_bytes, "taxed", m->taxed ? Py_True : Py_False,
                         "penalty", pen, "knee_bytes", (Py_ssize_t)m->knee_bytes,
                         "probe_working_set", (Py_ssize_t)m->probe_bytes, "basis", m->basis,
                         "exact", m->exact ? Py_True : Py_False);
}

static PyObject *fn_predict(PyObject *mod, PyObject *args, PyObject *kw)
{
    static char *names[] = {CHIP_ARGS, NULL};
    PyObject *cc;
    long long l2, aside, granule = 0, pmax = 0;
    l2p_tax_chip chip;
    l2p_tax_model m;
    l2p_state *st = l2p_state_from_module(mod);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OLL|$LL:tax_predict", names, &cc, &l2, &aside,
                                     &granule, &pmax) ||
        chip_arg(cc, l2, granule, pmax, &chip) < 0)
        return NULL;
    if (l2p_tax_predict(&chip, aside, &m) != L2P_OK) return l2p_py_raise(st);
    return model_dict(&m);
}

static PyObject *fn_slowdown(PyObject *mod, PyObject *args, PyObject *kw)
{
    static char *names[] = {CHIP_ARGS, "kind", "ws", NULL};
    PyObject *cc;
    long long l2, aside, granule = 0, pmax = 0;
    const char *kind_name;
    double ws;
    int kind;
    l2p_tax_chip chip;
    l2p_tax_model m;
    l2p_state *st = l2p_state_from_module(mod);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OLLLLsd:tax_slowdown", names, &cc, &l2, &aside,
                                     &granule, &pmax, &kind_name, &ws) ||
        chip_arg(cc, l2, granule, pmax, &chip) < 0)
        return NULL;
    if (ws < 0 || ws != ws) {
        /* PyErr_Format has no %g (Python 3.12 raises SystemError for it) */
        char text[64];
        snprintf(text, sizeof text, "%g", ws);
        PyErr_Format(PyExc_ValueError, "ws_bytes: %s is not >= 0", text);
        return NULL;
    }
    if (l2p_tax_kind_parse(kind_name, &kind) != L2P_OK ||
        l2p_tax_predict(&chip, aside, &m) != L2P_OK)
        return l2p_py_raise(st);
    return PyFloat_FromDouble(l2p_tax_slowdown(&m, kind, ws));
}

/* A sequence of numbers as a PyMem array of doubles; *n its length. */
static double *doubles(PyObject *obj, const char *name, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(obj, name);
    if (!seq) return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    double *out = PyMem_Calloc((size_t)*n + 1, sizeof *out);
    for (Py_ssize_t i = 0; out && i < *n; i++) {
        out[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "%s: item %zd is not a number", name, i);
            PyMem_Free(out);
            out = NULL;
        }
    }
    if (!out && !PyErr_Occurred()) PyErr_NoMemory();
    Py_DECREF(seq);
    return out;
}

/* Sequences given together must have the same length. */
static int same_length(Py_ssize_t a, Py_ssize_t b, const char *na, const char *nb)
{
    if (a == b) return 0;
    PyErr_Format(PyExc_ValueError, "%s: %zd values, but %s has %zd", nb, b, na, a);
    return -1;
}

static PyObject *fn_fit_capacity(PyObject *mod, PyObject *args)
{
    double l2, c, *s = NULL, *k = NULL;
    PyObject *so, *ko, *out = NULL;
    Py_ssize_t ns = 0, nk = 0;
    if (!PyArg_ParseTuple(args, "dOO:tax_fit_capacity", &l2, &so, &ko)) return NULL;
    if ((s = doubles(so, "set_asides", &ns)) && (k = doubles(ko, "knees", &nk)) &&
        same_length(ns, nk, "set_asides", "knees") == 0) {
        if (l2p_tax_fit_capacity(l2, (size_t)ns, s, k, &c) != L2P_OK)
            l2p_py_raise(l2p_state_from_module(mod));
        else
            out = PyFloat_FromDouble(c);
    }
    PyMem_Free(s);
    PyMem_Free(k);
    return out;
}

static PyObject *fn_fit_penalty(PyObject *mod, PyObject *args, PyObject *kw)
{
    static char *names[] = {"l2", "coeff", "set_asides", "ws", "slowdowns", "base", NULL};
    double l2, coeff, base = -1, p, *s = NULL, *w = NULL, *sl = NULL;
    PyObject *so, *wo, *slo, *out = NULL;
    Py_ssize_t ns = 0, nw = 0, nsl = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ddOOO|$d:tax_fit_penalty", names, &l2, &coeff,
                                     &so, &wo, &slo, &base))
        return NULL;
    if ((s = doubles(so, "set_asides", &ns)) && (w = doubles(wo, "ws", &nw)) &&
        (sl = doubles(slo, "slowdowns", &nsl)) && same_length(ns, nw, "set_asides", "ws") == 0 &&
        same_length(ns, nsl, "set_asides", "slowdowns") == 0) {
        if (l2p_tax_fit_penalty(l2, coeff, base < 0 ? l2 : base, (size_t)ns, s, w, sl, &p) !=
            L2P_OK)
            l2p_py_raise(l2p_state_from_module(mod));
        else
            out = PyFloat_FromDouble(p);
    }
    PyMem_Free(s);
    PyMem_Free(w);
    PyMem_Free(sl);
    return out;
}

static PyObject *fn_measured_knee(PyObject *mod, PyObject *args)
{
    double threshold, lo, hi, *w = NULL, *sl = NULL;
    PyObject *wo, *slo, *out = NULL;
    Py_ssize_t nw = 0, nsl = 0;
    if (!PyArg_ParseTuple(args, "OOd:tax_measured_knee", &wo, &slo, &threshold)) return NULL;
    if ((w = doubles(wo, "ws", &nw)) && (sl = doubles(slo, "slowdowns", &nsl)) &&
        same_length(nw, nsl, "ws", "slowdowns") == 0) {
        if (l2p_tax_measured_knee((size_t)nw, w, sl, threshold, &lo, &hi) != L2P_OK)
            l2p_py_raise(l2p_state_from_module(mod));
        else
            out = Py_BuildValue("(dd)", lo, hi);
    }
    PyMem_Free(w);
    PyMem_Free(sl);
    return out;
}

static PyObject *fn_rows(PyObject *mod, PyObject *noargs)
{
    size_t nk, ns;
    const l2p_tax_knee_row *k = l2p_tax_knee_rows(&nk);
    const l2p_tax_slowdown_row *s = l2p_tax_slowdown_rows(&ns);
    PyObject *knees = PyList_New(0), *slows = PyList_New(0);
    (void)mod;
    (void)noargs;
    for (size_t i = 0; knees && i < nk; i++) {
        PyObject *r = Py_BuildValue("{s:s,s:(ii),s:d,s:d,s:d,s:d,s:O,s:s}", "chip", k[i].chip,
                                    "compute_capability", k[i].cc_major, k[i].cc_minor, "l2_mib",
                                    k[i].l2_mib, "set_aside_mib", k[i].set_aside_mib,
                                    "knee_lo_mib", k[i].knee_lo_mib, "knee_hi_mib",
                                    k[i].knee_hi_mib, "fit", k[i].fit ? Py_True : Py_False,
                                    "source", k[i].source);
        if (!r || PyList_Append(knees, r) < 0) Py_CLEAR(knees);
        Py_XDECREF(r);
    }
    for (size_t i = 0; slows && i < ns; i++) {
        PyObject *r = Py_BuildValue("{s:s,s:(ii),s:d,s:d,s:d,s:s,s:d,s:s}", "chip", s[i].chip,
                                    "compute_capability", s[i].cc_major, s[i].cc_minor, "l2_mib",
                                    s[i].l2_mib, "set_aside_mib", s[i].set_aside_mib, "ws_mib",
                                    s[i].ws_mib, "kind", l2p_tax_kind_name(s[i].kind),
                                    "slowdown", s[i].slowdown, "source", s[i].source);
        if (!r || PyList_Append(slows, r) < 0) Py_CLEAR(slows);
        Py_XDECREF(r);
    }
    size_t nb;
    const l2p_tax_base_row *b = l2p_tax_base_rows(&nb);
    PyObject *bases = knees && slows ? PyList_New(0) : NULL;
    for (size_t i = 0; bases && i < nb; i++) {
        PyObject *r = Py_BuildValue("{s:s,s:(ii),s:d,s:d,s:d,s:s}", "chip", b[i].chip,
                                    "compute_capability", b[i].cc_major, b[i].cc_minor, "l2_mib",
                                    b[i].l2_mib, "knee_lo_mib", b[i].knee_lo_mib, "knee_hi_mib",
                                    b[i].knee_hi_mib, "source", b[i].source);
        if (!r || PyList_Append(bases, r) < 0) Py_CLEAR(bases);
        Py_XDECREF(r);
    }
    if (bases) return Py_BuildValue("(NNN)", knees, slows, bases);
    Py_XDECREF(knees);
    Py_XDECREF(slows);
    return NULL;
}

PyMethodDef l2p_tax_functions[] = {
    {"tax_predict", (PyCFunction)(void (*)(void))fn_predict, METH_VARARGS | METH_KEYWORDS,
     "tax_predict(compute_capability, l2_cache_size, set_aside, *, granule=0, "
     "persisting_max=0)\n--\n\nThe set-aside tax model of a chip at one set-aside (bytes): "
     "knee, constants and their basis."},
    {"tax_slowdown", (PyCFunction)(void (*)(void))fn_slowdown, METH_VARARGS | METH_KEYWORDS,
     "tax_slowdown(compute_capability, l2_cache_size, set_aside, granule, persisting_max, "
     "kind, ws)\n--\n\nThe model's slowdown of `kind` over a working set of ws bytes."},
    {"tax_fit_capacity", fn_fit_capacity, METH_VARARGS,
     "tax_fit_capacity(l2, set_asides, knees, /)\n--\n\nLeast-squares c of knee = l2 - c * s."},
    {"tax_fit_penalty", (PyCFunction)(void (*)(void))fn_fit_penalty,
     METH_VARARGS | METH_KEYWORDS,
     "tax_fit_penalty(l2, coeff, set_asides, ws, slowdowns, *, base=-1.0)\n--\n\n"
     "Least-squares miss penalty P from measured slowdowns; base: C(0) (default: l2)."},
    {"tax_measured_knee", fn_measured_knee, METH_VARARGS,
     "tax_measured_knee(ws, slowdowns, threshold, /)\n--\n\n(lo, hi]: where a measured curve "
     "first reaches threshold (hi 0: never)."},
    {"tax_rows", fn_rows, METH_NOARGS,
     "tax_rows($module, /)\n--\n\n(knee rows, slowdown rows, limit-0 rows): the "
     "measurements the model is fitted to."},
    {NULL, NULL, 0, NULL}};
