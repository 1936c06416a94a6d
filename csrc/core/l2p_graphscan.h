/* Discovery: which buffers the kernels of a CUDA graph use, found from the driver alone.
 *
 * For each kernel node (child graphs included): cuGraphKernelNodeGetParams gives the function
 * and the argument bytes (kernelParams, or the `extra` buffer form); cuFuncGetParamInfo gives
 * each parameter's offset and size; every 8-byte-aligned word of every parameter is a possible
 * pointer (pointers sit inside by-value structs too), and cuPointerGetAttribute(RANGE_START_ADDR
 * / RANGE_SIZE) names the allocation it falls in. Measured on the H100: this named exactly the
 * buffers of PyTorch's index_add_ and index_select in a torch.cuda.CUDAGraph.
 *
 * Eager work that cannot be captured is read from its launches instead (l2p_launchlog.h), which
 * fills the same l2p_graph_scan through the same argument scan (l2p_scan_span_args).
 *
 * An allocation may hold several tensors (a caching allocator's segment), so the allocation is
 * only a fallback name: offered tensors [ptr, ptr + nbytes) are matched against the words
 * themselves (l2p_buffers_build).
 */
#ifndef L2P_GRAPHSCAN_H
#define L2P_GRAPHSCAN_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define L2P_KERNEL_NAME_MAX 256

typedef struct {
    cudaGraphNode_t node;    /* the kernel node, in the graph or one of its child graphs; NULL
                              * for a logged launch */
    void *func;              /* its CUfunction */
    char name[L2P_KERNEL_NAME_MAX]; /* the (mangled) kernel name; "" when the driver cannot say */
    unsigned grid[3], block[3];
    unsigned shared_mem;     /* dynamic shared memory, bytes */
    size_t num_params;       /* 0 when cuFuncGetParamInfo is missing (driver < 12.4) */
} l2p_kernel_info;

/* One parameter's place in the argument buffer (cuFuncGetParamInfo). */
typedef struct {
    size_t offset, size;
} l2p_param_span;

typedef struct {
    size_t kernel;           /* index into the scan's kernels */
    unsigned param;          /* the parameter */
    unsigned offset;         /* byte offset of the word inside that parameter */
    uint64_t word;           /* the address found */
    uint64_t range_start;    /* the allocation it falls in */
    uint64_t range_size;
} l2p_buffer_use;

typedef struct {
    l2p_kernel_info *kernels;
    size_t n_kernels;
    l2p_buffer_use *uses;
    size_t n_uses;
    size_t uses_cap;         /* uses allocated */
} l2p_graph_scan;

/* A graph's kernel nodes described once, by the call that lists them: name, launch shape,
 * parameter spans and argument bytes. Later uses (a KernelNode's name, a tune run's labels at
 * its end, a second scan) read this copy and never ask the node or its function again: the
 * module may have been unloaded since (XLA's executables, a CuPy RawModule, numba's finalized
 * kernels), and then cuGraphKernelNodeGetParams itself crashes (H200, 6dc4703; the driver does
 * not say that a node keeps its module loaded). The launch log's rule (590e8ab) for graphs.
 * Reading or setting a node's window (an attribute) still asks the node. */
typedef struct {
    cudaGraphNode_t *nodes;  /* the kernel nodes, in the graph's order (child graphs included) */
    l2p_kernel_info *kernels; /* per node */
    l2p_param_span *spans;   /* every node's parameters, node after node */
    size_t *first_span;      /* per node: where its kernels[k].num_params spans begin */
    unsigned char *args;     /* every node's argument bytes, each parameter at its offset */
    size_t *args_at, *args_size; /* per node: where its bytes begin, and how many */
    size_t n;
} l2p_graph_kernels;

/* Whether discovery can read parameters here (L2P_OK), or why not: it needs
 * cuFuncGetParamInfo (driver 12.4). */
l2p_status l2p_discovery_supported(void);
/* List and describe every kernel node of `graph` on `device` (its context entered: a library
 * kernel's function is per context); free with l2p_graph_kernels_free. */
l2p_status l2p_graph_kernels_take(int device, cudaGraph_t graph, l2p_graph_kernels *out);
void l2p_graph_kernels_free(l2p_graph_kernels *k);
/* Scan the described nodes' argument bytes (the copy: no call on a node or its function) on
 * `device` (the pointer queries need its context); free with l2p_graph_scan_free. */
l2p_status l2p_graph_kernels_scan(int device, const l2p_graph_kernels *k, l2p_graph_scan *out);
void l2p_graph_scan_free(l2p_graph_scan *s);
/* Its (mangled) name into out (L2P_KERNEL_NAME_MAX bytes, cut there), "" when the driver cannot
 * say; no error recorded (the launch log calls it inside CUPTI's callbacks, as the two below). */
void l2p_function_name(void *func, char *out);
/* These two record no error (the launch log calls them inside CUPTI's callbacks, on the
 * caller's thread); discovery must be supported (l2p_discovery_supported) first, which
 * resolves their driver entry points, so they call the driver only, never the runtime. */
/* 1 with parameter i's offset in the argument buffer and its size (cuFuncGetParamInfo); 0
 * when the function has no parameter i. */
int l2p_function_param(void *func, size_t i, size_t *offset, size_t *size);
/* The CUfunction of a CUkernel (a library kernel; CUDA 13's cudaKernel_t) in the current
 * context, or NULL. */
void *l2p_kernel_function(void *kernel);
/* Append to s->uses every word of kernel `kernel`'s arguments that the driver knows as device
 * memory, by spans read earlier, while the function was known to be loaded (the launch log's at
 * the launch, a graph's when its nodes were described): no driver call on the function, which
 * its module's unload may have freed since (XLA's autotuning loads and unloads modules). The
 * arguments are kernel_params (one pointer per parameter) or, where that is NULL, `args`: every
 * parameter at its offset (the `extra` form's buffer); a parameter past args_size is skipped.
 * The pointer queries need the device's context current. */
l2p_status l2p_scan_span_args(l2p_graph_scan *s, size_t kernel, const l2p_param_span *spans,
                              size_t n, void *const *kernel_params, const unsigned char *args,
                              size_t args_size);

/* ---- pure parts (C-tested without a GPU) ---- */

/* A word that can be a device address: not small (integers, sizes, flags) and within the
 * 57-bit virtual address space. */
int l2p_word_may_be_pointer(uint64_t w);
/* The 8-byte-aligned words of one parameter's bytes: alignment is that of the whole argument
 * buffer (param_offset + k), as a struct member pointer is placed. Writes up to `cap` (offset,
 * word) pairs that may be pointers; returns how many there are. */
size_t l2p_scan_param_words(const unsigned char *bytes, size_t param_offset, size_t size,
                            unsigned *offsets, uint64_t *words, size_t cap);
/* Whether a parameter of `size` bytes at `offset` lies inside an argument buffer of args_size
 * bytes (the last one ends exactly at its end, and is often the output buffer); no overflow
 * for any offset. */
int l2p_param_in_args(size_t offset, size_t size, size_t args_size);

/* The argument buffer of a launch's `extra` form (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE pairs
 * up to CU_LAUNCH_PARAM_END), or NULL; *size its size. */
const unsigned char *l2p_extra_buffer(void *const *extra, size_t *size);

/* A tensor the caller offers by address. */
typedef struct {
    uint64_t ptr, nbytes;
} l2p_offer;

/* One buffer of the graph: an offered tensor that some word points into, or else the
 * allocation of words no offer contains. */
typedef struct {
    uint64_t address, size;
    long offer;              /* index of the offered tensor; -1: a whole allocation */
} l2p_buffer_record;

/* Group the uses into buffers. A word belongs to the offer that contains it
 * (ptr <= word < ptr + nbytes); among several (a tensor and its view) the one starting at the
 * word, else the smallest. Words no offer contains group by allocation. Records are sorted by
 * address; record_of[i] gives use i's record. Free *out with free(). */
l2p_status l2p_buffers_build(const l2p_buffer_use *uses, size_t n_uses, const l2p_offer *offers,
                             size_t n_offers, l2p_buffer_record **out, size_t *n_out,
                             size_t *record_of);

#ifdef __cplusplus
}
#endif
#endif
