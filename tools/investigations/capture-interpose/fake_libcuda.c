/* A stand-in libcuda.so.1 for the interposer's CPU test (tests/test_tools_cpu.py): the capture
 * calls, cuGetProcAddress (both ABIs) handing them out by name, version and flags as the driver
 * does, and what linked.c needs. Streams are small integers; a capture on stream 0 (the legacy
 * default stream) fails, a context synchronize invalidates every open capture, and an end on a
 * stream that is not capturing fails. Link it with -Wl,-Bsymbolic, as the driver binds its own
 * calls: otherwise its _ptsz functions, calling the plain ones by name, would reach the
 * interposer's exports and be counted twice. */
#include <string.h>

typedef int CUresult;
typedef unsigned long long u64;

static int state[64];      /* per stream: 0 idle, 1 capturing, 2 invalidated */

static CUresult begin(void *s)
{
    long i = (long)s;
    if (i <= 0 || i >= 64)
        return 900;        /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
    state[i] = 1;
    return 0;
}

CUresult cuStreamBeginCapture(void *s) { return begin(s); }
CUresult cuStreamBeginCapture_ptsz(void *s) { return begin(s); }
CUresult cuStreamBeginCapture_v2(void *s, int mode) { (void)mode; return begin(s); }
CUresult cuStreamBeginCapture_v2_ptsz(void *s, int mode) { (void)mode; return begin(s); }
CUresult cuStreamBeginCaptureToGraph(void *s, void *g, const void *d, const void *e, size_t n,
                                     int m)
{
    (void)g, (void)d, (void)e, (void)n, (void)m;
    return begin(s);
}
CUresult cuStreamBeginCaptureToGraph_ptsz(void *s, void *g, const void *d, const void *e,
                                          size_t n, int m)
{
    return cuStreamBeginCaptureToGraph(s, g, d, e, n, m);
}

CUresult cuStreamEndCapture(void *s, void **g)
{
    long i = (long)s;
    if (i <= 0 || i >= 64 || !state[i])
        return 906;        /* CUDA_ERROR_STREAM_CAPTURE_UNMATCHED */
    int was = state[i];
    state[i] = 0;
    *g = (void *)1;
    return was == 2 ? 901 : 0;
}
CUresult cuStreamEndCapture_ptsz(void *s, void **g) { return cuStreamEndCapture(s, g); }

CUresult cuCtxSynchronize(void)
{
    CUresult r = 0;
    for (int i = 0; i < 64; i++)
        if (state[i] == 1) {
            state[i] = 2;
            r = 900;
        }
    return r;
}
CUresult cuGraphCreate(void **g, unsigned flags) { (void)flags; *g = (void *)1; return 0; }
CUresult cuGraphDestroy(void *g) { (void)g; return 0; }

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, u64 flags);

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, u64 flags, int *status)
{
    int ptsz = (flags & 2) != 0;
    void *p = 0;
    if (!strcmp(sym, "cuStreamBeginCapture"))
        p = ver >= 10010 ? (ptsz ? (void *)cuStreamBeginCapture_v2_ptsz
                                 : (void *)cuStreamBeginCapture_v2)
                         : (ptsz ? (void *)cuStreamBeginCapture_ptsz
                                 : (void *)cuStreamBeginCapture);
    else if (!strcmp(sym, "cuStreamBeginCaptureToGraph"))
        p = ptsz ? (void *)cuStreamBeginCaptureToGraph_ptsz : (void *)cuStreamBeginCaptureToGraph;
    else if (!strcmp(sym, "cuStreamEndCapture"))
        p = ptsz ? (void *)cuStreamEndCapture_ptsz : (void *)cuStreamEndCapture;
    else if (!strcmp(sym, "cuGetProcAddress"))
        p = ver >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
    else if (!strcmp(sym, "cuCtxSynchronize"))
        p = (void *)cuCtxSynchronize;
    if (status)
        *status = p ? 0 : 1;
    *pfn = p;
    return p ? 0 : 500;    /* CUDA_ERROR_NOT_FOUND */
}

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, u64 flags)
{
    return cuGetProcAddress_v2(sym, pfn, ver, flags, 0);
}
