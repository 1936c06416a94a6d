/* C tests of the capture-safe release queue (no GPU): which errors defer, the order the queue
 * keeps, and the names of the calls. The releases themselves are tested on the GPU by
 * tests/test_capture_safety.py. */
#include <string.h>

#include "l2p_release.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

int main(void)
{
    /* refused because of a capture: deferred */
    CHECK(l2p_release_capture_error(cudaErrorStreamCaptureUnsupported));
    CHECK(l2p_release_capture_error(cudaErrorStreamCaptureInvalidated));
    CHECK(l2p_release_capture_error(cudaErrorStreamCaptureImplicit));
    /* anything else is a real failure and is reported */
    CHECK(!l2p_release_capture_error(cudaSuccess));
    CHECK(!l2p_release_capture_error(cudaErrorInvalidValue));
    CHECK(!l2p_release_capture_error(cudaErrorIllegalAddress));

    CHECK(strcmp(l2p_release_call(L2P_RELEASE_MEMORY), "cudaFree") == 0);
    CHECK(strcmp(l2p_release_call(L2P_RELEASE_GRAPH_EXEC), "cudaGraphExecDestroy") == 0);
    CHECK(strcmp(l2p_release_call((l2p_release_kind)99), "?") == 0);

    /* a NULL handle is a no-op that touches no device */
    CHECK(l2p_release(0, L2P_RELEASE_MEMORY, NULL) == L2P_OK);

    /* the queue: oldest first, grows past its first block, empties */
    l2p_deferred d, got;
    CHECK(l2p_release_pending() == 0);
    CHECK(!l2p_release_take(&got));
    for (int i = 0; i < 40; i++) {
        d.kind = (l2p_release_kind)(i % L2P_RELEASE_KINDS);
        d.device = i;
        d.handle = (void *)(size_t)(0x1000 + i);
        d.ctx = 7;
        CHECK(l2p_release_defer(&d) == L2P_OK);
    }
    CHECK(l2p_release_pending() == 40);
    int ordered = 1;
    for (int i = 0; i < 40; i++)
        ordered &= l2p_release_take(&got) && got.device == i &&
                   got.handle == (void *)(size_t)(0x1000 + i);
    CHECK(ordered);
    CHECK(l2p_release_pending() == 0);
    /* draining an empty queue makes no CUDA call and leaves it empty */
    l2p_release_drain();
    CHECK(l2p_release_pending() == 0);

    printf("test_release: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
