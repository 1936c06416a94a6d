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

/* Every field and slowdown of two models equal (to the bit). */
static int same_model(const l2p_tax_model *a, const l2p_tax_model *b)
{
    int same = a->l2_bytes == b->l2_bytes && a->set_aside == b->set_aside &&
               a->granule == b->granule && a->capacity_coeff == b->capacity_coeff &&
               a->onset_fraction == b->onset_fraction && a->base_fraction == b->base_fraction &&
               a->base_bytes == b->base_bytes && a->taxed == b->taxed &&
               a->knee_bytes == b->knee_bytes && a->probe_bytes == b->probe_bytes &&
               strcmp(a->basis, b->basis) == 0 && a->exact == b->exact;
    for (int k = 0; k < L2P_TAX_KIND_COUNT; k++) {
        same &= a->penalty[k] == b->penalty[k];
        for (double ws = 1 * MIB; ws <= 200 * MIB; ws += 1.5 * MIB)
            same &= l2p_tax_slowdown(a, k, ws) == l2p_tax_slowdown(b, k, ws);
    }
    return same;
}

/* The H200's beta: the footprint that follows from its writes' miss cost. */
static double h200_footprint(void)
{
    l2p_tax_chip h200 = chip(9, 0, 60);
    l2p_tax_model m;
    if (l2p_tax_predict(&h200, 0, &m) != L2P_OK) return -1;
    return l2p_tax_footprint(m.penalty[L2P_TAX_WRITE]);
}

/* Synthetic companion rows of an H200 whose knees without the stream lie on 60 - coeff s
 * (not the model's own c: the stream's capacity line is the companion sweep's) and whose
 * stream leaves max(C / (1 + beta k), C - cap * 60), costing `cost` per byte; knees exact
 * to the MiB (an interval of +-1 MiB keeps the midpoint on them). 7 granules held out. */
#define SYN_N 12
static l2p_tax_companion_row syn_knees[SYN_N];
static l2p_tax_stream_row syn_streams[3];
static l2p_tax_companion_data synthetic(double cap, double coeff, double cost)
{
    static const double ks[4] = {1, 2, 4, 8}, sg[3] = {5, 7, 10};
    double beta = h200_footprint();
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            double alone = 60 - coeff * sg[j] * 3.75,
                   with = l2p_tax_companion_capacity(alone, ks[i], beta, cap * 60);
            syn_knees[n++] = (l2p_tax_companion_row){"H200", 9, 0, 60, sg[j] * 3.75, ks[i],
                                                     with - 1, with + 1, alone - 1, alone + 1,
                                                     j != 1, "synthetic"};
        }
    for (int i = 0; i < 3; i++)
        syn_streams[i] = (l2p_tax_stream_row){"H200", 9, 0, 60, ks[i], 1 + cost * ks[i],
                                              "synthetic"};
    return (l2p_tax_companion_data){syn_knees, n, syn_streams, 3};
}

/* With no companion stream the model is exactly the one without the term, whatever rows
 * there are; without rows (or none usable) a stream changes nothing. */
static void test_companion_zero_is_todays(void)
{
    l2p_tax_companion_data rows = synthetic(0.12, 1.35, 0.1);
    l2p_tax_companion_data none = {NULL, 0, NULL, 0};
    l2p_tax_chip chips[4] = {chip(9, 0, 60), chip(9, 0, 50), chip(9, 0, 96), chip(8, 0, 40)};
    for (int c = 0; c < 4; c++)
        for (int g = 0; g <= 10; g++) {
            long long s = (long long)(g * (double)chips[c].l2_bytes / 16);
            l2p_tax_model today, zero, builtin, off;
            CHECK(l2p_tax_predict(&chips[c], s, &today) == L2P_OK);
            CHECK(l2p_tax_predict_companion(&chips[c], s, 0.0, &rows, &zero) == L2P_OK);
            CHECK(l2p_tax_predict_companion(&chips[c], s, 0.0, NULL, &builtin) == L2P_OK);
            CHECK(l2p_tax_predict_companion(&chips[c], s, 3.0, &none, &off) == L2P_OK);
            CHECK(same_model(&today, &zero) && same_model(&today, &builtin));
            CHECK(same_model(&today, &off) && off.companion_basis == NULL);
            CHECK(zero.companion == 0 && zero.companion_bytes == 0 && zero.stream_cost == 0);
        }
}

/* The stream's miss fraction: LRU's 1 - C / h without it; with it the root of
 * h (1 - m) + min(g k h ln(1/m), cap) = C, which rises smoothly before C / (1 + beta k)
 * and meets the knee's m* = 0.15 / P there; a cap that binds gives 1 - (C - cap) / h. */
static void test_miss_fraction_stream(void)
{
    const double g = L2P_TAX_WORD_PER_LINE, P = 5.0, beta = l2p_tax_footprint(P);
    CHECK_NEAR(beta, g * log(5.0 / 0.15), 1e-15);
    CHECK(l2p_tax_footprint(0.15) < 1e-12 && l2p_tax_footprint(0.1) == 0);
    for (double h = 1; h < 100; h += 3.7) {
        CHECK(l2p_tax_miss_fraction_stream(h, 30, 0, 5) == l2p_tax_miss_fraction(h, 30));
        double m = l2p_tax_miss_fraction_stream(h, 30, 3, 1e9);
        if (m > 0) { /* the equation holds at the root */
            CHECK_NEAR(h * (1 - m) + g * 3 * h * log(1 / m), 30, 1e-6 * 30);
        }
        CHECK(m >= l2p_tax_miss_fraction(h, 30)); /* the stream only adds misses */
        CHECK(l2p_tax_miss_fraction_stream(h + 1, 30, 3, 1e9) >= m);
    }
    /* the knee: m approaches 0.15 / P there (short of it by the 1 - m the k = 0 knee also
     * leaves out: m e^(m / g k) = 0.15 / P), and is negligible at half of it */
    double knee = 30 / (1 + beta * 3), m = l2p_tax_miss_fraction_stream(knee, 30, 3, 1e9);
    CHECK_NEAR(m * exp(m / (g * 3)), 0.15 / P, 1e-6);
    CHECK(m > 0.6 * 0.15 / P && m < 0.15 / P);
    CHECK(l2p_tax_miss_fraction_stream(0.5 * knee, 30, 3, 1e9) < 1e-6);
    /* a binding cap: the table sees C - cap; the whole stream fitting: no miss */
    CHECK_NEAR(l2p_tax_miss_fraction_stream(40, 30, 8, 4), 1 - 26.0 / 40, 1e-9);
    CHECK(l2p_tax_miss_fraction_stream(20, 30, 8, 4) == 0);
    CHECK(l2p_tax_miss_fraction_stream(20, 0, 8, 4) == 1);
    CHECK(l2p_tax_miss_fraction_stream(0, 30, 8, 4) == 0);
    CHECK_NEAR(l2p_tax_companion_capacity(30, 3, beta, 100), 30 / (1 + 3 * beta), 1e-12);
    CHECK_NEAR(l2p_tax_companion_capacity(30, 8, beta, 4), 26, 1e-12);
    CHECK(l2p_tax_companion_capacity(3, 8, beta, 4) == 3 / (1 + 8 * beta));
    CHECK(l2p_tax_companion_capacity(30, 0, beta, 4) == 30);
}

/* The fit recovers the cap it was made from; the prediction applies the constants. */
static void test_companion_fit_and_predict(void)
{
    l2p_tax_companion_data rows = synthetic(0.12, 1.35, 0.1);
    double beta = h200_footprint(), c[SYN_N], k[SYN_N], y[SYN_N], cap, cost;
    CHECK(beta > 0.09 && beta < 0.13); /* ln(P / 0.15) / 32 with the H200's P of about 5 */
    for (size_t i = 0; i < rows.n_knees; i++) {
        const l2p_tax_companion_row *r = &rows.knees[i];
        c[i] = 0.5 * (r->alone_lo_mib + r->alone_hi_mib) / 60;
        k[i] = r->companion;
        y[i] = 0.5 * (r->knee_lo_mib + r->knee_hi_mib) / 60;
    }
    CHECK(l2p_tax_fit_companion(rows.n_knees, c, k, y, beta, &cap) == L2P_OK);
    CHECK_NEAR(cap, 0.12, 1e-12);
    /* no row capped: no cap fits better than none */
    for (size_t i = 0; i < rows.n_knees; i++) y[i] = c[i] / (1 + beta * k[i]);
    CHECK(l2p_tax_fit_companion(rows.n_knees, c, k, y, beta, &cap) == L2P_OK && cap == 1);
    /* every row capped at 0.05 of the L2 (beta large enough that the cap binds everywhere) */
    for (size_t i = 0; i < rows.n_knees; i++) y[i] = c[i] - 0.05;
    CHECK(l2p_tax_fit_companion(rows.n_knees, c, k, y, 10, &cap) == L2P_OK);
    CHECK_NEAR(cap, 0.05, 1e-12);
    double r[3] = {1.1, 1.2, 1.4};
    CHECK(l2p_tax_fit_stream_cost(3, (double[]){1, 1, 1}, r, &cost) == L2P_OK);
    CHECK_NEAR(cost, (0.1 + 0.2 + 0.4) / 3, 1e-12);

    l2p_tax_chip h200 = chip(9, 0, 60), h100 = chip(9, 0, 50);
    l2p_tax_model today, m;
    long long s = (long long)(7 * 3.75 * MIB);
    CHECK(l2p_tax_predict(&h200, s, &today) == L2P_OK);
    CHECK(l2p_tax_predict_companion(&h200, s, 3.0, &rows, &m) == L2P_OK);
    CHECK(m.companion_basis && strcmp(m.companion_basis, "H200") == 0);
    CHECK_NEAR(m.companion_footprint, beta, 1e-15);
    CHECK_NEAR(m.companion_cap, 0.12, 1e-12);
    CHECK_NEAR(m.companion_coeff, 1.35, 1e-12); /* the rows' own line, not the chip's c */
    CHECK(today.capacity_coeff < 1.3 && m.capacity_coeff == today.capacity_coeff);
    CHECK_NEAR(m.stream_cost, 0.1, 1e-12);
    double alone = (60 - 1.35 * 7 * 3.75) * MIB, knee = alone / (1 + 3 * beta);
    CHECK_NEAR((double)m.alone_knee_bytes, alone, 1.0);
    CHECK_NEAR((double)m.knee_bytes, knee, 1.0);
    CHECK_NEAR((double)m.companion_bytes, alone - knee, 2.0);
    /* limit 0: the same rule on C(0), here capped */
    CHECK_NEAR((double)m.base_bytes, (double)today.base_bytes - 0.12 * 60 * MIB, 2.0);
    CHECK(m.taxed == today.taxed && m.probe_bytes == today.probe_bytes);
    /* the slowdown: the stream's misses on its line, diluted by its own cost */
    double p = m.penalty[L2P_TAX_WRITE], cap_b = 0.12 * 60 * MIB;
    for (double ws = 4 * MIB; ws < 70 * MIB; ws += 3 * MIB) {
        double want =
            (1.3 + p * l2p_tax_miss_fraction_stream(ws, (double)m.alone_knee_bytes, 3, cap_b)) /
            (1.3 + p * l2p_tax_miss_fraction_stream(ws, (double)m.alone_base_bytes, 3, cap_b));
        CHECK_NEAR(l2p_tax_slowdown(&m, L2P_TAX_WRITE, ws), want, 1e-12);
    }
    /* it reaches the knee's threshold (1.15, diluted) at the knee, and pays well above it */
    double at_knee = l2p_tax_slowdown(&m, L2P_TAX_WRITE, knee);
    CHECK(at_knee > 1.05 && at_knee <= 1.15);
    CHECK(l2p_tax_slowdown(&m, L2P_TAX_WRITE, 24 * MIB) > 1.5);
    CHECK_NEAR(l2p_tax_slowdown(&today, L2P_TAX_WRITE, 24 * MIB), 1.0, 1e-12);
    /* held-out rows (the middle set-aside) on the model's knee */
    for (size_t i = 0; i < rows.n_knees; i++) {
        const l2p_tax_companion_row *r = &rows.knees[i];
        CHECK(l2p_tax_predict_companion(&h200, (long long)(r->set_aside_mib * MIB), r->companion,
                                        &rows, &m) == L2P_OK);
        CHECK(off_interval((double)m.knee_bytes / MIB, r->knee_lo_mib, r->knee_hi_mib) <= 1e-6);
    }
    /* an unmeasured chip: its own line and beta, the closest chip's cap share */
    CHECK(l2p_tax_predict(&h100, s, &today) == L2P_OK);
    CHECK(l2p_tax_predict_companion(&h100, s, 3.0, &rows, &m) == L2P_OK);
    CHECK(strcmp(m.companion_basis, "H200") == 0 && m.companion_coeff == today.capacity_coeff);
    double b100 = l2p_tax_footprint(today.penalty[L2P_TAX_WRITE]);
    CHECK_NEAR(m.companion_footprint, b100, 1e-15);
    CHECK_NEAR((double)m.knee_bytes,
               l2p_tax_companion_capacity((double)today.knee_bytes, 3, b100, 0.12 * 50 * MIB), 2.0);
    /* a stream far larger than the written lines leaves them next to nothing */
    rows = synthetic(0.25, 1.35, 0.1);
    CHECK(l2p_tax_predict_companion(&h200, (long long)(37.5 * MIB), 1e5, &rows, &m) == L2P_OK);
    CHECK(m.knee_bytes < 4096 && m.companion_bytes > 9 * MIB);
}

/* The built-in rows (tools/investigations/tax-fit writes them): every held-out row within 4 MiB of the
 * model's knee, and enough of them that the bar means something (the H200's sweep holds 22
 * with a knee); none yet: a stream changes nothing. */
static void test_companion_builtin(void)
{
    l2p_tax_companion_data d = l2p_tax_companion_builtin();
    size_t usable = 0, checked = 0;
    for (size_t i = 0; i < d.n_knees; i++) {
        const l2p_tax_companion_row *r = &d.knees[i];
        if (r->shape != L2P_TAX_SHAPE_RANDOM) continue; /* the shapes' rows: test_tax_shape.c */
        usable += r->fit && r->knee_hi_mib > 0 && r->alone_hi_mib > 0;
        if (r->fit) continue;
        l2p_tax_chip c = chip(r->cc_major, r->cc_minor, r->l2_mib);
        l2p_tax_model m;
        CHECK(l2p_tax_predict_companion(&c, (long long)(r->set_aside_mib * MIB), r->companion,
                                        NULL, &m) == L2P_OK);
        double k = (double)m.knee_bytes / MIB;
        int ok = r->knee_hi_mib > 0 ? off_interval(k, r->knee_lo_mib, r->knee_hi_mib) <= 4.0
                                    : k >= r->knee_lo_mib - 4.0;
        if (!ok)
            fprintf(stderr, "companion %s s=%.3f k=%g: knee %.2f MiB, measured (%g, %g]\n",
                    r->chip, r->set_aside_mib, r->companion, k, r->knee_lo_mib, r->knee_hi_mib);
        CHECK(ok);
        checked += r->knee_hi_mib > 0;
    }
    if (usable) CHECK(checked >= 20);
    if (!usable) {
        l2p_tax_chip h200 = chip(9, 0, 60);
        l2p_tax_model a, b;
        CHECK(l2p_tax_predict(&h200, (long long)(37.5 * MIB), &a) == L2P_OK);
        CHECK(l2p_tax_predict_companion(&h200, (long long)(37.5 * MIB), 3, NULL, &b) == L2P_OK);
        CHECK(same_model(&a, &b) && b.companion_basis == NULL);
    }
}

static void test_companion_bad_input(void)
{
    l2p_tax_chip h200 = chip(9, 0, 60);
    l2p_tax_model m;
    CHECK(l2p_tax_predict_companion(&h200, 0, -1, NULL, &m) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "companion: -1 bytes streamed per byte written is "
                                            "outside [0, 1e+06]"));
    CHECK(l2p_tax_predict_companion(&h200, 0, NAN, NULL, &m) == L2P_ERR_VALUE);
    CHECK(l2p_tax_predict_companion(&h200, 0, 2e6, NULL, &m) == L2P_ERR_VALUE);
    CHECK(l2p_tax_predict_companion(&h200, -1, 1, NULL, &m) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "set_aside"));
    double k[2] = {1, 0}, c[2] = {0.5, 0.5}, y[2] = {0.4, 0.4}, cap;
    CHECK(l2p_tax_fit_companion(0, c, k, y, 0.1, &cap) == L2P_ERR_VALUE);
    CHECK(l2p_tax_fit_companion(2, c, k, y, 0.1, &cap) == L2P_ERR_VALUE); /* k = 0 */
    CHECK(strstr(l2p_last_error()->message, "row 1 has k = 0"));
    k[1] = 2;
    c[0] = 0;
    CHECK(l2p_tax_fit_companion(2, c, k, y, 0.1, &cap) == L2P_ERR_VALUE); /* capacity 0 */
    CHECK(strstr(l2p_last_error()->message, "row 0 has k = 1, capacity = 0"));
    c[0] = 0.5;
    CHECK(l2p_tax_fit_companion(2, c, k, y, -1, &cap) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "footprint: -1 is not a finite number >= 0"));
    CHECK(l2p_tax_fit_companion(2, c, k, y, INFINITY, &cap) == L2P_ERR_VALUE);
    CHECK(l2p_tax_fit_stream_cost(1, &k[1], y, &cap) == L2P_OK);
    double zero = 0;
    CHECK(l2p_tax_fit_stream_cost(1, &zero, y, &cap) == L2P_ERR_VALUE);
}

/* A fake workload for the measurement loop: samples `base` ms at limit 0 and ratio * base at
 * the set-aside, with a deterministic spread; the order of the calls is recorded. */
typedef struct {
    double base, ratio, spread;
    int calls, fail_at;
    int order[64];
    unsigned x;
} fake_work;

static l2p_status fake_eval(void *ctx, int at, size_t n, double *samples)
{
    fake_work *w = ctx;
    if (w->calls < 64) w->order[w->calls] = at;
    if (++w->calls == w->fail_at) return l2p_fail(L2P_ERR_CALLBACK, "the work failed");
    for (size_t i = 0; i < n; i++) {
        w->x = w->x * 1103515245u + 12345u;
        double u = (double)(w->x >> 8) / (double)(1u << 24) - 0.5;
        samples[i] = w->base * (at ? w->ratio : 1.0) * (1 + w->spread * u);
    }
    return L2P_OK;
}

static void test_measure_loop(void)
{
    l2p_tax_measure_options o;
    l2p_tax_measure_result r;
    l2p_tax_measure_options_default(&o);
    CHECK(o.repeat == 5 && o.min_rounds == 3 && o.max_rounds == 20 && o.tolerance == 0.02);
    /* a steady 1.5x: converged after the first rounds that may decide */
    fake_work w = {1.0, 1.5, 0.002, 0, 0, {0}, 1};
    CHECK(l2p_tax_measure(&o, fake_eval, &w, &r) == L2P_OK);
    CHECK(r.rounds == 3 && r.n == 15 && r.interval.converged);
    CHECK_NEAR(r.interval.slowdown, 1.5, 0.01);
    CHECK(r.interval.low <= r.interval.slowdown && r.interval.slowdown <= r.interval.high);
    CHECK(r.interval.high <= 1.02 * r.interval.slowdown);
    CHECK_NEAR(r.interval.base_ms, 1.0, 0.01);
    CHECK_NEAR(r.interval.at_ms, 1.5, 0.01);
    /* the order alternates: limit 0 first, then the set-aside first, ... */
    int want[6] = {0, 1, 1, 0, 0, 1};
    for (int i = 0; i < 6; i++) CHECK(w.order[i] == want[i]);
    for (size_t i = 0; i < r.n; i++) CHECK(r.base[i] < 1.01 && r.at[i] > 1.49);
    l2p_tax_measure_result_free(&r);
    /* noise too wide for +-2 %: the cap ends it, not converged */
    fake_work noisy = {1.0, 1.2, 0.8, 0, 0, {0}, 7};
    o.max_rounds = 6;
    CHECK(l2p_tax_measure(&o, fake_eval, &noisy, &r) == L2P_OK);
    CHECK(r.rounds == 6 && !r.interval.converged && noisy.calls == 12);
    l2p_tax_measure_result_free(&r);
    /* the work fails in round 2: its error, nothing left allocated */
    fake_work failing = {1.0, 1.2, 0.0, 0, 3, {0}, 1};
    memset(&r, 0x5a, sizeof r);
    CHECK(l2p_tax_measure(&o, fake_eval, &failing, &r) == L2P_ERR_CALLBACK);
    CHECK(failing.calls == 3 && r.rounds == 0x5a5a5a5a5a5a5a5aull);
    /* bad options name themselves */
    l2p_tax_measure_options bad = o;
    bad.min_rounds = 1;
    CHECK(l2p_tax_measure(&bad, fake_eval, &w, &r) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "min_rounds: 1 is outside [2, max_rounds = 6]"));
    bad = o, bad.max_rounds = 1001;
    CHECK(l2p_tax_measure_check(&bad) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "max_rounds: 1001 is outside [2, 1000]"));
    bad = o, bad.repeat = 0;
    CHECK(l2p_tax_measure_check(&bad) == L2P_ERR_VALUE);
    bad = o, bad.tolerance = 0;
    CHECK(l2p_tax_measure_check(&bad) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "tolerance: 0 is outside (0, 1)"));
    bad = o, bad.confidence = 0.5;
    CHECK(l2p_tax_measure_check(&bad) == L2P_ERR_VALUE);
    /* the interval alone */
    double b[4] = {1, 1.01, 0.99, 1}, a[4] = {2, 2.02, 1.98, 2};
    l2p_tax_interval iv;
    CHECK(l2p_tax_slowdown_interval(b, 4, a, 4, 2, 0.95, 0.05, 1, &iv) == L2P_OK);
    CHECK_NEAR(iv.slowdown, 2.0, 1e-12);
    CHECK(l2p_tax_slowdown_interval(b, 0, a, 4, 1, 0.95, 0.05, 1, &iv) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "base: no samples"));
    CHECK(l2p_tax_slowdown_interval(b, 4, a, 4, 3, 0.95, 0.05, 1, &iv) == L2P_ERR_VALUE);
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
    test_companion_zero_is_todays();
    test_miss_fraction_stream();
    test_companion_fit_and_predict();
    test_companion_builtin();
    test_companion_bad_input();
    test_measure_loop();
    printf("test_tax: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
