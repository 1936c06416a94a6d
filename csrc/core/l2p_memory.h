/* Device memory: allocation, copies and the facts of foreign pointers. */
#ifndef L2P_MEMORY_H
#define L2P_MEMORY_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaMalloc on `device`; n == 0 gives a NULL pointer and succeeds. */
l2p_status l2p_memory_alloc(int device, size_t nbytes, void **out);
/* cudaFree on `device`; NULL is a no-op. */
l2p_status l2p_memory_free(int device, void *ptr);
/* Blocking copies (the host side may be pageable). */
l2p_status l2p_memory_to_device(int device, void *dst, const void *src, size_t nbytes);
l2p_status l2p_memory_to_host(int device, void *dst, const void *src, size_t nbytes);
l2p_status l2p_memory_device_to_device(int device, void *dst, const void *src, size_t nbytes,
                                       cudaStream_t stream);
l2p_status l2p_memory_set(int device, void *dst, int byte, size_t nbytes, cudaStream_t stream);
/* A texture object over nbytes of linear memory read as 32-bit unsigned words (element
 * type kept: reading returns the stored bits, for int32 and float32 alike). */
l2p_status l2p_texture_create(int device, const void *ptr, size_t nbytes,
                              unsigned long long *tex);
void l2p_texture_destroy(int device, unsigned long long tex);
/* Largest element count of a 1-D linear texture on the device. */
l2p_status l2p_texture_max_width(int device, size_t *out);
/* Which device a pointer lives on; L2P_ERR_VALUE for host memory or a foreign address. */
l2p_status l2p_memory_pointer_device(const void *ptr, int *device);

#ifdef __cplusplus
}
#endif
#endif
