/* C tests of the launch log's pure part (no GPU, no CUPTI): a launch's argument bytes copied
 * from a kernelParams array and from an `extra` buffer into the log's own memory, laid out at
 * each parameter's offset so graphscan's word scan reads them; the caps and the dropped count;
 * a launch read from CUPTI's parameter structs, the per-thread forms' NULL stream included. */
#include <cuda.h> /* CU_LAUNCH_PARAM_*, CU_STREAM_* */
#include <cupti.h> /* the launches' parameter structs (types only: no CUPTI is loaded) */
#include <stdint.h>
#include <string.h>

#include "l2p_launchlog.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

#define A 0x7f0000000000ull /* a plausible device address */

/* kernel(int n, float *x, struct {double *p; int k;} s): offsets 0, 8, 16; 32 bytes in all */
static const l2p_param_span spans[3] = {{0, 4}, {8, 8}, {16, 16}};

static l2p_launch_args launch_of(void *func, void *const *kernel_params, void *const *extra)
{
    l2p_launch_args a;
    memset(&a, 0, sizeof a);
    a.func = func;
    a.stream = (void *)0x1234;
    a.grid[0] = 80, a.grid[1] = a.grid[2] = 1;
    a.block[0] = 256, a.block[1] = a.block[2] = 1;
    a.shared_mem = 48;
    a.kernel_params = kernel_params;
    a.extra = extra;
    return a;
}

static void test_kernel_params(void)
{
    l2p_launch_log log;
    int n = 1000;
    uint64_t x = A + 0x100;
    struct { uint64_t p; int k; } s;
    memset(&s, 0, sizeof s); /* its padding too: the word scan reads the whole 16 bytes */
    s.p = A + 0x2000;
    s.k = 7;
    void *params[3] = {&n, &x, &s};
    CHECK(l2p_launch_log_init(&log, 0, 8, 4096) == L2P_OK);
    l2p_launch_args a = launch_of((void *)0xf00, params, NULL);
    l2p_launch_log_add(&log, &a, spans, 3, "k");
    n = -1, x = 0; /* the caller's memory changes after the launch: the log has its own copy */
    CHECK(log.n_launches == 1 && log.dropped == 0);
    const l2p_launch *l = &log.launches[0];
    CHECK(l->func == (void *)0xf00 && l->stream == (void *)0x1234);
    CHECK(l->grid[0] == 80 && l->block[0] == 256 && l->shared_mem == 48);
    CHECK(l->args_at == 0 && l->args_size == 32);
    const unsigned char *b = log.args + l->args_at;
    int n_copy;
    uint64_t w;
    memcpy(&n_copy, b, 4);
    CHECK(n_copy == 1000);
    CHECK(b[4] == 0 && b[7] == 0); /* the padding before x is zeroed */
    memcpy(&w, b + 8, 8);
    CHECK(w == A + 0x100);
    memcpy(&w, b + 16, 8);
    CHECK(w == A + 0x2000);
    /* the scan graphscan runs over each parameter finds both pointers, none in n */
    unsigned offs[4];
    uint64_t words[4];
    CHECK(l2p_scan_param_words(b + 0, 0, 4, offs, words, 4) == 0);
    CHECK(l2p_scan_param_words(b + 8, 8, 8, offs, words, 4) == 1 && words[0] == A + 0x100);
    CHECK(l2p_scan_param_words(b + 16, 16, 16, offs, words, 4) == 1 && words[0] == A + 0x2000);
    l2p_launch_log_free(&log);
    CHECK(log.launches == NULL && log.args == NULL);
    l2p_launch_log_free(&log); /* twice is harmless */
}

static void test_extra_buffer(void)
{
    l2p_launch_log log;
    unsigned char buf[32] = {0};
    uint64_t p = A + 0x40;
    size_t size = sizeof buf;
    memcpy(buf + 8, &p, 8);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    CHECK(l2p_launch_log_init(&log, 0, 8, 4096) == L2P_OK);
    l2p_launch_args a = launch_of((void *)0xf01, NULL, extra);
    l2p_launch_log_add(&log, &a, spans, 3, "k");
    a = launch_of((void *)0xf01, NULL, extra);       /* a second launch follows the first */
    l2p_launch_log_add(&log, &a, NULL, 0, NULL);           /* the extra form needs no spans */
    CHECK(log.n_launches == 2 && log.dropped == 0);
    CHECK(log.launches[0].args_size == 32 && log.launches[1].args_at == 32);
    CHECK(memcmp(log.args + 32, buf, sizeof buf) == 0 && log.n_args == 64);

    /* an option the log does not know: the buffer's form is unknown, the launch dropped */
    void *odd[] = {(void *)0x7, buf, CU_LAUNCH_PARAM_END};
    size_t odd_size = 0;
    CHECK(l2p_extra_buffer(odd, &odd_size) == NULL);
    a = launch_of((void *)0xf02, NULL, odd);
    l2p_launch_log_add(&log, &a, spans, 3, "k");
    CHECK(log.n_launches == 2 && log.dropped == 1);

    /* neither form: dropped when the kernel has parameters, logged (no bytes) when not */
    a = launch_of((void *)0xf03, NULL, NULL);
    l2p_launch_log_add(&log, &a, spans, 3, "k");
    CHECK(log.n_launches == 2 && log.dropped == 2);
    l2p_launch_log_add(&log, &a, NULL, 0, NULL);
    CHECK(log.n_launches == 3 && log.launches[2].args_size == 0 && log.n_args == 64);
    l2p_launch_log_free(&log);
}

static void test_caps(void)
{
    l2p_launch_log log;
    int n = 1;
    uint64_t x = A;
    struct { uint64_t p; int k; } s = {A, 0};
    void *params[3] = {&n, &x, &s};
    /* two launches at most, 80 bytes at most: the third launch of 32 bytes fits neither */
    CHECK(l2p_launch_log_init(&log, 3, 2, 80) == L2P_OK);
    CHECK(log.device == 3);
    l2p_launch_args a = launch_of((void *)0xf00, params, NULL);
    for (int i = 0; i < 5; i++) l2p_launch_log_add(&log, &a, spans, 3, "k");
    CHECK(log.n_launches == 2 && log.dropped == 3 && log.n_args == 64);
    l2p_launch_log_free(&log);

    /* the byte cap alone: room for two launches' bytes, slots for ten */
    CHECK(l2p_launch_log_init(&log, 0, 10, 70) == L2P_OK);
    for (int i = 0; i < 4; i++) l2p_launch_log_add(&log, &a, spans, 3, "k");
    CHECK(log.n_launches == 2 && log.dropped == 2 && log.n_args == 64 && log.args_cap <= 70);
    l2p_launch_log_free(&log);

    /* the layouts' cap: a launch whose parameters would pass it is dropped, one that reaches
     * it exactly is kept (empty spans at offset 0: no argument bytes) */
    static l2p_param_span many[L2P_LAUNCH_LOG_MAX_SPANS];
    static void *none[L2P_LAUNCH_LOG_MAX_SPANS];
    CHECK(l2p_launch_log_init(&log, 0, 4, 4096) == L2P_OK);
    a = launch_of((void *)0xf00, none, NULL);
    l2p_launch_log_add(&log, &a, many, 1, "k");
    l2p_launch_log_add(&log, &a, many, L2P_LAUNCH_LOG_MAX_SPANS, "k");
    CHECK(log.n_launches == 1 && log.dropped == 1 && log.n_spans == 1);
    l2p_launch_log_add(&log, &a, many, L2P_LAUNCH_LOG_MAX_SPANS - 1, "k");
    CHECK(log.n_launches == 2 && log.dropped == 1 && log.n_spans == L2P_LAUNCH_LOG_MAX_SPANS);
    l2p_launch_log_free(&log);
}

/* Each launch keeps the resolution made at its own call: its layout and name. A handle that
 * comes back as another function (its module unloaded, another loaded) keeps each launch's
 * own, and the scan reads only those (never the driver on a handle). A NULL name is kept as "";
 * a name the pools cannot hold drops the launch, counted. */
static void test_resolutions(void)
{
    l2p_launch_log log;
    int n = 1;
    uint64_t x = A;
    struct { uint64_t p; int k; } s = {A, 0};
    void *params[3] = {&n, &x, &s};
    const l2p_param_span other[2] = {{0, 8}, {8, 4}};
    void *other_params[2] = {&x, &n};               /* (uint64_t, int): other's layout */
    CHECK(l2p_launch_log_init(&log, 0, 8, 4096) == L2P_OK);
    l2p_launch_args a = launch_of((void *)0xf00, params, NULL);
    l2p_launch_log_add(&log, &a, spans, 3, "first_kernel");
    a = launch_of((void *)0xf00, other_params, NULL); /* the same handle, another function */
    l2p_launch_log_add(&log, &a, other, 2, "second_kernel");
    a = launch_of((void *)0xf01, params, NULL);
    l2p_launch_log_add(&log, &a, spans, 3, NULL);
    CHECK(log.n_launches == 3 && log.dropped == 0);
    const l2p_launch *l = log.launches;
    CHECK(l[0].n_params == 3 && memcmp(log.spans + l[0].spans_at, spans, sizeof spans) == 0);
    CHECK(l[1].n_params == 2 && memcmp(log.spans + l[1].spans_at, other, sizeof other) == 0);
    CHECK(strcmp(log.names + l[0].name_at, "first_kernel") == 0);
    CHECK(strcmp(log.names + l[1].name_at, "second_kernel") == 0);
    CHECK(strcmp(log.names + l[2].name_at, "") == 0 && l[2].n_params == 3);
    /* the second launch's bytes were laid out by its own layout: 12 bytes, not the first's 32 */
    CHECK(l[0].args_size == 32 && l[1].args_size == 12);
    /* the pools grow past their first size: many launches, each name its own */
    l2p_launch_log_free(&log);
    CHECK(l2p_launch_log_init(&log, 0, 4096, 1 << 20) == L2P_OK);
    char name[L2P_KERNEL_NAME_MAX];
    memset(name, 'k', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    for (int i = 0; i < 300; i++) {
        name[0] = (char)('A' + i % 26);
        a = launch_of((void *)(uintptr_t)(0x1000 + i), params, NULL);
        l2p_launch_log_add(&log, &a, spans, 3, name);
    }
    CHECK(log.n_launches == 300 && log.n_spans == 900 && log.n_names == 300 * sizeof name);
    size_t wrong = 0;
    for (int i = 0; i < 300; i++) {
        const char *got = log.names + log.launches[i].name_at;
        wrong += got[0] != (char)('A' + i % 26) || strlen(got) != sizeof name - 1 ||
                 memcmp(log.spans + log.launches[i].spans_at, spans, sizeof spans) != 0;
    }
    CHECK(wrong == 0);
    l2p_launch_log_free(&log);
    CHECK(log.spans == NULL && log.names == NULL);
}

/* The parameter structs read: shape, function, stream and argument forms, for the plain and
 * per-thread forms of each launch. A per-thread form's NULL stream is the per-thread default
 * stream (2), never NULL, which readers of the log take for the legacy stream; any other
 * stream, the legacy one's own handle included, is kept as given. */
static void test_read(void)
{
    void *params[1] = {NULL}, *extra[1] = {CU_LAUNCH_PARAM_END};
    const CUstream given[3] = {NULL, CU_STREAM_LEGACY, (CUstream)0x1234};
    l2p_launch_args a;
    for (int k = 0; k < 3; k++) {
        CUstream s = given[k];
        CUstream per_thread = s ? s : CU_STREAM_PER_THREAD;
        cuLaunchKernel_params p = {(CUfunction)0xf00, 80, 2, 1, 256, 1, 1, 48, s, params, extra};
        CHECK(l2p_launch_log_read(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, &a) == 1);
        CHECK(a.func == (void *)0xf00 && a.stream == (void *)s && a.grid[1] == 2 &&
              a.block[0] == 256 && a.shared_mem == 48 && a.kernel_params == params &&
              a.extra == extra);
        CHECK(l2p_launch_log_read(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &p, &a) == 1);
        CHECK(a.stream == (void *)per_thread && a.func == (void *)0xf00);

        /* cooperative: no `extra` in its struct, whatever lies past it */
        cuLaunchCooperativeKernel_params c = {(CUfunction)0xf01, 4, 1, 1, 32, 1, 1, 0, s,
                                              params};
        CHECK(l2p_launch_log_read(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, &c, &a));
        CHECK(a.stream == (void *)s && a.extra == NULL && a.kernel_params == params);
        CHECK(l2p_launch_log_read(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, &c,
                                  &a) && a.stream == (void *)per_thread);

        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = 7, cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = 128, cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = s;
        cuLaunchKernelEx_params e = {&cfg, (CUfunction)0xf02, params, NULL};
        CHECK(l2p_launch_log_read(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &e, &a));
        CHECK(a.stream == (void *)s && a.grid[0] == 7 && a.block[0] == 128);
        CHECK(l2p_launch_log_read(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, &e, &a) &&
              a.stream == (void *)per_thread);
    }
    cuLaunchKernelEx_params none = {NULL, (CUfunction)0xf02, params, NULL}; /* no config */
    CHECK(l2p_launch_log_read(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &none, &a) == 0);
    CHECK(l2p_launch_log_read(CUPTI_DRIVER_TRACE_CBID_cuMemcpy, params, &a) == 0);
}

/* A stream destroyed while the log is on marks the launches logged on it so far, and only
 * those: a later launch on the same handle is a new stream's (the handle came back), and
 * another stream's launches are untouched. */
static void test_stream_destroyed(void)
{
    l2p_launch_log log;
    CHECK(l2p_launch_log_init(&log, 0, 8, 4096) == L2P_OK);
    void *const none[1] = {NULL};
    void *own = (void *)0x5000, *other = (void *)0x6000;
    for (int k = 0; k < 4; k++) {
        l2p_launch_args a = launch_of((void *)0xf00, none, NULL);
        a.stream = k == 1 ? other : own;
        l2p_launch_log_add(&log, &a, NULL, 0, "k");
        if (k == 2) l2p_launch_log_stream_destroyed(&log, own, 3); /* after launches 0, 2 */
    }
    CHECK(log.n_launches == 4);
    CHECK(log.launches[0].stream_gone == 1 && log.launches[2].stream_gone == 1);
    CHECK(log.launches[1].stream_gone == 0); /* another stream */
    CHECK(log.launches[3].stream_gone == 0); /* the handle again, after the destroy */
    l2p_launch_log_stream_destroyed(&log, (void *)0x7000, 4); /* no launch on it: nothing */
    CHECK(log.launches[1].stream_gone == 0 && log.launches[3].stream_gone == 0);
    /* a destroy that began when two launches were logged: a launch on the handle logged while
     * it ran (another thread's new stream) is not marked */
    for (size_t k = 0; k < log.n_launches; k++) log.launches[k].stream_gone = 0;
    l2p_launch_log_stream_destroyed(&log, own, 2);
    CHECK(log.launches[0].stream_gone == 1 && log.launches[2].stream_gone == 0);
    l2p_launch_log_free(&log);
}

/* The destroy callback as CUPTI gives it: the entry notes the log's count in the call's
 * correlation word; the exit marks the launches before it, only where the destroy succeeded;
 * any other callback is not taken. The gone list has each handle once, decided by its last
 * launch. */
static void test_destroy_events(void)
{
    l2p_launch_log log;
    CHECK(l2p_launch_log_init(&log, 0, 8, 4096) == L2P_OK);
    void *const none[1] = {NULL};
    void *own = (void *)0x5000, *other = (void *)0x6000;
    l2p_launch_args a = launch_of((void *)0xf00, none, NULL);
    a.stream = own;
    l2p_launch_log_add(&log, &a, NULL, 0, "k");
    l2p_launch_log_add(&log, &a, NULL, 0, "k");
    cuStreamDestroy_v2_params params = {(CUstream)own};
    uint64_t word = 99;
    CUresult refused = CUDA_ERROR_INVALID_HANDLE, ok = CUDA_SUCCESS;
    CUpti_CallbackData cb;
    memset(&cb, 0, sizeof cb);
    cb.functionParams = &params;
    cb.correlationData = &word;
    cb.callbackSite = CUPTI_API_ENTER;
    CHECK(l2p_launch_log_destroy_event(&log, CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2, &cb) == 1);
    CHECK(word == 2); /* the count when the destroy began */
    l2p_launch_log_add(&log, &a, NULL, 0, "k"); /* another thread's new stream, same handle */
    cb.callbackSite = CUPTI_API_EXIT;
    cb.functionReturnValue = &refused;
    CHECK(l2p_launch_log_destroy_event(&log, CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2, &cb) == 1);
    CHECK(log.launches[0].stream_gone == 0 && log.launches[1].stream_gone == 0); /* refused */
    cb.functionReturnValue = &ok;
    CHECK(l2p_launch_log_destroy_event(&log, CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy, &cb) == 1);
    CHECK(log.launches[0].stream_gone == 1 && log.launches[1].stream_gone == 1);
    CHECK(log.launches[2].stream_gone == 0);
    CHECK(l2p_launch_log_destroy_event(&log, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb) == 0);
    void *gone[4];
    CHECK(l2p_launch_log_gone(&log, gone, 4) == 0); /* own's last launch is a live stream's */
    a.stream = other;
    l2p_launch_log_add(&log, &a, NULL, 0, "k");
    l2p_launch_log_add(&log, &a, NULL, 0, "k");
    l2p_launch_log_stream_destroyed(&log, other, log.n_launches);
    l2p_launch_log_stream_destroyed(&log, own, log.n_launches);
    CHECK(l2p_launch_log_gone(&log, gone, 4) == 2 && gone[0] == other && gone[1] == own);
    CHECK(l2p_launch_log_gone(&log, gone, 1) == 2 && gone[0] == other); /* the count past cap */
    l2p_launch_log_free(&log);
}

int main(void)
{
    test_kernel_params();
    test_extra_buffer();
    test_caps();
    test_resolutions();
    test_read();
    test_stream_destroyed();
    test_destroy_events();
    printf("test_launchlog: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
