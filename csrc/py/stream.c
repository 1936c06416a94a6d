/* l2persist.Stream: an owned or wrapped CUDA stream, its access policy window, capture. */
#include "l2p_py.h"
#include "params.h"

#include <string.h>

#include "l2p_window.h"

static l2p_state *stream_state(PyObject *self) { return l2p_state_from_type(Py_TYPE(self)); }

int l2p_py_stream_usable(l2p_StreamObject *s, unsigned long long now)
{
    if (l2p_handle_usable(&s->lifetime, now, "stream", "this Stream", "Stream was made",
                          "make a new one") == L2P_OK)
        return 0;
    return l2p_py_raise_int(l2p_state_from_type(Py_TYPE(s)));
}

/* The methods' check: the closed state alone; only a launch asks the context (once for all
 * its objects, binder.c). */
static int check_open(l2p_StreamObject *s) { return l2p_py_stream_usable(s, L2P_LIFE_UNASKED); }

static l2p_StreamObject *stream_alloc(PyTypeObject *type)
{
    l2p_StreamObject *s = PyObject_GC_New(l2p_StreamObject, type);
    if (!s) return NULL;
    /* Not opened (closed, owning nothing) until made or wrapped. */
    memset(&s->lifetime, 0, sizeof s->lifetime);
    s->owner = NULL;
    s->capture_refs = NULL;
    s->next = NULL;
    s->pprev = NULL;
    PyObject_GC_Track(s);
    return s;
}

/* The open-streams list (state.h): linked when a Stream opens, unlinked once when it closes. */
static void stream_link(l2p_state *st, l2p_StreamObject *s)
{
    s->next = st->open_streams;
    s->pprev = &st->open_streams;
    if (s->next) s->next->pprev = &s->next;
    st->open_streams = s;
}

static void stream_unlink(l2p_StreamObject *s)
{
    if (!s->pprev) return;
    *s->pprev = s->next;
    if (s->next) s->next->pprev = s->pprev;
    s->next = NULL;
    s->pprev = NULL;
}

void l2p_stream_list_detach(l2p_state *st)
{
    while (st->open_streams) stream_unlink(st->open_streams);
}

/* The device of a wrapped stream: its own, asked of the runtime. A default stream's handle
 * names the current device's stream, so `device`, where given, says whose (a process that
 * drives several GPUs from one thread sets its window there, whichever GPU is current then);
 * given for any other stream, it must be that stream's own. */
static int wrapped_device(l2p_state *st, cudaStream_t handle, PyObject *device, int *index)
{
    int own;
    if (l2p_stream_device(handle, &own) != L2P_OK) return l2p_py_raise_int(st);
    if (device == Py_None) {
        *index = own;
        return 0;
    }
    if (l2p_py_device_index(st, device, index) < 0) return -1;
    if (l2p_stream_is_default(handle) || *index == own) return 0;
    PyErr_Format(PyExc_ValueError, "device: the stream to wrap is on device %d, not %d (only a "
                 "default stream, 0 / 1 / 2, is given its device)", own, *index);
    return -1;
}

/* Stream(device=None) makes a stream; Stream(obj) wraps a foreign one (CuPy, PyTorch,
 * cuda.core, or 0/1/2 for the default streams) without owning it. */
typedef struct {
    PyObject *device, *wrap;
} stream_new_args;

static PyObject *stream_new_impl(PyObject *type_obj, const void *args)
{
    const stream_new_args *a = args;
    PyTypeObject *type = (PyTypeObject *)type_obj;
    PyObject *device = a->device, *wrap = a->wrap;
    l2p_state *st = l2p_state_from_type(type);
    /* Stream(cupy_stream) reads naturally; route a non-device first argument to wrap. */
    if (wrap == Py_None && device != Py_None && !PyLong_Check(device) &&
        !PyObject_TypeCheck(device, st->Device)) {
        wrap = device;
        device = Py_None;
    }
    l2p_StreamObject *s = stream_alloc(type);
    if (!s) return NULL;
    cudaStream_t handle = NULL;
    int index;
    if (wrap != Py_None) {
        PyObject *dummy;
        if (l2p_py_stream_arg(st, wrap, &handle, &dummy) < 0 ||
            wrapped_device(st, handle, device, &index) < 0)
            goto fail;
        /* Another library's: borrowed (let go, never destroyed), in a context we cannot tell
         * (0: never reported stale; its owner answers for it). */
        l2p_handle_init(&s->lifetime, (l2p_life){index, 0}, L2P_RELEASE_STREAM, (void *)handle,
                        L2P_HANDLE_BORROWED);
        s->owner = Py_NewRef(wrap);
        stream_link(st, s);
        return (PyObject *)s;
    }
    if (l2p_py_device_index(st, device, &index) < 0) goto fail;
    l2p_life life;
    if (l2p_life_begin(&life, index) != L2P_OK || l2p_stream_create(index, &handle) != L2P_OK) {
        l2p_py_raise(st);
        goto fail;
    }
    l2p_handle_init(&s->lifetime, life, L2P_RELEASE_STREAM, (void *)handle, 0);
    stream_link(st, s);
    return (PyObject *)s;
fail:
    Py_DECREF(s); /* never opened: its release does nothing */
    return NULL;
}
L2P_DEFINE_FN(stream_new_fn, stream_new_args, stream_new_impl, "Stream",
              "Stream(device=None) makes a non-blocking stream; Stream(obj) wraps a foreign one "
              "(anything with __cuda_stream__, CuPy's or PyTorch's streams, 0 / 1 / 2 for the "
              "default streams) without owning it. A bare int handle is refused: it cannot be "
              "checked.", "Stream",
              L2P_PARAM(stream_new_args, device, L2P_P_OBJECT, .pytype = "DeviceLike | object",
                        .doc = "the device of a new stream (None: the current one); with "
                        "wrap, whose default stream a handle 0 / 1 / 2 is (None: the current "
                        "device's), else the wrapped stream's own; a foreign stream here is "
                        "taken as wrap"),
              L2P_PARAM(stream_new_args, wrap, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "object", .doc = "a foreign stream to wrap without owning "
                        "it"));

static PyObject *stream_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return l2p_fn_call_tuple(&stream_new_fn, (PyObject *)type, args, kw);
}

static l2p_status stream_release(l2p_StreamObject *s)
{
    /* The handle's rule: an owned stream is destroyed (l2p_stream_destroy's release), a wrapped
     * one only let go, and none after a device reset (the handle may be someone else's); a
     * second close does nothing. The handle is NULL from here. */
    l2p_status st = l2p_handle_close(&s->lifetime, L2P_HANDLE_ASK);
    stream_unlink(s);
    Py_CLEAR(s->owner);
    Py_CLEAR(s->capture_refs);
    return st;
}

static PyObject *stream_close(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    if (stream_release((l2p_StreamObject *)self) != L2P_OK) return l2p_py_raise(stream_state(self));
    Py_RETURN_NONE;
}

static PyObject *stream_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    if (check_open((l2p_StreamObject *)self) < 0) return NULL;
    return Py_NewRef(self);
}

static PyObject *stream_exit(PyObject *self, PyObject *args)
{
    (void)args;
    if (stream_release((l2p_StreamObject *)self) != L2P_OK) return l2p_py_raise(stream_state(self));
    Py_RETURN_FALSE;
}

static PyObject *stream_synchronize(PyObject *self, PyObject *noargs)
{
    l2p_StreamObject *s = (l2p_StreamObject *)self;
    l2p_status rc;
    (void)noargs;
    if (check_open(s) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = l2p_stream_synchronize(l2p_py_stream_device(s), l2p_py_stream_handle(s));
    Py_END_ALLOW_THREADS
    if (rc != L2P_OK) return l2p_py_raise(stream_state(self));
    /* the synchronization point where a checked gather's out-of-range map surfaces */
    if (l2p_py_gather_flag_raise(stream_state(self), l2p_py_stream_device(s)) != 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *stream_cuda_stream(PyObject *self, PyObject *noargs)
{
    l2p_StreamObject *s = (l2p_StreamObject *)self;
    (void)noargs;
    if (check_open(s) < 0) return NULL;
    return Py_BuildValue("(iN)", 0, PyLong_FromVoidPtr(l2p_py_stream_handle(s)));
}

static PyObject *stream_get_window(PyObject *self, void *c)
{
    l2p_StreamObject *s = (l2p_StreamObject *)self;
    l2p_window w;
    (void)c;
    if (check_open(s) < 0) return NULL;
    if (l2p_stream_get_window(l2p_py_stream_device(s), l2p_py_stream_handle(s), &w) != L2P_OK)
        return l2p_py_raise(stream_state(self));
    if (w.num_bytes == 0) Py_RETURN_NONE;
    return l2p_window_new(stream_state(self), &w, NULL);
}

static int stream_set_window(PyObject *self, PyObject *value, void *c)
{
    l2p_StreamObject *s = (l2p_StreamObject *)self;
    const l2p_window *w;
    (void)c;
    if (check_open(s) < 0 || l2p_py_window_arg(stream_state(self), value, &w) < 0) return -1;
    if (l2p_stream_set_window(l2p_py_stream_device(s), l2p_py_stream_handle(s), w) != L2P_OK)
        return l2p_py_raise_int(stream_state(self));
    return 0;
}

typedef struct {
    l2p_window_val window;
    int reset;
} access_policy_args;

static PyObject *stream_access_policy_impl(PyObject *self, const void *args)
{
    const access_policy_args *a = args;
    if (check_open((l2p_StreamObject *)self) < 0) return NULL;
    return l2p_scope_policy(stream_state(self), self, a->window.obj, a->reset);
}
L2P_DEFINE_FN(access_policy_fn, access_policy_args, stream_access_policy_impl, "access_policy",
              "A context manager that sets the stream's window and restores the previous one "
              "on exit (then resets persisting lines if reset).", "_Scope",
              L2P_PARAM(access_policy_args, window, L2P_P_WINDOW, .flags = L2P_P_REQUIRED,
                        .doc = "the window to set; None disables the stream's window"),
              L2P_PARAM(access_policy_args, reset, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .doc = "on exit, also reset persisting lines "
                        "(cudaCtxResetPersistingL2Cache)"));


static PyObject *stream_capture(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    if (check_open((l2p_StreamObject *)self) < 0) return NULL;
    return l2p_scope_capture(stream_state(self), self);
}

static PyObject *stream_get_handle(PyObject *self, void *c)
{
    l2p_StreamObject *s = (l2p_StreamObject *)self;
    (void)c;
    if (check_open(s) < 0) return NULL;
    return PyLong_FromVoidPtr(l2p_py_stream_handle(s));
}

static PyObject *stream_get_device(PyObject *self, void *c)
{
    (void)c;
    return l2p_device_new(stream_state(self), l2p_py_stream_device((l2p_StreamObject *)self));
}

static PyObject *stream_get_closed(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(l2p_py_stream_closed((l2p_StreamObject *)self));
}

static PyObject *stream_get_owned(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(l2p_handle_owned(&((l2p_StreamObject *)self)->lifetime));
}

static PyObject *stream_repr(PyObject *self)
{
    l2p_StreamObject *s = (l2p_StreamObject *)self;
    if (l2p_py_stream_closed(s)) return PyUnicode_FromString("l2persist.Stream(closed)");
    return PyUnicode_FromFormat("l2persist.Stream(handle=%p, device=%d%s)",
                                (void *)l2p_py_stream_handle(s), l2p_py_stream_device(s),
                                l2p_handle_owned(&s->lifetime) ? "" : ", wrapped");
}

static int stream_traverse(PyObject *self, visitproc visit, void *arg)
{
    l2p_StreamObject *s = (l2p_StreamObject *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(s->owner);
    Py_VISIT(s->capture_refs);
    return 0;
}

static int stream_clear(PyObject *self)
{
    l2p_StreamObject *s = (l2p_StreamObject *)self;
    /* cyclic garbage: a wrapped stream's owner goes here, so l2_state must not read it any
     * more (its dealloc, which closes it, comes later) */
    stream_unlink(s);
    Py_CLEAR(s->owner);
    Py_CLEAR(s->capture_refs);
    return 0;
}

static void stream_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    (void)stream_release((l2p_StreamObject *)self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef stream_getset[] = {
    {"handle", stream_get_handle, NULL, "int: The cudaStream_t as an int.", NULL},
    {"device", stream_get_device, NULL, "Device: The stream's Device.", NULL},
    {"closed", stream_get_closed, NULL, "bool: Whether close() was called.", NULL},
    {"owned", stream_get_owned, NULL, "bool: False for a wrapped foreign stream.", NULL},
    {"access_policy_window", stream_get_window, stream_set_window,
     "AccessPolicyWindow | None: The stream's access policy window, read back from the driver (None when disabled). "
     "Setting None disables it (num_bytes = 0, the guide's way).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

L2P_NOARGS_METHOD(stream_synchronize_fn, stream_synchronize, "synchronize", "Wait for the stream's work.", "None");
L2P_NOARGS_METHOD(stream_close_fn, stream_close, "close", "Destroy an owned stream (a wrapped one is only released); idempotent.", "None");
L2P_NOARGS_METHOD(stream_enter_fn, stream_enter, "__enter__", "Returns self.", "Stream");
L2P_EXIT_METHOD(stream_exit_fn, stream_exit, "Closes (restores).");
L2P_NOARGS_METHOD(stream_cuda_stream_fn, stream_cuda_stream, "__cuda_stream__", "(0, handle): the CUDA stream protocol.", "tuple[int, int]");
L2P_NOARGS_METHOD(stream_capture_fn, stream_capture, "capture", "`with stream.capture() as graph:` records the stream's launches into a Graph. Captured kernel nodes carry the stream's access policy window.", "_Scope");
static const l2p_fn *const stream_method_rows[] = {&access_policy_fn, &stream_synchronize_fn, &stream_close_fn, &stream_enter_fn, &stream_exit_fn, &stream_cuda_stream_fn, &stream_capture_fn, NULL};

/* Methods not from rows (none left but the slots). */
static PyMethodDef stream_methods[] = {
    {NULL, NULL, 0, NULL}};

static PyType_Slot stream_slots[] = {
    {Py_tp_doc, NULL}, /* from stream_new_fn */
    {Py_tp_new, stream_new},
    {Py_tp_getset, stream_getset},
    {Py_tp_methods, stream_methods},
    {Py_tp_repr, stream_repr},
    {Py_tp_traverse, stream_traverse},
    {Py_tp_clear, stream_clear},
    {Py_tp_dealloc, stream_dealloc},
    {0, NULL}};

static PyType_Spec stream_spec = {"l2persist.Stream", sizeof(l2p_StreamObject), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                      Py_TPFLAGS_IMMUTABLETYPE,
                                  stream_slots};

static PyObject *open_streams_impl(PyObject *m, const void *args)
{
    (void)args;
    PyObject *list = PyList_New(0);
    for (l2p_StreamObject *s = l2p_state_from_module(m)->open_streams; list && s; s = s->next)
        if (PyList_Append(list, (PyObject *)s) < 0) Py_CLEAR(list);
    return list;
}
L2P_DEFINE_FN(open_streams_fn, l2p_no_args, open_streams_impl, "open_streams",
              "Every open l2persist Stream of this process (made or wrapped, not closed), "
              "newest first.", "list[Stream]", L2P_NO_PARAMS);

const l2p_fn *const l2p_stream_fns[] = {&open_streams_fn, NULL};

int l2p_add_stream_type(PyObject *m, l2p_state *st)
{
    st->Stream = l2p_make_type_rows(m, &stream_spec, &stream_new_fn, stream_method_rows);
    return st->Stream ? 0 : -1;
}
