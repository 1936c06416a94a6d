/* The one argument parser of the extension's functions and methods (params.h), and the text
 * signatures, docstrings and stub types made from the same rows. */
#include "params.h"
#include "binder.h" /* l2p_py_real_arg */

#include "l2p_flavour.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

static int n_params(const l2p_fn *f)
{
    int n = 0;
    while (f->params[n].name) n++;
    return n;
}

static int is_required(const l2p_param *p) { return (p->flags & L2P_P_REQUIRED) != 0; }

/* Parameters that may be passed by position: those before the first keyword-only one. */
static int n_positional(const l2p_fn *f, int n)
{
    int i = 0;
    while (i < n && !(f->params[i].flags & L2P_P_KWONLY)) i++;
    return i;
}

/* A parameter's kind as the parser treats it: positional-only (POSONLY rows are a prefix,
 * check_row), keyword-only from the first KWONLY row on, else either. The text signature, the
 * docstring and _core._signatures (the stub) follow the same rule. */
static const char *param_kind(const l2p_fn *f, int n, int i)
{
    if (i >= n_positional(f, n)) return "keyword_only";
    return (f->params[i].flags & L2P_P_POSONLY) ? "positional" : "keyword";
}

/* ---- matching arguments to parameters (the one parser: l2p_fn rows and kernel rows) ---- */

static int place(const l2p_sig_view *v, PyObject *key, PyObject *value, PyObject **slots)
{
    for (int i = 0; i < v->n; i++) {
        if (PyUnicode_CompareWithASCIIString(key, v->name(v->rows, i)) != 0) continue;
        if (v->flags(v->rows, i) & L2P_MATCH_POSONLY) break;
        if (slots[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", v->fname,
                         v->name(v->rows, i));
            return -1;
        }
        slots[i] = value;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", v->fname, key);
    return -1;
}

int l2p_match(const l2p_sig_view *v, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
              PyObject **slots)
{
    if (nargs > v->npos) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional argument%s (%zd given)",
                     v->fname, v->npos, v->npos == 1 ? "" : "s", nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) slots[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++)
        if (place(v, PyTuple_GET_ITEM(kwnames, i), args[nargs + i], slots) < 0) return -1;
    for (int i = 0; i < v->n; i++)
        if (!slots[i] && (v->flags(v->rows, i) & L2P_MATCH_REQUIRED)) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", v->fname,
                         v->name(v->rows, i));
            return -1;
        }
    return 0;
}

static const char *param_name(const void *rows, int i)
{
    return ((const l2p_param *)rows)[i].name;
}

static unsigned param_flags(const void *rows, int i)
{
    unsigned f = ((const l2p_param *)rows)[i].flags;
    return ((f & L2P_P_REQUIRED) ? L2P_MATCH_REQUIRED : 0u) |
           ((f & L2P_P_POSONLY) ? L2P_MATCH_POSONLY : 0u);
}

/* ---- converters ---- */

int l2p_py_ranged_int(PyObject *obj, const char *name, const char *what, long long lo,
                      long long hi, long long *out)
{
    char range[128], hi_text[32];
    if (hi == LLONG_MAX) snprintf(hi_text, sizeof hi_text, "2^63 - 1");
    else if (hi == INT_MAX) snprintf(hi_text, sizeof hi_text, "2^31 - 1");
    else snprintf(hi_text, sizeof hi_text, "%lld", hi);
    char lo_text[32];
    if (lo == LLONG_MIN) snprintf(lo_text, sizeof lo_text, "-2^63");
    else if (lo == INT_MIN) snprintf(lo_text, sizeof lo_text, "-2^31");
    else snprintf(lo_text, sizeof lo_text, "%lld", lo);
    snprintf(range, sizeof range, "an int%s%s%s in [%s, %s]", what ? " (" : "",
             what ? what : "", what ? ")" : "", lo_text, hi_text);
    if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s, got %s", name, range,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *v = PyNumber_Index(obj);
    if (!v) return -1;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || *out < lo || *out > hi) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: %S is outside [%s, %s]%s%s%s", name, v, lo_text,
                         hi_text, what ? " (" : "", what ? what : "", what ? ")" : "");
        Py_DECREF(v);
        return -1;
    }
    Py_DECREF(v);
    return PyErr_Occurred() ? -1 : 0;
}

/* The value as a message shows it: its repr, shortened when long (an int too large for a
 * double has hundreds of digits); new reference, or NULL with an exception. */
static PyObject *value_text(PyObject *obj)
{
    PyObject *r = PyObject_Repr(obj);
    if (!r) { /* an int beyond the str() digit limit */
        PyErr_Clear();
        return PyUnicode_FromString(PyLong_Check(obj) ? "an int too large to print"
                                                      : "a value whose repr failed");
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(r);
    if (n <= 32) return r;
    PyObject *s = PyUnicode_FromFormat("%.12U... (%zd %s)", r, n,
                                       PyLong_Check(obj) ? "digits" : "characters");
    Py_DECREF(r);
    return s;
}

int l2p_py_real_arg(PyObject *obj, const char *name, double lo, double hi, double *out)
{
    int bounded = lo != 0.0 || hi != 0.0;
    char range[96] = "";
    if (bounded) snprintf(range, sizeof range, "[%g, %g]", lo, hi);
    if (PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a real number%s%s, got bool", name,
                     bounded ? " in " : "", range);
        return -1;
    }
    *out = PyFloat_AsDouble(obj);
    if (*out == -1.0 && PyErr_Occurred()) {
        int overflow = PyErr_ExceptionMatches(PyExc_OverflowError);
        if (!overflow && !PyErr_ExceptionMatches(PyExc_TypeError)) return -1; /* __float__'s own */
        PyErr_Clear();
        if (!overflow) {
            PyErr_Format(PyExc_TypeError, "%s: expected a real number%s%s, got %s", name,
                         bounded ? " in " : "", range, Py_TYPE(obj)->tp_name);
            return -1;
        }
        PyObject *shown = value_text(obj);
        if (shown)
            PyErr_Format(PyExc_ValueError, "%s: %U is not a finite float%s%s", name, shown,
                         bounded ? "; expected a real number in " : "", range);
        Py_XDECREF(shown);
        return -1;
    }
    if (!isfinite(*out) || (bounded && !(*out >= lo && *out <= hi))) {
        if (bounded) PyErr_Format(PyExc_ValueError, "%s: %R is outside %s", name, obj, range);
        else PyErr_Format(PyExc_ValueError, "%s: %R is not a finite number", name, obj);
        return -1;
    }
    return 0;
}

static int convert_float(const l2p_param *p, PyObject *obj, double *out)
{
    return l2p_py_real_arg(obj, p->name, p->flo, p->fhi, out);
}

/* Through the core's choice parser (l2p_parse_choice), as the kernels' rows do. */
static int convert_choice(l2p_state *st, const l2p_param *p, PyObject *obj, int *out)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a str, got %s", p->name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *s = PyUnicode_AsUTF8(obj);
    if (!s) return -1;
    return l2p_parse_choice(s, p->name, p->choices, out) == L2P_OK ? 0 : l2p_py_raise_int(st);
}

/* The row's default into the field. */
static void set_default(const l2p_param *p, char *field)
{
    if (p->flags & L2P_P_NONE) {
        memset(field, 0, sizeof(l2p_opt));
        return;
    }
    switch (p->type) {
    case L2P_P_INT: *(long long *)field = p->ival; break;
    case L2P_P_FLOAT: *(double *)field = p->fval; break;
    case L2P_P_BOOL:
    case L2P_P_CHOICE: *(int *)field = (int)p->ival; break;
    case L2P_P_OBJECT:
    case L2P_P_CALLABLE: *(PyObject **)field = Py_None; break;
    case L2P_P_WINDOW: ((l2p_window_val *)field)->obj = Py_None; break;
    default: break; /* DEVICE, STREAM: converted from None below */
    }
}

static int convert(l2p_state *st, const l2p_param *p, PyObject *obj, char *field)
{
    if (p->flags & L2P_P_NONE) {
        l2p_opt *o = (l2p_opt *)field;
        if (obj == Py_None) return 0;
        o->given = 1;
        if (p->type == L2P_P_FLOAT) return convert_float(p, obj, &o->f);
        return l2p_py_ranged_int(obj, p->name, p->what, p->lo, p->hi, &o->i);
    }
    switch (p->type) {
    case L2P_P_OBJECT: *(PyObject **)field = obj; return 0;
    case L2P_P_CALLABLE:
        if (!PyCallable_Check(obj)) {
            PyErr_Format(PyExc_TypeError, "%s: expected a callable, got %s", p->name,
                         Py_TYPE(obj)->tp_name);
            return -1;
        }
        *(PyObject **)field = obj;
        return 0;
    case L2P_P_INT:
        return l2p_py_ranged_int(obj, p->name, p->what, p->lo, p->hi, (long long *)field);
    case L2P_P_FLOAT: return convert_float(p, obj, (double *)field);
    case L2P_P_BOOL: return l2p_py_bool_arg(obj, p->name, (int *)field);
    case L2P_P_CHOICE: return convert_choice(st, p, obj, (int *)field);
    case L2P_P_DEVICE: return l2p_py_device_index(st, obj, (int *)field);
    case L2P_P_STREAM: {
        l2p_stream_val *s = (l2p_stream_val *)field;
        return l2p_py_stream_arg(st, obj, &s->handle, &s->obj);
    }
    case L2P_P_WINDOW: {
        l2p_window_val *w = (l2p_window_val *)field;
        w->obj = obj;
        return l2p_py_window_arg(st, obj, &w->w);
    }
    }
    PyErr_Format(PyExc_SystemError, "%s: a parameter row without a type", p->name);
    return -1;
}

static l2p_state *state_of(PyObject *self)
{
    if (PyModule_Check(self)) return l2p_state_from_module(self);
    return l2p_state_from_type(PyType_Check(self) ? (PyTypeObject *)self : Py_TYPE(self));
}

/* Omitted DEVICE and STREAM parameters are converted from None too (the current device is
 * looked up only when a row has one). Converted in row order, so errors come in it. */
static int convert_all(const l2p_fn *f, int n, PyObject *self, PyObject **slots, char *values)
{
    l2p_state *st = state_of(self);
    if (!st) return -1;
    for (int i = 0; i < n; i++) {
        const l2p_param *p = &f->params[i];
        char *field = values + p->offset;
        set_default(p, field);
        PyObject *obj = slots[i];
        if (!obj && (p->type == L2P_P_DEVICE || p->type == L2P_P_STREAM)) obj = Py_None;
        if (obj && convert(st, p, obj, field) < 0) return -1;
    }
    return 0;
}

int l2p_fn_parse(const l2p_fn *f, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames, void *values)
{
    PyObject *slots[L2P_MAX_PARAMS] = {0};
    int n = n_params(f);
    l2p_sig_view view = {f->name, n, n_positional(f, n), f->params, param_name, param_flags};
    if (l2p_match(&view, args, PyVectorcall_NARGS(nargs), kwnames, slots) < 0) return -1;
    return convert_all(f, n, self, slots, values);
}

PyObject *l2p_fn_call(const l2p_fn *f, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    PyObject *result = NULL;
    char *values = PyMem_Calloc(1, f->args_size ? f->args_size : 1);
    if (!values) return PyErr_NoMemory();
    if (l2p_fn_parse(f, self, args, nargs, kwnames, values) == 0) result = f->impl(self, values);
    PyMem_Free(values);
    return result;
}

PyObject *l2p_fn_call_tuple(const l2p_fn *f, PyObject *self, PyObject *args, PyObject *kw)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args), nkw = kw ? PyDict_GET_SIZE(kw) : 0;
    PyObject *stack[2 * L2P_MAX_PARAMS], *kwnames = NULL, *key, *value, *result;
    if (nargs + nkw > 2 * L2P_MAX_PARAMS) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments", f->name, n_params(f));
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) stack[i] = PyTuple_GET_ITEM(args, i);
    if (nkw) {
        Py_ssize_t pos = 0, j = 0;
        kwnames = PyTuple_New(nkw);
        if (!kwnames) return NULL;
        while (PyDict_Next(kw, &pos, &key, &value)) {
            PyTuple_SET_ITEM(kwnames, j, Py_NewRef(key));
            stack[nargs + j++] = value;
        }
    }
    result = l2p_fn_call(f, self, stack, nargs, kwnames);
    Py_XDECREF(kwnames);
    return result;
}

/* ---- signatures, docstrings, stub types ---- */

/* Append a formatted piece to a list of text parts (signatures, docstrings, stub lines). */
int l2p_text_append(PyObject *parts, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *s = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    int rc = s ? PyList_Append(parts, s) : -1;
    Py_XDECREF(s);
    return rc;
}

/* The default as Python source, or NULL for a required parameter (new reference). */
static PyObject *default_text(const l2p_param *p)
{
    if (is_required(p)) Py_RETURN_NONE;
    if (p->flags & L2P_P_NONE) return PyUnicode_FromString("None");
    switch (p->type) {
    case L2P_P_INT: return PyUnicode_FromFormat("%lld", p->ival);
    case L2P_P_FLOAT: {
        char *s = PyOS_double_to_string(p->fval, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        PyObject *r = s ? PyUnicode_FromString(s) : NULL;
        PyMem_Free(s);
        return r;
    }
    case L2P_P_BOOL: return PyUnicode_FromString(p->ival ? "True" : "False");
    case L2P_P_CHOICE: return PyUnicode_FromFormat("'%s'", p->choices[p->ival]);
    default: return PyUnicode_FromString("None");
    }
}

/* The stub's type of a parameter (new reference). */
static PyObject *type_text(const l2p_param *p)
{
    const char *t = p->pytype;
    if (!t) {
        switch (p->type) {
        case L2P_P_OBJECT: t = "object"; break;
        case L2P_P_CALLABLE: t = "Callable[[], object]"; break;
        case L2P_P_INT: t = "int"; break;
        case L2P_P_FLOAT: t = "float"; break;
        case L2P_P_BOOL: t = "bool"; break;
        case L2P_P_DEVICE: t = "DeviceLike"; break;
        case L2P_P_STREAM: t = "StreamLike"; break;
        case L2P_P_WINDOW: t = "AccessPolicyWindow | None"; break;
        case L2P_P_CHOICE: {
            PyObject *s = PyUnicode_FromString("Literal[");
            for (int i = 0; s && p->choices[i]; i++)
                Py_SETREF(s, PyUnicode_FromFormat("%U%s'%s'", s, i ? ", " : "", p->choices[i]));
            return s ? PyUnicode_FromFormat("%U]", s) : NULL;
        }
        }
    }
    return PyUnicode_FromFormat((p->flags & L2P_P_NONE) ? "%s | None" : "%s", t);
}

/* "(a, b=1, /, c=2, *, d=None)" with a leading "$self, " / "$module, " marker. */
static int append_signature(PyObject *parts, const l2p_fn *f, const char *marker)
{
    int n = n_params(f), star = 0, slash = 0;
    if (l2p_text_append(parts, "%s(%s%s", f->name, marker, n && marker[0] ? ", " : "") < 0) return -1;
    for (int i = 0; i < n; i++) {
        const l2p_param *p = &f->params[i];
        if ((p->flags & L2P_P_KWONLY) && !star && (star = 1) && l2p_text_append(parts, "*, ") < 0)
            return -1;
        PyObject *d = default_text(p);
        if (!d || l2p_text_append(parts, d == Py_None ? "%s" : "%s=%U", p->name, d) < 0) {
            Py_XDECREF(d);
            return -1;
        }
        Py_DECREF(d);
        int last_pos = (p->flags & L2P_P_POSONLY) &&
                       (i + 1 == n || !(f->params[i + 1].flags & L2P_P_POSONLY));
        if (last_pos && !slash && (slash = 1) && l2p_text_append(parts, ", /") < 0) return -1;
        if (i + 1 < n && l2p_text_append(parts, ", ") < 0) return -1;
    }
    return l2p_text_append(parts, ")");
}

/* The docstring: signature, summary, then one line per parameter. */
static char *make_doc(const l2p_fn *f, const char *marker)
{
    PyObject *parts = PyList_New(0), *sep = NULL, *doc = NULL;
    char *copy = NULL;
    int n = n_params(f);
    if (!parts || append_signature(parts, f, marker) < 0 ||
        l2p_text_append(parts, "\n--\n\n%s", f->summary) < 0)
        goto done;
    if (n && l2p_text_append(parts, "\n\nArguments:") < 0) goto done;
    for (int i = 0; i < n; i++) {
        const l2p_param *p = &f->params[i];
        PyObject *t = type_text(p);
        int rc = t ? l2p_text_append(parts, "\n    %s (%U): %s", p->name, t, p->doc ? p->doc : "") : -1;
        Py_XDECREF(t);
        if (rc < 0) goto done;
    }
    if (f->returns && l2p_text_append(parts, "\n\nReturns: %s", f->returns) < 0) goto done;
    sep = PyUnicode_FromString("");
    if (sep) doc = PyUnicode_Join(sep, parts);
    const char *text = doc ? PyUnicode_AsUTF8(doc) : NULL;
    if (text && (copy = PyMem_RawMalloc(strlen(text) + 1))) strcpy(copy, text);
    else if (text) PyErr_NoMemory();
done:
    Py_XDECREF(parts);
    Py_XDECREF(sep);
    Py_XDECREF(doc);
    return copy;
}

static int check_row(const l2p_fn *f)
{
    int n = n_params(f);
    if (n > L2P_MAX_PARAMS) {
        PyErr_Format(PyExc_SystemError, "%s: %d parameters, more than L2P_MAX_PARAMS (%d)",
                     f->name, n, L2P_MAX_PARAMS);
        return -1;
    }
    /* POSONLY rows form a prefix, before any keyword-only one: the matcher refuses a
     * keyword for a POSONLY row only, and the signature's "/" after the last one says that
     * every row before it is positional-only too. */
    for (int i = 0; i < n; i++)
        if ((f->params[i].flags & L2P_P_POSONLY) &&
            ((i > 0 && !(f->params[i - 1].flags & L2P_P_POSONLY)) || i >= n_positional(f, n))) {
            PyErr_Format(PyExc_SystemError, "%s: positional-only parameter '%s' after one that "
                         "is not", f->name, f->params[i].name);
            return -1;
        }
    return 0;
}

/* Tables already built, so that a second module instance reuses them. */
typedef struct built {
    const l2p_fn *const *rows;
    PyMethodDef *defs;
    struct built *next;
} built;
static built *built_tables;

/* The rows' definitions after `extra` (static ones, NULL-name terminated; may be NULL). */
static PyMethodDef *build_methods(const l2p_fn *const *rows, int is_method,
                                  const PyMethodDef *extra)
{
    int count = 0, n_extra = 0;
    while (rows[count]) count++;
    while (extra && extra[n_extra].ml_name) n_extra++;
    PyMethodDef *d = PyMem_RawCalloc((size_t)(count + n_extra) + 1, sizeof *d);
    if (!d) return (PyMethodDef *)PyErr_NoMemory();
    for (int i = 0; i < n_extra; i++) d[i] = extra[i];
    for (int i = 0; i < count; i++) {
        char *doc = check_row(rows[i]) < 0 ? NULL : make_doc(rows[i], is_method ? "$self" : "");
        if (!doc) return NULL; /* the partial table leaks once, at a failed import */
        d[n_extra + i] = (PyMethodDef){rows[i]->name, (PyCFunction)(void (*)(void))rows[i]->entry,
                                       METH_FASTCALL | METH_KEYWORDS, doc};
    }
    return d;
}

static PyMethodDef *methods_with(const l2p_fn *const *rows, int is_method,
                                 const PyMethodDef *extra)
{
    for (built *b = built_tables; b; b = b->next)
        if (b->rows == rows) return b->defs;
    built *b = PyMem_RawMalloc(sizeof *b);
    if (!b) return (PyMethodDef *)PyErr_NoMemory();
    b->defs = build_methods(rows, is_method, extra);
    if (!b->defs) {
        PyMem_RawFree(b);
        return NULL;
    }
    b->rows = rows;
    b->next = built_tables;
    built_tables = b;
    return b->defs;
}

PyMethodDef *l2p_fn_methods(const l2p_fn *const *rows, int is_method)
{
    return methods_with(rows, is_method, NULL);
}

const char *l2p_fn_type_doc(const l2p_fn *f)
{
    return check_row(f) < 0 ? NULL : make_doc(f, "");
}

int l2p_note_signature(PyObject *m, const char *qualname, PyObject *params, const char *returns)
{
    PyObject *sigs = PyObject_GetAttrString(m, "_signatures");
    if (!sigs) {
        PyErr_Clear();
        sigs = PyDict_New();
        if (!sigs || PyModule_AddObjectRef(m, "_signatures", sigs) < 0) {
            Py_XDECREF(sigs);
            return -1;
        }
    }
    PyObject *entry = Py_BuildValue("(Os)", params, returns ? returns : "None");
    int rc = entry ? PyDict_SetItemString(sigs, qualname, entry) : -1;
    Py_XDECREF(entry);
    Py_DECREF(sigs);
    return rc;
}

static int note(PyObject *m, const char *qualname, const l2p_fn *f)
{
    int n = n_params(f);
    PyObject *params = PyTuple_New(n);
    for (int i = 0; params && i < n; i++) {
        const l2p_param *p = &f->params[i];
        const char *kind = param_kind(f, n, i);
        PyObject *t = type_text(p), *d = default_text(p);
        PyObject *item = t && d ? Py_BuildValue("(sOOs)", p->name, t, d, kind) : NULL;
        Py_XDECREF(t);
        Py_XDECREF(d);
        if (!item) Py_CLEAR(params);
        else PyTuple_SET_ITEM(params, i, item);
    }
    int rc = params ? l2p_note_signature(m, qualname, params, f->returns) : -1;
    Py_XDECREF(params);
    return rc;
}

int l2p_note_signatures(PyObject *m, const char *type_name, const l2p_fn *const *rows)
{
    for (int i = 0; rows[i]; i++) {
        char q[128];
        if (type_name && strcmp(rows[i]->name, type_name) == 0) snprintf(q, sizeof q, "%s", type_name);
        else if (type_name) snprintf(q, sizeof q, "%s.%s", type_name, rows[i]->name);
        else snprintf(q, sizeof q, "%s", rows[i]->name);
        if (note(m, q, rows[i]) < 0) return -1;
    }
    return 0;
}

int l2p_add_fns(PyObject *m, const l2p_fn *const *rows)
{
    PyMethodDef *defs = l2p_fn_methods(rows, 0);
    if (!defs || PyModule_AddFunctions(m, defs) < 0) return -1;
    return l2p_note_signatures(m, NULL, rows);
}

PyTypeObject *l2p_make_type_rows(PyObject *m, PyType_Spec *spec, const l2p_fn *ctor,
                                 const l2p_fn *const *methods)
{
    PyType_Slot *doc_slot = NULL, *methods_slot = NULL;
    const char *short_name = strrchr(spec->name, '.') ? strrchr(spec->name, '.') + 1 : spec->name;
    char *doc = NULL;
    for (PyType_Slot *sl = spec->slots; sl->slot; sl++) {
        if (sl->slot == Py_tp_doc) doc_slot = sl;
        if (sl->slot == Py_tp_methods) methods_slot = sl;
    }
    if ((ctor && !doc_slot) || (methods && !methods_slot)) {
        PyErr_Format(PyExc_SystemError, "%s: the spec needs Py_tp_doc and Py_tp_methods slots "
                     "for its rows", spec->name);
        return NULL;
    }
    if (methods) {
        /* The first call replaces the static table by the merged one (kept for later calls). */
        PyMethodDef *merged = methods_with(methods, 1, (const PyMethodDef *)methods_slot->pfunc);
        if (!merged) return NULL;
        methods_slot->pfunc = merged;
    }
    if (ctor) {
        if (!(doc = (char *)l2p_fn_type_doc(ctor))) return NULL;
        /* PyType_FromSpec wants "Name(...)": the row is named after the type. */
        doc_slot->pfunc = doc;
    }
    PyTypeObject *t = l2p_make_type(m, spec, NULL);
    if (ctor) doc_slot->pfunc = NULL; /* copied by the type; freed below */
    PyMem_RawFree(doc);
    if (!t) return NULL;
    if ((ctor && l2p_note_signatures(m, short_name, (const l2p_fn *const[]){ctor, NULL}) < 0) ||
        (methods && l2p_note_signatures(m, short_name, methods) < 0)) {
        Py_DECREF(t);
        return NULL;
    }
    return t;
}
