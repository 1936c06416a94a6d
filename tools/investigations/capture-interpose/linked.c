/* A library linked against libcuda (as some extensions are): its capture calls reach the
 * driver's exports directly, not through dlsym or cuGetProcAddress. capture-interpose's
 * `captures.py` loads it to see whether the interposer's exports count them. Each call returns
 * the first failing CUresult, or 0. */
#include <cuda.h>

/* A capture begun and ended on `stream` (legacy names: cuda.h maps them to _v2 and the legacy
 * default-stream flavour), then one into an existing graph (cuStreamBeginCaptureToGraph). */
int l2p_linked_captures(CUstream stream)
{
    CUgraph g = 0, into = 0;
    CUresult r = cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (r == CUDA_SUCCESS)
        r = cuStreamEndCapture(stream, &g);
    if (g)
        cuGraphDestroy(g);
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = cuGraphCreate(&into, 0)) != CUDA_SUCCESS)
        return r;
    r = cuStreamBeginCaptureToGraph(stream, into, 0, 0, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
    g = 0;
    if (r == CUDA_SUCCESS)
        r = cuStreamEndCapture(stream, &g);
    cuGraphDestroy(into);
    return r;
}

/* A capture that a prohibited call invalidates (a context synchronize in global mode): its end
 * returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and still ends it. Returns that end's result. */
int l2p_linked_invalidated(CUstream stream)
{
    CUgraph g = 0;
    CUresult r = cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (r != CUDA_SUCCESS)
        return -(int)r;
    (void)cuCtxSynchronize();   /* prohibited while capturing: invalidates the capture */
    r = cuStreamEndCapture(stream, &g);
    if (g)
        cuGraphDestroy(g);
    return r;
}

/* A begin that fails: capture on the legacy default stream is not supported. */
int l2p_linked_failed_begin(void)
{
    return cuStreamBeginCapture((CUstream)0, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
