/* Discovery without capture: the launch log.
 *
 * Eager work that syncs with the host (torch.bincount, .item()) cannot be captured into a CUDA
 * graph, so graphscan has no kernel nodes to read. The launch log reads the same things from the
 * launches themselves while the work runs for real: CUPTI's callback API calls us at the entry
 * of each kernel launch, where the function, the stream, the launch shape and the argument
 * bytes are still the caller's, and we copy them into host memory the log owns. Afterwards
 * l2p_launch_log_scan runs graphscan's argument scan (l2p_scan_kernel_args) over the copies and
 * fills the same l2p_graph_scan, so l2p_buffers_build and everything after it is shared.
 *
 * Which launches. The driver's cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and
 * their _ptsz forms (CuPy, Triton, cuda.core, l2persist.launch); and the runtime's
 * cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel and CUDA 13's
 * __cudaLaunchKernel, which `<<<>>>` compiles to (PyTorch's kernels). Both domains are needed:
 * CUPTI does not report the driver calls the runtime makes inside its own API (Nsight Systems,
 * built on CUPTI, shows a cudaLaunchKernel without its cuLaunchKernel). Should a driver report
 * them after all, a driver launch inside a runtime launch already logged is not logged again.
 * A runtime launch names a host stub: the runtime that registered it (the one the stub's own
 * library resolves cudaGetFuncBySymbol to, else l2persist's) gives its CUfunction. CUDA 13's
 * cudaKernel_t is a CUkernel, whose CUfunction cuKernelGetFunction gives.
 *
 * CUPTI takes one subscriber per process: where Nsight, a profiler or another tool subscribed,
 * l2p_launch_log_begin fails with L2P_ERR_NOT_SUPPORTED (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_...).
 * libcupti is loaded at run time (l2p_cupti.h).
 */
#ifndef L2P_LAUNCHLOG_H
#define L2P_LAUNCHLOG_H

#include <pthread.h>
#include <stddef.h>

#include "l2p_error.h"
#include "l2p_graphscan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default caps: a training step launches hundreds of kernels; a log this long holds several. */
#define L2P_LAUNCH_LOG_MAX_LAUNCHES 4096
#define L2P_LAUNCH_LOG_MAX_BYTES ((size_t)16 << 20) /* argument bytes of all launches */

/* One logged launch. */
typedef struct {
    void *func;              /* its CUfunction */
    void *stream;            /* the CUstream / cudaStream_t it was queued on, as given */
    unsigned grid[3], block[3];
    unsigned shared_mem;     /* dynamic shared memory, bytes */
    size_t args_at;          /* its argument bytes: log->args[args_at, args_at + args_size), */
    size_t args_size;        /* every parameter at its offset (the `extra` form's layout) */
} l2p_launch;

/* A launch as the callback sees it, before its bytes are copied. */
typedef struct {
    void *func, *stream;
    unsigned grid[3], block[3], shared_mem;
    void *const *kernel_params; /* one pointer per parameter, or NULL: */
    void *const *extra;         /* the `extra` form (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE) */
} l2p_launch_args;

/* One parameter's place in the argument buffer (cuFuncGetParamInfo). */
typedef struct {
    size_t offset, size;
} l2p_param_span;

typedef struct {
    int device;              /* only launches in this device's contexts are logged */
    l2p_launch *launches;
    size_t n_launches, max_launches;
    unsigned char *args;     /* the argument bytes of all launches */
    size_t n_args, args_cap, max_args; /* bytes used, allocated, allowed */
    size_t dropped;          /* launches not logged: past a cap, or their function unknown */
    void *subscriber;        /* the CUpti_SubscriberHandle while logging, else NULL */
    unsigned long session;   /* which logging run this is (per-thread state of an earlier
                              * run is told apart by it) */
    pthread_mutex_t lock;    /* launches may come from several threads */
} l2p_launch_log;

/* Start logging `device`'s kernel launches (default caps). On failure nothing is left to end
 * or free. */
l2p_status l2p_launch_log_begin(int device, l2p_launch_log *log);
/* Stop logging (unsubscribe); idempotent. The log keeps what it holds until freed. */
void l2p_launch_log_end(l2p_launch_log *log);
/* The logged launches as a scan (one kernel per launch, node NULL); the pointer queries run on
 * the log's device. Free with l2p_graph_scan_free. */
l2p_status l2p_launch_log_scan(const l2p_launch_log *log, l2p_graph_scan *out);
/* End if still logging, and free what the log holds. */
void l2p_launch_log_free(l2p_launch_log *log);

/* ---- pure parts (C-tested without a GPU) ---- */

/* An empty log with these caps (no CUPTI). */
l2p_status l2p_launch_log_init(l2p_launch_log *log, int device, size_t max_launches,
                               size_t max_args);
/* Copy one launch into the log: from kernel_params, parameter i's span.size bytes at
 * span.offset; from `extra`, its whole buffer (n_params unused). Past either cap, or with
 * neither form, the launch is counted in log->dropped instead. Thread-safe. */
void l2p_launch_log_add(l2p_launch_log *log, const l2p_launch_args *a,
                        const l2p_param_span *spans, size_t n_params);

#ifdef __cplusplus
}
#endif
#endif
