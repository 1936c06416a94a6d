/* The set-aside tax: what a persisting-L2 set-aside costs work that never asks for
 * persistence. Pure C, no CUDA calls.
 *
 * What was measured (the integrator's full sweeps on an H200 and an H100, 2026-11-22, driver
 * 580.159.04, CUDA 13.0: kernels making 16.8 M random 4-byte accesses over a table of h MiB,
 * h in 4 MiB steps, no window, at every set-aside; the raw sweeps are not stored in the
 * repository: the rows below in l2p_tax.c keep what the model uses, and
 * notebooks/results/set-aside-tax.json holds a later quick run of the set-aside-tax study on
 * the H100 that shows the same knees). A knee is the first h whose time is 1.15x or more the
 * time at limit 0, an interval (previous h, that h]:
 *   - random writes, H200 (60 MiB L2, granule 3.75): 1-3 granules none up to 68 MiB; 4: (44,
 *     48]; 5: (32, 36]; 6: (28, 32]; 7: (24, 28]; 8: (20, 24]; 9: (12, 16]; 10: (8, 12].
 *     H100 (50 MiB, granule 3.125): 1-3 none up to 56; 4: (36, 40]; 5: (28, 32]; 6: (24,
 *     28]; 7: (20, 24]; 8: (16, 20]; 9: (12, 16]; 10: (8, 12].
 *   - read-modify-writes: the writes' knees within a step (earlier at 9-10 granules).
 *     Atomics: later knees (H200 at 10 granules: (20, 24]) and at most 2.0x. Reads: nothing
 *     below 9 granules; at the maximum 1.3x above about 36 MiB (H200) / 32 MiB (H100).
 *   - at limit 0 the writes themselves slow down past about 0.8 L2 (H200 (48, 52], H100
 *     (44, 48]): the capacity written lines have without any set-aside.
 *
 * The model. Written (dirty) lines have a capacity C(s); clean lines are not held to it.
 *
 *     C(0) = b * L2                          (b fitted per chip: 0.83 H200, 0.92 H100)
 *     C(s) = C(0)                            while s < o * L2 (no tax: o = 1/4 on both)
 *     C(s) = min(C(0), L2 - c * s)           from there (c fitted: 1.29 H200, 1.25 H100)
 *
 * Random uniform accesses over h bytes into a capacity C hit with probability C / h, so a
 * fraction m(h, C) = max(0, 1 - C / h) of them miss; with P the cost of a miss relative to a
 * hit (fitted per chip and access kind: a write's miss costs a write-back plus a refill, an
 * atomic's hit is itself slow, a read's lines are clean and only pay at large h)
 *
 *     slowdown(h) = (1 + P m(h, C(s))) / (1 + P m(h, C(0))).
 *
 * The knee is C(s) when s >= o * L2: the written working set above which writes slow down.
 *
 * Companion traffic. Real writes come with inputs streamed alongside (PyTorch's index_put_
 * reads an 8-byte index and a 4-byte value per 4-byte write: k = 3 bytes streamed per byte
 * written); those lines pass through the same L2 and compete with the written lines.
 *
 * The miss fraction above is LRU's: a 128-byte table line waits for its next write x mean
 * waits (h / 128 writes each) or longer with probability e^-x, and in that time the writes
 * touch h (1 - e^-x) bytes of the table; it is evicted when those exceed C, so m = e^-x
 * with h (1 - m) = C, i.e. m = 1 - C / h. With k bytes streamed per byte written (4-byte
 * writes), x waits also bring 4 k x h / 128 streamed bytes, never reused. The companion
 * sweep shows that the stream never takes more than a bounded share, F_cap (from k = 4 on
 * the take stops growing: about 7 MiB on the H200, at every set-aside). So m solves
 *
 *     h (1 - m) + min(g k h ln(1/m), F_cap) = C,     g = 4 / 128 (word / line)
 *
 * (k = 0: m = 1 - C / h exactly), and the knee, where m reaches m* = 0.15 / P (a 1.15x
 * slowdown), moves to
 *
 *     C_k = max(C / (1 + beta k), C - F_cap),    beta = g ln(P / 0.15)    (0.110 on the H200)
 *     knee = C_k(s), base = C_k(0)     (the same rule at every set-aside, limit 0 included)
 *     slowdown(h) = (1 + a k + P m(h, C(s))) / (1 + a k + P m(h, C(0)))   with m as above
 *
 * beta follows from the line, the word and the write's P; F_cap (a share of the L2) and a
 * (the stream's own cost per byte, relative to a written word's: it dilutes the tax) are
 * fitted per chip from the project's own probe with a companion stream (tools/investigations/tax-sweep
 * --companion: random writes plus k words read per write, swept over set-aside x h x k):
 * F_cap from each fitted row's knee with the stream against the same run's knee without it,
 * a from the stream rows. (Fitting beta as well gives 0.112: the LRU reading holds.) C is the
 * capacity line of that same sweep (c fitted as above from its knees without the stream, at
 * the set-asides the fit uses): a stream's effect is a difference within one run and is
 * subtracted from that run's capacity. (Subtracting it from the first sweep's line instead
 * missed 3 held-out rows by 4.3-5.6 MiB with every stream term tried, a saturating shift
 * D k / (k + k_half) included: that line lies up to 4.6 MiB above the companion sweep's
 * knees without a stream, 2.8 at 5 granules and 3.4 at 9, the held-out rows' set-asides.)
 * A chip without companion rows takes the closest chip's F_cap / L2 and a, with its own
 * beta and capacity line; with companion 0 (or no companion rows) the model is exactly the
 * one above, so as k -> 0 the H200's knee moves from its companion sweep's line to the first
 * sweep's (1-3.5 MiB: the two sweeps' spread). The rows live in l2p_tax_companion_rows.c,
 * written by tools/investigations/tax-fit from a sweep's JSON (held out, never fitted: odd granules below
 * the maximum, and k = 3); foreign work checks the model in tools/investigations/tax-validate.
 *
 * What the companion sweep shows and the model does not: at limit 0 the stream moves the
 * writes' knee (against small tables) from 49 MiB to 39 (k = 1) and 23 (k = 8), more than
 * the cap allows (the model keeps 42-45), so at 4 granules with k >= 6 no knee against
 * limit 0 shows where the model puts one near 32 MiB; why the stream's take is capped with a
 * set-aside (streamed lines kept in the set-aside's unused ways?) is open; and random tables
 * of 8 and 16 MiB slow down more than their neighbours at 8-10 granules (the 9-granule knees
 * with a stream at (6, 8] MiB). The counters of the set-aside-tax study with a stream (hit
 * rates of the stream's reads) are the test.
 *
 * Reading: the set-aside is taken in granules of L2/16; up to 3 granules (which includes the
 * driver's default of 3) written lines keep their whole capacity; from 4 granules on, every
 * granule set aside takes about 1.25-1.3 granules from them, more than the set-aside itself,
 * so at the maximum (10 granules) dirty lines keep about L2/6. What stays open: why the
 * restriction switches on at a quarter of the L2 (both chips), why its slope exceeds 1 (a
 * per-set limit on dirty ways would give steps: the H200's knees do drop by 8 MiB between 8
 * and 9 granules, against 4 MiB per granule elsewhere), and which resource atomics and reads
 * lose; the counters of the set-aside-tax study (write hit rate, DRAM write bytes) are the
 * test.
 *
 * Access shapes (l2p_tax_shape; l2p_tax_shape.c). The companion model above holds for random
 * 4-byte writes on foreign work (PyTorch index_put_ / index_copy_, CuPy a[idx] = v: 12 of 12
 * knees within 4 MiB on the H200) and misses three other kinds of write, each for a reason in
 * the rows (docs/data/tax-validate-H200.json, read to diagnose, never fitted):
 *   - atomics (scatter_add_): their knees lie 0-4 MiB after the writes' at 7-10 granules, but
 *     at 5 granules they pay at most 1.035x where the writes pay 2.1x: the atomics' tax
 *     starts later than the writes' quarter of the L2, and the model took the writes' knee
 *     for every kind (the atomic P made its own slowdown curve reach 1.15x only near 34 MiB,
 *     while the knee it reported was the writes' 26.7). Without a stream the first sweep's
 *     atomics knee at 10 granules was (20, 24] against the writes' (8, 12]; with k = 3
 *     scatter_add_'s is (4, 12]: the stream moves atomics more than writes.
 *   - the default (foreach) Adam step: a dozen kernels, each sweeping one state array that
 *     the next re-reads; the tool mapped it as random read-modify-writes over the whole state
 *     (h) with k = 1/3, where the reuse distance is one array (h / 3) with its gradient (k = 1).
 *     Re-mapped so (with random writes' constants) 3 of 4 knees lie within 4 MiB (10
 *     granules: 6 MiB early) and 49 of 64 slowdowns within 25 % (20 before); the step's
 *     fixed cost (0.08-0.13 ms, mostly launches, up to 32 MiB) dilutes its slowdowns (at
 *     most 1.65x). This mapping was stated after the stored run was read: its score there is
 *     not a held-out check (the fused Adam, one kernel, measured afresh, is).
 *   - the embedding backward: flat 1.12-1.29x at 9-10 granules, falling with h, and
 *     1.01-1.03x at 5-7: a tax on the work around the table (in PyTorch's
 *     embedding_dense_backward: a radix sort of the 1 M int64 ids with their positions,
 *     about 32 MiB written and re-read per call, and per-segment partial gradients), not on
 *     the table, whose rows are written once per call as whole 128-byte lines (a miss needs
 *     no refill). Not measured per kernel: a reading of the source and the curve's shape.
 * So the model takes a shape, as a user would state it of their work: random 4-byte writes
 * (the model above), atomics, whole 128-byte rows, or a sweep over arrays side by side whose
 * companion arrays are re-read every pass. Each shape other than random has its own probe
 * (kernels/tax_probe.cu: atomicAdd; rows of 32 words a warp writes whole; a streaming
 * read-modify-write sweep over 3 arrays with companion arrays one part long) and its own
 * rows from a sweep of it (tools/investigations/tax-sweep --shapes: k = 0, 1, 2, 4 words per access, every
 * set-aside from 4 granules to the maximum, tables in 2 MiB steps), fitted as random writes'
 * companion rows are, with three differences: the capacity line and its onset are the
 * shape's own (the smallest fitted set-aside whose knee without the stream exists; none: no
 * tax); beta and F_cap are fitted together (a shape's stream need not pass the L2 as a
 * random write's does: a sweep's re-read arrays are LRU footprint, beta near 1, no cap); and
 * P comes from the shape's slowdown rows, slowdown = (h + P m_s) / (h + P m_0) with m the
 * k = 0 miss fraction past the shape's knee C_k and h = 1 + a k. Odd granules below the
 * maximum are held out (tests/c/test_tax_shape.c checks them against the bar); the foreign
 * work in tools/investigations/tax-validate is never fitted. A shape without rows is random writes'.
 *
 * Constants are never written for one GPU: they are fitted, each time they are asked for,
 * from the measurement rows in l2p_tax.c (each citing where it was measured), keyed by what
 * identifies a chip (compute capability + L2 size). A chip without rows takes the closest
 * chip's dimensionless constants (same compute capability first, then the nearest L2 size)
 * applied to its own L2 size. Rows marked held-out are never used by the fit: the C tests
 * check the model against them (the bar: within 4 MiB, one step of the sweep). */
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

/* Access shapes (see the end of the comment above: the shapes of foreign work), each with its
 * own rows, the probe that measures it (kernels/tax_probe.cu) and a user's description. */
typedef enum {
    L2P_TAX_SHAPE_RANDOM = 0, /* random 4-byte writes (or read-modify-writes): the model above */
    L2P_TAX_SHAPE_ATOMIC = 1, /* random 4-byte atomics, performed in the L2 */
    L2P_TAX_SHAPE_ROWS = 2,   /* random whole 128-byte rows written (a line per row) */
    L2P_TAX_SHAPE_SWEEP = 3,  /* a sequential sweep read-modify-writing arrays side by side,
                                 the companion arrays re-read each pass */
    L2P_TAX_SHAPE_COUNT
} l2p_tax_shape;

/* The shapes' names in order, NULL-terminated (the keyword's choices). */
extern const char *const l2p_tax_shape_names[L2P_TAX_SHAPE_COUNT + 1];
const char *l2p_tax_shape_name(int shape);
l2p_status l2p_tax_shape_parse(const char *name, int *shape);

/* How the probe measures a shape (tax_probe's arguments) and what a user would say of it. */
typedef struct {
    const char *name;
    int kind;           /* l2p_tax_kind of its accesses */
    int random;         /* 1: random positions; 0: streaming */
    unsigned row_words; /* words per row (random): 32 = a 128-byte line */
    unsigned arrays;    /* arrays swept side by side (streaming) */
    int companion_reused; /* 1: the companion buffer is one pass's, re-read every pass; 0: a
                             stream of fresh words (a buffer of k x accesses words) */
    const char *what;
} l2p_tax_shape_probe;
const l2p_tax_shape_probe *l2p_tax_shape_probe_of(int shape); /* NULL: not a shape */

/* A measured knee: where writes began to slow down at one set-aside. */
typedef struct {
    const char *chip;
    int cc_major, cc_minor;
    double l2_mib, set_aside_mib;
    double knee_lo_mib, knee_hi_mib; /* the knee lies in (lo, hi]; hi 0: none up to lo */
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

/* Where writes slow down at limit 0 (against their own time over small tables): C(0). */
typedef struct {
    const char *chip;
    int cc_major, cc_minor;
    double l2_mib, knee_lo_mib, knee_hi_mib;
    const char *source;
} l2p_tax_base_row;

/* Random writes with a companion stream of `companion` bytes read per byte written, at one
 * set-aside: the knee with the stream and the same run's knee without it (4-byte writes,
 * the first working set 1.15x slower than at limit 0 with the same stream; hi 0: none up to
 * lo). The shift between the two is what the stream takes from written lines. */
typedef struct {
    const char *chip; /* NULL ends a table */
    int cc_major, cc_minor;
    double l2_mib, set_aside_mib;
    double companion;                  /* k: bytes streamed per byte written (> 0) */
    double knee_lo_mib, knee_hi_mib;   /* with the stream */
    double alone_lo_mib, alone_hi_mib; /* the same run without it (k = 0) */
    int fit;                           /* 1: the fit uses it; 0: held out, for checking */
    const char *source;
    int shape;                         /* l2p_tax_shape of the probe (0: random writes) */
} l2p_tax_companion_row;

/* The stream's own cost: at limit 0, over tables far below the knee, the time of writes with
 * the stream over the time without it. */
typedef struct {
    const char *chip; /* NULL ends a table */
    int cc_major, cc_minor;
    double l2_mib, companion, time_ratio;
    const char *source;
    int shape; /* l2p_tax_shape */
} l2p_tax_stream_row;

/* A shape's measured slowdown: time at the set-aside over time at limit 0, both with the
 * same companion stream, over a table of ws_mib (a shape's miss cost P is fitted from them). */
typedef struct {
    const char *chip; /* NULL ends a table */
    int cc_major, cc_minor;
    double l2_mib;
    int shape;
    double set_aside_mib, companion, ws_mib, slowdown;
    int fit;
    const char *source;
} l2p_tax_shape_slowdown_row;

/* Companion rows: the built-in ones (l2p_tax_companion_rows.c) or a caller's (a sweep not yet
 * written into the core: tools/investigations/tax-validate checks foreign work against a fresh fit). */
typedef struct {
    const l2p_tax_companion_row *knees;
    size_t n_knees;
    const l2p_tax_stream_row *streams;
    size_t n_streams;
    const l2p_tax_shape_slowdown_row *slowdowns;
    size_t n_slowdowns;
} l2p_tax_companion_data;

/* The measurement tables (static; n receives the row count). */
const l2p_tax_knee_row *l2p_tax_knee_rows(size_t *n);
const l2p_tax_base_row *l2p_tax_base_rows(size_t *n);
const l2p_tax_slowdown_row *l2p_tax_slowdown_rows(size_t *n);
/* The built-in companion rows (tools/investigations/tax-fit writes them). */
l2p_tax_companion_data l2p_tax_companion_builtin(void);

/* The generated tables (l2p_tax_companion_rows.c), each ended by a row whose chip is NULL. */
extern const l2p_tax_companion_row l2p_tax_companion_table[];
extern const l2p_tax_stream_row l2p_tax_stream_table[];
extern const l2p_tax_shape_slowdown_row l2p_tax_shape_slowdown_table[];

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
    double onset_fraction; /* o: the tax starts at set-asides of o * L2 */
    double base_fraction;  /* b: C(0) = b * L2 */
    size_t base_bytes;     /* C(0) */
    int taxed;             /* the set-aside reaches the onset: writes above the knee pay */
    double penalty[L2P_TAX_KIND_COUNT]; /* P per kind; 0 for reads */
    size_t knee_bytes;     /* C(s) (= C(0) when not taxed) */
    size_t probe_bytes;    /* the standard probe's working set (l2p_tax_probe_working_set) */
    const char *basis;     /* the chip whose rows gave the constants ("H200", ...) */
    int exact;             /* 1: rows of this very chip (cc and L2 size); 0: the closest */
    /* the companion stream (all 0 with companion 0 or no companion rows) */
    double companion;           /* k: bytes streamed per byte written, as asked */
    double companion_footprint; /* beta = g ln(P_write / 0.15): the knee is C / (1 + beta k) */
    double companion_cap;       /* F_cap / L2: the most of the L2 the stream takes */
    double companion_coeff;     /* c of the capacity the stream competes for (the companion
                                   sweep's own when it is this chip's; else capacity_coeff) */
    double stream_cost;         /* a */
    size_t companion_bytes;     /* what the stream takes from written lines at this
                                   set-aside: C(s) - C_k(s) */
    size_t alone_knee_bytes;    /* C(s) and C(0) on that capacity line, without the stream */
    size_t alone_base_bytes;
    const char *companion_basis; /* the chip whose companion rows gave beta, F_cap, a; NULL:
                                    none */
    /* the access shape (l2p_tax_predict_shape; random: the fields above only) */
    int shape;
    const char *shape_basis; /* the chip whose rows of this shape gave its constants; NULL:
                                none, and the model is the random writes' */
    double shape_coeff;      /* c of the shape's own capacity line */
    double shape_onset;      /* its onset (a fraction of the L2); > 1: no tax measured */
    double shape_penalty;    /* P of the shape's accesses */
} l2p_tax_model;

/* The model for an access shape: `shape` (l2p_tax_shape) with `companion` bytes read per
 * byte written. A shape other than random takes its own constants from the rows of its probe
 * (rows: NULL, the built-in ones): its capacity line and onset from its knees without the
 * stream, beta and F_cap fitted together from its knees with the stream (l2p_tax_fit_
 * footprint: not derived from P, since a shape's stream need not pass the L2 as a random
 * write's does), a from its stream rows, P from its slowdown rows; C(0) is the chip's. A
 * shape without rows is predicted as random writes (shape_basis NULL). */
l2p_status l2p_tax_predict_shape(const l2p_tax_chip *chip, long long set_aside,
                                 double companion, int shape,
                                 const l2p_tax_companion_data *rows, l2p_tax_model *out);

/* Fit beta and F_cap of C_k = max(C / (1 + beta k), C - F_cap) together (rows as
 * l2p_tax_fit_companion's): beta over [0, L2P_TAX_FOOTPRINT_MAX] (a coarse grid, then a fine
 * one around its best), F_cap exact at each. */
#define L2P_TAX_FOOTPRINT_MAX 8.0
l2p_status l2p_tax_fit_footprint(size_t n, const double *capacity, const double *k,
                                 const double *knee, double *footprint, double *cap);
/* Fit P of slowdown = (h + P m_s) / (h + P m_0) by least squares (through the origin, P >=
 * 0): per point the miss fractions m_s at the set-aside and m_0 at limit 0, h = 1 + a k and
 * the slowdown. L2P_ERR_VALUE when no point has m_s != slowdown m_0. */
l2p_status l2p_tax_fit_shape_penalty(size_t n, const double *m_at, const double *m_base,
                                     const double *hit, const double *slowdown,
                                     double *penalty);

/* Companion ratios accepted: [0, L2P_TAX_COMPANION_MAX] bytes per byte written. */
#define L2P_TAX_COMPANION_MAX 1e6
l2p_status l2p_tax_check_companion_ratio(double companion);

/* Shared by l2p_tax.c and l2p_tax_shape.c: the same measured chip (cc and L2 within half a
 * MiB); a measured chip's distance from `c` (compute capability first, then L2 size); a
 * companion row a fit of `shape` may use (held in, k > 0, both knees measured). */
int l2p_tax_same_chip(int major, int minor, double l2_mib, int cc_major, int cc_minor, double l2);
double l2p_tax_chip_distance(int major, int minor, double l2_mib, const l2p_tax_chip *c);
int l2p_tax_companion_usable(const l2p_tax_companion_row *r, int shape);

/* Fit c (least squares of L2 - c s against the knees' midpoints) from n rows of one L2
 * size; L2P_ERR_VALUE when no row has a set-aside. */
l2p_status l2p_tax_fit_capacity(double l2, size_t n, const double *set_aside,
                                const double *knee, double *coeff);
/* Fit P from n measured slowdowns (set-aside, working set, slowdown) given c and C(0)
 * (base), all set-asides at or above the onset. */
l2p_status l2p_tax_fit_penalty(double l2, double coeff, double base, size_t n,
                               const double *set_aside, const double *ws,
                               const double *slowdown, double *penalty);

/* The one check of a set-aside against a chip: [0, persisting_max], or [0, L2] when the
 * maximum is unknown. as_given: NULL, or the value as the caller was given it when it does
 * not fit a long long (then always L2P_ERR_VALUE, the message naming that text). */
l2p_status l2p_tax_check_set_aside(const l2p_tax_chip *c, long long set_aside,
                                   const char *as_given);

/* The model for `chip` at set-aside `set_aside` (bytes, in [0, persisting_max]). */
l2p_status l2p_tax_predict(const l2p_tax_chip *chip, long long set_aside, l2p_tax_model *out);
/* The same with `companion` bytes streamed per byte written, its constants fitted from `rows`
 * (NULL: the built-in ones). companion 0 gives exactly l2p_tax_predict's model. */
l2p_status l2p_tax_predict_companion(const l2p_tax_chip *chip, long long set_aside,
                                     double companion, const l2p_tax_companion_data *rows,
                                     l2p_tax_model *out);

/* The knee's threshold (a 1.15x slowdown, as every measured row's) and the stream's
 * footprint per mean wait: the word written over the L2's line (4-byte writes, 128 bytes). */
#define L2P_TAX_KNEE_THRESHOLD 1.15
#define L2P_TAX_WORD_PER_LINE (4.0 / 128.0)

/* beta of a chip whose writes' miss costs `penalty` hits: g ln(P / (threshold - 1)), 0 when
 * a miss costs too little to reach the threshold. */
double l2p_tax_footprint(double penalty);

/* Fit F_cap of C_k = max(C / (1 + beta k), C - F_cap) by least squares over n rows given
 * beta (footprint >= 0): capacity C (the knee without the stream), k > 0 and the knee with
 * the stream, capacity and knee as fractions of the L2 (C > 0). Exact (the residual is
 * piecewise quadratic in the cap). *cap is a fraction of the L2 in [0, 1]; 1 when no cap fits
 * better than none. L2P_ERR_VALUE when n is 0, a k is not positive, a capacity not positive
 * or a value not finite. */
l2p_status l2p_tax_fit_companion(size_t n, const double *capacity, const double *k,
                                 const double *knee, double footprint, double *cap);
/* C_k: the capacity written lines keep with k bytes streamed per byte written, given their
 * capacity without the stream (any unit; cap in the same unit). */
double l2p_tax_companion_capacity(double capacity, double companion, double footprint,
                                  double cap);
/* The miss fraction m of random 4-byte writes over ws bytes into a capacity `capacity` with
 * k bytes streamed per byte written, the stream taking at most `cap` bytes: the root of
 * ws (1 - m) + min(g k ws ln(1/m), cap) = capacity (k = 0: l2p_tax_miss_fraction). */
double l2p_tax_miss_fraction_stream(double ws, double capacity, double companion, double cap);
/* Fit a of time_ratio = 1 + a k (least squares through the origin, a >= 0). */
l2p_status l2p_tax_fit_stream_cost(size_t n, const double *k, const double *time_ratio,
                                   double *cost);

/* The standard write-heavy probe's working set: just above the knee, where the tax shows
 * clearly (by half the knee, at least 4 MiB), never above the L2, in whole MiB (>= 1 MiB).
 * At the maximum set-aside of an H200 or H100 that is 15 MiB. */
size_t l2p_tax_probe_working_set(size_t knee_bytes, size_t l2_bytes);

/* The probe's companion stream (kernels/tax_probe.cu): `words` 4-byte words read per access,
 * from a buffer (present: given at all) of at least words * accesses words. */
#define L2P_TAX_COMPANION_WORDS_MAX 16
l2p_status l2p_tax_check_companion(int present, size_t buffer_words, long long words,
                                   long long accesses);

/* The probe's access shapes (kernels/tax_probe.cu): row_words (random positions only) in
 * {1, 2, 4, 8, 16, 32} dividing the table's n words, arrays (streaming only) in [1, min(n,
 * L2P_TAX_ARRAYS_MAX)]; 1 and 1 is the unshaped probe. */
#define L2P_TAX_ROW_WORDS_MAX 32
#define L2P_TAX_ARRAYS_MAX 16
l2p_status l2p_tax_check_shape(int random, size_t n, long long row_words, long long arrays);

/* The tax on measured work (l2persist.tax.measure): samples (ms) at limit 0 (base) and at the
 * set-aside (at), taken in `rounds` interleaved rounds of equal size. The slowdown is
 * median(at) / median(base); its interval at `confidence` is the tuner's (l2p_tune_verdict:
 * a bootstrap of the samples, widened to the t interval of the per-round ratios when rounds
 * > 1, so that drift between rounds widens it); `converged` when the interval lies within
 * +-tolerance of the slowdown. */
typedef struct {
    double slowdown, low, high; /* median(at) / median(base) and its interval */
    double base_ms, at_ms;      /* the medians */
    int converged;
} l2p_tax_interval;
#define L2P_TAX_ROUNDS_MAX 1000
l2p_status l2p_tax_slowdown_interval(const double *base, size_t n_base, const double *at,
                                     size_t n_at, size_t rounds, double confidence,
                                     double tolerance, unsigned long long seed,
                                     l2p_tax_interval *out);

/* The measurement loop of l2persist.tax.measure: rounds of `repeat` samples at limit 0 and at
 * the set-aside, the order alternating between rounds (so that a drift in time weighs on
 * both alike), until the interval is within +-tolerance (after at least min_rounds) or
 * max_rounds were taken. eval(ctx, at, n, samples) runs the work n times at limit 0 (at 0)
 * or at the set-aside (at 1), writing n samples (ms); it installs the limit, the caller
 * restores it. */
typedef struct {
    size_t repeat;     /* samples per side per round: [1, L2P_TIME_MAX_COUNT] (time_calls') */
    size_t min_rounds; /* [2, max_rounds]: the interval needs two rounds' ratios */
    size_t max_rounds; /* [min_rounds, L2P_TAX_ROUNDS_MAX] */
    double confidence; /* of the interval, (0.5, 1) */
    double tolerance;  /* the interval's half width, relative: (0, 1) */
    unsigned long long seed; /* of the bootstrap */
} l2p_tax_measure_options;
void l2p_tax_measure_options_default(l2p_tax_measure_options *o);
l2p_status l2p_tax_measure_check(const l2p_tax_measure_options *o);

typedef l2p_status (*l2p_tax_eval_fn)(void *ctx, int at, size_t n, double *samples);
typedef struct {
    l2p_tax_interval interval;
    size_t rounds;
    size_t n;           /* samples per side: rounds * repeat */
    double *base, *at;  /* malloc'd, in the order taken */
} l2p_tax_measure_result;
/* On failure (eval's included) nothing is left allocated in *out. */
l2p_status l2p_tax_measure(const l2p_tax_measure_options *o, l2p_tax_eval_fn eval, void *ctx,
                           l2p_tax_measure_result *out);
void l2p_tax_measure_result_free(l2p_tax_measure_result *r);

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
