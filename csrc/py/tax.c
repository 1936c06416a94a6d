/* The set-aside tax model (l2p_tax): predictions, the fits and the measurement rows. */
#include "l2p_py.h"
#include "params.h"

#include <float.h>

#include "l2p_tax.h"

/* compute_capability: (major, minor), a tuple or list of two ints (a mapping read from JSON
 * gives a list). */
static int cc_arg(PyObject *cc, int *major, int *minor)
{
    long long v[2];
    if (!PyTuple_Check(cc) && !PyList_Check(cc)) {
        PyErr_Format(PyExc_TypeError, "compute_capability: expected (major, minor), two ints, "
                     "got %R", cc);
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(cc) != 2) {
        PyErr_Format(PyExc_ValueError, "compute_capability: expected (major, minor), two ints, "
                     "got %R", cc);
        return -1;
    }
    for (int i = 0; i < 2; i++)
        if (l2p_py_ranged_int(PySequence_Fast_GET_ITEM(cc, i), "compute_capability",
                              i ? "minor" : "major", 0, INT_MAX, &v[i]) < 0)
            return -1;
    *major = (int)v[0];
    *minor = (int)v[1];
    return 0;
}

/* The chip's arguments, shared by tax_predict and tax_slowdown (same names, same rows; the
 * names are DeviceProperties' keys, so a mapping's bad value is named by its key). */
typedef struct {
    PyObject *compute_capability;
    long long l2_cache_size;
    PyObject *set_aside;
    long long granule, persisting_l2_cache_max_size;
} chip_args;

#define CHIP_PARAMS(S, tail_flags)                                                              \
    L2P_PARAM(S, compute_capability, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,                     \
              .pytype = "tuple[int, int]", .doc = "the chip's (major, minor)"),                  \
    L2P_PARAM(S, l2_cache_size, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1, .hi = LLONG_MAX,   \
              .what = "bytes", .doc = "the L2 size"),                                           \
    /* the range is the core's (l2p_tax_check_set_aside): [0, persisting max] */                \
    L2P_PARAM(S, set_aside, L2P_P_OBJECT, .flags = L2P_P_REQUIRED, .pytype = "int",             \
              .doc = "the persisting-L2 set-aside, bytes"),                                     \
    L2P_PARAM(S, granule, L2P_P_INT, .flags = (tail_flags), .lo = 0, .hi = LLONG_MAX,           \
              .what = "bytes", .doc = "the driver's set-aside step; 0: the model's L2 / 16"),    \
    L2P_PARAM(S, persisting_l2_cache_max_size, L2P_P_INT, .lo = 0, .hi = LLONG_MAX,             \
              .what = "bytes", .flags = (tail_flags),                                           \
              .doc = "the largest set-aside; 0: unknown (the L2 size bounds set_aside)")

/* The chip and the set-aside; the set-aside's range is the core's, also for an int that does
 * not fit a long long (the core's message names it as given). */
static int chip_arg(l2p_state *st, const chip_args *a, l2p_tax_chip *out, long long *set_aside)
{
    int major, minor, overflow = 0;
    if (cc_arg(a->compute_capability, &major, &minor) < 0) return -1;
    *out = (l2p_tax_chip){major, minor, (size_t)a->l2_cache_size, (size_t)a->granule,
                          (size_t)a->persisting_l2_cache_max_size};
    if (PyBool_Check(a->set_aside) || !PyIndex_Check(a->set_aside)) {
        PyErr_Format(PyExc_TypeError, "set_aside: expected an int (bytes), got %s",
                     Py_TYPE(a->set_aside)->tp_name);
        return -1;
    }
    PyObject *v = PyNumber_Index(a->set_aside);
    if (!v) return -1;
    *set_aside = PyLong_AsLongLongAndOverflow(v, &overflow);
    PyObject *text = overflow ? PyObject_Str(v) : NULL;
    Py_DECREF(v);
    if (!overflow) return *set_aside == -1 && PyErr_Occurred() ? -1 : 0;
    const char *given = text ? PyUnicode_AsUTF8(text) : NULL;
    if (given) l2p_tax_check_set_aside(out, overflow > 0 ? LLONG_MAX : LLONG_MIN, given);
    Py_XDECREF(text);
    return given ? l2p_py_raise_int(st) : -1;
}

static PyObject *model_dict(const l2p_tax_chip *c, const l2p_tax_model *m)
{
    PyObject *pen = PyDict_New();
    for (int k = 0; pen && k < L2P_TAX_KIND_COUNT; k++) {
        PyObject *v = PyFloat_FromDouble(m->penalty[k]);
        if (!v || PyDict_SetItemString(pen, l2p_tax_kind_name(k), v) < 0) Py_CLEAR(pen);
        Py_XDECREF(v);
    }
    if (!pen) return NULL;
    return Py_BuildValue("{s:(ii),s:n,s:n,s:n,s:n,s:d,s:d,s:d,s:n,s:O,s:N,s:n,s:n,s:s,s:O}",
                         "compute_capability", c->cc_major, c->cc_minor, "persisting_max",
                         (Py_ssize_t)c->persisting_max, "l2_bytes", (Py_ssize_t)m->l2_bytes, "set_aside",
                         (Py_ssize_t)m->set_aside, "granule", (Py_ssize_t)m->granule,
                         "capacity_coeff", m->capacity_coeff, "onset_fraction",
                         m->onset_fraction, "base_fraction", m->base_fraction, "base_bytes",
                         (Py_ssize_t)m->base_bytes, "taxed", m->taxed ? Py_True : Py_False,
                         "penalty", pen, "knee_bytes", (Py_ssize_t)m->knee_bytes,
                         "probe_working_set", (Py_ssize_t)m->probe_bytes, "basis", m->basis,
                         "exact", m->exact ? Py_True : Py_False);
}

static PyObject *fn_predict(PyObject *mod, const void *args)
{
    const chip_args *a = args;
    l2p_tax_chip chip;
    l2p_tax_model m;
    long long set_aside;
    l2p_state *st = l2p_state_from_module(mod);
    if (chip_arg(st, a, &chip, &set_aside) < 0) return NULL;
    if (l2p_tax_predict(&chip, set_aside, &m) != L2P_OK) return l2p_py_raise(st);
    return model_dict(&chip, &m);
}
L2P_DEFINE_FN(predict_fn, chip_args, fn_predict, "tax_predict",
              "The set-aside tax model of a chip at one set-aside: knee, constants and their "
              "basis.", "dict[str, object]", CHIP_PARAMS(chip_args, L2P_P_KWONLY));

typedef struct {
    chip_args chip; /* first: CHIP_PARAMS's offsets are chip_args's */
    int kind;
    double ws_bytes;
} slowdown_args;

static PyObject *fn_slowdown(PyObject *mod, const void *args)
{
    const slowdown_args *a = args;
    l2p_tax_chip chip;
    l2p_tax_model m;
    long long set_aside;
    l2p_state *st = l2p_state_from_module(mod);
    if (chip_arg(st, &a->chip, &chip, &set_aside) < 0) return NULL;
    if (l2p_tax_predict(&chip, set_aside, &m) != L2P_OK) return l2p_py_raise(st);
    return PyFloat_FromDouble(l2p_tax_slowdown(&m, a->kind, a->ws_bytes));
}
L2P_DEFINE_FN(slowdown_fn, slowdown_args, fn_slowdown, "tax_slowdown",
              "The model's slowdown of `kind` over a working set of ws_bytes.", "float",
              CHIP_PARAMS(chip_args, L2P_P_REQUIRED),
              L2P_PARAM(slowdown_args, kind, L2P_P_CHOICE, .flags = L2P_P_REQUIRED,
                        .choices = l2p_tax_kind_names, .doc = "the access kind"),
              L2P_PARAM(slowdown_args, ws_bytes, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .flo = 0.0, .fhi = DBL_MAX, .doc = "the working set, bytes"));

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

typedef struct {
    double l2;
    PyObject *set_asides, *knees;
} fit_capacity_args;

static PyObject *fn_fit_capacity(PyObject *mod, const void *args)
{
    const fit_capacity_args *a = args;
    double c, *s = NULL, *k = NULL;
    PyObject *out = NULL;
    Py_ssize_t ns = 0, nk = 0;
    if ((s = doubles(a->set_asides, "set_asides", &ns)) && (k = doubles(a->knees, "knees", &nk)) &&
        same_length(ns, nk, "set_asides", "knees") == 0) {
        if (l2p_tax_fit_capacity(a->l2, (size_t)ns, s, k, &c) != L2P_OK)
            l2p_py_raise(l2p_state_from_module(mod));
        else
            out = PyFloat_FromDouble(c);
    }
    PyMem_Free(s);
    PyMem_Free(k);
    return out;
}
L2P_DEFINE_FN(fit_capacity_fn, fit_capacity_args, fn_fit_capacity, "tax_fit_capacity",
              "Least-squares c of knee = l2 - c * s.", "float",
              L2P_PARAM(fit_capacity_args, l2, L2P_P_FLOAT, .flags = L2P_P_REQUIRED | L2P_P_POSONLY,
                        .doc = "the L2 size (any unit the other values share)"),
              L2P_PARAM(fit_capacity_args, set_asides, L2P_P_OBJECT,
                        .flags = L2P_P_REQUIRED | L2P_P_POSONLY, .pytype = "Sequence[float]",
                        .doc = "the set-asides s"),
              L2P_PARAM(fit_capacity_args, knees, L2P_P_OBJECT,
                        .flags = L2P_P_REQUIRED | L2P_P_POSONLY, .pytype = "Sequence[float]",
                        .doc = "the knee measured at each set-aside"));

typedef struct {
    double l2, coeff;
    PyObject *set_asides, *ws, *slowdowns;
    double base;
} fit_penalty_args;

static PyObject *fn_fit_penalty(PyObject *mod, const void *args)
{
    const fit_penalty_args *a = args;
    double p, *s = NULL, *w = NULL, *sl = NULL;
    PyObject *out = NULL;
    Py_ssize_t ns = 0, nw = 0, nsl = 0;
    if ((s = doubles(a->set_asides, "set_asides", &ns)) && (w = doubles(a->ws, "ws", &nw)) &&
        (sl = doubles(a->slowdowns, "slowdowns", &nsl)) &&
        same_length(ns, nw, "set_asides", "ws") == 0 &&
        same_length(ns, nsl, "set_asides", "slowdowns") == 0) {
        if (l2p_tax_fit_penalty(a->l2, a->coeff, a->base < 0 ? a->l2 : a->base, (size_t)ns, s, w,
                                sl, &p) != L2P_OK)
            l2p_py_raise(l2p_state_from_module(mod));
        else
            out = PyFloat_FromDouble(p);
    }
    PyMem_Free(s);
    PyMem_Free(w);
    PyMem_Free(sl);
    return out;
}
L2P_DEFINE_FN(fit_penalty_fn, fit_penalty_args, fn_fit_penalty, "tax_fit_penalty",
              "Least-squares miss penalty P from measured slowdowns.", "float",
              L2P_PARAM(fit_penalty_args, l2, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .doc = "the L2 size"),
              L2P_PARAM(fit_penalty_args, coeff, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .doc = "the capacity coefficient c"),
              L2P_PARAM(fit_penalty_args, set_asides, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "the set-aside of each point"),
              L2P_PARAM(fit_penalty_args, ws, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "the working set of each point"),
              L2P_PARAM(fit_penalty_args, slowdowns, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "the slowdown measured at each point"),
              L2P_PARAM(fit_penalty_args, base, L2P_P_FLOAT, .flags = L2P_P_KWONLY, .fval = -1.0,
                        .doc = "C(0), the written lines' capacity at limit 0; negative: l2"));

typedef struct {
    PyObject *ws, *slowdowns;
    double threshold;
} knee_args;

static PyObject *fn_measured_knee(PyObject *mod, const void *args)
{
    const knee_args *a = args;
    double lo, hi, *w = NULL, *sl = NULL;
    PyObject *out = NULL;
    Py_ssize_t nw = 0, nsl = 0;
    if ((w = doubles(a->ws, "ws", &nw)) && (sl = doubles(a->slowdowns, "slowdowns", &nsl)) &&
        same_length(nw, nsl, "ws", "slowdowns") == 0) {
        if (l2p_tax_measured_knee((size_t)nw, w, sl, a->threshold, &lo, &hi) != L2P_OK)
            l2p_py_raise(l2p_state_from_module(mod));
        else
            out = Py_BuildValue("(dd)", lo, hi);
    }
    PyMem_Free(w);
    PyMem_Free(sl);
    return out;
}
L2P_DEFINE_FN(knee_fn, knee_args, fn_measured_knee, "tax_measured_knee",
              "(lo, hi]: where a measured curve first reaches threshold (hi 0: never).",
              "tuple[float, float]",
              L2P_PARAM(knee_args, ws, L2P_P_OBJECT, .flags = L2P_P_REQUIRED | L2P_P_POSONLY,
                        .pytype = "Sequence[float]", .doc = "working sets, ascending"),
              L2P_PARAM(knee_args, slowdowns, L2P_P_OBJECT,
                        .flags = L2P_P_REQUIRED | L2P_P_POSONLY, .pytype = "Sequence[float]",
                        .doc = "the slowdown at each working set"),
              L2P_PARAM(knee_args, threshold, L2P_P_FLOAT,
                        .flags = L2P_P_REQUIRED | L2P_P_POSONLY,
                        .doc = "the slowdown that marks the knee"));

static PyObject *fn_rows(PyObject *mod, const void *noargs)
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

#define TAX_ROWS "list[dict[str, object]]"
L2P_DEFINE_FN(rows_fn, l2p_no_args, fn_rows, "tax_rows", "(knee rows, slowdown rows, limit-0 "
              "rows): the measurements the model is fitted to.",
              "tuple[" TAX_ROWS ", " TAX_ROWS ", " TAX_ROWS "]", L2P_NO_PARAMS);

const l2p_fn *const l2p_tax_fns[] = {&predict_fn, &slowdown_fn, &fit_capacity_fn,
                                     &fit_penalty_fn, &knee_fn, &rows_fn, NULL};
