#include "l2p_launchex.h"

#include <cuda.h> /* driver types only */
#include <stdlib.h>
#include <string.h>

#include "l2p_device.h"
#include "l2p_window.h"

l2p_status l2p_marshal_arg(size_t index, const l2p_arg *a, size_t size, unsigned char *out)
{
    switch (a->kind) {
    case L2P_ARG_POINTER:
        if (size != 8)
            return l2p_fail(L2P_ERR_TYPE, "args[%zu]: a buffer (pointer) was given for a "
                            "%zu-byte parameter", index, size);
        memcpy(out, &a->v.u, 8);
        return L2P_OK;
    case L2P_ARG_FLOAT:
        if (size == 4) {
            float f = (float)a->v.f;
            memcpy(out, &f, 4);
        } else if (size == 8) {
            memcpy(out, &a->v.f, 8);
        } else {
            return l2p_fail(L2P_ERR_TYPE, "args[%zu]: a float was given for a %zu-byte parameter "
                            "(float takes 4, double 8)", index, size);
        }
        return L2P_OK;
    case L2P_ARG_INT:
    case L2P_ARG_UINT: {
        if (size != 1 && size != 2 && size != 4 && size != 8)
            return l2p_fail(L2P_ERR_TYPE, "args[%zu]: an integer was given for a %zu-byte "
                            "parameter (integers take 1, 2, 4 or 8)", index, size);
        int bits = (int)size * 8;
        /* fits as signed [-2^(b-1), 2^(b-1)) or as unsigned [0, 2^b) of the width */
        int fits;
        if (a->kind == L2P_ARG_INT)
            fits = bits == 64 || (a->v.i >= -(1LL << (bits - 1)) && a->v.i < (1LL << bits));
        else
            fits = bits == 64 || a->v.u < (1ULL << bits);
        if (!fits)
            return l2p_fail(L2P_ERR_VALUE, "args[%zu]: %s%llu does not fit the %zu-byte parameter",
                            index, a->kind == L2P_ARG_INT && a->v.i < 0 ? "-" : "",
                            a->kind == L2P_ARG_INT && a->v.i < 0
                                ? (unsigned long long)(-(a->v.i + 1)) + 1
                                : (unsigned long long)a->v.u,
                            size);
        uint64_t u = a->v.u; /* little-endian: the low bytes are the value at that width */
        memcpy(out, &u, size);
        return L2P_OK;
    }
    }
    return l2p_fail(L2P_ERR_TYPE, "args[%zu]: unknown argument kind %d", index, (int)a->kind);
}

typedef CUresult (*param_info_fn)(CUfunction, size_t, size_t *, size_t *);
typedef CUresult (*launch_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*kernel_function_fn)(CUfunction *, CUkernel);

static l2p_status check_dims(const char *name, const unsigned d[3])
{
    for (int i = 0; i < 3; i++)
        if (d[i] == 0)
            return l2p_fail(L2P_ERR_VALUE, "%s: every dimension must be >= 1, got (%u, %u, %u)",
                            name, d[0], d[1], d[2]);
    if (!strcmp(name, "block") && (unsigned long long)d[0] * d[1] * d[2] > 1024)
        return l2p_fail(L2P_ERR_VALUE, "block: at most 1024 threads per block, got %u x %u x %u",
                        d[0], d[1], d[2]);
    return L2P_OK;
}

/* The kernel's parameter layout: offsets and sizes, and the total argument bytes. */
static l2p_status layout(param_info_fn info, CUfunction f, size_t nargs, size_t *offs,
                         size_t *sizes, size_t *total)
{
    size_t n = 0, off, size;
    *total = 0;
    while (n < 4096 && info(f, n, &off, &size) == CUDA_SUCCESS) {
        if (n < nargs) {
            offs[n] = off;
            sizes[n] = size;
        }
        if (off + size > *total) *total = off + size;
        n++;
    }
    if (n != nargs)
        return l2p_fail(L2P_ERR_VALUE, "args: the kernel takes %zu parameters, got %zu", n, nargs);
    return L2P_OK;
}

static l2p_status launch(CUfunction f, param_info_fn info, launch_fn go, const unsigned grid[3],
                         const unsigned block[3], unsigned shared_mem, cudaStream_t stream,
                         const l2p_window *w, const l2p_arg *args, size_t nargs)
{
    size_t *offs = (size_t *)calloc(2 * nargs + 2, sizeof *offs), *sizes = offs + nargs + 1;
    void **params = (void **)calloc(nargs + 1, sizeof *params);
    unsigned char *bytes = NULL;
    size_t total = 0;
    l2p_status st = offs && params ? L2P_OK
                                   : l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory (launch)");
    if (st == L2P_OK) st = layout(info, f, nargs, offs, sizes, &total);
    if (st == L2P_OK && !(bytes = (unsigned char *)calloc(total + 8, 1)))
        st = l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory (launch)");
    for (size_t i = 0; st == L2P_OK && i < nargs; i++) {
        st = l2p_marshal_arg(i, &args[i], sizes[i], bytes + offs[i]);
        params[i] = bytes + offs[i];
    }
    if (st == L2P_OK) {
        CUlaunchAttribute attr;
        CUlaunchConfig cfg;
        memset(&attr, 0, sizeof attr);
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = grid[0], cfg.gridDimY = grid[1], cfg.gridDimZ = grid[2];
        cfg.blockDimX = block[0], cfg.blockDimY = block[1], cfg.blockDimZ = block[2];
        cfg.sharedMemBytes = shared_mem;
        cfg.hStream = (CUstream)stream;
        if (w && w->num_bytes) {
            struct cudaAccessPolicyWindow cw = l2p_window_to_cuda(w);
            attr.id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
            attr.value.accessPolicyWindow.base_ptr = cw.base_ptr;
            attr.value.accessPolicyWindow.num_bytes = cw.num_bytes;
            attr.value.accessPolicyWindow.hitRatio = cw.hitRatio;
            attr.value.accessPolicyWindow.hitProp = (CUaccessProperty)cw.hitProp;
            attr.value.accessPolicyWindow.missProp = (CUaccessProperty)cw.missProp;
            cfg.attrs = &attr;
            cfg.numAttrs = 1;
        }
        CUresult rc = go(&cfg, f, params, NULL);
        if (rc != CUDA_SUCCESS)
            st = l2p_fail(L2P_ERR_CUDA, "cuLaunchKernelEx failed (CUresult %d)", (int)rc);
    }
    free(bytes);
    free(params);
    free(offs);
    return st;
}

l2p_status l2p_launch_ex(int device, void *func, int is_kernel, const unsigned grid[3],
                         const unsigned block[3], unsigned shared_mem, cudaStream_t stream,
                         const l2p_window *w, const l2p_arg *args, size_t nargs)
{
    void *info, *go, *kf = NULL;
    int prev;
    if (!func) return l2p_fail(L2P_ERR_VALUE, "kernel: a null function handle");
    L2P_TRY(check_dims("grid", grid));
    L2P_TRY(check_dims("block", block));
    L2P_TRY(l2p_driver_symbol_at("cuFuncGetParamInfo", 12040, &info));
    L2P_TRY(l2p_driver_symbol("cuLaunchKernelEx", &go));
    if (is_kernel) L2P_TRY(l2p_driver_symbol("cuKernelGetFunction", &kf));
    L2P_TRY(l2p_device_enter(device, &prev));
    CUfunction f = (CUfunction)func;
    l2p_status st = L2P_OK;
    if (is_kernel && ((kernel_function_fn)kf)(&f, (CUkernel)func) != CUDA_SUCCESS)
        st = l2p_fail(L2P_ERR_VALUE, "kernel: the CUkernel has no function in device %d's "
                      "context", device);
    if (st == L2P_OK)
        st = launch(f, (param_info_fn)info, (launch_fn)go, grid, block, shared_mem, stream, w,
                    args, nargs);
    l2p_device_leave(prev);
    return st;
}
