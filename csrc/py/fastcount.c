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
 * the test and the taking are one step: no other thread's disarm can come between them.
 *
 * CountedSync is installed over the synchronizations the watcher hooks (torch.cuda.synchronize,
 * Stream.synchronize, Event.synchronize): between two replays a sync does nothing in the
 * watcher either, and where it went to Python it also took the count, so the replay after it
 * went to Python too. `ddp` syncs every 100 steps: on two H200s at 77cefa3, 9,020 of the
 * search's 445,045 hooked calls reached the watcher, at about 13 us each, and by the count of
 * its syncs about 8,800 of them were a sync or the replay after one: some 0.47 % of the wall,
 * nine tenths of the hooks' share. A sync the count is armed for on this thread adds one to
 * the count's `syncs` and leaves it armed. */
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
    Py_ssize_t syncs;     /* synchronizations counted since armed (CountedSync) */
    unsigned long thread; /* the counting thread (threading.get_ident()) */
    PyObject *ref;        /* a weak reference to the graph, or NULL */
    PyObject *seen;       /* the watcher's record of the graph, handed back at disarm */
} l2p_CountObject;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    l2p_CountObject *count;
    PyObject *original; /* the replay counted calls go to */
    PyObject *slow;     /* every other call: the Python hook (CountedSync: called after it) */
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

/* CountedSync's branch, once the sync returned: whether the count is still armed on this
 * thread (another thread's call to the watcher may have taken it while the sync waited, with
 * the GIL let go); if so the sync is counted there. */
static int count_takes_sync(l2p_CountObject *c)
{
    if (c->left <= 0 || !c->ref || PyThread_get_thread_ident() != c->thread) return 0;
    c->syncs++;
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
    c->syncs = 0;
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
    PyObject *out = Py_BuildValue("(nnO)", c->done, c->syncs, c->seen ? c->seen : Py_None);
    if (out) count_disarm(c);
    return out;
}
L2P_NOARGS_METHOD(count_disarm_fn, count_disarm_m, "disarm",
                  "Nothing armed from here; returns (replays counted, synchronizations counted, "
                  "the graph's record).", "tuple[int, int, object]");

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

static PyObject *count_get_syncs(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(COUNT(self)->syncs);
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
    {"syncs", count_get_syncs, NULL, "int: Synchronizations counted since armed.", NULL},
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

/* Whether a collection cleared it (a finalizer in the same garbage calling it), said as an
 * error. */
static int hook_cleared(PyObject *self)
{
    if (HOOK(self)->slow) return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: called after it was cleared", Py_TYPE(self)->tp_name);
    return 1;
}

/* A call: args[0] is the graph (the instance, as for any method). */
static PyObject *hook_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames)
{
    l2p_CountedReplayObject *h = HOOK(self);
    if (hook_cleared(self)) return NULL;
    if (PyVectorcall_NARGS(nargsf) >= 1 && count_takes(h->count, args[0]))
        return PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    return PyObject_Vectorcall(h->slow, args, nargsf, kwnames);
}

/* A synchronization: the original first, with the same arguments; once it returned, counted
 * where the count is still armed on this thread, else the Python hook called with none (as
 * torch.patch_after's wrapper calls it: not where the sync raised). */
static PyObject *sync_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames)
{
    l2p_CountedReplayObject *h = HOOK(self);
    if (hook_cleared(self)) return NULL;
    PyObject *r = PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    /* cleared while the sync waited (cannot happen while a caller holds it): the sync ran,
     * and there is no hook left to call */
    if (!r || !h->slow || count_takes_sync(h->count)) return r;
    PyObject *after = PyObject_CallNoArgs(h->slow);
    if (!after) Py_CLEAR(r);
    Py_XDECREF(after);
    return r;
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

/* Either type's object: `call` is its vectorcall. */
static PyObject *hook_make(PyObject *type, const hook_new_args *a, vectorcallfunc call)
{
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
    h->vectorcall = call;
    h->count = (l2p_CountObject *)Py_NewRef(a->count);
    h->original = Py_NewRef(a->original);
    h->slow = Py_NewRef(a->slow);
    return (PyObject *)h;
}

static PyObject *hook_new_impl(PyObject *type, const void *args)
{
    return hook_make(type, args, hook_vectorcall);
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

typedef struct {
    PyObject *count, *original, *after;
} sync_new_args;

static PyObject *sync_new_impl(PyObject *type, const void *args)
{
    const sync_new_args *a = args;
    hook_new_args h = {a->count, a->original, a->after};
    return hook_make(type, &h, sync_vectorcall);
}
L2P_DEFINE_FN(sync_new_fn, sync_new_args, sync_new_impl, "CountedSync",
              "A synchronization that counts before any Python runs: `original` is called with "
              "the arguments given; once it returned, the call is counted where `count` is armed "
              "on this thread, and `after` is called (no arguments) where it is not.",
              "CountedSync",
              L2P_PARAM(sync_new_args, count, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "ReplayCount", .doc = "the count it adds to"),
              L2P_PARAM(sync_new_args, original, L2P_P_CALLABLE, .flags = L2P_P_REQUIRED,
                        .pytype = "Callable[..., object]",
                        .doc = "the synchronization, called first"),
              L2P_PARAM(sync_new_args, after, L2P_P_CALLABLE, .flags = L2P_P_REQUIRED,
                        .pytype = "Callable[[], object]",
                        .doc = "the hook called after a synchronization not counted"));

static PyObject *sync_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return l2p_fn_call_tuple(&sync_new_fn, (PyObject *)type, args, kw);
}

/* A field read from Python: None once a collection cleared it. */
static PyObject *hook_field(PyObject *o)
{
    return Py_NewRef(o ? o : Py_None);
}

static PyObject *hook_get_count(PyObject *self, void *c)
{
    (void)c;
    return hook_field((PyObject *)HOOK(self)->count);
}

static PyObject *hook_get_original(PyObject *self, void *c)
{
    (void)c;
    return hook_field(HOOK(self)->original);
}

static PyObject *hook_get_slow(PyObject *self, void *c)
{
    (void)c;
    return hook_field(HOOK(self)->slow);
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

/* CountedSync's: the same object, its Python hook called after the sync */
static PyGetSetDef sync_getset[] = {
    {"count", hook_get_count, NULL, "ReplayCount: The count it adds to.", NULL},
    {"original", hook_get_original, NULL, "object: The synchronization, called first.", NULL},
    {"after", hook_get_slow, NULL, "object: The hook called after a sync not counted.", NULL},
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

static PyType_Slot sync_slots[] = {
    {Py_tp_doc, NULL}, /* from sync_new_fn */
    {Py_tp_new, sync_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, hook_descr_get}, /* Stream.synchronize: bound as a method is */
    {Py_tp_getset, sync_getset},
    {Py_tp_members, hook_members},
    {Py_tp_methods, hook_methods},
    {Py_tp_traverse, hook_traverse},
    {Py_tp_clear, hook_clear},
    {Py_tp_dealloc, hook_dealloc},
    {0, NULL}};

static PyType_Spec sync_spec = {"l2persist._core.CountedSync", sizeof(l2p_CountedReplayObject),
                                0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                    Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_VECTORCALL |
                                    Py_TPFLAGS_METHOD_DESCRIPTOR,
                                sync_slots};

int l2p_add_fastcount_types(PyObject *m, l2p_state *st)
{
    st->ReplayCount = l2p_make_type_rows(m, &count_spec, &count_new_fn, count_rows);
    if (!st->ReplayCount) return -1;
    const PyType_Spec *specs[] = {&hook_spec, &sync_spec};
    const l2p_fn *ctors[] = {&hook_new_fn, &sync_new_fn};
    for (int i = 0; i < 2; i++) {
        PyTypeObject *t = l2p_make_type_rows(m, (PyType_Spec *)specs[i], ctors[i], NULL);
        if (!t) return -1;
        Py_DECREF(t);
    }
    return 0;
}
