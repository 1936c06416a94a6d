/* A stand-in libcupti with the activity API besides the callback API (fake_cupti.c), for the
 * C tests of the launch log's detached mode (test_activity_detach.c): every activity call is
 * counted (a detached log must make none), the clock reads as CUPTI's does on Linux (Unix-epoch
 * ns, far above the host's CLOCK_MONOTONIC), and fake_activity_deliver hands the log a buffer
 * holding one kernel record through its completion callback, as CUPTI's own thread would. */
#include "fake_cupti.c"

#include <cupti_activity.h>
#include <stdlib.h>

static atomic_int act_calls;
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;

#define EPOCH_NS 1764547200000000000ull /* 2025-12-01, as a Unix-epoch stamp */

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
                                           CUpti_BuffersCallbackCompleteFunc c)
{
    requested = r;
    completed = c;
    atomic_fetch_add(&act_calls, 1);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
    (void)k;
    atomic_fetch_add(&act_calls, 1);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
    (void)k;
    atomic_fetch_add(&act_calls, 1);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    atomic_fetch_add(&act_calls, 1);
    return CUPTI_SUCCESS;
}
/* One record per buffer: the first call gives it, the next says none is left. */
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec)
{
    if (*rec || valid < sizeof(CUpti_ActivityKernel10)) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)buffer;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp(uint64_t *t)
{
    atomic_fetch_add(&act_calls, 1);
    *t = EPOCH_NS;
    return CUPTI_SUCCESS;
}

int fake_activity_calls(void) { return atomic_load(&act_calls); }

/* A buffer of one kernel record on device 0, stamped [start, end), delivered to the log. */
void fake_activity_deliver(uint64_t start, uint64_t end)
{
    uint8_t *buffer = NULL;
    size_t size = 0, max_records = 0;
    if (!requested || !completed) return;
    requested(&buffer, &size, &max_records);
    if (!buffer || size < sizeof(CUpti_ActivityKernel10)) return;
    CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)buffer;
    memset(k, 0, sizeof *k);
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->start = start;
    k->end = end;
    k->deviceId = 0;
    k->gridX = k->gridY = k->gridZ = k->blockX = k->blockY = k->blockZ = 1;
    k->name = "fake_kernel";
    completed(NULL, 0, buffer, size, sizeof *k);
}
