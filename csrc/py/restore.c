/* Context managers that change global state and put it back: the persisting-L2 set-aside,
 * a stream's access policy window, and stream capture into a Graph. Each is single-use, and
 * its __exit__ restores what __enter__ changed also when an exception passes through. */
#include "l2p_py.h"

#include "l2p_release.h"
#include "params.h"

#include "l2p_window.h"

typedef enum { SCOPE_PERSISTING, SCOPE_POLICY, SCOPE_CAPTURE } scope_kind;

typedef struct {
    PyObject_HEAD
    scope_kind kind;
    int state; /* 0 new, 1 entered, 2 exited */
    /* persisting */
    int device;
    long long size;
    size_t previous_limit;
    /* policy and capture */
    PyObject *stream;
    PyObject *window;
    l2p_window previous_window;
    int reset;
    PyObject *graph;
    int gc_held; /* capture: this scope holds Python's cyclic GC off (gc_hold) */
} l2p_ScopeObject;

/* Python's cyclic GC stays off while any of our captures runs. A collection inside a capture
 * runs finalizers of unrelated objects, and a PyTorch CUDAGraph's destroys the graph it owns:
 * an unsafe call that invalidates a capture in progress (a full GPU run on an H200 failed so
 * at cudaStreamEndCapture, "operation not permitted when stream is capturing (function
 * reset)"). torch.cuda.graph collects before it captures for the same reason. Under the GIL
 * one count serves every thread; the GC is turned back on only if it was on. */
static int gc_holders, gc_was_enabled;

void l2p_py_gc_hold(void)
{
    if (gc_holders++ == 0) gc_was_enabled = PyGC_Disable();
}

void l2p_py_gc_release(void)
{
    if (gc_holders > 0 && --gc_holders == 0 && gc_was_enabled) PyGC_Enable();
}

static void gc_hold(l2p_ScopeObject *s)
{
    l2p_py_gc_hold();
    s->gc_held = 1;
}

static void gc_release(l2p_ScopeObject *s)
{
    if (!s->gc_held) return;
    s->gc_held = 0;
    l2p_py_gc_release();
}

static l2p_ScopeObject *scope_alloc(l2p_state *st, scope_kind kind)
{
    l2p_ScopeObject *s = PyObject_GC_New(l2p_ScopeObject, st->Scope);
    if (!s) return NULL;
    s->kind = kind;
    s->state = 0;
    s->device = 0;
    s->size = 0;
    s->previous_limit = 0;
    s->stream = s->window = s->graph = NULL;
    s->reset = 0;
    s->gc_held = 0;
    memset(&s->previous_window, 0, sizeof s->previous_window);
    PyObject_GC_Track(s);
    return s;
}

PyObject *l2p_scope_persisting(l2p_state *st, int device, long long size)
{
    l2p_ScopeObject *s = scope_alloc(st, SCOPE_PERSISTING);
    if (s) {
        s->device = device;
        s->size = size;
    }
    return (PyObject *)s;
}

PyObject *l2p_scope_policy(l2p_state *st, PyObject *stream, PyObject *window, int reset)
{
    l2p_ScopeObject *s = scope_alloc(st, SCOPE_POLICY);
    if (s) {
        s->stream = Py_NewRef(stream);
        s->window = Py_NewRef(window);
        s->reset = reset;
    }
    return (PyObject *)s;
}

PyObject *l2p_scope_capture(l2p_state *st, PyObject *stream)
{
    l2p_ScopeObject *s = scope_alloc(st, SCOPE_CAPTURE);
    if (s) s->stream = Py_NewRef(stream);
    return (PyObject *)s;
}

static l2p_state *scope_state(l2p_ScopeObject *s) { return l2p_state_from_type(Py_TYPE(s)); }
static l2p_StreamObject *scope_stream(l2p_ScopeObject *s) { return (l2p_StreamObject *)s->stream; }

static PyObject *enter_persisting(l2p_ScopeObject *s)
{
    size_t granted;
    if (l2p_device_get_persisting_limit(s->device, &s->previous_limit) != L2P_OK ||
        l2p_device_set_persisting_limit(s->device, s->size, &granted) != L2P_OK)
        return l2p_py_raise(scope_state(s));
    return PyLong_FromSize_t(granted);
}

static PyObject *enter_policy(l2p_ScopeObject *s)
{
    const l2p_window *w;
    l2p_StreamObject *stream = scope_stream(s);
    if (l2p_py_stream_usable(stream, L2P_LIFE_UNASKED) < 0 ||
        l2p_py_window_arg(scope_state(s), s->window, &w) < 0)
        return NULL;
    cudaStream_t h = l2p_py_stream_handle(stream);
    int device = l2p_py_stream_device(stream);
    if (l2p_stream_get_window(device, h, &s->previous_window) != L2P_OK ||
        l2p_stream_set_window(device, h, w) != L2P_OK)
        return l2p_py_raise(scope_state(s));
    return Py_NewRef(s->window);
}

static PyObject *enter_capture(l2p_ScopeObject *s)
{
    l2p_StreamObject *stream = scope_stream(s);
    if (l2p_py_stream_usable(stream, L2P_LIFE_UNASKED) < 0) return NULL;
    if (stream->capture_refs)
        return PyErr_Format(PyExc_ValueError, "stream: this Stream is already capturing");
    PyObject *refs = PyList_New(0);
    /* The Graph exists from __enter__ on, so `as graph` names it; it is filled at exit. It
     * is made before the capture begins: a failure then leaves no stream capturing. */
    s->graph = refs ? l2p_graph_new(scope_state(s), NULL, l2p_py_stream_device(stream), NULL)
                    : NULL;
    if (!s->graph) {
        Py_XDECREF(refs);
        return NULL;
    }
    gc_hold(s);
    if (l2p_capture_begin(l2p_py_stream_handle(stream)) != L2P_OK) {
        gc_release(s);
        Py_DECREF(refs);
        Py_CLEAR(s->graph);
        return l2p_py_raise(scope_state(s));
    }
    stream->capture_refs = refs;
    return Py_NewRef(s->graph);
}

static PyObject *scope_enter(PyObject *self, PyObject *noargs)
{
    l2p_ScopeObject *s = (l2p_ScopeObject *)self;
    PyObject *r = NULL;
    (void)noargs;
    if (s->state != 0)
        return PyErr_Format(PyExc_RuntimeError, "this context manager was already entered; "
                            "make a new one for each with-block");
    switch (s->kind) {
    case SCOPE_PERSISTING: r = enter_persisting(s); break;
    case SCOPE_POLICY: r = enter_policy(s); break;
    case SCOPE_CAPTURE: r = enter_capture(s); break;
    }
    if (r) s->state = 1;
    return r;
}

/* The one restore of the persisting state: demote persisting lines, then put the limit back.
 * Reset first: lines marked persisting would otherwise stay so under the old limit. Both are
 * attempted; the first failure is reported. */
static l2p_status restore_persisting(int device, long long limit, size_t *granted)
{
    l2p_status st = l2p_device_reset_persisting(device);
    l2p_status st2 = l2p_device_set_persisting_limit(device, limit, granted);
    return st != L2P_OK ? st : st2;
}

static l2p_status exit_persisting(l2p_ScopeObject *s)
{
    size_t granted;
    return restore_persisting(s->device, (long long)s->previous_limit, &granted);
}

typedef struct {
    int device;
    long long limit;
} restore_args;

static PyObject *restore_persisting_l2_impl(PyObject *m, const void *args)
{
    const restore_args *a = args;
    size_t granted = 0;
    if (restore_persisting(a->device, a->limit, &granted) != L2P_OK)
        return l2p_py_raise(l2p_state_from_module(m));
    return PyLong_FromSize_t(granted);
}
L2P_DEFINE_FN(restore_persisting_l2_fn, restore_args, restore_persisting_l2_impl,
              "restore_persisting_l2",
              "Put a device's persisting state back as Device.persisting_l2() does on exit: "
              "reset persisting lines (cudaCtxResetPersistingL2Cache), then set the limit to "
              "`limit`; returns the bytes granted. For code that changes the state outside a "
              "with-block (the tuner, the studies).", "int",
              L2P_PARAM(restore_args, device, L2P_P_DEVICE, .flags = L2P_P_REQUIRED,
                        .doc = "the device (index or Device)"),
              L2P_PARAM(restore_args, limit, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = LLONG_MAX, .what = "bytes",
                        .doc = "the persisting limit to put back (e.g. the one read before)"));

const l2p_fn *const l2p_restore_fns[] = {&restore_persisting_l2_fn, NULL};

static l2p_status exit_policy(l2p_ScopeObject *s)
{
    l2p_StreamObject *stream = scope_stream(s);
    if (l2p_py_stream_closed(stream)) return L2P_OK; /* nothing left to restore */
    l2p_status st = l2p_stream_set_window(l2p_py_stream_device(stream),
                                          l2p_py_stream_handle(stream), &s->previous_window);
    if (st == L2P_OK && s->reset) st = l2p_device_reset_persisting(l2p_py_stream_device(stream));
    return st;
}

/* End capture whatever happened; hand the graph and the kept objects to the Graph. */
static l2p_status exit_capture(l2p_ScopeObject *s, int failing)
{
    l2p_StreamObject *stream = scope_stream(s);
    l2p_GraphObject *g = (l2p_GraphObject *)s->graph;
    cudaGraph_t graph = NULL;
    PyObject *refs = stream->capture_refs;
    stream->capture_refs = NULL;
    l2p_status st = l2p_capture_end(l2p_py_stream_handle(stream), &graph);
    gc_release(s);
    if (st == L2P_OK && failing) {
        /* an exception passed: keep nothing half-recorded (a capture-safe release) */
        if (l2p_release(l2p_py_stream_device(stream), L2P_RELEASE_GRAPH, graph) != L2P_OK)
            l2p_clear_error();
        graph = NULL;
    }
    l2p_graph_adopt(&g->g, graph);
    Py_XSETREF(g->refs, refs);
    if (!graph) g->closed = 1;
    return st;
}

static PyObject *scope_exit_impl(PyObject *self, const void *args)
{
    l2p_ScopeObject *s = (l2p_ScopeObject *)self;
    PyObject *type = ((const l2p_exit_args *)args)->exc_type;
    l2p_status st = L2P_OK;
    if (s->state != 1) Py_RETURN_FALSE;
    s->state = 2;
    switch (s->kind) {
    case SCOPE_PERSISTING: st = exit_persisting(s); break;
    case SCOPE_POLICY: st = exit_policy(s); break;
    case SCOPE_CAPTURE: st = exit_capture(s, type != Py_None); break;
    }
    /* Report a failed restore only when no exception is already on its way out: the user's
     * exception says more, and the restore was attempted either way. */
    if (st != L2P_OK && type == Py_None) return l2p_py_raise(scope_state(s));
    Py_RETURN_FALSE;
}

static int scope_traverse(PyObject *self, visitproc visit, void *arg)
{
    l2p_ScopeObject *s = (l2p_ScopeObject *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(s->stream);
    Py_VISIT(s->window);
    Py_VISIT(s->graph);
    return 0;
}

static int scope_clear(PyObject *self)
{
    l2p_ScopeObject *s = (l2p_ScopeObject *)self;
    Py_CLEAR(s->stream);
    Py_CLEAR(s->window);
    Py_CLEAR(s->graph);
    return 0;
}

static void scope_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    gc_release((l2p_ScopeObject *)self); /* entered, never exited */
    scope_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

L2P_NOARGS_METHOD(scope_enter_fn, scope_enter, "__enter__", "Applies the change; returns "
                  "what the scope yields (the granted bytes, the window, or the Graph).",
                  "object");
L2P_DEFINE_FN(scope_exit_fn, l2p_exit_args, scope_exit_impl, "__exit__",
              "Restores what __enter__ changed, also when an exception passes through.", "bool",
              L2P_PARAM(l2p_exit_args, exc_type, L2P_P_OBJECT, .flags = L2P_P_POSONLY,
                        .pytype = "type[BaseException] | None",
                        .doc = "the exception's type, if one is passing (a capture is then "
                        "dropped)"),
              L2P_PARAM(l2p_exit_args, exc, L2P_P_OBJECT, .flags = L2P_P_POSONLY,
                        .pytype = "BaseException | None", .doc = "the exception"),
              L2P_PARAM(l2p_exit_args, tb, L2P_P_OBJECT, .flags = L2P_P_POSONLY,
                        .pytype = "object", .doc = "its traceback"));
static const l2p_fn *const scope_rows[] = {&scope_enter_fn, &scope_exit_fn, NULL};

static PyMethodDef scope_methods[] = {{NULL, NULL, 0, NULL}};

static PyType_Slot scope_slots[] = {
    {Py_tp_doc, "A single-use context manager that restores what it changed."},
    {Py_tp_methods, scope_methods},
    {Py_tp_traverse, scope_traverse},
    {Py_tp_clear, scope_clear},
    {Py_tp_dealloc, scope_dealloc},
    {0, NULL}};

static PyType_Spec scope_spec = {"l2persist._Scope", sizeof(l2p_ScopeObject), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                     Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
                                 scope_slots};

int l2p_add_scope_type(PyObject *m, l2p_state *st)
{
    st->Scope = l2p_make_type_rows(m, &scope_spec, NULL, scope_rows);
    return st->Scope ? 0 : -1;
}
