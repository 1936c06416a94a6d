/* Kernel names a person can read: the core's l2p_demangle / l2p_kernel_short (the rule is
 * l2p_demangle.h's) for the package's summaries and reports. Names used as keys stay mangled. */
#include <string.h>

#include "l2p_py.h"
#include "params.h"

#include "l2p_demangle.h"
#include "l2p_live.h"

/* The longest budget a caller may ask for: a short name is for one line of text. */
#define MAX_CHARS 4096

typedef struct {
    PyObject *name;
    int shorten;
    long long max_chars;
} kernel_name_args;

/* The name as UTF-8 without NUL characters, or NULL with a TypeError / ValueError naming it. */
static const char *name_text(PyObject *obj)
{
    Py_ssize_t n;
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "name: expected a str (a kernel name), got %s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    const char *s = PyUnicode_AsUTF8AndSize(obj, &n);
    if (s && strlen(s) != (size_t)n) {
        PyErr_SetString(PyExc_ValueError, "name: a kernel name holds no NUL character");
        return NULL;
    }
    return s;
}

/* The demangled name, in a buffer as long as it needs (l2p_demangle says how long). */
static PyObject *full_name(const char *name)
{
    char small[512];
    size_t n = l2p_demangle(name, small, sizeof small);
    if (n < sizeof small) return PyUnicode_DecodeUTF8(small, (Py_ssize_t)n, "replace");
    char *big = PyMem_Malloc(n + 1);
    if (!big) return PyErr_NoMemory();
    l2p_demangle(name, big, n + 1);
    PyObject *r = PyUnicode_DecodeUTF8(big, (Py_ssize_t)n, "replace");
    PyMem_Free(big);
    return r;
}

static PyObject *kernel_name_impl(PyObject *m, const void *args)
{
    const kernel_name_args *a = args;
    const char *name = name_text(a->name);
    (void)m;
    if (!name) return NULL;
    if (!a->shorten) return full_name(name);
    size_t cap = 4 * (size_t)a->max_chars + 1; /* 4 bytes a character at most (the header) */
    char *out = PyMem_Malloc(cap);
    if (!out) return PyErr_NoMemory();
    size_t n = l2p_kernel_short(name, out, cap, (size_t)a->max_chars);
    PyObject *r = PyUnicode_DecodeUTF8(out, (Py_ssize_t)n, "replace");
    PyMem_Free(out);
    return r;
}
L2P_DEFINE_FN(kernel_name_fn, kernel_name_args, kernel_name_impl, "kernel_name",
              "A kernel name for a person: demangled, and with short=True shortened to at most "
              "max_chars characters (no return type or parameters, template arguments "
              "unqualified, nested ones and those past the budget as '…'; a cut mangled name "
              "shows what it still says). Not a mangled name: the name as given.", "str",
              L2P_PARAM(kernel_name_args, name, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "str", .doc = "the kernel's name, mangled or not"),
              {.name = "short", .type = L2P_P_BOOL, .offset = offsetof(kernel_name_args, shorten),
               .ival = 1, .doc = "shorten (True) or the whole demangled name (False)"},
              L2P_PARAM(kernel_name_args, max_chars, L2P_P_INT, .flags = L2P_P_KWONLY, .lo = 1,
                        .hi = MAX_CHARS, .ival = L2P_KERNEL_SHORT_CHARS, .what = "characters",
                        .doc = "the short name's budget (ignored with short=False)"));

typedef struct {
    PyObject *name;
} waits_args;

static PyObject *kernel_waits_impl(PyObject *m, const void *args)
{
    const char *name = name_text(((const waits_args *)args)->name);
    (void)m;
    if (!name) return NULL;
    return PyBool_FromLong(l2p_live_waits_on_peers(name));
}
L2P_DEFINE_FN(kernel_waits_fn, waits_args, kernel_waits_impl, "kernel_waits_on_peers",
              "Whether the kernel's GPU time is mostly a wait for other ranks (a collective: "
              "NCCL's kernels), which advise leaves unpriced (l2p_live_waits_on_peers).", "bool",
              L2P_PARAM(waits_args, name, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "str", .doc = "the kernel's name, mangled or not"));

const l2p_fn *const l2p_names_fns[] = {&kernel_name_fn, &kernel_waits_fn, NULL};
