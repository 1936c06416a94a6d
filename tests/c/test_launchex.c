/* C tests of foreign-launch argument marshalling (no GPU): each kind at each width, and the
 * refusals that name the argument. */
#include <string.h>

#include "l2p_launchex.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

static l2p_arg arg_i(long long v) { l2p_arg a; a.kind = L2P_ARG_INT; a.v.i = v; return a; }
static l2p_arg arg_u(unsigned long long v) { l2p_arg a; a.kind = L2P_ARG_UINT; a.v.u = v; return a; }
static l2p_arg arg_f(double v) { l2p_arg a; a.kind = L2P_ARG_FLOAT; a.v.f = v; return a; }
static l2p_arg arg_p(unsigned long long v) { l2p_arg a; a.kind = L2P_ARG_POINTER; a.v.u = v; return a; }

int main(void)
{
    unsigned char b[8];
    l2p_arg a;

    a = arg_p(0x7f0000001000ull);
    CHECK(l2p_marshal_arg(0, &a, 8, b) == L2P_OK);
    unsigned long long p;
    memcpy(&p, b, 8);
    CHECK(p == 0x7f0000001000ull);
    CHECK(l2p_marshal_arg(3, &a, 4, b) == L2P_ERR_TYPE);
    CHECK(strstr(l2p_last_error()->message, "args[3]") != NULL);

    a = arg_i(-5);
    CHECK(l2p_marshal_arg(0, &a, 4, b) == L2P_OK);
    int i32;
    memcpy(&i32, b, 4);
    CHECK(i32 == -5);
    CHECK(l2p_marshal_arg(0, &a, 8, b) == L2P_OK);
    long long i64;
    memcpy(&i64, b, 8);
    CHECK(i64 == -5);
    a = arg_i(300);
    CHECK(l2p_marshal_arg(1, &a, 1, b) == L2P_ERR_VALUE); /* does not fit a byte */
    CHECK(strstr(l2p_last_error()->message, "args[1]") != NULL);
    a = arg_i(-129);
    CHECK(l2p_marshal_arg(1, &a, 1, b) == L2P_ERR_VALUE);
    a = arg_i(255);
    CHECK(l2p_marshal_arg(1, &a, 1, b) == L2P_OK && b[0] == 255); /* unsigned char */
    a = arg_u(1ull << 32);
    CHECK(l2p_marshal_arg(2, &a, 4, b) == L2P_ERR_VALUE);
    CHECK(l2p_marshal_arg(2, &a, 8, b) == L2P_OK);
    a = arg_i(7);
    CHECK(l2p_marshal_arg(2, &a, 3, b) == L2P_ERR_TYPE); /* no 3-byte integers */
    CHECK(l2p_marshal_arg(2, &a, 2, b) == L2P_OK);
    short s16;
    memcpy(&s16, b, 2);
    CHECK(s16 == 7);

    a = arg_f(1.5);
    CHECK(l2p_marshal_arg(0, &a, 4, b) == L2P_OK);
    float f;
    memcpy(&f, b, 4);
    CHECK(f == 1.5f);
    CHECK(l2p_marshal_arg(0, &a, 8, b) == L2P_OK);
    double d;
    memcpy(&d, b, 8);
    CHECK(d == 1.5);
    CHECK(l2p_marshal_arg(4, &a, 2, b) == L2P_ERR_TYPE);
    CHECK(strstr(l2p_last_error()->message, "args[4]") != NULL);

    /* bad shapes are refused before any driver call */
    unsigned g[3] = {1, 1, 1}, bad[3] = {0, 1, 1}, big[3] = {32, 32, 2};
    CHECK(l2p_launch_ex(0, (void *)1, 0, bad, g, 0, NULL, NULL, NULL, 0) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "grid") != NULL);
    CHECK(l2p_launch_ex(0, (void *)1, 0, g, big, 0, NULL, NULL, NULL, 0) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "block") != NULL);
    CHECK(l2p_launch_ex(0, NULL, 0, g, g, 0, NULL, NULL, NULL, 0) == L2P_ERR_VALUE);

    printf("test_launchex: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
