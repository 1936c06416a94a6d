/* The set-aside tax model (see l2p_tax.h for the model and its reading). */
#include "l2p_tax.h"
#include "l2p_flavour.h"

#include "l2p_timing.h"
#include "l2p_tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
    return l2p_parse_choice(name, "kind", l2p_tax_kind_names, kind);
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

static size_t count_rows(const void *table, size_t size)
{
    size_t n = 0;
    for (const char *r = table; *(const char *const *)r; r += size) n++;
    return n;
}

l2p_tax_companion_data l2p_tax_companion_builtin(void)
{
    l2p_tax_companion_data d = {
        l2p_tax_companion_table,
        count_rows(l2p_tax_companion_table, sizeof l2p_tax_companion_table[0]),
        l2p_tax_stream_table, count_rows(l2p_tax_stream_table, sizeof l2p_tax_stream_table[0]),
        l2p_tax_shape_slowdown_table,
        count_rows(l2p_tax_shape_slowdown_table, sizeof l2p_tax_shape_slowdown_table[0])};
    return d;
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

#define same_chip l2p_tax_same_chip
#define chip_distance l2p_tax_chip_distance

int l2p_tax_same_chip(int major, int minor, double l2_mib, int cc_major, int cc_minor, double l2)
{
    return major == cc_major && minor == cc_minor && fabs(l2_mib - l2) < 0.5;
}

/* Distance of a measured chip from the asked one: compute capability first, then L2 size. */
double l2p_tax_chip_distance(int major, int minor, double l2_mib, const l2p_tax_chip *c)
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

/* ---- the companion stream ---- */

double l2p_tax_companion_capacity(double capacity, double companion, double footprint,
                                  double cap)
{
    /* the table plus the stream's footprint min(beta k h, cap) must fit in the capacity */
    double lru = capacity / (1.0 + footprint * companion), capped = capacity - cap;
    double c = lru > capped ? lru : capped;
    return c > 0 ? c : 0.0;
}

double l2p_tax_footprint(double penalty)
{
    double r = penalty / (L2P_TAX_KNEE_THRESHOLD - 1.0);
    return r > 1 ? L2P_TAX_WORD_PER_LINE * log(r) : 0.0;
}

double l2p_tax_miss_fraction_stream(double ws, double capacity, double companion, double cap)
{
    if (!(companion > 0)) return l2p_tax_miss_fraction(ws, capacity);
    if (ws <= 0) return 0.0;
    if (capacity <= 0) return 1.0;
    if (ws + cap <= capacity) return 0.0; /* the table and the whole stream fit */
    /* x = ln(1/m) waits: ws (1 - e^-x) + min(g k ws x, cap) - capacity rises from -capacity
     * at x = 0 to ws + cap - capacity > 0; bisect for its root */
    double lo = 0, hi = 745; /* e^-745: the smallest double */
    for (int it = 0; it < 100; it++) {
        double x = 0.5 * (lo + hi), stream = L2P_TAX_WORD_PER_LINE * companion * ws * x;
        if (ws * -expm1(-x) + (stream < cap ? stream : cap) < capacity)
            lo = x;
        else
            hi = x;
    }
    return exp(-0.5 * (lo + hi));
}

/* The fit's rows with the stream's take: d = C - knee measured, t = C beta k / (1 + beta k)
 * uncapped; sorted by t so that the rows a cap binds are a suffix. */
typedef struct {
    double t, d;
} take;

static int take_cmp(const void *a, const void *b)
{
    double x = ((const take *)a)->t, y = ((const take *)b)->t;
    return x < y ? -1 : x > y;
}

l2p_status l2p_tax_fit_companion(size_t n, const double *capacity, const double *k,
                                 const double *knee, double footprint, double *cap)
{
    if (n == 0) return l2p_fail(L2P_ERR_VALUE, "companion: the fit needs at least one row");
    if (!(footprint >= 0) || !isfinite(footprint))
        return l2p_fail(L2P_ERR_VALUE, "footprint: %g is not a finite number >= 0", footprint);
    for (size_t i = 0; i < n; i++)
        if (!(k[i] > 0) || !isfinite(k[i]) || !(capacity[i] > 0) || !isfinite(capacity[i]) ||
            !isfinite(knee[i]))
            return l2p_fail(L2P_ERR_VALUE, "companion: row %zu has k = %g, capacity = %g, "
                            "knee = %g (k and the capacity must be > 0, all finite)", i, k[i],
                            capacity[i], knee[i]);
    take *w = malloc(n * sizeof *w);
    if (!w) return l2p_fail(L2P_ERR_NO_MEMORY, "companion: no memory for the fit");
    double fixed = 0, best, sum_d = 0, sum_dd = 0;
    for (size_t i = 0; i < n; i++) {
        w[i].t = capacity[i] * footprint * k[i] / (1.0 + footprint * k[i]);
        w[i].d = capacity[i] - knee[i];
    }
    qsort(w, n, sizeof *w, take_cmp);
    for (size_t i = 0; i < n; i++) fixed += (w[i].d - w[i].t) * (w[i].d - w[i].t);
    best = fixed; /* no cap binds: the whole L2 */
    *cap = 1.0;
    /* Rows 0..j-1 keep their uncapped take, j..n-1 take the cap, which lies in [t_{j-1}, t_j]:
     * there the residual is a parabola, least at the capped rows' mean take (clamped). */
    for (size_t j = n; j-- > 0;) {
        fixed -= (w[j].d - w[j].t) * (w[j].d - w[j].t);
        sum_d += w[j].d;
        sum_dd += w[j].d * w[j].d;
        double lo = j ? w[j - 1].t : 0.0, hi = w[j].t, m = (double)(n - j), f = sum_d / m;
        f = f < lo ? lo : f > hi ? hi : f;
        double r = fixed + sum_dd - 2 * f * sum_d + m * f * f;
        if (r < best - 1e-15) {
            best = r;
            *cap = f;
        }
    }
    free(w);
    return L2P_OK;
}

l2p_status l2p_tax_fit_stream_cost(size_t n, const double *k, const double *time_ratio,
                                   double *cost)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += k[i] * (time_ratio[i] - 1.0);
        den += k[i] * k[i];
    }
    if (!(den > 0) || !isfinite(num))
        return l2p_fail(L2P_ERR_VALUE, "companion: the stream's cost needs a point with k > 0");
    *cost = num / den > 0 ? num / den : 0.0;
    return L2P_OK;
}

/* A companion row the fit may use: held in, both knees measured. */
int l2p_tax_companion_usable(const l2p_tax_companion_row *r, int shape)
{
    return r->shape == shape && r->fit && r->companion > 0 && r->knee_hi_mib > 0 &&
           r->alone_hi_mib > 0;
}
#define companion_usable(r) l2p_tax_companion_usable(r, L2P_TAX_SHAPE_RANDOM)

/* A chip's companion constants (see l2p_tax.h). */
typedef struct {
    double cap, cost;                  /* F_cap / L2, a */
    double coeff;                      /* c of the sweep's own knees without the stream */
    const l2p_tax_companion_row *chip; /* a row of the chip they belong to; NULL: none */
} companion_fit;

/* The usable rows of `chip`, as fractions of its L2: each row's knee without the stream
 * (capacity) and with it (knee); the distinct (set-aside, knee without) pairs in s, cap0 for
 * the capacity line. Returns the row count; *n_line the pair count. */
static size_t companion_points(const l2p_tax_companion_data *d, const l2p_tax_companion_row *chip,
                               double *k, double *capacity, double *knee, double *s,
                               double *cap0, size_t *n_line)
{
    size_t n = 0;
    *n_line = 0;
    for (size_t i = 0; i < d->n_knees; i++) {
        const l2p_tax_companion_row *r = &d->knees[i];
        if (!companion_usable(r) || !same_chip(r->cc_major, r->cc_minor, r->l2_mib,
                                               chip->cc_major, chip->cc_minor, chip->l2_mib))
            continue;
        double alone = 0.5 * (r->alone_lo_mib + r->alone_hi_mib);
        k[n] = r->companion;
        capacity[n] = alone / chip->l2_mib;
        knee[n++] = 0.5 * (r->knee_lo_mib + r->knee_hi_mib) / chip->l2_mib;
        size_t j = 0; /* one point per set-aside and knee: every k of a run repeats it */
        while (j < *n_line && !(s[j] == r->set_aside_mib && cap0[j] == alone)) j++;
        if (j == *n_line) {
            s[j] = r->set_aside_mib;
            cap0[(*n_line)++] = alone;
        }
    }
    return n;
}

/* The constants of the chip closest to `c` among those with usable companion rows: F_cap
 * from its knees with the stream against the same run's without it (given its beta), c from
 * those without it, a from its stream rows (0 when it has none). out->chip is NULL (and all
 * 0) when no chip has usable rows. */
static l2p_status companion_constants(const l2p_tax_chip *c, const l2p_tax_companion_data *d,
                                      companion_fit *out)
{
    const l2p_tax_companion_row *own = NULL;
    *out = (companion_fit){0};
    for (size_t i = 0; i < d->n_knees; i++) {
        const l2p_tax_companion_row *r = &d->knees[i];
        if (companion_usable(r) &&
            (!own || chip_distance(r->cc_major, r->cc_minor, r->l2_mib, c) <
                         chip_distance(own->cc_major, own->cc_minor, own->l2_mib, c)))
            own = r;
    }
    if (!own) return L2P_OK;
    size_t n = d->n_knees + d->n_streams + 1, n_line, m = 0;
    double *k = calloc(5 * n, sizeof *k), *capacity = k + n, *knee = capacity + n,
           *s = knee + n, *cap0 = s + n;
    if (!k) return l2p_fail(L2P_ERR_NO_MEMORY, "companion: no memory for the fit");
    n = companion_points(d, own, k, capacity, knee, s, cap0, &n_line);
    l2p_tax_chip rows_chip = {own->cc_major, own->cc_minor, (size_t)(own->l2_mib * MIB), 0, 0};
    l2p_tax_model at0;
    l2p_status rc = l2p_tax_predict(&rows_chip, 0, &at0); /* its writes' P gives its beta */
    if (rc == L2P_OK)
        rc = l2p_tax_fit_companion(n, capacity, k, knee,
                                   l2p_tax_footprint(at0.penalty[L2P_TAX_WRITE]), &out->cap);
    if (rc == L2P_OK) rc = l2p_tax_fit_capacity(own->l2_mib, n_line, s, cap0, &out->coeff);
    /* the stream rows: k and the time ratio, in the first two buffers */
    for (size_t i = 0; rc == L2P_OK && i < d->n_streams; i++) {
        const l2p_tax_stream_row *r = &d->streams[i];
        if (r->shape == L2P_TAX_SHAPE_RANDOM && r->companion > 0 &&
            same_chip(r->cc_major, r->cc_minor, r->l2_mib, own->cc_major, own->cc_minor,
                      own->l2_mib)) {
            k[m] = r->companion;
            capacity[m++] = r->time_ratio;
        }
    }
    if (rc == L2P_OK && m) rc = l2p_tax_fit_stream_cost(m, k, capacity, &out->cost);
    free(k);
    if (rc == L2P_OK) out->chip = own;
    return rc;
}

l2p_status l2p_tax_predict_companion(const l2p_tax_chip *c, long long set_aside,
                                     double companion, const l2p_tax_companion_data *rows,
                                     l2p_tax_model *out)
{
    l2p_tax_model m;
    L2P_TRY(l2p_tax_check_companion_ratio(companion));
    L2P_TRY(l2p_tax_predict(c, set_aside, &m));
    m.companion = companion;
    if (companion > 0) {
        l2p_tax_companion_data builtin = l2p_tax_companion_builtin();
        companion_fit cf;
        L2P_TRY(companion_constants(c, rows ? rows : &builtin, &cf));
        if (cf.chip) {
            /* The capacity the stream competes for: the companion sweep's own line when it
             * measured this chip, else the chip's (its onset and C(0) either way). */
            chip_fit f = {m.capacity_coeff, m.onset_fraction, m.base_fraction};
            if (same_chip(cf.chip->cc_major, cf.chip->cc_minor, cf.chip->l2_mib, c->cc_major,
                          c->cc_minor, (double)c->l2_bytes / MIB))
                f.coeff = cf.coeff;
            double l2 = (double)m.l2_bytes, cap = cf.cap * l2;
            double beta = l2p_tax_footprint(m.penalty[L2P_TAX_WRITE]);
            double at = capacity(&f, l2, (double)m.set_aside), base = capacity(&f, l2, 0);
            double knee = l2p_tax_companion_capacity(at, companion, beta, cap);
            m.companion_footprint = beta;
            m.companion_cap = cf.cap;
            m.companion_coeff = f.coeff;
            m.stream_cost = cf.cost;
            m.companion_basis = cf.chip->chip;
            m.alone_knee_bytes = (size_t)at;
            m.alone_base_bytes = (size_t)base;
            m.knee_bytes = (size_t)knee;
            m.base_bytes = (size_t)l2p_tax_companion_capacity(base, companion, beta, cap);
            m.companion_bytes = (size_t)(at - knee);
            m.taxed = m.knee_bytes < m.base_bytes;
        }
    }
    *out = m;
    return L2P_OK;
}

l2p_status l2p_tax_check_companion_ratio(double companion)
{
    if (companion >= 0 && companion <= L2P_TAX_COMPANION_MAX) return L2P_OK;
    return l2p_fail(L2P_ERR_VALUE, "companion: %g bytes streamed per byte written is outside "
                    "[0, %g]", companion, L2P_TAX_COMPANION_MAX);
}

l2p_status l2p_tax_check_companion(int present, size_t buffer_words, long long words,
                                   long long accesses)
{
    if (words < 0 || words > L2P_TAX_COMPANION_WORDS_MAX)
        return l2p_fail(L2P_ERR_VALUE, "companion_words: %lld is outside [0, %d]", words,
                        L2P_TAX_COMPANION_WORDS_MAX);
    if (present && words == 0)
        return l2p_fail(L2P_ERR_VALUE, "companion_words: 0 with a companion buffer (how many "
                        "words each access reads from it, in [1, %d])",
                        L2P_TAX_COMPANION_WORDS_MAX);
    if (!present && words > 0)
        return l2p_fail(L2P_ERR_VALUE, "companion: companion_words=%lld needs a companion "
                        "buffer of at least %lld words", words, words * accesses);
    if (words > 0 && (unsigned long long)buffer_words / (unsigned long long)words <
                         (unsigned long long)accesses)
        return l2p_fail(L2P_ERR_VALUE, "companion: %zu words is fewer than companion_words x "
                        "accesses = %lld x %lld (each access reads its own words)",
                        buffer_words, words, accesses);
    return L2P_OK;
}

l2p_status l2p_tax_check_shape(int random, size_t n, long long row_words, long long arrays)
{
    if (row_words < 1 || row_words > L2P_TAX_ROW_WORDS_MAX || (row_words & (row_words - 1)))
        return l2p_fail(L2P_ERR_VALUE, "row_words: %lld is not one of 1, 2, 4, 8, 16, 32",
                        row_words);
    if (arrays < 1 || arrays > L2P_TAX_ARRAYS_MAX)
        return l2p_fail(L2P_ERR_VALUE, "arrays: %lld is outside [1, %d]", arrays,
                        L2P_TAX_ARRAYS_MAX);
    if (row_words > 1 && !random)
        return l2p_fail(L2P_ERR_VALUE, "row_words: %lld needs pattern='random' (rows at random "
                        "positions; a streaming pattern is whole rows already)", row_words);
    if (arrays > 1 && random)
        return l2p_fail(L2P_ERR_VALUE, "arrays: %lld needs pattern='streaming' (a sweep over "
                        "arrays side by side)", arrays);
    if (n % (size_t)row_words)
        return l2p_fail(L2P_ERR_VALUE, "table: %zu words is not a whole number of rows of "
                        "row_words = %lld", n, row_words);
    if ((size_t)arrays > n)
        return l2p_fail(L2P_ERR_VALUE, "arrays: %lld is more than the table's %zu words", arrays,
                        n);
    return L2P_OK;
}

static l2p_status check_tolerance(double tolerance)
{
    if (tolerance > 0 && tolerance < 1) return L2P_OK;
    return l2p_fail(L2P_ERR_VALUE, "tolerance: %g is outside (0, 1)", tolerance);
}

l2p_status l2p_tax_slowdown_interval(const double *base, size_t n_base, const double *at,
                                     size_t n_at, size_t rounds, double confidence,
                                     double tolerance, unsigned long long seed,
                                     l2p_tax_interval *out)
{
    l2p_tune_verdict_t v;
    L2P_TRY(check_tolerance(tolerance));
    if (rounds < 1 || rounds > L2P_TAX_ROUNDS_MAX)
        return l2p_fail(L2P_ERR_VALUE, "rounds: %zu is outside [1, %d]", rounds,
                        L2P_TAX_ROUNDS_MAX);
    if (n_base == 0 || n_at == 0)
        return l2p_fail(L2P_ERR_VALUE, "%s: no samples", n_base ? "at" : "base");
    /* The verdict's speedup is median(baseline) / median(candidate): with the samples at the
     * set-aside as both baselines and limit 0's as the candidate it is the slowdown. */
    L2P_TRY(l2p_tune_verdict(at, n_at, at, n_at, base, n_base, rounds, 0.0, confidence, seed,
                             &v));
    out->slowdown = v.speedup;
    out->low = v.ci_low;
    out->high = v.ci_high;
    out->base_ms = v.candidate_ms;
    out->at_ms = v.baseline_ms;
    out->converged = v.ci_low >= v.speedup * (1 - tolerance) &&
                     v.ci_high <= v.speedup * (1 + tolerance);
    return L2P_OK;
}

void l2p_tax_measure_options_default(l2p_tax_measure_options *o)
{
    o->repeat = 5;
    o->min_rounds = 3;
    o->max_rounds = 20;
    o->confidence = 0.95;
    o->tolerance = 0.02;
    o->seed = 0x9e3779b97f4a7c15ull;
}

l2p_status l2p_tax_measure_check(const l2p_tax_measure_options *o)
{
    if (o->repeat < 1 || o->repeat > L2P_TIME_MAX_COUNT) /* each side is one time_calls */
        return l2p_fail(L2P_ERR_VALUE, "repeat: %zu is outside [1, %d]", o->repeat,
                        L2P_TIME_MAX_COUNT);
    if (o->max_rounds < 2 || o->max_rounds > L2P_TAX_ROUNDS_MAX)
        return l2p_fail(L2P_ERR_VALUE, "max_rounds: %zu is outside [2, %d]", o->max_rounds,
                        L2P_TAX_ROUNDS_MAX);
    if (o->min_rounds < 2 || o->min_rounds > o->max_rounds)
        return l2p_fail(L2P_ERR_VALUE, "min_rounds: %zu is outside [2, max_rounds = %zu]",
                        o->min_rounds, o->max_rounds);
    if (!(o->confidence > 0.5 && o->confidence < 1))
        return l2p_fail(L2P_ERR_VALUE, "confidence: %g is outside (0.5, 1)", o->confidence);
    return check_tolerance(o->tolerance);
}

void l2p_tax_measure_result_free(l2p_tax_measure_result *r)
{
    free(r->base);
    free(r->at);
    r->base = r->at = NULL;
}

l2p_status l2p_tax_measure(const l2p_tax_measure_options *o, l2p_tax_eval_fn eval, void *ctx,
                           l2p_tax_measure_result *out)
{
    l2p_tax_measure_result r = {0};
    l2p_status rc = l2p_tax_measure_check(o);
    if (rc != L2P_OK) return rc;
    r.base = malloc(o->max_rounds * o->repeat * sizeof *r.base);
    r.at = malloc(o->max_rounds * o->repeat * sizeof *r.at);
    if (!r.base || !r.at) {
        l2p_tax_measure_result_free(&r);
        return l2p_fail(L2P_ERR_NO_MEMORY, "repeat: no memory for %zu x %zu samples",
                        o->max_rounds, o->repeat);
    }
    while (rc == L2P_OK && r.rounds < o->max_rounds) {
        double *b = r.base + r.n, *a = r.at + r.n;
        int first = (int)(r.rounds % 2); /* limit 0 first in even rounds, the set-aside in odd */
        rc = eval(ctx, first, o->repeat, first ? a : b);
        if (rc == L2P_OK) rc = eval(ctx, !first, o->repeat, first ? b : a);
        if (rc != L2P_OK) break;
        r.rounds++;
        r.n += o->repeat;
        if (r.rounds < o->min_rounds) continue;
        rc = l2p_tax_slowdown_interval(r.base, r.n, r.at, r.n, r.rounds, o->confidence,
                                       o->tolerance, o->seed, &r.interval);
        if (rc == L2P_OK && r.interval.converged) break;
    }
    if (rc != L2P_OK) {
        l2p_tax_measure_result_free(&r);
        return rc;
    }
    *out = r;
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
    double p = m->penalty[kind], hit = 1.0 + m->stream_cost * m->companion, at, base;
    if (m->shape_basis) { /* a shape's: its P for its own kind, misses past its knee */
        const l2p_tax_shape_probe *sp = l2p_tax_shape_probe_of(m->shape);
        if (sp && kind == sp->kind) p = m->shape_penalty;
        at = hit + p * l2p_tax_miss_fraction(ws, (double)m->knee_bytes);
        base = hit + p * l2p_tax_miss_fraction(ws, (double)m->base_bytes);
    } else if (m->companion_basis) { /* the stream's misses, on its own capacity line */
        double k = m->companion, cap = m->companion_cap * (double)m->l2_bytes;
        at = hit + p * l2p_tax_miss_fraction_stream(ws, (double)m->alone_knee_bytes, k, cap);
        base = hit + p * l2p_tax_miss_fraction_stream(ws, (double)m->alone_base_bytes, k, cap);
    } else {
        at = hit + p * l2p_tax_miss_fraction(ws, (double)m->knee_bytes);
        base = hit + p * l2p_tax_miss_fraction(ws, (double)m->base_bytes);
    }
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
