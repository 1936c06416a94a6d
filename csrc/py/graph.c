/* l2persist.Graph (a captured CUDA graph) and l2persist.KernelNode (one of its kernels). */
#include "l2p_py.h"

#include "l2p_window.h"

static l2p_state *graph_state(PyObject *self) { return l2p_state_from_type(Py_TYPE(self)); }

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
    return 0;
}

PyObject *l2p_graph_new(l2p_state *st, cudaGraph_t graph, int device, PyObject *refs)
{
    l2p_GraphObject *g = PyObject_GC_New(l2p_GraphObject, st->Graph);
    if (!g) return NULL;
    g->g.exec = NULL;
    g->g.device = device;
    l2p_graph_adopt(&g->g, graph);
    g->closed = 0;
    g->refs = Py_XNewRef(refs);
    PyObject_GC_Track(g);
    return (PyObject *)g;
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

static PyObject *graph_kernel_nodes(PyObject *self, void *c)
{
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    size_t n = 0;
    (void)c;
    if (graph_check(g) < 0) return NULL;
    if (l2p_graph_kernel_nodes(&g->g, NULL, &n) != L2P_OK) return l2p_py_raise(graph_state(self));
    cudaGraphNode_t *nodes = PyMem_Calloc(n + 1, sizeof *nodes);
    if (!nodes) return PyErr_NoMemory();
    PyObject *list = NULL;
    if (l2p_graph_kernel_nodes(&g->g, nodes, &n) != L2P_OK) {
        l2p_py_raise(graph_state(self));
    } else {
        list = PyList_New((Py_ssize_t)n);
        for (size_t i = 0; list && i < n; i++) {
            PyObject *o = node_new(graph_state(self), self, nodes[i], (Py_ssize_t)i);
            if (!o) Py_CLEAR(list);
            else PyList_SET_ITEM(list, (Py_ssize_t)i, o);
        }
    }
    PyMem_Free(nodes);
    return list;
}

static PyObject *graph_set_window(PyObject *self, PyObject *window)
{
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    const l2p_window *w;
    size_t n = 0;
    if (graph_check(g) < 0 || l2p_py_window_arg(graph_state(self), window, &w) < 0) return NULL;
    if (l2p_graph_kernel_nodes(&g->g, NULL, &n) != L2P_OK) return l2p_py_raise(graph_state(self));
    cudaGraphNode_t *nodes = PyMem_Calloc(n + 1, sizeof *nodes);
    if (!nodes) return PyErr_NoMemory();
    l2p_status rc = l2p_graph_kernel_nodes(&g->g, nodes, &n);
    for (size_t i = 0; rc == L2P_OK && i < n; i++) rc = l2p_graph_node_set_window(nodes[i], w);
    PyMem_Free(nodes);
    l2p_graph_invalidate(&g->g);
    if (rc != L2P_OK) return l2p_py_raise(graph_state(self));
    if (window != Py_None && PyList_Append(g->refs, window) < 0) return NULL;
    Py_RETURN_NONE;
}

/* A graph's kernels address its buffers directly: launching over a closed one would read
 * freed memory and poison the context, so refuse. */
static int refs_open(l2p_state *st, l2p_GraphObject *g)
{
    Py_ssize_t n = g->refs ? PyList_GET_SIZE(g->refs) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(g->refs, i);
        if (PyObject_TypeCheck(o, st->DeviceBuffer) && ((l2p_BufferObject *)o)->closed) {
            PyErr_SetString(PyExc_ValueError, "launch: a buffer the graph's kernels use was "
                            "closed; capture the graph again over open buffers");
            return -1;
        }
    }
    return 0;
}

static PyObject *graph_launch(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"stream", NULL};
    PyObject *stream_obj = Py_None, *stream;
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    cudaStream_t handle;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:launch", names, &stream_obj)) return NULL;
    if (graph_check(g) < 0 || l2p_py_stream_arg(graph_state(self), stream_obj, &handle, &stream) < 0 ||
        refs_open(graph_state(self), g) < 0)
        return NULL;
    if (l2p_graph_launch(&g->g, handle) != L2P_OK) return l2p_py_raise(graph_state(self));
    Py_RETURN_NONE;
}

static PyObject *graph_close(PyObject *self, PyObject *noargs)
{
    l2p_GraphObject *g = (l2p_GraphObject *)self;
    (void)noargs;
    l2p_graph_destroy(&g->g);
    g->closed = 1;
    Py_CLEAR(g->refs);
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

static int graph_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((l2p_GraphObject *)self)->refs);
    return 0;
}

static int graph_clear(PyObject *self)
{
    Py_CLEAR(((l2p_GraphObject *)self)->refs);
    return 0;
}

static void graph_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    l2p_graph_destroy(&((l2p_GraphObject *)self)->g);
    graph_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef graph_getset[] = {
    {"kernel_nodes", graph_kernel_nodes, NULL, "The graph's kernel nodes (KernelNode list).", NULL},
    {"closed", graph_get_closed, NULL, "Whether close() was called or capture failed.", NULL},
    {"instantiated", graph_get_instantiated, NULL,
     "Whether an executable graph is ready (made at launch, dropped when a node changes).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef graph_methods[] = {
    {"set_access_policy_window", graph_set_window, METH_O,
     "set_access_policy_window($self, window, /)\n--\n\nPut the window (None "
     "disables) on every kernel node."},
    {"launch", (PyCFunction)(void (*)(void))graph_launch, METH_VARARGS | METH_KEYWORDS,
     "launch($self, stream=None)\n--\n\nInstantiate if needed (again after node "
     "changes) and launch."},
    {"close", graph_close, METH_NOARGS, "close($self, /)\n--\n\nDestroy the graph and its executable; idempotent."},
    {"__enter__", graph_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nReturns self."},
    {"__exit__", graph_exit, METH_VARARGS,
     "__exit__($self, exc_type=None, exc=None, tb=None, /)\n--\n\nCloses (restores)."},
    {NULL, NULL, 0, NULL}};

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
    return 0;
}

static PyObject *node_get_position(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(((l2p_KernelNodeObject *)self)->position);
}

static PyObject *node_repr(PyObject *self)
{
    return PyUnicode_FromFormat("l2persist.KernelNode(position=%zd)",
                                ((l2p_KernelNodeObject *)self)->position);
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
     "The node's window (cudaKernelNodeAttributeAccessPolicyWindow); None when disabled.", NULL},
    {"position", node_get_position, NULL, "Index among the graph's kernel nodes.", NULL},
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
    st->Graph = l2p_make_type(m, &graph_spec, NULL);
    if (!st->Graph) return -1;
    st->KernelNode = l2p_make_type(m, &node_spec, NULL);
    return st->KernelNode ? 0 : -1;
}
