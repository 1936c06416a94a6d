/* See l2p_launchlog.h. */
#define _GNU_SOURCE
#include "l2p_launchlog.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* driver types only: the entry points come through l2p_driver_symbol */
#include <cupti.h> /* the callback API, and the parameter structs of each API function */

#include "l2p_cupti.h"
#include "l2p_device.h"

/* ---- pure parts ---- */

l2p_status l2p_launch_log_init(l2p_launch_log *log, int device, size_t max_launches,
                               size_t max_args)
{
    memset(log, 0, sizeof *log);
    log->device = device;
    log->max_launches = max_launches;
    log->max_args = max_args;
    log->launches = (l2p_launch *)calloc(max_launches ? max_launches : 1, sizeof *log->launches);
    if (!log->launches)
        return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory for a log of %zu launches",
                        max_launches);
    pthread_mutex_init(&log->lock, NULL);
    return L2P_OK;
}

/* Room for n more items of `size` bytes in a pool that grows by doubling from `first` items;
 * 0 where host memory runs out (the pool as it was). */
static int reserve(void **pool, size_t *cap, size_t used, size_t n, size_t size, size_t first)
{
    return n <= SIZE_MAX - used && l2p_grow(pool, cap, used + n, size, first);
}

/* Room for n more argument bytes: the buffer grows by doubling, up to the cap. */
static int reserve_args(l2p_launch_log *log, size_t n)
{
    if (n > log->max_args - log->n_args) return 0;
    if (log->n_args + n <= log->args_cap) return 1;
    size_t cap = log->args_cap ? log->args_cap : 64 * 1024;
    while (cap < log->n_args + n) cap *= 2;
    if (cap > log->max_args) cap = log->max_args;
    unsigned char *grown = (unsigned char *)realloc(log->args, cap);
    if (!grown) return 0;
    log->args = grown;
    log->args_cap = cap;
    return 1;
}

/* The argument buffer the spans describe ends where its last parameter does. */
static size_t args_size_of(const l2p_param_span *spans, size_t n)
{
    size_t end = 0;
    for (size_t i = 0; i < n; i++)
        if (spans[i].offset + spans[i].size > end) end = spans[i].offset + spans[i].size;
    return end;
}

/* Lay kernel_params out as the `extra` form would: parameter i at its offset. */
static void copy_params(unsigned char *dst, size_t size, void *const *kernel_params,
                        const l2p_param_span *spans, size_t n)
{
    memset(dst, 0, size); /* the padding between parameters */
    for (size_t i = 0; i < n; i++)
        if (kernel_params[i]) memcpy(dst + spans[i].offset, kernel_params[i], spans[i].size);
}

/* Under log->lock: room for a launch of `size` argument bytes, n spans and a name of name_len
 * bytes (its '\0' included). */
static int room_for(l2p_launch_log *log, size_t size, size_t n, size_t name_len)
{
    return log->n_launches < log->max_launches && n <= L2P_LAUNCH_LOG_MAX_SPANS - log->n_spans &&
           reserve_args(log, size) &&
           reserve((void **)&log->spans, &log->spans_cap, log->n_spans, n, sizeof *log->spans,
                   256) &&
           reserve((void **)&log->names, &log->names_cap, log->n_names, name_len, 1, 16 * 1024);
}

/* Under log->lock, with room: the launch's layout and name into the pools. */
static void keep_resolution(l2p_launch_log *log, l2p_launch *l, const l2p_param_span *spans,
                            size_t n, const char *name, size_t name_len)
{
    l->spans_at = log->n_spans, l->n_params = n;
    if (n) memcpy(log->spans + log->n_spans, spans, n * sizeof *spans);
    log->n_spans += n;
    l->name_at = log->n_names;
    memcpy(log->names + log->n_names, name, name_len);
    log->n_names += name_len;
}

void l2p_launch_log_add(l2p_launch_log *log, const l2p_launch_args *a,
                        const l2p_param_span *spans, size_t n_params, const char *name)
{
    size_t extra_size = 0;
    const unsigned char *extra = a->kernel_params ? NULL : l2p_extra_buffer(a->extra, &extra_size);
    size_t size = a->kernel_params ? args_size_of(spans, n_params) : extra ? extra_size : 0;
    /* A kernel without parameters may pass neither form; one with parameters must. */
    int readable = a->kernel_params || extra || n_params == 0;
    if (!name) name = "";
    size_t name_len = strlen(name) + 1;
    pthread_mutex_lock(&log->lock);
    if (!readable || !room_for(log, size, n_params, name_len)) {
        log->dropped++;
    } else {
        l2p_launch *l = &log->launches[log->n_launches++];
        l->func = a->func;
        l->stream = a->stream;
        memcpy(l->grid, a->grid, sizeof l->grid);
        memcpy(l->block, a->block, sizeof l->block);
        l->shared_mem = a->shared_mem;
        l->args_at = log->n_args;
        l->args_size = size;
        if (size && a->kernel_params)
            copy_params(log->args + log->n_args, size, a->kernel_params, spans, n_params);
        else if (size)
            memcpy(log->args + log->n_args, extra, size);
        log->n_args += size;
        keep_resolution(log, l, spans, n_params, name, name_len);
    }
    pthread_mutex_unlock(&log->lock);
}

void l2p_launch_log_stream_destroyed(l2p_launch_log *log, const void *stream, size_t before)
{
    pthread_mutex_lock(&log->lock);
    for (size_t k = 0; k < log->n_launches && k < before; k++)
        if (log->launches[k].stream == stream) log->launches[k].stream_gone = 1;
    pthread_mutex_unlock(&log->lock);
}

/* Both forms of cuStreamDestroy take one CUstream. */
_Static_assert(sizeof(cuStreamDestroy_params) == sizeof(cuStreamDestroy_v2_params),
               "cuStreamDestroy differs");
int l2p_launch_log_destroy_event(l2p_launch_log *log, unsigned cbid, const void *data)
{
    const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
    if (cbid != CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy &&
        cbid != CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2)
        return 0;
    const CUresult *rc = (const CUresult *)cb->functionReturnValue;
    if (cb->callbackSite == CUPTI_API_ENTER) {
        if (cb->correlationData) *cb->correlationData = log->n_launches;
    } else if (rc && *rc == CUDA_SUCCESS) { /* gone (a refused destroy left it as it was) */
        size_t before = cb->correlationData ? (size_t)*cb->correlationData : log->n_launches;
        l2p_launch_log_stream_destroyed(
            log, ((const cuStreamDestroy_v2_params *)cb->functionParams)->hStream, before);
    }
    return 1;
}

size_t l2p_launch_log_gone(const l2p_launch_log *log, void **out, size_t cap)
{
    size_t n = 0;
    for (size_t k = log->n_launches; k-- > 0;) {
        const l2p_launch *l = &log->launches[k];
        if (!l->stream_gone) continue;
        int later = 0; /* a later launch on the handle decided it already (gone ones are few) */
        for (size_t j = k + 1; j < log->n_launches && !later; j++)
            later = log->launches[j].stream == l->stream;
        if (later) continue;
        if (n < cap) out[n] = l->stream;
        n++;
    }
    return n;
}

/* ---- decoding CUPTI's parameter structs into l2p_launch_args ---- */

/* Each _ptsz form (per-thread default stream) takes the same arguments as its plain form;
 * the plain struct reads both. */
_Static_assert(sizeof(cuLaunchKernel_params) == sizeof(cuLaunchKernel_ptsz_params) &&
               offsetof(cuLaunchKernel_params, extra) == offsetof(cuLaunchKernel_ptsz_params, extra),
               "cuLaunchKernel_ptsz differs");
_Static_assert(sizeof(cuLaunchKernelEx_params) == sizeof(cuLaunchKernelEx_ptsz_params),
               "cuLaunchKernelEx_ptsz differs");
_Static_assert(sizeof(cuLaunchCooperativeKernel_params) ==
               sizeof(cuLaunchCooperativeKernel_ptsz_params), "cuLaunchCooperativeKernel_ptsz differs");
/* cuLaunchCooperativeKernel takes cuLaunchKernel's arguments without `extra`: one struct reads
 * both, up to kernelParams. */
_Static_assert(offsetof(cuLaunchCooperativeKernel_params, kernelParams) ==
               offsetof(cuLaunchKernel_params, kernelParams) &&
               offsetof(cuLaunchCooperativeKernel_params, hStream) ==
               offsetof(cuLaunchKernel_params, hStream), "cuLaunchCooperativeKernel differs");

static void shape(l2p_launch_args *a, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                  unsigned by, unsigned bz, size_t shared_mem)
{
    a->grid[0] = gx, a->grid[1] = gy, a->grid[2] = gz;
    a->block[0] = bx, a->block[1] = by, a->block[2] = bz;
    a->shared_mem = (unsigned)shared_mem;
}

static int per_thread_form(unsigned cbid)
{
    return cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
           cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
           cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
}

static int decode_launch(unsigned cbid, const void *params, l2p_launch_args *a)
{
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
        const cuLaunchKernel_params *p = (const cuLaunchKernel_params *)params;
        int cooperative = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel ||
                          cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
        shape(a, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
              p->blockDimZ, p->sharedMemBytes);
        a->func = p->f, a->stream = p->hStream, a->kernel_params = p->kernelParams;
        a->extra = cooperative ? NULL : p->extra; /* its struct ends at kernelParams */
        return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const cuLaunchKernelEx_params *p = (const cuLaunchKernelEx_params *)params;
        const CUlaunchConfig *c = p->config;
        if (!c) return 0;
        shape(a, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
              c->blockDimZ, c->sharedMemBytes);
        a->func = p->f, a->stream = c->hStream;
        a->kernel_params = p->kernelParams, a->extra = p->extra;
        return 1;
    }
    default:
        return 0;
    }
}

int l2p_launch_log_read(unsigned cbid, const void *params, l2p_launch_args *a)
{
    memset(a, 0, sizeof *a);
    if (!decode_launch(cbid, params, a)) return 0;
    /* NULL in a _ptsz form is the calling thread's per-thread default stream, not the legacy
     * one that NULL means to every reader of the log (stream_key, streams.known): kept as the
     * driver's own name for it, so that no window goes on the legacy stream for it */
    if (!a->stream && per_thread_form(cbid)) a->stream = CU_STREAM_PER_THREAD;
    return 1;
}

/* ---- the diagnostic switches (l2p_launchlog.h) ---- */

enum { DIAG_PRINT = 1, DIAG_NONE = 2, DIAG_RAW = 4, DIAG_KEEP = 8, DIAG_FINALIZE = 16 };

static unsigned diag_switches(void)
{
    static const struct { const char *word; unsigned bit; } words[] = {
        {"print", DIAG_PRINT}, {"none", DIAG_NONE}, {"raw", DIAG_RAW},
        {"keep", DIAG_KEEP},   {"finalize", DIAG_FINALIZE}};
    const char *env = getenv("L2P_LAUNCH_LOG_DIAG");
    char buf[128], *save = NULL;
    unsigned bits = 0;
    if (!env) return 0;
    snprintf(buf, sizeof buf, "%s", env);
    for (char *w = strtok_r(buf, ", ", &save); w; w = strtok_r(NULL, ", ", &save))
        for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
            if (strcmp(w, words[i].word) == 0) bits |= words[i].bit;
    return bits;
}

/* ---- which function a launch runs ---- */

/* Parameter i's offset and size for each parameter, up to cap (the count). */
static size_t param_layout(void *func, l2p_param_span *spans, size_t cap)
{
    size_t n = 0;
    while (n < cap && l2p_function_param(func, n, &spans[n].offset, &spans[n].size)) n++;
    return n;
}

/* The CUfunction a driver launch runs, with its parameter layout; NULL where none is found.
 * The driver takes a CUfunction or a CUkernel (a library kernel, which a runtime may pass): a
 * handle without parameters as a function is tried as a CUkernel, whose CUfunction in the
 * current context cuKernelGetFunction gives. Both calls go straight to the driver (entry points
 * resolved by l2p_discovery_supported before the subscription): no runtime is called. */
static void *function_of(void *handle, l2p_param_span *spans, size_t cap, size_t *n)
{
    void *f = handle, *k;
    *n = param_layout(f, spans, cap);
    if (*n == 0 && (k = l2p_kernel_function(f)) != NULL) {
        f = k;
        *n = param_layout(f, spans, cap);
    }
    return f;
}

/* ---- the callback ---- */

typedef CUresult (*ctx_get_device_fn)(CUdevice *);
typedef CUresult (*stream_is_capturing_fn)(CUstream, CUstreamCaptureStatus *);
static ctx_get_device_fn ctx_get_device; /* resolved by l2p_launch_log_begin */
static stream_is_capturing_fn stream_is_capturing; /* likewise */

/* Whether the calling thread's current context is on the log's device. */
static int on_device(const l2p_launch_log *log)
{
    CUdevice dev;
    return ctx_get_device(&dev) == CUDA_SUCCESS && (int)dev == log->device;
}

/* Whether a launch goes into a capture rather than to the GPU: it then runs nothing now (it
 * becomes a node of the graph being captured), so it is not eager work, and the log, which
 * stands for eager work, leaves it out. The legacy default stream (NULL here: a _ptsz form's
 * NULL was read as CU_STREAM_PER_THREAD) is never captured, and is not asked: asking about it
 * while a blocking stream captures is itself an error. */
static int into_capture(CUstream stream)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (stream == NULL || stream == CU_STREAM_LEGACY) return 0;
    return stream_is_capturing(stream, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static void count_dropped(l2p_launch_log *log)
{
    pthread_mutex_lock(&log->lock);
    log->dropped++;
    pthread_mutex_unlock(&log->lock);
}

/* Log a launch whose a->func is the handle given to the driver: resolved here, inside the
 * launch call, where its module is surely loaded (never from a table kept across launches: an
 * unloaded function's handle can come back as another's). */
static void log_launch(l2p_launch_log *log, l2p_launch_args *a)
{
    enum { MAX_PARAMS = 512 }; /* 8 KiB of spans on the caller's stack */
    l2p_param_span spans[MAX_PARAMS];
    char name[L2P_KERNEL_NAME_MAX];
    size_t n;
    a->func = function_of(a->func, spans, MAX_PARAMS, &n);
    l2p_function_name(a->func, name);
    if (n == 0 && !name[0]) { /* neither parameters nor a name: not a function the driver knows */
        count_dropped(log);
        return;
    }
    l2p_launch_log_add(log, a, spans, n, name);
}

/* A driver launch, read at its API entry: its kernelParams, extra and config point at the
 * caller's memory until the call returns, and the log copies the bytes now. (A launch the
 * driver then refuses is logged too: fn asked for it.) */
static void on_driver(l2p_launch_log *log, CUpti_CallbackId cbid, const CUpti_CallbackData *cb)
{
    l2p_launch_args a;
    if (l2p_launch_log_destroy_event(log, cbid, cb)) return;
    if (cb->callbackSite != CUPTI_API_ENTER || !l2p_launch_log_read(cbid, cb->functionParams, &a))
        return;
    log->seen++;
    if ((log->diag & DIAG_RAW) || !on_device(log)) return;
    if (into_capture((CUstream)a.stream)) {
        log->captured++;
        return;
    }
    if (log->n_launches == log->max_launches || !a.func) { /* full: no lookup for it */
        count_dropped(log);
        return;
    }
    log_launch(log, &a);
}

/* The one log the callbacks may write. A callback that comes late (another thread's launch
 * racing the end, or a subscription that failed to end) must find no log rather than a freed
 * one. Every callback runs under slot_lock, so the log's table of resolutions needs no other
 * lock. */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static l2p_launch_log *slot_log;
static unsigned long sessions; /* begun so far, under slot_lock */

/* The shared dispatcher's handler (l2p_cupti.h): it hands us every driver callback of the
 * process's one subscriber, and a driver call made from inside it is not handed back. */
static void on_callback(unsigned cbid, const void *data)
{
    pthread_mutex_lock(&slot_lock);
    if (slot_log) on_driver(slot_log, (CUpti_CallbackId)cbid, (const CUpti_CallbackData *)data);
    pthread_mutex_unlock(&slot_lock);
}

static l2p_status slot_take(l2p_launch_log *log)
{
    pthread_mutex_lock(&slot_lock);
    int busy = slot_log != NULL;
    if (!busy) {
        slot_log = log;
        log->session = ++sessions;
    }
    pthread_mutex_unlock(&slot_lock);
    return busy ? l2p_fail(L2P_ERR_STATE, "launch log: another launch log is running in this "
                           "process (CUPTI allows one subscriber)") : L2P_OK;
}

/* After this no callback reads the log. */
static void slot_release(l2p_launch_log *log)
{
    pthread_mutex_lock(&slot_lock);
    if (slot_log == log) slot_log = NULL;
    pthread_mutex_unlock(&slot_lock);
}

/* ---- CUPTI ---- */

/* The driver entry points the callback calls, resolved before the subscription. */
static l2p_status driver_calls(void)
{
    void *get_device, *is_capturing;
    L2P_TRY(l2p_driver_symbol("cuCtxGetDevice", &get_device));
    ctx_get_device = (ctx_get_device_fn)get_device;
    L2P_TRY(l2p_driver_symbol("cuStreamIsCapturing", &is_capturing));
    stream_is_capturing = (stream_is_capturing_fn)is_capturing;
    return L2P_OK;
}

/* The launches first (each required), then the stream destroys (wanted: a CUPTI that lacks
 * one leaves those launches unmarked). */
static const unsigned driver_calls_logged[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy, CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2};
enum { N_LAUNCH_CBIDS = 6, N_LOGGED_CBIDS = sizeof driver_calls_logged / sizeof(unsigned) };

static l2p_cupti_client client = {"launch log", on_callback, driver_calls_logged,
                                  N_LOGGED_CBIDS, N_LAUNCH_CBIDS, 0, 0};

/* At the end each launch callback enabled is disabled, and the subscriber goes where no other
 * client (capture tracking) holds it (DIAG_KEEP: the callbacks stay enabled). CUPTI itself
 * stays attached to the process; DIAG_FINALIZE detaches it too, where the subscriber went. */
static unsigned detach_flags(const l2p_launch_log *log)
{
    return ((log->diag & DIAG_KEEP) ? L2P_CUPTI_KEEP_ENABLED : 0u) |
           ((log->diag & DIAG_FINALIZE) ? L2P_CUPTI_FINALIZE : 0u);
}

l2p_status l2p_launch_log_begin(int device, l2p_launch_log *log)
{
    memset(log, 0, sizeof *log);
    L2P_TRY(l2p_discovery_supported()); /* the callback reads parameter layouts */
    L2P_TRY(driver_calls());
    L2P_TRY(l2p_launch_log_init(log, device, L2P_LAUNCH_LOG_MAX_LAUNCHES,
                                L2P_LAUNCH_LOG_MAX_BYTES));
    log->diag = diag_switches();
    l2p_status st = slot_take(log);
    if (st == L2P_OK)
        st = l2p_cupti_attach(&client, (log->diag & DIAG_NONE) ? L2P_CUPTI_ENABLE_NONE : 0u);
    if (st == L2P_OK) log->attached = 1;
    if (st != L2P_OK) {
        l2p_error keep = *l2p_last_error();
        l2p_launch_log_free(log);
        return l2p_fail(keep.status, "%s", keep.message);
    }
    return st;
}

static void print_counts(const l2p_launch_log *log)
{
    const char *path = l2p_cupti_path();
    fprintf(stderr, "l2persist launch log %lu: driver launches seen %zu; into a capture %zu; "
            "logged %zu, dropped %zu; CUPTI %s\n", log->session, log->seen, log->captured,
            log->n_launches, log->dropped, path ? path : "?");
}

void l2p_launch_log_end(l2p_launch_log *log)
{
    slot_release(log); /* first: no callback reads this log from here on */
    if (!log->attached) return;
    l2p_cupti_detach(&client, detach_flags(log));
    log->attached = 0;
    if (log->diag & DIAG_PRINT) print_counts(log);
}

/* ---- the scan ---- */

/* From what the launch call gave and the log copied: no driver call on l->func (see the header). */
static l2p_status scan_launch(const l2p_launch_log *log, size_t k, l2p_graph_scan *out)
{
    const l2p_launch *l = &log->launches[k];
    l2p_kernel_info *info = &out->kernels[k];
    info->func = l->func;
    snprintf(info->name, sizeof info->name, "%s", log->names + l->name_at);
    info->num_params = l->n_params;
    memcpy(info->grid, l->grid, sizeof info->grid);
    memcpy(info->block, l->block, sizeof info->block);
    info->shared_mem = l->shared_mem;
    out->n_kernels = k + 1;
    return l2p_scan_span_args(out, k, l->n_params ? log->spans + l->spans_at : NULL, l->n_params,
                              NULL, log->args ? log->args + l->args_at : NULL, l->args_size);
}

l2p_status l2p_launch_log_scan(const l2p_launch_log *log, l2p_graph_scan *out)
{
    size_t n = log->n_launches;
    int prev;
    memset(out, 0, sizeof *out);
    L2P_TRY(l2p_discovery_supported());
    out->kernels = (l2p_kernel_info *)calloc(n ? n : 1, sizeof *out->kernels);
    if (!out->kernels)
        return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory scanning %zu launches", n);
    l2p_status st = l2p_device_enter(log->device, &prev); /* the pointer queries need it */
    if (st != L2P_OK) {
        l2p_graph_scan_free(out);
        return st;
    }
    for (size_t k = 0; st == L2P_OK && k < n; k++) st = scan_launch(log, k, out);
    l2p_device_leave(prev);
    if (st != L2P_OK) l2p_graph_scan_free(out);
    return st;
}

void l2p_launch_log_free(l2p_launch_log *log)
{
    if (!log->launches) return; /* never initialised, or freed */
    l2p_launch_log_end(log);
    pthread_mutex_destroy(&log->lock);
    free(log->launches);
    free(log->args);
    free(log->spans);
    free(log->names);
    memset(log, 0, sizeof *log);
}
