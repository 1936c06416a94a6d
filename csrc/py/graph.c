/* l2persist.Graph (a captured CUDA graph) and l2persist.KernelNode (one of its kernels). */
#include "l2p_py.h"
#include "params.h"

#include <string.h>

#include "l2p_graphscan.h"
#include "l2p_window.h"

static l2p_state *graph_state(PyObject *self) { return l2p_state_from_type(Py_TYPE(self)); }

/* hook(self, arg): Graph.buffers and Graph.nodes_window build the package's own objects. */
static PyObject *call_hook(PyObject *self, const char *name, PyObject *arg)
{
    PyObject *fn = l2p_py_hook(Py_TYPE(self), name);
    if (!fn) return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(fn, self, arg, NULL);
    Py_DECREF(fn);
    return r;
}

/* A borrowed graph's owner can destroy the graph while its Python object lives on (PyTorch's
 * CUDAGraph.reset(), before a capture again too): the handles this Graph and its KernelNodes
 * keep are then freed, and a driver call on them is undefined (a review at 4dc3107). The
 * package's owner_handle hook gives a token of the graph the owner holds (PyTorch: its raw
 * graph and its count of resets, since a capture again can reuse the address; None: it cannot
 * tell, as for an int or a cuda.core builder), read at the borrow and again before each use:
 * another token means ours is gone, for good. NULL: the hook could not be asked. */
static PyObject *owner_token(l2p_GraphObject *g)
{
    PyObject *fn = l2p_py_hook(Py_TYPE(g), "owner_handle");
    if (!fn) { /* the binding without the package: nothing to ask */
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    PyObject *t = PyObject_CallOneArg(fn, g->owner);
    Py_DECREF(fn);
    return t;
}

int l2p_py_graph_owner_holds(PyObject *graph)
{
    l2p_GraphObject *g = (l2p_GraphObject *)graph;
    if (g->owner_gone) return 0;
    if (!g->owner || !g->owner_token || g->owner_token == Py_None || !g->g.graph) return 1;
    PyObject *now = owner_token(g);
    if (!now) return -1;
    int same = now == Py_None ? 1 : PyObject_RichCompareBool(now, g->owner_token, Py_EQ);
    Py_DECREF(now);
    if (same < 0) return -1;
    if (!same) g->owner_gone = 1;
    return same;
}

static int graph_check(l2p_GraphObject *g)
{
    if (g->closed) {
        PyErr_SetString(PyExc_ValueError, "graph: this Graph is closed (or its capture failed)");
        return -1;
    }
    if (!g->g.graph) {
        PyErr_SetString(PyExc_ValueError, "graph: capture has not finished; use the Graph after "
                        "the with-block");
        return -1;
    }
    int holds = l2p_py_graph_owner_holds((PyObject *)g);
    if (holds == 0)
        PyErr_SetString(PyExc_ValueError, "graph: its owner no longer holds the graph this Graph "
                        "borrowed (torch.cuda.CUDAGraph.reset(), or a capture again, destroyed "
                        "it): borrow the owner's graph again (l2persist.as_graph)");
    return holds == 1 ? 0 : -1;
}

int l2p_py_graph_check(PyObject *graph) { return graph_check((l2p_GraphObject *)graph); }

PyObject *l2p_graph_new(l2p_state *st, cudaGraph_t graph, int device, PyObject *refs)
{
    l2p_GraphObject *g = PyObject_GC_New(l2p_GraphObject, st->Graph);
    if (!g) return NULL;
    g->g.exec = NULL;
    g->g.life.device = device;
    g->g.borrowed = 0;
    l2p_graph_adopt(&g->g, graph);
    g->closed = 0;
    g->refs = Py_XNewRef(refs);
    g->owner = NULL;
    g->owner_gone = 0;
    g->owner_token = NULL;
    memset(&g->kernels, 0, sizeof g->kernels);
    g->described = 0;
    PyObject_GC_Track(g);
    return (PyObject *)g;
}

PyObject *l2p_graph_borrow(l2p_state *st, cudaGraph_t graph, int device, PyObject *owner)
{
    PyObject *refs = PyList_New(0);
    if (!refs) return NULL;
    l2p_GraphObject *g = (l2p_GraphObject *)l2p_graph_new(st, graph, device, refs);
    Py_DECREF(refs);
    if (!g) return NULL;
    g->g.borrowed = 1;
    g->owner = Py_NewRef(owner); /* its graph lives as long as the owner object */
    if (owner != Py_None) {
        g->owner_token = owner_token(g);
        if (!g->owner_token) Py_CLEAR(g);
    }
    return (PyObject *)g;
}

/* A node's window changed: the owner's executable still has the old one. The owner-specific
 * step (PyTorch: instantiate() again) is the package's owner_changed hook. */
static int notify_owner(l2p_GraphObject *g)
{
    if (!g->owner) return 0;
    PyObject *fn = l2p_py_hook(Py_TYPE(g), "owner_changed");
    if (!fn) return -1;
    PyObject *r = PyObject_CallOneArg(fn, (PyObject *)g);
    Py_DECREF(fn);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static PyObject *node_new(l2p_state *st, PyObject *graph, cudaGraphNode_t node, Py_ssize_t pos)
{
    l2p_KernelNodeObject *n = PyObject_GC_New(l2p_KernelNodeObject, st->KernelNode);
    if (!n) return NULL;
    n->graph = Py_NewRef(graph);
    n->node = node;
    n->position = pos;
    PyObject_GC_Track(n);
    return (PyObject *)n;
}

/* Whether the description still lists the graph's kernel nodes (the same handles in the same
 * order): a graph that is not ours (an int handle, a cuda.core builder) may gain or lose nodes.
 * Listing asks the graph only, never a node's function. 1 where it cannot be told. */
static int described_current(l2p_GraphObject *g)
{
    size_t n = 0, want = g->kernels.n;
    if (l2p_graph_kernel_nodes(&g->g, NULL, &n) != L2P_OK) {
        l2p_clear_error();
        return 1;
    }
    if (n != want) return 0;
    cudaGraphNode_t *nodes = PyMem_Calloc(n + 1, sizeof *nodes);
    if (!nodes) return 1;
    int same = l2p_graph_kernel_nodes(&g->g, nodes, &n) != L2P_OK ||
               (n == want && !memcmp(nodes, g->kernels.nodes, n * sizeof *nodes));
    l2p_clear_error();
    PyMem_Free(nodes);
    return same;
}

/* The graph's kernel nodes described (l2p_graph_kernels: name, shape, parameters, bytes) by
 * the first call that lists them, and again where `listing` finds their list changed; every
 * other use reads the copy, never the functions again (a module may be unloaded meanwhile).
 * NULL with the error raised. */
static const l2p_graph_kernels *graph_described(l2p_GraphObject *g, int listing)
{
    if (graph_check(g) < 0) return NULL;
    if (g->described && listing && !described_current(g)) {
        l2p_graph_kernels_free(&g->kernels);
        g->described = 0;
    }
    if (!g->described) {
        if (l2p_graph_kernels_take(g->g.life.device, g->g.graph, &g->kernels) != L2P_OK) {
            l2p_py_raise(graph_state((PyObject *)g));
            return NULL;
        }
        g->described = 1;
    }
    return &g->kernels;
}

static PyObject *graph_kernel_nodes(PyObject *self, void *c)
{
    (void)c;
    const l2p_graph_kernels *k = graph_described((l2p_GraphObject *)self, 1);
    if (!k) return NULL;
    PyObject *list = PyList_New((Py_ssize_t)k->n);
    for (size_t i = 0; list && i < k->n; i++) {
        PyObject *o = node_new(graph_state(self), self, k->nodes[i], (Py_ssize_t)i);
        if (!o) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, o);
    }
    return list;
}

/* Which of the n kernel nodes `sel` names (None: all): KernelNodes of this graph or positions.
 * Fills pick[i] with 1 for a chosen node. */
static int parse_node_selection(l2p_GraphObject *g, PyObject *sel, size_t n, char *pick)
{
    if (sel == Py_None) {
        memset(pick, 1, n);
        return 0;
    }
    PyObject *seq = PySequence_Fast(sel, "nodes: expected None or a sequence of KernelNode or "
                                         "int positions");
    if (!seq) return -1;
    memset(pick, 0, n);
    l2p_state *st = graph_state((PyObject *)g);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t pos;
        if (PyObject_TypeCheck(o, st->KernelNode)) {
            l2p_KernelNodeObject *kn = (l2p_KernelNodeObject *)o;
            if (kn->graph != (PyObject *)g) {
                PyErr_SetString(PyExc_ValueError, "nodes: a KernelNode of another Graph");
                Py_DECREF(seq);
                return -1;
            }
            pos = kn->position;
        } else if (PyLong_Check(o) && !PyBool_Check(o)) {
            pos = PyLong_AsSsize_t(o);
            if (pos == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return -1;
            }
        } else {
            PyErr_Format(PyExc_TypeError, "nodes: expected KernelNode or int, got %s",
                         Py_TYPE(o)->tp_name);
            Py_DECREF(seq);
            return -1;
        }
        if (pos < 0 || (size_t)pos >= n) {
            PyErr_Format(PyExc_ValueError, "nodes: position %zd is outside 0..%zd", pos,
                         (Py_ssize_t)n - 1);
            Py_DECREF(seq);
            return -1;
        }
        pick[pos] = 1;
    }
    Py_DECREF(seq);
    return 0;
}

typedef struct {
    l2p_window_val window;
    PyObject *nodes;
} set_window_args;

static PyObject *graph_set_window_impl(PyObject *self, const void *args)
{
    const set_window_args *a = args;
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    PyObject *window = a->window.obj, *sel = a->nodes;
    const l2p_window *w = a->window.w;
    size_t n = 0;
    if (graph_check(g) < 0) return NULL;
    if (l2p_graph_kernel_nodes(&g->g, NULL, &n) != L2P_OK) return l2p_py_raise(graph_state(self));
    cudaGraphNode_t *nodes = PyMem_Calloc(n + 1, sizeof *nodes);
    char *pick = PyMem_Calloc(n + 1, 1);
    if (!nodes || !pick) {
        PyMem_Free(nodes);
        PyMem_Free(pick);
        return PyErr_NoMemory();
    }
    l2p_status rc = l2p_graph_kernel_nodes(&g->g, nodes, &n);
    if (rc == L2P_OK && parse_node_selection(g, sel, n, pick) < 0) { /* checked before any change */
        PyMem_Free(nodes);
        PyMem_Free(pick);
        return NULL;
    }
    for (size_t i = 0; rc == L2P_OK && i < n; i++)
        if (pick[i]) rc = l2p_graph_node_set_window(nodes[i], w);
    PyMem_Free(nodes);
    PyMem_Free(pick);
    l2p_graph_invalidate(&g->g);
    if (rc != L2P_OK) return l2p_py_raise(graph_state(self));
    if (window != Py_None && PyList_Append(g->refs, window) < 0) return NULL;
    if (notify_owner(g) < 0) return NULL; /* once for all the nodes */
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(graph_set_window_fn, set_window_args, graph_set_window_impl,
              "set_access_policy_window", "Put the window (None disables) on every kernel node, "
              "or on `nodes`. On a borrowed PyTorch graph the owner is re-instantiated so that "
              "its next replay() has it.", "None",
              L2P_PARAM(set_window_args, window, L2P_P_WINDOW, .flags = L2P_P_REQUIRED,
                        .doc = "the window to put on the nodes; None disables it"),
              L2P_PARAM(set_window_args, nodes, L2P_P_OBJECT,
                        .pytype = "Sequence[KernelNode | int] | None",
                        .doc = "KernelNodes of this graph or their positions; None: all"));

/* A graph's kernels address its buffers directly: launching over a closed one would read
 * freed memory and poison the context, so refuse. */
static int refs_open(l2p_state *st, l2p_GraphObject *g)
{
    Py_ssize_t n = g->refs ? PyList_GET_SIZE(g->refs) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(g->refs, i);
        /* The buffer's one check: a captured view is refused too once the buffer it hangs
         * from is closed (its memory may be freed). Closed state only, as a launch's own
         * argument conversion: no context query per buffer. */
        if (PyObject_TypeCheck(o, st->DeviceBuffer) &&
            l2p_buffer_usable((l2p_BufferObject *)o, L2P_LIFE_UNASKED,
                              "launch: a buffer the graph's kernels use (capture the graph "
                              "again over open buffers)") < 0)
            return -1;
    }
    return 0;
}

typedef struct {
    l2p_stream_val stream;
} launch_args;

static PyObject *graph_launch_impl(PyObject *self, const void *args)
{
    const launch_args *a = args;
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    if (graph_check(g) < 0 || refs_open(graph_state(self), g) < 0) return NULL;
    if (l2p_graph_launch(&g->g, a->stream.handle) != L2P_OK) return l2p_py_raise(graph_state(self));
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(graph_launch_fn, launch_args, graph_launch_impl, "launch",
              "Instantiate if needed (again after node changes) and launch.", "None",
              L2P_PARAM(launch_args, stream, L2P_P_STREAM,
                        .doc = "where to launch: a Stream, a foreign stream, or None (the "
                        "legacy default stream)"));

static PyObject *graph_close(PyObject *self, PyObject *noargs)
{
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    (void)noargs;
    l2p_graph_destroy(&g->g);
    g->closed = 1;
    Py_CLEAR(g->refs);
    Py_CLEAR(g->owner);
    Py_CLEAR(g->owner_token);
    Py_RETURN_NONE;
}

static PyObject *graph_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    return Py_NewRef(self);
}

static PyObject *graph_exit(PyObject *self, PyObject *args)
{
    (void)args;
    PyObject *r = graph_close(self, NULL);
    Py_XDECREF(r);
    if (!r) return NULL;
    Py_RETURN_FALSE;
}

static PyObject *graph_get_closed(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((l2p_GraphObject *)self)->closed);
}

static PyObject *graph_get_instantiated(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((l2p_GraphObject *)self)->g.exec != NULL);
}

static PyObject *graph_get_owner(PyObject *self, void *c)
{
    PyObject *o = ((l2p_GraphObject *)self)->owner;
    (void)c;
    return Py_NewRef(o ? o : Py_None);
}

static PyObject *graph_get_handle(PyObject *self, void *c)
{
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    (void)c;
    if (graph_check(g) < 0) return NULL;
    return PyLong_FromVoidPtr((void *)g->g.graph);
}

/* _scan(offers): the raw discovery ((kernels, records, uses) tuples) for the package's
 * discovery (l2persist.process.discover). */
static PyObject *graph_scan(PyObject *self, PyObject *offers)
{
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    l2p_graph_scan sc;
    const l2p_graph_kernels *k = graph_described(g, 1);
    if (!k) return NULL;
    if (l2p_graph_kernels_scan(g->g.life.device, k, &sc) != L2P_OK)
        return l2p_py_raise(graph_state(self));
    return l2p_py_scan_tuples(graph_state(self), &sc, offers);
}

static PyObject *graph_buffers_impl(PyObject *self, const void *args)
{
    PyObject *candidates = ((const l2p_one_arg *)args)->value;
    if (graph_check((l2p_GraphObject *)self) < 0) return NULL;
    return call_hook(self, "graph_buffers", candidates);
}
L2P_DEFINE_FN(graph_buffers_fn, l2p_one_arg, graph_buffers_impl, "buffers",
              "The buffers the kernel nodes use, found from their argument bytes.",
              "l2persist.foreign.BufferTable",
              {.name = "candidates", .type = L2P_P_OBJECT, .offset = 0, .pytype = "object",
               .doc = "what names them: tensors, a module, a dict name -> tensor, l2persist "
               "buffers; None: none"});

/* The KernelNodes `sel` names (KernelNodes of this graph or positions), checked by the one
 * parse_node_selection: for NodeGroup (l2persist.process.discover) and Plan carriers. */
static PyObject *graph_select_nodes(PyObject *self, PyObject *sel)
{
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    if (sel == Py_None) {
        PyErr_SetString(PyExc_TypeError, "nodes: expected a sequence of KernelNode or int "
                        "positions, got None");
        return NULL;
    }
    PyObject *all = graph_kernel_nodes(self, NULL);
    if (!all) return NULL;
    size_t n = (size_t)PyList_GET_SIZE(all);
    char *pick = PyMem_Calloc(n + 1, 1);
    PyObject *out = pick ? PyList_New(0) : PyErr_NoMemory();
    if (out && parse_node_selection(g, sel, n, pick) < 0) Py_CLEAR(out);
    for (size_t i = 0; out && i < n; i++)
        if (pick[i] && PyList_Append(out, PyList_GET_ITEM(all, (Py_ssize_t)i)) < 0) Py_CLEAR(out);
    if (out && PyList_GET_SIZE(out) == 0) {
        PyErr_SetString(PyExc_ValueError, "nodes: at least one kernel node is needed");
        Py_CLEAR(out);
    }
    PyMem_Free(pick);
    Py_DECREF(all);
    return out;
}

int l2p_graph_windows_changed(PyObject *graph)
{
    l2p_GraphObject *g = (l2p_GraphObject *)graph;
    l2p_graph_invalidate(&g->g);
    return notify_owner(g);
}

static PyObject *graph_nodes_window(PyObject *self, PyObject *nodes)
{
    return call_hook(self, "node_group", nodes);
}

static int graph_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((l2p_GraphObject *)self)->refs);
    Py_VISIT(((l2p_GraphObject *)self)->owner);
    Py_VISIT(((l2p_GraphObject *)self)->owner_token);
    return 0;
}

static int graph_clear(PyObject *self)
{
    Py_CLEAR(((l2p_GraphObject *)self)->refs);
    Py_CLEAR(((l2p_GraphObject *)self)->owner);
    Py_CLEAR(((l2p_GraphObject *)self)->owner_token);
    return 0;
}

static void graph_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    l2p_graph_destroy(&((l2p_GraphObject *)self)->g);
    l2p_graph_kernels_free(&((l2p_GraphObject *)self)->kernels);
    graph_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef graph_getset[] = {
    {"kernel_nodes", graph_kernel_nodes, NULL, "list[KernelNode]: The graph's kernel nodes.", NULL},
    {"closed", graph_get_closed, NULL, "bool: Whether close() was called or capture failed.", NULL},
    {"instantiated", graph_get_instantiated, NULL,
     "bool: Whether an executable graph is ready (made at launch, dropped when a node changes).", NULL},
    {"owner", graph_get_owner, NULL,
     "object | None: The foreign graph object this Graph borrows (l2persist.as_graph), or None when l2persist "
     "captured it.", NULL},
    {"handle", graph_get_handle, NULL, "int: The cudaGraph_t, as an int.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

L2P_ONE_ARG_METHOD(graph_nodes_window_fn, graph_nodes_window, "nodes_window",
                   "A carrier whose access_policy_window reads and sets the window of these "
                   "nodes.", "l2persist.foreign.NodeGroup", "nodes",
                   "Sequence[KernelNode | int]", "KernelNodes of this graph or their positions");
L2P_ONE_ARG_METHOD(graph_select_nodes_fn, graph_select_nodes, "_select_nodes",
                   "The KernelNodes `nodes` names, in the graph's order, checked (at least one).",
                   "list[KernelNode]", "nodes", "Sequence[KernelNode | int]",
                   "KernelNodes of this graph or their positions");
L2P_ONE_ARG_METHOD(graph_scan_fn, graph_scan, "_scan", "Raw discovery for l2persist.foreign: "
                   "(kernels, records, uses) tuples.",
                   "tuple[list[tuple[int, str, tuple[int, int, int], tuple[int, int, int], int, "
                   "int]], list[tuple[int, int, int]], list[tuple[int, int, int, int, int]]]",
                   "offers", "Sequence[tuple[int, int]]", "the (ptr, nbytes) buffers on offer");
L2P_NOARGS_METHOD(graph_close_fn, graph_close, "close", "Destroy the graph and its executable "
                  "(a borrowed graph: only ours); idempotent.", "None");
L2P_NOARGS_METHOD(graph_enter_fn, graph_enter, "__enter__", "Returns self.", "Graph");
L2P_EXIT_METHOD(graph_exit_fn, graph_exit, "Closes (restores).");
static const l2p_fn *const graph_method_rows[] = {
    &graph_set_window_fn, &graph_nodes_window_fn, &graph_launch_fn, &graph_buffers_fn,
    &graph_scan_fn, &graph_select_nodes_fn, &graph_close_fn, &graph_enter_fn, &graph_exit_fn, NULL};

/* Methods not from rows (none left but the slots). */
static PyMethodDef graph_methods[] = {{NULL, NULL, 0, NULL}};

static PyType_Slot graph_slots[] = {
    {Py_tp_doc, "A CUDA graph captured with `with stream.capture() as graph:`; it keeps the "
                "buffers its kernels use alive."},
    {Py_tp_getset, graph_getset},
    {Py_tp_methods, graph_methods},
    {Py_tp_traverse, graph_traverse},
    {Py_tp_clear, graph_clear},
    {Py_tp_dealloc, graph_dealloc},
    {0, NULL}};

static PyType_Spec graph_spec = {"l2persist.Graph", sizeof(l2p_GraphObject), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                     Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
                                 graph_slots};

/* ---- KernelNode ---- */

static int node_check(l2p_KernelNodeObject *n)
{
    return graph_check((l2p_GraphObject *)n->graph);
}

static PyObject *node_get_window(PyObject *self, void *c)
{
    l2p_KernelNodeObject *n = (l2p_KernelNodeObject *)self;
    l2p_window w;
    (void)c;
    if (node_check(n) < 0) return NULL;
    if (l2p_graph_node_get_window(n->node, &w) != L2P_OK) return l2p_py_raise(graph_state(self));
    if (w.num_bytes == 0) Py_RETURN_NONE;
    return l2p_window_new(graph_state(self), &w, NULL);
}

static int node_set_window(PyObject *self, PyObject *value, void *c)
{
    l2p_KernelNodeObject *n = (l2p_KernelNodeObject *)self;
    l2p_GraphObject *g = (l2p_GraphObject *)n->graph;
    const l2p_window *w;
    (void)c;
    if (!value) value = Py_None;
    if (node_check(n) < 0 || l2p_py_window_arg(graph_state(self), value, &w) < 0) return -1;
    if (l2p_graph_node_set_window(n->node, w) != L2P_OK) return l2p_py_raise_int(graph_state(self));
    l2p_graph_invalidate(&g->g); /* the executable copy still has the old window */
    if (value != Py_None && PyList_Append(g->refs, value) < 0) return -1;
    return notify_owner(g);
}

static PyObject *node_get_position(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(((l2p_KernelNodeObject *)self)->position);
}

/* The node as its graph described it when listed (graph_described): a KernelNode is only
 * made from that list, so its position finds it. */
static int node_describe(PyObject *self, l2p_kernel_info *k)
{
    l2p_KernelNodeObject *n = (l2p_KernelNodeObject *)self;
    if (node_check(n) < 0) return -1;
    const l2p_graph_kernels *d = graph_described((l2p_GraphObject *)n->graph, 0);
    if (!d) return -1;
    if (n->position < 0 || (size_t)n->position >= d->n || d->nodes[n->position] != n->node) {
        PyErr_Format(PyExc_ValueError, "KernelNode at position %zd is no longer its graph's "
                     "(the graph's kernel nodes changed since it was listed; %zu now): list "
                     "kernel_nodes again", n->position, d->n);
        return -1;
    }
    *k = d->kernels[n->position];
    return 0;
}

static PyObject *node_get_name(PyObject *self, void *c)
{
    l2p_kernel_info k;
    (void)c;
    return node_describe(self, &k) < 0 ? NULL : PyUnicode_FromString(k.name);
}

static PyObject *node_get_grid(PyObject *self, void *c)
{
    l2p_kernel_info k;
    (void)c;
    return node_describe(self, &k) < 0 ? NULL : l2p_py_shape3(k.grid);
}

static PyObject *node_get_block(PyObject *self, void *c)
{
    l2p_kernel_info k;
    (void)c;
    return node_describe(self, &k) < 0 ? NULL : l2p_py_shape3(k.block);
}

static PyObject *node_get_shared_mem(PyObject *self, void *c)
{
    l2p_kernel_info k;
    (void)c;
    return node_describe(self, &k) < 0 ? NULL : PyLong_FromUnsignedLong(k.shared_mem);
}

static PyObject *node_get_graph(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(((l2p_KernelNodeObject *)self)->graph);
}

static PyObject *node_repr(PyObject *self)
{
    l2p_KernelNodeObject *n = (l2p_KernelNodeObject *)self;
    l2p_kernel_info k;
    if (node_describe(self, &k) < 0) {
        PyErr_Clear();
        l2p_clear_error();
        return PyUnicode_FromFormat("l2persist.KernelNode(position=%zd)", n->position);
    }
    return PyUnicode_FromFormat("l2persist.KernelNode(position=%zd, name='%.80s', grid=(%u, %u, "
                                "%u), block=(%u, %u, %u))", n->position, k.name, k.grid[0],
                                k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2]);
}

static int node_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((l2p_KernelNodeObject *)self)->graph);
    return 0;
}

static int node_clear(PyObject *self)
{
    Py_CLEAR(((l2p_KernelNodeObject *)self)->graph);
    return 0;
}

static void node_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    node_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef node_getset[] = {
    {"access_policy_window", node_get_window, node_set_window,
     "AccessPolicyWindow | None: The node's window (cudaKernelNodeAttributeAccessPolicyWindow); None when disabled.", NULL},
    {"position", node_get_position, NULL, "int: Index among the graph's kernel nodes.", NULL},
    {"name", node_get_name, NULL, "str: The kernel's (mangled) name, from the driver.", NULL},
    {"grid", node_get_grid, NULL, "tuple[int, int, int]: Grid dimensions (x, y, z).", NULL},
    {"block", node_get_block, NULL, "tuple[int, int, int]: Block dimensions (x, y, z).", NULL},
    {"shared_mem", node_get_shared_mem, NULL, "int: Dynamic shared memory per block, bytes.", NULL},
    {"graph", node_get_graph, NULL, "Graph: The Graph the node belongs to.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot node_slots[] = {
    {Py_tp_doc, "A kernel node of a Graph."},
    {Py_tp_getset, node_getset},
    {Py_tp_repr, node_repr},
    {Py_tp_traverse, node_traverse},
    {Py_tp_clear, node_clear},
    {Py_tp_dealloc, node_dealloc},
    {0, NULL}};

static PyType_Spec node_spec = {"l2persist.KernelNode", sizeof(l2p_KernelNodeObject), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                    Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
                                node_slots};

int l2p_add_graph_types(PyObject *m, l2p_state *st)
{
    st->Graph = l2p_make_type_rows(m, &graph_spec, NULL, graph_method_rows);
    if (!st->Graph) return -1;
    st->KernelNode = l2p_make_type(m, &node_spec, NULL);
    return st->KernelNode ? 0 : -1;
}
