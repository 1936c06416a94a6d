/* MPS and the persisting-L2 set-aside.
 *
 * Under MPS the set-aside belongs to the MPS server: it is fixed when the server starts, from
 * CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT in the server's environment.
 * Measured on an H200 (driver 580, CUDA 13.0): a client's cudaDeviceSetLimit succeeds and
 * reads back what it asked for, and the hardware ignores it (a window's effect on the hot/cold
 * counters is the same at client limits 0, 11.25 and 37.5 MiB); the server's percentage P
 * gives the set-aside ceil(P% of the L2 size) rounded up to the driver's granule, the same
 * rule the driver applies to a process's own variable (readings 1 % -> 3.75 MiB, 10 % -> 7.5,
 * 24 % -> 15, 30 % -> 18.75, 50 % -> 30, 62 % -> 37.5 MiB on 60 MiB of L2), and a percentage
 * beyond the persisting maximum makes context creation fail (cudaErrorDevicesUnavailable).
 *
 * The client cannot ask the server for its percentage, so it is read from the server
 * process's environment (/proc/PID/environ): the nvidia-cuda-mps-server whose
 * CUDA_MPS_PIPE_DIRECTORY is the client's, preferably run by the client's user.
 */
#ifndef L2P_MPS_H
#define L2P_MPS_H

#include <stddef.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define L2P_MPS_PCT_VAR "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT"
#define L2P_MPS_PIPE_VAR "CUDA_MPS_PIPE_DIRECTORY"
#define L2P_MPS_DEFAULT_PIPE "/tmp/nvidia-mps"

typedef struct {
    int found;      /* a server on this client's pipe directory was found */
    int readable;   /* and its environment could be read */
    long pid;
    double percent; /* the server's percentage; < 0 when the variable is not set */
} l2p_mps_server;

/* The value of `name` in a NUL-separated environment block, copied into out (NUL-terminated);
 * 1 when found, 0 when not. */
int l2p_mps_environ_get(const char *block, size_t len, const char *name, char *out, size_t cap);

/* A percentage as the driver takes it: a number in [0, 100]. -1 when the text is not one. */
double l2p_mps_parse_percent(const char *text);

/* The set-aside a percentage gives: P% of the L2 size rounded up to the granule. */
size_t l2p_mps_set_aside(double percent, size_t l2_size, size_t granule);

/* The MPS server this process talks to, found under `proc_root` ("/proc"; tests pass a fake
 * tree) by the pipe directory `pipe_dir` (NULL: this process's, or the default). Never fails:
 * out->found says whether one was found. */
void l2p_mps_find_server(const char *proc_root, const char *pipe_dir, l2p_mps_server *out);

#ifdef __cplusplus
}
#endif
#endif
