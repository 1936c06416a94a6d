/* See l2p_counters.h. libcupti is resolved with dlopen/dlsym (l2p_cupti.h) so nothing links
 * against it. */
#define _GNU_SOURCE
#include "l2p_counters.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cupti_profiler_host.h> /* includes <string>: csrc/cupti_shim supplies an empty one */
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include "l2p_cupti.h"
#include "l2p_device.h"
#include "l2p_life.h"

/* ---- friendly names ---- */

static const struct {
    const char *name, *metric, *doc;
} friendly[] = {
    {"l2_hit_rate", "lts__t_sector_hit_rate.pct", "L2 sector hit rate, % (all operations)"},
    {"l2_read_hit_rate", "lts__t_sector_op_read_hit_rate.pct", "L2 sector hit rate of reads, %"},
    /* srcunit_tex: what the SMs asked for. On Hopper the plain lts__t_sectors_op_read also
     * counts the traffic between the two L2 partitions (measured: 1.5x the bytes read). */
    {"l2_read_sectors", "lts__t_sectors_srcunit_tex_op_read.sum",
     "32-byte sectors the SMs read from L2"},
    {"l2_read_hit_sectors", "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
     "of those, sectors that hit in L2"},
    {"l2_write_sectors", "lts__t_sectors_op_write.sum", "32-byte sectors written at L2"},
    {"dram_bytes_read", "dram__bytes_read.sum", "bytes read from device memory"},
    {"dram_bytes_write", "dram__bytes_write.sum", "bytes written to device memory"},
    {"global_load_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
     "global load requests (one per warp instruction)"},
    {"global_load_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
     "32-byte sectors the global loads asked L1 for"},
    {"global_store_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
     "global store requests"},
    {"global_store_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
     "32-byte sectors the global stores touched"},
    {"global_load_efficiency", "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
     "bytes used per sector loaded, % (nvprof's gld_efficiency)"},
    {"global_store_efficiency", "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",
     "bytes used per sector stored, % (nvprof's gst_efficiency)"},
    {"gpu_time_ns", "gpu__time_duration.sum", "GPU time of the range, ns"},
    /* What explains a persistence result (tune's counters). */
    {"l1_hit_rate", "l1tex__t_sector_hit_rate.pct",
     "L1/texture cache sector hit rate, % (global loads and texture fetches)"},
    {"l1_global_load_hit_rate", "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct",
     "L1 sector hit rate of global loads, %"},
    {"l2_write_hit_rate", "lts__t_sector_op_write_hit_rate.pct", "L2 sector hit rate of writes, %"},
    {"l2_miss_sectors", "lts__t_sectors_lookup_miss.sum", "L2 sector lookups that missed"},
    {"l2_fabric_sectors", "lts__t_sectors_srcunit_ltcfabric.sum",
     "sectors crossing the fabric between the L2 partitions"},
    {"l2_throughput_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
     "L2 throughput, % of its peak"},
    {"dram_throughput_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
     "device-memory throughput, % of its peak"},
    /* Hopper tags L2 requests with their eviction class: a window's persisting accesses are
     * evict_last, its streaming ones evict_first, the rest evict_normal (measured on an H200:
     * evict_last requests appear only with a PERSISTING window). */
    {"l2_persisting_requests", "lts__t_requests_aperture_device_evict_last.sum",
     "L2 requests of persisting (evict_last) accesses"},
    {"l2_persisting_hit_requests", "lts__t_requests_aperture_device_evict_last_lookup_hit.sum",
     "of those, requests that hit"},
    {"l2_normal_requests", "lts__t_requests_aperture_device_evict_normal.sum",
     "L2 requests of normal (evict_normal) accesses"},
    {"l2_normal_hit_requests", "lts__t_requests_aperture_device_evict_normal_lookup_hit.sum",
     "of those, requests that hit"},
};
#define N_FRIENDLY (sizeof friendly / sizeof friendly[0])

size_t l2p_counter_friendly_count(void) { return N_FRIENDLY; }
const char *l2p_counter_friendly_name(size_t i) { return i < N_FRIENDLY ? friendly[i].name : NULL; }
const char *l2p_counter_friendly_metric(size_t i) { return i < N_FRIENDLY ? friendly[i].metric : NULL; }
const char *l2p_counter_friendly_doc(size_t i) { return i < N_FRIENDLY ? friendly[i].doc : NULL; }

const char *l2p_counter_resolve(const char *name)
{
    for (size_t i = 0; i < N_FRIENDLY; i++)
        if (strcmp(name, friendly[i].name) == 0) return friendly[i].metric;
    return name;
}

/* ---- the CUPTI entry points ---- */

#define CUPTI_FUNCTIONS(X)                                                          \
    X(cuptiGetResultString) X(cuptiProfilerInitialize) X(cuptiDeviceGetChipName)    \
    X(cuptiProfilerGetCounterAvailability) X(cuptiRangeProfilerEnable)              \
    X(cuptiRangeProfilerDisable) X(cuptiRangeProfilerSetConfig)                     \
    X(cuptiRangeProfilerStart) X(cuptiRangeProfilerStop) X(cuptiRangeProfilerPushRange) \
    X(cuptiRangeProfilerPopRange) X(cuptiRangeProfilerDecodeData)                   \
    X(cuptiRangeProfilerGetCounterDataSize) X(cuptiRangeProfilerCounterDataImageInitialize) \
    X(cuptiRangeProfilerGetCounterDataInfo) X(cuptiProfilerHostInitialize)          \
    X(cuptiProfilerHostDeinitialize) X(cuptiProfilerHostConfigAddMetrics)           \
    X(cuptiProfilerHostGetConfigImageSize) X(cuptiProfilerHostGetConfigImage)       \
    X(cuptiProfilerHostGetNumOfPasses) X(cuptiProfilerHostGetRangeName)             \
    X(cuptiProfilerHostEvaluateToGpuValues) X(cuptiProfilerHostGetBaseMetrics)

static struct {
#define FIELD(f) __typeof__(f) *f;
    CUPTI_FUNCTIONS(FIELD)
#undef FIELD
} api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded;          /* 1 when every entry point resolved */
static int initialized;     /* cuptiProfilerInitialize done, */
static unsigned initialized_in; /* in this generation of CUPTI (l2p_cupti_generation) */
static char load_error[sizeof l2p_last_error()->message];

static void load(void)
{
    void *h;
    if (l2p_cupti_library(&h) != L2P_OK) {
        snprintf(load_error, sizeof load_error, "%s", l2p_last_error()->message);
        l2p_clear_error();
        return;
    }
#define RESOLVE(f)                                                                      \
    if (!(api.f = (__typeof__(f) *)dlsym(h, #f))) {                                     \
        snprintf(load_error, sizeof load_error, "CUPTI lacks %s: the Range Profiler needs " \
                 "CUPTI from CUDA 12.6 or newer", #f);                                  \
        return;                                                                         \
    }
    CUPTI_FUNCTIONS(RESOLVE)
#undef RESOLVE
    loaded = 1;
}

l2p_status l2p_counters_load(void)
{
    pthread_once(&load_once, load);
    return loaded ? L2P_OK : l2p_fail(L2P_ERR_NOT_SUPPORTED, "%s", load_error);
}

static l2p_status fail_cupti(CUptiResult rc, const char *call)
{
    return l2p_cupti_fail((int)rc, call, NULL);
}

#define CUPTI_TRY(call, params)                                        \
    do {                                                               \
        CUptiResult r_ = api.call(params);                             \
        if (r_ != CUPTI_SUCCESS) return fail_cupti(r_, #call);         \
    } while (0)

/* ---- sessions ---- */

struct l2p_profiler {
    int device;
    int per_kernel;
    CUcontext ctx;
    l2p_life life; /* the context the session profiles: a device reset destroys it */
    CUpti_RangeProfiler_Object *rp;
    CUpti_Profiler_Host_Object *host;
    char **metrics;
    size_t n;
    uint8_t *avail, *config, *data;
    size_t avail_size, config_size, data_size;
    size_t passes, pass_index, max_ranges;
    uint16_t nesting;
    int in_pass, in_range;
};

static pthread_mutex_t session_lock = PTHREAD_MUTEX_INITIALIZER;
static l2p_profiler *active_session;
/* 1 + the device reset while a session was open, or 0. CUPTI's Range Profiler then refuses
 * every later session of the process (cuptiProfilerGetCounterAvailability:
 * CUPTI_ERROR_INVALID_PARAMETER, also after cuptiProfilerDeInitialize and Initialize; a reset
 * outside a session leaves it working: H200 e7d930d, tools/investigations/counters-after-reset),
 * and its objects of the dead context cannot be disabled (a crash), so the refusal comes first
 * and says what works. */
static int lost_to_reset;

int l2p_counters_session_open(void)
{
    pthread_mutex_lock(&session_lock);
    int open = active_session != NULL;
    pthread_mutex_unlock(&session_lock);
    return open;
}

/* The device's primary context. Called with the device entered (l2p_profiler_open); entered
 * again here through the one pair, which then switches nothing. */
static l2p_status context_of_current(int device, CUcontext *ctx)
{
    void *fn = NULL;
    L2P_CUDA_TRY(cudaFree(0)); /* makes the primary context current on this thread */
    L2P_TRY(l2p_driver_symbol("cuCtxGetCurrent", &fn));
    if (((CUresult(*)(CUcontext *))fn)(ctx) != 0 || !*ctx)
        return l2p_fail(L2P_ERR_CUDA, "cuCtxGetCurrent returned no context for device %d", device);
    return L2P_OK;
}

static l2p_status current_context(int device, CUcontext *ctx)
{
    int prev;
    L2P_TRY(l2p_device_enter(device, &prev));
    l2p_status st = context_of_current(device, ctx);
    l2p_device_leave(prev);
    return st;
}

static l2p_status global_init(void)
{
    CUpti_Profiler_Initialize_Params p = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    l2p_cupti_reclaim(); /* the live watcher may have let CUPTI go: it attaches again */
    if (initialized && initialized_in == l2p_cupti_generation()) return L2P_OK;
    CUPTI_TRY(cuptiProfilerInitialize, &p);
    initialized = 1;
    initialized_in = l2p_cupti_generation();
    return L2P_OK;
}

static l2p_status chip_name(int device, const char **name)
{
    CUpti_Device_GetChipName_Params p = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    p.deviceIndex = (size_t)device;
    CUPTI_TRY(cuptiDeviceGetChipName, &p);
    *name = p.pChipName;
    return L2P_OK;
}

static l2p_status counter_availability(l2p_profiler *s)
{
    CUpti_Profiler_GetCounterAvailability_Params p = {
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    p.ctx = s->ctx;
    CUPTI_TRY(cuptiProfilerGetCounterAvailability, &p);
    s->avail_size = p.counterAvailabilityImageSize;
    s->avail = calloc(1, s->avail_size);
    if (!s->avail) return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory");
    p.pCounterAvailabilityImage = s->avail;
    CUPTI_TRY(cuptiProfilerGetCounterAvailability, &p);
    return L2P_OK;
}

static l2p_status host_init(const char *chip, const uint8_t *avail, CUpti_Profiler_Host_Object **out)
{
    CUpti_Profiler_Host_Initialize_Params p = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip;
    p.pCounterAvailabilityImage = avail;
    CUPTI_TRY(cuptiProfilerHostInitialize, &p);
    *out = p.pHostObject;
    return L2P_OK;
}

static void host_deinit(CUpti_Profiler_Host_Object *host)
{
    CUpti_Profiler_Host_Deinitialize_Params p = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    if (!host) return;
    p.pHostObject = host;
    (void)api.cuptiProfilerHostDeinitialize(&p);
}

/* Adding all metrics failed: find the first unknown one so the error can name it. */
static l2p_status name_bad_metric(l2p_profiler *s, const char *chip, CUptiResult rc)
{
    for (size_t i = 0; i < s->n; i++) {
        CUpti_Profiler_Host_Object *probe = NULL;
        if (host_init(chip, s->avail, &probe) != L2P_OK) break;
        CUpti_Profiler_Host_ConfigAddMetrics_Params p = {
            CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
        p.pHostObject = probe;
        p.ppMetricNames = (const char **)&s->metrics[i];
        p.numMetrics = 1;
        CUptiResult r = api.cuptiProfilerHostConfigAddMetrics(&p);
        host_deinit(probe);
        if (r != CUPTI_SUCCESS)
            return l2p_fail(L2P_ERR_VALUE, "metrics: '%s' is not a metric of this chip (%s)",
                            s->metrics[i], chip);
    }
    return fail_cupti(rc, "cuptiProfilerHostConfigAddMetrics");
}

static l2p_status build_config(l2p_profiler *s, const char *chip)
{
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = s->host;
    add.ppMetricNames = (const char **)s->metrics;
    add.numMetrics = s->n;
    CUptiResult r = api.cuptiProfilerHostConfigAddMetrics(&add);
    if (r != CUPTI_SUCCESS) return name_bad_metric(s, chip, r);
    CUpti_Profiler_Host_GetConfigImageSize_Params sz = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    sz.pHostObject = s->host;
    CUPTI_TRY(cuptiProfilerHostGetConfigImageSize, &sz);
    s->config_size = sz.configImageSize;
    s->config = calloc(1, s->config_size);
    if (!s->config) return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory");
    CUpti_Profiler_Host_GetConfigImage_Params img = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    img.pHostObject = s->host;
    img.configImageSize = s->config_size;
    img.pConfigImage = s->config;
    CUPTI_TRY(cuptiProfilerHostGetConfigImage, &img);
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = s->config_size;
    np.pConfigImage = s->config;
    CUPTI_TRY(cuptiProfilerHostGetNumOfPasses, &np);
    s->passes = np.numOfPasses;
    return L2P_OK;
}

static l2p_status counter_data(l2p_profiler *s)
{
    CUpti_RangeProfiler_GetCounterDataSize_Params sz = {
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    sz.pRangeProfilerObject = s->rp;
    sz.pMetricNames = (const char **)s->metrics;
    sz.numMetrics = s->n;
    sz.maxNumOfRanges = s->max_ranges;
    sz.maxNumRangeTreeNodes = (uint32_t)s->max_ranges;
    CUPTI_TRY(cuptiRangeProfilerGetCounterDataSize, &sz);
    s->data_size = sz.counterDataSize;
    s->data = calloc(1, s->data_size);
    if (!s->data) return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory");
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params in = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    in.pRangeProfilerObject = s->rp;
    in.counterDataSize = s->data_size;
    in.pCounterData = s->data;
    CUPTI_TRY(cuptiRangeProfilerCounterDataImageInitialize, &in);
    return L2P_OK;
}

static l2p_status enable(l2p_profiler *s)
{
    CUpti_RangeProfiler_Enable_Params p = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    p.ctx = s->ctx;
    CUPTI_TRY(cuptiRangeProfilerEnable, &p);
    s->rp = p.pRangeProfilerObject;
    return L2P_OK;
}

static l2p_status copy_metrics(l2p_profiler *s, const char *const *metrics, size_t n)
{
    s->metrics = calloc(n + 1, sizeof *s->metrics);
    if (!s->metrics) return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory");
    s->n = n;
    for (size_t i = 0; i < n; i++)
        if (!(s->metrics[i] = strdup(l2p_counter_resolve(metrics[i]))))
            return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory");
    return L2P_OK;
}

static l2p_status open_session(l2p_profiler *s, const char *const *metrics, size_t n)
{
    const char *chip = NULL;
    L2P_TRY(copy_metrics(s, metrics, n));
    L2P_TRY(current_context(s->device, &s->ctx));
    if (l2p_life_begin(&s->life, s->device) != L2P_OK) l2p_clear_error(); /* unknown: kept */
    L2P_TRY(global_init());
    L2P_TRY(chip_name(s->device, &chip));
    L2P_TRY(counter_availability(s));
    L2P_TRY(enable(s));
    L2P_TRY(host_init(chip, s->avail, &s->host));
    L2P_TRY(build_config(s, chip));
    return counter_data(s);
}

l2p_status l2p_profiler_open(int device, const char *const *metrics, size_t n, int per_kernel,
                             size_t max_ranges, l2p_profiler **out)
{
    int prev;
    *out = NULL;
    if (n == 0) return l2p_fail(L2P_ERR_VALUE, "metrics: at least one metric is needed");
    if (max_ranges < 1 || max_ranges > 100000)
        return l2p_fail(L2P_ERR_VALUE, "max_ranges: %zu is outside [1, 100000]", max_ranges);
    L2P_TRY(l2p_counters_load());
    L2P_TRY(l2p_device_enter(device, &prev));
    pthread_mutex_lock(&session_lock);
    if (lost_to_reset) {
        int dev = lost_to_reset - 1;
        pthread_mutex_unlock(&session_lock);
        l2p_device_leave(prev);
        return l2p_fail(L2P_ERR_STATE, "counters: device %d was reset while a counter session "
                        "was open in this process, and CUPTI's Range Profiler opens no other "
                        "session in it after that; measure in a new process", dev);
    }
    if (active_session) {
        pthread_mutex_unlock(&session_lock);
        l2p_device_leave(prev);
        return l2p_fail(L2P_ERR_STATE, "a counter session is already open in this process; "
                        "CUPTI profiles one at a time");
    }
    l2p_profiler *s = calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_unlock(&session_lock);
        l2p_device_leave(prev);
        return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory");
    }
    active_session = s;
    pthread_mutex_unlock(&session_lock);
    s->device = device;
    s->per_kernel = per_kernel;
    s->max_ranges = max_ranges;
    s->nesting = 1;
    l2p_status st = open_session(s, metrics, n);
    l2p_device_leave(prev);
    if (st != L2P_OK) {
        l2p_error saved = *l2p_last_error(); /* close() may overwrite it */
        l2p_profiler_close(s);
        *(l2p_error *)l2p_last_error() = saved;
        return st;
    }
    *out = s;
    return L2P_OK;
}

size_t l2p_profiler_passes(const l2p_profiler *p) { return p->passes; }

static l2p_status set_config(l2p_profiler *s)
{
    CUpti_RangeProfiler_SetConfig_Params p = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = s->rp;
    p.configSize = s->config_size;
    p.pConfig = s->config;
    p.counterDataImageSize = s->data_size;
    p.pCounterDataImage = s->data;
    p.range = s->per_kernel ? CUPTI_AutoRange : CUPTI_UserRange;
    p.replayMode = CUPTI_UserReplay;
    p.maxRangesPerPass = s->max_ranges;
    p.numNestingLevels = 1;
    p.minNestingLevel = 1;
    p.passIndex = s->pass_index;
    p.targetNestingLevel = s->nesting;
    CUPTI_TRY(cuptiRangeProfilerSetConfig, &p);
    return L2P_OK;
}

/* The session's context and CUPTI's range profiler object die with a device reset (by the
 * program or any library): no CUPTI call may name them after one. */
l2p_status l2p_profiler_alive(const l2p_profiler *s)
{
    return l2p_life_check(&s->life, 0, "profiler", "counter session was opened",
                          "close it and open a new one");
}

l2p_status l2p_profiler_begin_pass(l2p_profiler *s)
{
    L2P_TRY(l2p_profiler_alive(s));
    if (s->in_pass) return l2p_fail(L2P_ERR_STATE, "a pass is already in flight");
    L2P_TRY(set_config(s));
    CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    st.pRangeProfilerObject = s->rp;
    CUPTI_TRY(cuptiRangeProfilerStart, &st);
    s->in_pass = 1;
    return L2P_OK;
}

l2p_status l2p_profiler_push(l2p_profiler *s)
{
    if (!s->in_pass) return l2p_fail(L2P_ERR_STATE, "no pass is in flight");
    if (s->per_kernel || s->in_range) return L2P_OK;
    L2P_TRY(l2p_profiler_alive(s));
    CUpti_RangeProfiler_PushRange_Params pr = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
    pr.pRangeProfilerObject = s->rp;
    pr.pRangeName = "region";
    CUPTI_TRY(cuptiRangeProfilerPushRange, &pr);
    s->in_range = 1;
    return L2P_OK;
}

l2p_status l2p_profiler_end_pass(l2p_profiler *s, int *all_done)
{
    *all_done = 0;
    if (!s->in_pass) return l2p_fail(L2P_ERR_STATE, "no pass is in flight");
    if (l2p_profiler_alive(s) != L2P_OK) { /* the pass died with its context: nothing to stop */
        s->in_pass = s->in_range = 0;
        return L2P_ERR_STATE;
    }
    if (s->in_range) {
        CUpti_RangeProfiler_PopRange_Params pp = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
        pp.pRangeProfilerObject = s->rp;
        s->in_range = 0;
        CUPTI_TRY(cuptiRangeProfilerPopRange, &pp);
    }
    CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    sp.pRangeProfilerObject = s->rp;
    s->in_pass = 0;
    CUPTI_TRY(cuptiRangeProfilerStop, &sp);
    s->pass_index = sp.passIndex;
    s->nesting = (uint16_t)sp.targetNestingLevel;
    *all_done = sp.isAllPassSubmitted != 0;
    return L2P_OK;
}

l2p_status l2p_profiler_decode(l2p_profiler *s, size_t *num_ranges)
{
    L2P_TRY(l2p_profiler_alive(s));
    CUpti_RangeProfiler_DecodeData_Params d = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    d.pRangeProfilerObject = s->rp;
    CUPTI_TRY(cuptiRangeProfilerDecodeData, &d);
    CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = s->data;
    info.counterDataImageSize = s->data_size;
    CUPTI_TRY(cuptiRangeProfilerGetCounterDataInfo, &info);
    *num_ranges = info.numTotalRanges;
    return L2P_OK;
}

l2p_status l2p_profiler_range(l2p_profiler *s, size_t i, char *name, size_t name_size,
                              double *values)
{
    CUpti_Profiler_Host_GetRangeName_Params rn = {CUpti_Profiler_Host_GetRangeName_Params_STRUCT_SIZE};
    rn.pCounterDataImage = s->data;
    rn.counterDataImageSize = s->data_size;
    rn.rangeIndex = i;
    rn.delimiter = "/";
    CUPTI_TRY(cuptiProfilerHostGetRangeName, &rn);
    snprintf(name, name_size, "%s", rn.pRangeName ? rn.pRangeName : "");
    free((void *)rn.pRangeName); /* CUPTI allocates the name for the caller */
    CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    ev.pHostObject = s->host;
    ev.pCounterDataImage = s->data;
    ev.counterDataImageSize = s->data_size;
    ev.rangeIndex = i;
    ev.ppMetricNames = (const char **)s->metrics;
    ev.numMetrics = s->n;
    ev.pMetricValues = values;
    CUPTI_TRY(cuptiProfilerHostEvaluateToGpuValues, &ev);
    return L2P_OK;
}

void l2p_profiler_close(l2p_profiler *s)
{
    if (!s) return;
    /* After a device reset CUPTI's calls on the dead context's profiler object crash
     * (SIGSEGV, H200 1b28dc3), so none is made; CUPTI then cannot open another session in
     * this process (lost_to_reset). */
    if (s->rp && l2p_life_gone(&s->life)) {
        s->rp = NULL;
        pthread_mutex_lock(&session_lock);
        lost_to_reset = s->device + 1;
        pthread_mutex_unlock(&session_lock);
    }
    if (s->rp && s->in_range) {
        CUpti_RangeProfiler_PopRange_Params pp = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
        pp.pRangeProfilerObject = s->rp;
        (void)api.cuptiRangeProfilerPopRange(&pp);
    }
    if (s->rp && s->in_pass) {
        CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        sp.pRangeProfilerObject = s->rp;
        (void)api.cuptiRangeProfilerStop(&sp);
    }
    if (s->rp) {
        CUpti_RangeProfiler_Disable_Params dp = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
        dp.pRangeProfilerObject = s->rp;
        (void)api.cuptiRangeProfilerDisable(&dp);
    }
    host_deinit(s->host);
    for (size_t i = 0; s->metrics && i < s->n; i++) free(s->metrics[i]);
    free(s->metrics);
    free(s->avail);
    free(s->config);
    free(s->data);
    pthread_mutex_lock(&session_lock);
    if (active_session == s) active_session = NULL;
    pthread_mutex_unlock(&session_lock);
    free(s);
}

l2p_status l2p_counters_base_metrics(int device, void (*each)(const char *, void *), void *ctx)
{
    const char *chip = NULL;
    CUpti_Profiler_Host_Object *host = NULL;
    L2P_TRY(l2p_counters_load());
    L2P_TRY(l2p_device_check(device));
    L2P_TRY(global_init());
    L2P_TRY(chip_name(device, &chip));
    L2P_TRY(host_init(chip, NULL, &host));
    l2p_status st = L2P_OK;
    for (int type = 0; st == L2P_OK && type < (int)CUPTI_METRIC_TYPE__COUNT; type++) {
        CUpti_Profiler_Host_GetBaseMetrics_Params p = {
            CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE};
        p.pHostObject = host;
        p.metricType = (CUpti_MetricType)type;
        CUptiResult r = api.cuptiProfilerHostGetBaseMetrics(&p);
        if (r != CUPTI_SUCCESS) st = fail_cupti(r, "cuptiProfilerHostGetBaseMetrics");
        for (size_t i = 0; st == L2P_OK && i < p.numMetrics; i++) each(p.ppMetricNames[i], ctx);
    }
    host_deinit(host);
    return st;
}
