/* The one device-reset rule (l2p_life.h): which objects are stale, the message that refuses
 * one, and that asking without a GPU reports nothing stale and leaves no error behind. */
#include <string.h>

#include "l2p_error.h"
#include "l2p_life.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

static void test_rule(void)
{
    l2p_life made = {0, 41}, unknown = {0, 0};
    CHECK(!l2p_life_stale(&made, 41));    /* the same context */
    CHECK(l2p_life_stale(&made, 42));     /* a reset since */
    CHECK(!l2p_life_stale(&made, 0));     /* now unknown: never stale */
    CHECK(!l2p_life_stale(&unknown, 42)); /* made in an unknown context: never stale */
}

static void test_message(void)
{
    l2p_life made = {3, 41};
    CHECK(l2p_life_check(&made, 41, "src", "DeviceBuffer was allocated", "allocate it") ==
          L2P_OK);
    CHECK(l2p_life_check(&made, 42, "src", "DeviceBuffer was allocated", "allocate it") ==
          L2P_ERR_STATE);
    const char *m = l2p_last_error()->message;
    CHECK(strncmp(m, "src: device 3 was reset", strlen("src: device 3 was reset")) == 0);
    CHECK(strstr(m, "after this DeviceBuffer was allocated; allocate it") != NULL);
    l2p_clear_error();
    l2p_life unknown = {3, 0};
    CHECK(l2p_life_check(&unknown, 42, "stream", "Stream was made", "make a new one") ==
          L2P_OK);
}

/* Without a usable device (this machine, or a bad index) nothing can be told: not stale. */
static void test_without_a_device(void)
{
    l2p_life bad = {1 << 20, 41};
    CHECK(!l2p_life_gone(&bad));
    CHECK(l2p_last_error()->status == L2P_OK);
    CHECK(l2p_life_check(&bad, 0, "graph", "graph was captured", "capture it again") == L2P_OK);
    l2p_life l;
    CHECK(l2p_life_begin(&l, 1 << 20) != L2P_OK);
    CHECK(l.device == 1 << 20 && l.ctx == 0);
    l2p_clear_error();
}

int main(void)
{
    test_rule();
    test_message();
    test_without_a_device();
    printf("test_life: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed ? 1 : 0;
}
