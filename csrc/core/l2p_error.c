#include "l2p_error.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local l2p_error last_error;

const l2p_error *l2p_last_error(void) { return &last_error; }

void l2p_clear_error(void) { memset(&last_error, 0, sizeof last_error); }

/* Keep only the function's name ("cudaMalloc(&p, n)" -> "cudaMalloc") for the call field. */
static void set_call(const char *call)
{
    size_t n = strcspn(call, "(");
    if (n >= sizeof last_error.call) n = sizeof last_error.call - 1;
    memcpy(last_error.call, call, n);
    last_error.call[n] = '\0';
}

static l2p_status status_of_cuda(cudaError_t code)
{
    switch (code) {
    case cudaErrorMemoryAllocation:
        return L2P_ERR_NO_MEMORY;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorDevicesUnavailable:
        return L2P_ERR_NO_DEVICE;
    default:
        return L2P_ERR_CUDA;
    }
}

l2p_status l2p_fail_cuda(cudaError_t code, const char *call)
{
    last_error.status = status_of_cuda(code);
    last_error.cuda_code = (int)code;
    last_error.cupti_code = 0;
    set_call(call);
    snprintf(last_error.message, sizeof last_error.message, "%s failed: %s: %s", last_error.call,
             cudaGetErrorName(code), cudaGetErrorString(code));
    return last_error.status;
}

l2p_status l2p_fail(l2p_status status, const char *fmt, ...)
{
    va_list ap;
    last_error.status = status;
    last_error.cuda_code = 0;
    last_error.cupti_code = 0;
    last_error.call[0] = '\0';
    va_start(ap, fmt);
    vsnprintf(last_error.message, sizeof last_error.message, fmt, ap);
    va_end(ap);
    return status;
}

l2p_status l2p_fail_cuda_msg(l2p_status status, cudaError_t code, const char *call,
                             const char *fmt, ...)
{
    va_list ap;
    size_t used;
    last_error.status = status;
    last_error.cuda_code = (int)code;
    last_error.cupti_code = 0;
    set_call(call);
    used = (size_t)snprintf(last_error.message, sizeof last_error.message, "%s failed: %s: ",
                            last_error.call, cudaGetErrorName(code));
    if (used >= sizeof last_error.message) return status;
    va_start(ap, fmt);
    vsnprintf(last_error.message + used, sizeof last_error.message - used, fmt, ap);
    va_end(ap);
    return status;
}

int l2p_grow(void **arr, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : (first ? first : 1);
    while (c < need) {
        if (c > SIZE_MAX / 2) return 0;
        c *= 2;
    }
    if (size && c > SIZE_MAX / size) return 0;
    void *grown = realloc(*arr, c * size);
    if (!grown) return 0;
    *arr = grown;
    *cap = c;
    return 1;
}
