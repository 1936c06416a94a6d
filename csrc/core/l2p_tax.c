/* The set-aside tax model (see l2p_tax.h for the model and its reading). */
#include "l2p_tax.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MIB 1048576.0

const char *const l2p_tax_kind_names[L2P_TAX_KIND_COUNT + 1] = {"read", "write", "rmw", "atomic",
                                                                NULL};

const char *l2p_tax_kind_name(int kind)
{
    return kind >= 0 && kind < L2P_TAX_KIND_COUNT ? l2p_tax_kind_names[kind] : NULL;
}

l2p_status l2p_tax_kind_parse(const char *name, int *kind)
{
    for (int i = 0; i < L2P_TAX_KIND_COUNT; i++)
        if (strcmp(name, l2p_tax_kind_names[i]) == 0) {
            *kind = i;
            return L2P_OK;
        }
    return l2p_fail(L2P_ERR_VALUE, "kind: '%s' is not one of read, write, rmw, atomic", name);
}

/* ---- measurements ----
 * Knees: random 4-byte writes, the first working set (4 MiB steps) 1.15x slower than at limit
 * 0 (hi 0: none up to lo). The fit uses 3, 4, 6 and 10 granules of each chip (the largest
 * set-aside without a tax, the smallest with one, a middle one and the maximum); the others
 * are held out (tests/c/test_tax.c checks them). */
#define FIX_H200 "the integrator's full sweep on the H200, 2026-11-22, driver 580.159.04, CUDA 13.0"
#define FIX_H100 "the integrator's full sweep on the H100, 2026-11-22, driver 580.159.04, CUDA 13.0"
static const l2p_tax_knee_row knee_rows[] = {
    {"H200", 9, 0, 60, 3.75, 68, 0, 0, FIX_H200},
    {"H200", 9, 0, 60, 7.5, 68, 0, 0, FIX_H200},
    {"H200", 9, 0, 60, 11.25, 68, 0, 1, FIX_H200},
    {"H200", 9, 0, 60, 15, 44, 48, 1, FIX_H200},
    {"H200", 9, 0, 60, 18.75, 32, 36, 0, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 28, 32, 1, FIX_H200},
    {"H200", 9, 0, 60, 26.25, 24, 28, 0, FIX_H200},
    {"H200", 9, 0, 60, 30, 20, 24, 0, FIX_H200},
    {"H200", 9, 0, 60, 33.75, 12, 16, 0, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 8, 12, 1, FIX_H200},
    {"H100", 9, 0, 50, 3.125, 56, 0, 0, FIX_H100},
    {"H100", 9, 0, 50, 6.25, 56, 0, 0, FIX_H100},
    {"H100", 9, 0, 50, 9.375, 56, 0, 1, FIX_H100},
    {"H100", 9, 0, 50, 12.5, 36, 40, 1, FIX_H100},
    {"H100", 9, 0, 50, 15.625, 28, 32, 0, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 24, 28, 1, FIX_H100},
    {"H100", 9, 0, 50, 21.875, 20, 24, 0, FIX_H100},
    {"H100", 9, 0, 50, 25, 16, 20, 0, FIX_H100},
    {"H100", 9, 0, 50, 28.125, 12, 16, 0, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 8, 12, 1, FIX_H100},
};

/* Writes at limit 0: the first working set 1.15x slower than over small tables. */
static const l2p_tax_base_row base_rows[] = {
    {"H200", 9, 0, 60, 48, 52, FIX_H200},
    {"H100", 9, 0, 50, 44, 48, FIX_H100},
};

/* Slowdowns against limit 0 at the fitted set-asides (6 and 10 granules), per kind. */
static const l2p_tax_slowdown_row slowdown_rows[] = {
    {"H200", 9, 0, 60, 22.5, 16, L2P_TAX_WRITE, 1.00, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 32, L2P_TAX_WRITE, 1.29, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 48, L2P_TAX_WRITE, 2.01, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 16, L2P_TAX_RMW, 1.00, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 32, L2P_TAX_RMW, 1.19, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 48, L2P_TAX_RMW, 1.73, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 16, L2P_TAX_ATOMIC, 1.00, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 32, L2P_TAX_ATOMIC, 1.02, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 48, L2P_TAX_ATOMIC, 1.17, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 16, L2P_TAX_READ, 1.00, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 32, L2P_TAX_READ, 1.00, FIX_H200},
    {"H200", 9, 0, 60, 22.5, 48, L2P_TAX_READ, 1.00, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 16, L2P_TAX_WRITE, 3.06, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 32, L2P_TAX_WRITE, 4.48, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 48, L2P_TAX_WRITE, 4.78, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 16, L2P_TAX_RMW, 2.28, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 32, L2P_TAX_RMW, 3.43, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 48, L2P_TAX_RMW, 3.61, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 16, L2P_TAX_ATOMIC, 1.10, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 32, L2P_TAX_ATOMIC, 1.57, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 48, L2P_TAX_ATOMIC, 2.01, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 16, L2P_TAX_READ, 1.00, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 32, L2P_TAX_READ, 1.04, FIX_H200},
    {"H200", 9, 0, 60, 37.5, 48, L2P_TAX_READ, 1.33, FIX_H200},
    {"H100", 9, 0, 50, 18.75, 16, L2P_TAX_WRITE, 1.00, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 32, L2P_TAX_WRITE, 1.55, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 48, L2P_TAX_WRITE, 1.76, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 16, L2P_TAX_RMW, 1.01, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 32, L2P_TAX_RMW, 1.45, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 48, L2P_TAX_RMW, 1.71, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 16, L2P_TAX_ATOMIC, 1.00, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 32, L2P_TAX_ATOMIC, 1.01, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 48, L2P_TAX_ATOMIC, 1.17, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 16, L2P_TAX_READ, 1.00, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 32, L2P_TAX_READ, 1.00, FIX_H100},
    {"H100", 9, 0, 50, 18.75, 48, L2P_TAX_READ, 1.00, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 16, L2P_TAX_WRITE, 3.51, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 32, L2P_TAX_WRITE, 4.60, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 48, L2P_TAX_WRITE, 3.27, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 16, L2P_TAX_RMW, 2.61, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 32, L2P_TAX_RMW, 3.51, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 48, L2P_TAX_RMW, 3.24, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 16, L2P_TAX_ATOMIC, 1.13, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 32, L2P_TAX_ATOMIC, 1.69, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 48, L2P_TAX_ATOMIC, 1.78, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 16, L2P_TAX_READ, 1.00, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 32, L2P_TAX_READ, 1.11, FIX_H100},
    {"H100", 9, 0, 50, 31.25, 48, L2P_TAX_READ, 1.29, FIX_H100},
};

#define N_KNEE (sizeof knee_rows / sizeof knee_rows[0])
#define N_SLOW (sizeof slowdown_rows / sizeof slowdown_rows[0])
#define N_BASE (sizeof base_rows / sizeof base_rows[0])

const l2p_tax_knee_row *l2p_tax_knee_rows(size_t *n)
{
    *n = N_KNEE;
    return knee_rows;
}

const l2p_tax_base_row *l2p_tax_base_rows(size_t *n)
{
    *n = N_BASE;
    return base_rows;
}

const l2p_tax_slowdown_row *l2p_tax_slowdown_rows(size_t *n)
{
    *n = N_SLOW;
    return slowdown_rows;
}

/* ---- the model's arithmetic ---- */

double l2p_tax_miss_fraction(double ws, double cap)
{
    if (ws <= 0 || ws <= cap) return 0.0;
    return 1.0 - (cap > 0 ? cap : 0.0) / ws;
}

l2p_status l2p_tax_fit_capacity(double l2, size_t n, const double *set_aside,
                                const double *knee, double *coeff)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += set_aside[i] * (l2 - knee[i]);
        den += set_aside[i] * set_aside[i];
    }
    if (den <= 0) return l2p_fail(L2P_ERR_VALUE, "set_aside: the fit needs a nonzero set-aside");
    *coeff = num / den;
    return L2P_OK;
}

/* slowdown S = (1 + P m) / (1 + P m0)  <=>  P (m - S m0) = S - 1: least squares in P. */
static void penalty_terms(double cap, double base, double ws, double slowdown, double *num,
                          double *den)
{
    double a = l2p_tax_miss_fraction(ws, cap) - slowdown * l2p_tax_miss_fraction(ws, base);
    *num += a * (slowdown - 1.0);
    *den += a * a;
}

l2p_status l2p_tax_fit_penalty(double l2, double coeff, double base, size_t n,
                               const double *set_aside, const double *ws,
                               const double *slowdown, double *penalty)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double cap = l2 - coeff * set_aside[i];
        penalty_terms(cap < base ? cap : base, base, ws[i], slowdown[i], &num, &den);
    }
    if (den <= 0)
        return l2p_fail(L2P_ERR_VALUE, "ws: no measured working set lies above the knee");
    *penalty = num / den > 0 ? num / den : 0.0;
    return L2P_OK;
}

/* ---- choosing the rows of a chip ---- */

static int same_chip(int major, int minor, double l2_mib, int cc_major, int cc_minor, double l2)
{
    return major == cc_major && minor == cc_minor && fabs(l2_mib - l2) < 0.5;
}

/* Distance of a measured chip from the asked one: compute capability first, then L2 size. */
static double chip_distance(int major, int minor, double l2_mib, const l2p_tax_chip *c)
{
    double cc = fabs((major * 10.0 + minor) - (c->cc_major * 10.0 + c->cc_minor));
    return cc * 100.0 + fabs(log(l2_mib / ((double)c->l2_bytes / MIB)));
}

/* The measured chip (a knee row) closest to `c`. */
static const l2p_tax_knee_row *closest_chip(const l2p_tax_chip *c)
{
    const l2p_tax_knee_row *best = &knee_rows[0];
    for (size_t i = 1; i < N_KNEE; i++)
        if (chip_distance(knee_rows[i].cc_major, knee_rows[i].cc_minor, knee_rows[i].l2_mib, c) <
            chip_distance(best->cc_major, best->cc_minor, best->l2_mib, c))
            best = &knee_rows[i];
    return best;
}

/* A chip's dimensionless constants. */
typedef struct {
    double coeff;          /* c */
    double onset_fraction; /* o */
    double base_fraction;  /* b */
} chip_fit;

static int row_of(const l2p_tax_knee_row *r, const l2p_tax_knee_row *chip)
{
    return same_chip(r->cc_major, r->cc_minor, r->l2_mib, chip->cc_major, chip->cc_minor,
                     chip->l2_mib);
}

/* c from the fit rows with a knee; o: the smallest fitted set-aside with a knee (every
 * fitted one below it has none); b from the chip's limit-0 row (1 when it has none). */
static l2p_status fit_chip(const l2p_tax_knee_row *chip, chip_fit *out)
{
    double s[N_KNEE], k[N_KNEE], onset = 1e300;
    size_t n = 0;
    for (size_t i = 0; i < N_KNEE; i++) {
        const l2p_tax_knee_row *r = &knee_rows[i];
        if (!r->fit || !row_of(r, chip) || r->knee_hi_mib <= 0) continue;
        s[n] = r->set_aside_mib;
        k[n++] = 0.5 * (r->knee_lo_mib + r->knee_hi_mib);
        if (r->set_aside_mib < onset) onset = r->set_aside_mib;
    }
    L2P_TRY(l2p_tax_fit_capacity(chip->l2_mib, n, s, k, &out->coeff));
    out->onset_fraction = onset / chip->l2_mib;
    out->base_fraction = 1.0;
    for (size_t i = 0; i < N_BASE; i++)
        if (same_chip(base_rows[i].cc_major, base_rows[i].cc_minor, base_rows[i].l2_mib,
                      chip->cc_major, chip->cc_minor, chip->l2_mib))
            out->base_fraction = 0.5 * (base_rows[i].knee_lo_mib + base_rows[i].knee_hi_mib) /
                                 chip->l2_mib;
    return L2P_OK;
}

/* C(s) and C(0) of a chip of l2 bytes (any unit) with constants f. */
static double capacity(const chip_fit *f, double l2, double s)
{
    double base = f->base_fraction * l2, cap = l2 - f->coeff * s;
    if (s < f->onset_fraction * l2 * (1 - 1e-9)) return base;
    return cap < 0 ? 0 : cap < base ? cap : base;
}

/* P of `kind` from the chip's own rows (all_chips 0) or every chip's (1), each row against
 * its own chip's constants. *found is 0 when no row applies. */
static l2p_status fit_kind_penalty(const l2p_tax_knee_row *chip, int kind, int all_chips,
                                   double *penalty, int *found)
{
    double num = 0, den = 0;
    *found = 0;
    for (size_t i = 0; i < N_SLOW; i++) {
        const l2p_tax_slowdown_row *r = &slowdown_rows[i];
        const l2p_tax_knee_row *own = chip;
        chip_fit f;
        if (r->kind != kind) continue;
        if (!same_chip(r->cc_major, r->cc_minor, r->l2_mib, chip->cc_major, chip->cc_minor,
                       chip->l2_mib)) {
            if (!all_chips) continue;
            l2p_tax_chip c = {r->cc_major, r->cc_minor, (size_t)(r->l2_mib * MIB), 0, 0};
            own = closest_chip(&c);
        }
        L2P_TRY(fit_chip(own, &f));
        penalty_terms(capacity(&f, r->l2_mib, r->set_aside_mib), capacity(&f, r->l2_mib, 0),
                      r->ws_mib, r->slowdown, &num, &den);
        *found = 1;
    }
    *penalty = den > 0 && num > 0 ? num / den : 0.0;
    return L2P_OK;
}

/* A kind without rows of its own chip takes every chip's; read-modify-write without rows
 * takes the write's (its lines are dirty the same way). */
static l2p_status chip_penalties(const l2p_tax_knee_row *chip, double *penalty)
{
    int found;
    for (int k = 0; k < L2P_TAX_KIND_COUNT; k++) {
        L2P_TRY(fit_kind_penalty(chip, k, 0, &penalty[k], &found));
        if (!found && k == L2P_TAX_RMW) {
            penalty[k] = penalty[L2P_TAX_WRITE];
            continue;
        }
        if (!found) L2P_TRY(fit_kind_penalty(chip, k, 1, &penalty[k], &found));
    }
    return L2P_OK;
}

/* ---- the prediction ---- */

l2p_status l2p_tax_check_set_aside(const l2p_tax_chip *c, long long set_aside,
                                   const char *as_given)
{
    size_t hi = c->persisting_max ? c->persisting_max : c->l2_bytes;
    char num[32];
    if (!as_given && set_aside >= 0 && (unsigned long long)set_aside <= hi) return L2P_OK;
    if (!as_given) {
        snprintf(num, sizeof num, "%lld", set_aside);
        as_given = num;
    }
    return l2p_fail(L2P_ERR_VALUE, "set_aside: %s bytes is outside [0, %zu] (%s)", as_given, hi,
                    c->persisting_max ? "the device's persisting_l2_cache_max_size"
                                      : "the L2 size: persisting_l2_cache_max_size not given");
}

static l2p_status check_chip(const l2p_tax_chip *c, long long set_aside)
{
    if (c->cc_major < 8)
        return l2p_fail(L2P_ERR_NOT_SUPPORTED, "compute capability %d.%d has no persisting L2 "
                        "(8.0 or newer needed)", c->cc_major, c->cc_minor);
    if (c->l2_bytes == 0) return l2p_fail(L2P_ERR_VALUE, "l2_cache_size: must be > 0");
    return l2p_tax_check_set_aside(c, set_aside, NULL);
}

l2p_status l2p_tax_predict(const l2p_tax_chip *c, long long set_aside, l2p_tax_model *out)
{
    L2P_TRY(check_chip(c, set_aside));
    const l2p_tax_knee_row *basis = closest_chip(c);
    chip_fit f;
    l2p_tax_model m = {0};
    m.l2_bytes = c->l2_bytes;
    m.granule = c->granule ? c->granule : c->l2_bytes / 16;
    /* The driver grants whole granules: the hardware sets aside the rounded-up size. */
    m.set_aside = (size_t)((set_aside + (long long)m.granule - 1) / (long long)m.granule) *
                  m.granule;
    L2P_TRY(fit_chip(basis, &f));
    L2P_TRY(chip_penalties(basis, m.penalty));
    m.capacity_coeff = f.coeff;
    m.onset_fraction = f.onset_fraction;
    m.base_fraction = f.base_fraction;
    m.base_bytes = (size_t)capacity(&f, (double)m.l2_bytes, 0);
    m.knee_bytes = (size_t)capacity(&f, (double)m.l2_bytes, (double)m.set_aside);
    m.taxed = m.knee_bytes < m.base_bytes;
    m.probe_bytes = l2p_tax_probe_working_set(m.knee_bytes, m.l2_bytes);
    m.basis = basis->chip;
    m.exact = same_chip(basis->cc_major, basis->cc_minor, basis->l2_mib, c->cc_major,
                        c->cc_minor, (double)c->l2_bytes / MIB);
    *out = m;
    return L2P_OK;
}

size_t l2p_tax_probe_working_set(size_t knee_bytes, size_t l2_bytes)
{
    const size_t mib = 1u << 20;
    size_t ws = knee_bytes + 4 * mib > knee_bytes / 2 * 3 ? knee_bytes + 4 * mib
                                                          : knee_bytes / 2 * 3;
    if (ws > l2_bytes) ws = l2_bytes;
    ws = ws / mib * mib;
    return ws < mib ? mib : ws;
}

double l2p_tax_slowdown(const l2p_tax_model *m, int kind, double ws)
{
    if (kind < 0 || kind >= L2P_TAX_KIND_COUNT || !m->taxed) return 1.0;
    double p = m->penalty[kind];
    double at = 1.0 + p * l2p_tax_miss_fraction(ws, (double)m->knee_bytes);
    double base = 1.0 + p * l2p_tax_miss_fraction(ws, (double)m->base_bytes);
    return at / base;
}

l2p_status l2p_tax_measured_knee(size_t n, const double *ws, const double *slowdown,
                                 double threshold, double *lo, double *hi)
{
    if (n == 0) return l2p_fail(L2P_ERR_VALUE, "ws: the curve needs at least one point");
    for (size_t i = 1; i < n; i++)
        if (!(ws[i] > ws[i - 1]))
            return l2p_fail(L2P_ERR_VALUE, "ws: working sets must ascend (point %zu: %g after "
                            "%g)", i, ws[i], ws[i - 1]);
    for (size_t i = 0; i < n; i++)
        if (slowdown[i] >= threshold) {
            *lo = i ? ws[i - 1] : 0.0;
            *hi = ws[i];
            return L2P_OK;
        }
    *lo = ws[n - 1];
    *hi = 0.0;
    return L2P_OK;
}
