#include "l2p_device.h"
#include "l2p_life.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "l2p_mps.h"
#include "l2p_policy.h"

/* Per-device facts learnt once: the limit at first touch and the rounding granule. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t default_limit[L2P_MAX_DEVICES];
static size_t granule[L2P_MAX_DEVICES];
static unsigned char touched[L2P_MAX_DEVICES];
static l2p_aside_info aside[L2P_MAX_DEVICES];
static unsigned char aside_known[L2P_MAX_DEVICES];

void l2p_device_count(int *count, cudaError_t *reason)
{
    /* The count cannot change once the runtime has found devices (CUDA_VISIBLE_DEVICES is
     * read once), so a positive count is kept: every launch checks its device index, and
     * cudaGetDeviceCount would be a fifth of an empty launch's host cost. */
    static volatile int known;
    int n = known;
    cudaError_t rc;
    if (n > 0) {
        *count = n;
        *reason = cudaSuccess;
        return;
    }
    rc = cudaGetDeviceCount(&n);
    if (rc == cudaSuccess && n > 0) known = n;
    if (rc != cudaSuccess) {
        (void)cudaGetLastError(); /* the failure must not stick to later calls */
        n = 0;
    } else if (n == 0) {
        rc = cudaErrorNoDevice;
    }
    *count = n;
    *reason = rc;
}

/* Whether the driver library exists (the runtime dlopens it; RTLD_LAZY loads nothing new
 * when it is already mapped). */
static int libcuda_loadable(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return 0;
    dlclose(h);
    return 1;
}

void l2p_no_device_reason(cudaError_t why, char *buf, size_t size)
{
    int driver = 0;
    if (why == cudaErrorInsufficientDriver && !libcuda_loadable()) {
        snprintf(buf, size, "no NVIDIA driver is installed (libcuda.so.1 cannot be loaded)");
        return;
    }
    if (why == cudaErrorInsufficientDriver) {
        (void)cudaDriverGetVersion(&driver);
        (void)cudaGetLastError();
        snprintf(buf, size, "the NVIDIA driver is too old: it supports CUDA %d.%d, and "
                 "l2persist was built with the CUDA %d.%d runtime; install a driver that "
                 "supports CUDA %d.%d or newer", driver / 1000, (driver % 1000) / 10,
                 CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10, CUDART_VERSION / 1000,
                 (CUDART_VERSION % 1000) / 10);
        return;
    }
    snprintf(buf, size, "%s", cudaGetErrorString(why));
}

l2p_status l2p_device_check(int index)
{
    int n;
    cudaError_t why;
    l2p_device_count(&n, &why);
    if (n == 0) {
        char reason[256];
        l2p_no_device_reason(why, reason, sizeof reason);
        return l2p_fail_cuda_msg(L2P_ERR_NO_DEVICE, why, "cudaGetDeviceCount",
                                 "no CUDA device was found: %s", reason);
    }
    if (index < 0 || index >= n || index >= L2P_MAX_DEVICES)
        return l2p_fail(L2P_ERR_VALUE, "index: device %d does not exist; this machine has %d "
                        "CUDA device%s (valid indices 0..%d)", index, n, n == 1 ? "" : "s", n - 1);
    return L2P_OK;
}

static l2p_status get_limit_current(size_t *out)
{
    L2P_CUDA_TRY(cudaDeviceGetLimit(out, cudaLimitPersistingL2CacheSize));
    return L2P_OK;
}

/* A percentage variable beyond the persisting maximum makes the driver refuse to create the
 * context (measured: 70 % of an H200's 60 MiB L2 with a 37.5 MiB maximum); say so, since the
 * runtime only says "busy or unavailable". */
static l2p_status explain_unavailable(l2p_status st)
{
    const l2p_error *e = l2p_last_error();
    const char *pct = getenv(L2P_MPS_PCT_VAR);
    char call[sizeof e->call];
    if (st == L2P_OK || e->cuda_code != cudaErrorDevicesUnavailable || !pct) return st;
    memcpy(call, e->call, sizeof call); /* the error is rewritten in place */
    return l2p_fail_cuda_msg(st, cudaErrorDevicesUnavailable, call,
                             "%s; %s=%s is set in this process, and a percentage of the L2 above "
                             "the device's persisting maximum makes the driver refuse to create "
                             "a context: lower it or unset it",
                             cudaGetErrorString(cudaErrorDevicesUnavailable), L2P_MPS_PCT_VAR, pct);
}

static l2p_status record_first_touch(int index)
{
    size_t limit;
    if (touched[index]) return L2P_OK;
    pthread_mutex_lock(&cache_lock);
    l2p_status st = L2P_OK;
    if (!touched[index]) {
        st = get_limit_current(&limit);
        if (st == L2P_OK) {
            default_limit[index] = limit;
            touched[index] = 1;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return explain_unavailable(st);
}

l2p_status l2p_device_enter(int index, int *previous)
{
    L2P_TRY(l2p_device_check(index));
    L2P_CUDA_TRY(cudaGetDevice(previous));
    if (*previous != index) L2P_CUDA_TRY(cudaSetDevice(index));
    l2p_status st = record_first_touch(index);
    if (st != L2P_OK) l2p_device_leave(*previous);
    return st;
}

void l2p_device_leave(int previous)
{
    int now;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous) (void)cudaSetDevice(previous);
}

static l2p_status attr(int index, enum cudaDeviceAttr what, int *out)
{
    L2P_CUDA_TRY(cudaDeviceGetAttribute(out, what, index));
    return L2P_OK;
}

static l2p_status read_attributes(int index, l2p_device_props *p)
{
    int v;
    L2P_TRY(attr(index, cudaDevAttrComputeCapabilityMajor, &p->cc_major));
    L2P_TRY(attr(index, cudaDevAttrComputeCapabilityMinor, &p->cc_minor));
    L2P_TRY(attr(index, cudaDevAttrMultiProcessorCount, &p->multiprocessor_count));
    L2P_TRY(attr(index, cudaDevAttrL2CacheSize, &v));
    p->l2_cache_size = (size_t)v;
    L2P_TRY(attr(index, cudaDevAttrMaxPersistingL2CacheSize, &v));
    p->persisting_l2_cache_max_size = (size_t)v;
    L2P_TRY(attr(index, cudaDevAttrMaxAccessPolicyWindowSize, &v));
    p->access_policy_max_window_size = (size_t)v;
    L2P_TRY(attr(index, cudaDevAttrGlobalMemoryBusWidth, &p->memory_bus_width));
    L2P_TRY(attr(index, cudaDevAttrMemoryClockRate, &p->memory_clock_khz));
    L2P_TRY(attr(index, cudaDevAttrGlobalL1CacheSupported, &p->global_l1_cache_supported));
    return L2P_OK;
}

l2p_status l2p_device_get_properties(int index, l2p_device_props *out)
{
    struct cudaDeviceProp prop;
    L2P_TRY(l2p_device_check(index));
    memset(out, 0, sizeof *out);
    out->index = index;
    L2P_CUDA_TRY(cudaGetDeviceProperties(&prop, index));
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%04x:%02x:%02x.0", prop.pciDomainID,
             prop.pciBusID, prop.pciDeviceID);
    out->total_memory = prop.totalGlobalMem;
    L2P_TRY(read_attributes(index, out));
    out->peak_memory_bandwidth =
        2.0 * (double)out->memory_clock_khz * 1e3 * (double)out->memory_bus_width / 8.0;
    return L2P_OK;
}

/* One attribute each: cudaGetDeviceProperties reads every property, about 0.7 ms a call on the
 * H200 (CUDA 13.0, driver 580), and advise made an AccessPolicyWindow per arm window at every
 * switch (2.8 ms of decode_big's 4.2 ms readying, cProfile, H200, e1d617d). */
l2p_status l2p_device_max_window(int index, size_t *out)
{
    int v;
    L2P_TRY(l2p_device_check(index));
    L2P_TRY(attr(index, cudaDevAttrMaxAccessPolicyWindowSize, &v));
    *out = (size_t)v;
    return L2P_OK;
}

l2p_status l2p_device_cc(int index, int *major, int *minor)
{
    L2P_TRY(l2p_device_check(index));
    L2P_TRY(attr(index, cudaDevAttrComputeCapabilityMajor, major));
    L2P_TRY(attr(index, cudaDevAttrComputeCapabilityMinor, minor));
    return L2P_OK;
}

l2p_status l2p_device_sm_count(int index, int *out)
{
    static int cached[L2P_MAX_DEVICES];
    if (index >= 0 && index < L2P_MAX_DEVICES && cached[index]) {
        *out = cached[index];
        return L2P_OK;
    }
    L2P_TRY(l2p_device_check(index));
    L2P_TRY(attr(index, cudaDevAttrMultiProcessorCount, out));
    cached[index] = *out;
    return L2P_OK;
}

/* The one way to work on a device here: l2p_device_enter(index, &prev), the work (as the
 * argument, so it runs while the device is current), then leaving it through left(), which
 * restores the previous device and passes the work's status on:
 *     int prev;
 *     L2P_TRY(l2p_device_enter(index, &prev));
 *     return left(prev, work(...)); */
static l2p_status left(int previous, l2p_status st)
{
    l2p_device_leave(previous);
    return st;
}


l2p_status l2p_device_get_persisting_limit(int index, size_t *out)
{
    l2p_aside_info a;
    L2P_TRY(l2p_device_aside_info(index, &a));
    *out = a.set_aside;
    return L2P_OK;
}

/* The driver refuses the set-aside on MIG instances and under MPS clients; say what to do. */
static l2p_status fail_set_limit(cudaError_t rc)
{
    if (rc == cudaErrorNotSupported || rc == cudaErrorUnsupportedLimit ||
        rc == cudaErrorNotPermitted)
        return l2p_fail_cuda_msg(
            L2P_ERR_NOT_SUPPORTED, rc, "cudaDeviceSetLimit",
            "the driver refused the persisting-L2 set-aside. It is not available on MIG "
            "instances; under MPS the size comes only from "
            "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT, set when the MPS server "
            "starts");
    return l2p_fail_cuda(rc, "cudaDeviceSetLimit");
}

static l2p_status set_limit_current(size_t bytes, size_t *granted)
{
    cudaError_t rc = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, bytes);
    if (rc != cudaSuccess) return fail_set_limit(rc);
    return granted ? get_limit_current(granted) : L2P_OK;
}

static l2p_status check_and_set(int index, long long requested, size_t *granted)
{
    l2p_device_props p;
    L2P_TRY(l2p_device_get_properties(index, &p));
    L2P_TRY(l2p_policy_check_limit(requested, p.persisting_l2_cache_max_size));
    return set_limit_current((size_t)requested, granted);
}

static l2p_status refuse_under_mps(const l2p_aside_info *a, long long requested)
{
    char pct[96] = "a percentage l2persist could not read";
    if (a->server_percent >= 0)
        snprintf(pct, sizeof pct, "%s=%g", L2P_MPS_PCT_VAR, a->server_percent);
    else if (a->source == L2P_ASIDE_MPS_SERVER)
        snprintf(pct, sizeof pct, "no %s, so the driver's default", L2P_MPS_PCT_VAR);
    return l2p_fail(L2P_ERR_NOT_SUPPORTED,
                    "requested: %lld bytes; this process is an MPS client, and under MPS the "
                    "persisting-L2 set-aside is the MPS server's (%s when it started: %.4g MiB%s). "
                    "The driver accepts cudaDeviceSetLimit from a client and the hardware ignores "
                    "it. Access policy windows still work inside the server's set-aside; to change "
                    "its size, restart the MPS server with %s set",
                    requested, pct, (double)a->set_aside / 1048576.0,
                    a->source == L2P_ASIDE_MPS_UNKNOWN ? " by this client's reading, which may "
                    "not be the server's" : "", L2P_MPS_PCT_VAR);
}

l2p_status l2p_device_set_persisting_limit(int index, long long requested, size_t *granted)
{
    l2p_aside_info a;
    L2P_TRY(l2p_device_aside_info(index, &a));
    if (a.mps == 1) {
        if (requested != (long long)a.set_aside) return refuse_under_mps(&a, requested);
        if (granted) *granted = a.set_aside; /* asking for what the server gives: a no-op */
        return L2P_OK;
    }
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, check_and_set(index, requested, granted));
}

static l2p_status probe_granule(int index, size_t *out)
{
    size_t before, step;
    if (granule[index]) {
        *out = granule[index];
        return L2P_OK;
    }
    L2P_TRY(get_limit_current(&before));
    l2p_status st = set_limit_current(1, &step);
    /* Always put the set-aside back, even when the probe failed half-way. */
    l2p_status restore = set_limit_current(before, NULL);
    L2P_TRY(st);
    L2P_TRY(restore);
    granule[index] = step;
    *out = step;
    return L2P_OK;
}

l2p_status l2p_device_persisting_granule(int index, size_t *out)
{
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, probe_granule(index, out));
}

static l2p_status read_default(int index, size_t *out)
{
    *out = default_limit[index];
    return L2P_OK;
}

l2p_status l2p_device_default_persisting_limit(int index, size_t *out)
{
    l2p_aside_info a;
    L2P_TRY(l2p_device_aside_info(index, &a));
    if (a.mps == 1) {
        *out = a.set_aside; /* the client's own first reading is not what it gets */
        return L2P_OK;
    }
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, read_default(index, out));
}

static l2p_status reset_current(void)
{
    L2P_CUDA_TRY(cudaCtxResetPersistingL2Cache());
    return L2P_OK;
}

l2p_status l2p_device_reset_persisting(int index)
{
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, reset_current());
}

static l2p_status release_current(void)
{
    L2P_TRY(reset_current());
    return set_limit_current(0, NULL);
}

l2p_status l2p_device_release_persisting(int index)
{
    l2p_aside_info a;
    L2P_TRY(l2p_device_aside_info(index, &a));
    if (a.mps == 1 && a.set_aside != 0) {
        L2P_TRY(l2p_device_reset_persisting(index));
        return refuse_under_mps(&a, 0);
    }
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, release_current());
}

static l2p_status probe_support(int index, int *out)
{
    l2p_device_props p;
    size_t current;
    cudaError_t rc;
    *out = 0;
    L2P_TRY(l2p_device_get_properties(index, &p));
    if (p.cc_major < 8 || p.persisting_l2_cache_max_size == 0) return L2P_OK;
    L2P_TRY(get_limit_current(&current));
    /* Setting the limit to its own value changes nothing but tells whether it is allowed. */
    rc = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, current);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        return L2P_OK;
    }
    *out = 1;
    return L2P_OK;
}

l2p_status l2p_driver_symbol(const char *name, void **fn)
{
    return l2p_driver_symbol_at(name, 12000, fn);
}

l2p_status l2p_driver_symbol_at(const char *name, int cuda_version, void **fn)
{
    enum cudaDriverEntryPointQueryResult q;
    *fn = NULL;
    L2P_CUDA_TRY(cudaGetDriverEntryPointByVersion(name, fn, (unsigned)cuda_version,
                                                  cudaEnableDefault, &q));
    if (!*fn || q != cudaDriverEntryPointSuccess)
        return l2p_fail(L2P_ERR_NOT_SUPPORTED, "the driver does not export %s", name);
    return L2P_OK;
}

/* ---- contexts by handle (the replay timer's pool; the reset rule's context ids) ---- */

typedef struct {
    int (*get_current)(void **);
    int (*get_id)(void *, unsigned long long *);
    int (*get_device)(int *);
    int (*state)(int, unsigned *, int *);
    int (*retain)(void **, int);
    int (*release)(int);
} context_calls;

static context_calls ctx_fns;
static int ctx_fns_ok;
static pthread_once_t ctx_fns_once = PTHREAD_ONCE_INIT;

static void resolve_context_calls(void)
{
    void *f[6];
    const char *names[6] = {"cuCtxGetCurrent", "cuCtxGetId", "cuCtxGetDevice",
                            "cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxRetain",
                            "cuDevicePrimaryCtxRelease"};
    for (int i = 0; i < 6; i++)
        if (l2p_driver_symbol(names[i], &f[i]) != L2P_OK) {
            l2p_clear_error();
            return;
        }
    ctx_fns.get_current = (int (*)(void **))f[0];
    ctx_fns.get_id = (int (*)(void *, unsigned long long *))f[1];
    ctx_fns.get_device = (int (*)(int *))f[2];
    ctx_fns.state = (int (*)(int, unsigned *, int *))f[3];
    ctx_fns.retain = (int (*)(void **, int))f[4];
    ctx_fns.release = (int (*)(int))f[5];
    ctx_fns_ok = 1;
}

static const context_calls *context_fns(void)
{
    pthread_once(&ctx_fns_once, resolve_context_calls);
    return ctx_fns_ok ? &ctx_fns : NULL;
}

void *l2p_context_current_handle(void)
{
    const context_calls *c = context_fns();
    void *ctx = NULL;
    if (!c || c->get_current(&ctx) != 0) return NULL;
    return ctx;
}

unsigned long long l2p_context_id_of(void *ctx)
{
    const context_calls *c = context_fns();
    unsigned long long id = 0;
    if (!c || !ctx || c->get_id(ctx, &id) != 0) return 0;
    return id;
}

int l2p_context_is_primary(void *ctx, int *device)
{
    const context_calls *c = context_fns();
    void *primary = NULL;
    unsigned flags = 0;
    int dev = -1, active = 0;
    *device = -1;
    if (!c || !ctx || ctx != l2p_context_current_handle() || c->get_device(&dev) != 0) return 0;
    *device = dev;
    /* never made here: a retain of an inactive primary context would make one */
    if (c->state(dev, &flags, &active) != 0 || !active) return 0;
    if (c->retain(&primary, dev) != 0) return 0;
    (void)c->release(dev);
    return primary == ctx;
}

unsigned long long l2p_context_id_current(void)
{
    if (!context_fns()) return 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        unsigned long long id = l2p_context_id_of(l2p_context_current_handle());
        if (id) return id;
        /* No context yet on this thread, or (measured: CUDA_ERROR_CONTEXT_IS_DESTROYED, same
         * handle) the primary context was reset under us: let the runtime make it again, which
         * gives it a new id. */
        if (attempt == 0) {
            (void)cudaFree(0);
            (void)cudaGetLastError();
        }
    }
    return 0;
}

static l2p_status context_id_current(unsigned long long *id)
{
    *id = l2p_context_id_current();
    return L2P_OK;
}

l2p_status l2p_device_context_id(int index, unsigned long long *id)
{
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, context_id_current(id));
}

int l2p_device_context_gone(int index, unsigned long long ctx)
{
    l2p_life l = {index, ctx};
    return l2p_life_gone(&l);
}

/* CU_DEVICE_ATTRIBUTE_MPS_ENABLED (133) exists only in the driver API; the runtime's enum has
 * no counterpart, so it is read through the driver's entry points (no link to libcuda). */
#define L2P_CU_ATTR_MPS_ENABLED 133

static l2p_status probe_mps(int index, int *out)
{
    void *get = NULL, *attr_fn = NULL;
    int dev = -1, v = 0;
    *out = -1;
    L2P_TRY(l2p_driver_symbol("cuDeviceGet", &get));
    L2P_TRY(l2p_driver_symbol("cuDeviceGetAttribute", &attr_fn));
    if (((int (*)(int *, int))get)(&dev, index) != 0) return L2P_OK;
    /* An older driver that does not know the attribute answers CUDA_ERROR_INVALID_VALUE:
     * that is "unknown", not an error. */
    if (((int (*)(int *, int, int))attr_fn)(&v, L2P_CU_ATTR_MPS_ENABLED, dev) != 0) return L2P_OK;
    *out = v != 0;
    return L2P_OK;
}

void l2p_driver_initialised(int *out)
{
    *out = 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY | RTLD_LOCAL);
    if (!h) return;
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    int n = 0;
    *out = count && count(&n) == 0;
    dlclose(h); /* drops only the reference NOLOAD took */
}

l2p_status l2p_device_context_active(int index, int *out)
{
    void *get = NULL, *state = NULL;
    int dev = -1, active = 0;
    unsigned flags = 0;
    *out = 0;
    L2P_TRY(l2p_driver_symbol("cuDeviceGet", &get));
    L2P_TRY(l2p_driver_symbol("cuDevicePrimaryCtxGetState", &state));
    int rc = ((int (*)(int *, int))get)(&dev, index);
    if (rc != 0) return l2p_fail(L2P_ERR_VALUE, "device: no CUDA device %d (driver error %d)",
                                 index, rc);
    rc = ((int (*)(int, unsigned *, int *))state)(dev, &flags, &active);
    if (rc != 0) return l2p_fail(L2P_ERR_STATE, "cuDevicePrimaryCtxGetState: driver error %d", rc);
    *out = active != 0;
    return L2P_OK;
}

l2p_status l2p_device_mps_enabled(int index, int *out)
{
    /* Entering the device initialises its context, which is when the client connects. */
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, probe_mps(index, out));
}

/* The MPS server's set-aside, from its percentage (or, when it has none, the driver's default,
 * which is this client's first reading unless this client has the variable itself). */
static l2p_status learn_mps_aside(int index, l2p_aside_info *a)
{
    l2p_mps_server srv;
    l2p_device_props p;
    size_t g;
    l2p_mps_find_server("/proc", NULL, &srv);
    a->server_pid = srv.pid;
    a->source = L2P_ASIDE_MPS_UNKNOWN;
    L2P_TRY(l2p_device_get_properties(index, &p));
    L2P_TRY(l2p_device_persisting_granule(index, &g));
    if (srv.readable && srv.percent >= 0) {
        size_t s = l2p_mps_set_aside(srv.percent, p.l2_cache_size, g);
        a->server_percent = srv.percent;
        a->set_aside = s < p.persisting_l2_cache_max_size ? s : p.persisting_l2_cache_max_size;
        a->source = L2P_ASIDE_MPS_SERVER;
    } else if (srv.readable && !getenv(L2P_MPS_PCT_VAR)) {
        a->set_aside = default_limit[index];
        a->source = L2P_ASIDE_MPS_SERVER;
    } else {
        a->set_aside = default_limit[index];
    }
    return L2P_OK;
}

static l2p_status learn_aside(int index, l2p_aside_info *a)
{
    memset(a, 0, sizeof *a);
    a->server_percent = -1.0;
    L2P_TRY(probe_mps(index, &a->mps));
    return a->mps == 1 ? learn_mps_aside(index, a) : L2P_OK;
}

l2p_status l2p_device_aside_info(int index, l2p_aside_info *out)
{
    if (index < 0 || index >= L2P_MAX_DEVICES || !aside_known[index]) {
        int prev;
        l2p_aside_info a;
        L2P_TRY(l2p_device_enter(index, &prev));
        l2p_status st = learn_aside(index, &a);
        l2p_device_leave(prev);
        L2P_TRY(st);
        pthread_mutex_lock(&cache_lock);
        aside[index] = a;
        aside_known[index] = 1;
        pthread_mutex_unlock(&cache_lock);
    }
    *out = aside[index];
    if (out->mps == 1) return L2P_OK;
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, get_limit_current(&out->set_aside));
}

l2p_status l2p_device_supports_persisting(int index, int *out)
{
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, probe_support(index, out));
}

static l2p_status synchronize_current(void)
{
    L2P_CUDA_TRY(cudaDeviceSynchronize());
    return L2P_OK;
}

l2p_status l2p_device_synchronize(int index)
{
    int prev;
    L2P_TRY(l2p_device_enter(index, &prev));
    return left(prev, synchronize_current());
}
