/* The one binder behind every kernel row (binder.h): argument parsing with the vectorcall
 * convention, conversion and validation from the row, the launch on the buffers' device,
 * and the text signature generated from the same row. */
#include "binder.h"
#include "params.h"

#include "l2p_checks.h"
#include "l2p_flavour.h"
#include "l2p_kernels.h"

#define L2P_MAX_KERNELS 32

/* ---- parsing ---- */

static int n_args(const l2p_kernel *k)
{
    int n = 0;
    while (n < L2P_MAX_KARGS && k->args[n].type != L2P_A_END) n++;
    return n;
}

static int n_positional(const l2p_kernel *k, int n)
{
    for (int i = 0; i < n; i++)
        if (k->args[i].flags & L2P_A_KWONLY) return i;
    return n;
}

static int is_required(const l2p_arg *a)
{
    return (a->type == L2P_A_BUFFER && !(a->flags & L2P_A_OPTIONAL)) ||
           (a->type == L2P_A_CHOICE && a->ival < 0);
}

/* The row's arguments, then stream, window (unless L2P_K_NO_WINDOW), device (L2P_K_DEVICE):
 * the extras sit after the row's in the slots. */
typedef struct {
    PyObject *given[L2P_MAX_KARGS + 3];
    PyObject *stream, *window, *device;
} raw_args;

typedef struct {
    const l2p_kernel *k;
    int n; /* the row's own arguments */
    const char *extra[3];
} kernel_view;

static const char *kernel_arg_name(const void *rows, int i)
{
    const kernel_view *v = rows;
    return i < v->n ? v->k->args[i].name : v->extra[i - v->n];
}

static unsigned kernel_arg_flags(const void *rows, int i)
{
    const kernel_view *v = rows;
    return i < v->n && is_required(&v->k->args[i]) ? L2P_MATCH_REQUIRED : 0u;
}

/* Through the one matcher (params.c's l2p_match). */
static int parse(const l2p_kernel *k, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames, raw_args *r)
{
    kernel_view kv = {k, n_args(k), {"stream", NULL, NULL}};
    int extras = 1;
    if (!(k->flags & L2P_K_NO_WINDOW)) kv.extra[extras++] = "window";
    if (k->flags & L2P_K_DEVICE) kv.extra[extras++] = "device";
    l2p_sig_view view = {k->name, kv.n + extras, n_positional(k, kv.n), &kv, kernel_arg_name,
                         kernel_arg_flags};
    memset(r, 0, sizeof *r);
    if (l2p_match(&view, args, nargs, kwnames, r->given) < 0) return -1;
    for (int e = 0; e < extras; e++) {
        PyObject *v = r->given[kv.n + e];
        r->given[kv.n + e] = NULL;
        if (kv.extra[e][0] == 's') r->stream = v;
        else if (kv.extra[e][0] == 'w') r->window = v;
        else r->device = v;
    }
    return 0;
}

/* ---- conversion ---- */

int l2p_call_core(l2p_call *c, l2p_status rc)
{
    return rc == L2P_OK ? 0 : l2p_py_raise_int(c->st);
}

static const char *kind_words(const char *kinds)
{
    if (!kinds) return "any";
    if (strcmp(kinds, "f") == 0) return "float";
    if (strcmp(kinds, "i") == 0) return "signed int";
    if (strcmp(kinds, "iu") == 0) return "int";
    return "int or float";
}

static int buffer_dtype_ok(const l2p_arg *a, l2p_BufferObject *b)
{
    int size = (int)PyDataType_ELSIZE(b->dtype);
    int kind_ok = !a->kinds || strchr(a->kinds, b->dtype->kind);
    int width_ok = !a->widths || (size < 32 && (a->widths & L2P_W(size)));
    if (kind_ok && width_ok) return 0;
    char widths[64] = "";
    for (int w = 1; w <= 16; w *= 2)
        if (a->widths & L2P_W(w))
            snprintf(widths + strlen(widths), sizeof widths - strlen(widths), "%s%d",
                     widths[0] ? " or " : "", w);
    PyErr_Format(PyExc_TypeError, "%s: dtype %R is not allowed here (want a %s%s%s)", a->name,
                 (PyObject *)b->dtype, widths, widths[0] ? "-byte " : "", kind_words(a->kinds));
    return -1;
}

/* Re-raise the current exception with the argument's name in front of its message, keeping
 * its type and a CudaError's .code / .name / .call. */
static void raise_with_name(const char *name)
{
    static const char *const attrs[] = {"code", "name", "call"};
    PyObject *t, *val, *tb, *nt, *nv, *ntb;
    PyErr_Fetch(&t, &val, &tb);
    PyErr_NormalizeException(&t, &val, &tb);
    PyErr_Format(t ? t : PyExc_TypeError, "%s: %S", name, val ? val : Py_None);
    PyErr_Fetch(&nt, &nv, &ntb);
    PyErr_NormalizeException(&nt, &nv, &ntb);
    for (int i = 0; val && nv && i < 3; i++) {
        PyObject *x = PyObject_GetAttrString(val, attrs[i]);
        if (!x || PyObject_SetAttrString(nv, attrs[i], x) < 0) PyErr_Clear();
        Py_XDECREF(x);
    }
    PyErr_Restore(nt, nv, ntb);
    Py_XDECREF(t);
    Py_XDECREF(val);
    Py_XDECREF(tb);
}

/* as_buffer, with the argument's name in front of its error. */
static int convert_buffer(l2p_call *c, const l2p_arg *a, PyObject *obj, l2p_val *v)
{
    PyObject *b = l2p_buffer_as_buffer(c->st, obj, NULL); /* named below */
    if (!b) {
        raise_with_name(a->name);
        return -1;
    }
    v->buf = (l2p_BufferObject *)b;
    v->given = 1;
    if (buffer_dtype_ok(a, v->buf) < 0) return -1;
    return a->align ? l2p_call_core(c, l2p_check_words((uintptr_t)v->buf->ptr, v->buf->nbytes,
                                                       a->align, a->name))
                    : 0;
}

static int pow2_error(const l2p_arg *a, long long v)
{
    char allowed[128] = "";
    for (long long p = a->lo; p <= a->hi && p > 0; p *= 2)
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%lld",
                 allowed[0] ? ", " : "", p);
    PyErr_Format(PyExc_ValueError, "%s: %lld is not one of %s", a->name, v, allowed);
    return -1;
}

/* Through the functions' ranged converter (params.c), so both say what the number is:
 * "threads: expected an int (threads per block) in [1, 1024]". */
static int convert_int(const l2p_arg *a, PyObject *obj, l2p_val *v)
{
    const char *what = (a->flags & L2P_A_THREADS) ? "threads per block"
                       : (a->flags & L2P_A_BLOCKS) ? "blocks of the grid"
                                                   : NULL;
    if (a->flags & L2P_A_POW2) {
        if (l2p_py_ranged_int(obj, a->name, "a power of two", LLONG_MIN, LLONG_MAX, &v->i) < 0)
            return -1;
        if (v->i < a->lo || v->i > a->hi || v->i <= 0 || (v->i & (v->i - 1)))
            return pow2_error(a, v->i);
    } else if (l2p_py_ranged_int(obj, a->name, what, a->lo, a->hi, &v->i) < 0) {
        return -1;
    }
    v->given = 1;
    return 0;
}

static int convert_choice(l2p_call *c, const l2p_arg *a, PyObject *obj, l2p_val *v)
{
    int index;
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a str, got %s", a->name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *s = PyUnicode_AsUTF8(obj);
    if (!s || l2p_call_core(c, l2p_parse_choice(s, a->name, a->choices, &index)) < 0) return -1;
    v->i = index;
    v->given = 1;
    return 0;
}

/* One argument: its default when omitted (or None where allowed), else the converted value. */
static int convert(l2p_call *c, const l2p_arg *a, PyObject *obj, l2p_val *v)
{
    int absent = !obj || (obj == Py_None && (a->flags & L2P_A_OPTIONAL));
    v->given = 0;
    switch (a->type) {
    case L2P_A_BUFFER:
        v->buf = NULL;
        return absent ? 0 : convert_buffer(c, a, obj, v);
    case L2P_A_INT:
        v->i = a->ival;
        return absent ? 0 : convert_int(a, obj, v);
    case L2P_A_FLOAT:
        v->f = a->fval;
        if (absent) return 0;
        if (l2p_py_real_arg(obj, a->name, a->flo, a->fhi, &v->f) < 0) return -1;
        v->given = 1;
        return 0;
    case L2P_A_CHOICE:
        v->i = a->ival;
        return absent ? 0 : convert_choice(c, a, obj, v);
    case L2P_A_BOOL: {
        int t = (int)a->ival;
        if (!absent && l2p_py_bool_arg(obj, a->name, &t) < 0) return -1;
        v->i = t;
        v->given = !absent;
        return 0;
    }
    case L2P_A_OBJECT:
        v->given = !absent;
        return a->convert(absent ? NULL : obj, &v->i);
    default:
        PyErr_SetString(PyExc_SystemError, "l2persist: bad kernel table row");
        return -1;
    }
}

static void release(l2p_call *c, int n)
{
    for (int i = 0; i < n; i++)
        if (c->k->args[i].type == L2P_A_BUFFER) Py_CLEAR(c->v[i].buf);
}

/* ---- devices, streams, launch shapes ---- */

static int launch_device(l2p_call *c, int n, PyObject *device)
{
    int found = 0;
    for (int i = 0; i < n; i++) {
        l2p_BufferObject *b = c->k->args[i].type == L2P_A_BUFFER ? c->v[i].buf : NULL;
        if (!b) continue;
        if (!found) {
            c->device = b->device;
            found = 1;
        } else if (b->device != c->device) {
            PyErr_Format(PyExc_ValueError, "%s: buffer is on device %d, the launch on device %d",
                         c->k->args[i].name, b->device, c->device);
            return -1;
        }
    }
    if (!found) return l2p_py_device_index(c->st, device, &c->device);
    return 0;
}

static int stream_on_device(l2p_call *c)
{
    l2p_StreamObject *s = (l2p_StreamObject *)c->stream_obj;
    if (s && l2p_py_stream_device(s) != c->device) {
        PyErr_Format(PyExc_ValueError, "stream: it belongs to device %d, the launch to device %d",
                     l2p_py_stream_device(s), c->device);
        return -1;
    }
    return 0;
}

/* Omitted blocks/threads take the row's grid; the pair is checked as a launch shape. */
static int launch_shape(l2p_call *c, int n)
{
    int bi = -1, ti = -1;
    for (int i = 0; i < n; i++) {
        if (c->k->args[i].flags & L2P_A_BLOCKS) bi = i;
        if (c->k->args[i].flags & L2P_A_THREADS) ti = i;
    }
    if (bi < 0 && ti < 0) return 0;
    if (c->k->grid && ((bi >= 0 && !c->v[bi].given) || (ti >= 0 && !c->v[ti].given))) {
        int sms;
        unsigned blocks, threads;
        if (l2p_call_core(c, l2p_device_sm_count(c->device, &sms)) < 0) return -1;
        c->k->grid(sms, &blocks, &threads);
        if (bi >= 0 && !c->v[bi].given) c->v[bi].i = blocks;
        if (ti >= 0 && !c->v[ti].given) c->v[ti].i = threads;
    }
    return l2p_call_core(c, l2p_check_launch_shape(bi >= 0 ? c->v[bi].i : 1,
                                                   ti >= 0 ? c->v[ti].i : 1));
}

/* The `now` to check an object made in `life` against: the current context's id, asked at
 * most once per launch (*now caches it) and only for an object made in a known context;
 * L2P_LIFE_UNASKED when there is none to ask about or it cannot be told. */
static unsigned long long context_now(const l2p_life *life, unsigned long long *now)
{
    if (!life->ctx) return L2P_LIFE_UNASKED;
    if (!*now) *now = l2p_context_id_current();
    if (!*now) *now = L2P_LIFE_UNASKED;
    return *now;
}

/* Buffers allocated before a device reset point at memory that is gone (or, by now, at
 * someone else's), and such a stream is gone: a launch over them would poison the new context.
 * Each goes through its one check (closed, or made before a reset); one context id query per
 * launch. */
static int check_contexts(l2p_call *c)
{
    unsigned long long now = 0;
    l2p_StreamObject *s = (l2p_StreamObject *)c->stream_obj;
    if (s && l2p_py_stream_usable(s, context_now(&s->lifetime.life, &now)) < 0) return -1;
    for (int i = 0, n = n_args(c->k); i < n; i++) {
        l2p_BufferObject *b = c->k->args[i].type == L2P_A_BUFFER ? c->v[i].buf : NULL;
        if (b && l2p_buffer_usable(b, context_now(l2p_buffer_life(b), &now),
                                   c->k->args[i].name) < 0)
            return -1;
    }
    return 0;
}

/* Launch on the call's device; the previous device is restored only when it differs (the
 * common case of one device then costs no cudaSetDevice). */
static int launch(l2p_call *c)
{
    int prev;
    cudaError_t rc = cudaSuccess;
    const char *what = c->k->name;
    if (l2p_call_core(c, l2p_device_enter(c->device, &prev)) < 0) return -1;
    if (check_contexts(c) < 0) {
        if (prev != c->device) l2p_device_leave(prev);
        return -1;
    }
    if (c->k->flags & L2P_K_SINK) {
        rc = l2p_device_sink(&c->sink);
        what = "cudaGetSymbolAddress(l2p_sink_word)";
    }
    if (rc == cudaSuccess) {
        rc = c->k->launch(c);
        what = c->k->name;
    }
    if (prev != c->device) l2p_device_leave(prev);
    if (rc != cudaSuccess) {
        l2p_fail_cuda(rc, what);
        return l2p_py_raise_int(c->st);
    }
    return 0;
}

static int note_uses(l2p_call *c, int n)
{
    for (int i = 0; i < n; i++)
        if (c->k->args[i].type == L2P_A_BUFFER && c->v[i].buf &&
            l2p_buffer_note_use(c->v[i].buf, c->stream_obj) < 0)
            return -1;
    return 0;
}

static PyObject *bind(PyObject *m, const l2p_kernel *k, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    raw_args r;
    l2p_call c;
    int n = n_args(k), i, ok = -1, checked = 0, launched = 0;
    if (parse(k, args, nargs, kwnames, &r) < 0) return NULL;
    memset(&c, 0, sizeof c);
    c.k = k;
    c.st = l2p_state_from_module(m);
    /* Everything that needs no device first (a machine without one refuses a bad argument
     * by name, not with NoDeviceError), then the buffers, imported for the stream the launch
     * will use (a DLPack producer orders its work before it). */
    for (i = 0; i < n; i++)
        if (k->args[i].type != L2P_A_BUFFER && convert(&c, &k->args[i], r.given[i], &c.v[i]) < 0)
            goto done;
    if (l2p_py_stream_arg(c.st, r.stream, &c.stream, &c.stream_obj) < 0 ||
        l2p_py_window_arg(c.st, r.window, &c.window) < 0)
        goto done;
    c.st->import_stream = c.stream;
    c.st->import_stream_set = 1;
    for (i = 0; i < n; i++)
        if (k->args[i].type == L2P_A_BUFFER && convert(&c, &k->args[i], r.given[i], &c.v[i]) < 0)
            break;
    c.st->import_stream_set = 0;
    if (i < n) goto done;
    if (launch_device(&c, n, r.device) < 0 || stream_on_device(&c) < 0 ||
        launch_shape(&c, n) < 0 || (k->check && k->check(&c) < 0))
        goto done;
    checked = 1;
    if (launch(&c) < 0) goto done;
    launched = 1;
    ok = note_uses(&c, n);
done:
    if (checked && k->after && k->after(&c, launched) < 0) ok = -1;
    release(&c, n);
    return ok < 0 ? NULL : Py_NewRef(Py_None);
}

/* ---- one function per row ---- */

/* METH_FASTCALL functions get the module, not their PyMethodDef: a fixed pool of trampolines
 * maps each to its row's index in the module's kernel table. */
#define L2P_TRAMPOLINE(i)                                                                  \
    static PyObject *trampoline_##i(PyObject *m, PyObject *const *a, Py_ssize_t n,        \
                                    PyObject *kw)                                         \
    {                                                                                     \
        return bind(m, &l2p_state_from_module(m)->kernels[i], a, n, kw);                  \
    }
#define L2P_T4(a, b, c, d) L2P_TRAMPOLINE(a) L2P_TRAMPOLINE(b) L2P_TRAMPOLINE(c) L2P_TRAMPOLINE(d)
L2P_T4(0, 1, 2, 3) L2P_T4(4, 5, 6, 7) L2P_T4(8, 9, 10, 11) L2P_T4(12, 13, 14, 15)
L2P_T4(16, 17, 18, 19) L2P_T4(20, 21, 22, 23) L2P_T4(24, 25, 26, 27) L2P_T4(28, 29, 30, 31)

#define L2P_TP(i) (PyCFunction)(void (*)(void))trampoline_##i
static const PyCFunction trampolines[L2P_MAX_KERNELS] = {
    L2P_TP(0), L2P_TP(1), L2P_TP(2), L2P_TP(3), L2P_TP(4), L2P_TP(5), L2P_TP(6), L2P_TP(7),
    L2P_TP(8), L2P_TP(9), L2P_TP(10), L2P_TP(11), L2P_TP(12), L2P_TP(13), L2P_TP(14),
    L2P_TP(15), L2P_TP(16), L2P_TP(17), L2P_TP(18), L2P_TP(19), L2P_TP(20), L2P_TP(21),
    L2P_TP(22), L2P_TP(23), L2P_TP(24), L2P_TP(25), L2P_TP(26), L2P_TP(27), L2P_TP(28),
    L2P_TP(29), L2P_TP(30), L2P_TP(31)};

/* ---- text signatures ---- */


static int default_text(PyObject *parts, const l2p_arg *a)
{
    if (is_required(a)) return 0;
    if ((a->flags & L2P_A_OPTIONAL) && a->type != L2P_A_OBJECT) return l2p_text_append(parts, "=None");
    switch (a->type) {
    case L2P_A_INT: return l2p_text_append(parts, "=%lld", a->ival);
    case L2P_A_FLOAT: {
        char *s = PyOS_double_to_string(a->fval, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        int rc = s ? l2p_text_append(parts, "=%s", s) : -1;
        PyMem_Free(s);
        return rc;
    }
    case L2P_A_CHOICE: return l2p_text_append(parts, "='%s'", a->choices[a->ival]);
    case L2P_A_BOOL: return l2p_text_append(parts, a->ival ? "=True" : "=False");
    case L2P_A_OBJECT: return l2p_text_append(parts, "=%s", a->deftext);
    default: return 0;
    }
}

static PyObject *arg_type(const l2p_arg *a);

/* One docstring line per argument, from the row: its type and what it accepts. */
static int arg_line(PyObject *parts, const l2p_arg *a)
{
    PyObject *t = arg_type(a);
    int rc = t ? l2p_text_append(parts, "\n    %s (%U): ", a->name, t) : -1;
    Py_XDECREF(t);
    if (rc < 0) return -1;
    switch (a->type) {
    case L2P_A_BUFFER:
        return l2p_text_append(parts, "device memory%s%s%s%s", a->kinds ? ", dtype kind '" : "",
                      a->kinds ? a->kinds : "", a->kinds ? "'" : "",
                      a->align ? ", 16-byte aligned" : "");
    case L2P_A_INT:
        if (a->flags & (L2P_A_BLOCKS | L2P_A_THREADS) && (a->flags & L2P_A_OPTIONAL))
            rc = l2p_text_append(parts, "None: the kernel's default shape; ");
        if (rc < 0) return -1;
        return l2p_text_append(parts, "%s in [%lld, %lld]", (a->flags & L2P_A_POW2) ? "a power of two"
                                                                          : "an int",
                      a->lo, a->hi);
    case L2P_A_CHOICE:
        if (l2p_text_append(parts, "one of") < 0) return -1;
        for (int j = 0; a->choices[j]; j++)
            if (l2p_text_append(parts, "%s '%s'", j ? "," : "", a->choices[j]) < 0) return -1;
        return 0;
    case L2P_A_FLOAT: {
        char range[96] = "";
        if (a->flo != 0.0 || a->fhi != 0.0)
            snprintf(range, sizeof range, " in [%g, %g]", a->flo, a->fhi);
        return l2p_text_append(parts, "a finite real number%s", range);
    }
    case L2P_A_OBJECT: return l2p_text_append(parts, "see the summary");
    default: return l2p_text_append(parts, "see the summary");
    }
}

/* "name(a, b=1, *, c='x', stream=None, window=None)\n--\n\nsummary\n\nArguments: ...". */
static PyObject *make_doc(const l2p_kernel *k)
{
    PyObject *parts = PyList_New(0), *sep, *doc = NULL;
    int n = n_args(k), star = 0;
    if (!parts || l2p_text_append(parts, "%s(", k->name) < 0) goto done;
    for (int i = 0; i < n; i++) {
        const l2p_arg *a = &k->args[i];
        if ((a->flags & L2P_A_KWONLY) && !star && (star = 1) && l2p_text_append(parts, "*, ") < 0) goto done;
        if (l2p_text_append(parts, "%s", a->name) < 0 || default_text(parts, a) < 0 ||
            l2p_text_append(parts, ", ") < 0)
            goto done;
    }
    if ((!star && l2p_text_append(parts, "*, ") < 0) || l2p_text_append(parts, "stream=None") < 0 ||
        (!(k->flags & L2P_K_NO_WINDOW) && l2p_text_append(parts, ", window=None") < 0) ||
        ((k->flags & L2P_K_DEVICE) && l2p_text_append(parts, ", device=None") < 0) ||
        l2p_text_append(parts, ")\n--\n\n%s", k->summary) < 0)
        goto done;
    if (l2p_text_append(parts, "\n\nArguments:") < 0) goto done;
    for (int i = 0; i < n; i++)
        if (arg_line(parts, &k->args[i]) < 0) goto done;
    if (l2p_text_append(parts, "\n    stream (StreamLike): where the kernel runs; None: the legacy "
               "default stream") < 0 ||
        (!(k->flags & L2P_K_NO_WINDOW) &&
         l2p_text_append(parts, "\n    window (AccessPolicyWindow | None): an access policy window for "
                "this launch only (cudaLaunchKernelEx); the stream's own stays") < 0) ||
        ((k->flags & L2P_K_DEVICE) &&
         l2p_text_append(parts, "\n    device (DeviceLike): the device; None: the current one") < 0))
        goto done;
    sep = PyUnicode_FromString("");
    if (sep) doc = PyUnicode_Join(sep, parts);
    Py_XDECREF(sep);
done:
    Py_XDECREF(parts);
    return doc;
}

/* The PyMethodDefs must outlive every function made from them: built once per process from
 * the (static) table and never freed. */
static PyMethodDef *method_defs(const l2p_kernel *kernels, int count)
{
    static PyMethodDef *defs;
    if (defs) return defs;
    PyMethodDef *d = PyMem_RawCalloc((size_t)count + 1, sizeof *d);
    if (!d) return (PyMethodDef *)PyErr_NoMemory();
    for (int i = 0; i < count; i++) {
        PyObject *doc = make_doc(&kernels[i]);
        const char *text = doc ? PyUnicode_AsUTF8(doc) : NULL;
        char *copy = text ? PyMem_RawMalloc(strlen(text) + 1) : NULL;
        if (copy) strcpy(copy, text);
        Py_XDECREF(doc);
        if (!copy) {
            if (!PyErr_Occurred()) PyErr_NoMemory();
            return NULL; /* the partial table leaks once, at a failed import */
        }
        d[i] = (PyMethodDef){kernels[i].name, trampolines[i], METH_FASTCALL | METH_KEYWORDS, copy};
    }
    defs = d;
    return defs;
}

/* The stub's type of a kernel argument (new reference). */
static PyObject *arg_type(const l2p_arg *a)
{
    const char *none = (a->flags & L2P_A_OPTIONAL) ? " | None" : "";
    switch (a->type) {
    case L2P_A_BUFFER: return PyUnicode_FromFormat("BufferLike%s", none);
    case L2P_A_INT: return PyUnicode_FromFormat("int%s", none);
    case L2P_A_FLOAT: return PyUnicode_FromString("float");
    case L2P_A_BOOL: return PyUnicode_FromString("bool");
    case L2P_A_OBJECT: return PyUnicode_FromString(a->pytype ? a->pytype : "object");
    case L2P_A_CHOICE: {
        PyObject *s = PyUnicode_FromString("Literal[");
        for (int i = 0; s && a->choices[i]; i++)
            Py_SETREF(s, PyUnicode_FromFormat("%U%s'%s'", s, i ? ", " : "", a->choices[i]));
        return s ? PyUnicode_FromFormat("%U]", s) : NULL;
    }
    default: return PyUnicode_FromString("object");
    }
}

/* The default as source, or None when required (new reference). */
static PyObject *arg_default(const l2p_arg *a)
{
    if (is_required(a)) Py_RETURN_NONE;
    PyObject *parts = PyList_New(0), *sep = PyUnicode_FromString(""), *text = NULL;
    if (parts && sep && default_text(parts, a) == 0) text = PyUnicode_Join(sep, parts);
    Py_XDECREF(parts);
    Py_XDECREF(sep);
    if (!text) return NULL;
    PyObject *d = PyUnicode_Substring(text, 1, PyUnicode_GET_LENGTH(text)); /* drop the '=' */
    Py_DECREF(text);
    return d;
}

/* The row's signature for the stub (l2p_note_signature), with stream, window, device. */
static int note_kernel(PyObject *m, const l2p_kernel *k)
{
    int n = n_args(k);
    PyObject *params = PyList_New(0), *tuple = NULL;
    for (int i = 0; params && i < n; i++) {
        const l2p_arg *a = &k->args[i];
        PyObject *t = arg_type(a), *d = t ? arg_default(a) : NULL;
        /* keyword-only from the first KWONLY row on, as parse() and make_doc() take it */
        PyObject *item = d ? Py_BuildValue("(sOOs)", a->name, t, d,
                                           i >= n_positional(k, n) ? "keyword_only" : "keyword")
                           : NULL;
        Py_XDECREF(t);
        Py_XDECREF(d);
        if (!item || PyList_Append(params, item) < 0) Py_CLEAR(params);
        Py_XDECREF(item);
    }
    PyObject *extra[3] = {Py_BuildValue("(ssss)", "stream", "StreamLike", "None", "keyword_only"),
                          (k->flags & L2P_K_NO_WINDOW) ? NULL
                              : Py_BuildValue("(ssss)", "window", "AccessPolicyWindow | None",
                                              "None", "keyword_only"),
                          (k->flags & L2P_K_DEVICE) ? Py_BuildValue("(ssss)", "device",
                                                                    "DeviceLike", "None",
                                                                    "keyword_only")
                                                    : NULL};
    for (int i = 0; i < 3; i++) {
        if (params && extra[i] && PyList_Append(params, extra[i]) < 0) Py_CLEAR(params);
        Py_XDECREF(extra[i]);
    }
    if (params) tuple = PyList_AsTuple(params);
    int rc = tuple ? l2p_note_signature(m, k->name, tuple, "None") : -1;
    Py_XDECREF(params);
    Py_XDECREF(tuple);
    return rc;
}

int l2p_add_kernels(PyObject *m, l2p_state *st, const l2p_kernel *kernels)
{
    int count = 0;
    while (kernels[count].name) count++;
    if (count > L2P_MAX_KERNELS) {
        PyErr_SetString(PyExc_SystemError, "l2persist: more kernel rows than trampolines");
        return -1;
    }
    PyMethodDef *defs = method_defs(kernels, count);
    if (!defs) return -1;
    st->kernels = kernels;
    if (PyModule_AddFunctions(m, defs) < 0) return -1;
    for (int i = 0; i < count; i++)
        if (note_kernel(m, &kernels[i]) < 0) return -1;
    return 0;
}
