/* C tests of the set-aside tax model against the integrator's sweeps (the rows of l2p_tax.c):
 * held-out knees within +-4 MiB and no tax where none was measured, the fitted
 * constants, slowdowns against the measured ones, the fallback for an unmeasured chip, the
 * rounding to granules, the probe's working set, the fits themselves and bad input. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "l2p_tax.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

#define MIB 1048576.0

static l2p_tax_chip chip(int major, int minor, double l2_mib)
{
    l2p_tax_chip c = {major, minor, (size_t)(l2_mib * MIB), 0, (size_t)(l2_mib * MIB * 10 / 16)};
    return c;
}

static double knee_mib(const l2p_tax_chip *c, double s_mib)
{
    l2p_tax_model m;
    if (l2p_tax_predict(c, (long long)(s_mib * MIB), &m) != L2P_OK) return -1;
    return (double)m.knee_bytes / MIB;
}

/* Distance of x from the interval (lo, hi]. */
static double off_interval(double x, double lo, double hi)
{
    return x < lo ? lo - x : x > hi ? x - hi : 0.0;
}

/* The bar: at set-asides the fit did not use, within 4 MiB of the measured knee
 * (the fitted ones too); where no knee was measured, no tax predicted. */
static void test_knees(void)
{
    size_t n, held_out = 0, none = 0;
    const l2p_tax_knee_row *rows = l2p_tax_knee_rows(&n);
    for (size_t i = 0; i < n; i++) {
        const l2p_tax_knee_row *r = &rows[i];
        l2p_tax_chip c = chip(r->cc_major, r->cc_minor, r->l2_mib);
        l2p_tax_model m;
        CHECK(l2p_tax_predict(&c, (long long)(r->set_aside_mib * MIB), &m) == L2P_OK);
        double k = (double)m.knee_bytes / MIB;
        int ok = r->knee_hi_mib > 0 ? m.taxed && off_interval(k, r->knee_lo_mib,
                                                              r->knee_hi_mib) <= 4.0
                                    : !m.taxed;
        if (!ok)
            fprintf(stderr, "%s s=%.3f: knee %.2f MiB (taxed %d), measured (%g, %g]\n", r->chip,
                    r->set_aside_mib, k, m.taxed, r->knee_lo_mib, r->knee_hi_mib);
        CHECK(ok);
        held_out += !r->fit && r->knee_hi_mib > 0;
        none += !r->fit && r->knee_hi_mib <= 0;
    }
    CHECK(held_out >= 8 && none >= 4); /* per chip: 4 held-out knees, 2 held-out "none" */
}

/* The fit: c between 1.2 and 1.4 on both chips (4/3 read off the first sweep), the tax from a quarter
 * of the L2, C(0) below the L2; the knee falls with every granule from the onset on. */
static void test_fit_constants(void)
{
    l2p_tax_chip h200 = chip(9, 0, 60), h100 = chip(9, 0, 50);
    l2p_tax_model m;
    CHECK(l2p_tax_predict(&h200, (long long)(37.5 * MIB), &m) == L2P_OK);
    CHECK(m.capacity_coeff > 1.2 && m.capacity_coeff < 1.4);
    CHECK_NEAR(m.onset_fraction, 0.25, 1e-9);
    CHECK(m.base_bytes > 45 * MIB && m.base_bytes < 55 * MIB);
    CHECK(m.exact == 1 && strcmp(m.basis, "H200") == 0);
    CHECK(l2p_tax_predict(&h100, (long long)(31.25 * MIB), &m) == L2P_OK);
    CHECK(m.capacity_coeff > 1.2 && m.capacity_coeff < 1.4);
    CHECK(m.exact == 1 && strcmp(m.basis, "H100") == 0);
    double prev = 1e9;
    for (int g = 4; g <= 10; g++) {
        double k = knee_mib(&h200, g * 3.75);
        CHECK(k < prev);
        prev = k;
    }
    /* Up to 3 granules (the driver's default included) nothing changes. */
    for (int g = 0; g <= 3; g++) {
        CHECK(l2p_tax_predict(&h200, (long long)(g * 3.75 * MIB), &m) == L2P_OK);
        CHECK(!m.taxed && m.knee_bytes == m.base_bytes);
        CHECK_NEAR(l2p_tax_slowdown(&m, L2P_TAX_WRITE, 55 * MIB), 1.0, 1e-12);
    }
}

/* Slowdowns against every measured row: within the factor the model achieves (0.6-1.5x of
 * the measured; the model has one P per chip and kind), ordered write > atomic > read at
 * the maximum, none below the knee or far above the L2 than at it. */
static void test_slowdowns(void)
{
    size_t n;
    const l2p_tax_slowdown_row *rows = l2p_tax_slowdown_rows(&n);
    for (size_t i = 0; i < n; i++) {
        const l2p_tax_slowdown_row *r = &rows[i];
        l2p_tax_chip c = chip(r->cc_major, r->cc_minor, r->l2_mib);
        l2p_tax_model m;
        CHECK(l2p_tax_predict(&c, (long long)(r->set_aside_mib * MIB), &m) == L2P_OK);
        double ratio = l2p_tax_slowdown(&m, r->kind, r->ws_mib * MIB) / r->slowdown;
        if (ratio < 0.6 || ratio > 1.5)
            fprintf(stderr, "%s s=%g ws=%g %s: model/measured %.2f\n", r->chip, r->set_aside_mib,
                    r->ws_mib, l2p_tax_kind_name(r->kind), ratio);
        CHECK(ratio >= 0.6 && ratio <= 1.5);
    }
    l2p_tax_chip h200 = chip(9, 0, 60);
    l2p_tax_model m;
    CHECK(l2p_tax_predict(&h200, (long long)(37.5 * MIB), &m) == L2P_OK);
    double w = l2p_tax_slowdown(&m, L2P_TAX_WRITE, 32 * MIB),
           a = l2p_tax_slowdown(&m, L2P_TAX_ATOMIC, 32 * MIB),
           rd = l2p_tax_slowdown(&m, L2P_TAX_READ, 32 * MIB);
    CHECK(w > a && a > rd && rd >= 1.0);
    CHECK_NEAR(l2p_tax_slowdown(&m, L2P_TAX_WRITE, 8 * MIB), 1.0, 1e-12); /* below the knee */
    CHECK(l2p_tax_slowdown(&m, L2P_TAX_WRITE, 4096 * MIB) <
          l2p_tax_slowdown(&m, L2P_TAX_WRITE, 48 * MIB));
}

/* An unmeasured chip takes the closest chip's constants, applied to its own L2 size. */
static void test_fallback(void)
{
    l2p_tax_chip a100 = chip(8, 0, 40), big = chip(9, 0, 96), h200 = chip(9, 0, 60);
    l2p_tax_model m, ref;
    CHECK(l2p_tax_predict(&big, 0, &m) == L2P_OK);
    CHECK(m.exact == 0 && strcmp(m.basis, "H200") == 0); /* 96 MiB is nearer 60 than 50 */
    CHECK(l2p_tax_predict(&h200, 0, &ref) == L2P_OK);
    CHECK_NEAR(m.capacity_coeff, ref.capacity_coeff, 1e-12);
    CHECK(l2p_tax_predict(&big, (long long)(36 * MIB), &m) == L2P_OK); /* above 96 / 4 */
    CHECK(m.taxed);
    CHECK_NEAR((double)m.knee_bytes, 96 * MIB - ref.capacity_coeff * m.set_aside, 1.0);
    CHECK(l2p_tax_predict(&big, (long long)(17 * MIB), &m) == L2P_OK); /* 18 MiB: no tax */
    CHECK(!m.taxed);
    CHECK(l2p_tax_predict(&a100, (long long)(10 * MIB), &m) == L2P_OK);
    CHECK(m.exact == 0 && strcmp(m.basis, "H100") == 0); /* 40 MiB is nearer 50 */
}

/* The set-aside the hardware applies is rounded up to whole granules. */
static void test_granules(void)
{
    l2p_tax_chip h200 = chip(9, 0, 60);
    l2p_tax_model m;
    CHECK(l2p_tax_predict(&h200, 1, &m) == L2P_OK);
    CHECK(m.set_aside == (size_t)(3.75 * MIB) && m.granule == (size_t)(3.75 * MIB));
    h200.granule = 1 << 20;
    CHECK(l2p_tax_predict(&h200, (1 << 20) + 1, &m) == L2P_OK);
    CHECK(m.set_aside == 2u << 20);
}

static void test_probe_working_set(void)
{
    l2p_tax_chip h200 = chip(9, 0, 60);
    l2p_tax_model m;
    CHECK(l2p_tax_predict(&h200, (long long)(37.5 * MIB), &m) == L2P_OK);
    CHECK(m.probe_bytes >= 15u << 20 && m.probe_bytes <= 18u << 20);
    CHECK(m.probe_bytes > m.knee_bytes);
    CHECK(l2p_tax_slowdown(&m, L2P_TAX_WRITE, (double)m.probe_bytes) > 2.0);
    CHECK(l2p_tax_probe_working_set(40u << 20, 60u << 20) == 60u << 20); /* half above: 60 */
    CHECK(l2p_tax_probe_working_set(58u << 20, 60u << 20) == 60u << 20); /* capped */
    CHECK(l2p_tax_probe_working_set(0, 60u << 20) == 4u << 20);
    CHECK(l2p_tax_probe_working_set(0, 1000) == 1u << 20);              /* at least 1 MiB */
}

static void test_fits(void)
{
    /* Exact data on a line recovers its slope; slowdowns made by the model recover P. */
    double s[3] = {10, 20, 30}, k[3] = {100 - 15, 100 - 30, 100 - 45}, c;
    CHECK(l2p_tax_fit_capacity(100, 3, s, k, &c) == L2P_OK);
    CHECK_NEAR(c, 1.5, 1e-12);
    double ws[3] = {60, 80, 120}, sl[3], p;
    for (int i = 0; i < 3; i++)
        sl[i] = (1 + 4.0 * l2p_tax_miss_fraction(ws[i], 100 - 1.5 * s[i])) /
                (1 + 4.0 * l2p_tax_miss_fraction(ws[i], 100));
    CHECK(l2p_tax_fit_penalty(100, 1.5, 100, 3, s, ws, sl, &p) == L2P_OK);
    CHECK_NEAR(p, 4.0, 1e-9);
    for (int i = 0; i < 3; i++) /* the same with C(0) = 90 */
        sl[i] = (1 + 2.0 * l2p_tax_miss_fraction(ws[i], 100 - 1.5 * s[i])) /
                (1 + 2.0 * l2p_tax_miss_fraction(ws[i], 90));
    CHECK(l2p_tax_fit_penalty(100, 1.5, 90, 3, s, ws, sl, &p) == L2P_OK);
    CHECK_NEAR(p, 2.0, 1e-9);
    CHECK(l2p_tax_fit_capacity(100, 0, s, k, &c) == L2P_ERR_VALUE);
    double low[1] = {1};
    CHECK(l2p_tax_fit_penalty(100, 1.5, 100, 1, s, low, sl, &p) == L2P_ERR_VALUE);
    CHECK_NEAR(l2p_tax_miss_fraction(10, 5), 0.5, 1e-12);
    CHECK_NEAR(l2p_tax_miss_fraction(5, 10), 0.0, 1e-12);
    CHECK_NEAR(l2p_tax_miss_fraction(10, -3), 1.0, 1e-12);
}

static void test_measured_knee(void)
{
    double ws[5] = {4, 8, 12, 16, 20}, sl[5] = {1.0, 1.02, 1.4, 2.5, 3.0}, lo, hi;
    CHECK(l2p_tax_measured_knee(5, ws, sl, 1.15, &lo, &hi) == L2P_OK);
    CHECK(lo == 8 && hi == 12);
    CHECK(l2p_tax_measured_knee(5, ws, sl, 0.5, &lo, &hi) == L2P_OK);
    CHECK(lo == 0 && hi == 4);
    CHECK(l2p_tax_measured_knee(5, ws, sl, 9.0, &lo, &hi) == L2P_OK);
    CHECK(lo == 20 && hi == 0);
    double bad[3] = {4, 4, 8};
    CHECK(l2p_tax_measured_knee(3, bad, sl, 1.15, &lo, &hi) == L2P_ERR_VALUE);
    CHECK(l2p_tax_measured_knee(0, ws, sl, 1.15, &lo, &hi) == L2P_ERR_VALUE);
}

static void test_bad_input(void)
{
    l2p_tax_chip h200 = chip(9, 0, 60), old = chip(7, 0, 6), none = chip(9, 0, 0);
    l2p_tax_model m;
    memset(&m, 0x5a, sizeof m);
    CHECK(l2p_tax_predict(&h200, -1, &m) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "set_aside") != NULL);
    CHECK(l2p_tax_predict(&h200, (long long)(37.5 * MIB) + 1, &m) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "(the device's persisting_l2_cache_max_size)"));
    CHECK(m.l2_bytes == 0x5a5a5a5a5a5a5a5aull); /* untouched on failure */
    CHECK(l2p_tax_predict(&old, 0, &m) == L2P_ERR_NOT_SUPPORTED);
    CHECK(l2p_tax_predict(&none, 0, &m) == L2P_ERR_VALUE);
    h200.persisting_max = 0; /* unknown maximum: bounded by the L2 size, and said so */
    CHECK(l2p_tax_predict(&h200, (long long)(61 * MIB), &m) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "[0, 62914560] (the L2 size: "));
    CHECK(l2p_tax_predict(&h200, -1, &m) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "set_aside: -1 bytes is outside [0, 62914560] (the "
                                            "L2 size: persisting_l2_cache_max_size not given)"));
    /* a value the caller could not fit in a long long is named as given */
    CHECK(l2p_tax_check_set_aside(&h200, LLONG_MAX, "1180591620717411303424") == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "set_aside: 1180591620717411303424 bytes is outside"));
    CHECK(l2p_tax_check_set_aside(&h200, 0, NULL) == L2P_OK);
    int kind = -1;
    CHECK(l2p_tax_kind_parse("atomic", &kind) == L2P_OK && kind == L2P_TAX_ATOMIC);
    CHECK(l2p_tax_kind_parse("scatter", &kind) == L2P_ERR_VALUE);
    CHECK(l2p_tax_kind_name(L2P_TAX_KIND_COUNT) == NULL);
    CHECK(strcmp(l2p_tax_kind_name(L2P_TAX_RMW), "rmw") == 0);
}

int main(void)
{
    test_knees();
    test_fit_constants();
    test_slowdowns();
    test_fallback();
    test_granules();
    test_probe_working_set();
    test_fits();
    test_measured_knee();
    test_bad_input();
    printf("test_tax: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
