/* l2persist.AccessPolicyWindow and plan_windows(): Python faces of l2p_policy. */
#include "l2p_py.h"
#include "params.h"

#include "l2p_checks.h"

static l2p_state *win_state(PyObject *self) { return l2p_state_from_type(Py_TYPE(self)); }

PyObject *l2p_window_new(l2p_state *st, const l2p_window *w, PyObject *target)
{
    l2p_WindowObject *o = PyObject_GC_New(l2p_WindowObject, st->AccessPolicyWindow);
    if (!o) return NULL;
    o->w = *w;
    o->target = Py_NewRef(target ? target : Py_None);
    PyObject_GC_Track(o);
    return (PyObject *)o;
}

typedef struct {
    PyObject *target;
    l2p_opt num_bytes;
    long long offset;
    double hit_ratio;
    long long hit_prop, miss_prop;
    int clamp;
} win_new_args;

static PyObject *win_new_impl(PyObject *type, const void *args)
{
    const win_new_args *a = args;
    size_t max_window = 0;
    l2p_window w;
    l2p_state *st = l2p_state_from_type((PyTypeObject *)type);
    /* the window's own values first: converting a foreign target asks the driver */
    if (l2p_check_window_rule(a->hit_ratio, (int)a->hit_prop, (int)a->miss_prop) != L2P_OK)
        return l2p_py_raise(st);
    PyObject *buf = l2p_buffer_as_buffer(st, a->target, "target");
    if (!buf) return NULL;
    l2p_BufferObject *b = (l2p_BufferObject *)buf;
    if (l2p_device_max_window(b->device, &max_window) != L2P_OK ||
        l2p_policy_make_window((uintptr_t)b->ptr, b->nbytes, a->offset,
                               a->num_bytes.given ? a->num_bytes.i : -1, a->hit_ratio,
                               (int)a->hit_prop, (int)a->miss_prop, max_window, a->clamp,
                               &w) != L2P_OK) {
        Py_DECREF(buf);
        return l2p_py_raise(st);
    }
    PyObject *o = l2p_window_new(st, &w, buf);
    Py_DECREF(buf);
    return o;
}
/* The properties' range is the core's to check (l2p_policy_make_window names the value). */
L2P_DEFINE_FN(win_new_fn, win_new_args, win_new_impl, "AccessPolicyWindow",
              "A window over a buffer (or anything as_buffer accepts), validated in C: "
              "hit_ratio in [0, 1]; offset + num_bytes within the target and num_bytes at most "
              "access_policy_max_window_size (cut to fit only with clamp=True); miss_prop never "
              "PERSISTING. The window keeps its target alive.", "AccessPolicyWindow",
              L2P_PARAM(win_new_args, target, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "BufferLike", .doc = "the memory the window covers"),
              L2P_PARAM(win_new_args, num_bytes, L2P_P_INT, .flags = L2P_P_NONE, .lo = 0,
                        .hi = LLONG_MAX, .what = "bytes", .doc = "the window's size; None: from "
                        "offset to the target's end"),
              L2P_PARAM(win_new_args, offset, L2P_P_INT, .flags = L2P_P_KWONLY, .lo = 0,
                        .hi = LLONG_MAX, .what = "bytes", .doc = "where the window starts in "
                        "the target"),
              L2P_PARAM(win_new_args, hit_ratio, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = 1.0, .doc = "the fraction of accesses given hit_prop, in [0, 1] "
                        "(checked by the core)"),
              L2P_PARAM(win_new_args, hit_prop, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = L2P_ACCESS_PERSISTING, .lo = INT_MIN, .hi = INT_MAX,
                        .what = "an AccessProperty", .pytype = "AccessProperty | int",
                        .doc = "the property of hits (2: PERSISTING)"),
              L2P_PARAM(win_new_args, miss_prop, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = L2P_ACCESS_STREAMING, .lo = INT_MIN, .hi = INT_MAX,
                        .what = "an AccessProperty", .pytype = "AccessProperty | int",
                        .doc = "the property of the rest (1: STREAMING; never PERSISTING)"),
              L2P_PARAM(win_new_args, clamp, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .doc = "cut the window to the target and the device's limit instead of "
                        "refusing"));

static PyObject *win_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return l2p_fn_call_tuple(&win_new_fn, (PyObject *)type, args, kw);
}

static l2p_window *W(PyObject *self) { return &((l2p_WindowObject *)self)->w; }

static PyObject *win_get_base(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t((size_t)W(self)->base_ptr);
}

static PyObject *win_get_num_bytes(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(W(self)->num_bytes);
}

static PyObject *win_get_ratio(PyObject *self, void *c)
{
    (void)c;
    return PyFloat_FromDouble((double)W(self)->hit_ratio);
}

static PyObject *win_get_hit(PyObject *self, void *c)
{
    (void)c;
    return l2p_access_property(win_state(self), W(self)->hit_prop);
}

static PyObject *win_get_miss(PyObject *self, void *c)
{
    (void)c;
    return l2p_access_property(win_state(self), W(self)->miss_prop);
}

static PyObject *win_get_target(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(((l2p_WindowObject *)self)->target);
}

/* The same region with NORMAL hits and misses: the guide's first way to reset. */
static PyObject *win_as_normal(PyObject *self, PyObject *noargs)
{
    l2p_window w = *W(self);
    (void)noargs;
    w.hit_prop = L2P_ACCESS_NORMAL;
    w.miss_prop = L2P_ACCESS_NORMAL;
    w.hit_ratio = 1.0f;
    return l2p_window_new(win_state(self), &w, ((l2p_WindowObject *)self)->target);
}

static PyObject *win_repr(PyObject *self)
{
    const l2p_window *w = W(self);
    char ratio[32];
    snprintf(ratio, sizeof ratio, "%.6g", (double)w->hit_ratio);
    return PyUnicode_FromFormat("l2persist.AccessPolicyWindow(base_ptr=0x%zx, num_bytes=%zu, "
                                "hit_ratio=%s, hit_prop=%s, miss_prop=%s)",
                                (size_t)w->base_ptr, w->num_bytes, ratio,
                                l2p_access_property_name(w->hit_prop),
                                l2p_access_property_name(w->miss_prop));
}

static PyObject *win_richcompare(PyObject *a, PyObject *b, int op)
{
    if (Py_TYPE(a) != Py_TYPE(b) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
    const l2p_window *x = W(a), *y = W(b);
    int same = x->base_ptr == y->base_ptr && x->num_bytes == y->num_bytes &&
               x->hit_ratio == y->hit_ratio && x->hit_prop == y->hit_prop &&
               x->miss_prop == y->miss_prop;
    return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static int win_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((l2p_WindowObject *)self)->target);
    return 0;
}

static int win_clear(PyObject *self)
{
    Py_CLEAR(((l2p_WindowObject *)self)->target);
    return 0;
}

static void win_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    win_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef win_getset[] = {
    {"base_ptr", win_get_base, NULL, "int: Start address of the window.", NULL},
    {"num_bytes", win_get_num_bytes, NULL, "int: Size of the window in bytes.", NULL},
    {"hit_ratio", win_get_ratio, NULL, "float: Fraction of accesses given hit_prop (float32).", NULL},
    {"hit_prop", win_get_hit, NULL, "AccessProperty: AccessProperty of the hit_ratio share.", NULL},
    {"miss_prop", win_get_miss, NULL, "AccessProperty: AccessProperty of the rest.", NULL},
    {"target", win_get_target, NULL, "object: The buffer covered (None when read from the driver).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

L2P_NOARGS_METHOD(win_as_normal_fn, win_as_normal, "as_normal", "The same region with NORMAL hit and miss properties (the guide's first reset).", "AccessPolicyWindow");
static const l2p_fn *const win_rows[] = {&win_as_normal_fn, NULL};

/* Methods not from rows (none left but the slots). */
static PyMethodDef win_methods[] = {
    {NULL, NULL, 0, NULL}};

static PyType_Slot win_slots[] = {
    {Py_tp_doc, NULL}, /* from win_new_fn */
    {Py_tp_new, win_new},
    {Py_tp_getset, win_getset},
    {Py_tp_methods, win_methods},
    {Py_tp_repr, win_repr},
    {Py_tp_richcompare, win_richcompare},
    {Py_tp_traverse, win_traverse},
    {Py_tp_clear, win_clear},
    {Py_tp_dealloc, win_dealloc},
    {0, NULL}};

static PyType_Spec win_spec = {"l2persist.AccessPolicyWindow", sizeof(l2p_WindowObject), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
                               win_slots};

int l2p_add_window_type(PyObject *m, l2p_state *st)
{
    st->AccessPolicyWindow = l2p_make_type_rows(m, &win_spec, &win_new_fn, win_rows);
    return st->AccessPolicyWindow ? 0 : -1;
}

/* ---- plan_windows ---- */

typedef struct {
    size_t n;
    PyObject **buffers;
    size_t *bytes, *num_bytes;
    double *weights, *ratios;
} plan;

static void plan_free(plan *p)
{
    for (size_t i = 0; p->buffers && i < p->n; i++) Py_XDECREF(p->buffers[i]);
    PyMem_Free(p->buffers);
    PyMem_Free(p->bytes);
    PyMem_Free(p->num_bytes);
    PyMem_Free(p->weights);
    PyMem_Free(p->ratios);
}

/* One entry: a target, or (target, weight). */
static int plan_entry(l2p_state *st, PyObject *item, plan *p, size_t i)
{
    PyObject *target = item;
    p->weights[i] = 1.0;
    if (PyTuple_Check(item)) {
        if (PyTuple_GET_SIZE(item) != 2) {
            PyErr_Format(PyExc_ValueError, "targets: entry %zu must be a target or (target, "
                         "weight)", i);
            return -1;
        }
        target = PyTuple_GET_ITEM(item, 0);
        p->weights[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(item, 1));
        if (p->weights[i] == -1.0 && PyErr_Occurred()) return -1;
    }
    char name[48];
    snprintf(name, sizeof name, "targets: entry %zu", i);
    p->buffers[i] = l2p_buffer_as_buffer(st, target, name);
    if (!p->buffers[i]) return -1;
    p->bytes[i] = ((l2p_BufferObject *)p->buffers[i])->nbytes;
    return 0;
}

static int plan_parse(l2p_state *st, PyObject *targets, plan *p)
{
    PyObject *seq = PySequence_Fast(targets, "targets: expected a sequence of targets or "
                                             "(target, weight) pairs");
    if (!seq) return -1;
    p->n = (size_t)PySequence_Fast_GET_SIZE(seq);
    p->buffers = PyMem_Calloc(p->n + 1, sizeof *p->buffers);
    p->bytes = PyMem_Calloc(p->n + 1, sizeof *p->bytes);
    p->num_bytes = PyMem_Calloc(p->n + 1, sizeof *p->num_bytes);
    p->weights = PyMem_Calloc(p->n + 1, sizeof *p->weights);
    p->ratios = PyMem_Calloc(p->n + 1, sizeof *p->ratios);
    int rc = 0;
    if (!p->buffers || !p->bytes || !p->num_bytes || !p->weights || !p->ratios) {
        PyErr_NoMemory();
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < p->n; i++)
        rc = plan_entry(st, PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i), p, i);
    Py_DECREF(seq);
    return rc;
}

static PyObject *plan_result(l2p_state *st, plan *p)
{
    PyObject *list = PyList_New((Py_ssize_t)p->n);
    for (size_t i = 0; list && i < p->n; i++) {
        l2p_BufferObject *b = (l2p_BufferObject *)p->buffers[i];
        l2p_window w = {(uintptr_t)b->ptr, p->num_bytes[i], (float)p->ratios[i],
                        L2P_ACCESS_PERSISTING, L2P_ACCESS_STREAMING};
        PyObject *o = l2p_window_new(st, &w, (PyObject *)b);
        if (!o) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, o);
    }
    return list;
}

typedef struct {
    int device;
    PyObject *targets;
    l2p_opt set_aside;
} plan_windows_args;

static PyObject *plan_windows_impl(PyObject *m, const void *args)
{
    const plan_windows_args *a = args;
    PyObject *result = NULL;
    l2p_state *st = l2p_state_from_module(m);
    size_t max_window = 0;
    size_t set_aside = (size_t)a->set_aside.i;
    plan p = {0};
    if (!a->set_aside.given && l2p_device_get_persisting_limit(a->device, &set_aside) != L2P_OK)
        return l2p_py_raise(st);
    if (l2p_device_max_window(a->device, &max_window) != L2P_OK) return l2p_py_raise(st);
    if (plan_parse(st, a->targets, &p) == 0) {
        if (l2p_policy_plan_windows(p.n, p.bytes, p.weights, set_aside, max_window, p.num_bytes,
                                    p.ratios) != L2P_OK)
            l2p_py_raise(st);
        else
            result = plan_result(st, &p);
    }
    plan_free(&p);
    return result;
}
L2P_DEFINE_FN(plan_windows_fn, plan_windows_args, plan_windows_impl, "plan_windows",
              "One PERSISTING window per target, with hit ratios that keep sum(hit_ratio * "
              "num_bytes) within the set-aside (weights share it: water-filling).",
              "list[AccessPolicyWindow]",
              L2P_PARAM(plan_windows_args, device, L2P_P_DEVICE, .flags = L2P_P_REQUIRED,
                        .doc = "the device (index or Device) whose window size limit applies"),
              L2P_PARAM(plan_windows_args, targets, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[object]", .doc = "buffers (anything as_buffer "
                        "accepts), or (buffer, weight) pairs"),
              L2P_PARAM(plan_windows_args, set_aside, L2P_P_INT, .flags = L2P_P_NONE, .lo = 0,
                        .hi = LLONG_MAX, .what = "bytes", .doc = "the bytes to share; None: "
                        "the device's current persisting limit"));

/* The length of a sequence of numbers (a str or bytes is not one), or -1 with a TypeError
 * naming the argument. */
static Py_ssize_t number_sequence(PyObject *obj, const char *name, const char *of)
{
    Py_ssize_t n = -1;
    if (!PyUnicode_Check(obj) && !PyBytes_Check(obj) && !PyByteArray_Check(obj) &&
        PySequence_Check(obj))
        n = PySequence_Size(obj);
    if (n < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a sequence of %s, got %s", name, of,
                     Py_TYPE(obj)->tp_name);
    }
    return n;
}

/* The arithmetic alone, for planning without a GPU (and for tests on any machine). */
typedef struct {
    PyObject *sizes, *weights;
    long long set_aside;
    l2p_opt max_window;
} plan_hit_ratios_args;

static PyObject *plan_hit_ratios_impl(PyObject *m, const void *args)
{
    const plan_hit_ratios_args *a = args;
    PyObject *result = NULL;
    l2p_state *st = l2p_state_from_module(m);
    size_t max_window = a->max_window.given ? (size_t)a->max_window.i : SIZE_MAX;
    Py_ssize_t n = number_sequence(a->sizes, "sizes", "ints (bytes)");
    Py_ssize_t nw = n < 0 ? -1 : number_sequence(a->weights, "weights", "real numbers");
    if (nw < 0) return NULL;
    if (nw != n)
        return PyErr_Format(PyExc_ValueError, "weights: %zd weight(s) for %zd size(s); give one "
                            "weight per size", nw, n);
    size_t *b = PyMem_Calloc((size_t)n + 1, sizeof *b), *nb = PyMem_Calloc((size_t)n + 1, sizeof *nb);
    double *w = PyMem_Calloc((size_t)n + 1, sizeof *w), *r = PyMem_Calloc((size_t)n + 1, sizeof *r);
    int ok = b && nb && w && r;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *s = PySequence_GetItem(a->sizes, i), *x = PySequence_GetItem(a->weights, i);
        long long v = 0;
        ok = s && x && l2p_py_ranged_int(s, "sizes", "bytes", 0, LLONG_MAX, &v) == 0;
        if (ok) {
            b[i] = (size_t)v;
            w[i] = PyFloat_AsDouble(x);
            ok = !(w[i] == -1.0 && PyErr_Occurred());
            if (!ok && PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "weights: entry %zd: expected a real number, got %s",
                             i, Py_TYPE(x)->tp_name);
            }
        }
        Py_XDECREF(s);
        Py_XDECREF(x);
    }
    if (!ok && !PyErr_Occurred()) PyErr_NoMemory();
    if (ok && l2p_policy_plan_windows((size_t)n, b, w, (size_t)a->set_aside, max_window, nb,
                                      r) != L2P_OK)
        l2p_py_raise(st);
    else if (ok) {
        result = PyList_New(n);
        for (Py_ssize_t i = 0; result && i < n; i++) {
            PyObject *pair = Py_BuildValue("(nd)", (Py_ssize_t)nb[i], r[i]);
            if (!pair) Py_CLEAR(result);
            else PyList_SET_ITEM(result, i, pair);
        }
    }
    PyMem_Free(b);
    PyMem_Free(nb);
    PyMem_Free(w);
    PyMem_Free(r);
    return result;
}
L2P_DEFINE_FN(plan_hit_ratios_fn, plan_hit_ratios_args, plan_hit_ratios_impl, "plan_hit_ratios",
              "[(num_bytes, hit_ratio)]: the arithmetic of plan_windows without a device.",
              "list[tuple[int, float]]",
              L2P_PARAM(plan_hit_ratios_args, sizes, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "each region's size in bytes"),
              L2P_PARAM(plan_hit_ratios_args, weights, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "each region's share weight "
                        "(finite, >= 0), one per size"),
              L2P_PARAM(plan_hit_ratios_args, set_aside, L2P_P_INT, .flags = L2P_P_REQUIRED,
                        .lo = 0, .hi = LLONG_MAX, .what = "bytes", .doc = "the persisting "
                        "set-aside to share"),
              L2P_PARAM(plan_hit_ratios_args, max_window, L2P_P_INT, .flags = L2P_P_NONE,
                        .lo = 0, .hi = LLONG_MAX, .what = "bytes", .doc = "the largest window "
                        "(accessPolicyMaxWindowSize); None: no limit"));

const l2p_fn *const l2p_window_fns[] = {&plan_windows_fn, &plan_hit_ratios_fn, NULL};
