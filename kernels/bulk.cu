/* The L2-resident read through the bulk copy engine (bulk_read), in a file of its own: a
 * translation unit with cp.async.bulk and mbarriers makes ptxas give every kernel in it 1 KiB
 * of shared memory (cuobjdump -res-usage, CUDA 13.0, sm_90: SHARED:1024 on all 174 kernels
 * of streaming.cu while this kernel lived there, 0 after). A kernel that asks for shared
 * memory can need another L1/shared split than the kernel before it, so l2_read and the
 * streaming kernels stay at 0, as the kernels they are compared with (gpu-benches') are. */
#include "l2p_kernels.h"
#include "l2p_launch.cuh"

/* The L2-resident read through the bulk copy engine (cp.async.bulk, sm_90+): one thread
 * per block streams chunks into a ring of shared-memory stages, each stage completing on its
 * own mbarrier. No load/store unit or L1 is involved, so this measures what the L2 can feed
 * the SMs. The data land in shared memory and are never used. */
#define L2P_BULK_STAGES 4

__device__ __forceinline__ unsigned l2p_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* Spin until the mbarrier's phase with this parity has completed. */
__device__ __forceinline__ void l2p_mbarrier_wait(unsigned bar, unsigned parity)
{
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra W;\n}" ::"r"(bar), "r"(parity) : "memory");
}

__global__ void l2p_bulk_read_kernel(const char *src, size_t nbytes, int repeats, unsigned chunk)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char stage[];
    __shared__ __align__(8) unsigned long long bar[L2P_BULK_STAGES];
    if (threadIdx.x != 0) return;
    for (int s = 0; s < L2P_BULK_STAGES; s++)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(l2p_smem_addr(&bar[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    size_t chunks = nbytes / chunk, total = chunks * (size_t)repeats;
    unsigned phase = 0; /* bit s: parity to wait for on stage s */
    size_t k = 0;
    for (size_t i = blockIdx.x; i < total; i += gridDim.x, k++) {
        int s = (int)(k % L2P_BULK_STAGES);
        unsigned b = l2p_smem_addr(&bar[s]);
        if (k >= L2P_BULK_STAGES) { /* the stage's previous copy must have landed */
            l2p_mbarrier_wait(b, (phase >> s) & 1u);
            phase ^= 1u << s;
        }
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(chunk)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                     "[%0], [%1], %2, [%3];"
                     ::"r"(l2p_smem_addr(stage + (size_t)s * chunk)),
                     "l"(src + (i % chunks) * chunk), "r"(chunk), "r"(b) : "memory");
    }
    for (size_t j = 0; j < L2P_BULK_STAGES && j < k; j++) { /* drain what is in flight */
        int s = (int)((k - 1 - j) % L2P_BULK_STAGES);
        l2p_mbarrier_wait(l2p_smem_addr(&bar[s]), (phase >> s) & 1u);
    }
#endif
}

extern "C" cudaError_t l2p_launch_bulk_read(const void *src, size_t nbytes, int repeats,
                                            unsigned chunk, unsigned blocks,
                                            cudaStream_t stream, const l2p_window *window)
{
    size_t smem = (size_t)L2P_BULK_STAGES * chunk;
    if (chunk == 0 || chunk % 16 || nbytes < chunk) return cudaErrorInvalidValue;
    cudaError_t rc = cudaFuncSetAttribute(l2p_bulk_read_kernel,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (rc != cudaSuccess) return rc;
    return l2p_launch(l2p_bulk_read_kernel, dim3(blocks), dim3(32), smem, stream, window,
                      (const char *)src, nbytes, repeats, chunk);
}
