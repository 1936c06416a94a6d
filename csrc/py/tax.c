/* The set-aside tax model (l2p_tax): predictions, the fits and the measurement rows. */
#include "l2p_py.h"
#include "params.h"

#include <float.h>
#include <stdio.h>

#include "l2p_tax.h"
#include "l2p_timing.h"

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

/* The chip's arguments, shared by tax_predict and tax_slowdowns (same names, same rows; the
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
    return Py_BuildValue("{s:(ii),s:n,s:n,s:n,s:n,s:d,s:d,s:d,s:n,s:O,s:N,s:n,s:n,s:s,s:O,s:N,"
                         "s:N}",
                         "compute_capability", c->cc_major, c->cc_minor, "persisting_max",
                         (Py_ssize_t)c->persisting_max, "l2_bytes", (Py_ssize_t)m->l2_bytes, "set_aside",
                         (Py_ssize_t)m->set_aside, "granule", (Py_ssize_t)m->granule,
                         "capacity_coeff", m->capacity_coeff, "onset_fraction",
                         m->onset_fraction, "base_fraction", m->base_fraction, "base_bytes",
                         (Py_ssize_t)m->base_bytes, "taxed", m->taxed ? Py_True : Py_False,
                         "penalty", pen, "knee_bytes", (Py_ssize_t)m->knee_bytes,
                         "probe_working_set", (Py_ssize_t)m->probe_bytes, "basis", m->basis,
                         "exact", m->exact ? Py_True : Py_False, "companion",
                         Py_BuildValue("{s:d,s:d,s:d,s:d,s:d,s:n,s:z}", "ratio",
                                       m->companion, "footprint", m->companion_footprint,
                                       "cap", m->companion_cap, "coeff", m->companion_coeff,
                                       "stream_cost", m->stream_cost, "bytes",
                                       (Py_ssize_t)m->companion_bytes, "basis",
                                       m->companion_basis),
                         "shape",
                         Py_BuildValue("{s:s,s:z,s:d,s:d,s:d}", "name",
                                       l2p_tax_shape_name(m->shape), "basis", m->shape_basis,
                                       "coeff", m->shape_coeff, "onset", m->shape_onset,
                                       "penalty", m->shape_penalty));
}

/* A number of a row's mapping: companion_rows[table][i][key]. */
static int row_number(PyObject *row, const char *table, Py_ssize_t i, const char *key,
                      double *out)
{
    PyObject *v = PyMapping_Check(row) ? PyMapping_GetItemString(row, key) : NULL;
    if (!v) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "companion_rows: %s[%zd] lacks '%s' (a mapping with the "
                     "keys of tax_companion_rows()'s rows)", table, i, key);
        return -1;
    }
    *out = PyFloat_AsDouble(v);
    Py_DECREF(v);
    if (*out == -1.0 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "companion_rows: %s[%zd][%s] is not a number", table, i,
                     key);
        return -1;
    }
    return 0;
}

/* A row's optional "shape" (a name; absent: random). */
static int row_shape(PyObject *row, const char *table, Py_ssize_t i, int *shape)
{
    PyObject *v = PyMapping_GetItemString(row, "shape");
    *shape = L2P_TAX_SHAPE_RANDOM;
    if (!v) {
        PyErr_Clear();
        return 0;
    }
    const char *name = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    int rc = name && l2p_tax_shape_parse(name, shape) == L2P_OK ? 0 : -1;
    if (rc < 0 && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "companion_rows: %s[%zd][shape] is %R, not one of "
                     "random, atomic, rows, sweep", table, i, v);
    if (rc < 0) l2p_clear_error();
    Py_DECREF(v);
    return rc;
}

/* The chip part of a row: name (borrowed from the row while the call holds it), cc, L2. */
static int row_chip(PyObject *row, const char *table, Py_ssize_t i, const char **name,
                    int *major, int *minor, double *l2_mib)
{
    PyObject *chip = PyMapping_GetItemString(row, "chip");
    PyObject *cc = chip ? PyMapping_GetItemString(row, "compute_capability") : NULL;
    int rc = -1;
    if (!cc) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "companion_rows: %s[%zd] lacks 'chip' or "
                     "'compute_capability'", table, i);
    } else if (!PyUnicode_Check(chip)) {
        PyErr_Format(PyExc_TypeError, "companion_rows: %s[%zd][chip] is not a str", table, i);
    } else if ((*name = PyUnicode_AsUTF8(chip)) && cc_arg(cc, major, minor) == 0) {
        rc = row_number(row, table, i, "l2_mib", l2_mib);
    }
    /* the row holds the name's str: a borrowed pointer stays valid while the row lives */
    Py_XDECREF(chip);
    Py_XDECREF(cc);
    return rc;
}

/* obj[table] as a fast sequence; *n its length (NULL with the error naming the table). */
static PyObject *rows_seq(PyObject *obj, const char *table, Py_ssize_t *n)
{
    PyObject *list = PyMapping_GetItemString(obj, table);
    PyObject *seq = list ? PySequence_Fast(list, "companion_rows") : NULL;
    Py_XDECREF(list);
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "companion_rows: expected a mapping with lists 'knees' "
                     "and 'streams' (as tax_companion_rows() gives), lacking %s", table);
        return NULL;
    }
    *n = PySequence_Fast_GET_SIZE(seq);
    return seq;
}

/* obj["slowdowns"] (optional: absent, no rows) as shape slowdown rows; NULL on an error. */
static l2p_tax_shape_slowdown_row *slowdown_rows_arg(PyObject *obj, Py_ssize_t *n)
{
    PyObject *seq = NULL;
    *n = 0;
    if (PyMapping_HasKeyString(obj, "slowdowns") && !(seq = rows_seq(obj, "slowdowns", n)))
        return NULL;
    l2p_tax_shape_slowdown_row *w = PyMem_Calloc((size_t)*n + 1, sizeof *w);
    int ok = w != NULL;
    if (!ok) PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok && i < *n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        double fit = 0;
        l2p_tax_shape_slowdown_row *x = &w[i];
        ok = row_chip(r, "slowdowns", i, &x->chip, &x->cc_major, &x->cc_minor, &x->l2_mib) == 0 &&
             row_shape(r, "slowdowns", i, &x->shape) == 0 &&
             row_number(r, "slowdowns", i, "set_aside_mib", &x->set_aside_mib) == 0 &&
             row_number(r, "slowdowns", i, "companion", &x->companion) == 0 &&
             row_number(r, "slowdowns", i, "ws_mib", &x->ws_mib) == 0 &&
             row_number(r, "slowdowns", i, "slowdown", &x->slowdown) == 0 &&
             row_number(r, "slowdowns", i, "fit", &fit) == 0;
        x->fit = fit != 0;
        x->source = "companion_rows";
    }
    Py_XDECREF(seq);
    if (!ok) {
        PyMem_Free(w);
        return NULL;
    }
    return w;
}

/* companion_rows: None (the core's own rows) or {"knees": [...], "streams": [...],
 * optionally "slowdowns": [...]} with the keys tax_companion_rows() gives (a row without
 * "shape" is random writes'); *out's arrays are PyMem (free with rows_free). */
static int companion_rows_arg(PyObject *obj, l2p_tax_companion_data *out, PyObject **hold)
{
    Py_ssize_t nk = 0, ns = 0, nd = 0;
    *out = (l2p_tax_companion_data){0};
    *hold = NULL;
    if (obj == Py_None) return 0;
    if (!PyMapping_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "companion_rows: expected a mapping with lists 'knees' "
                     "and 'streams' (as tax_companion_rows() gives) or None, got %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *knees = rows_seq(obj, "knees", &nk);
    PyObject *streams = knees ? rows_seq(obj, "streams", &ns) : NULL;
    l2p_tax_companion_row *k = streams ? PyMem_Calloc((size_t)nk + 1, sizeof *k) : NULL;
    l2p_tax_stream_row *s = k ? PyMem_Calloc((size_t)ns + 1, sizeof *s) : NULL;
    int ok = s != NULL;
    if (streams && !ok) PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok && i < nk; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(knees, i);
        double fit = 0;
        l2p_tax_companion_row *w = &k[i];
        ok = row_chip(r, "knees", i, &w->chip, &w->cc_major, &w->cc_minor, &w->l2_mib) == 0 &&
             row_number(r, "knees", i, "set_aside_mib", &w->set_aside_mib) == 0 &&
             row_number(r, "knees", i, "companion", &w->companion) == 0 &&
             row_number(r, "knees", i, "knee_lo_mib", &w->knee_lo_mib) == 0 &&
             row_number(r, "knees", i, "knee_hi_mib", &w->knee_hi_mib) == 0 &&
             row_number(r, "knees", i, "alone_lo_mib", &w->alone_lo_mib) == 0 &&
             row_number(r, "knees", i, "alone_hi_mib", &w->alone_hi_mib) == 0 &&
             row_number(r, "knees", i, "fit", &fit) == 0 &&
             row_shape(r, "knees", i, &w->shape) == 0;
        w->fit = fit != 0;
        w->source = "companion_rows";
    }
    for (Py_ssize_t i = 0; ok && i < ns; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(streams, i);
        l2p_tax_stream_row *w = &s[i];
        ok = row_chip(r, "streams", i, &w->chip, &w->cc_major, &w->cc_minor, &w->l2_mib) == 0 &&
             row_number(r, "streams", i, "companion", &w->companion) == 0 &&
             row_number(r, "streams", i, "time_ratio", &w->time_ratio) == 0 &&
             row_shape(r, "streams", i, &w->shape) == 0;
        w->source = "companion_rows";
    }
    Py_XDECREF(streams);
    Py_XDECREF(knees);
    l2p_tax_shape_slowdown_row *d = ok ? slowdown_rows_arg(obj, &nd) : NULL;
    if (!d) {
        PyMem_Free(k);
        PyMem_Free(s);
        return -1;
    }
    *out = (l2p_tax_companion_data){k, (size_t)nk, s, (size_t)ns, d, (size_t)nd};
    *hold = obj; /* the rows' strings are borrowed from it */
    return 0;
}

static void rows_free(l2p_tax_companion_data *d)
{
    PyMem_Free((void *)d->knees);
    PyMem_Free((void *)d->streams);
    PyMem_Free((void *)d->slowdowns);
}

/* The model of a call's chip, set-aside and companion stream. */
static int model_of(l2p_state *st, const chip_args *a, double companion, int shape,
                    PyObject *rows_obj, l2p_tax_chip *chip, l2p_tax_model *m)
{
    long long set_aside;
    l2p_tax_companion_data rows;
    PyObject *hold;
    if (chip_arg(st, a, chip, &set_aside) < 0 || companion_rows_arg(rows_obj, &rows, &hold) < 0)
        return -1;
    l2p_status rc = l2p_tax_predict_shape(chip, set_aside, companion, shape,
                                          hold ? &rows : NULL, m);
    rows_free(&rows);
    return rc == L2P_OK ? 0 : l2p_py_raise_int(st);
}

/* companion, companion_rows: the same two keyword-only parameters of tax_predict and
 * tax_slowdowns (each struct names its fields so). */
#define COMPANION_PARAMS(S)                                                                     \
    L2P_PARAM(S, companion, L2P_P_FLOAT, .flags = L2P_P_KWONLY, .fval = 0.0,                    \
              .doc = "bytes streamed alongside per byte written, in [0, 1e6] (the core's "       \
              "range)"),                                                                        \
    L2P_PARAM(S, companion_rows, L2P_P_OBJECT, .flags = L2P_P_KWONLY,                           \
              .pytype = "dict[str, list[dict[str, object]]] | None",                            \
              .doc = "companion rows to fit the stream's constants from; None: the core's own"), \
    L2P_PARAM(S, shape, L2P_P_CHOICE, .flags = L2P_P_KWONLY, .choices = l2p_tax_shape_names,   \
              .ival = 0, .doc = "the access shape: random, atomic, rows or sweep")

typedef struct {
    chip_args chip; /* first: CHIP_PARAMS's offsets are chip_args's */
    double companion;
    PyObject *companion_rows;
    int shape;
} predict_args;

static PyObject *fn_predict(PyObject *mod, const void *args)
{
    const predict_args *a = args;
    l2p_tax_chip chip;
    l2p_tax_model m;
    if (model_of(l2p_state_from_module(mod), &a->chip, a->companion, a->shape, a->companion_rows,
                 &chip, &m) < 0)
        return NULL;
    return model_dict(&chip, &m);
}
L2P_DEFINE_FN(predict_fn, predict_args, fn_predict, "tax_predict",
              "The set-aside tax model of a chip at one set-aside: knee, constants and their "
              "basis.", "dict[str, object]", CHIP_PARAMS(chip_args, L2P_P_KWONLY),
              COMPANION_PARAMS(predict_args));


/* A sequence of numbers as a PyMem array of doubles; *n its length. */
static double *doubles(PyObject *obj, const char *name, Py_ssize_t *n)
{
    char msg[96];
    snprintf(msg, sizeof msg, "%s: expected a sequence of numbers", name);
    PyObject *seq = PySequence_Fast(obj, msg);
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

/* A required positional-only sequence of floats (the fits' inputs). */
#define FLOAT_SEQ(S, field, doc_line)                                                           \
    L2P_PARAM(S, field, L2P_P_OBJECT, .flags = L2P_P_REQUIRED | L2P_P_POSONLY,                   \
              .pytype = "Sequence[float]", .doc = doc_line)

/* The float a core fit gave, or its error raised. */
static PyObject *fit_result(PyObject *mod, l2p_status rc, double value)
{
    if (rc == L2P_OK) return PyFloat_FromDouble(value);
    l2p_py_raise(l2p_state_from_module(mod));
    return NULL;
}

/* doubles() of a sequence that must have n items, as `first` has (NULL and an exception when
 * it has not, naming both). */
static double *doubles_like(PyObject *obj, const char *name, Py_ssize_t n, const char *first)
{
    Py_ssize_t m = 0;
    double *out = doubles(obj, name, &m);
    if (out && same_length(n, m, first, name) < 0) {
        PyMem_Free(out);
        out = NULL;
    }
    return out;
}

/* tax_slowdowns: one model, a whole curve (one point: Prediction.slowdown_at). The model's
 * constants are fitted once per call (0.2 ms): asked point by point, the validation's
 * 512-point curve knees took 24 s. */
typedef struct {
    chip_args chip; /* first: CHIP_PARAMS's offsets are chip_args's */
    int kind;
    PyObject *ws_bytes;
    double companion;
    PyObject *companion_rows;
    int shape;
} slowdowns_args;

static PyObject *curve_list(const l2p_tax_model *m, int kind, const double *w, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(w[i] >= 0.0 && w[i] <= DBL_MAX)) { /* PyErr_Format has no %g */
            char msg[128];
            snprintf(msg, sizeof msg, "ws_bytes: item %zd is %g, outside [0, %g]", i, w[i],
                     DBL_MAX);
            PyErr_SetString(PyExc_ValueError, msg);
            return NULL;
        }
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *v = PyFloat_FromDouble(l2p_tax_slowdown(m, kind, w[i]));
        if (!v) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *fn_slowdowns(PyObject *mod, const void *args)
{
    const slowdowns_args *a = args;
    l2p_tax_chip chip;
    l2p_tax_model m;
    Py_ssize_t n = 0;
    double *w = doubles(a->ws_bytes, "ws_bytes", &n);
    PyObject *out = NULL;
    if (w && model_of(l2p_state_from_module(mod), &a->chip, a->companion, a->shape,
                      a->companion_rows, &chip, &m) == 0)
        out = curve_list(&m, a->kind, w, n);
    PyMem_Free(w);
    return out;
}
L2P_DEFINE_FN(slowdowns_fn, slowdowns_args, fn_slowdowns, "tax_slowdowns",
              "The model's slowdown of `kind` at each working set of ws_bytes (one fit).",
              "list[float]", CHIP_PARAMS(chip_args, L2P_P_REQUIRED),
              L2P_PARAM(slowdowns_args, kind, L2P_P_CHOICE, .flags = L2P_P_REQUIRED,
                        .choices = l2p_tax_kind_names, .doc = "the access kind"),
              L2P_PARAM(slowdowns_args, ws_bytes, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]",
                        .doc = "the working sets, bytes, each in [0, DBL_MAX]"),
              COMPANION_PARAMS(slowdowns_args));

typedef struct {
    double l2;
    PyObject *set_asides, *knees;
} fit_capacity_args;

static PyObject *fn_fit_capacity(PyObject *mod, const void *args)
{
    const fit_capacity_args *a = args;
    double c, *s = NULL, *k = NULL;
    PyObject *out = NULL;
    Py_ssize_t ns = 0;
    if ((s = doubles(a->set_asides, "set_asides", &ns)) &&
        (k = doubles_like(a->knees, "knees", ns, "set_asides"))) {
        l2p_status rc = l2p_tax_fit_capacity(a->l2, (size_t)ns, s, k, &c);
        out = fit_result(mod, rc, c);
    }
    PyMem_Free(s);
    PyMem_Free(k);
    return out;
}
L2P_DEFINE_FN(fit_capacity_fn, fit_capacity_args, fn_fit_capacity, "tax_fit_capacity",
              "Least-squares c of knee = l2 - c * s.", "float",
              L2P_PARAM(fit_capacity_args, l2, L2P_P_FLOAT, .flags = L2P_P_REQUIRED | L2P_P_POSONLY,
                        .doc = "the L2 size (any unit the other values share)"),
              FLOAT_SEQ(fit_capacity_args, set_asides, "the set-asides s"),
              FLOAT_SEQ(fit_capacity_args, knees, "the knee measured at each set-aside"));

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
              FLOAT_SEQ(knee_args, ws, "working sets, ascending"),
              FLOAT_SEQ(knee_args, slowdowns, "the slowdown at each working set"),
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

/* The built-in companion rows, as companion_rows= takes them. */
static PyObject *fn_companion_rows(PyObject *mod, const void *noargs)
{
    l2p_tax_companion_data d = l2p_tax_companion_builtin();
    PyObject *knees = PyList_New(0), *streams = PyList_New(0);
    (void)mod;
    (void)noargs;
    for (size_t i = 0; knees && i < d.n_knees; i++) {
        const l2p_tax_companion_row *k = &d.knees[i];
        PyObject *r = Py_BuildValue("{s:s,s:(ii),s:s,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:O,s:s}",
                                    "chip", k->chip, "compute_capability", k->cc_major,
                                    k->cc_minor, "shape", l2p_tax_shape_name(k->shape),
                                    "l2_mib", k->l2_mib, "set_aside_mib", k->set_aside_mib,
                                    "companion", k->companion, "knee_lo_mib", k->knee_lo_mib,
                                    "knee_hi_mib", k->knee_hi_mib, "alone_lo_mib",
                                    k->alone_lo_mib, "alone_hi_mib", k->alone_hi_mib, "fit",
                                    k->fit ? Py_True : Py_False, "source", k->source);
        if (!r || PyList_Append(knees, r) < 0) Py_CLEAR(knees);
        Py_XDECREF(r);
    }
    for (size_t i = 0; streams && i < d.n_streams; i++) {
        const l2p_tax_stream_row *t = &d.streams[i];
        PyObject *r = Py_BuildValue("{s:s,s:(ii),s:s,s:d,s:d,s:d,s:s}", "chip", t->chip,
                                    "compute_capability", t->cc_major, t->cc_minor, "shape",
                                    l2p_tax_shape_name(t->shape), "l2_mib",
                                    t->l2_mib, "companion", t->companion, "time_ratio",
                                    t->time_ratio, "source", t->source);
        if (!r || PyList_Append(streams, r) < 0) Py_CLEAR(streams);
        Py_XDECREF(r);
    }
    PyObject *slow = knees && streams ? PyList_New(0) : NULL;
    for (size_t i = 0; slow && i < d.n_slowdowns; i++) {
        const l2p_tax_shape_slowdown_row *t = &d.slowdowns[i];
        PyObject *r = Py_BuildValue("{s:s,s:(ii),s:s,s:d,s:d,s:d,s:d,s:d,s:O,s:s}", "chip",
                                    t->chip, "compute_capability", t->cc_major, t->cc_minor,
                                    "shape", l2p_tax_shape_name(t->shape), "l2_mib", t->l2_mib,
                                    "set_aside_mib", t->set_aside_mib, "companion",
                                    t->companion, "ws_mib", t->ws_mib, "slowdown", t->slowdown,
                                    "fit", t->fit ? Py_True : Py_False, "source", t->source);
        if (!r || PyList_Append(slow, r) < 0) Py_CLEAR(slow);
        Py_XDECREF(r);
    }
    if (slow) return Py_BuildValue("{s:N,s:N,s:N}", "knees", knees, "streams", streams,
                                   "slowdowns", slow);
    Py_XDECREF(knees);
    Py_XDECREF(streams);
    return NULL;
}

/* The access shapes and how the probe measures each (l2p_tax_shape_probe_of). */
static PyObject *fn_shapes(PyObject *mod, const void *noargs)
{
    PyObject *out = PyList_New(0);
    (void)mod;
    (void)noargs;
    for (int i = 0; out && i < L2P_TAX_SHAPE_COUNT; i++) {
        const l2p_tax_shape_probe *p = l2p_tax_shape_probe_of(i);
        PyObject *r = Py_BuildValue("{s:s,s:s,s:s,s:I,s:I,s:O,s:s}", "name", p->name, "kind",
                                    l2p_tax_kind_name(p->kind), "pattern",
                                    p->random ? "random" : "streaming", "row_words",
                                    p->row_words, "arrays", p->arrays, "companion_reused",
                                    p->companion_reused ? Py_True : Py_False, "what", p->what);
        if (!r || PyList_Append(out, r) < 0) Py_CLEAR(out);
        Py_XDECREF(r);
    }
    return out;
}

typedef struct {
    PyObject *capacities, *companions, *knees;
    double footprint;
} fit_companion_args;

static PyObject *fn_fit_companion(PyObject *mod, const void *args)
{
    const fit_companion_args *a = args;
    double *c = NULL, *k = NULL, *y = NULL, cap;
    PyObject *out = NULL;
    Py_ssize_t nc = 0;
    if ((c = doubles(a->capacities, "capacities", &nc)) &&
        (k = doubles_like(a->companions, "companions", nc, "capacities")) &&
        (y = doubles_like(a->knees, "knees", nc, "capacities"))) {
        l2p_status rc = l2p_tax_fit_companion((size_t)nc, c, k, y, a->footprint, &cap);
        out = fit_result(mod, rc, cap);
    }
    PyMem_Free(c);
    PyMem_Free(k);
    PyMem_Free(y);
    return out;
}

L2P_DEFINE_FN(fit_companion_fn, fit_companion_args, fn_fit_companion, "tax_fit_companion",
              "F_cap of C_k = max(C / (1 + beta k), C - F_cap) given beta, least squares "
              "(l2p_tax_fit_companion): a fraction of the L2, 1 when no cap fits better.",
              "float",
              FLOAT_SEQ(fit_companion_args, capacities,
                        "each row's knee without the stream, a fraction of the L2 (> 0)"),
              FLOAT_SEQ(fit_companion_args, companions,
                        "k of each row: bytes streamed per byte written (> 0)"),
              FLOAT_SEQ(fit_companion_args, knees,
                        "each row's knee with the stream, a fraction of the L2"),
              L2P_PARAM(fit_companion_args, footprint, L2P_P_FLOAT,
                        .flags = L2P_P_REQUIRED | L2P_P_KWONLY, .flo = 0.0, .fhi = 1e6,
                        .doc = "beta: the knee without a cap is C / (1 + beta k)"));

typedef struct {
    PyObject *companions, *values;
} fit_stream_args;

static PyObject *fn_fit_stream_cost(PyObject *mod, const void *args)
{
    const fit_stream_args *a = args;
    double *k = NULL, *y = NULL, cost;
    PyObject *out = NULL;
    Py_ssize_t nk = 0;
    if ((k = doubles(a->companions, "companions", &nk)) &&
        (y = doubles_like(a->values, "values", nk, "companions"))) {
        l2p_status rc = l2p_tax_fit_stream_cost((size_t)nk, k, y, &cost);
        out = fit_result(mod, rc, cost);
    }
    PyMem_Free(k);
    PyMem_Free(y);
    return out;
}

L2P_DEFINE_FN(fit_stream_cost_fn, fit_stream_args, fn_fit_stream_cost,
              "tax_fit_stream_cost", "a of time_ratio = 1 + a k, least squares through the "
              "origin (l2p_tax_fit_stream_cost).", "float",
              FLOAT_SEQ(fit_stream_args, companions,
                        "k of each point: bytes streamed per byte written (> 0)"),
              FLOAT_SEQ(fit_stream_args, values,
                        "time with the stream over time without it, at limit 0"));

/* ---- the measurement loop (l2persist.tax.measure) ---- */

typedef struct {
    PyObject *evaluate;
    int python_error; /* evaluate raised: the exception is pending */
} measure_bridge;

static l2p_status call_measure_eval(void *ctx, int at, size_t n, double *samples)
{
    measure_bridge *b = ctx;
    Py_ssize_t got = 0;
    PyObject *res = PyObject_CallFunction(b->evaluate, "On", at ? Py_True : Py_False,
                                          (Py_ssize_t)n);
    double *v = res ? doubles(res, "evaluate", &got) : NULL;
    Py_XDECREF(res);
    if (v && got != (Py_ssize_t)n) {
        PyErr_Format(PyExc_ValueError, "evaluate: returned %zd samples, %zu were asked for",
                     got, n);
        PyMem_Free(v);
        v = NULL;
    }
    if (!v) {
        b->python_error = 1;
        return L2P_ERR_CALLBACK;
    }
    memcpy(samples, v, n * sizeof *v);
    PyMem_Free(v);
    return L2P_OK;
}

static PyObject *samples_list(const double *v, size_t n)
{
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        PyObject *f = PyFloat_FromDouble(v[i]);
        if (!f) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, f);
    }
    return out;
}

typedef struct {
    PyObject *evaluate;
    long long repeat, min_rounds, max_rounds;
    double confidence, tolerance;
    PyObject *seed;
} measure_args;

static PyObject *fn_measure(PyObject *mod, const void *args)
{
    const measure_args *a = args;
    l2p_state *st = l2p_state_from_module(mod);
    l2p_tax_measure_options o;
    l2p_tax_measure_result r;
    measure_bridge b = {a->evaluate, 0};
    l2p_tax_measure_options_default(&o);
    o.repeat = (size_t)a->repeat;
    o.min_rounds = (size_t)a->min_rounds;
    o.max_rounds = (size_t)a->max_rounds;
    o.confidence = a->confidence;
    o.tolerance = a->tolerance;
    if (a->seed != Py_None) {
        o.seed = PyLong_AsUnsignedLongLong(a->seed);
        if (PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "seed: %R is not an int in [0, 2^64 - 1]", a->seed);
            return NULL;
        }
    }
    if (a->evaluate == Py_None) { /* the arguments' check alone */
        if (l2p_tax_measure_check(&o) != L2P_OK) return l2p_py_raise(st);
        Py_RETURN_NONE;
    }
    l2p_status rc = l2p_tax_measure(&o, call_measure_eval, &b, &r);
    if (b.python_error) return NULL;
    if (rc != L2P_OK) return l2p_py_raise(st);
    const l2p_tax_interval *iv = &r.interval;
    PyObject *out = Py_BuildValue("{s:d,s:(dd),s:d,s:d,s:O,s:n,s:N,s:N}", "slowdown",
                                  iv->slowdown, "interval", iv->low, iv->high, "base_ms",
                                  iv->base_ms, "at_ms", iv->at_ms, "converged",
                                  iv->converged ? Py_True : Py_False, "rounds",
                                  (Py_ssize_t)r.rounds, "base_samples",
                                  samples_list(r.base, r.n), "at_samples",
                                  samples_list(r.at, r.n));
    l2p_tax_measure_result_free(&r);
    return out;
}
L2P_DEFINE_FN(measure_fn, measure_args, fn_measure, "tax_measure",
              "The core's measurement loop (l2p_tax_measure): evaluate(at, n) installs limit 0 "
              "(at False) or the set-aside (at True) and returns n samples (ms); rounds until "
              "the slowdown's interval is within +-tolerance. evaluate None: only check the "
              "arguments.", "dict[str, object] | None",
              L2P_PARAM(measure_args, evaluate, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Callable[[bool, int], Sequence[float]] | None",
                        .doc = "runs the work at one limit; None: check the arguments only"),
              /* the ranges are the core's (time_calls' count, L2P_TAX_ROUNDS_MAX; min <= max: the
               * core) */
              L2P_PARAM(measure_args, repeat, L2P_P_INT, .flags = L2P_P_KWONLY, .ival = 5,
                        .lo = 1, .hi = L2P_TIME_MAX_COUNT, .what = "samples",
                        .doc = "samples per side per round"),
              L2P_PARAM(measure_args, min_rounds, L2P_P_INT, .flags = L2P_P_KWONLY, .ival = 3,
                        .lo = 2, .hi = L2P_TAX_ROUNDS_MAX, .what = "rounds",
                        .doc = "rounds before the interval may stop it (at most max_rounds)"),
              L2P_PARAM(measure_args, max_rounds, L2P_P_INT, .flags = L2P_P_KWONLY, .ival = 20,
                        .lo = 2, .hi = L2P_TAX_ROUNDS_MAX, .what = "rounds",
                        .doc = "the cap"),
              L2P_PARAM(measure_args, confidence, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = 0.95, .doc = "of the interval, in (0.5, 1)"),
              L2P_PARAM(measure_args, tolerance, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = 0.02, .doc = "the interval's half width relative to the "
                        "slowdown, in (0, 1)"),
              L2P_PARAM(measure_args, seed, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "int | None", .doc = "the bootstrap's seed; None: the core's"));

#define TAX_ROWS "list[dict[str, object]]"
L2P_DEFINE_FN(rows_fn, l2p_no_args, fn_rows, "tax_rows", "(knee rows, slowdown rows, limit-0 "
              "rows): the measurements the model is fitted to.",
              "tuple[" TAX_ROWS ", " TAX_ROWS ", " TAX_ROWS "]", L2P_NO_PARAMS);

L2P_DEFINE_FN(companion_rows_fn, l2p_no_args, fn_companion_rows, "tax_companion_rows",
              "The companion-stream rows the model fits F_cap, its capacity line and a from "
              "(csrc/core/l2p_tax_companion_rows.c).", "dict[str, " TAX_ROWS "]", L2P_NO_PARAMS);

L2P_DEFINE_FN(shapes_fn, l2p_no_args, fn_shapes, "tax_shapes",
              "The model's access shapes, in order, each with how the probe measures it (kind, "
              "pattern, row_words, arrays, whether its companion is re-read each pass) and what "
              "work has it.", TAX_ROWS, L2P_NO_PARAMS);

const l2p_fn *const l2p_tax_fns[] = {&shapes_fn,          &predict_fn,       &slowdowns_fn,
                                     &fit_capacity_fn,    &fit_penalty_fn,   &knee_fn,
                                     &rows_fn,            &companion_rows_fn, &fit_companion_fn,
                                     &fit_stream_cost_fn, &measure_fn,       NULL};
