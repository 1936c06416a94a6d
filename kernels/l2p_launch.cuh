/* One way to launch every kernel: cudaLaunchKernelEx, with the access policy window as a
 * launch attribute when one is given, so that a per-launch window never touches the stream. */
#ifndef L2P_LAUNCH_CUH
#define L2P_LAUNCH_CUH

#include <cuda_runtime.h>

#include "l2p_window.h"

template <typename... KernelArgs, typename... Args>
static cudaError_t l2p_launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                              size_t shared_bytes, cudaStream_t stream, const l2p_window *window,
                              Args... args)
{
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = attr;
    config.numAttrs = l2p_window_launch_attribute(window, &attr[0]);
    cudaError_t rc = cudaLaunchKernelEx(&config, kernel, static_cast<KernelArgs>(args)...);
    /* A failed launch also sets the runtime's last error; clear it so that the next
     * launch's check reports its own failure, not this one. */
    if (rc != cudaSuccess) (void)cudaGetLastError();
    return rc;
}

/* A grid of whole blocks covering n items, capped so that the kernel's grid-stride loop
 * takes the rest (65535 * 8 blocks keep every SM busy on any current GPU). */
static inline unsigned l2p_blocks_for(size_t n, unsigned threads)
{
    size_t blocks = (n + threads - 1) / threads;
    const size_t cap = 65535u * 8u;
    if (blocks == 0) blocks = 1;
    return (unsigned)(blocks < cap ? blocks : cap);
}

#endif
