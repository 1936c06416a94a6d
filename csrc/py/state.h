/* The module state: the exceptions, types and per-process caches every type file reaches
 * through its object's type or its module. Its own file, apart from module.c (which makes the
 * module and registers every type), so that a type file depends on the state and never on
 * the file that registers it. */
#ifndef L2P_STATE_H
#define L2P_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cuda_runtime_api.h>

#include "l2p_timing.h"

typedef struct {
    PyObject *CudaError, *CudaMemoryError, *NotSupportedError, *NoDeviceError;
    PyObject *AccessProperty; /* enum.IntEnum made at module init */
    PyTypeObject *Device, *DeviceProperties, *DeviceBuffer, *Stream, *AccessPolicyWindow;
    PyTypeObject *Graph, *KernelNode, *Scope, *Plan;
    PyTypeObject *ReplayCount; /* fastcount.c: CountedReplay checks its count's type */
    /* While a launch converts its buffers: the stream it will run on, passed to DLPack
     * producers so that their work is ordered before ours (import_stream_set 0: none). */
    cudaStream_t import_stream;
    int import_stream_set;
    const struct l2p_kernel *kernels; /* the kernel table (binder.h), static */
    /* Per-device flush buffers of time_calls(flush_l2=True): owned here, freed at teardown. */
    l2p_flush_cache flush;
    /* Every open Stream, made or wrapped (borrowed: a Stream unlinks itself when it closes,
     * dies or is cleared as cyclic garbage; the module's teardown detaches the rest, since a
     * collection can free the module before Streams that die in it). */
    struct l2p_StreamObject *open_streams;
} l2p_state;

/* The module's definition, told once by PyInit (before any type exists): the lookup from a
 * type finds the module by it. */
void l2p_state_bind(PyModuleDef *def);

l2p_state *l2p_state_from_module(PyObject *module);
/* The state of the module that made `type` (or a base of it); NULL with an error if none. */
l2p_state *l2p_state_from_type(PyTypeObject *type);

/* A heap type made from a spec, with the module as its defining module, added to it. */
PyTypeObject *l2p_make_type(PyObject *m, PyType_Spec *spec, PyObject *base);

/* l2persist.AccessProperty(value), the enum member of a property. */
PyObject *l2p_access_property(l2p_state *st, int value);

/* The module's GC hooks over the state's references. */
int l2p_state_traverse(l2p_state *st, visitproc visit, void *arg);
void l2p_state_clear(l2p_state *st);

#endif
