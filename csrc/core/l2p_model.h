/* A coalescing model: how one warp's addresses become requests, transactions, 32-byte
 * sectors and 128-byte lines, under three rules. Pure C, no CUDA.
 *
 *  L2P_RULE_KEPLER_CACHING     loads through L1 (Kepler -dlcm=ca): one 128 B transaction per
 *                              distinct line; every transaction after the first is a replay.
 *                              Reproduces the L1/L2 study: 1 thread 3.12 %, 32 threads 100 %.
 *                              Kepler's L1 never caches global stores, so stores follow the
 *                              non-caching rule.
 *  L2P_RULE_KEPLER_NONCACHING  L2 only (-dlcm=cg): 32 B segments; one transaction per run of
 *                              contiguous touched segments within a 128 B line, moving only
 *                              those segments (the study measured 2 transactions and 5 segments
 *                              for a warp offset by one element: 80 %; 1/9/17/25 threads:
 *                              12.5/56.25/70.83/78.12 %). The Kepler article instead describes
 *                              transactions of 1, 2 or 4 *aligned* segments (32/64/128 B blocks);
 *                              the two agree on every case the study printed and differ for a
 *                              run that straddles an aligned 64 B block (segments 1-2 of a
 *                              line: 2 segments here, 4 in the article). The study's counters
 *                              (and today's sector counters) support the segment-granular rule.
 *  L2P_RULE_SECTORS            compute capability 7.0 and newer: one request per warp
 *                              instruction; the distinct 32 B sectors it touches, grouped by
 *                              128 B line (one tag lookup, counted as a transaction, per line).
 *
 * Bytes requested are the distinct bytes the active lanes access (a broadcast counts once),
 * which is how the study got 82.5 % for C[x] = A[3] + B[x]: (4 + 128) / (5 * 32). */
#ifndef L2P_MODEL_H
#define L2P_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    L2P_RULE_KEPLER_CACHING = 0,
    L2P_RULE_KEPLER_NONCACHING = 1,
    L2P_RULE_SECTORS = 2,
    L2P_RULE_COUNT
} l2p_rule;

typedef struct {
    uint64_t requests, transactions, replays, sectors, lines;
    uint64_t bytes_requested, bytes_moved;
} l2p_access_stats;

/* The rules' names, in enum order, NULL-terminated. */
extern const char *const l2p_rule_names[L2P_RULE_COUNT + 1];
const char *l2p_rule_name(int rule);
l2p_status l2p_rule_parse(const char *name, int *rule);

/* One warp: addr[32] byte addresses, mask bit i = lane i active. */
l2p_status l2p_model_warp(const int64_t *addr, uint32_t mask, int size, int store, int rule,
                          l2p_access_stats *out);

/* n threads grouped into warps of 32 (the last one partial). masks: one per warp, or NULL
 * (all threads active). per_warp may be NULL; total receives the sums. Errors name the
 * thread: a negative address, or one not aligned to `size`. */
l2p_status l2p_model_analyze(const int64_t *addr, size_t n, const uint32_t *masks, int size,
                             int store, int rule, l2p_access_stats *per_warp,
                             l2p_access_stats *total);

/* The largest address the model takes (a + size and the line arithmetic stay in an int64). */
#define L2P_MODEL_MAX_ADDRESS (INT64_MAX - 256)

/* Thread `thread`'s address given as unsigned (a uint64 array): L2P_OK when it is at most
 * L2P_MODEL_MAX_ADDRESS, else the error l2p_model_analyze gives for an address above it. */
l2p_status l2p_model_check_unsigned(size_t thread, uint64_t address);

/* Thread t's byte address base + (offset + t * stride) * size, for t = 0 .. n - 1 (a strided
 * warp; stride 0: every thread at element `offset`). Each must lie in [0,
 * L2P_MODEL_MAX_ADDRESS]; the error names `args` (the caller's words for offset, stride and
 * base) and the first thread outside. */
l2p_status l2p_model_strided(int64_t *out, size_t n, int size, int64_t offset, int64_t stride,
                             int64_t base, const char *args);

/* Threads that fill 128-byte lines in order from line `line`, each line's elements in the
 * order `perm` gives (perm[t]: thread t's element within its line, in [0, 128 / size)):
 * thread t's address (line + t / (128 / size)) * 128 + perm[t] * size. The caller keeps line
 * in [0, 2^40] (no int64 overflow then). n 0: only size is checked. */
l2p_status l2p_model_lines(int64_t *out, size_t n, int size, int64_t line, const int64_t *perm);

/* Thread t at element pick[t] of `elements` (each pick in [0, elements), elements at most
 * 2^40): pick[t] * size. n 0: only size is checked. */
l2p_status l2p_model_scatter(int64_t *out, size_t n, int size, const int64_t *pick,
                             int64_t elements);

/* Efficiency in percent: bytes requested over bytes moved (0 when nothing moved). */
double l2p_model_efficiency(const l2p_access_stats *s);

#ifdef __cplusplus
}
#endif
#endif
