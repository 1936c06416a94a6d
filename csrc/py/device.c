/* l2persist.Device and l2persist.DeviceProperties. */
#include "l2p_py.h"
#include "params.h"

#include <stddef.h>

/* ---- DeviceProperties: one table drives attributes, as_dict(), repr and HTML ---- */

typedef enum { F_STR, F_INT, F_SIZE, F_BOOL, F_DOUBLE, F_CC } field_kind;

typedef struct {
    const char *name;
    field_kind kind;
    size_t offset;
    const char *doc;
} field;

#define P(member) offsetof(l2p_device_props, member)
static const field fields[] = {
    {"name", F_STR, P(name), "The device's name."},
    {"index", F_INT, P(index), "The device's index."},
    {"pci_bus_id", F_STR, P(pci_bus_id), "PCI domain:bus:device.function."},
    {"compute_capability", F_CC, 0, "(major, minor)."},
    {"multiprocessor_count", F_INT, P(multiprocessor_count), "Number of SMs."},
    {"l2_cache_size", F_SIZE, P(l2_cache_size), "L2 cache size in bytes."},
    {"persisting_l2_cache_max_size", F_SIZE, P(persisting_l2_cache_max_size),
     "Largest persisting-L2 set-aside the driver grants, in bytes."},
    {"access_policy_max_window_size", F_SIZE, P(access_policy_max_window_size),
     "Largest num_bytes of an access policy window."},
    {"total_memory", F_SIZE, P(total_memory), "Global memory in bytes."},
    {"memory_bus_width", F_INT, P(memory_bus_width), "Memory bus width in bits."},
    {"memory_clock_khz", F_INT, P(memory_clock_khz), "Peak memory clock in kHz."},
    {"peak_memory_bandwidth", F_DOUBLE, P(peak_memory_bandwidth),
     "2 * memory clock * bus width / 8, in bytes/s (a datasheet-style peak, not a measurement)."},
    {"global_l1_cache_supported", F_BOOL, P(global_l1_cache_supported),
     "Whether global loads may be cached in L1."},
};
#undef P
#define N_FIELDS (sizeof fields / sizeof fields[0])

static PyObject *field_value(const l2p_device_props *p, const field *f)
{
    const char *base = (const char *)p;
    switch (f->kind) {
    case F_STR: return PyUnicode_FromString(base + f->offset);
    case F_INT: return PyLong_FromLong(*(const int *)(base + f->offset));
    case F_SIZE: return PyLong_FromSize_t(*(const size_t *)(base + f->offset));
    case F_BOOL: return PyBool_FromLong(*(const int *)(base + f->offset));
    case F_DOUBLE: return PyFloat_FromDouble(*(const double *)(base + f->offset));
    case F_CC: return Py_BuildValue("(ii)", p->cc_major, p->cc_minor);
    }
    Py_RETURN_NONE;
}

/* "type: doc" (the stub reads the type from the doc), made once from the field's kind. */
static const char *field_doc(const field *f)
{
    static char docs[N_FIELDS][320];
    static const char *const types[] = {[F_STR] = "str", [F_INT] = "int", [F_SIZE] = "int",
                                        [F_BOOL] = "bool", [F_DOUBLE] = "float",
                                        [F_CC] = "tuple[int, int]"};
    char *d = docs[f - fields];
    snprintf(d, sizeof docs[0], "%s: %s", types[f->kind], f->doc);
    return d;
}

static PyObject *props_get(PyObject *self, void *closure)
{
    return field_value(&((l2p_PropertiesObject *)self)->p, (const field *)closure);
}

static PyObject *props_as_dict(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < N_FIELDS; i++) {
        PyObject *v = field_value(&((l2p_PropertiesObject *)self)->p, &fields[i]);
        if (!v || PyDict_SetItemString(d, fields[i].name, v) < 0) Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

/* repr and HTML are formatted by the package (presentation, not policy): its record_repr and
 * record_html hooks, called as hook("DeviceProperties", self). */
static PyObject *call_formatter(PyObject *self, const char *hook)
{
    PyObject *fn = l2p_py_hook(Py_TYPE(self), hook);
    if (!fn) return NULL;
    PyObject *r = PyObject_CallFunction(fn, "sO", "DeviceProperties", self);
    Py_DECREF(fn);
    return r;
}

static PyObject *props_repr(PyObject *self) { return call_formatter(self, "record_repr"); }

static PyObject *props_html(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    return call_formatter(self, "record_html");
}

static PyGetSetDef props_getset[N_FIELDS + 1];

L2P_NOARGS_METHOD(props_as_dict_fn, props_as_dict, "as_dict", "The properties as a dict.", "dict[str, object]");
L2P_NOARGS_METHOD(props_html_fn, props_html, "_repr_html_", "An HTML table for Jupyter.", "str");
static const l2p_fn *const props_method_rows[] = {&props_as_dict_fn, &props_html_fn, NULL};

/* Methods not from rows (none left but the slots). */
static PyMethodDef props_methods[] = {
    {NULL, NULL, 0, NULL}};

static PyType_Slot props_slots[] = {
    {Py_tp_doc, "The L2-related facts of a CUDA device, read once when asked for."},
    {Py_tp_getset, props_getset},
    {Py_tp_methods, props_methods},
    {Py_tp_repr, props_repr},
    {0, NULL}};

static PyType_Spec props_spec = {"l2persist.DeviceProperties", sizeof(l2p_PropertiesObject), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION |
                                     Py_TPFLAGS_IMMUTABLETYPE,
                                 props_slots};

/* ---- Device ---- */

static l2p_state *dev_state(PyObject *self) { return l2p_state_from_type(Py_TYPE(self)); }
static int dev_index(PyObject *self) { return ((l2p_DeviceObject *)self)->index; }

PyObject *l2p_device_new(l2p_state *st, int index)
{
    int prev;
    /* Entering the device once records its persisting limit as this process's default. */
    if (l2p_device_enter(index, &prev) != L2P_OK) return l2p_py_raise(st);
    l2p_device_leave(prev);
    l2p_DeviceObject *d = PyObject_New(l2p_DeviceObject, st->Device);
    if (d) d->index = index;
    return (PyObject *)d;
}

typedef struct {
    long long index;
} dev_new_args;

static PyObject *dev_new_impl(PyObject *type, const void *args)
{
    const dev_new_args *a = args;
    l2p_state *st = l2p_state_from_type((PyTypeObject *)type);
    if (l2p_device_check((int)a->index) != L2P_OK) return l2p_py_raise(st);
    return l2p_device_new(st, (int)a->index);
}
L2P_DEFINE_FN(dev_new_fn, dev_new_args, dev_new_impl, "Device",
              "A CUDA device, its L2 properties and its persisting-L2 set-aside.", "Device",
              L2P_PARAM(dev_new_args, index, L2P_P_INT, .lo = INT_MIN, .hi = INT_MAX,
                        .what = "a device index", .pytype = "SupportsIndex",
                        .doc = "the device's index (or a Device)"));

static PyObject *dev_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return l2p_fn_call_tuple(&dev_new_fn, (PyObject *)type, args, kw);
}

static PyObject *dev_get_index(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromLong(dev_index(self));
}

static PyObject *dev_get_properties(PyObject *self, void *c)
{
    (void)c;
    l2p_state *st = dev_state(self);
    l2p_PropertiesObject *p = PyObject_New(l2p_PropertiesObject, st->DeviceProperties);
    if (!p) return NULL;
    if (l2p_device_get_properties(dev_index(self), &p->p) != L2P_OK) {
        Py_DECREF(p);
        return l2p_py_raise(st);
    }
    return (PyObject *)p;
}

/* Call a core getter, then box its value. (Passing the status and the value as two arguments
 * of one call would read the value before the getter ran: argument order is unspecified.) */
static PyObject *size_result(PyObject *self, l2p_status (*get)(int, size_t *))
{
    size_t value = 0;
    if (get(dev_index(self), &value) != L2P_OK) return l2p_py_raise(dev_state(self));
    return PyLong_FromSize_t(value);
}

static PyObject *dev_get_limit(PyObject *self, void *c)
{
    (void)c;
    return size_result(self, l2p_device_get_persisting_limit);
}

static int dev_set_limit(PyObject *self, PyObject *value, void *c)
{
    long long req;
    size_t granted;
    (void)c;
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "persisting_l2_limit cannot be deleted; set 0 "
                        "or call release_persisting_l2()");
        return -1;
    }
    if (l2p_py_int_arg(value, "persisting_l2_limit", &req) < 0) return -1;
    if (l2p_device_set_persisting_limit(dev_index(self), req, &granted) != L2P_OK)
        return l2p_py_raise_int(dev_state(self));
    return 0;
}

static PyObject *dev_get_granule(PyObject *self, void *c)
{
    (void)c;
    return size_result(self, l2p_device_persisting_granule);
}

static PyObject *dev_get_default_limit(PyObject *self, void *c)
{
    (void)c;
    return size_result(self, l2p_device_default_persisting_limit);
}

static PyObject *dev_get_supports(PyObject *self, void *c)
{
    int v = 0;
    (void)c;
    if (l2p_device_supports_persisting(dev_index(self), &v) != L2P_OK)
        return l2p_py_raise(dev_state(self));
    return PyBool_FromLong(v);
}

static int aside_info(PyObject *self, l2p_aside_info *a)
{
    if (l2p_device_aside_info(dev_index(self), a) != L2P_OK) return l2p_py_raise_int(dev_state(self));
    return 0;
}

static PyObject *dev_get_mps(PyObject *self, void *c)
{
    l2p_aside_info a;
    (void)c;
    if (aside_info(self, &a) < 0) return NULL;
    if (a.mps < 0) Py_RETURN_NONE;
    return PyBool_FromLong(a.mps);
}

static PyObject *dev_get_source(PyObject *self, void *c)
{
    static const char *names[] = {"process", "mps-server", "mps-server-unknown"};
    l2p_aside_info a;
    (void)c;
    if (aside_info(self, &a) < 0) return NULL;
    return PyUnicode_FromString(names[a.source]);
}

static PyObject *dev_get_mps_percent(PyObject *self, void *c)
{
    l2p_aside_info a;
    (void)c;
    if (aside_info(self, &a) < 0) return NULL;
    if (a.server_percent < 0) Py_RETURN_NONE;
    return PyFloat_FromDouble(a.server_percent);
}

/* size, fraction or neither (the guide's rule): the set-aside a scope asks for. */
static int scope_size(PyObject *self, PyObject *size, PyObject *fraction, long long *out)
{
    l2p_device_props p;
    l2p_state *st = dev_state(self);
    if (size != Py_None && fraction != Py_None) {
        PyErr_SetString(PyExc_TypeError, "persisting_l2: give size or fraction, not both");
        return -1;
    }
    if (size != Py_None) return l2p_py_int_arg(size, "size", out);
    if (l2p_device_get_properties(dev_index(self), &p) != L2P_OK) return l2p_py_raise_int(st);
    if (fraction == Py_None) {
        *out = (long long)l2p_policy_default_set_aside(p.l2_cache_size,
                                                       p.persisting_l2_cache_max_size);
        return 0;
    }
    if (PyBool_Check(fraction) || !PyNumber_Check(fraction)) {
        PyErr_Format(PyExc_TypeError, "fraction: expected a number in [0, 1], got %s",
                     Py_TYPE(fraction)->tp_name);
        return -1;
    }
    double f = PyFloat_AsDouble(fraction);
    size_t bytes;
    if (f == -1.0 && PyErr_Occurred()) return -1;
    if (l2p_policy_set_aside_fraction(f, p.persisting_l2_cache_max_size, &bytes) != L2P_OK)
        return l2p_py_raise_int(st);
    *out = (long long)bytes;
    return 0;
}

typedef struct {
    PyObject *size, *fraction;
} persisting_args;

static PyObject *dev_persisting_l2_impl(PyObject *self, const void *args)
{
    const persisting_args *a = args;
    long long bytes;
    if (scope_size(self, a->size, a->fraction, &bytes) < 0) return NULL;
    return l2p_scope_persisting(dev_state(self), dev_index(self), bytes);
}
L2P_DEFINE_FN(dev_persisting_l2_fn, persisting_args, dev_persisting_l2_impl, "persisting_l2",
              "A context manager that sets the set-aside, yields the granted bytes, and on exit "
              "resets persisting lines and restores the previous limit, also when an exception "
              "passes through.", "_Scope",
              L2P_PARAM(persisting_args, size, L2P_P_OBJECT, .pytype = "int | None",
                        .doc = "bytes to set aside (the driver rounds up to its granule); None: "
                        "min(0.75 * l2_cache_size, persisting_l2_cache_max_size)"),
              L2P_PARAM(persisting_args, fraction, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "float | None", .doc = "instead of size: a fraction in [0, 1] "
                        "of persisting_l2_cache_max_size"));


static PyObject *dev_release(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    if (l2p_device_release_persisting(dev_index(self)) != L2P_OK)
        return l2p_py_raise(dev_state(self));
    Py_RETURN_NONE;
}

static PyObject *dev_reset(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    if (l2p_device_reset_persisting(dev_index(self)) != L2P_OK)
        return l2p_py_raise(dev_state(self));
    Py_RETURN_NONE;
}

static PyObject *dev_synchronize(PyObject *self, PyObject *noargs)
{
    l2p_status rc;
    int index = dev_index(self);
    (void)noargs;
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_device_synchronize(index);
    Py_END_ALLOW_THREADS
    if (rc != L2P_OK) return l2p_py_raise(dev_state(self));
    Py_RETURN_NONE;
}

static PyObject *dev_repr(PyObject *self)
{
    return PyUnicode_FromFormat("l2persist.Device(%d)", dev_index(self));
}

static Py_hash_t dev_hash(PyObject *self) { return (Py_hash_t)dev_index(self) + 0x12fa; }

static PyObject *dev_richcompare(PyObject *a, PyObject *b, int op)
{
    if (Py_TYPE(a) != Py_TYPE(b) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
    int same = dev_index(a) == dev_index(b);
    return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static PyObject *dev_as_index(PyObject *self) { return PyLong_FromLong(dev_index(self)); }

static PyGetSetDef dev_getset[] = {
    {"index", dev_get_index, NULL, "int: The device index.", NULL},
    {"properties", dev_get_properties, NULL, "DeviceProperties: DeviceProperties of this device.", NULL},
    {"persisting_l2_limit", dev_get_limit, dev_set_limit,
     "int: The persisting-L2 set-aside in bytes (cudaLimitPersistingL2CacheSize). Setting it "
     "validates 0..persisting_l2_cache_max_size; the driver rounds up to a granule, and "
     "reading it back gives what was granted. Under MPS it reads the server's set-aside and "
     "setting any other value raises NotSupportedError (the driver would accept it and the "
     "hardware ignore it).",
     NULL},
    {"persisting_l2_granule", dev_get_granule, NULL,
     "int: The driver's rounding step for the set-aside (probed once; the limit is restored).",
     NULL},
    {"default_persisting_l2_limit", dev_get_default_limit, NULL,
     "int: The set-aside found when this process first touched the device through l2persist.", NULL},
    {"mps", dev_get_mps, NULL,
     "bool | None: True when this process reaches the device through an MPS server (the driver's "
     "CU_DEVICE_ATTRIBUTE_MPS_ENABLED), False when not, None when the driver cannot say. "
     "Under MPS the set-aside is the server's: see persisting_l2_source.", NULL},
    {"persisting_l2_source", dev_get_source, NULL,
     "str: Who decides the set-aside this process's work gets: 'process' (this process, through "
     "persisting_l2_limit), 'mps-server' (an MPS server, fixed when it started from its "
     "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT; persisting_l2_limit reads its "
     "size and refuses other values) or 'mps-server-unknown' (an MPS server whose setting "
     "could not be read; persisting_l2_limit shows this client's reading, which may differ).",
     NULL},
    {"mps_server_percentage", dev_get_mps_percent, NULL,
     "int | None: The MPS server's CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT (percent of "
     "the L2 size, rounded up to the granule), or None (no MPS, not set, or not readable).",
     NULL},
    {"supports_persisting_l2", dev_get_supports, NULL,
     "bool: cc >= 8.0, a nonzero maximum, and the driver accepts a limit (False on MIG).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* The model is the core's (l2p_tax, through _core.tax_predict); the package's set_aside_tax
 * hook (l2persist.tax.set_aside_tax) assembles the result and runs the optional probe, so the
 * method only hands over. */
typedef struct {
    PyObject *set_aside;
    int probe;
    PyObject *stream, *work;
} set_aside_tax_args;

static PyObject *dev_set_aside_tax_impl(PyObject *self, const void *args)
{
    const set_aside_tax_args *a = args;
    PyObject *fn = l2p_py_hook(Py_TYPE(self), "set_aside_tax");
    if (!fn) return NULL;
    PyObject *kw = Py_BuildValue("{s:O,s:O,s:O}", "probe", a->probe ? Py_True : Py_False,
                                 "stream", a->stream, "work", a->work);
    PyObject *pos = kw ? PyTuple_Pack(2, self, a->set_aside) : NULL;
    PyObject *r = pos ? PyObject_Call(fn, pos, kw) : NULL;
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    Py_DECREF(fn);
    return r;
}
L2P_DEFINE_FN(dev_set_aside_tax_fn, set_aside_tax_args, dev_set_aside_tax_impl, "set_aside_tax",
              "What a set-aside costs other work on this device: the model's prediction "
              "(l2persist.tax.set_aside_tax), with .probe measured when probe=True.",
              "l2persist.tax.TaxPrediction",
              /* the range, [0, persisting_l2_cache_max_size], is the core's (l2p_tax_predict) */
              L2P_PARAM(set_aside_tax_args, set_aside, L2P_P_OBJECT, .pytype = "int | None",
                        .doc = "bytes; None: the device's current persisting_l2_limit"),
              L2P_PARAM(set_aside_tax_args, probe, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .doc = "also measure the tax with the write-heavy probe (a GPU run)"),
              L2P_PARAM(set_aside_tax_args, stream, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "StreamLike", .doc = "where the probe runs; None: the legacy "
                        "stream"),
              L2P_PARAM(set_aside_tax_args, work, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "Callable[[], object] | None", .doc = "also measure the tax "
                        "on this work of yours (l2persist.tax.measure)"));

L2P_NOARGS_METHOD(dev_release_fn, dev_release, "release_persisting_l2", "Reset persisting lines and set the limit to 0 (a reset alone keeps the set-aside).", "None");
L2P_NOARGS_METHOD(dev_reset_fn, dev_reset, "reset_persisting_l2", "cudaCtxResetPersistingL2Cache on this device.", "None");
L2P_NOARGS_METHOD(dev_synchronize_fn, dev_synchronize, "synchronize", "cudaDeviceSynchronize on this device.", "None");
static const l2p_fn *const dev_method_rows[] = {&dev_persisting_l2_fn, &dev_release_fn, &dev_reset_fn,
                                                &dev_synchronize_fn, &dev_set_aside_tax_fn,
                                                NULL};

/* Methods not from rows (none left but the slots). */
static PyMethodDef dev_methods[] = {
    {NULL, NULL, 0, NULL}};

static PyType_Slot dev_slots[] = {
    {Py_tp_doc, NULL}, /* from dev_new_fn */
    {Py_tp_new, dev_new},
    {Py_tp_getset, dev_getset},
    {Py_tp_methods, dev_methods},
    {Py_tp_repr, dev_repr},
    {Py_tp_hash, dev_hash},
    {Py_tp_richcompare, dev_richcompare},
    {Py_nb_index, dev_as_index},
    {0, NULL}};

static PyType_Spec dev_spec = {"l2persist.Device", sizeof(l2p_DeviceObject), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE, dev_slots};

int l2p_add_device_types(PyObject *m, l2p_state *st)
{
    for (size_t i = 0; i < N_FIELDS; i++) {
        props_getset[i].name = fields[i].name;
        props_getset[i].get = props_get;
        props_getset[i].doc = field_doc(&fields[i]);
        props_getset[i].closure = (void *)&fields[i];
    }
    st->DeviceProperties = l2p_make_type_rows(m, &props_spec, NULL, props_method_rows);
    if (!st->DeviceProperties) return -1;
    st->Device = l2p_make_type_rows(m, &dev_spec, &dev_new_fn, dev_method_rows);
    return st->Device ? 0 : -1;
}
