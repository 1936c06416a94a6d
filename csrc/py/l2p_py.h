/* Shared declarations of the extension: object layouts, argument converters (the module
 * state is state.h's). One file per Python type; module.c registers them. The extension converts arguments and
 * errors only: every decision is made by the C core (csrc/core). */
#ifndef L2P_PY_H
#define L2P_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define PY_ARRAY_UNIQUE_SYMBOL l2p_ARRAY_API
#ifndef L2P_MODULE_C
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <cuda_runtime_api.h>

#include "l2p_device.h"
#include "l2p_error.h"
#include "l2p_graphscan.h"
#include "l2p_life.h"
#include "l2p_policy.h"
#include "l2p_stream.h"
#include "l2p_timing.h"
#include "l2p_tune.h"

#include "state.h"

typedef struct {
    PyObject_HEAD
    int index;
} l2p_DeviceObject;

typedef struct {
    PyObject_HEAD
    l2p_device_props p;
} l2p_PropertiesObject;

typedef struct {
    PyObject_HEAD
    char *ptr;
    size_t nbytes;
    int ndim;
    Py_ssize_t shape[NPY_MAXDIMS];
    PyArray_Descr *dtype;
    int device;
    int closed;         /* close() was called on this object (a view has its own); set first,
                         * before the release lets other threads run */
    /* The memory's lifetime (l2p_life.h): its device, the context it was allocated in, its
     * pins. Opened by the buffer that owns the memory, at allocation; views and foreign
     * wrappers hold a borrowed handle that owns nothing and knows no context (0). A view's
     * context is its owner's (l2p_buffer_life); a foreign wrapper is its own owner, never
     * stale. Pins are DLPack exports, copies in flight without the GIL and a
     * CUDA-array-interface export; a closed buffer frees its memory when the last pin goes. */
    l2p_handle mem;
    int cai_pinned;     /* the CUDA array interface was read (on the owner): its consumers hold
                         * a reference to us but cannot be counted, so its pin is held until
                         * the last reference goes (tp_dealloc) */
    PyObject *base;     /* parent buffer of a view, or the foreign object kept alive */
    void *dl_managed;   /* a consumed DLPack tensor, deleted at close */
    PyObject *stream;   /* the last stream l2persist launched work on for it, or NULL */
    unsigned long long texture; /* cached texture object of the texture gather, or 0; released
                                 * at close as a handle over the memory's lifetime */
    PyObject *weakreflist;
} l2p_BufferObject;

typedef struct l2p_StreamObject {
    PyObject_HEAD
    /* The one home of the cudaStream_t (obj), its device, the context it was made in and its
     * closed state (l2p_life.h). Owned streams open it when made; a wrapped one is borrowed
     * (never destroyed, only let go) and its context unknown (0: never reported stale; the
     * library that made it answers for it). Read through the l2p_py_stream_* functions. */
    l2p_handle lifetime;
    PyObject *owner;        /* the foreign stream object kept alive, or NULL */
    PyObject *capture_refs; /* while capturing: objects the captured work uses */
    /* Linked into the state's open_streams while open (stream.c): l2_state and the pytest
     * guard read every open Stream's window from there, twice per test, instead of walking
     * every object the GC tracks (millions once PyTorch is imported). */
    struct l2p_StreamObject *next, **pprev;
} l2p_StreamObject;

typedef struct {
    PyObject_HEAD
    l2p_window w;
    PyObject *target; /* the buffer the window covers; None when read back from the driver */
} l2p_WindowObject;

typedef struct {
    PyObject_HEAD
    l2p_graph g;
    int closed;
    PyObject *refs; /* buffers and streams the captured work uses */
    PyObject *owner; /* the foreign graph object borrowed from (as_graph), or NULL */
    int owner_gone;  /* the owner was seen holding another graph (or none): ours is freed */
    PyObject *owner_token; /* what the owner_handle hook said at the borrow, or NULL */
    l2p_graph_kernels kernels; /* its kernel nodes, described at the first listing (graph.c) */
    int described;             /* `kernels` was taken */
} l2p_GraphObject;

typedef struct {
    PyObject_HEAD
    PyObject *graph;
    cudaGraphNode_t node;
    Py_ssize_t position;
} l2p_KernelNodeObject;

/* Raise the exception matching the calling thread's last core error; returns NULL. */
PyObject *l2p_py_raise(l2p_state *st);
/* The package's callable registered under `name` by _core._set_hooks (foreign.c): the
 * binding imports nothing from the package; l2persist hands these over when it is imported.
 * A new reference, or NULL with RuntimeError naming the hook. */
PyObject *l2p_py_hook(PyTypeObject *type, const char *name);
/* A Graph still usable: 0; -1 with ValueError where it is closed, not yet captured, or its
 * owner no longer holds the graph it borrowed (graph.c). */
int l2p_py_graph_check(PyObject *graph);
/* Whether a borrowed Graph's owner still holds the graph borrowed: 1 (or it cannot tell), 0
 * (its handles are freed: never touch them), -1 with an error. */
int l2p_py_graph_owner_holds(PyObject *graph);
/* Same, returning -1, for setters and converters. */
int l2p_py_raise_int(l2p_state *st);

/* Argument conversion. Each returns 0 on success, -1 with an exception set. */
int l2p_py_device_index(l2p_state *st, PyObject *obj, int *index);       /* None, int, Device */
int l2p_py_size_arg(PyObject *obj, const char *name, long long *out);     /* int >= 0, no bool */
/* True, False, numpy.bool_, 0 or 1 -> 0 / 1; anything else a TypeError naming `name`. */
int l2p_py_bool_arg(PyObject *obj, const char *name, int *out);
/* Any int (no bool), for arguments whose range the core checks with a better message. */
int l2p_py_int_arg(PyObject *obj, const char *name, long long *out);
int l2p_py_stream_arg(l2p_state *st, PyObject *obj, cudaStream_t *handle, PyObject **stream);
int l2p_py_window_arg(l2p_state *st, PyObject *obj, const l2p_window **w);

/* Buffers (buffer.c). */
/* A DeviceBuffer, or a wrapper of anything exposing __cuda_array_interface__ or __dlpack__
 * (new ref), or NULL with an error that names the argument `name` (NULL: the message starts
 * unnamed, for a caller that puts the name in front itself; a closed buffer is "buffer"). */
PyObject *l2p_buffer_as_buffer(l2p_state *st, PyObject *obj, const char *name);
/* "name: " in front of a message, or nothing for a NULL name: "%s%s" takes both. */
#define L2P_ARG_NAME(name) ((name) ? (name) : ""), ((name) ? ": " : "")
l2p_BufferObject *l2p_buffer_alloc(l2p_state *st, int ndim, const Py_ssize_t *shape,
                                   PyArray_Descr *dtype, int device); /* no memory yet */
l2p_BufferObject *l2p_buffer_owner(l2p_BufferObject *b); /* the buffer owning the memory */
PyObject *l2p_buffer_shape_tuple(l2p_BufferObject *b);
/* Hold the memory (not the object) across a user that close() must not pull it from: a DLPack
 * export or a copy running without the GIL. The last unpin of a closed buffer frees it. */
void l2p_buffer_pin(l2p_BufferObject *b);
void l2p_buffer_unpin(l2p_BufferObject *b);
/* The CUDA-array-interface export: a pin held until the owner's last reference goes. */
void l2p_buffer_pin_cai(l2p_BufferObject *b);
/* Release the memory (idempotent; waits for streams that still use it); a pinned buffer's
 * memory goes with its last pin. (buffer_life.c) */
l2p_status l2p_buffer_release(l2p_BufferObject *b);
/* Host data: a C-contiguous ndarray of obj (new ref), and its copy into b. (buffer_new.c) */
PyArrayObject *l2p_buffer_host_array(PyObject *obj);
int l2p_buffer_copy_in(l2p_state *st, l2p_BufferObject *b, PyArrayObject *a);
int l2p_buffer_parse_shape(PyObject *obj, int *ndim, Py_ssize_t *shape); /* as NumPy takes it */
int l2p_buffer_parse_dtype(PyObject *obj, PyArray_Descr **out);        /* new ref */
/* Interop (dlpack.c): imports, and the DeviceBuffer's protocol methods. */
PyObject *l2p_buffer_from_cai(l2p_state *st, PyObject *obj, PyObject *cai, const char *name);
PyObject *l2p_buffer_from_dlpack(l2p_state *st, PyObject *obj, const char *name);
PyObject *l2p_buffer_cai(PyObject *self, void *closure);
PyObject *l2p_buffer_dlpack_device(PyObject *self, PyObject *noargs);
/* The lifetime of the memory b shows: its owner's (l2p_buffer_owner); one home for views. */
const l2p_life *l2p_buffer_life(l2p_BufferObject *b);
/* The one check of a buffer before a use: 0, or -1 with ValueError naming `name` when it or a
 * buffer it hangs from is closed, or (`now` as l2p_handle_usable: 0 asks the device,
 * L2P_LIFE_UNASKED checks the closed state alone) its memory was allocated before a reset of
 * its device (the addresses may belong to someone else by now). */
int l2p_buffer_usable(l2p_BufferObject *b, unsigned long long now, const char *name);
/* Its closed state alone, as the argument "buffer". */
int l2p_buffer_check_open(l2p_BufferObject *b);
/* Open, and its memory still exists (the device is asked), as the argument "buffer". */
int l2p_buffer_check_alive(l2p_BufferObject *b);
/* Remember the stream used with the buffer; keeps it (and the buffer) alive in a capture. */
int l2p_buffer_note_use(l2p_BufferObject *b, PyObject *stream);

/* Streams (stream.c): what the lifetime handle holds; the cudaStream_t is NULL once closed. */
static inline cudaStream_t l2p_py_stream_handle(const l2p_StreamObject *s)
{
    return (cudaStream_t)s->lifetime.obj;
}
static inline int l2p_py_stream_device(const l2p_StreamObject *s)
{
    return s->lifetime.life.device;
}
static inline int l2p_py_stream_closed(const l2p_StreamObject *s)
{
    return l2p_handle_is_closed(&s->lifetime);
}
/* The one check of a Stream before a use: 0, or -1 with ValueError when it is closed or (`now`
 * as l2p_handle_usable: 0 asks the device, L2P_LIFE_UNASKED checks the closed state alone) was
 * made before a reset of its device. */
int l2p_py_stream_usable(l2p_StreamObject *s, unsigned long long now);

/* A checked gather's out-of-range flag on `device`: 0 clear, 1 set (ValueError raised, flag
 * cleared), -1 on a CUDA error (raised). */
int l2p_py_gather_flag_raise(l2p_state *st, int device);

/* The tuner's and the advisor's shared conversions (tune.c). A configuration as a dict:
 * {"set_aside": bytes, "windows": [None | {"hit_ratio", "hit_prop", "miss_prop"}]}. */
PyObject *l2p_py_config(l2p_state *st, size_t set_aside, size_t n, const l2p_tune_window *win);
/* What a search needs of a device: from the device, or from `facts` (granule, max, default)
 * when it is not None (a device described, e.g. in tests). */
typedef struct {
    size_t granule, persisting_max, default_limit;
    int set_aside_fixed; /* an MPS client: the set-aside is the server's */
} l2p_device_facts;
int l2p_py_device_facts(l2p_state *st, PyObject *dev, PyObject *facts, l2p_device_facts *out);
/* A timing callback's result (a new reference, or NULL with an exception; consumed): its
 * `repeat` samples into `samples`; `who` names the callback in errors. 0, or -1. */
int l2p_py_samples(PyObject *res, const char *who, size_t repeat, double *samples);

/* Objects made from C by other files. */
PyObject *l2p_device_new(l2p_state *st, int index);
PyObject *l2p_window_new(l2p_state *st, const l2p_window *w, PyObject *target);
PyObject *l2p_graph_new(l2p_state *st, cudaGraph_t graph, int device, PyObject *refs);
/* A Graph over another library's cudaGraph_t, never destroyed by us; `owner` kept alive. */
PyObject *l2p_graph_borrow(l2p_state *st, cudaGraph_t graph, int device, PyObject *owner);
PyObject *l2p_scope_persisting(l2p_state *st, int device, long long size);
PyObject *l2p_scope_policy(l2p_state *st, PyObject *stream, PyObject *window, int reset);
PyObject *l2p_scope_capture(l2p_state *st, PyObject *stream);
/* Python's cyclic GC off while one of our captures runs (restore.c says why); counted. */
void l2p_py_gc_hold(void);
void l2p_py_gc_release(void);
/* A Graph's node windows were changed from outside graph.c (a Plan): its executable is stale
 * and its owner (PyTorch) must instantiate again. 0, or -1 with an exception. */
int l2p_graph_windows_changed(PyObject *graph);

/* Discovery's results (scan.c). */
PyObject *l2p_py_shape3(const unsigned v[3]); /* (x, y, z) */
/* The (kernels, records, uses) tuples of a finished scan, its uses grouped against `offers` (a
 * sequence of (ptr, nbytes) int pairs); frees the scan, also on failure. */
PyObject *l2p_py_scan_tuples(l2p_state *st, l2p_graph_scan *sc, PyObject *offers);

/* Type registration (one per file). */
int l2p_add_device_types(PyObject *m, l2p_state *st);
int l2p_add_buffer_type(PyObject *m, l2p_state *st);
int l2p_add_stream_type(PyObject *m, l2p_state *st);
/* At the module's teardown: every Stream leaves the open-streams list, whose head is freed
 * with the module state (a garbage collection may free the module before Streams that die in
 * the same collection; their unlink then finds nothing to write). */
void l2p_stream_list_detach(l2p_state *st);
int l2p_add_window_type(PyObject *m, l2p_state *st);
int l2p_add_graph_types(PyObject *m, l2p_state *st);
int l2p_add_scope_type(PyObject *m, l2p_state *st);
int l2p_add_plan_type(PyObject *m, l2p_state *st);
int l2p_add_fastcount_types(PyObject *m, l2p_state *st);


#endif
