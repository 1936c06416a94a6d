/* See l2p_cupti.h. */
#define _GNU_SOURCE
#include "l2p_cupti.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_result.h>

#ifndef L2P_CUDA_HOME
#define L2P_CUDA_HOME "/usr/local/cuda"
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void *library;
static char load_error[600];
static char loaded_path[512]; /* the file the handle is, for messages and the diagnostic */

/* dl_iterate_phdr: the first libcupti already mapped into the process. */
static int find_mapped(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    const char *name = info->dlpi_name, *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (!base || strncmp(base, "libcupti.so", 11) != 0) return 0;
    snprintf((char *)out, sizeof loaded_path, "%s", name);
    return 1;
}

/* The CUPTI this process already holds (PyTorch's kineto links libcupti.so.12 or .13 from
 * NVIDIA's wheels), if any. A second copy of CUPTI in one process would attach to the same
 * driver and runtimes beside the first; CUPTI's one-subscriber rule and its bookkeeping of
 * modules and callbacks hold within one copy only. L2P_CUPTI_IGNORE_MAPPED=1 (diagnostic:
 * tools/launchlog-diag) skips this and loads by the paths below, as before. */
static void *open_mapped(void)
{
    const char *ignore = getenv("L2P_CUPTI_IGNORE_MAPPED");
    char path[sizeof loaded_path] = "";
    if (ignore && strcmp(ignore, "0") != 0) return NULL;
    if (!dl_iterate_phdr(find_mapped, path) || !path[0]) return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    return h ? h : dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void *open_cupti(void)
{
    const char *env = getenv("L2P_CUPTI_LIBRARY"), *home = getenv("CUDA_HOME");
    const char *names[] = {"libcupti.so.13", "libcupti.so", "libcupti.so.12"};
    const char *dirs[] = {"lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"};
    char path[512];
    void *h = open_mapped();
    if (!h && env) h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    for (int pass = 0; !h && pass < 2; pass++) {
        const char *root = pass == 0 ? home : L2P_CUDA_HOME;
        for (size_t i = 0; root && !h && i < sizeof dirs / sizeof dirs[0]; i++) {
            snprintf(path, sizeof path, "%s/%s/libcupti.so", root, dirs[i]);
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    return h;
}

static void load(void)
{
    struct link_map *map = NULL;
    library = open_cupti();
    if (!library)
        snprintf(load_error, sizeof load_error,
                 "CUPTI (libcupti.so) was not found: install the CUDA toolkit's CUPTI or the "
                 "nvidia-cuda-cupti package, or set L2P_CUPTI_LIBRARY to its path (%s)",
                 dlerror());
    else if (dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name)
        snprintf(loaded_path, sizeof loaded_path, "%s", map->l_name);
}

l2p_status l2p_cupti_library(void **handle)
{
    pthread_once(&load_once, load);
    *handle = library;
    return library ? L2P_OK : l2p_fail(L2P_ERR_NOT_SUPPORTED, "%s", load_error);
}

const char *l2p_cupti_path(void)
{
    pthread_once(&load_once, load);
    return library ? loaded_path : NULL;
}

static const char *result_text(CUptiResult rc)
{
    typedef CUptiResult (*get_string_fn)(CUptiResult, const char **);
    const char *text = NULL;
    get_string_fn get = library ? (get_string_fn)dlsym(library, "cuptiGetResultString") : NULL;
    if (!get || get(rc, &text) != CUPTI_SUCCESS || !text) text = "?";
    return text;
}

l2p_status l2p_cupti_fail(int code, const char *call, const char *detail)
{
    CUptiResult rc = (CUptiResult)code;
    const char *text = result_text(rc), *open = detail ? " (" : "", *close = detail ? ")" : "";
    l2p_status st = L2P_ERR_NOT_SUPPORTED;
    if (!detail) detail = "";
    if (rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
        rc == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
        l2p_fail(st, "%s failed: %s%s%s%s. Profiling counters are restricted to "
                 "administrators on this machine: run as root, or load the driver with "
                 "NVreg_RestrictProfilingToAdminUsers=0", call, text, open, detail, close);
    else if (rc == CUPTI_ERROR_NOT_SUPPORTED || rc == CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED ||
             rc == CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED)
        l2p_fail(st, "%s failed: %s%s%s%s (this device or mode cannot be profiled: vGPU, MIG, "
                 "CMP, or a driver without profiling support)", call, text, open, detail, close);
    else if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        l2p_fail(st, "%s failed: %s%s%s%s: CUPTI takes one subscriber per process, and another "
                 "tool (Nsight Systems or Compute, a profiler such as torch.profiler, cuda-gdb, "
                 "compute-sanitizer) holds it", call, text, open, detail, close);
    else
        st = l2p_fail(L2P_ERR_CUPTI, "%s failed: CUPTI error %d: %s%s%s%s", call, code, text,
                      open, detail, close);
    /* l2p_fail cleared the codes; record CUPTI's. */
    ((l2p_error *)l2p_last_error())->cupti_code = code;
    snprintf(((l2p_error *)l2p_last_error())->call, sizeof l2p_last_error()->call, "%s", call);
    return st;
}
