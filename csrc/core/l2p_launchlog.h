/* Discovery without capture: the launch log.
 *
 * Eager work that syncs with the host (torch.bincount, .item()) cannot be captured into a CUDA
 * graph, so graphscan has no kernel nodes to read. The launch log reads the same things from the
 * launches themselves while the work runs for real: CUPTI's callback API calls us inside each
 * kernel launch call, where the function, the stream, the launch shape and the argument bytes
 * are still the caller's, and we copy them into host memory the log owns. Afterwards
 * l2p_launch_log_scan runs graphscan's argument scan (l2p_scan_span_args) over the copies and
 * fills the same l2p_graph_scan, so l2p_buffers_build and everything after it is shared.
 *
 * Which launches: the driver's cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and
 * their _ptsz forms, and nothing else. The runtime's launches (cudaLaunchKernel, `<<<>>>`)
 * reach these driver callbacks from inside the runtime: measured for PyTorch's kernels through
 * its libcudart (H200, PyTorch 2.11 + CUDA 13.0: all 5 launches of a bincount step seen in the
 * driver domain); l2persist's own kernels, through its static runtime, are checked by
 * test_discover_l2persist_work_that_syncs_with_the_host. The runtime domain is not used: its
 * launch structs name host stubs, to be mapped to functions through the runtime that
 * registered them (and CUDA 13's __cudaLaunchKernel has no published struct); versions built
 * on it lost every launch (that H200 run) or crashed a later PyTorch launch (earlier runs).
 *
 * When: at the driver call's entry. Its kernelParams, extra and config point at the caller's
 * memory until the call returns, and the log copies the bytes there. The handle the driver is
 * given is a CUfunction or a CUkernel (a library kernel, which CUDA 13's runtime may pass); its
 * parameter layout comes from cuFuncGetParamInfo, its name from cuFuncGetName, a CUkernel's
 * CUfunction from cuKernelGetFunction, all through driver entry points resolved before the subscription: a
 * callback calls no runtime, opens or closes no library, and allocates nothing but the log's
 * own buffers. Each launch is resolved at its own call, and its function's name and parameter
 * layout are copied into the log there: a handle is valid only while its module is loaded, and
 * programs unload modules while the log is on (XLA's autotuning, compiling a jitted step, loads
 * candidates, launches them and unloads them; the scan of such a launch asked the driver about
 * a freed function and crashed the program: jax_program under advise, H200, 7e4cbd1). So the
 * scan never calls the driver on a logged function, and no resolution is kept across launches
 * (an unloaded function's handle can come back as another function's).
 *
 * Streams: each launch keeps its stream's handle, and the log also takes cuStreamDestroy's
 * callbacks (the runtime's cudaStreamDestroy reaches them from inside, as its launches do), so
 * that a launch whose stream the work destroyed while the log was on says so (stream_gone):
 * a handle is valid only until its stream is destroyed. A stream destroyed after the log ended
 * is not seen; the callers window only streams known to live (process/streams.py) or a stream
 * the caller holds, where they can.
 *
 * Which CUPTI: the one already mapped in the process, if any (l2p_cupti.h). The subscriber is
 * the process's one, shared with capture tracking (l2p_capture.h): the log enables the launch
 * callbacks on it, and at the end disables them before the subscriber is removed (where capture
 * tracking does not still hold it).
 *
 * Diagnostic switches (tools/investigations/launchlog-diag; not an interface): L2P_LAUNCH_LOG_DIAG, read at
 * each begin, a comma-separated list of: print (the log's counts and the CUPTI file on stderr at
 * end), none (subscribe, enable no callback), raw (the callbacks only count launches: no driver
 * call from inside them, nothing logged), keep (unsubscribe without disabling the callbacks
 * first), finalize (detach CUPTI once the subscriber is removed: cuptiFinalize).
 * L2P_CUPTI_IGNORE_MAPPED=1: load CUPTI by path even where the process has one (l2p_cupti.c).
 *
 * CUPTI takes one subscriber per process: where Nsight, a profiler or another tool subscribed,
 * l2p_launch_log_begin fails with L2P_ERR_NOT_SUPPORTED (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_...);
 * one launch log runs at a time (L2P_ERR_STATE).
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
#define L2P_LAUNCH_LOG_MAX_SPANS ((size_t)1 << 18)  /* their parameters (16 bytes each: 4 MiB) */

/* One logged launch. */
typedef struct {
    void *func;              /* its CUfunction: an identity only, never called on after */
    void *stream;            /* the CUstream / cudaStream_t it was queued on, as given */
    unsigned grid[3], block[3];
    unsigned shared_mem;     /* dynamic shared memory, bytes */
    size_t args_at;          /* its argument bytes: log->args[args_at, args_at + args_size), */
    size_t args_size;        /* every parameter at its offset (the `extra` form's layout) */
    size_t spans_at, n_params; /* its parameter layout, read at the launch: log->spans[...] */
    size_t name_at;          /* its name, read at the launch: log->names + name_at */
    int stream_gone;         /* its stream was destroyed after it while the log was on */
} l2p_launch;

/* A launch as the callback sees it, before its bytes are copied. */
typedef struct {
    void *func, *stream;
    unsigned grid[3], block[3], shared_mem;
    void *const *kernel_params; /* one pointer per parameter, or NULL: */
    void *const *extra;         /* the `extra` form (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE) */
} l2p_launch_args;

typedef struct {
    int device;              /* only launches in this device's contexts are logged */
    l2p_launch *launches;
    size_t n_launches, max_launches;
    unsigned char *args;     /* the argument bytes of all launches */
    size_t n_args, args_cap, max_args; /* bytes used, allocated, allowed */
    size_t dropped;          /* launches not logged: past a cap, or their function unknown */
    size_t seen;             /* driver launches the callbacks saw (the diagnostic's count) */
    size_t captured;         /* of those, launches into a capturing stream: not logged */
    l2p_param_span *spans;   /* the launches' parameter layouts */
    size_t n_spans, spans_cap;
    char *names;             /* the launches' names, each ending in '\0' */
    size_t n_names, names_cap; /* bytes used, allocated */
    unsigned diag;           /* L2P_LAUNCH_LOG_DIAG's switches, read at begin */
    int attached;            /* a client of CUPTI's one subscriber while logging (l2p_cupti.h) */
    unsigned long session;   /* which logging run this is in the process (the diagnostic's) */
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

/* A driver launch's arguments from CUPTI's parameter struct for callback id cbid (the
 * launches named above); 0 for any other callback. The stream is as given, except a _ptsz
 * form's NULL, which is CU_STREAM_PER_THREAD: NULL (0) in the log is the legacy stream. */
int l2p_launch_log_read(unsigned cbid, const void *params, l2p_launch_args *a);

/* An empty log with these caps (no CUPTI). */
l2p_status l2p_launch_log_init(l2p_launch_log *log, int device, size_t max_launches,
                               size_t max_args);
/* Copy one launch into the log, a->func its CUfunction, spans its parameter layout and name its
 * name (NULL: ""), all three kept with the launch: the arguments from kernel_params, parameter
 * i's span.size bytes at span.offset, or from `extra`, its whole buffer. Past either cap, with
 * neither form, or where host memory runs out, the launch is counted in log->dropped instead.
 * Thread-safe. */
void l2p_launch_log_add(l2p_launch_log *log, const l2p_launch_args *a,
                        const l2p_param_span *spans, size_t n_params, const char *name);
/* `stream` was destroyed: each of the first `before` launches logged on it is marked
 * stream_gone (`before`: the log's count when the destroy began; a launch after that on the
 * same handle, by another thread while the destroy ran or later, is a new stream's). Its
 * handle must not be used again: a stream the work made and destroyed before it returned
 * (CuPy's Stream freed as fn returns) gets no window and times nothing. Thread-safe. */
void l2p_launch_log_stream_destroyed(l2p_launch_log *log, const void *stream, size_t before);
/* A CUPTI driver callback (`cb`: its CUpti_CallbackData) read for a stream destroy: at
 * cuStreamDestroy's entry the log's count goes into the call's correlation word, at its exit
 * with success the launches before that count are marked (l2p_launch_log_stream_destroyed).
 * 1 for either destroy form's callback, 0 for any other (nothing done). */
int l2p_launch_log_destroy_event(l2p_launch_log *log, unsigned cbid, const void *cb);
/* The streams whose last logged launch is marked stream_gone (each once, latest launch
 * first): at most `cap` into `out`; returns how many there are. */
size_t l2p_launch_log_gone(const l2p_launch_log *log, void **out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
