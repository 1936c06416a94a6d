/* The live search: plan arms judged on a running program's own traffic, block by block.
 *
 * advise(workloads) calls the user's work to time it; a program watched by `advise --` is
 * never called. Control is inverted: the program runs, and at each switch point between its
 * own calls (a graph replay, a host synchronization, l2persist.mark()) the watcher asks this
 * search which arm the next block runs under, and later gives it each block's GPU time per
 * unit of work (l2p_activity_blocks). The search is a state machine over those samples:
 *
 *   1. search: stages of rounds (`stage_rounds` in the first, `next_stage_rounds` in each
 *      later one; an arm's samples add up over the stages); a round runs every live arm for one block, in
 *      an order rotated by one each round and reversed every other round (a drift of the
 *      program over the run falls on all arms alike). After each stage the worse half of the
 *      candidates (by median speedup over the better baseline's median) is dropped
 *      (successive halving); the baselines (arm 0: limit 0, arm 1: the device default, both
 *      without windows) always run.
 *   2. confirm: the last candidate against both baselines in fresh rounds (the search's
 *      samples are not reused: the pick was made on them), l2p_tune_verdict's rule (its one
 *      home) with rounds = the confirmation's rounds; more rounds while undecided, up to
 *      max_confirm_rounds. With a target_halfwidth (verify), more rounds until the interval
 *      is that narrow instead, whatever the rule says meanwhile (same cap).
 *   3. done: the verdict. "Don't" keeps the better baseline; when limit 0 and the default are
 *      not told apart by the confirmation's interval, the default (it changes nothing).
 *
 * Samples are handed back in the order the blocks ran; l2p_live_next says when it needs them
 * (L2P_LIVE_NEED) before it can choose, so the watcher flushes the activity records once per
 * stage, not once per block.
 */
#ifndef L2P_LIVE_H
#define L2P_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "l2p_activity.h" /* l2p_window_seen */
#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define L2P_LIVE_MAX_ARMS 48
#define L2P_LIVE_MAX_SAMPLES 512 /* per arm and phase */
#define L2P_LIVE_MAX_WIN 8       /* windows per arm */
#define L2P_LIVE_MAX_TARGETS 64
#define L2P_LIVE_MAX_REST_RATIO 64 /* rest units per block unit, the option's ceiling */
#define L2P_LIVE_REMEASURE 4 /* a cycle in this many rests even where none is needed */
/* The pace aims this far under max_overhead: the bound is a ceiling on the search's totals,
 * which the pace estimates from its newest cycles, so aiming at it lands on either side of it
 * (two H200s, `ddp` at 77cefa3: 1.23 % and 1.30 % against 1 %, the pace's model 1.5 times
 * short of the measure, since scaled by it: l2persist/process/costs.py, Costs.correction). */
#define L2P_LIVE_OVERHEAD_AIM 0.8
/* verify's target_halfwidth: "verify, in a fresh process, within 1 % of advise" (issue 50)
 * needs the plan's speedup measured to +-1 %, not only a verdict that settled on a wide
 * interval ("helps, 1.02-1.08" says the plan holds, not what it gives). */
#define L2P_LIVE_VERIFY_HALFWIDTH 0.01

#define L2P_LIVE_DONE (-1)
#define L2P_LIVE_NEED (-2)      /* record the pending blocks' samples, then ask again */
#define L2P_LIVE_DEFAULT_LIMIT ((size_t)-1) /* an arm's set-aside: the device's default */

/* A buffer some hot graph's kernels use: a window can be put on it. */
typedef struct {
    uint64_t bytes;
    double weight;   /* GPU time of the kernels that use it (any unit; only the order counts) */
} l2p_live_target;

typedef struct {
    size_t set_aside;            /* bytes, or L2P_LIVE_DEFAULT_LIMIT */
    size_t n_win;
    int target[L2P_LIVE_MAX_WIN];        /* index into the targets */
    double hit_ratio[L2P_LIVE_MAX_WIN];
    int hit_prop[L2P_LIVE_MAX_WIN];      /* L2P_ACCESS_* */
    int miss_prop[L2P_LIVE_MAX_WIN];
} l2p_live_arm;

typedef struct {
    size_t stage_rounds;        /* rounds of the first halving stage (2) */
    size_t next_stage_rounds;   /* rounds of each later stage (1) */
    size_t confirm_rounds;      /* the confirmation's first rounds (6) */
    size_t max_confirm_rounds;  /* rounds at most while undecided (40) */
    double min_gain;            /* (0.01) */
    double confidence;          /* (0.95) */
    int confirm_only;           /* verify: arms 0, 1 and 2 (the plan) go straight to confirm */
    double target_halfwidth;    /* > 0: the confirmation goes on, decided or not, until the
                                 * speedup's interval is within +-this of it (relative), or
                                 * max_confirm_rounds (0: off, advise; verify's is
                                 * L2P_LIVE_VERIFY_HALFWIDTH) */
    unsigned long long seed;
    /* Not the search's own: the watcher's pace (l2p_live_rest_units), kept here because this
     * is the one home of the live defaults. */
    double max_overhead;        /* of the program's wall time while advising (0.01; 0: no rest) */
    size_t max_rest_ratio;      /* rest units per block unit at most (20: a twenty-first recorded) */
} l2p_live_options;

typedef struct {
    int done, decided;       /* decided: the confirmation's rule settled, or its interval met
                              * target_halfwidth; verify's (a width asked for) also when its
                              * cap ended it (not the budget) */
    int capped;              /* the confirmation ended at max_confirm_rounds unsettled: the
                              * winner's interval reaches both above and below 1 + min_gain;
                              * advise's is then undecided; verify's answer is read from its
                              * interval */
    int winner;              /* the confirmed candidate, or -1 (no candidate arms) */
    int helps, slows;        /* the winner against the better baseline (l2p_tune_verdict) */
    int baseline;            /* the better baseline: 0 limit 0, 1 the default */
    int baseline_decided;    /* limit 0 and the default told apart (else the default) */
    double base_value[2], winner_value; /* confirmation medians (per unit) */
    double speedup, ci_low, ci_high;    /* better baseline / winner */
    size_t search_blocks, confirm_blocks, confirm_rounds;
    double search_median[L2P_LIVE_MAX_ARMS]; /* each arm's search median (NaN: none) */
    size_t stage_dropped[L2P_LIVE_MAX_ARMS]; /* the stage an arm was dropped after (0: never) */
} l2p_live_result;

typedef struct {
    l2p_live_options o;
    size_t n_arms;
    int alive[L2P_LIVE_MAX_ARMS];
    int phase;                /* 0 search, 1 confirm, 2 done */
    size_t stage, round;      /* the current stage; rounds issued whole in this phase */
    size_t due;               /* the round count at which the next decision is made */
    int round_closed;         /* the current round was issued whole and counted */
    int order[L2P_LIVE_MAX_ARMS]; /* this round's arms */
    size_t n_order, at;       /* arms in this round, next to issue */
    int pending[L2P_LIVE_MAX_ARMS * 8]; /* blocks issued, samples not yet recorded (a stage
                                        * of 8 rounds at most, or 32 rounds of 3 arms) */
    size_t n_pending, pend_head;
    double s[2][L2P_LIVE_MAX_ARMS][L2P_LIVE_MAX_SAMPLES]; /* [phase][arm] samples */
    size_t n_s[2][L2P_LIVE_MAX_ARMS];
    l2p_live_result r;
} l2p_live;

void l2p_live_options_default(l2p_live_options *o);
/* n_arms >= 2 (the two baselines first); confirm_only needs exactly 3. */
l2p_status l2p_live_init(l2p_live *s, size_t n_arms, const l2p_live_options *o);
/* The arm of the next block, L2P_LIVE_NEED, or L2P_LIVE_DONE. */
int l2p_live_next(l2p_live *s);
/* The arm l2p_live_next would return now without asking for samples or planning a round (the
 * rest of the round issued), or L2P_LIVE_NEED where that is not known yet; changes nothing.
 * The watcher readies that arm's graphs before a block's synchronization (switcher.py). */
int l2p_live_peek(const l2p_live *s);
/* The oldest pending block's sample (GPU time per unit of work, > 0 and finite). */
l2p_status l2p_live_record(l2p_live *s, double value);
/* Stop now (the budget ran out): the verdict from the confirmation's samples so far; a search
 * that never reached its confirmation says "don't", undecided. */
l2p_status l2p_live_finish(l2p_live *s);

/* ---- what watching costs the program ----
 * The watcher records one block per cycle: it switches to the block's arm (switch_s), lets `r`
 * units of the program run unrecorded under it (a rest: CUPTI paused, rest_s per unit, what the
 * program costs unwatched), then records the block's `units` units (block_s per unit). What
 * watching adds to the program's wall time is the switch and the block's excess over the rest;
 * recording every block back to back (r = 0) costs a host-bound program several per cent
 * (CUPTI adds ~0.5 us of host time per kernel launched) and a switch re-instantiates graphs.
 * Returns the fewest rest units that keep that addition at most max_overhead of the cycle, at
 * most max_rest_ratio blocks' worth; 0 where max_overhead is 0 (record back to back: the
 * fastest advice); one block's worth (go on measuring) while a cost is not known (a time that
 * is not finite and positive). Where nothing needs a rest, every L2P_LIVE_REMEASURE-th cycle
 * (`cycle`, counted from 0) still gets one block's worth: a noisy pair that said "free" must
 * not stop the measuring for good. `capped` (may be NULL) is set to 1 where the bound needed
 * more than max_rest_ratio blocks' worth (it is out of reach on this program), else 0.
 * max_overhead bounds all that observing costs: `hooks_share` is the share of the wall time
 * the watcher's per-call hooks already take (measured in the program: paid in blocks and in
 * the rests' hooked parts, which a longer rest does not hide; NaN or 0: none known), and the
 * switch and the blocks get what is left, a quarter of it at least; all of it aimed at
 * L2P_LIVE_OVERHEAD_AIM of max_overhead. */
size_t l2p_live_rest_units(double switch_s, double rest_s, double block_s, size_t units,
                           double max_overhead, double hooks_share, size_t max_rest_ratio,
                           size_t cycle, int *capped);

/* The rests' cap, in blocks' worth, that the time left allows: where the budget leaves room
 * (time_left_s over the search's blocks_left, a share L2P_LIVE_BUDGET_SHARE of it, the rest
 * kept for confirmation rounds past the first), the rests may run longer than max_rest_ratio
 * blocks' worth (up to L2P_LIVE_MAX_REST_RATIO), so that the max_overhead bound is met where
 * the program's switches and recording cost more than max_rest_ratio blocks' worth of rest can
 * hide: a 225-node graph's switch took 9.1 ms, eager records cost 33-50 % per recorded unit
 * (H200 zoo at 1011bb0), and at 20 blocks' worth observing cost 1.9-2.9 %. Never less than
 * max_rest_ratio (a tight budget keeps the old pace); max_rest_ratio itself where a time is
 * not known (not finite and positive) or nothing is left. Times as l2p_live_rest_units'. */
#define L2P_LIVE_BUDGET_SHARE 0.75
size_t l2p_live_rest_ratio(double time_left_s, size_t blocks_left, double switch_s,
                           double rest_s, double block_s, size_t units, size_t max_rest_ratio);
/* The blocks the search issues at least before it is done, from where it is: the current
 * round's left, its phase's due rounds, the later halving stages (next_stage_rounds each), and
 * the confirmation's first confirm_rounds (more while undecided are not counted; a
 * confirmation measured to a width, verify's, counts to max_confirm_rounds). */
size_t l2p_live_blocks_left(const l2p_live *s);

/* The candidate arms for these targets: [0] limit 0 and [1] the default (no windows), then
 * per set-aside level (a quarter, half and all of persisting_max, on the granule) a
 * persisting window on each of the `tries` best-ranked targets (weight, scaled down under
 * l2_bytes / 16: smaller buffers stay in the L2 anyway) alone at hitRatio = level /
 * bytes (at most 1) and one on all of them together, and a streaming window (no set-aside) on
 * each of those targets of at least half the L2 (data read once, larger than the cache: the
 * window form of an evict-first hint that protects the rest). Returns the arms written. */
size_t l2p_live_arms(const l2p_live_target *t, size_t n, size_t granule, size_t persisting_max,
                     size_t l2_bytes, size_t tries, l2p_live_arm *out, size_t cap);

/* ---- the objective: GPU time per unit at the program's own mix ----
 * A block's sample is not its GPU time divided by the units that ran in it: a program whose
 * requests draw their shapes at random puts a different mix in every block, and that sample
 * counts the mix, not the plan (a server's three decode graphs: one arm's samples at 0.43 to
 * 5.4 ms per unit by how many other requests landed in the block, H100, fb5dac1). Instead,
 * each launch key (a kernel and its launch shape, l2p_activity.h) is timed per launch in the
 * block, and the block is priced at the reference's mix: the launches each key made in the
 * reference stretch (the probe, under the device's default, before any arm), each at the
 * block's time per launch of that key, divided by the reference's units of work. Keys that did
 * not launch in a block keep their share of the reference at the ratio of the keys that did
 * (share[b]: the reference's GPU time in keys present in block b). Arms are then compared on
 * what the same work costs, and the mix enters only through the fixed reference weights.
 * ref_ns / ref_n: per key, the reference's GPU ns and launches; key_ns / key_n: n_keys x
 * n_blocks, row = key (l2p_activity_blocks' layout); out[b]: ms per unit (0 where share[b] is
 * 0: no key of the reference launched). L2P_ERR_VALUE for a reference with no GPU time, units
 * not > 0, or a negative or non-finite reference entry. */
l2p_status l2p_live_mix(const double *ref_ns, const double *ref_n, size_t n_keys,
                        double ref_units, const double *key_ns, const double *key_n,
                        size_t n_blocks, double *out, double *share);

/* Whether a kernel's GPU time is mostly its wait for other ranks (a collective: NCCL's
 * all-reduce and the like), so that the reference leaves it unpriced. On a rank its time is
 * how long the slowest peer took to arrive, which moves with the peers' progress, not with
 * this rank's L2: ddp on two H200s (da14298) read one all-reduce at 198 us under the
 * default and 236 us under a plan that made rank 0's own kernels faster. Each rank's own
 * kernels are priced, and the team's mean carries every rank's. */
int l2p_live_waits_on_peers(const char *kernel);

/* ---- did the windows land ----
 * Whether a plan arm's windows were on the kernels while it was installed, from CUPTI's launch
 * attributes (l2p_activity_attributes): the windows the arm meant (meant, n_meant: base and
 * bytes as the switcher asked) against the windows the records carried in the arm's checked
 * blocks (seen[i] on counts[i] kernels; bare kernels carried none). A seen window is the arm's
 * when its base is a meant one's and its bytes at most that one's (the driver may cut a window
 * to the device's largest). kernels: all the records; meant: those under one of the arm's
 * windows; foreign: those under a window the arm did not mean (another arm's left behind, or
 * the program's own); missing: meant windows no kernel carried. A baseline arm means none, so
 * any window is foreign there. L2P_ERR_VALUE for a NULL array with a count, or more than
 * L2P_ACTIVITY_WINDOWS meant. */
typedef struct {
    uint64_t kernels, meant, foreign;
    size_t missing;
} l2p_landed;
l2p_status l2p_live_landed(const l2p_window_seen *meant, size_t n_meant,
                           const l2p_window_seen *seen, const uint64_t *counts, size_t n_seen,
                           uint64_t bare, l2p_landed *out);

/* ---- verify's answer ----
 * verify's exit status from the watcher's interval of the plan's speedup over the better
 * baseline (ci_low..ci_high, the core's `helps` verdict beside it) and the least gain that
 * counts (1 + min_gain). A plan that is a baseline (a "don't") is not checked against itself:
 * advise's arms were searched instead, and the plan fails when one helps now (helps: the
 * search's winner). Otherwise the plan holds only where the whole interval is past
 * 1 + min_gain, fails where the whole interval is short of it, and an interval reaching both
 * sides is inconclusive, and so is no interval at all (both ends 0: the search ended, the
 * program exited, before its verdict), except a baseline plan's search that decided (decided)
 * with no interval: it compared no arm, only the baselines could be tried, and the plan holds.
 * L2P_ERR_VALUE for min_gain outside [0, 1) or an interval not 0 < low <= high, finite. */
enum { L2P_VERIFY_HOLDS = 0, L2P_VERIFY_FAILS = 1, L2P_VERIFY_INCONCLUSIVE = 3 };
l2p_status l2p_live_verify_status(int baseline_plan, int decided, int helps, double ci_low,
                                  double ci_high, double min_gain, int *status);

/* ---- what a saved plan is matched by in the next process ---- */

/* A graph's signature: its kernels in node order (each a name and launch shape, as the
 * binding writes them), hashed (FNV-1a, 64 bits, each name
 * ended by a newline), so that the same capture in the next run (new addresses, same kernels)
 * is found again. Written "k<count>-<16 hex digits>" into out (at least 24 bytes). */
void l2p_live_signature(const char *const *names, size_t n, char *out, size_t cap);

/* Where a saved window lands in a new capture of its graph: the pointer word at (node, param,
 * offset) of the new scan's uses, moved by delta (the buffer's start minus that word when the
 * plan was made), kept inside the word's allocation; bytes at most what is left of it.
 * 1 with *base and *nbytes, 0 when no such word is there (a different graph after all). */
typedef struct {
    size_t node;
    unsigned param, offset;
    uint64_t word, range_start, range_size;
} l2p_live_use;
int l2p_live_locate(const l2p_live_use *uses, size_t n, size_t node, unsigned param,
                    unsigned offset, int64_t delta, uint64_t bytes, uint64_t *base,
                    uint64_t *nbytes);

/* ---- targets: the ranges the kernels' words point into (l2p_live_ranges.c) ----
 * An allocation is not a buffer: PyTorch's caching allocator puts many tensors in one segment,
 * and targets that were whole allocations, weighed by every kernel touching anything in them,
 * put three 2 MiB small-pool segments ahead of the 36 MiB flat weight that every decode step
 * reads (issue 50, H100, fb5dac1). The scan knows the words the kernels pass, so they split
 * each allocation (an allocation: one (range_start, range_size)):
 *   1. a piece starts at each distinct word pointed at and ends at the next one, or at the
 *      allocation's end: a tensor inside a segment is its own piece (the bytes before the
 *      first word are no one's: nothing is known to point there). An odd word is taken for
 *      no pointer (range_of: L2P_LIVE_NO_RANGE): no element wider than a byte starts there,
 *      and stale bytes in a by-value struct can look like a pointer;
 *   2. a piece's signature is the (group, kernel, param) of every word at its start, in
 *      (group, node, param, offset) order: which kernels read it in what role, not which nodes;
 *   3. neighbouring pieces whose signatures repeat with a period p (1..L2P_LIVE_MAX_PERIOD) for
 *      at least two whole periods are one range over the run's whole periods: the slices of a
 *      flat parameter tensor viewed per layer, each read by its own layer's nodes, and a
 *      window over them all serves every layer. Greedily from the first piece not yet taken:
 *      the run covering the most pieces, on a tie the shortest period; a piece in no such run
 *      is a range alone;
 *   4. a range's weight is the sum of the weights of its distinct readers (group, node): only
 *      the kernels whose words point into it.
 * The ranges come out by address (allocation, then start). */
#define L2P_LIVE_MAX_PERIOD 32 /* pieces per repeat: a layer's weight views, say */

typedef struct {
    size_t group;       /* the graph (one index per graph) */
    size_t node;        /* the kernel node's position in it */
    unsigned param, offset;
    uint64_t kernel;    /* the node's kernel: equal for equal kernels (its name, numbered) */
    uint64_t word, range_start, range_size; /* the address passed and its allocation */
    double weight;      /* the node's GPU time (any unit; the same for each of its words) */
} l2p_live_word;

typedef struct {
    uint64_t address, size;
    double weight;      /* its distinct readers' weights summed */
    size_t readers;     /* distinct (group, node) whose words point into it */
    size_t pieces;      /* distinct words it starts at */
} l2p_live_range;

#define L2P_LIVE_NO_RANGE ((size_t)-1) /* range_of of a word taken for no pointer (odd) */

/* The ranges of n words (rules above) into *out (free() it), *n_out of them; range_of[i]:
 * word i's range, or L2P_LIVE_NO_RANGE. L2P_ERR_VALUE for a word outside its allocation or a weight not finite and
 * >= 0 (naming the word); L2P_ERR_NO_MEMORY. */
l2p_status l2p_live_ranges(const l2p_live_word *words, size_t n, l2p_live_range **out,
                           size_t *n_out, size_t *range_of);

/* ---- the live plan document ----
 * What `advise --` writes and `apply` / `verify` / L2PERSIST_PLAN read, as JSON:
 *   {"format": L2P_LIVE_PLAN_FORMAT, "device": {"name": the GPU's name},
 *    "set_aside": null (leave the device's default) or bytes,
 *    "windows": [{"graph": its signature (l2p_live_signature), "node", "param", "offset" (the
 *                 pointer word l2p_live_locate finds again), "delta", "bytes", "hit_ratio",
 *                 "hit_prop", "miss_prop", "nodes": [the kernel nodes' positions],
 *                 "stream": absent or null (the window goes on the graph's nodes), or "launch"
 *                 (a stream window: "graph" is the signature of one eager launch, node 0, and
 *                 the window goes on the stream that kernel is launched on)}, ...]}
 * (other keys are kept and not judged). Its rules are the two tables below, one row per field:
 * its name, its kind and its range. The binding walks the parsed JSON by them (the JSON types
 * are its to judge, with each row's words) and l2p_live_field_check judges the values; every
 * message names the field ("windows[0].hit_ratio: expected a number in (0, 1], got nan"). */
#define L2P_LIVE_PLAN_FORMAT "l2persist-live-plan/1"
#define L2P_LIVE_PLAN_MAX_WINDOWS 4096
#define L2P_LIVE_PLAN_MAX_NODES 65536 /* node positions per window */
#define L2P_LIVE_PLAN_MAX_GRAPHS 65536 /* the graphs advise saw, listed (the first, sorted) */

typedef enum {
    L2P_LIVE_F_TEXT = 1, /* a string: equal to `text` (L2P_LIVE_F_EXACT), starting with it, or
                          * (text NULL) not empty */
    L2P_LIVE_F_INT,      /* an int in [lo, hi] */
    L2P_LIVE_F_RATIO,    /* a finite number in (0, 1] (a hitRatio) */
    L2P_LIVE_F_PROP,     /* an access property by name (l2p_live_prop_name) */
    L2P_LIVE_F_LIST,     /* a list of min_items..max_items objects, each judged by `fields` */
    L2P_LIVE_F_INTS,     /* a list of min_items..max_items ints, each in [lo, hi] */
} l2p_live_kind;

enum {
    L2P_LIVE_F_EXACT = 1u, /* TEXT: the whole value is `text` */
    L2P_LIVE_F_NULL = 2u,  /* null (or absent) allowed: nothing to judge */
    L2P_LIVE_F_SHOW = 4u,  /* the message shows the value given ("..., got 2.0") */
    L2P_LIVE_F_CHOICE = 8u, /* TEXT: the whole value is one of `text`'s words, '|' between */
};

typedef struct l2p_live_field l2p_live_field;
struct l2p_live_field {
    const char *name;       /* the key; "device.name": the key "name" of the object at "device" */
    l2p_live_kind kind;
    unsigned flags;         /* L2P_LIVE_F_* */
    long long lo, hi;       /* INT: its range; INTS: each item's */
    size_t min_items, max_items;   /* LIST, INTS */
    const char *text;       /* TEXT: the value, its prefix or (CHOICE) the values allowed */
    const char *expect;     /* TEXT, LIST, INTS: what the message says is expected */
    const l2p_live_field *fields;  /* LIST: each item's fields (n_fields rows) */
    size_t n_fields;
};

/* A field's value as the binding converted it from the JSON (the member of the row's kind). */
typedef struct {
    int null;               /* null or absent (a L2P_LIVE_F_NULL row: nothing to judge) */
    const char *text;       /* TEXT, PROP: UTF-8 */
    long long i;            /* INT */
    double f;               /* RATIO */
    size_t n;               /* LIST, INTS: how many items */
    const long long *items; /* INTS: the items (NULL: only their count is judged) */
} l2p_live_value;

/* The document's rows (in this order) and a window's (each row's index its enum). */
enum { L2P_LIVE_P_FORMAT, L2P_LIVE_P_DEVICE, L2P_LIVE_P_VERDICT, L2P_LIVE_P_SET_ASIDE,
       L2P_LIVE_P_WINDOWS, L2P_LIVE_P_GRAPHS, L2P_LIVE_P_NFIELDS };
/* An item of the plan's "graphs": a graph advise saw (windowed or not), so that apply can tell
 * a graph left as advised from a shape advise never saw. */
enum { L2P_LIVE_G_GRAPH, L2P_LIVE_G_NFIELDS };
enum { L2P_LIVE_W_GRAPH, L2P_LIVE_W_NODE, L2P_LIVE_W_PARAM, L2P_LIVE_W_OFFSET, L2P_LIVE_W_DELTA,
       L2P_LIVE_W_BYTES, L2P_LIVE_W_HIT_RATIO, L2P_LIVE_W_HIT_PROP, L2P_LIVE_W_MISS_PROP,
       L2P_LIVE_W_NODES, L2P_LIVE_W_STREAM, L2P_LIVE_W_NFIELDS };
extern const l2p_live_field l2p_live_plan_fields[L2P_LIVE_P_NFIELDS];
extern const l2p_live_field l2p_live_window_fields[L2P_LIVE_W_NFIELDS];
extern const l2p_live_field l2p_live_graph_fields[L2P_LIVE_G_NFIELDS];

/* An access property's name in the document ("normal", "streaming", "persisting"), NULL for
 * anything else; and back (L2P_ACCESS_*, or -1). */
const char *l2p_live_prop_name(int prop);
int l2p_live_prop_of(const char *name);

/* What the row's message says it expects ("an int in [0, 4096]", "a number in (0, 1]"), for
 * the field itself or (item) for one item of an INTS row, into out. */
void l2p_live_field_expect(const l2p_live_field *f, int item, char *out, size_t cap);

/* The value of one field: L2P_OK, or L2P_ERR_VALUE with "<where>.<name>: expected ..." (where
 * "" for the document's own fields). An INTS row's items are judged when v->items is set. */
l2p_status l2p_live_field_check(const l2p_live_field *f, const l2p_live_value *v,
                                const char *where);
/* Item k of an INTS row ("<where>.<name>[k]: expected an int in [lo, hi], got v"). */
l2p_status l2p_live_item_check(const l2p_live_field *f, size_t k, long long v, const char *where);

/* One saved window's values (v[L2P_LIVE_W_*]), field by field in the table's order; `where`
 * names the window in the message ("windows[3]"). */
l2p_status l2p_live_window_check(const l2p_live_value *v, const char *where);

#ifdef __cplusplus
}
#endif
#endif
