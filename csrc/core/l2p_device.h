/* Devices: counting them, their L2 properties, and the persisting-L2 set-aside.
 *
 * Every call names its device by index and leaves the calling thread's current device as it
 * found it, so that using l2persist never changes which GPU the rest of the process talks to.
 */
#ifndef L2P_DEVICE_H
#define L2P_DEVICE_H

#include <stddef.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define L2P_MAX_DEVICES 64

typedef struct {
    int index;
    char name[256];
    char pci_bus_id[32];
    int cc_major, cc_minor;
    int multiprocessor_count;
    size_t l2_cache_size;
    size_t persisting_l2_cache_max_size;
    size_t access_policy_max_window_size;
    size_t total_memory;
    int memory_bus_width;        /* bits */
    int memory_clock_khz;        /* peak memory clock */
    double peak_memory_bandwidth; /* bytes/s: 2 (double data rate) * clock * bus width / 8 */
    int global_l1_cache_supported;
} l2p_device_props;

/* Number of devices; never fails. With none, *count is 0 and *reason the runtime's code
 * (cudaErrorNoDevice, cudaErrorInsufficientDriver, ...); with some, *reason is cudaSuccess. */
void l2p_device_count(int *count, cudaError_t *reason);

/* Check an index: L2P_ERR_NO_DEVICE when there are no devices, L2P_ERR_VALUE naming the
 * count when it is out of range. */
l2p_status l2p_device_check(int index);

/* Why no device can be used, in words, for a count that failed with `why` (the one wording of
 * the no-driver case everywhere: NoDeviceError, no_device_reason(), the report, test skips).
 * cudaErrorInsufficientDriver means "no driver" when libcuda cannot be loaded at all, and "the
 * driver is too old" (with the CUDA version it supports and the one needed) when it can. */
void l2p_no_device_reason(cudaError_t why, char *buf, size_t size);

/* Make `index` current for the calling thread, saving the previous one; l2p_device_leave
 * restores it. The first enter of a device records its persisting limit as the default. */
l2p_status l2p_device_enter(int index, int *previous);
void l2p_device_leave(int previous);

l2p_status l2p_device_get_properties(int index, l2p_device_props *out);
/* The SM count alone (cheap: one attribute, cached); kernels size their grids from it. */
l2p_status l2p_device_sm_count(int index, int *out);
/* access_policy_max_window_size and the compute capability alone, for calls made often (a
 * window per switch, a kernel's launch check): l2p_device_get_properties costs ~0.7 ms. */
l2p_status l2p_device_max_window(int index, size_t *out);
l2p_status l2p_device_cc(int index, int *major, int *minor);

/* The persisting-L2 set-aside (cudaLimitPersistingL2CacheSize); under MPS the server's (see
 * l2p_device_aside_info). */
l2p_status l2p_device_get_persisting_limit(int index, size_t *out);
/* Validates against persisting_l2_cache_max_size, sets, and reads back what the driver
 * granted (it rounds up to a granule). Under MPS only the server's own value is accepted (a
 * no-op): anything else is L2P_ERR_NOT_SUPPORTED, since the driver would accept it and the
 * hardware ignore it. */
l2p_status l2p_device_set_persisting_limit(int index, long long requested, size_t *granted);
/* The driver's rounding step, probed once per device by asking for 1 byte; state restored. */
l2p_status l2p_device_persisting_granule(int index, size_t *out);
/* The limit found when this process first entered the device through l2persist. */
l2p_status l2p_device_default_persisting_limit(int index, size_t *out);
/* cudaCtxResetPersistingL2Cache on the device: persisting lines become normal. */
l2p_status l2p_device_reset_persisting(int index);
/* Limit 0 and reset: the reset alone keeps the set-aside reserved. */
l2p_status l2p_device_release_persisting(int index);
/* cudaDeviceSynchronize on the device (the caller releases the GIL around it). */
l2p_status l2p_device_synchronize(int index);
/* Where the set-aside this process's work gets comes from. */
enum {
    L2P_ASIDE_PROCESS = 0,   /* this process: cudaDeviceSetLimit works */
    L2P_ASIDE_MPS_SERVER,    /* the MPS server's, and l2persist knows its size */
    L2P_ASIDE_MPS_UNKNOWN    /* the MPS server's, of a size l2persist could not learn */
};

typedef struct {
    int mps;               /* 1, 0, or -1 when the driver cannot say */
    int source;            /* L2P_ASIDE_* */
    double server_percent; /* the server's percentage variable; < 0 when unset or unknown */
    long server_pid;       /* 0 when no server was found */
    size_t set_aside;      /* the set-aside the hardware applies (this client's first reading
                            * when the source is L2P_ASIDE_MPS_UNKNOWN) */
} l2p_aside_info;

/* Learnt once per device (an MPS server's setting cannot change while we are its client);
 * set_aside is read afresh outside MPS. See l2p_mps.h for what was measured. */
l2p_status l2p_device_aside_info(int index, l2p_aside_info *out);

/* Whether contexts on the device are shared through MPS (CU_DEVICE_ATTRIBUTE_MPS_ENABLED):
 * 1 or 0, or -1 when the driver cannot say. */
l2p_status l2p_device_mps_enabled(int index, int *out);
/* Whether device `index`'s primary context is active (*out 1) or not yet made (0), asked of the
 * driver (cuDevicePrimaryCtxGetState) without making one: the watcher's own timer starts
 * switching only once the program has made its context, never makes it for the program. */
l2p_status l2p_device_context_active(int index, int *out);
/* Whether the process has initialised CUDA's driver already (cuInit ran): *out 1 or 0, asked
 * without loading the driver (RTLD_NOLOAD) or initialising it (cuDeviceGetCount answers
 * CUDA_ERROR_NOT_INITIALIZED until cuInit). Loaded is not enough: CuPy and others load libcuda
 * at import, before a script sets CUDA_VISIBLE_DEVICES; the watcher's clock makes no CUDA call
 * of its own before the program's. */
void l2p_driver_initialised(int *out);
/* The unique id (cuCtxGetId) of the context current on this thread, making the device's
 * primary context current first when none is; 0 when the driver cannot say. A device reset
 * (cudaDeviceReset, by any library in the process) destroys the primary context and the next
 * one has another id: memory allocated before is gone, and its addresses may be handed out
 * again. */
unsigned long long l2p_context_id_current(void);
/* Contexts by handle, asked of the driver without making or switching any: the context
 * current on this thread (NULL when none or unknown); a context's unique id (0 when unknown
 * or destroyed: after a device reset the primary context's handle answers
 * CUDA_ERROR_CONTEXT_IS_DESTROYED, measured, and its next life has another id); and whether
 * `ctx`, current on this thread, is its device's primary context (*device: its device, or -1;
 * 0 where the primary context is not active: a green context, a cuCtxCreate one). */
void *l2p_context_current_handle(void);
unsigned long long l2p_context_id_of(void *ctx);
int l2p_context_is_primary(void *ctx, int *device);
/* The same for `index`'s primary context (entering the device). */
l2p_status l2p_device_context_id(int index, unsigned long long *id);
/* 1 when an object made in context `ctx` (nonzero) on `index` outlived a reset of the device:
 * its handles and addresses are gone and must be neither used nor freed. 0 when it is alive
 * or that cannot be told (no error is left behind). l2p_life_gone's rule (l2p_life.h). */
int l2p_device_context_gone(int index, unsigned long long ctx);
/* A driver API function by name, through the runtime (l2persist does not link libcuda). */
l2p_status l2p_driver_symbol(const char *name, void **fn);
/* The same for an entry point that first appeared in a later CUDA version (e.g. 12040 for
 * cuFuncGetParamInfo): asked for at 12.0 the driver does not find it. The ABI is that
 * version's, so the caller's prototype must be the one that version introduced. */
l2p_status l2p_driver_symbol_at(const char *name, int cuda_version, void **fn);
/* cc >= 8.0, a nonzero persisting maximum, and the driver accepts a limit. */
l2p_status l2p_device_supports_persisting(int index, int *out);

#ifdef __cplusplus
}
#endif
#endif
