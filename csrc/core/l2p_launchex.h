/* Foreign launches: another library's kernel (a CUfunction or CUkernel) launched through
 * cuLaunchKernelEx with an access policy window on that one launch.
 *
 * Arguments are marshalled by the kernel's own parameter sizes (cuFuncGetParamInfo): a buffer
 * becomes its device address, an integer or a float is written at the parameter's width. The
 * driver entry points come through l2p_driver_symbol (no link to libcuda).
 */
#ifndef L2P_LAUNCHEX_H
#define L2P_LAUNCHEX_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "l2p_error.h"
#include "l2p_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { L2P_ARG_POINTER = 0, L2P_ARG_INT, L2P_ARG_UINT, L2P_ARG_FLOAT } l2p_arg_kind;

typedef struct {
    l2p_arg_kind kind;
    union {
        uint64_t u;  /* POINTER, UINT */
        int64_t i;   /* INT */
        double f;    /* FLOAT */
    } v;
} l2p_arg;

/* Write argument `index` into `size` bytes at `out` (pure; C-tested). A pointer needs 8 bytes;
 * an integer 1, 2, 4 or 8 and must fit (signed or unsigned range of that width); a float 4
 * (float) or 8 (double). Errors are L2P_ERR_VALUE / L2P_ERR_TYPE naming args[index]. */
l2p_status l2p_marshal_arg(size_t index, const l2p_arg *a, size_t size, unsigned char *out);

/* Launch `func` (a CUfunction; with is_kernel, a CUkernel resolved in the device's context).
 * w NULL or num_bytes 0: no window. */
l2p_status l2p_launch_ex(int device, void *func, int is_kernel, const unsigned grid[3],
                         const unsigned block[3], unsigned shared_mem, cudaStream_t stream,
                         const l2p_window *w, const l2p_arg *args, size_t nargs);

#ifdef __cplusplus
}
#endif
#endif
