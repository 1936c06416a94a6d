/* C tests of the tax model's access shapes (l2p_tax_shape.c): the names and probes, the joint
 * fit of the stream's footprint and cap, the miss-cost fit, a shape's prediction from
 * synthetic rows of a known model (its own line, onset, beta, cap, a and P recovered; held-out
 * rows never used), a shape without rows as random writes, and the built-in rows against the
 * bar (held-out knees within 4 MiB) once a shape sweep is written into the core. */
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

static void test_names(void)
{
    int s = -1;
    for (int i = 0; i < L2P_TAX_SHAPE_COUNT; i++) {
        const l2p_tax_shape_probe *p = l2p_tax_shape_probe_of(i);
        CHECK(p && strcmp(p->name, l2p_tax_shape_names[i]) == 0);
        CHECK(strcmp(l2p_tax_shape_name(i), p->name) == 0);
        CHECK(l2p_tax_shape_parse(p->name, &s) == L2P_OK && s == i);
        /* the probe's own check accepts each shape's probe */
        CHECK(l2p_tax_check_shape(p->random, 3 * 32 * 1024, p->row_words, p->arrays) == L2P_OK);
    }
    CHECK(l2p_tax_shape_names[L2P_TAX_SHAPE_COUNT] == NULL);
    CHECK(l2p_tax_shape_probe_of(L2P_TAX_SHAPE_COUNT) == NULL && l2p_tax_shape_name(-1) == NULL);
    CHECK(l2p_tax_shape_probe_of(L2P_TAX_SHAPE_ATOMIC)->kind == L2P_TAX_ATOMIC);
    CHECK(l2p_tax_shape_probe_of(L2P_TAX_SHAPE_ROWS)->row_words * 4 == 128); /* one line */
    CHECK(l2p_tax_shape_probe_of(L2P_TAX_SHAPE_SWEEP)->arrays == 3 &&
          l2p_tax_shape_probe_of(L2P_TAX_SHAPE_SWEEP)->companion_reused);
    CHECK(l2p_tax_shape_parse("scatter", &s) == L2P_ERR_VALUE);
    CHECK(strstr(l2p_last_error()->message, "shape: 'scatter' is not one of random, atomic, "
                                            "rows, sweep") != NULL);
}

/* The probe's shape check: each argument's range, named. */
static void test_check_shape(void)
{
    CHECK(l2p_tax_check_shape(1, 64, 1, 1) == L2P_OK);
    CHECK(l2p_tax_check_shape(1, 64, 32, 1) == L2P_OK);
    CHECK(l2p_tax_check_shape(0, 64, 1, 16) == L2P_OK);
    CHECK(l2p_tax_check_shape(1, 64, 3, 1) == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "row_words: 3 is not one of") != NULL);
    CHECK(l2p_tax_check_shape(1, 64, 64, 1) == L2P_ERR_VALUE);
    CHECK(l2p_tax_check_shape(1, 64, 0, 1) == L2P_ERR_VALUE);
    CHECK(l2p_tax_check_shape(0, 64, 1, 0) == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "arrays: 0 is outside [1, 16]") != NULL);
    CHECK(l2p_tax_check_shape(0, 64, 1, 17) == L2P_ERR_VALUE);
    CHECK(l2p_tax_check_shape(0, 64, 32, 1) == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "pattern='random'") != NULL);
    CHECK(l2p_tax_check_shape(1, 64, 1, 3) == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "pattern='streaming'") != NULL);
    CHECK(l2p_tax_check_shape(1, 48, 32, 1) == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "table: 48 words") != NULL);
    CHECK(l2p_tax_check_shape(0, 2, 1, 3) == L2P_ERR_VALUE);
}

/* beta and the cap fitted together recover the pair the knees were made from. */
static void test_fit_footprint(void)
{
    double c[24], k[24], y[24], beta, cap;
    const double ks[4] = {1, 2, 4, 8};
    size_t n = 0;
    for (int j = 0; j < 6; j++)
        for (int i = 0; i < 4; i++, n++) {
            c[n] = 0.2 + 0.1 * j;
            k[n] = ks[i];
            y[n] = l2p_tax_companion_capacity(c[n], k[n], 0.8, 0.1);
        }
    CHECK(l2p_tax_fit_footprint(n, c, k, y, &beta, &cap) == L2P_OK);
    CHECK_NEAR(beta, 0.8, 1e-3);
    CHECK_NEAR(cap, 0.1, 1e-3);
    /* a cyclic sweep's LRU: the re-read arrays add to the footprint, uncapped (beta 1) */
    for (size_t i = 0; i < n; i++) y[i] = c[i] / (1 + k[i]);
    CHECK(l2p_tax_fit_footprint(n, c, k, y, &beta, &cap) == L2P_OK);
    CHECK_NEAR(beta, 1.0, 1e-3);
    CHECK(cap > 0.5);
    /* a stream that takes nothing: beta 0 */
    for (size_t i = 0; i < n; i++) y[i] = c[i];
    CHECK(l2p_tax_fit_footprint(n, c, k, y, &beta, &cap) == L2P_OK && beta == 0);
    /* the rows' checks are the companion fit's */
    k[3] = 0;
    CHECK(l2p_tax_fit_footprint(n, c, k, y, &beta, &cap) == L2P_ERR_VALUE);
    CHECK(l2p_tax_fit_footprint(0, c, k, y, &beta, &cap) == L2P_ERR_VALUE);
}

static void test_fit_penalty(void)
{
    double ma[5] = {0.1, 0.3, 0.5, 0.6, 0.2}, mb[5] = {0, 0.1, 0.2, 0.4, 0}, h[5], s[5], p;
    for (int i = 0; i < 5; i++) {
        h[i] = 1 + 0.05 * i;
        s[i] = (h[i] + 2.5 * ma[i]) / (h[i] + 2.5 * mb[i]);
    }
    CHECK(l2p_tax_fit_shape_penalty(5, ma, mb, h, s, &p) == L2P_OK);
    CHECK_NEAR(p, 2.5, 1e-12);
    double zero[5] = {0};
    CHECK(l2p_tax_fit_shape_penalty(5, zero, zero, h, s, &p) == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "slowdowns:") != NULL);
    for (int i = 0; i < 5; i++) s[i] = 0.9; /* faster at the set-aside: no negative cost */
    CHECK(l2p_tax_fit_shape_penalty(5, ma, mb, h, s, &p) == L2P_OK && p == 0);
}

/* Synthetic rows of the atomic shape on the H200: capacity L2 - C1 s from 6 granules (none
 * at 4 and 5), beta B, cap F, a A, P P0; odd granules held out. */
#define C1 1.1
#define B 0.5
#define F 0.15
#define A 0.05
#define P0 2.0
#define G 3.75
static l2p_tax_companion_row syn_knees[64];
static l2p_tax_stream_row syn_streams[4];
static l2p_tax_shape_slowdown_row syn_slow[1024];

static double base_mib(void)
{
    l2p_tax_chip h200 = chip(9, 0, 60);
    l2p_tax_model m;
    return l2p_tax_predict(&h200, 0, &m) == L2P_OK ? (double)m.base_bytes / MIB : -1;
}

static double syn_alone(int g)
{
    double line = 60 - C1 * g * G, b = base_mib();
    return g < 6 ? b : line < b ? line : b;
}

static l2p_tax_companion_data synthetic(void)
{
    const double ks[3] = {1, 2, 4};
    size_t n = 0, ns = 0;
    double b = base_mib();
    for (int g = 4; g <= 10; g++) {
        double alone = syn_alone(g);
        int fit = g % 2 == 0 || g == 10;
        for (int i = 0; i < 3; i++) {
            double with = l2p_tax_companion_capacity(alone, ks[i], B, F * 60);
            l2p_tax_companion_row r = {"H200", 9, 0, 60, g * G, ks[i], with - 1, with + 1,
                                       alone - 1, alone + 1, fit, "synthetic",
                                       L2P_TAX_SHAPE_ATOMIC};
            if (g < 6) r.alone_lo_mib = 64, r.alone_hi_mib = 0; /* no tax measured */
            syn_knees[n++] = r;
            for (double ws = 4; ws <= 64; ws += 4) {
                double hit = 1 + A * ks[i];
                double at = hit + P0 * l2p_tax_miss_fraction(ws, g < 6 ? l2p_tax_companion_capacity(
                                                                             b, ks[i], B, F * 60)
                                                                       : with);
                double b0 = hit + P0 * l2p_tax_miss_fraction(
                                           ws, l2p_tax_companion_capacity(b, ks[i], B, F * 60));
                syn_slow[ns++] = (l2p_tax_shape_slowdown_row){
                    "H200", 9, 0, 60, L2P_TAX_SHAPE_ATOMIC, g * G, ks[i], ws, at / b0, fit,
                    "synthetic"};
            }
        }
    }
    for (int i = 0; i < 3; i++)
        syn_streams[i] = (l2p_tax_stream_row){"H200", 9, 0, 60, ks[i], 1 + A * ks[i],
                                              "synthetic", L2P_TAX_SHAPE_ATOMIC};
    return (l2p_tax_companion_data){syn_knees, n, syn_streams, 3, syn_slow, ns};
}

static void test_predict_shape(void)
{
    l2p_tax_companion_data rows = synthetic();
    l2p_tax_chip h200 = chip(9, 0, 60);
    l2p_tax_model m, r;
    double b = base_mib();
    for (int g = 0; g <= 10; g++) {
        long long s = (long long)(g * G * MIB);
        CHECK(l2p_tax_predict_shape(&h200, s, 3.0, L2P_TAX_SHAPE_ATOMIC, &rows, &m) == L2P_OK);
        CHECK(m.shape == L2P_TAX_SHAPE_ATOMIC && m.shape_basis &&
              strcmp(m.shape_basis, "H200") == 0);
        CHECK_NEAR(m.shape_coeff, C1, 1e-9);
        CHECK_NEAR(m.shape_onset, 6 * G / 60, 1e-12);
        CHECK_NEAR(m.companion_footprint, B, 1e-3);
        CHECK_NEAR(m.companion_cap, F, 1e-3);
        CHECK_NEAR(m.stream_cost, A, 1e-12);
        CHECK_NEAR(m.shape_penalty, P0, 1e-2);
        /* k = 3 was never in the rows: the knee from the fitted constants */
        double alone = syn_alone(g < 4 ? 0 : g);
        double want = l2p_tax_companion_capacity(g < 6 ? b : alone, 3, B, F * 60);
        CHECK_NEAR((double)m.knee_bytes / MIB, want, 0.05);
        CHECK(m.taxed == (g >= 6));
        /* below the onset no tax, though random writes pay from 4 granules */
        CHECK(l2p_tax_predict_shape(&h200, s, 3.0, L2P_TAX_SHAPE_RANDOM, &rows, &r) == L2P_OK);
        if (g == 4 || g == 5) CHECK(r.taxed && !m.taxed);
        /* its slowdown: its own P on its own kind, past its knee, diluted by a k */
        for (double ws = 2 * MIB; ws < 70 * MIB; ws += 5 * MIB) {
            double hit = 1 + m.stream_cost * 3;
            double sl = m.taxed ? (hit + m.shape_penalty * l2p_tax_miss_fraction(
                                             ws, (double)m.knee_bytes)) /
                                      (hit + m.shape_penalty * l2p_tax_miss_fraction(
                                                                   ws, (double)m.base_bytes))
                                : 1.0;
            CHECK_NEAR(l2p_tax_slowdown(&m, L2P_TAX_ATOMIC, ws), sl, 1e-12);
        }
    }
    /* the held-out rows are never fitted: garbage in them changes nothing */
    l2p_tax_model before;
    long long s7 = (long long)(7 * G * MIB);
    CHECK(l2p_tax_predict_shape(&h200, s7, 3.0, L2P_TAX_SHAPE_ATOMIC, &rows, &before) == L2P_OK);
    for (size_t i = 0; i < rows.n_knees; i++)
        if (!syn_knees[i].fit) syn_knees[i].knee_lo_mib = 1, syn_knees[i].alone_lo_mib = 2;
    for (size_t i = 0; i < rows.n_slowdowns; i++)
        if (!syn_slow[i].fit) syn_slow[i].slowdown = 9;
    CHECK(l2p_tax_predict_shape(&h200, s7, 3.0, L2P_TAX_SHAPE_ATOMIC, &rows, &m) == L2P_OK);
    CHECK(m.knee_bytes == before.knee_bytes && m.shape_penalty == before.shape_penalty &&
          m.shape_coeff == before.shape_coeff);
    /* ...while a fitted row does */
    rows = synthetic();
    syn_knees[rows.n_knees - 1].knee_lo_mib -= 6;
    syn_knees[rows.n_knees - 1].knee_hi_mib -= 6;
    CHECK(l2p_tax_predict_shape(&h200, s7, 3.0, L2P_TAX_SHAPE_ATOMIC, &rows, &m) == L2P_OK);
    CHECK(m.companion_footprint != before.companion_footprint ||
          m.companion_cap != before.companion_cap);
}

/* A shape without rows of its own is random writes' model, labelled so; random's is the
 * companion model exactly; rows of one shape never feed another. */
static void test_shape_fallback(void)
{
    l2p_tax_companion_data rows = synthetic();
    l2p_tax_chip h200 = chip(9, 0, 60);
    for (int g = 0; g <= 10; g++) {
        long long s = (long long)(g * G * MIB);
        l2p_tax_model a, b, c;
        CHECK(l2p_tax_predict_companion(&h200, s, 3.0, &rows, &a) == L2P_OK);
        CHECK(l2p_tax_predict_shape(&h200, s, 3.0, L2P_TAX_SHAPE_RANDOM, &rows, &b) == L2P_OK);
        CHECK(l2p_tax_predict_shape(&h200, s, 3.0, L2P_TAX_SHAPE_ROWS, &rows, &c) == L2P_OK);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
        CHECK(c.shape == L2P_TAX_SHAPE_ROWS && c.shape_basis == NULL);
        CHECK(c.knee_bytes == a.knee_bytes && c.base_bytes == a.base_bytes);
        for (double ws = 4 * MIB; ws < 64 * MIB; ws += 6 * MIB)
            CHECK(l2p_tax_slowdown(&c, L2P_TAX_WRITE, ws) ==
                  l2p_tax_slowdown(&a, L2P_TAX_WRITE, ws));
    }
    l2p_tax_model m;
    CHECK(l2p_tax_predict_shape(&h200, 0, 0.0, L2P_TAX_SHAPE_COUNT, &rows, &m) == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "shape: 4 is not one of") != NULL);
    CHECK(l2p_tax_predict_shape(&h200, 0, -1.0, L2P_TAX_SHAPE_ATOMIC, &rows, &m) == L2P_ERR_VALUE &&
          strstr(l2p_last_error()->message, "companion:") != NULL);
}

/* The built-in rows of each shape (tools/investigations/tax-fit --write from a shape sweep): every held-out
 * knee within 4 MiB of the model's (the bar), enough of them that it means something; a
 * shape without rows is predicted as random writes. */
static void test_builtin(void)
{
    l2p_tax_companion_data d = l2p_tax_companion_builtin();
    for (int shape = 1; shape < L2P_TAX_SHAPE_COUNT; shape++) {
        size_t usable = 0, checked = 0;
        for (size_t i = 0; i < d.n_knees; i++) {
            const l2p_tax_companion_row *r = &d.knees[i];
            if (r->shape != shape) continue;
            usable += l2p_tax_companion_usable(r, shape);
            if (r->fit) continue;
            l2p_tax_chip c = chip(r->cc_major, r->cc_minor, r->l2_mib);
            l2p_tax_model m;
            CHECK(l2p_tax_predict_shape(&c, (long long)(r->set_aside_mib * MIB), r->companion,
                                        shape, NULL, &m) == L2P_OK);
            double k = (double)m.knee_bytes / MIB;
            int ok = r->knee_hi_mib > 0
                         ? k >= r->knee_lo_mib - 4.0 && k <= r->knee_hi_mib + 4.0 && m.taxed
                         : !m.taxed || k >= r->knee_lo_mib - 4.0;
            if (!ok)
                fprintf(stderr, "%s %s s=%.3f k=%g: knee %.2f MiB, measured (%g, %g]\n",
                        l2p_tax_shape_name(shape), r->chip, r->set_aside_mib, r->companion, k,
                        r->knee_lo_mib, r->knee_hi_mib);
            CHECK(ok);
            checked++;
        }
        l2p_tax_chip h200 = chip(9, 0, 60);
        l2p_tax_model m;
        CHECK(l2p_tax_predict_shape(&h200, (long long)(37.5 * MIB), 1, shape, NULL, &m) ==
              L2P_OK);
        CHECK((m.shape_basis != NULL) == (usable > 0));
        if (usable) CHECK(checked >= 6);
    }
}

int main(void)
{
    test_names();
    test_check_shape();
    test_fit_footprint();
    test_fit_penalty();
    test_predict_shape();
    test_shape_fallback();
    test_builtin();
    printf("test_tax_shape: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
