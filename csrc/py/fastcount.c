/* The replays that only count, counted before any Python runs (l2persist/process/fastcount.py
 * is the watcher's side: when to arm, what a count adds).
 *
 * While advise searches, most of a program's graph replays only count one unit of the block
 * or rest under way. Under torchrun every one of them is hooked (the ranks must count the same
 * calls), and at 18,000 steps a second a Python hook costs the program whole per cent: on two
 * H200s at f0fb25a the count kept in Python took 0.27 us a call by its own clock, and its outer
 * frames (the replay wrapper, the bootstrap's hook) as much again, uncounted.
 *
 * ReplayCount is the armed count: the next `left` replays of one graph (a weak reference) on
 * one thread. CountedReplay is installed as CUDAGraph.replay: a method descriptor whose call
 * tests the count and, where armed for this graph on this thread, takes one and calls the
 * original replay; any other call goes to the Python hook (`slow`) as before. Under the GIL
 * the test and the taking are one step: no other thread's disarm can come between them. */
#include "l2p_py.h"

#include <limits.h>

#include "params.h"

#ifndef Py_T_PYSSIZET /* the names before 3.12 */
#include <structmember.h>
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_READONLY READONLY
#endif

typedef struct {
    PyObject_HEAD
    Py_ssize_t left;      /* replays still to count; 0: none (disarmed) */
    Py_ssize_t done;      /* counted since armed */
    unsigned long thread; /* the counting thread (threading.get_ident()) */
    PyObject *ref;        /* a weak reference to the graph, or NULL */
    PyObject *seen;       /* the watcher's record of the graph, handed back at disarm */
} l2p_CountObject;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    l2p_CountObject *count;
    PyObject *original; /* the replay counted calls go to */
    PyObject *slow;     /* every other call: the Python hook around the original */
    /* as a function has: the original's name, qualname, doc and __wrapped__ copied here
     * (functools.update_wrapper), and weak references (weakref.WeakMethod of a bound replay) */
    PyObject *dict;
    PyObject *weakrefs;
} l2p_CountedReplayObject;

#define COUNT(o) ((l2p_CountObject *)(o))

/* The graph `ref` refers to (borrowed), or NULL where it is gone or nothing is armed. */
static PyObject *counted_graph(PyObject *ref)
{
    if (!ref) return NULL;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *g = NULL;
    if (PyWeakref_GetRef(ref, &g) < 0) {
        PyErr_Clear();
        return NULL;
    }
    Py_XDECREF(g); /* compared by identity only; the caller holds the graph itself */
    return g;
#else
    PyObject *g = PyWeakref_GetObject(ref);
    return g == Py_None ? NULL : g;
#endif
}

/* The hook's branch: one replay of `graph` taken from the count where it is armed for it on
 * this thread. */
static int count_takes(l2p_CountObject *c, PyObject *graph)
{
    if (c->left <= 0 || counted_graph(c->ref) != graph ||
        PyThread_get_thread_ident() != c->thread)
        return 0;
    c->left--;
    c->done++;
    return 1;
}

/* Nothing armed; the old references go last, once the count is whole again (their release
 * may run code that arms this count anew). */
static void count_set(l2p_CountObject *c, Py_ssize_t left, PyObject *ref, unsigned long thread,
                      PyObject *seen)
{
    PyObject *old_ref = c->ref, *old_seen = c->seen;
    c->left = 0;
    c->done = 0;
    c->thread = thread;
    c->ref = Py_XNewRef(ref);
    c->seen = Py_XNewRef(seen);
    c->left = left; /* last, as a reader of the count would want it */
    Py_XDECREF(old_ref);
    Py_XDECREF(old_seen);
}

static void count_disarm(l2p_CountObject *c)
{
    count_set(c, 0, NULL, 0, NULL);
}

/* ---- ReplayCount ---------------------------------------------------------------------- */

static PyObject *count_new_impl(PyObject *type, const void *args)
{
    (void)args;
    return ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
}
L2P_DEFINE_FN(count_new_fn, l2p_no_args, count_new_impl, "ReplayCount",
              "The armed count of the replays that only count a unit (l2persist/process/"
              "fastcount.py): nothing armed when made.", "ReplayCount", L2P_NO_PARAMS);

static PyObject *count_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return l2p_fn_call_tuple(&count_new_fn, (PyObject *)type, args, kw);
}

typedef struct {
    long long left;
    PyObject *ref;
    PyObject *thread;
    PyObject *seen;
} arm_args;

static PyObject *count_arm_impl(PyObject *self, const void *args)
{
    const arm_args *a = args;
    if (!PyWeakref_CheckRef(a->ref)) {
        PyErr_Format(PyExc_TypeError, "ref: a weak reference to the graph (weakref.ref), "
                     "not %.100s", Py_TYPE(a->ref)->tp_name);
        return NULL;
    }
    /* an identifier is a C unsigned long (a pthread_t here): all of its range */
    unsigned long thread = PyLong_Check(a->thread) ? PyLong_AsUnsignedLong(a->thread) : 0;
    if (!PyLong_Check(a->thread) || (thread == (unsigned long)-1 && PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "thread: a thread identifier (threading.get_ident(): "
                     "an int in [0, %lu]), not %R", ULONG_MAX, a->thread);
        return NULL;
    }
    count_set(COUNT(self), (Py_ssize_t)a->left, a->ref, thread, a->seen);
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(count_arm_fn, arm_args, count_arm_impl, "arm",
              "Arms the count for the next `left` replays of the graph `ref` refers to, on the "
              "thread `thread`; what was counted before is dropped (take it first).", "None",
              L2P_PARAM(arm_args, left, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = PY_SSIZE_T_MAX, .what = "replays",
                        .doc = "how many replays it may count"),
              L2P_PARAM(arm_args, ref, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "object",
                        .doc = "a weak reference to the graph counted"),
              L2P_PARAM(arm_args, thread, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "int", .doc = "the counting thread's threading.get_ident()"),
              L2P_PARAM(arm_args, seen, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "object",
                        .doc = "the watcher's record of the graph, handed back by disarm"));

static PyObject *count_disarm_m(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    l2p_CountObject *c = COUNT(self);
    PyObject *out = Py_BuildValue("(nO)", c->done, c->seen ? c->seen : Py_None);
    if (out) count_disarm(c);
    return out;
}
L2P_NOARGS_METHOD(count_disarm_fn, count_disarm_m, "disarm",
                  "Nothing armed from here; returns (replays counted, the graph's record).",
                  "tuple[int, object]");

static PyObject *count_counts(PyObject *self, PyObject *graph)
{
    return PyBool_FromLong(count_takes(COUNT(self), graph));
}
L2P_ONE_ARG_METHOD(count_counts_fn, count_counts, "counts",
                   "The hook's branch: takes one replay of `graph` where the count is armed for "
                   "it on this thread, and says whether it did.", "bool", "graph", "object",
                   "the graph replayed");

static PyObject *count_get_left(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(COUNT(self)->left);
}

static PyObject *count_get_done(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(COUNT(self)->done);
}

static PyObject *count_get_thread(PyObject *self, void *c)
{
    (void)c;
    return COUNT(self)->ref ? PyLong_FromUnsignedLong(COUNT(self)->thread) : Py_NewRef(Py_None);
}

static PyObject *count_get_seen(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(COUNT(self)->seen ? COUNT(self)->seen : Py_None);
}

static PyObject *count_get_armed(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(COUNT(self)->ref != NULL);
}

static int count_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(COUNT(self)->ref);
    Py_VISIT(COUNT(self)->seen);
    return 0;
}

static int count_clear(PyObject *self)
{
    count_disarm(COUNT(self));
    return 0;
}

static void count_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    count_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef count_getset[] = {
    {"left", count_get_left, NULL, "int: Replays it may still count (0: none).", NULL},
    {"done", count_get_done, NULL, "int: Replays counted since armed.", NULL},
    {"thread", count_get_thread, NULL, "int | None: The counting thread, where armed.", NULL},
    {"seen", count_get_seen, NULL, "object: The watcher's record of the graph, where armed.",
     NULL},
    {"armed", count_get_armed, NULL, "bool: Whether arm() was called since the last disarm().",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static const l2p_fn *const count_rows[] = {&count_arm_fn, &count_disarm_fn, &count_counts_fn,
                                           NULL};
static PyMethodDef count_methods[] = {{NULL, NULL, 0, NULL}};

static PyType_Slot count_slots[] = {
    {Py_tp_doc, NULL}, /* from count_new_fn */
    {Py_tp_new, count_new},
    {Py_tp_getset, count_getset},
    {Py_tp_methods, count_methods},
    {Py_tp_traverse, count_traverse},
    {Py_tp_clear, count_clear},
    {Py_tp_dealloc, count_dealloc},
    {0, NULL}};

static PyType_Spec count_spec = {"l2persist._core.ReplayCount", sizeof(l2p_CountObject), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                     Py_TPFLAGS_IMMUTABLETYPE,
                                 count_slots};

/* ---- CountedReplay -------------------------------------------------------------------- */

#define HOOK(o) ((l2p_CountedReplayObject *)(o))

/* A call: args[0] is the graph (the instance, as for any method). */
static PyObject *hook_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames)
{
    l2p_CountedReplayObject *h = HOOK(self);
    if (!h->slow) { /* cleared by a collection (a finalizer in the same garbage calling it) */
        PyErr_SetString(PyExc_RuntimeError, "CountedReplay: called after it was cleared");
        return NULL;
    }
    if (PyVectorcall_NARGS(nargsf) >= 1 && count_takes(h->count, args[0]))
        return PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    return PyObject_Vectorcall(h->slow, args, nargsf, kwnames);
}

/* As a function: from the class, itself; from an instance, bound to it. */
static PyObject *hook_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

typedef struct {
    PyObject *count, *original, *slow;
} hook_new_args;

static PyObject *hook_new_impl(PyObject *type, const void *args)
{
    const hook_new_args *a = args;
    l2p_state *st = l2p_state_from_type((PyTypeObject *)type);
    if (!st) return NULL;
    if (!PyObject_TypeCheck(a->count, st->ReplayCount)) {
        PyErr_Format(PyExc_TypeError, "count: a ReplayCount, not %.100s",
                     Py_TYPE(a->count)->tp_name);
        return NULL;
    }
    l2p_CountedReplayObject *h =
        (l2p_CountedReplayObject *)((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    if (!h) return NULL;
    h->vectorcall = hook_vectorcall;
    h->count = (l2p_CountObject *)Py_NewRef(a->count);
    h->original = Py_NewRef(a->original);
    h->slow = Py_NewRef(a->slow);
    return (PyObject *)h;
}
L2P_DEFINE_FN(hook_new_fn, hook_new_args, hook_new_impl, "CountedReplay",
              "A replay method that counts before any Python runs: a call on a graph and thread "
              "`count` is armed for takes one replay from it and calls `original`; every other "
              "call goes to `slow` (the Python hook), with the same arguments.", "CountedReplay",
              L2P_PARAM(hook_new_args, count, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "ReplayCount", .doc = "the count it takes from"),
              L2P_PARAM(hook_new_args, original, L2P_P_CALLABLE, .flags = L2P_P_REQUIRED,
                        .pytype = "Callable[..., object]",
                        .doc = "the replay a counted call goes to (self first)"),
              L2P_PARAM(hook_new_args, slow, L2P_P_CALLABLE, .flags = L2P_P_REQUIRED,
                        .pytype = "Callable[..., object]",
                        .doc = "the hook every other call goes to (self first)"));

static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return l2p_fn_call_tuple(&hook_new_fn, (PyObject *)type, args, kw);
}

static PyObject *hook_get_count(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef((PyObject *)HOOK(self)->count);
}

static PyObject *hook_get_original(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(HOOK(self)->original);
}

static PyObject *hook_get_slow(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(HOOK(self)->slow);
}

static int hook_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT((PyObject *)HOOK(self)->count);
    Py_VISIT(HOOK(self)->original);
    Py_VISIT(HOOK(self)->slow);
    Py_VISIT(HOOK(self)->dict);
    return 0;
}

static int hook_clear(PyObject *self)
{
    Py_CLEAR(HOOK(self)->slow); /* first: the call's guard (a release below may call it) */
    Py_CLEAR(HOOK(self)->count);
    Py_CLEAR(HOOK(self)->original);
    Py_CLEAR(HOOK(self)->dict);
    return 0;
}

static void hook_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (HOOK(self)->weakrefs) PyObject_ClearWeakRefs(self);
    hook_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef hook_getset[] = {
    {"count", hook_get_count, NULL, "ReplayCount: The count it takes from.", NULL},
    {"original", hook_get_original, NULL, "object: The replay a counted call goes to.", NULL},
    {"slow", hook_get_slow, NULL, "object: The hook every other call goes to.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef hook_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(l2p_CountedReplayObject, vectorcall),
     Py_READONLY, NULL},
    {"__dictoffset__", Py_T_PYSSIZET, offsetof(l2p_CountedReplayObject, dict), Py_READONLY,
     NULL},
    {"__weaklistoffset__", Py_T_PYSSIZET, offsetof(l2p_CountedReplayObject, weakrefs),
     Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyMethodDef hook_methods[] = {{NULL, NULL, 0, NULL}};

static PyType_Slot hook_slots[] = {
    {Py_tp_doc, NULL}, /* from hook_new_fn */
    {Py_tp_new, hook_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, hook_descr_get},
    {Py_tp_getset, hook_getset},
    {Py_tp_members, hook_members},
    {Py_tp_methods, hook_methods},
    {Py_tp_traverse, hook_traverse},
    {Py_tp_clear, hook_clear},
    {Py_tp_dealloc, hook_dealloc},
    {0, NULL}};

/* METHOD_DESCRIPTOR: obj.replay() calls it with obj first, no bound method made (a function's
 * own shortcut); the binding above gives the same call. */
static PyType_Spec hook_spec = {"l2persist._core.CountedReplay", sizeof(l2p_CountedReplayObject),
                                0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                    Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_VECTORCALL |
                                    Py_TPFLAGS_METHOD_DESCRIPTOR,
                                hook_slots};

int l2p_add_fastcount_types(PyObject *m, l2p_state *st)
{
    st->ReplayCount = l2p_make_type_rows(m, &count_spec, &count_new_fn, count_rows);
    if (!st->ReplayCount) return -1;
    PyTypeObject *hook = l2p_make_type_rows(m, &hook_spec, &hook_new_fn, NULL);
    if (!hook) return -1;
    Py_DECREF(hook);
    return 0;
}
