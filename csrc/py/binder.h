/* Table-driven kernel bindings. A kernel is one row (l2p_kernel): its arguments in order, what
 * each one accepts, and a launcher. One binder (binder.c) turns every row into a Python
 * callable: it parses the vectorcall arguments, converts and validates them (dtype kinds,
 * widths, alignment, ranges, choices), checks that every buffer, the stream and the launch
 * share a device, launches on that device, records the buffers' use on the stream and
 * releases everything. The text signature and the argument list the user sees come from the
 * same row, so they cannot drift from what is parsed.
 *
 * Adding a kernel: write its launcher (a .cu file in kernels/, declared in l2p_kernels.h), then one
 * row in kernels.c: the name, a one-line summary, the arguments, and a `launch` function
 * that passes the converted values to the launcher. Kernel-specific checks that relate two
 * arguments go in an optional `check`; work after the launch (a synchronous check, freeing
 * a per-launch resource) in `after`. Every kernel also takes `stream=` and, unless its row
 * says L2P_K_NO_WINDOW, `window=`; rows without buffers take `device=`. */
#ifndef L2P_BINDER_H
#define L2P_BINDER_H

#include <stddef.h>

#include "l2p_py.h"

#define L2P_MAX_KARGS 16    /* a row with more arguments does not compile (args[] is full) */
#define L2P_SCRATCH_BYTES 32

typedef enum {
    L2P_A_END = 0,
    L2P_A_BUFFER, /* a DeviceBuffer or anything as_buffer accepts */
    L2P_A_INT,    /* an int (no bool) in [lo, hi] */
    L2P_A_FLOAT,  /* a finite real number in [flo, fhi] (both 0: any finite) */
    L2P_A_CHOICE, /* one of `choices` (a string), given to the launcher as its index */
    L2P_A_BOOL,   /* truth value */
    L2P_A_OBJECT, /* anything; `convert` turns it (or NULL when omitted) into an int */
} l2p_arg_type;

enum {
    L2P_A_KWONLY = 1u,   /* keyword-only (and so is every argument after it) */
    L2P_A_OPTIONAL = 2u, /* None (or omitted) allowed: a buffer absent, an int derived */
    L2P_A_THREADS = 4u,  /* threads per block: with L2P_A_BLOCKS, checked as a launch shape */
    L2P_A_BLOCKS = 8u,   /* blocks of the grid; None takes the row's default grid */
    L2P_A_POW2 = 16u,    /* INT: a power of two in [lo, hi] */
};

/* Dtype widths a buffer argument accepts, as a bit mask of item sizes. */
#define L2P_W(bytes) (1u << (bytes))

typedef struct {
    const char *name;
    l2p_arg_type type;
    unsigned flags;
    const char *kinds;          /* BUFFER: dtype kinds allowed ("f", "i", "iuf"); NULL any */
    unsigned widths;            /* BUFFER: L2P_W() mask of item sizes; 0 any */
    unsigned align;             /* BUFFER: address and size multiple in bytes; 0 none */
    long long lo, hi, ival;     /* INT: range and default; CHOICE, BOOL: default */
    double flo, fhi, fval;      /* FLOAT: range (both 0: any finite), default */
    const char *const *choices; /* CHOICE: NULL-terminated */
    int (*convert)(PyObject *obj, long long *out); /* OBJECT; obj NULL when omitted */
    const char *deftext;        /* OBJECT: the default as the signature shows it */
    const char *pytype;         /* OBJECT: the stub's type */
} l2p_arg;

typedef struct {
    int given; /* passed and not None */
    union {
        l2p_BufferObject *buf;
        long long i;
        double f;
    };
} l2p_val;

typedef struct l2p_call l2p_call;

enum {
    L2P_K_NO_WINDOW = 1u, /* the kernel takes no window= */
    L2P_K_DEVICE = 2u,    /* no buffer names the device: the row takes device= */
    L2P_K_SINK = 4u,      /* the launcher needs the device's scratch word (c->sink) */
};

typedef struct l2p_kernel {
    const char *name;
    const char *summary;
    unsigned flags;
    /* Default blocks and threads of the L2P_A_BLOCKS / L2P_A_THREADS arguments. */
    void (*grid)(int multiprocessor_count, unsigned *blocks, unsigned *threads);
    int (*check)(l2p_call *c);              /* 0, or -1 with an exception set */
    cudaError_t (*launch)(l2p_call *c);     /* on the call's device, the GIL held */
    int (*after)(l2p_call *c, int launched); /* always called once check passed */
    l2p_arg args[L2P_MAX_KARGS];            /* ends at the first L2P_A_END */
} l2p_kernel;

struct l2p_call {
    const l2p_kernel *k;
    l2p_state *st;
    int device;
    cudaStream_t stream;
    PyObject *stream_obj; /* our Stream, or NULL for a foreign or the legacy stream */
    const l2p_window *window;
    unsigned *sink;
    l2p_val v[L2P_MAX_KARGS];
    /* What one kernel's check passes to its launch and after (zeroed per call): read and
     * written only through L2P_SCRATCH with the kernel's own struct type. */
    _Alignas(max_align_t) unsigned char scratch[L2P_SCRATCH_BYTES];
};

/* The call's scratch as the kernel's struct `type` (kernels.c asserts that it fits). */
#define L2P_SCRATCH(c, type) ((type *)(void *)(c)->scratch)
#define L2P_SCRATCH_FITS(type)                                                            \
    _Static_assert(sizeof(type) <= L2P_SCRATCH_BYTES, #type " exceeds L2P_SCRATCH_BYTES")

/* The buffer, int, float of argument i. */
#define L2P_BUF(c, k) ((c)->v[(k)].buf)
#define L2P_INT(c, k) ((c)->v[(k)].i)
#define L2P_FLT(c, k) ((c)->v[(k)].f)

/* A real number (float, int, __float__ or __index__; no bool), finite and, unless lo and hi
 * are both 0, in [lo, hi]: the one float converter of kernel rows and function rows
 * (params.c, beside l2p_py_ranged_int). Errors name the argument and the range:
 * "scale: expected a real number in [...], got str", "scale: 1000000000... (401 digits) is
 * not a finite float". */
int l2p_py_real_arg(PyObject *obj, const char *name, double lo, double hi, double *out);

/* Raise the core's last error when rc is not L2P_OK; 0 or -1. */
int l2p_call_core(l2p_call *c, l2p_status rc);

/* The kernels (kernels.c), ending at a row without a name. */
extern const l2p_kernel l2p_kernel_table[];

/* Add one function per row of `kernels` (ending at a row without a name) to the module. */
int l2p_add_kernels(PyObject *m, l2p_state *st, const l2p_kernel *kernels);

#endif
