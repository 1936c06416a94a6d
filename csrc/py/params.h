/* Rows for the extension's functions and methods (the kernels have binder.h's rows).
 *
 * A function is one l2p_fn row: its name, a summary, its return type and its parameters. Each
 * parameter is keyed by NAME: its row names a field of the function's own argument struct
 * (L2P_PARAM(struct, field, ...) takes the name from the field), and the one parser writes the
 * converted value there (the row's default when omitted). The same row gives the text
 * signature, the docstring (one line per parameter) and the stub's types (tools/gen_stub.py
 * reads them from _core._signatures), so none of them can drift from what is parsed.
 *
 * Adding a function:
 *     typedef struct { long long n; int device; } my_args;
 *     static PyObject *my_impl(PyObject *self, const void *args) { const my_args *a = args; ...}
 *     L2P_DEFINE_FN(my_fn, my_args, my_impl, "name", "summary.", "ReturnType",
 *                   L2P_PARAM(my_args, n, L2P_P_INT, .lo = 0, .hi = 10, .doc = "..."),
 *                   L2P_PARAM(my_args, device, L2P_P_DEVICE, .flags = L2P_P_KWONLY, .doc = ...))
 * and list &my_fn in the file's NULL-terminated row list (l2p_add_fns makes the functions). */
#ifndef L2P_PARAMS_H
#define L2P_PARAMS_H

#include <stddef.h>

#include "l2p_py.h"

/* At most this many parameters per row: l2p_fn_check refuses a longer row at import. */
#define L2P_MAX_PARAMS 24

typedef enum {
    L2P_P_OBJECT = 1, /* any object -> PyObject * (borrowed); None when omitted */
    L2P_P_CALLABLE,   /* a callable -> PyObject * (borrowed) */
    L2P_P_INT,        /* an int (no bool) in [lo, hi] -> long long; `what` says what it counts */
    L2P_P_FLOAT,      /* a finite real in [flo, fhi] -> double */
    L2P_P_BOOL,       /* a truth value -> int */
    L2P_P_CHOICE,     /* one of `choices` -> int, its index */
    L2P_P_DEVICE,     /* None (the current device), an int index or a Device -> int */
    L2P_P_STREAM,     /* None (the legacy stream), a Stream or a foreign stream -> l2p_stream_val */
    L2P_P_WINDOW,     /* None or an AccessPolicyWindow -> l2p_window_val */
} l2p_ptype;

enum {
    L2P_P_REQUIRED = 1u, /* no default */
    L2P_P_KWONLY = 2u,   /* keyword-only (and so is every parameter after it) */
    L2P_P_NONE = 4u,     /* INT, FLOAT: None allowed (and the default): the field is an l2p_opt */
    L2P_P_POSONLY = 8u,  /* positional-only (and so is every parameter before it) */
};

/* The argument struct of a function without parameters (its row lists L2P_NO_PARAMS). */
typedef struct {
    char unused;
} l2p_no_args;
#define L2P_NO_PARAMS {0}

/* An INT or FLOAT parameter that may be None. */
typedef struct {
    int given; /* 0: None or omitted */
    long long i;
    double f;
} l2p_opt;

typedef struct {
    cudaStream_t handle;
    PyObject *obj; /* our Stream (borrowed), or NULL for a foreign or the legacy stream */
} l2p_stream_val;

typedef struct {
    const l2p_window *w; /* NULL for None */
    PyObject *obj;       /* the window object, or None (borrowed) */
} l2p_window_val;

typedef struct {
    const char *name;
    l2p_ptype type;
    unsigned flags;
    size_t offset;                /* of the value in the function's argument struct */
    long long lo, hi, ival;       /* INT: range, default; BOOL, CHOICE: default */
    double flo, fhi, fval;        /* FLOAT: range (both 0: any finite), default */
    const char *const *choices;   /* CHOICE: NULL-terminated */
    const char *what;             /* INT: what the number is ("bytes", "threads per block") */
    const char *pytype;           /* the stub's type; NULL: derived from `type` */
    const char *doc;              /* one line for the docstring */
} l2p_param;

typedef struct l2p_fn l2p_fn;
struct l2p_fn {
    const char *name;
    const char *summary;
    const char *returns;          /* the stub's return type */
    size_t args_size;             /* sizeof the argument struct */
    const l2p_param *params;      /* ends at a row without a name */
    PyObject *(*impl)(PyObject *self, const void *args); /* self: module, instance or type */
    PyObject *(*entry)(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames); /* made by L2P_DEFINE_FN */
};

/* One parameter row, named after the field it fills. */
#define L2P_PARAM(S, field, ptype, ...) \
    {.name = #field, .type = (ptype), .offset = offsetof(S, field), __VA_ARGS__}

/* A row `var` with its vectorcall entry point. */
#define L2P_DEFINE_FN(var, S, fn_impl, fn_name, fn_summary, fn_returns, ...)                   \
    static const l2p_fn var;                                                                   \
    static PyObject *var##_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs,      \
                                 PyObject *kwnames)                                            \
    {                                                                                          \
        return l2p_fn_call(&var, self, args, nargs, kwnames);                                  \
    }                                                                                          \
    static const l2p_fn var = {.name = fn_name, .summary = fn_summary, .returns = fn_returns,  \
                               .args_size = sizeof(S), .impl = fn_impl, .entry = var##_entry,  \
                               .params = (const l2p_param[]){__VA_ARGS__, {0}}}

/* A row for a method without parameters, around an existing fn(self, NULL). */
#define L2P_NOARGS_METHOD(var, fn, m_name, m_summary, m_returns)                               \
    static PyObject *var##_impl(PyObject *self, const void *args)                              \
    {                                                                                          \
        (void)args;                                                                            \
        return fn(self, NULL);                                                                 \
    }                                                                                          \
    L2P_DEFINE_FN(var, l2p_no_args, var##_impl, m_name, m_summary, m_returns, L2P_NO_PARAMS)

/* A row for a method of one positional-only object, around an existing fn(self, obj). */
typedef struct {
    PyObject *value;
} l2p_one_arg;
#define L2P_ONE_ARG_METHOD(var, fn, m_name, m_summary, m_returns, p_name, p_type, p_doc)       \
    static PyObject *var##_impl(PyObject *self, const void *args)                              \
    {                                                                                          \
        return fn(self, ((const l2p_one_arg *)args)->value);                                   \
    }                                                                                          \
    L2P_DEFINE_FN(var, l2p_one_arg, var##_impl, m_name, m_summary, m_returns,                  \
                  {.name = p_name, .type = L2P_P_OBJECT,                                       \
                   .flags = L2P_P_REQUIRED | L2P_P_POSONLY, .offset = 0, .pytype = p_type,     \
                   .doc = p_doc})

/* __exit__(exc_type=None, exc=None, tb=None, /) around fn(self, NULL) (which ignores them). */
typedef struct {
    PyObject *exc_type, *exc, *tb;
} l2p_exit_args;
#define L2P_EXIT_METHOD(var, fn, m_summary)                                                    \
    static PyObject *var##_impl(PyObject *self, const void *args)                              \
    {                                                                                          \
        (void)args;                                                                            \
        return fn(self, NULL);                                                                 \
    }                                                                                          \
    L2P_DEFINE_FN(var, l2p_exit_args, var##_impl, "__exit__", m_summary, "bool",               \
                  L2P_PARAM(l2p_exit_args, exc_type, L2P_P_OBJECT, .flags = L2P_P_POSONLY,     \
                            .pytype = "type[BaseException] | None", .doc = "the exception's "  \
                            "type, if one is passing"),                                        \
                  L2P_PARAM(l2p_exit_args, exc, L2P_P_OBJECT, .flags = L2P_P_POSONLY,          \
                            .pytype = "BaseException | None", .doc = "the exception"),         \
                  L2P_PARAM(l2p_exit_args, tb, L2P_P_OBJECT, .flags = L2P_P_POSONLY,           \
                            .pytype = "object", .doc = "its traceback"))

/* The one argument matcher, for any row layout: `n` parameters named by name(rows, i), the
 * first `npos` passable by position; flags(rows, i) says which are required or
 * positional-only. slots[i] gets the argument of parameter i (NULL: not given); a TypeError
 * names a duplicate, unknown or missing argument. */
enum { L2P_MATCH_REQUIRED = 1u, L2P_MATCH_POSONLY = 2u };
typedef struct {
    const char *fname;
    int n, npos;
    const void *rows;
    const char *(*name)(const void *rows, int i);
    unsigned (*flags)(const void *rows, int i);
} l2p_sig_view;
int l2p_match(const l2p_sig_view *v, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
              PyObject **slots);

/* Parse and convert into `values` (the row's argument struct, zeroed) without calling: how
 * the items of a sequence argument (a scan's tuples) go through rows, as arguments do. 0 or
 * -1. */
int l2p_fn_parse(const l2p_fn *f, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames, void *values);
/* Parse, convert and call. self: the module (functions), the instance (methods). */
PyObject *l2p_fn_call(const l2p_fn *f, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames);
/* The same from a tuple and a dict (tp_new); self is the type. */
PyObject *l2p_fn_call_tuple(const l2p_fn *f, PyObject *self, PyObject *args, PyObject *kw);

/* Method definitions of NULL-terminated rows, built once per process and never freed (they
 * must outlive the functions made from them). is_method: "$self" signatures. */
PyMethodDef *l2p_fn_methods(const l2p_fn *const *rows, int is_method);
/* "Name(params)\n--\n\nsummary..." for a type's tp_doc (a constructor row); the caller frees
 * it with PyMem_RawFree once the type is made (PyType_FromSpec copies its doc). */
const char *l2p_fn_type_doc(const l2p_fn *f);

/* Add the rows' functions to the module, and record every row's signature in
 * _core._signatures: {qualname: ((name, type, default or None, kind), ..., return type)}. */
int l2p_add_fns(PyObject *m, const l2p_fn *const *rows);
/* Record rows of a type (qualname "Type.name"; a constructor row as "Type"). */
int l2p_note_signatures(PyObject *m, const char *type_name, const l2p_fn *const *rows);

/* The rows of each file's module functions (NULL-terminated). */
extern const l2p_fn *const l2p_window_fns[];
extern const l2p_fn *const l2p_timing_fns[];
extern const l2p_fn *const l2p_kernel_fns[];
extern const l2p_fn *const l2p_model_fns[];
extern const l2p_fn *const l2p_counter_fns[];
extern const l2p_fn *const l2p_buffer_fns[];
extern const l2p_fn *const l2p_restore_fns[];
extern const l2p_fn *const l2p_foreign_fns[];
extern const l2p_fn *const l2p_tax_fns[];
extern const l2p_fn *const l2p_tune_fns[];
extern const l2p_fn *const l2p_live_fns[];
extern const l2p_fn *const l2p_replays_fns[]; /* replays.c */
extern const l2p_fn *const l2p_advise_fns[];
extern const l2p_fn *const l2p_stream_fns[];
extern const l2p_fn *const l2p_buffer_method_rows[]; /* dlpack.c */

/* Record one signature in _core._signatures: {qualname: (params, return type)}, params a
 * tuple of (name, type, default as source or None when required, kind), kind one of
 * "positional", "keyword", "keyword_only". tools/gen_stub.py writes the stub from them. */
int l2p_note_signature(PyObject *m, const char *qualname, PyObject *params, const char *returns);

/* A type from `spec` whose tp_doc comes from the constructor row `ctor` (named after the
 * type; its tp_new calls l2p_fn_call_tuple) and whose methods are the spec's Py_tp_methods
 * plus the rows `methods` (either may be NULL). Records their signatures too. */
PyTypeObject *l2p_make_type_rows(PyObject *m, PyType_Spec *spec, const l2p_fn *ctor,
                                 const l2p_fn *const *methods);

/* An int argument in [lo, hi]; the message names the argument and what it is:
 * "threads: an int (threads per block) in [1, 1024]". */
int l2p_py_ranged_int(PyObject *obj, const char *name, const char *what, long long lo,
                      long long hi, long long *out);

/* Append a formatted piece (PyUnicode_FromFormat) to a list of text parts; 0 or -1. */
int l2p_text_append(PyObject *parts, const char *fmt, ...);

#endif
