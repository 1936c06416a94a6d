/* Hardware counters through CUPTI's Range Profiler (CUDA 12.6+), loaded at run time.
 *
 * libcupti is dlopen'ed on first use, so the package imports and works where CUPTI is
 * missing; asking for counters there, or where profiling is not permitted, gives
 * L2P_ERR_NOT_SUPPORTED with a message that says what to do.
 *
 * A session measures one region with user replay: the caller runs the region once per pass
 *   l2p_profiler_open -> while (!done) { begin_pass; [warm-up]; push; <region>; end_pass }
 *   -> l2p_profiler_decode -> l2p_profiler_range(i, ...) -> l2p_profiler_close.
 * User range (one range around the region) or auto range (one range per kernel launch). */
#ifndef L2P_COUNTERS_H
#define L2P_COUNTERS_H

#include <stddef.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct l2p_profiler l2p_profiler;

/* Whether libcupti can be loaded (L2P_OK) or why not (L2P_ERR_NOT_SUPPORTED). */
l2p_status l2p_counters_load(void);

/* The friendly names and the raw metrics they stand for. */
size_t l2p_counter_friendly_count(void);
const char *l2p_counter_friendly_name(size_t i);
const char *l2p_counter_friendly_metric(size_t i);
const char *l2p_counter_friendly_doc(size_t i);
/* A friendly name's raw metric; any other name is returned as is (a raw metric). */
const char *l2p_counter_resolve(const char *name);

/* Start a session on `device` for n raw metric names. per_kernel: one range per launch.
 * An unknown metric is L2P_ERR_VALUE naming it. Only one session may be open at a time. */
l2p_status l2p_profiler_open(int device, const char *const *metrics, size_t n, int per_kernel,
                             size_t max_ranges, l2p_profiler **out);
size_t l2p_profiler_passes(const l2p_profiler *p); /* passes the metrics need */
/* L2P_OK, or L2P_ERR_STATE "profiler: device N was reset ..." once the session's context was
 * destroyed by a device reset (l2p_life.h): every call below that names CUPTI's profiler
 * object asks this first, and close then leaves that object alone. */
l2p_status l2p_profiler_alive(const l2p_profiler *p);
/* Starting a pass invalidates the L2 (measured on H200: a read right after a warming read
 * outside the pass hit 0 of 262144 sectors). Work run between begin_pass and push is not
 * counted but leaves its cache state for the region. */
l2p_status l2p_profiler_begin_pass(l2p_profiler *p);
/* Opens the user range (a no-op with per_kernel, where every launch is a range). */
l2p_status l2p_profiler_push(l2p_profiler *p);
l2p_status l2p_profiler_end_pass(l2p_profiler *p, int *all_passes_done);
l2p_status l2p_profiler_decode(l2p_profiler *p, size_t *num_ranges);
/* Range i's name (copied into name) and its n metric values (in open()'s order). */
l2p_status l2p_profiler_range(l2p_profiler *p, size_t i, char *name, size_t name_size,
                              double *values);
/* Ends any pass in flight, disables profiling and frees everything; NULL is a no-op. */
void l2p_profiler_close(l2p_profiler *p);

/* The chip's base metric names (counters, ratios, throughputs), e.g. "lts__t_sectors";
 * *names points into memory owned by CUPTI's host object, copied into the caller's
 * callback one at a time. */
l2p_status l2p_counters_base_metrics(int device, void (*each)(const char *name, void *ctx),
                                     void *ctx);

/* Whether a counter session is open in the process (CUPTI must stay: l2p_activity.h's
 * release). */
int l2p_counters_session_open(void);

#ifdef __cplusplus
}
#endif
#endif
