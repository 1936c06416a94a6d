/* The set-aside tax model's access shapes (l2p_tax.h): atomics, whole-row writes and
 * sequential sweeps, each fitted from its own probe's rows the way random writes' companion
 * term is, with its own capacity line, onset, stream footprint and miss cost. */
#include "l2p_tax.h"
#include "l2p_flavour.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIB 1048576.0

const char *const l2p_tax_shape_names[L2P_TAX_SHAPE_COUNT + 1] = {"random", "atomic", "rows",
                                                                  "sweep", NULL};

/* The probe of each shape. Rows of 32 words: a warp writes one 128-byte line whole, so a
 * miss needs no refill (an embedding backward's rows of 32 floats). The sweep: 3 arrays read
 * and written side by side (an optimizer's param, m and v), the companion arrays one pass
 * long and re-read every pass (its gradient). */
static const l2p_tax_shape_probe shape_probes[L2P_TAX_SHAPE_COUNT] = {
    {"random", L2P_TAX_WRITE, 1, 1, 1, 0,
     "random 4-byte writes (index_put_, index_copy_, a[idx] = v)"},
    {"atomic", L2P_TAX_ATOMIC, 1, 1, 1, 0,
     "random 4-byte atomic adds (scatter_add_, index_add_, cupyx.scatter_add)"},
    {"rows", L2P_TAX_WRITE, 1, 32, 1, 0,
     "random whole 128-byte rows written (an embedding backward's rows of 32 floats)"},
    {"sweep", L2P_TAX_RMW, 0, 1, 3, 1,
     "a sequential read-modify-write sweep over arrays side by side, read alongside arrays "
     "re-read every pass (an optimizer step: param, m and v, and the gradient)"},
};

const l2p_tax_shape_probe *l2p_tax_shape_probe_of(int shape)
{
    return shape >= 0 && shape < L2P_TAX_SHAPE_COUNT ? &shape_probes[shape] : NULL;
}

const char *l2p_tax_shape_name(int shape)
{
    return shape >= 0 && shape < L2P_TAX_SHAPE_COUNT ? l2p_tax_shape_names[shape] : NULL;
}

l2p_status l2p_tax_shape_parse(const char *name, int *shape)
{
    return l2p_parse_choice(name, "shape", l2p_tax_shape_names, shape);
}

/* ---- the fits ---- */

static double footprint_residual(size_t n, const double *capacity, const double *k,
                                 const double *knee, double footprint, double *cap)
{
    if (l2p_tax_fit_companion(n, capacity, k, knee, footprint, cap) != L2P_OK) return HUGE_VAL;
    double r = 0;
    for (size_t i = 0; i < n; i++) {
        double d = knee[i] - l2p_tax_companion_capacity(capacity[i], k[i], footprint, *cap);
        r += d * d;
    }
    return r;
}

/* The best beta on [lo, hi] in `steps` steps (the smallest of equal residuals). */
static double footprint_scan(size_t n, const double *capacity, const double *k,
                             const double *knee, double lo, double hi, int steps, double *best_r)
{
    double best = lo, cap;
    *best_r = HUGE_VAL;
    for (int i = 0; i <= steps; i++) {
        double b = lo + (hi - lo) * i / steps, r = footprint_residual(n, capacity, k, knee, b,
                                                                        &cap);
        if (r < *best_r - 1e-15) {
            *best_r = r;
            best = b;
        }
    }
    return best;
}

l2p_status l2p_tax_fit_footprint(size_t n, const double *capacity, const double *k,
                                 const double *knee, double *footprint, double *cap)
{
    double r, coarse = L2P_TAX_FOOTPRINT_MAX / 160;
    /* the rows' checks are l2p_tax_fit_companion's: run once for its message */
    L2P_TRY(l2p_tax_fit_companion(n, capacity, k, knee, 0.0, cap));
    double b = footprint_scan(n, capacity, k, knee, 0.0, L2P_TAX_FOOTPRINT_MAX, 160, &r);
    double lo = b - coarse > 0 ? b - coarse : 0.0;
    double hi = b + coarse < L2P_TAX_FOOTPRINT_MAX ? b + coarse : L2P_TAX_FOOTPRINT_MAX;
    *footprint = footprint_scan(n, capacity, k, knee, lo, hi, 200, &r);
    return l2p_tax_fit_companion(n, capacity, k, knee, *footprint, cap);
}

l2p_status l2p_tax_fit_shape_penalty(size_t n, const double *m_at, const double *m_base,
                                     const double *hit, const double *slowdown,
                                     double *penalty)
{
    /* S (h + P m0) = h + P m  <=>  P (m - S m0) = h (S - 1) */
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double a = m_at[i] - slowdown[i] * m_base[i];
        num += a * hit[i] * (slowdown[i] - 1.0);
        den += a * a;
    }
    if (!(den > 0) || !isfinite(num))
        return l2p_fail(L2P_ERR_VALUE, "slowdowns: no point lies past the shape's knee (the "
                        "miss cost needs one)");
    *penalty = num / den > 0 ? num / den : 0.0;
    return L2P_OK;
}

/* ---- a shape's constants ---- */

typedef struct {
    double coeff, onset;  /* the capacity line L2 - c s from s >= onset (fractions of L2) */
    double footprint, cap; /* beta and F_cap (a fraction of L2) */
    double cost, penalty;  /* a and P */
    const l2p_tax_companion_row *chip; /* a row of the chip they belong to; NULL: no rows */
} shape_fit;

static int of_chip(int major, int minor, double l2_mib, const l2p_tax_companion_row *own)
{
    return l2p_tax_same_chip(major, minor, l2_mib, own->cc_major, own->cc_minor, own->l2_mib);
}

/* The closest chip with usable rows of `shape`; NULL: none. */
static const l2p_tax_companion_row *shape_chip(const l2p_tax_chip *c,
                                               const l2p_tax_companion_data *d, int shape)
{
    const l2p_tax_companion_row *own = NULL;
    for (size_t i = 0; i < d->n_knees; i++) {
        const l2p_tax_companion_row *r = &d->knees[i];
        if (l2p_tax_companion_usable(r, shape) &&
            (!own || l2p_tax_chip_distance(r->cc_major, r->cc_minor, r->l2_mib, c) <
                         l2p_tax_chip_distance(own->cc_major, own->cc_minor, own->l2_mib, c)))
            own = r;
    }
    return own;
}

/* The capacity line from the shape's fit rows' knees without the stream (one point per
 * set-aside): c by least squares, the onset the smallest set-aside with a knee (above 1: none
 * measured, never taxed). */
static l2p_status shape_line(const l2p_tax_companion_data *d, const l2p_tax_companion_row *own,
                             int shape, double *s, double *cap0, shape_fit *out)
{
    size_t n = 0;
    out->onset = 2.0;
    for (size_t i = 0; i < d->n_knees; i++) {
        const l2p_tax_companion_row *r = &d->knees[i];
        if (r->shape != shape || !r->fit || r->alone_hi_mib <= 0 ||
            !of_chip(r->cc_major, r->cc_minor, r->l2_mib, own))
            continue;
        size_t j = 0;
        while (j < n && s[j] != r->set_aside_mib) j++;
        if (j < n) continue;
        s[n] = r->set_aside_mib;
        cap0[n++] = 0.5 * (r->alone_lo_mib + r->alone_hi_mib);
        double at = r->set_aside_mib / own->l2_mib;
        if (at < out->onset) out->onset = at;
    }
    out->coeff = 0;
    return n ? l2p_tax_fit_capacity(own->l2_mib, n, s, cap0, &out->coeff) : L2P_OK;
}

/* C(s) of a shape on a chip of l2 (any unit) whose C(0) is base. */
static double shape_capacity(const shape_fit *f, double l2, double base, double s)
{
    if (s < f->onset * l2 * (1 - 1e-9)) return base;
    double cap = l2 - f->coeff * s;
    return cap < 0 ? 0 : cap < base ? cap : base;
}

/* beta and F_cap from the usable rows (capacity and knees as fractions of the L2), a from
 * the shape's stream rows (0 without). */
static l2p_status shape_stream(const l2p_tax_companion_data *d, const l2p_tax_companion_row *own,
                               int shape, double *x, double *y, double *z, shape_fit *out)
{
    size_t n = 0, m = 0;
    for (size_t i = 0; i < d->n_knees; i++) {
        const l2p_tax_companion_row *r = &d->knees[i];
        if (!l2p_tax_companion_usable(r, shape) ||
            !of_chip(r->cc_major, r->cc_minor, r->l2_mib, own))
            continue;
        x[n] = 0.5 * (r->alone_lo_mib + r->alone_hi_mib) / own->l2_mib;
        y[n] = r->companion;
        z[n++] = 0.5 * (r->knee_lo_mib + r->knee_hi_mib) / own->l2_mib;
    }
    L2P_TRY(l2p_tax_fit_footprint(n, x, y, z, &out->footprint, &out->cap));
    for (size_t i = 0; i < d->n_streams; i++) {
        const l2p_tax_stream_row *r = &d->streams[i];
        if (r->shape == shape && r->companion > 0 &&
            of_chip(r->cc_major, r->cc_minor, r->l2_mib, own)) {
            x[m] = r->companion;
            y[m++] = r->time_ratio;
        }
    }
    out->cost = 0;
    return m ? l2p_tax_fit_stream_cost(m, x, y, &out->cost) : L2P_OK;
}

/* P from the shape's fit slowdown rows of its chip, each against the shape's knees at its
 * set-aside and at limit 0 (with its k); `fallback` when none lies past a knee. */
static l2p_status shape_penalty(const l2p_tax_companion_data *d, const l2p_tax_companion_row *own,
                                int shape, double base, double fallback, double *buf,
                                shape_fit *f)
{
    size_t n = 0, cnt = d->n_slowdowns;
    double *ma = buf, *mb = buf + cnt, *h = mb + cnt, *sl = h + cnt;
    for (size_t i = 0; i < d->n_slowdowns; i++) {
        const l2p_tax_shape_slowdown_row *r = &d->slowdowns[i];
        if (r->shape != shape || !r->fit || !of_chip(r->cc_major, r->cc_minor, r->l2_mib, own))
            continue;
        double cap = f->cap * own->l2_mib, k = r->companion;
        double at = l2p_tax_companion_capacity(shape_capacity(f, own->l2_mib, base,
                                                              r->set_aside_mib),
                                               k, f->footprint, cap);
        double b0 = l2p_tax_companion_capacity(base, k, f->footprint, cap);
        ma[n] = l2p_tax_miss_fraction(r->ws_mib, at);
        mb[n] = l2p_tax_miss_fraction(r->ws_mib, b0);
        h[n] = 1.0 + f->cost * k;
        sl[n++] = r->slowdown;
    }
    f->penalty = fallback;
    if (n && l2p_tax_fit_shape_penalty(n, ma, mb, h, sl, &f->penalty) != L2P_OK) {
        l2p_clear_error();
        f->penalty = fallback;
    }
    return L2P_OK;
}

/* Every constant of `shape` from the rows of the chip closest to `c` that has them. */
static l2p_status shape_constants(const l2p_tax_chip *c, const l2p_tax_companion_data *d,
                                  int shape, shape_fit *out)
{
    *out = (shape_fit){0};
    const l2p_tax_companion_row *own = shape_chip(c, d, shape);
    if (!own) return L2P_OK;
    size_t n = d->n_knees + d->n_streams + 1;
    if (4 * (d->n_slowdowns + 1) > 3 * n) n = (4 * (d->n_slowdowns + 1) + 2) / 3;
    double *buf = calloc(3 * n, sizeof *buf);
    if (!buf) return l2p_fail(L2P_ERR_NO_MEMORY, "shape: no memory for the fit");
    l2p_tax_chip rows_chip = {own->cc_major, own->cc_minor, (size_t)(own->l2_mib * MIB), 0, 0};
    l2p_tax_model at0;
    const l2p_tax_shape_probe *sp = l2p_tax_shape_probe_of(shape);
    l2p_status rc = l2p_tax_predict(&rows_chip, 0, &at0); /* C(0) and the kinds' P */
    if (rc == L2P_OK) rc = shape_line(d, own, shape, buf, buf + n, out);
    if (rc == L2P_OK) rc = shape_stream(d, own, shape, buf, buf + n, buf + 2 * n, out);
    if (rc == L2P_OK)
        rc = shape_penalty(d, own, shape, (double)at0.base_bytes / MIB, at0.penalty[sp->kind],
                           buf, out);
    free(buf);
    if (rc == L2P_OK) out->chip = own;
    return rc;
}

l2p_status l2p_tax_predict_shape(const l2p_tax_chip *c, long long set_aside, double companion,
                                 int shape, const l2p_tax_companion_data *rows,
                                 l2p_tax_model *out)
{
    if (!l2p_tax_shape_name(shape))
        return l2p_fail(L2P_ERR_VALUE, "shape: %d is not one of 0 (random), 1 (atomic), 2 "
                        "(rows), 3 (sweep)", shape);
    L2P_TRY(l2p_tax_predict_companion(c, set_aside, companion, rows, out));
    out->shape = shape;
    if (shape == L2P_TAX_SHAPE_RANDOM) return L2P_OK;
    l2p_tax_companion_data builtin = l2p_tax_companion_builtin();
    shape_fit f;
    L2P_TRY(shape_constants(c, rows ? rows : &builtin, shape, &f));
    if (!f.chip) return L2P_OK; /* no rows of the shape: the random writes' model */
    l2p_tax_model m = *out;
    double l2 = (double)m.l2_bytes, cap = f.cap * l2;
    double base = m.base_fraction * l2;
    double at = shape_capacity(&f, l2, base, (double)m.set_aside);
    m.companion_footprint = f.footprint;
    m.companion_cap = f.cap;
    m.companion_coeff = f.coeff;
    m.stream_cost = f.cost;
    m.companion_basis = companion > 0 ? f.chip->chip : NULL;
    m.alone_knee_bytes = (size_t)at;
    m.alone_base_bytes = (size_t)base;
    m.knee_bytes = (size_t)l2p_tax_companion_capacity(at, companion, f.footprint, cap);
    m.base_bytes = (size_t)l2p_tax_companion_capacity(base, companion, f.footprint, cap);
    m.companion_bytes = (size_t)(at - (double)m.knee_bytes);
    m.taxed = m.knee_bytes < m.base_bytes;
    m.probe_bytes = l2p_tax_probe_working_set(m.knee_bytes, m.l2_bytes);
    m.shape_basis = f.chip->chip;
    m.shape_coeff = f.coeff;
    m.shape_onset = f.onset;
    m.shape_penalty = f.penalty;
    *out = m;
    return L2P_OK;
}
