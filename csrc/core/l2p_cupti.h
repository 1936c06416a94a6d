/* libcupti, loaded at run time and shared by the counters (l2p_counters.c) and the launch log
 * (l2p_launchlog.c).
 *
 * Nothing links against libcupti: it is dlopen'ed on first use, so the package imports and
 * works where CUPTI is missing, and only what needs CUPTI says it is missing. */
#ifndef L2P_CUPTI_H
#define L2P_CUPTI_H

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The loaded library's handle (dlopen), or L2P_ERR_NOT_SUPPORTED saying where it was looked
 * for and how to point at it (L2P_CUPTI_LIBRARY). Loaded once per process: a libcupti already
 * mapped into the process (PyTorch's) first, so the process holds one CUPTI; then
 * L2P_CUPTI_LIBRARY, the loader's paths, CUDA_HOME and the toolkit. */
l2p_status l2p_cupti_library(void **handle);
/* The file of the loaded library, or NULL (not loaded, or not found). */
const char *l2p_cupti_path(void);

/* The one mapping of a failed CUPTI call (rc: its CUptiResult) to a status: missing privileges
 * and unsupported devices are L2P_ERR_NOT_SUPPORTED with what to do, another subscriber
 * (CUPTI allows one per process) too; the rest L2P_ERR_CUPTI. Records cupti_code and the
 * call's name. `detail`, when not NULL, is appended in parentheses. */
l2p_status l2p_cupti_fail(int rc, const char *call, const char *detail);

#ifdef __cplusplus
}
#endif
#endif
