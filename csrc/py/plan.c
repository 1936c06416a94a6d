/* Plan: one device's persisting set-aside and a window per carrier (csrc/core/l2p_plan.h),
 * installed and restored as one transaction. This file converts carriers and windows and
 * keeps the Python objects alive; the order of the steps, the alternatives rule and the
 * restore are the core's. l2persist.plan.Plan subclasses it (JSON and the HTML view). */
#include "l2p_py.h"
#include "binder.h" /* l2p_py_real_arg */
#include "params.h"

#include <string.h>

#include "l2p_live.h"
#include "l2p_plan.h"

typedef struct {
    PyObject_HEAD
    l2p_plan plan;
    l2p_plan_txn txn;
    size_t granted;    /* the limit the driver holds while installed */
    PyObject *meta;    /* per entry: {"kind", "carrier", "window", "name", "carrier_name",
                        * "nodes", "graph"} (the carrier and window objects kept alive) */
    PyObject *applied; /* while installed: the plans applied (their objects kept alive, their
                        * graphs told at the restore) */
    PyObject *forgotten; /* while installed: a list of the graphs whose nodes left the
                          * transaction (their owner reset them), or NULL: never forgotten
                          * twice, since a later graph's node may take a freed node's handle */
} l2p_PlanObject;

static l2p_state *plan_state(PyObject *self) { return l2p_state_from_type(Py_TYPE(self)); }

/* ---- construction ------------------------------------------------------------------- */

typedef struct {
    int device;
    l2p_opt set_aside;
} plan_new_args;

static int set_aside_into(l2p_PlanObject *p, int has, long long bytes)
{
    l2p_device_props props;
    if (has && l2p_device_get_properties(p->plan.device, &props) != L2P_OK)
        return l2p_py_raise_int(plan_state((PyObject *)p));
    if (l2p_plan_set_aside(&p->plan, has, bytes, has ? props.persisting_l2_cache_max_size : 0) !=
        L2P_OK)
        return l2p_py_raise_int(plan_state((PyObject *)p));
    return 0;
}

static PyObject *plan_new_impl(PyObject *type_obj, const void *args)
{
    const plan_new_args *a = args;
    PyTypeObject *type = (PyTypeObject *)type_obj;
    l2p_PlanObject *p = (l2p_PlanObject *)type->tp_alloc(type, 0);
    if (!p) return NULL;
    l2p_plan_init(&p->plan, a->device);
    p->meta = PyList_New(0);
    p->applied = PyList_New(0);
    if (!p->meta || !p->applied || set_aside_into(p, a->set_aside.given, a->set_aside.i) < 0) {
        Py_DECREF(p);
        return NULL;
    }
    return (PyObject *)p;
}
L2P_DEFINE_FN(plan_new_fn, plan_new_args, plan_new_impl, "_Plan",
              "A persistence plan for one device: the persisting-L2 set-aside and a window per "
              "carrier (a stream, a group of graph kernel nodes, a single launch). `with plan:` "
              "installs it as one transaction (all or nothing) and restores what it found, also "
              "when an exception or KeyboardInterrupt passes through.", "_Plan",
              L2P_PARAM(plan_new_args, device, L2P_P_DEVICE, .doc = "the device (index or "
                        "Device); None: the current one"),
              L2P_PARAM(plan_new_args, set_aside, L2P_P_INT, .flags = L2P_P_NONE, .lo = 0,
                        .hi = LLONG_MAX, .what = "bytes", .doc = "the persisting limit to "
                        "install (the driver rounds it up to a granule); None: leave it as "
                        "found"));

static PyObject *plan_tp_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return l2p_fn_call_tuple(&plan_new_fn, (PyObject *)type, args, kw);
}

/* ---- carriers ----------------------------------------------------------------------- */

typedef struct {
    int kind;
    cudaGraphNode_t *nodes; /* PyMem */
    size_t n;
    void *stream;
    PyObject *graph;     /* borrowed: the Graph of a node group */
    PyObject *positions; /* new ref: list of node positions, or None */
} carrier_val;

static void carrier_free(carrier_val *c)
{
    PyMem_Free(c->nodes);
    Py_XDECREF(c->positions);
}

/* The kernel nodes of `graph` at `sel` (None: all) into c. */
static int graph_nodes(l2p_state *st, PyObject *graph, PyObject *sel, carrier_val *c)
{
    l2p_GraphObject *g = (l2p_GraphObject *)graph;
    PyObject *all = PyObject_GetAttrString(graph, "kernel_nodes"); /* checks the graph */
    if (!all) return -1;
    PyObject *picked = sel == Py_None ? Py_NewRef(all)
                                      : PyObject_CallMethod(graph, "_select_nodes", "(O)", sel);
    Py_DECREF(all);
    if (!picked) return -1;
    Py_ssize_t n = PyList_GET_SIZE(picked);
    if (n == 0) {
        Py_DECREF(picked);
        PyErr_SetString(PyExc_ValueError, "carrier: the graph has no kernel node to window");
        return -1;
    }
    c->nodes = PyMem_Calloc((size_t)n, sizeof *c->nodes);
    c->positions = PyList_New(n);
    if (!c->nodes || !c->positions) {
        Py_DECREF(picked);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        l2p_KernelNodeObject *kn = (l2p_KernelNodeObject *)PyList_GET_ITEM(picked, i);
        c->nodes[i] = kn->node;
        PyList_SET_ITEM(c->positions, i, PyLong_FromSsize_t(kn->position));
    }
    Py_DECREF(picked);
    c->n = (size_t)n;
    c->kind = L2P_CARRIER_NODES;
    c->graph = graph;
    (void)st;
    (void)g;
    return 0;
}

/* A carrier: "launch"; a Stream or any library's stream; a Graph (all its kernel nodes); a
 * KernelNode; a (Graph, nodes) pair; an object with `graph` and `nodes` (a node group). */
static int carrier_arg(l2p_state *st, PyObject *obj, int device, carrier_val *c)
{
    memset(c, 0, sizeof *c);
    if (PyUnicode_Check(obj) && PyUnicode_CompareWithASCIIString(obj, "launch") == 0) {
        c->kind = L2P_CARRIER_LAUNCH;
        return 0;
    }
    if (PyObject_TypeCheck(obj, st->Graph)) return graph_nodes(st, obj, Py_None, c);
    if (PyObject_TypeCheck(obj, st->KernelNode)) {
        PyObject *one = PyList_New(1);
        if (!one) return -1;
        PyList_SET_ITEM(one, 0, Py_NewRef(obj));
        int r = graph_nodes(st, ((l2p_KernelNodeObject *)obj)->graph, one, c);
        Py_DECREF(one);
        return r;
    }
    if (PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 2 &&
        PyObject_TypeCheck(PyTuple_GET_ITEM(obj, 0), st->Graph))
        return graph_nodes(st, PyTuple_GET_ITEM(obj, 0), PyTuple_GET_ITEM(obj, 1), c);
    if (!PyObject_TypeCheck(obj, st->Stream) && PyObject_HasAttrString(obj, "graph") &&
        PyObject_HasAttrString(obj, "nodes")) {
        PyObject *g = PyObject_GetAttrString(obj, "graph");
        PyObject *nodes = g ? PyObject_GetAttrString(obj, "nodes") : NULL;
        int r = -1;
        if (nodes && !PyObject_TypeCheck(g, st->Graph))
            PyErr_Format(PyExc_TypeError, "carrier: its `graph` is a %s, not an l2persist Graph",
                         Py_TYPE(g)->tp_name);
        else if (nodes)
            r = graph_nodes(st, g, nodes, c);
        Py_XDECREF(g);
        Py_XDECREF(nodes);
        return r;
    }
    cudaStream_t h;
    PyObject *ours;
    int dev;
    if (obj == Py_None) {
        PyErr_SetString(PyExc_TypeError, "carrier: expected a stream, a Graph, KernelNodes, a "
                        "node group or \"launch\", got None (the legacy stream is 0)");
        return -1;
    }
    if (l2p_py_stream_arg(st, obj, &h, &ours) < 0) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "carrier: expected a stream, a Graph, KernelNodes, a "
                         "node group or \"launch\", got %s", Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    /* The stream's device: an l2persist Stream knows its own (a default stream's too: it was
     * wrapped for one); a bare default handle names the plan's device's stream; any other
     * handle is asked. */
    if (ours)
        dev = l2p_py_stream_device((l2p_StreamObject *)ours);
    else if (l2p_stream_is_default(h))
        dev = device;
    else if (l2p_stream_device(h, &dev) != L2P_OK)
        return l2p_py_raise_int(st);
    if (dev != device) {
        PyErr_Format(PyExc_ValueError, "carrier: a stream of device %d for a plan of device %d",
                     dev, device);
        return -1;
    }
    c->kind = L2P_CARRIER_STREAM;
    c->stream = (void *)h;
    return 0;
}

/* ---- add / entries ------------------------------------------------------------------ */

typedef struct {
    PyObject *carrier;
    l2p_window_val window;
    PyObject *name, *carrier_name;
    int enabled;
} add_args;

static PyObject *meta_dict(const carrier_val *c, PyObject *carrier, PyObject *window,
                           PyObject *name, PyObject *carrier_name)
{
    return Py_BuildValue("{s:s,s:O,s:O,s:O,s:O,s:O,s:O}", "kind", l2p_plan_kind_name(c->kind),
                         "carrier", carrier, "window", window, "name", name, "carrier_name",
                         carrier_name, "nodes", c->positions ? c->positions : Py_None,
                         "graph", c->graph ? c->graph : Py_None);
}

static int check_name(PyObject *o, const char *arg)
{
    if (o == Py_None || PyUnicode_Check(o)) return 0;
    PyErr_Format(PyExc_TypeError, "%s: expected None or a str, got %s", arg, Py_TYPE(o)->tp_name);
    return -1;
}

static PyObject *plan_add_impl(PyObject *self, const void *args)
{
    const add_args *a = args;
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    l2p_state *st = plan_state(self);
    carrier_val c;
    size_t index;
    if (check_name(a->name, "name") < 0 || check_name(a->carrier_name, "carrier_name") < 0)
        return NULL;
    if (p->txn.active)
        return PyErr_Format(PyExc_RuntimeError, "add: this plan is installed; restore it first");
    if (carrier_arg(st, a->carrier, p->plan.device, &c) < 0) {
        carrier_free(&c);
        return NULL;
    }
    void *one[1] = {c.stream};
    void *const *handles = c.kind == L2P_CARRIER_STREAM ? one : (void *const *)c.nodes;
    size_t n = c.kind == L2P_CARRIER_STREAM ? 1 : c.n;
    PyObject *m = meta_dict(&c, a->carrier, a->window.obj, a->name, a->carrier_name);
    l2p_status rc = m ? l2p_plan_add(&p->plan, c.kind, handles, n, a->window.w, a->enabled,
                                     &index)
                      : L2P_OK;
    carrier_free(&c);
    if (!m) return NULL;
    if (rc != L2P_OK) {
        Py_DECREF(m);
        return l2p_py_raise(st);
    }
    int r = PyList_Append(p->meta, m);
    Py_DECREF(m);
    if (r < 0) {
        p->plan.n_entries--; /* keep the core and the list in step */
        return NULL;
    }
    return PyLong_FromSize_t(index);
}
L2P_DEFINE_FN(plan_add_fn, add_args, plan_add_impl, "add",
              "Add a window on a carrier; returns the entry's index. A stream or kernel node "
              "holds one window: a different window on a slot another entry already fills is "
              "refused (ValueError). An entry without a window turns its carrier's windows off.",
              "int",
              L2P_PARAM(add_args, carrier, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "object", .doc = "a Stream or any library's stream, a Graph "
                        "(all its kernel nodes), a KernelNode, (Graph, nodes), a node group "
                        "(an object with .graph and .nodes), or \"launch\" (a window handed to "
                        "one launch: Plan.launch_window)"),
              L2P_PARAM(add_args, window, L2P_P_WINDOW, .doc = "the AccessPolicyWindow; None: "
                        "the carrier's window off"),
              L2P_PARAM(add_args, name, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "str | None", .doc = "the buffer's name (JSON matches "
                        "buffers by it)"),
              L2P_PARAM(add_args, carrier_name, L2P_P_OBJECT, .pytype = "str | None",
                        .doc = "the carrier's name (JSON matches carriers by it)"),
              L2P_PARAM(add_args, enabled, L2P_P_BOOL, .ival = 1, .doc = "False: the entry "
                        "keeps the window as a target's extent but installs it off (the "
                        "tuner's targets)"));

static PyObject *plan_get_entries(PyObject *self, void *c)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    (void)c;
    PyObject *out = PyList_New((Py_ssize_t)p->plan.n_entries);
    for (size_t i = 0; out && i < p->plan.n_entries; i++) {
        PyObject *d = PyDict_Copy(PyList_GET_ITEM(p->meta, (Py_ssize_t)i));
        PyObject *on = PyBool_FromLong(p->plan.entries[i].on);
        if (!d || PyDict_SetItemString(d, "on", on) < 0) {
            Py_XDECREF(d);
            Py_CLEAR(out);
        } else {
            PyList_SET_ITEM(out, (Py_ssize_t)i, d);
        }
        Py_DECREF(on);
    }
    return out;
}

static PyObject *plan_get_groups(PyObject *self, void *c)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    (void)c;
    size_t n = p->plan.n_entries;
    int *g = PyMem_Calloc(n + 1, sizeof *g);
    if (!g) return PyErr_NoMemory();
    if (l2p_plan_groups(&p->plan, g) != L2P_OK) {
        PyMem_Free(g);
        return l2p_py_raise(plan_state(self));
    }
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++)
        PyList_SET_ITEM(out, (Py_ssize_t)i, PyLong_FromLong(g[i]));
    PyMem_Free(g);
    return out;
}

/* ---- a tuner configuration ----------------------------------------------------------- */

static int prop_arg(PyObject *d, const char *key, int dflt, int *out)
{
    PyObject *v = PyDict_GetItemString(d, key);
    long long x = dflt;
    if (v && l2p_py_ranged_int(v, key, "an access property", 0, 2, &x) < 0) return -1;
    *out = (int)x;
    return 0;
}

/* {"set_aside": bytes, "windows": [None | {"hit_ratio", "hit_prop", "miss_prop"}]}: the set-aside
 * and n windows (PyMem, the caller frees *win). */
static int config_arg(PyObject *obj, size_t n, size_t *set_aside, l2p_tune_window **win)
{
    PyObject *sa = PyDict_Check(obj) ? PyDict_GetItemString(obj, "set_aside") : NULL;
    PyObject *wins = PyDict_Check(obj) ? PyDict_GetItemString(obj, "windows") : NULL;
    long long bytes;
    *win = NULL;
    if (!sa || !wins || !PyList_Check(wins)) {
        PyErr_SetString(PyExc_TypeError, "config: expected {'set_aside': bytes, 'windows': "
                        "[None | {'hit_ratio', 'hit_prop', 'miss_prop'}, ...]}");
        return -1;
    }
    if (l2p_py_ranged_int(sa, "config['set_aside']", "bytes", 0, LLONG_MAX, &bytes) < 0) return -1;
    if ((size_t)PyList_GET_SIZE(wins) != n) {
        PyErr_Format(PyExc_ValueError, "config: %zd windows for a plan of %zu entries",
                     PyList_GET_SIZE(wins), n);
        return -1;
    }
    *set_aside = (size_t)bytes;
    *win = PyMem_Calloc(n + 1, sizeof **win);
    if (!*win) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *w = PyList_GET_ITEM(wins, (Py_ssize_t)i);
        l2p_tune_window *tw = &(*win)[i];
        if (w == Py_None) continue;
        PyObject *hr = PyDict_Check(w) ? PyDict_GetItemString(w, "hit_ratio") : NULL;
        int bad = !hr;
        if (bad) PyErr_Format(PyExc_TypeError, "config: windows[%zu] needs a 'hit_ratio'", i);
        else {
            tw->hit_ratio = PyFloat_AsDouble(hr);
            bad = tw->hit_ratio == -1.0 && PyErr_Occurred();
        }
        if (!bad && !(tw->hit_ratio >= 0.0 && tw->hit_ratio <= 1.0)) {
            PyErr_Format(PyExc_ValueError, "config: windows[%zu]['hit_ratio'] %R is outside "
                         "[0, 1]", i, hr);
            bad = 1;
        }
        if (bad || prop_arg(w, "hit_prop", L2P_ACCESS_PERSISTING, &tw->hit_prop) < 0 ||
            prop_arg(w, "miss_prop", L2P_ACCESS_STREAMING, &tw->miss_prop) < 0) {
            PyMem_Free(*win);
            *win = NULL;
            return -1;
        }
        tw->on = 1;
    }
    return 0;
}

/* The meta of entry i of `from`, its window replaced by w (or None when off). */
static PyObject *configured_meta(l2p_state *st, PyObject *meta, const l2p_plan_entry *e)
{
    PyObject *d = PyDict_Copy(meta);
    PyObject *old = d ? PyDict_GetItemString(d, "window") : NULL;
    PyObject *target = old && old != Py_None ? ((l2p_WindowObject *)old)->target : Py_None;
    PyObject *w = d ? l2p_window_new(st, &e->window, target) : NULL;
    if (!w || PyDict_SetItemString(d, "window", w) < 0) Py_CLEAR(d);
    Py_XDECREF(w);
    return d;
}

static PyObject *plan_configured(PyObject *self, PyObject *config)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    l2p_state *st = plan_state(self);
    size_t set_aside;
    l2p_tune_window *win;
    if (config_arg(config, p->plan.n_entries, &set_aside, &win) < 0) return NULL;
    l2p_PlanObject *q = (l2p_PlanObject *)Py_TYPE(self)->tp_alloc(Py_TYPE(self), 0);
    if (!q) {
        PyMem_Free(win);
        return NULL;
    }
    l2p_plan_init(&q->plan, p->plan.device);
    q->meta = PyList_New(0);
    q->applied = PyList_New(0);
    if (!q->meta || !q->applied) goto fail;
    if (l2p_plan_configure(&p->plan, set_aside, p->plan.n_entries, win, &q->plan) != L2P_OK) {
        l2p_py_raise(st);
        goto fail;
    }
    /* l2p_plan_configure adds the entries that are off first: follow its order */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < p->plan.n_entries; i++) {
            if ((win[i].on != 0) != pass) continue;
            size_t k = (size_t)PyList_GET_SIZE(q->meta);
            PyObject *m = configured_meta(st, PyList_GET_ITEM(p->meta, (Py_ssize_t)i),
                                          &q->plan.entries[k]);
            if (!m || PyList_Append(q->meta, m) < 0) {
                Py_XDECREF(m);
                goto fail;
            }
            Py_DECREF(m);
        }
    PyMem_Free(win);
    return (PyObject *)q;
fail:
    PyMem_Free(win);
    Py_DECREF(q);
    return NULL;
}
L2P_ONE_ARG_METHOD(plan_configured_fn, plan_configured, "configured",
                   "A new plan over the same carriers, configured as the tuner's `config` says: "
                   "its set-aside, and entry i on with windows[i]'s hit ratio and properties "
                   "(its extent kept) or off. Entries that are off come first.", "_Plan",
                   "config", "dict", "{'set_aside': bytes, 'windows': [None | {'hit_ratio', "
                   "'hit_prop', 'miss_prop'}] } with one item per entry");

/* ---- the plan document ----------------------------------------------------------------- */
/* Plan.from_json's values, converted from the parsed JSON and checked by the core
 * (l2p_plan_check_saved) before the plan is built: a file's mistakes are named with the file,
 * before any device is needed. Here only the JSON types are judged. */

/* d[key] (borrowed), or NULL with a ValueError naming it when it is missing. */
static PyObject *doc_field(PyObject *d, const char *key, const char *what)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v) PyErr_Format(PyExc_ValueError, "%s: the key '%s' is missing", what, key);
    return v;
}

/* A name: a string or null (absent: null). */
static int doc_name(PyObject *d, const char *key, const char *what)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v || v == Py_None || PyUnicode_Check(v)) return 0;
    PyErr_Format(PyExc_TypeError, "%s['%s']: expected a name (a string) or null, got %s", what,
                 key, Py_TYPE(v)->tp_name);
    return -1;
}

/* nodes: null or a list of node positions. */
static int doc_nodes(PyObject *d, const char *what)
{
    char name[640];
    long long pos;
    PyObject *v = PyDict_GetItemString(d, "nodes");
    if (!v || v == Py_None) return 0;
    if (!PyList_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s['nodes']: expected null or a list of node positions, "
                     "got %s", what, Py_TYPE(v)->tp_name);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
        snprintf(name, sizeof name, "%s['nodes'][%zd]", what, i);
        if (l2p_py_ranged_int(PyList_GET_ITEM(v, i), name, "a node position", 0, INT_MAX,
                              &pos) < 0)
            return -1;
    }
    return 0;
}

/* An int field (its range is the core's to judge). */
static int doc_int(PyObject *d, const char *key, const char *what, long long *out)
{
    char name[640];
    PyObject *v = doc_field(d, key, what);
    snprintf(name, sizeof name, "%s['%s']", what, key);
    return v ? l2p_py_int_arg(v, name, out) : -1;
}

/* A property field: an int of C's int range (which AccessProperty it is, the core judges). */
static int doc_prop(PyObject *d, const char *key, const char *what, int *out)
{
    char name[640];
    long long v;
    PyObject *obj = doc_field(d, key, what);
    snprintf(name, sizeof name, "%s['%s']", what, key);
    if (!obj || l2p_py_ranged_int(obj, name, "an AccessProperty", INT_MIN, INT_MAX, &v) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

/* The window's fields, present together or not at all. */
static int doc_window(PyObject *d, const char *what, l2p_plan_saved *e)
{
    char name[640];
    e->has_window = PyDict_GetItemString(d, "num_bytes") != NULL;
    if (!e->has_window) return 0;
    PyObject *ratio = doc_field(d, "hit_ratio", what);
    snprintf(name, sizeof name, "%s['hit_ratio']", what);
    return doc_int(d, "offset", what, &e->offset) < 0 ||
                   doc_int(d, "num_bytes", what, &e->num_bytes) < 0 || !ratio ||
                   l2p_py_real_arg(ratio, name, 0.0, 0.0, &e->hit_ratio) < 0 ||
                   doc_prop(d, "hit_prop", what, &e->hit_prop) < 0 ||
                   doc_prop(d, "miss_prop", what, &e->miss_prop) < 0
               ? -1
               : 0;
}

static int doc_entry(l2p_state *st, PyObject *d, const char *what)
{
    l2p_plan_saved e = {0};
    char name[640];
    int on;
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an entry (a JSON object), got %s", what,
                     Py_TYPE(d)->tp_name);
        return -1;
    }
    PyObject *kind = doc_field(d, "kind", what), *on_v = kind ? doc_field(d, "on", what) : NULL;
    if (!on_v) return -1;
    if (!PyUnicode_Check(kind)) {
        PyErr_Format(PyExc_TypeError, "%s['kind']: expected 'stream', 'nodes' or 'launch', got "
                     "%s", what, Py_TYPE(kind)->tp_name);
        return -1;
    }
    const char *text = PyUnicode_AsUTF8(kind);
    snprintf(name, sizeof name, "%s['kind']", what);
    if (!text || (e.kind = l2p_plan_kind_of(text, name)) < 0)
        return text ? l2p_py_raise_int(st) : -1;
    snprintf(name, sizeof name, "%s['on']", what);
    if (l2p_py_bool_arg(on_v, name, &on) < 0 || doc_name(d, "carrier", what) < 0 ||
        doc_name(d, "buffer", what) < 0 || doc_nodes(d, what) < 0 || doc_window(d, what, &e) < 0)
        return -1;
    return l2p_plan_check_saved(&e, what) == L2P_OK ? 0 : l2p_py_raise_int(st);
}

typedef struct {
    PyObject *doc, *source;
} check_doc_args;

static PyObject *plan_check_document_impl(PyObject *m, const void *args)
{
    const check_doc_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    char what[640];
    long long bytes;
    if (!PyUnicode_Check(a->source))
        return PyErr_Format(PyExc_TypeError, "source: expected a str, got %s",
                            Py_TYPE(a->source)->tp_name);
    const char *source = PyUnicode_AsUTF8(a->source);
    if (!source) return NULL;
    if (!PyDict_Check(a->doc))
        return PyErr_Format(PyExc_ValueError, "%s: not an l2persist plan (a plan is a JSON "
                            "object with format %s, got %s)", source, L2P_PLAN_FORMAT,
                            Py_TYPE(a->doc)->tp_name);
    PyObject *format = PyDict_GetItemString(a->doc, "format");
    if (format && PyUnicode_Check(format) &&
        PyUnicode_CompareWithASCIIString(format, L2P_LIVE_PLAN_FORMAT) == 0)
        /* the other plan document: say what it is and how it is used */
        return PyErr_Format(PyExc_ValueError, "%s: a plan for a running program (format '%s', "
                            "written by `python -m l2persist advise -- COMMAND`), not an "
                            "in-process plan ('%s'): install it at the program's next start "
                            "with `python -m l2persist apply %s -- COMMAND` (or "
                            "L2PERSIST_PLAN=%s)", source, L2P_LIVE_PLAN_FORMAT, L2P_PLAN_FORMAT,
                            source, source);
    if (!format || !PyUnicode_Check(format) ||
        PyUnicode_CompareWithASCIIString(format, L2P_PLAN_FORMAT) != 0)
        return PyErr_Format(PyExc_ValueError, "%s: not an l2persist plan (its format is %R; "
                            "expected '%s')", source, format ? format : Py_None,
                            L2P_PLAN_FORMAT);
    PyObject *sa = PyDict_GetItemString(a->doc, "set_aside");
    snprintf(what, sizeof what, "%s: set_aside", source);
    if (sa && sa != Py_None && l2p_py_ranged_int(sa, what, "bytes", 0, LLONG_MAX, &bytes) < 0)
        return NULL;
    PyObject *entries = doc_field(a->doc, "entries", source);
    if (!entries) return NULL;
    if (!PyList_Check(entries))
        return PyErr_Format(PyExc_TypeError, "%s: entries: expected a list of entries, got %s",
                            source, Py_TYPE(entries)->tp_name);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        snprintf(what, sizeof what, "%s: entries[%zd]", source, i);
        if (doc_entry(st, PyList_GET_ITEM(entries, i), what) < 0) return NULL;
    }
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(plan_check_document_fn, check_doc_args, plan_check_document_impl,
              "plan_check_document",
              "Check a parsed plan document (Plan.to_dict's layout) before any device is "
              "needed: its format, set_aside (null or bytes >= 0) and each entry's kind, names, "
              "node positions and window (the core's rule). Raises ValueError or TypeError "
              "naming `source` and the field.", "None",
              L2P_PARAM(check_doc_args, doc, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "object", .doc = "the parsed JSON"),
              L2P_PARAM(check_doc_args, source, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "str", .doc = "where it came from, for the messages (a "
                        "file name)"));

static const l2p_fn *const plan_fns[] = {&plan_check_document_fn, NULL};

/* ---- install / apply / restore -------------------------------------------------------- */

/* Every Graph whose nodes `plan` writes: its executable is stale and its owner is told. */
static int tell_graphs(PyObject *plan)
{
    l2p_PlanObject *p = (l2p_PlanObject *)plan;
    PyObject *done = PySet_New(NULL);
    if (!done) return -1;
    int r = 0;
    for (Py_ssize_t i = 0; r == 0 && i < PyList_GET_SIZE(p->meta); i++) {
        PyObject *g = PyDict_GetItemString(PyList_GET_ITEM(p->meta, i), "graph");
        if (!g || g == Py_None) continue;
        if (((l2p_GraphObject *)g)->owner_gone) continue; /* nothing left to tell */
        int seen = PySet_Contains(done, g);
        if (seen == 0) r = PySet_Add(done, g) < 0 || l2p_graph_windows_changed(g) < 0 ? -1 : 0;
        else if (seen < 0) r = -1;
    }
    Py_DECREF(done);
    return r;
}

/* Every carrier of `plan` still usable: its handles would otherwise be a destroyed stream's or
 * a closed graph's (a plan kept after `with Stream() as s:` ended crashed the driver call). */
static int carriers_usable(l2p_state *st, l2p_PlanObject *p)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(p->meta); i++) {
        PyObject *m = PyList_GET_ITEM(p->meta, i);
        PyObject *c = PyDict_GetItemString(m, "carrier");
        PyObject *g = PyDict_GetItemString(m, "graph");
        PyObject *name = PyDict_GetItemString(m, "carrier_name");
        if (c && PyObject_TypeCheck(c, st->Stream) &&
            l2p_py_stream_usable((l2p_StreamObject *)c, 0) < 0) {
            PyErr_Format(PyExc_ValueError, "carrier: entry %zd's stream (%R) is closed or was "
                         "made before a device reset; a plan holds its carriers' handles, not "
                         "copies", i, name ? name : Py_None);
            return -1;
        }
        if (g && g != Py_None && l2p_py_graph_check(g) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError)) return -1; /* not the graph's word */
            PyObject *t, *v, *tb;
            PyErr_Fetch(&t, &v, &tb);
            PyErr_Format(PyExc_ValueError, "carrier: entry %zd's graph (%R): %S", i,
                         name ? name : Py_None, v ? v : Py_None);
            Py_XDECREF(t);
            Py_XDECREF(v);
            Py_XDECREF(tb);
            return -1;
        }
    }
    return 0;
}

static PyObject *apply_into(l2p_PlanObject *txn_owner, PyObject *other)
{
    l2p_state *st = plan_state((PyObject *)txn_owner);
    l2p_PlanObject *q = (l2p_PlanObject *)other;
    if (carriers_usable(st, q) < 0) return NULL;
    if (l2p_plan_apply(&txn_owner->txn, &q->plan, &txn_owner->granted) != L2P_OK)
        return l2p_py_raise(st);
    if (PyList_Append(txn_owner->applied, other) < 0 || tell_graphs(other) < 0) return NULL;
    return PyLong_FromSize_t(txn_owner->granted);
}

static PyObject *plan_install(PyObject *self, PyObject *noargs)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    (void)noargs;
    if (p->txn.active)
        return PyErr_Format(PyExc_RuntimeError, "install: this plan is installed already");
    Py_CLEAR(p->forgotten); /* a transaction's own, from its start */
    if (l2p_plan_begin(&p->txn, p->plan.device, NULL) != L2P_OK)
        return l2p_py_raise(plan_state(self));
    PyObject *r = apply_into(p, self);
    if (!r) { /* the apply put back what it changed; end the transaction as found */
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        if (l2p_plan_end(&p->txn) != L2P_OK) l2p_clear_error();
        l2p_plan_txn_free(&p->txn);
        PyList_SetSlice(p->applied, 0, PY_SSIZE_T_MAX, NULL);
        Py_CLEAR(p->forgotten);
        PyErr_Restore(t, v, tb);
    }
    return r;
}

/* Whether graph `g`'s nodes should leave the transaction now: its owner reset it (asked
 * through l2p_py_graph_owner_holds; where it cannot be asked, they stay), and they did not
 * leave in an earlier pass (p->forgotten). `fresh` notes it for this pass. */
static int to_forget(l2p_PlanObject *p, PyObject *g, PyObject *fresh)
{
    if (!g || g == Py_None) return 0;
    for (Py_ssize_t i = 0; p->forgotten && i < PyList_GET_SIZE(p->forgotten); i++)
        if (PyList_GET_ITEM(p->forgotten, i) == g) return 0; /* by identity: no __eq__ */
    int holds = l2p_py_graph_owner_holds(g);
    if (holds < 0) PyErr_Clear();
    if (holds != 0) return 0;
    if (fresh && PyList_Append(fresh, g) < 0) PyErr_Clear();
    return 1;
}

/* The pass's graphs join p->forgotten (a failure only means a later pass forgets again). */
static void note_forgotten(l2p_PlanObject *p, PyObject *fresh)
{
    /* not after a restore the owner's hook made meanwhile: it would outlive the transaction */
    if (!fresh || !PyList_GET_SIZE(fresh) || !p->txn.active) return;
    if (!p->forgotten) {
        p->forgotten = Py_NewRef(fresh);
        return;
    }
    Py_ssize_t n = PyList_GET_SIZE(p->forgotten);
    if (PyList_SetSlice(p->forgotten, n, n, fresh) < 0) PyErr_Clear();
}

/* The nodes of each graph whose owner destroyed it since the install (l2p_py_graph_owner_holds)
 * are taken out of the transaction, once: their handles are freed, and putting a window back
 * on them would be a driver call on freed memory. Where the owner cannot be asked, the nodes
 * stay. */
static void forget_reset_graphs(l2p_PlanObject *p)
{
    PyObject *fresh = PyList_New(0);
    if (!fresh) PyErr_Clear();
    for (Py_ssize_t a = 0; a < PyList_GET_SIZE(p->applied); a++) {
        /* the owner's hook is Python: hold what it could otherwise free */
        l2p_PlanObject *q = (l2p_PlanObject *)Py_NewRef(PyList_GET_ITEM(p->applied, a));
        for (Py_ssize_t i = 0; p->txn.active && q->meta && i < PyList_GET_SIZE(q->meta); i++) {
            PyObject *g = PyDict_GetItemString(PyList_GET_ITEM(q->meta, i), "graph");
            Py_XINCREF(g);
            int forget = to_forget(p, g, fresh);
            Py_XDECREF(g);
            if (!forget || (size_t)i >= q->plan.n_entries) continue;
            const l2p_plan_entry *e = &q->plan.entries[i];
            for (size_t k = 0; k < e->n_slots; k++)
                l2p_plan_txn_forget(&p->txn, &q->plan.slots[e->first_slot + k]);
        }
        Py_DECREF(q);
    }
    note_forgotten(p, fresh);
    Py_XDECREF(fresh);
}

static PyObject *plan_apply(PyObject *self, PyObject *other)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    if (!PyObject_TypeCheck(other, plan_state(self)->Plan))
        return PyErr_Format(PyExc_TypeError, "plan: expected a Plan, got %s",
                            Py_TYPE(other)->tp_name);
    if (!p->txn.active)
        return PyErr_Format(PyExc_RuntimeError, "apply: install this plan first (apply "
                            "switches an installed plan's transaction to another plan)");
    /* Nodes of graphs reset since go first: a new node at a freed node's address would
     * otherwise be taken for the one the transaction knows, and keep this apply's window at
     * restore (review of 09ef71b, finding 8). */
    forget_reset_graphs(p);
    if (!p->txn.active)
        return PyErr_Format(PyExc_RuntimeError, "apply: the plan was restored meanwhile (by "
                            "a graph owner's hook); install it again");
    return apply_into(p, other);
}

static PyObject *plan_restore(PyObject *self, PyObject *noargs)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    (void)noargs;
    if (!p->txn.active) Py_RETURN_NONE; /* idempotent */
    PyObject *t0, *v0, *tb0;
    PyErr_Fetch(&t0, &v0, &tb0); /* restore runs with an exception passing through, too */
    forget_reset_graphs(p);
    PyErr_Restore(t0, v0, tb0);
    if (!p->txn.active) Py_RETURN_NONE; /* restored meanwhile (the hook ran Python) */
    l2p_status rc = l2p_plan_end(&p->txn);
    l2p_plan_txn_free(&p->txn);
    /* the graphs written are told even when a write failed: their executables are stale */
    int r = 0;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(p->applied); i++)
        if (tell_graphs(PyList_GET_ITEM(p->applied, i)) < 0) r = -1;
    if (r < 0) PyErr_Clear();
    PyErr_Restore(t, v, tb);
    PyList_SetSlice(p->applied, 0, PY_SSIZE_T_MAX, NULL);
    Py_CLEAR(p->forgotten);
    if (rc != L2P_OK) return l2p_py_raise(plan_state(self));
    Py_RETURN_NONE;
}

static PyObject *plan_enter(PyObject *self, PyObject *noargs)
{
    PyObject *r = plan_install(self, noargs);
    if (!r) return NULL;
    Py_DECREF(r);
    return Py_NewRef(self);
}

static PyObject *plan_exit_impl(PyObject *self, const void *args)
{
    PyObject *type = ((const l2p_exit_args *)args)->exc_type;
    PyObject *r = plan_restore(self, NULL);
    if (!r) {
        /* the user's exception says more; the restore was attempted either way */
        if (type != Py_None) PyErr_Clear();
        else return NULL;
    }
    Py_XDECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *plan_launch_window(PyObject *self, PyObject *name)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    for (size_t i = 0; i < p->plan.n_entries; i++) {
        PyObject *m = PyList_GET_ITEM(p->meta, (Py_ssize_t)i);
        PyObject *n = PyDict_GetItemString(m, "name");
        if (p->plan.entries[i].carrier != L2P_CARRIER_LAUNCH || !n) continue;
        int eq = PyObject_RichCompareBool(n, name, Py_EQ);
        if (eq < 0) return NULL;
        if (eq) return p->plan.entries[i].on ? Py_NewRef(PyDict_GetItemString(m, "window"))
                                             : Py_NewRef(Py_None);
    }
    return PyErr_Format(PyExc_KeyError, "name: no launch entry named %R in this plan", name);
}

/* ---- attributes, repr, lifetime ------------------------------------------------------ */

static PyObject *plan_get_set_aside(PyObject *self, void *c)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    (void)c;
    if (!p->plan.has_set_aside) Py_RETURN_NONE;
    return PyLong_FromSize_t(p->plan.set_aside);
}

static int plan_set_set_aside(PyObject *self, PyObject *v, void *c)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    long long bytes = 0;
    (void)c;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "set_aside: cannot delete; set None");
        return -1;
    }
    if (p->txn.active) {
        PyErr_SetString(PyExc_RuntimeError, "set_aside: this plan is installed; restore it "
                        "first");
        return -1;
    }
    if (v != Py_None && l2p_py_ranged_int(v, "set_aside", "bytes", 0, LLONG_MAX, &bytes) < 0)
        return -1;
    return set_aside_into(p, v != Py_None, bytes);
}

static PyObject *plan_get_device(PyObject *self, void *c)
{
    (void)c;
    return l2p_device_new(plan_state(self), ((l2p_PlanObject *)self)->plan.device);
}

static PyObject *plan_get_installed(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((l2p_PlanObject *)self)->txn.active);
}

static PyObject *plan_get_granted(PyObject *self, void *c)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    (void)c;
    if (!p->txn.active) Py_RETURN_NONE;
    return PyLong_FromSize_t(p->granted);
}

static int plan_traverse(PyObject *self, visitproc visit, void *arg)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(p->meta);
    Py_VISIT(p->applied);
    Py_VISIT(p->forgotten);
    return 0;
}

static int plan_clear(PyObject *self)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    Py_CLEAR(p->meta);
    Py_CLEAR(p->applied);
    Py_CLEAR(p->forgotten);
    return 0;
}

/* A plan dropped while installed puts back what it found, here: the collector runs
 * tp_finalize (PEP 442) before it clears anything. An installed plan is in a cycle with itself
 * (its `applied` list holds it), so only the collector frees it, and its tp_clear empties
 * `applied` and `meta` (the carriers: a Stream of ours is destroyed with its object) first: a
 * restore in dealloc came after them (a review at d42e881). */
static void plan_finalize(PyObject *self)
{
    if (!((l2p_PlanObject *)self)->txn.active) return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *r = plan_restore(self, NULL);
    if (!r) PyErr_WriteUnraisable(self);
    Py_XDECREF(r);
    PyErr_Restore(t, v, tb);
}

static void plan_dealloc(PyObject *self)
{
    l2p_PlanObject *p = (l2p_PlanObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (PyObject_CallFinalizerFromDealloc(self) < 0) return; /* resurrected */
    PyObject_GC_UnTrack(self);
    if (p->txn.active) { /* the finalizer could not restore: the core's last try */
        if (l2p_plan_end(&p->txn) != L2P_OK) l2p_clear_error();
    }
    l2p_plan_txn_free(&p->txn);
    l2p_plan_free(&p->plan);
    plan_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef plan_getset[] = {
    {"set_aside", plan_get_set_aside, plan_set_set_aside,
     "int | None: The persisting limit the plan installs (bytes asked; the driver rounds up to "
     "a granule); None leaves the limit as found.", NULL},
    {"device", plan_get_device, NULL, "Device: The plan's device.", NULL},
    {"entries", plan_get_entries, NULL, "list[dict]: Per entry: kind ('stream', 'nodes', "
     "'launch'), carrier, window, name, carrier_name, nodes (positions), graph, on.", NULL},
    {"groups", plan_get_groups, NULL, "list[int]: Per entry, its alternatives group: entries "
     "that share a stream or a kernel node (one window at a time) share a group.", NULL},
    {"installed", plan_get_installed, NULL, "bool: Whether the plan is installed now.", NULL},
    {"granted", plan_get_granted, NULL, "int | None: While installed, the persisting limit the "
     "driver holds.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

L2P_DEFINE_FN(plan_exit_fn, l2p_exit_args, plan_exit_impl, "__exit__",
              "Restores what the plan found, also when an exception passes through.", "bool",
              L2P_PARAM(l2p_exit_args, exc_type, L2P_P_OBJECT, .flags = L2P_P_POSONLY,
                        .pytype = "type[BaseException] | None", .doc = "the exception's type"),
              L2P_PARAM(l2p_exit_args, exc, L2P_P_OBJECT, .flags = L2P_P_POSONLY,
                        .pytype = "BaseException | None", .doc = "the exception"),
              L2P_PARAM(l2p_exit_args, tb, L2P_P_OBJECT, .flags = L2P_P_POSONLY,
                        .pytype = "object", .doc = "its traceback"));
L2P_NOARGS_METHOD(plan_install_fn, plan_install, "install",
                  "Install the plan as one transaction: read what each carrier holds, set the "
                  "limit when it differs, demote persisting lines, write the windows; a failure "
                  "puts back what was written. Returns the limit the driver holds.", "int");
L2P_NOARGS_METHOD(plan_restore_fn, plan_restore, "restore",
                  "Put back what install() found: windows, then persisting lines demoted, then "
                  "the limit. Idempotent.", "None");
L2P_NOARGS_METHOD(plan_enter_fn, plan_enter, "__enter__", "install(); returns the plan.",
                  "_Plan");
L2P_ONE_ARG_METHOD(plan_apply_fn, plan_apply, "apply",
                   "While installed: switch to `plan`'s set-aside and windows within this "
                   "transaction (all or nothing); restore() still returns to what install() "
                   "found. Returns the limit the driver holds.", "int", "plan", "_Plan",
                   "a plan of the same device");
L2P_ONE_ARG_METHOD(plan_launch_window_fn, plan_launch_window, "launch_window",
                   "The window of the launch entry `name` (None when it is off), for "
                   "l2persist.launch(..., window=).", "AccessPolicyWindow | None", "name",
                   "str", "the entry's name");
static const l2p_fn *const plan_rows[] = {
    &plan_add_fn, &plan_configured_fn, &plan_install_fn, &plan_apply_fn, &plan_restore_fn,
    &plan_enter_fn, &plan_exit_fn, &plan_launch_window_fn, NULL};

static PyMethodDef plan_methods[] = {{NULL, NULL, 0, NULL}};

static PyType_Slot plan_slots[] = {
    {Py_tp_doc, NULL}, /* from plan_new_fn */
    {Py_tp_new, plan_tp_new},
    {Py_tp_getset, plan_getset},
    {Py_tp_methods, plan_methods},
    {Py_tp_traverse, plan_traverse},
    {Py_tp_clear, plan_clear},
    {Py_tp_dealloc, plan_dealloc},
    {Py_tp_finalize, plan_finalize},
    {0, NULL}};

static PyType_Spec plan_spec = {"l2persist._Plan", sizeof(l2p_PlanObject), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
                                plan_slots};

int l2p_add_plan_type(PyObject *m, l2p_state *st)
{
    st->Plan = l2p_make_type_rows(m, &plan_spec, &plan_new_fn, plan_rows);
    if (!st->Plan || l2p_add_fns(m, plan_fns) < 0) return -1;
    return PyModule_AddStringConstant(m, "PLAN_FORMAT", L2P_PLAN_FORMAT);
}
