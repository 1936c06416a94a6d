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

/* Make `index` current for the calling thread, saving the previous one; l2p_device_leave
 * restores it. The first enter of a device records its persisting limit as the default. */
l2p_status l2p_device_enter(int index, int *previous);
void l2p_device_leave(int previous);

l2p_status l2p_device_get_properties(int index, l2p_device_props *out);
/* The SM count alone (cheap: one attribute, cached); kernels size their grids from it. */
l2p_status l2p_device_sm_count(int index, int *out);

/* The persisting-L2 set-aside (cudaLimitPersistingL2CacheSize). */
l2p_status l2p_device_get_persisting_limit(int index, size_t *out);
/* Validates against persisting_l2_cache_max_size, sets, and reads back what the driver
 * granted (it rounds up to a granule). */
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
/* cc >= 8.0, a nonzero persisting maximum, and the driver accepts a limit. */
l2p_status l2p_device_supports_persisting(int index, int *out);

#ifdef __cplusplus
}
#endif
#endif
