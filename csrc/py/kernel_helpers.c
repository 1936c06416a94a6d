/* Host helpers beside the kernels: the device words read and cleared from the host (the
 * checked gather's out-of-range flag, gather_errors() over it; the read kernels' sink,
 * sink_take()), l2_read_shape and the study's host map (seed_map). */
#include "l2p_py.h"
#include "params.h"

#include "l2p_kernels.h"
#include "l2p_flavour.h"
#include "l2p_launch.h"
#include "l2p_seedmap.h"


/* take(out) on the device, without the GIL: a device word read and cleared. 0, or -1 with
 * the error raised naming `what`. */
static int take_on_device(l2p_state *st, int device, cudaError_t (*take)(void *), void *out,
                          const char *what)
{
    int prev;
    cudaError_t rc;
    if (l2p_device_enter(device, &prev) != L2P_OK) return l2p_py_raise_int(st);
    Py_BEGIN_ALLOW_THREADS
    rc = take(out);
    Py_END_ALLOW_THREADS
    l2p_device_leave(prev);
    if (rc == cudaSuccess) return 0;
    l2p_fail_cuda(rc, what);
    return l2p_py_raise_int(st);
}

static cudaError_t gather_flag_take(void *out) { return l2p_gather_flag_take((int *)out); }
static cudaError_t sink_word_take(void *out) { return l2p_sink_take((unsigned *)out); }

/* Raise for a set flag; 1 when raised, 0 when clear, -1 on a CUDA error. */
int l2p_py_gather_flag_raise(l2p_state *st, int device)
{
    int was_set = 0;
    if (take_on_device(st, device, gather_flag_take, &was_set,
                       "cudaMemcpyFromSymbol(l2p_gather_oob)") < 0)
        return -1;
    if (!was_set) return 0;
    PyErr_Format(PyExc_ValueError, "map: a checked gather on device %d read map entries outside "
                 "its src (their outputs are 0)", device);
    return 1;
}

/* The arguments of the device-word readers (gather_errors, sink_take). */
typedef struct {
    int device;
} device_word_args;

/* Wait for the device's work, without the GIL: what a device word holds is then final.
 * 0, or -1 with the error raised. */
static int wait_for_device(l2p_state *st, int device)
{
    l2p_status sync;
    Py_BEGIN_ALLOW_THREADS
    sync = l2p_device_synchronize(device);
    Py_END_ALLOW_THREADS
    return sync == L2P_OK ? 0 : l2p_py_raise_int(st);
}

static PyObject *gather_errors_impl(PyObject *m, const void *args)
{
    const device_word_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    if (wait_for_device(st, a->device) < 0) return NULL;
    int r = l2p_py_gather_flag_raise(st, a->device);
    if (r < 0) return NULL;
    if (r == 1) PyErr_Clear();
    return PyBool_FromLong(r);
}
L2P_DEFINE_FN(gather_errors_fn, device_word_args, gather_errors_impl, "gather_errors",
              "Whether a checked gather on the device read map entries outside its src since "
              "the last check (waits for the device's work; clears the flag).", "bool",
              L2P_PARAM(device_word_args, device, L2P_P_DEVICE, .doc = "the device (index or "
                        "Device); None: the current one"));

typedef struct {
    long long n;
    l2p_opt range;
    PyObject *dtype;
    long long seed;
} seed_map_args;

static PyObject *seed_map_impl(PyObject *m, const void *args)
{
    const seed_map_args *a = args;
    PyArray_Descr *d = NULL;
    long long range = a->range.given ? a->range.i : a->n;
    if (!PyArray_DescrConverter2(a->dtype, &d)) return NULL;
    int is64 = d && d->type_num == NPY_INT64, ok = !d || is64 || d->type_num == NPY_INT32;
    if (!ok) PyErr_Format(PyExc_TypeError, "dtype: map dtype must be int32 or int64, got %R", (PyObject *)d);
    Py_XDECREF(d);
    if (!ok) return NULL;
    if (l2p_seed_map_check(a->n, range) != L2P_OK) return l2p_py_raise(l2p_state_from_module(m));
    npy_intp dims[1] = {(npy_intp)a->n};
    PyArrayObject *arr = (PyArrayObject *)PyArray_SimpleNew(1, dims, is64 ? NPY_INT64 : NPY_INT32);
    if (!arr) return NULL;
    Py_BEGIN_ALLOW_THREADS
    if (is64) l2p_seed_map_int64((int64_t *)PyArray_DATA(arr), (size_t)a->n, (uint64_t)range,
                                 (unsigned)a->seed);
    else l2p_seed_map_int32((int32_t *)PyArray_DATA(arr), (size_t)a->n, (uint32_t)range,
                            (unsigned)a->seed);
    Py_END_ALLOW_THREADS
    return (PyObject *)arr;
}
L2P_DEFINE_FN(seed_map_fn, seed_map_args, seed_map_impl, "seed_map",
              "The study's host map: srand(seed); rand() % range, with glibc's generator "
              "reproduced exactly; int32 (default) or int64.", "numpy.ndarray",
              /* n's and range's ranges are the core's (l2p_seed_map_check). */
              L2P_PARAM(seed_map_args, n, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = LLONG_MIN,
                        .hi = LLONG_MAX, .what = "entries", .doc = "the map's length, >= 0"),
              L2P_PARAM(seed_map_args, range, L2P_P_INT, .flags = L2P_P_NONE, .lo = LLONG_MIN,
                        .hi = LLONG_MAX, .what = "exclusive upper bound",
                        .doc = "entries lie in [0, range), range in [1, 2^31 - 1]; None: n"),
              L2P_PARAM(seed_map_args, dtype, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "DTypeLike", .doc = "int32 (None) or int64"),
              L2P_PARAM(seed_map_args, seed, L2P_P_INT, .flags = L2P_P_KWONLY, .lo = 0,
                        .hi = 4294967295LL, .what = "srand's seed", .doc = "srand()'s seed"));

typedef struct {
    long long nbytes;
    l2p_opt repeats;
    int load;
    long long width;
    l2p_opt loads;
    long long threads;
    int device;
} l2_read_shape_args;

/* What l2_read launches for a buffer of nbytes with these arguments: the same check and the
 * same choice of defaults as the launch (streaming.cu), on the device that would run it. */
static PyObject *l2_read_shape_impl(PyObject *m, const void *args)
{
    const l2_read_shape_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    l2p_buf_desc src = {.present = 1, .ptr = 0, .nbytes = (size_t)a->nbytes, .itemsize = 1};
    long long repeats = a->repeats.given ? a->repeats.i : 0, loads = a->loads.given ? a->loads.i : 0;
    l2p_l2_read_shape shape;
    int prev;
    cudaError_t rc;
    if (l2p_launch_check_l2_read(&src, repeats, a->width, loads, a->threads) != L2P_OK)
        return l2p_py_raise(st);
    if (l2p_device_enter(a->device, &prev) != L2P_OK) return l2p_py_raise(st);
    rc = l2p_l2_read_shape_of(src.nbytes, (int)repeats, a->load, (int)a->width, (int)loads,
                              (unsigned)a->threads, &shape);
    l2p_device_leave(prev);
    if (rc != cudaSuccess) {
        l2p_fail_cuda(rc, "l2_read_shape");
        return l2p_py_raise(st);
    }
    return Py_BuildValue("{s:i,s:i,s:n,s:n,s:i,s:n,s:O}", "repeats", shape.repeats, "loads",
                         shape.loads, "blocks", (Py_ssize_t)shape.blocks, "bytes",
                         (Py_ssize_t)shape.bytes, "registers", shape.registers, "shared_bytes",
                         (Py_ssize_t)shape.shared_bytes, "whole_rows",
                         shape.whole_rows ? Py_True : Py_False);
}
L2P_DEFINE_FN(l2_read_shape_fn, l2_read_shape_args, l2_read_shape_impl, "l2_read_shape",
              "What l2_read(src, repeats, ...) launches for a src of nbytes on the device: "
              "the passes, the loads per thread (None: chosen from the waves each choice makes), the blocks, "
              "the bytes read per launch (for a rate: bytes / time), the kernel's registers per "
              "thread and static shared memory per block, and whole_rows: whether src is a whole "
              "number of threads x loads words (under 2^31 of them), which launches the kernel "
              "with no per-load bounds test.",
              "dict[str, int]",
              L2P_PARAM(l2_read_shape_args, nbytes, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 1,
                        .hi = LLONG_MAX, .what = "bytes", .doc = "src's size in bytes"),
              L2P_PARAM(l2_read_shape_args, repeats, L2P_P_INT, .flags = L2P_P_NONE, .lo = 1,
                        .hi = L2P_REPEATS_MAX, .what = "passes",
                        .doc = "as l2_read's; None: enough to read 4 GiB per launch"),
              L2P_PARAM(l2_read_shape_args, load, L2P_P_CHOICE, .flags = L2P_P_KWONLY,
                        .choices = l2p_load_flavour_names, .doc = "as l2_read's"),
              L2P_PARAM(l2_read_shape_args, width, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .lo = LLONG_MIN, .hi = LLONG_MAX, .ival = 8, .what = "bytes",
                        .doc = "as l2_read's (8 or 16)"),
              L2P_PARAM(l2_read_shape_args, loads, L2P_P_INT, .flags = L2P_P_NONE, .lo = LLONG_MIN,
                        .hi = LLONG_MAX, .what = "loads per thread",
                        .doc = "as l2_read's; None: chosen from the launch"),
              L2P_PARAM(l2_read_shape_args, threads, L2P_P_INT, .lo = LLONG_MIN, .hi = LLONG_MAX,
                        .ival = 1024, .what = "threads per block", .doc = "as l2_read's"),
              L2P_PARAM(l2_read_shape_args, device, L2P_P_DEVICE, .doc = "the device (index or "
                        "Device); None: the current one"));

static PyObject *sink_take_impl(PyObject *m, const void *args)
{
    const device_word_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    unsigned value = 0;
    if (wait_for_device(st, a->device) < 0) return NULL;
    if (take_on_device(st, a->device, sink_word_take, &value,
                       "cudaMemcpyFromSymbol(l2p_sink_word)") < 0)
        return NULL;
    return PyLong_FromUnsignedLong(value);
}
L2P_DEFINE_FN(sink_take_fn, device_word_args, sink_take_impl, "sink_take",
              "The device's sink word, then cleared (waits for the device's work): a read "
              "kernel (l2_read, stream_read...) stores there only when the words one thread "
              "read fold (XOR of their 32-bit parts) to SINK_MAGIC, which keeps its loads "
              "alive at no traffic. Plant SINK_MAGIC in one word of zeros, read, and a "
              "nonzero word says that the read covered it. Not during a capture on the device "
              "(it waits for the device, which a capture forbids).", "int",
              L2P_PARAM(device_word_args, device, L2P_P_DEVICE, .doc = "the device (index or "
                        "Device); None: the current one"));

const l2p_fn *const l2p_kernel_fns[] = {&gather_errors_fn, &seed_map_fn, &l2_read_shape_fn,
                                        &sink_take_fn, NULL};
