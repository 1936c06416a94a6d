/* The set-aside tax: what a persisting-L2 set-aside costs work that never asks for
 * persistence. Pure C, no CUDA calls.
 *
 * What was measured (issue 19; H200 60 MiB L2 and H100 50 MiB L2, fresh processes, no window,
 * no persisting access): random 4-byte reads over 8-28 MiB take the same time at every
 * set-aside; random 4-byte writes slow down once the written working set h exceeds a knee
 * that falls as the set-aside s grows, near h = L2 - (4/3) s on both chips; atomics pay
 * 1.1-1.9x at the maximum set-aside.
 *
 * The model. A set-aside is taken in granules (the driver rounds s up to L2/16 on both chips),
 * and the capacity that *dirty* lines may occupy shrinks by more than the set-aside:
 *
 *     C(s) = L2 - c * s            (c fitted per chip; 4/3 on the H200 and 1.28 on the H100)
 *
 * Clean lines are not held to C(s) (reads are untouched), so the limit acts on lines awaiting
 * write-back only. Random uniform accesses over h bytes into a capacity C hit with
 * probability C / h, so the fraction of written accesses that miss is
 *
 *     m(h, C) = max(0, 1 - C / h),
 *
 * and with P the cost of a miss relative to a hit (fitted per chip and access kind: a miss
 * costs a write-back plus a refill; an atomic's hit is itself slow, so its P is smaller)
 *
 *     slowdown(h) = (1 + P m(h, C(s))) / (1 + P m(h, C(0)))       C(0) = L2.
 *
 * The knee is C(s): the written working set above which writes slow down. Measured knees are
 * the first working set of a sweep where the slowdown crosses a threshold, so they are
 * intervals (the previous point, that point]; the fit uses their midpoints.
 *
 * Why more than s, and why about 4/3: one reading consistent with both chips is that the
 * hardware counts the set-aside against the ways dirty lines may use, out of 12 of the 16
 * granules rather than 16 (16/12 = 4/3), so every granule set aside removes L2/12 from dirty
 * capacity; at the maximum (10 granules) that leaves L2/6 (10 MiB on the H200, 8.3 MiB on the
 * H100), where both chips' knees were measured (8-12 MiB). What stays open: the knees at
 * small set-asides lie a few MiB above the line (H200 s = 15 MiB: 44-48 MiB against 40; H100
 * s = 12.5: 36-40 against 34), so the true curve may bend (no extra loss below about 4
 * granules); whether write-back or eviction counters show the capacity directly; and whether
 * atomics pay through the same capacity or through the L2's atomic units.
 *
 * Constants are never written for one GPU: they are fitted, each time they are asked for,
 * from the measurement rows in l2p_tax.c (each citing where it was measured), keyed by what
 * identifies a chip (compute capability + L2 size). A chip without rows takes the closest
 * chip's dimensionless constants (same compute capability first, then the nearest L2 size)
 * applied to its own L2 size. Rows marked held-out are never used by the fit: the C tests
 * check the model against them. */
#ifndef L2P_TAX_H
#define L2P_TAX_H

#include <stddef.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    L2P_TAX_READ = 0,
    L2P_TAX_WRITE = 1,
    L2P_TAX_RMW = 2,    /* read-modify-write: its lines are dirty, as a write's */
    L2P_TAX_ATOMIC = 3,
    L2P_TAX_KIND_COUNT
} l2p_tax_kind;

/* The kinds' names in order, NULL-terminated (the kernel binding's choices). */
extern const char *const l2p_tax_kind_names[L2P_TAX_KIND_COUNT + 1];
const char *l2p_tax_kind_name(int kind);
l2p_status l2p_tax_kind_parse(const char *name, int *kind);

/* A measured knee: where writes began to slow down at one set-aside. */
typedef struct {
    const char *chip;
    int cc_major, cc_minor;
    double l2_mib, set_aside_mib;
    double knee_lo_mib, knee_hi_mib; /* the knee lies in (lo, hi] */
    int fit;                         /* 1: the fit uses it; 0: held out, for checking */
    const char *source;
} l2p_tax_knee_row;

/* A measured slowdown at one set-aside and working set, against limit 0. */
typedef struct {
    const char *chip;
    int cc_major, cc_minor;
    double l2_mib, set_aside_mib, ws_mib;
    int kind;
    double slowdown;
    const char *source;
} l2p_tax_slowdown_row;

/* The measurement tables (static; n receives the row count). */
const l2p_tax_knee_row *l2p_tax_knee_rows(size_t *n);
const l2p_tax_slowdown_row *l2p_tax_slowdown_rows(size_t *n);

/* A chip as the model sees it. */
typedef struct {
    int cc_major, cc_minor;
    size_t l2_bytes;
    size_t granule;        /* the driver's set-aside step; 0: L2 / 16 */
    size_t persisting_max; /* the largest set-aside; 0: unknown (not checked) */
} l2p_tax_chip;

typedef struct {
    size_t l2_bytes;
    size_t set_aside;      /* as the driver grants it: rounded up to the granule */
    size_t granule;
    double capacity_coeff; /* c */
    double penalty[L2P_TAX_KIND_COUNT]; /* P per kind; 0 for reads */
    size_t knee_bytes;     /* C(s) */
    size_t probe_bytes;    /* the standard probe's working set (l2p_tax_probe_working_set) */
    const char *basis;     /* the chip whose rows gave the constants ("H200", ...) */
    int exact;             /* 1: rows of this very chip (cc and L2 size); 0: the closest */
} l2p_tax_model;

/* Fit c (least squares of L2 - c s against the knees' midpoints) from n rows of one L2
 * size; L2P_ERR_VALUE when no row has a set-aside. */
l2p_status l2p_tax_fit_capacity(double l2, size_t n, const double *set_aside,
                                const double *knee, double *coeff);
/* Fit P from n measured slowdowns (set-aside, working set, slowdown) given c. */
l2p_status l2p_tax_fit_penalty(double l2, double coeff, size_t n, const double *set_aside,
                               const double *ws, const double *slowdown, double *penalty);

/* The model for `chip` at set-aside `set_aside` (bytes, in [0, persisting_max]). */
l2p_status l2p_tax_predict(const l2p_tax_chip *chip, long long set_aside, l2p_tax_model *out);

/* The standard write-heavy probe's working set: just above the knee, where the tax shows
 * clearly (by half the knee, at least 4 MiB), never above the L2, in whole MiB (>= 1 MiB).
 * At the maximum set-aside of an H200 or H100 that is 15 MiB, next to the 16. */
size_t l2p_tax_probe_working_set(size_t knee_bytes, size_t l2_bytes);

/* Miss fraction of random accesses over ws bytes into a capacity of cap bytes. */
double l2p_tax_miss_fraction(double ws, double cap);
/* The expected slowdown of `kind` over a working set of ws bytes (>= 1). */
double l2p_tax_slowdown(const l2p_tax_model *m, int kind, double ws);

/* The knee of a measured curve: the first working set (ws ascending) whose slowdown reaches
 * `threshold`; *lo the working set before it (0 when it is the first), *hi that one. When
 * none reaches it, *lo is the last working set and *hi is 0. */
l2p_status l2p_tax_measured_knee(size_t n, const double *ws, const double *slowdown,
                                 double threshold, double *lo, double *hi);

#ifdef __cplusplus
}
#endif
#endif
