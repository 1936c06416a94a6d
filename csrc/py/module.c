/* The l2persist._core module: multi-phase init, registering every type, module-level functions
 * (the module state and its lookups are state.c's). Nothing here calls CUDA at import, so the
 * module loads on machines without a GPU. */
#define L2P_MODULE_C
#include "l2p_py.h"

#include "binder.h"
#include "params.h"
#include "l2p_flavour.h"
#include "l2p_kernels.h"
#include "l2p_memory.h"
#include "l2p_release.h"
#include "l2p_replays.h"

int l2p_add_exceptions(PyObject *m, l2p_state *st);
extern const l2p_fn *const l2p_names_fns[]; /* names.c: kernel names for people */
extern const l2p_fn *const l2p_capture_fns[]; /* capture.c: captures and switches */

static PyObject *device_count_impl(PyObject *m, const void *args)
{
    int n;
    cudaError_t why;
    (void)m;
    (void)args;
    l2p_device_count(&n, &why);
    return PyLong_FromLong(n);
}
L2P_DEFINE_FN(device_count_fn, l2p_no_args, device_count_impl, "device_count",
              "Number of CUDA devices; 0 where there is no GPU or driver. Never raises.", "int",
              L2P_NO_PARAMS);

static PyObject *no_device_reason_impl(PyObject *m, const void *args)
{
    int n;
    cudaError_t why;
    (void)m;
    (void)args;
    l2p_device_count(&n, &why);
    if (n > 0) Py_RETURN_NONE;
    char reason[256];
    l2p_no_device_reason(why, reason, sizeof reason);
    return Py_BuildValue("(iss)", (int)why, cudaGetErrorName(why), reason);
}
L2P_DEFINE_FN(no_device_reason_fn, l2p_no_args, no_device_reason_impl, "no_device_reason",
              "None when a device exists, else (code, name, reason): the runtime's error and "
              "what it means here (no driver installed, or a driver too old, and which CUDA "
              "version it needs).", "tuple[int, str, str] | None", L2P_NO_PARAMS);

typedef struct {
    int device;
} reset_args;

static PyObject *reset_persisting_l2_impl(PyObject *m, const void *args)
{
    const reset_args *a = args;
    if (l2p_device_reset_persisting(a->device) != L2P_OK) return l2p_py_raise(l2p_state_from_module(m));
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(reset_persisting_l2_fn, reset_args, reset_persisting_l2_impl, "reset_persisting_l2",
              "cudaCtxResetPersistingL2Cache; persisting lines become normal (the set-aside "
              "stays reserved).", "None",
              L2P_PARAM(reset_args, device, L2P_P_DEVICE, .doc = "the device (index or "
                        "Device); None: the current one"));

typedef struct {
    long long l2_cache_size, persisting_l2_cache_max_size;
} set_aside_args;

static PyObject *default_set_aside_impl(PyObject *m, const void *args)
{
    const set_aside_args *a = args;
    (void)m;
    return PyLong_FromSize_t(l2p_policy_default_set_aside((size_t)a->l2_cache_size,
                                                          (size_t)a->persisting_l2_cache_max_size));
}
L2P_DEFINE_FN(default_set_aside_fn, set_aside_args, default_set_aside_impl, "default_set_aside",
              "The guide's min(0.75 * L2, max), in bytes.", "int",
              L2P_PARAM(set_aside_args, l2_cache_size, L2P_P_INT, .flags = L2P_P_REQUIRED,
                        .lo = 0, .hi = LLONG_MAX, .what = "bytes",
                        .doc = "the L2's size (l2CacheSize)"),
              L2P_PARAM(set_aside_args, persisting_l2_cache_max_size, L2P_P_INT,
                        .flags = L2P_P_REQUIRED, .lo = 0, .hi = LLONG_MAX, .what = "bytes",
                        .doc = "the largest set-aside (persistingL2CacheMaxSize)"));

static PyObject *runtime_version_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    return Py_BuildValue("(ii)", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
}
L2P_DEFINE_FN(runtime_version_fn, l2p_no_args, runtime_version_impl, "runtime_version",
              "The CUDA runtime built in (major, minor).", "tuple[int, int]", L2P_NO_PARAMS);

static PyObject *driver_version_impl(PyObject *m, const void *args)
{
    int v = 0;
    (void)m;
    (void)args;
    if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) {
        (void)cudaGetLastError();
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(ii)", v / 1000, (v % 1000) / 10);
}
L2P_DEFINE_FN(driver_version_fn, l2p_no_args, driver_version_impl, "driver_version",
              "The CUDA version the driver supports (major, minor), or None without a driver.",
              "tuple[int, int] | None", L2P_NO_PARAMS);

/* The `_hooks` dict the package's callables are registered in (foreign.c's _set_hooks; the
 * binding imports nothing from the package), empty until l2persist is imported. */
static int add_hooks(PyObject *m)
{
    PyObject *hooks = PyDict_New();
    int rc = hooks ? PyModule_AddObjectRef(m, "_hooks", hooks) : -1;
    Py_XDECREF(hooks);
    return rc;
}

static const l2p_fn *const module_fns[] = {
    &device_count_fn, &no_device_reason_fn, &reset_persisting_l2_fn, &default_set_aside_fn,
    &runtime_version_fn, &driver_version_fn, NULL};

static int make_access_property(PyObject *m, l2p_state *st)
{
    PyObject *enum_mod = PyImport_ImportModule("enum");
    if (!enum_mod) return -1;
    st->AccessProperty = PyObject_CallMethod(
        enum_mod, "IntEnum", "s[(si)(si)(si)]", "AccessProperty", "NORMAL", L2P_ACCESS_NORMAL,
        "STREAMING", L2P_ACCESS_STREAMING, "PERSISTING", L2P_ACCESS_PERSISTING);
    Py_DECREF(enum_mod);
    if (!st->AccessProperty) return -1;
    /* Users meet it as l2persist.AccessProperty. */
    PyObject *where = PyUnicode_FromString("l2persist");
    int rc = where ? PyObject_SetAttrString(st->AccessProperty, "__module__", where) : -1;
    Py_XDECREF(where);
    if (rc < 0) return -1;
    (void)m;
    return PyModule_AddObjectRef(m, "AccessProperty", st->AccessProperty);
}



/* Names as tuples: the Python package lists kernels and flavours from these, not by hand. */
static int add_names(PyObject *m, const char *attr, const char *const *names, size_t stride)
{
    PyObject *list = PyList_New(0), *t;
    for (const char *const *p = names; list && *p;
         p = (const char *const *)((const char *)p + stride)) {
        PyObject *s = PyUnicode_FromString(*p);
        if (!s || PyList_Append(list, s) < 0) Py_CLEAR(list);
        Py_XDECREF(s);
    }
    t = list ? PyList_AsTuple(list) : NULL;
    Py_XDECREF(list);
    int rc = t ? PyModule_AddObjectRef(m, attr, t) : -1;
    Py_XDECREF(t);
    return rc;
}

static int add_kernels(PyObject *m, l2p_state *st)
{
    /* The kernel rows' names are every sizeof(l2p_kernel) bytes, ending at a NULL name. */
    if (l2p_add_kernels(m, st, l2p_kernel_table) < 0 ||
        add_names(m, "KERNELS", &l2p_kernel_table[0].name, sizeof(l2p_kernel)) < 0 ||
        add_names(m, "LOAD_FLAVOURS", l2p_load_flavour_names, sizeof(char *)) < 0 ||
        add_names(m, "STORE_FLAVOURS", l2p_store_flavour_names, sizeof(char *)) < 0)
        return -1;
    return 0;
}

static int module_exec(PyObject *m)
{
    l2p_state *st = l2p_state_from_module(m);
    if (PyArray_ImportNumPyAPI() < 0) return -1;
    if (l2p_add_exceptions(m, st) < 0) return -1;
    if (make_access_property(m, st) < 0) return -1;
    if (l2p_add_device_types(m, st) < 0 || l2p_add_buffer_type(m, st) < 0 ||
        l2p_add_stream_type(m, st) < 0 || l2p_add_window_type(m, st) < 0 ||
        l2p_add_graph_types(m, st) < 0 || l2p_add_scope_type(m, st) < 0 ||
        l2p_add_plan_type(m, st) < 0 || l2p_add_fastcount_types(m, st) < 0)
        return -1;
    if (add_hooks(m) < 0 || add_kernels(m, st) < 0 || l2p_add_fns(m, module_fns) < 0 ||
        l2p_add_fns(m, l2p_window_fns) < 0 || l2p_add_fns(m, l2p_timing_fns) < 0 ||
        l2p_add_fns(m, l2p_kernel_fns) < 0 || l2p_add_fns(m, l2p_model_fns) < 0 ||
        l2p_add_fns(m, l2p_counter_fns) < 0 || l2p_add_fns(m, l2p_buffer_fns) < 0 ||
        l2p_add_fns(m, l2p_restore_fns) < 0 || l2p_add_fns(m, l2p_foreign_fns) < 0 ||
        l2p_add_fns(m, l2p_tax_fns) < 0 || l2p_add_fns(m, l2p_tune_fns) < 0 ||
        l2p_add_fns(m, l2p_advise_fns) < 0 || l2p_add_fns(m, l2p_stream_fns) < 0 ||
        l2p_add_fns(m, l2p_live_fns) < 0 || l2p_add_fns(m, l2p_names_fns) < 0 ||
        l2p_add_fns(m, l2p_capture_fns) < 0 || l2p_add_fns(m, l2p_replays_fns) < 0)
        return -1;
    PyObject *magic = PyLong_FromUnsignedLong(L2P_MAGIC); /* unsigned: a C long may be 32 bits */
    int rc = magic ? PyModule_AddObjectRef(m, "SINK_MAGIC", magic) : -1;
    Py_XDECREF(magic);
    if (rc < 0) return -1;
    /* the name prefix of a replay whose event pair may hold the host's launch (l2p_replays.h) */
    if (PyModule_AddStringConstant(m, "REPLAY_HOST_PREFIX", L2P_REPLAYS_HOST) < 0) return -1;
    return PyModule_AddIntConstant(m, "CUDART_VERSION", CUDART_VERSION);
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    return l2p_state_traverse(l2p_state_from_module(m), visit, arg);
}

static int module_clear(PyObject *m)
{
    l2p_state_clear(l2p_state_from_module(m));
    return 0;
}

/* Teardown: the device memory the module owns goes with it. */
static void module_free(void *m)
{
    l2p_state *st = l2p_state_from_module((PyObject *)m);
    if (st) {
        l2p_flush_release(&st->flush);
        l2p_stream_list_detach(st);
    }
    l2p_release_drain(); /* releases a capture refused: the last safe point */
    module_clear((PyObject *)m);
}

/* Honest declarations: NumPy's C API and the per-process CUDA state (device caches in the
 * core) are not per-interpreter, and the caches rely on the GIL. */
static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL}};

static PyModuleDef l2p_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "l2persist._core",
    .m_doc = "l2persist's C core: devices, the persisting-L2 set-aside, buffers, streams, "
             "access policy windows, graphs, kernels and timing.",
    .m_size = sizeof(l2p_state),
    .m_methods = NULL, /* the functions come from rows (params.h), added at exec */
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__core(void)
{
    l2p_state_bind(&l2p_module_def);
    return PyModuleDef_Init(&l2p_module_def);
}
