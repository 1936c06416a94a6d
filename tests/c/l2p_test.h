/* A tiny test runner: CHECK records a failure and goes on; main prints "N passed, N failed". */
#ifndef L2P_TEST_H
#define L2P_TEST_H

#include <math.h>
#include <stdio.h>

extern int l2p_test_passed, l2p_test_failed;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (cond) {                                                              \
            l2p_test_passed++;                                                   \
        } else {                                                                 \
            l2p_test_failed++;                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECK_NEAR(a, b, tol) CHECK(fabs((double)(a) - (double)(b)) <= (tol))

#endif
