/* Errors of the C core: a status code plus a thread-local record of what failed.
 *
 * Every core function returns l2p_status. On failure it fills the calling thread's record
 * (which call, the CUDA or CUPTI code, a message naming the argument and its allowed range)
 * so that the Python layer can raise one precise exception without the core knowing Python.
 */
#ifndef L2P_ERROR_H
#define L2P_ERROR_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    L2P_OK = 0,
    L2P_ERR_CUDA,          /* a CUDA runtime call failed; cuda_code holds its cudaError_t */
    L2P_ERR_VALUE,         /* a bad argument value (ValueError) */
    L2P_ERR_TYPE,          /* a bad argument type (TypeError) */
    L2P_ERR_NOT_SUPPORTED, /* the device, driver or mode lacks the feature */
    L2P_ERR_NO_DEVICE,     /* no usable CUDA device; cuda_code holds the runtime's reason */
    L2P_ERR_NO_MEMORY,     /* device or host memory exhausted */
    L2P_ERR_STATE,         /* an object used after close(), or in the wrong state */
    L2P_ERR_CUPTI,         /* a CUPTI call failed; cupti_code holds its CUptiResult */
    L2P_ERR_CALLBACK       /* a caller's callback failed; its own error (a Python exception,
                            * say) tells why */
} l2p_status;

typedef struct {
    l2p_status status;
    int cuda_code;       /* cudaError_t when status is L2P_ERR_CUDA, NO_DEVICE, NO_MEMORY... */
    int cupti_code;      /* CUptiResult when status is L2P_ERR_CUPTI */
    char call[96];       /* the CUDA/CUPTI call that failed, or the argument's name */
    char message[768];   /* the whole human-readable message */
} l2p_error;

/* The calling thread's last error (valid until its next failing core call). */
const l2p_error *l2p_last_error(void);
void l2p_clear_error(void);

/* Record a failed CUDA call; maps out-of-memory and no-device codes to their own statuses.
 * Returns the status recorded. Message: "<call> failed: <cudaErrorName>: <description>". */
l2p_status l2p_fail_cuda(cudaError_t code, const char *call);

/* Record a failure with a printf-style message. */
l2p_status l2p_fail(l2p_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Same, for a CUDA failure whose message needs more context than the call's name. */
l2p_status l2p_fail_cuda_msg(l2p_status status, cudaError_t code, const char *call,
                             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Room for `need` items of `size` bytes in the host array *arr (capacity *cap items): it grows
 * by doubling from `first` items. 1 when there is room; 0 when host memory runs out or the size
 * would overflow (the array as it was). Records no error: the launch log calls it inside
 * CUPTI's callbacks; callers that report one use l2p_fail. */
int l2p_grow(void **arr, size_t *cap, size_t need, size_t size, size_t first);

/* Evaluate a CUDA call; on failure record it (with the call's text) and return the status. */
#define L2P_CUDA_TRY(expr)                                          \
    do {                                                            \
        cudaError_t l2p_rc_ = (expr);                               \
        if (l2p_rc_ != cudaSuccess) return l2p_fail_cuda(l2p_rc_, #expr); \
    } while (0)

/* Propagate a failing core status. */
#define L2P_TRY(expr)                                               \
    do {                                                            \
        l2p_status l2p_st_ = (expr);                                \
        if (l2p_st_ != L2P_OK) return l2p_st_;                      \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
