/* The DLPack ABI (v0.8, unversioned DLManagedTensor): just the structs l2persist exchanges. */
#ifndef L2P_DLPACK_H
#define L2P_DLPACK_H

#include <stdint.h>

enum { L2P_DL_CPU = 1, L2P_DL_CUDA = 2, L2P_DL_CUDA_HOST = 3, L2P_DL_CUDA_MANAGED = 13 };
enum { L2P_DL_INT = 0, L2P_DL_UINT = 1, L2P_DL_FLOAT = 2, L2P_DL_BFLOAT = 4,
       L2P_DL_COMPLEX = 5, L2P_DL_BOOL = 6 };

typedef struct {
    int32_t device_type;
    int32_t device_id;
} l2p_DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} l2p_DLDataType;

typedef struct {
    void *data;
    l2p_DLDevice device;
    int32_t ndim;
    l2p_DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} l2p_DLTensor;

typedef struct l2p_DLManagedTensor {
    l2p_DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct l2p_DLManagedTensor *self);
} l2p_DLManagedTensor;

#endif
