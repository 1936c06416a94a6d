/* advise_search(): the advisor (csrc/core/l2p_advise.c) driven from Python. The extension
 * converts only: each evaluation calls `evaluate(work, config, repeat)`, which installs the
 * configuration (a plan over every workload's targets), runs workload `work` and returns the
 * samples, and the confirmation calls `mix(config, repeat)`, which runs every workload
 * interleaved under one installation; the search and every decision are the core's. */
#include "l2p_py.h"
#include "params.h"

#include <math.h>
#include <string.h>

#include "l2p_advise.h"
#include "l2p_timing.h"

typedef struct {
    l2p_state *st;
    PyObject *evaluate, *mix;
    size_t n_work;
    int python_error;
} bridge;

static l2p_status call_evaluate(void *ctx, size_t work, const l2p_advise_config *cfg,
                                size_t repeat, double *samples)
{
    bridge *b = ctx;
    PyObject *c = l2p_py_config(b->st, cfg->set_aside, cfg->n, cfg->win);
    PyObject *res = c ? PyObject_CallFunction(b->evaluate, "nNn", (Py_ssize_t)work, c,
                                              (Py_ssize_t)repeat)
                      : NULL;
    if (l2p_py_samples(res, "evaluate", repeat, samples) < 0) {
        b->python_error = 1;
        return l2p_fail(L2P_ERR_CALLBACK, "evaluate raised");
    }
    return L2P_OK;
}

static l2p_status call_mix(void *ctx, const l2p_advise_config *cfg, size_t repeat,
                           double *samples)
{
    bridge *b = ctx;
    PyObject *c = l2p_py_config(b->st, cfg->set_aside, cfg->n, cfg->win);
    PyObject *res = c ? PyObject_CallFunction(b->mix, "Nn", c, (Py_ssize_t)repeat) : NULL;
    if (l2p_py_samples(res, "mix", b->n_work * repeat, samples) < 0) {
        b->python_error = 1;
        return l2p_fail(L2P_ERR_CALLBACK, "mix raised");
    }
    return L2P_OK;
}

/* A sequence of n items, each converted by `one`; n_out gets its length. */
static int each(PyObject *obj, const char *name, size_t cap, size_t *n_out,
                int (*one)(PyObject *item, const char *name, size_t i, void *dst), void *dst)
{
    PyObject *seq = PySequence_Fast(obj, name);
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = 0;
    if ((size_t)n > cap) {
        PyErr_Format(PyExc_ValueError, "%s: %zd items, at most %zu", name, n, cap);
        rc = -1;
    }
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
        rc = one(PySequence_Fast_GET_ITEM(seq, i), name, (size_t)i, dst);
    Py_DECREF(seq);
    *n_out = (size_t)n;
    return rc;
}

static int one_coef(PyObject *item, const char *name, size_t i, void *dst)
{
    double v = PyFloat_AsDouble(item);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    if (!(v > 0.0) || isinf(v)) {
        PyErr_Format(PyExc_ValueError, "%s: item %zu is %R; weights must be finite and > 0",
                     name, i, item);
        return -1;
    }
    ((double *)dst)[i] = v;
    return 0;
}

static int one_flag(PyObject *item, const char *name, size_t i, void *dst)
{
    int v = PyObject_IsTrue(item);
    (void)name;
    if (v < 0) return -1;
    ((int *)dst)[i] = v;
    return 0;
}

static int one_index(PyObject *item, const char *name, size_t i, void *dst)
{
    long long v;
    if (l2p_py_ranged_int(item, name, "an index", 0, INT_MAX, &v) < 0) return -1;
    ((int *)dst)[i] = (int)v;
    return 0;
}

static int one_bytes(PyObject *item, const char *name, size_t i, void *dst)
{
    long long v;
    if (l2p_py_ranged_int(item, name, "bytes", 1, LLONG_MAX, &v) < 0) return -1;
    ((size_t *)dst)[i] = (size_t)v;
    return 0;
}

/* The scalar options are optional here: an option not given keeps the core's default
 * (l2p_advise_options_default, the one home of every default; advise_defaults() shows them to
 * Python). */
typedef struct {
    PyObject *evaluate, *device, *weights, *must_not_slow, *owner, *target_bytes, *groups;
    l2p_opt tries, search_repeat, repeat, confirm_rounds, recheck_rounds;
    l2p_opt remeasure_levels, remeasure_rounds;
    l2p_opt min_gain, confidence;
    l2p_opt seed;
    PyObject *facts, *mix;
    int check_only;
    l2p_opt warmup, hold_us;
} advise_args;

/* The scalar options given, over the core's defaults in o. */
static void scalar_options(const advise_args *a, l2p_advise_options *o)
{
    if (a->tries.given) o->tries = (size_t)a->tries.i;
    if (a->search_repeat.given) o->search_repeat = (size_t)a->search_repeat.i;
    if (a->repeat.given) o->repeat = (size_t)a->repeat.i;
    if (a->confirm_rounds.given) o->confirm_rounds = (size_t)a->confirm_rounds.i;
    if (a->recheck_rounds.given) o->recheck_rounds = (size_t)a->recheck_rounds.i;
    if (a->remeasure_levels.given) o->remeasure_levels = (size_t)a->remeasure_levels.i;
    if (a->remeasure_rounds.given) o->remeasure_rounds = (size_t)a->remeasure_rounds.i;
    if (a->min_gain.given) o->min_gain = a->min_gain.f;
    if (a->confidence.given) o->confidence = a->confidence.f;
    if (a->seed.given) o->seed = (unsigned long long)a->seed.i;
}

static l2p_status no_enqueue(void *ctx, cudaStream_t stream)
{
    (void)ctx;
    (void)stream;
    return L2P_OK;
}

static cudaError_t no_spin(unsigned long long ns, cudaStream_t stream)
{
    (void)ns;
    (void)stream;
    return cudaSuccess;
}

/* The workloads' timing options (evaluate times them) by the core's timing rule, so that
 * advise() names a bad warmup or hold_us before any device is needed. */
static int timing_options(l2p_state *st, const advise_args *a)
{
    l2p_timing_run run = {.enqueue = no_enqueue, .repeat = 1, .spin = no_spin};
    run.warmup = a->warmup.given ? (long)a->warmup.i : 0;
    run.hold_us = a->hold_us.given ? a->hold_us.f : 0.0;
    return l2p_timing_check(&run) == L2P_OK ? 0 : l2p_py_raise_int(st);
}

static int options_arg(l2p_state *st, const advise_args *a, l2p_advise_options *o)
{
    l2p_device_facts f = {0};
    size_t n_w, n_m, n_t, n_b, n_g;
    l2p_advise_options_default(o);
    if (l2p_py_device_facts(st, a->device, a->facts, &f) < 0 ||
        each(a->weights, "weights", L2P_ADVISE_MAX_WORK, &n_w, one_coef, o->coef) < 0 ||
        each(a->must_not_slow, "must_not_slow", L2P_ADVISE_MAX_WORK, &n_m, one_flag,
             o->must_not_slow) < 0 ||
        each(a->owner, "owner", L2P_ADVISE_MAX_TARGETS, &n_t, one_index, o->owner) < 0 ||
        each(a->target_bytes, "target_bytes", L2P_ADVISE_MAX_TARGETS, &n_b, one_bytes,
             o->bytes) < 0 ||
        each(a->groups, "groups", L2P_ADVISE_MAX_TARGETS, &n_g, one_index, o->group) < 0)
        return -1;
    if (n_m != n_w || n_b != n_t || n_g != n_t) {
        PyErr_Format(PyExc_ValueError, "must_not_slow: one per workload (%zu, got %zu); "
                     "owner, target_bytes, groups: one per target (%zu, %zu, %zu)", n_w, n_m,
                     n_t, n_b, n_g);
        return -1;
    }
    o->granule = f.granule;
    o->persisting_max = f.persisting_max;
    o->default_limit = f.default_limit;
    o->set_aside_fixed = f.set_aside_fixed;
    o->n_work = n_w;
    o->n_targets = n_t;
    scalar_options(a, o);
    if (l2p_advise_check_options(o) != L2P_OK) return l2p_py_raise_int(st);
    return 0;
}

static PyObject *work_obj(const l2p_advise_work *w)
{
    return Py_BuildValue("{s:s,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:O,s:O,s:n}", "baseline",
                         w->baseline ? "default" : "limit0", "limit0_ms", w->base_ms[0],
                         "default_ms", w->base_ms[1], "aside_ms", w->aside_ms, "plan_ms",
                         w->plan_ms, "speedup", w->speedup, "ci_low", w->ci_low, "ci_high",
                         w->ci_high, "tax", w->tax, "helps", w->helps ? Py_True : Py_False,
                         "slows", w->slows ? Py_True : Py_False, "n_windows",
                         (Py_ssize_t)w->n_windows);
}

static PyObject *result_obj(l2p_state *st, const l2p_advise_options *o, const l2p_advise_result *r)
{
    PyObject *work = PyList_New((Py_ssize_t)o->n_work);
    PyObject *levels = work ? PyList_New(0) : NULL;
    for (size_t i = 0; levels && i < o->n_work; i++) {
        PyObject *w = work_obj(&r->work[i]);
        if (!w) Py_CLEAR(levels);
        else PyList_SET_ITEM(work, (Py_ssize_t)i, w);
    }
    for (size_t i = 0; levels && i < r->n_levels; i++) {
        PyObject *pair = Py_BuildValue("(nd)", (Py_ssize_t)r->levels[i], r->level_total[i]);
        if (!pair || PyList_Append(levels, pair) < 0) Py_CLEAR(levels);
        Py_XDECREF(pair);
    }
    /* the levels re-measured before the pick, with their totals of pooled medians */
    PyObject *remeasured = levels ? PyList_New(0) : NULL;
    for (size_t i = 0; remeasured && i < r->n_levels && i < L2P_TUNE_MAX_LEVELS; i++) {
        if (isnan(r->remeasured_total[i])) continue;
        PyObject *pair = Py_BuildValue("(nd)", (Py_ssize_t)r->levels[i], r->remeasured_total[i]);
        if (!pair || PyList_Append(remeasured, pair) < 0) Py_CLEAR(remeasured);
        Py_XDECREF(pair);
    }
    if (!remeasured) Py_CLEAR(levels);
    PyObject *found = levels ? l2p_py_config(st, r->found_set_aside, o->n_targets, r->found)
                             : NULL;
    if (!found) {
        Py_XDECREF(work);
        Py_XDECREF(levels);
        Py_XDECREF(remeasured);
        return NULL;
    }
    PyObject *again = r->rechecked
        ? Py_BuildValue("{s:d,s:[dd],s:O,s:n}", "speedup", r->recheck_speedup, "ci",
                        r->recheck_ci_low, r->recheck_ci_high, "held",
                        r->recheck_held ? Py_True : Py_False, "rounds",
                        (Py_ssize_t)r->rechecked_rounds)
        : Py_NewRef(Py_None);
    if (!again) {
        Py_DECREF(work);
        Py_DECREF(levels);
        Py_DECREF(remeasured);
        Py_DECREF(found);
        return NULL;
    }
    return Py_BuildValue("{s:N,s:N,s:N,s:n,s:N,s:O,s:i,s:s,s:s,s:n,s:d,s:d,s:d,s:d,s:d,s:n,s:n,"
                         "s:N}",
                         "work", work, "levels", levels, "remeasured", remeasured,
                         "pass_set_aside", (Py_ssize_t)r->pass_set_aside, "found", found, "helps",
                         r->helps ? Py_True : Py_False, "blocked_by", r->blocked_by,
                         "baseline", r->baseline ? "default" : "limit0",
                         "keep", r->keep ? "default" : "limit0",
                         "recommended_set_aside", (Py_ssize_t)r->recommended_set_aside,
                         "total_base_ms", r->total_base_ms, "total_plan_ms", r->total_plan_ms,
                         "speedup", r->speedup, "ci_low", r->ci_low, "ci_high", r->ci_high,
                         "evals", (Py_ssize_t)r->evals, "confirm_rounds",
                         (Py_ssize_t)r->confirm_rounds, "recheck", again);
}

static PyObject *advise_search_impl(PyObject *m, const void *args)
{
    const advise_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    /* the scalar options are checked by the parser, the timing options here: before any
     * device call */
    if (timing_options(st, a) < 0) return NULL;
    if (a->check_only) Py_RETURN_NONE;
    l2p_advise_options *o = PyMem_Malloc(sizeof *o);
    l2p_advise_result *r = PyMem_Malloc(sizeof *r);
    PyObject *res = NULL;
    bridge b = {st, a->evaluate, a->mix, 0, 0};
    if (!o || !r) {
        PyErr_NoMemory();
        goto done;
    }
    if (options_arg(st, a, o) < 0) goto done;
    b.n_work = o->n_work;
    l2p_status rc = l2p_advise_run(o, call_evaluate, a->mix == Py_None ? NULL : call_mix, &b, r);
    if (b.python_error) goto done;
    if (rc != L2P_OK) {
        l2p_py_raise(st);
        goto done;
    }
    res = result_obj(st, o, r);
    l2p_advise_result_free(r);
done:
    PyMem_Free(o);
    PyMem_Free(r);
    return res;
}
L2P_DEFINE_FN(advise_search_fn, advise_args, advise_search_impl, "advise_search",
              "The advisor's search and confirmation (l2p_advise.h) over an evaluate(work, "
              "config, repeat) callback; returns its result as a dict. l2persist.advise is "
              "the user's entry point.", "dict",
              L2P_PARAM(advise_args, evaluate, L2P_P_CALLABLE, .flags = L2P_P_REQUIRED,
                        .doc = "evaluate(work, config, repeat) -> repeat samples (ms)"),
              L2P_PARAM(advise_args, device, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Device | int", .doc = "the device"),
              L2P_PARAM(advise_args, weights, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "per workload, its coefficient in "
                        "the objective (ms of it count this much; finite, > 0)"),
              L2P_PARAM(advise_args, must_not_slow, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[bool]", .doc = "per workload, whether a plan that "
                        "slows it is refused"),
              L2P_PARAM(advise_args, owner, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "per target, its workload"),
              L2P_PARAM(advise_args, target_bytes, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "per target, its window's bytes"),
              L2P_PARAM(advise_args, groups, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "per target, its alternatives group "
                        "(Plan.groups)"),
              L2P_PARAM(advise_args, tries, L2P_P_INT, .flags = L2P_P_KWONLY | L2P_P_NONE,
                        .lo = 0, .hi = 16, .what = "targets", .doc = "targets tried alone per "
                        "workload and level, largest first; None: the core's default "
                        "(advise_defaults())"),
              L2P_PARAM(advise_args, search_repeat, L2P_P_INT, .flags = L2P_P_NONE, .lo = 1,
                        .hi = 10000, .what = "samples", .doc = "samples per evaluation in the "
                        "search"),
              L2P_PARAM(advise_args, repeat, L2P_P_INT, .flags = L2P_P_NONE, .lo = 2,
                        .hi = 10000, .what = "samples", .doc = "samples per arm and round in "
                        "the confirmation"),
              L2P_PARAM(advise_args, confirm_rounds, L2P_P_INT, .flags = L2P_P_NONE, .lo = 1,
                        .hi = 64, .what = "rounds", .doc = "interleaved confirmation rounds (up "
                        "to 4x while undecided)"),
              L2P_PARAM(advise_args, recheck_rounds, L2P_P_INT, .flags = L2P_P_NONE, .lo = 0,
                        .hi = 64, .what = "rounds", .doc = "a recommended plan re-measured in "
                        "this many fresh rounds after the confirmation, dropped if it no "
                        "longer helps"),
              L2P_PARAM(advise_args, remeasure_levels, L2P_P_INT, .flags = L2P_P_NONE,
                        .lo = 0, .hi = 16, .what = "levels", .doc = "the search's best levels "
                        "measured again before the level is picked; 0: not"),
              L2P_PARAM(advise_args, remeasure_rounds, L2P_P_INT, .flags = L2P_P_NONE,
                        .lo = 0, .hi = 64, .what = "rounds", .doc = "fresh interleaved rounds "
                        "of that re-measure; 0: not"),
              L2P_PARAM(advise_args, min_gain, L2P_P_FLOAT, .flags = L2P_P_NONE, .flo = 0.0,
                        .fhi = 0.999, .doc = "the least weighted gain worth a plan"),
              L2P_PARAM(advise_args, confidence, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .flo = 0.51, .fhi = 0.999, .doc = "of the speedups' intervals"),
              L2P_PARAM(advise_args, seed, L2P_P_INT, .flags = L2P_P_NONE, .lo = 0,
                        .hi = LLONG_MAX, .what = "a seed", .doc = "the bootstrap's seed"),
              L2P_PARAM(advise_args, facts, L2P_P_OBJECT, .pytype = "tuple[int, int, int] | "
                        "None", .doc = "(granule, persisting_max, default_limit) instead of "
                        "asking the device (tests)"),
              L2P_PARAM(advise_args, mix, L2P_P_CALLABLE, .doc = "mix(config, repeat) -> "
                        "n_work * repeat samples (ms), workload-major: every workload "
                        "interleaved under one installation, for the confirmation (omitted: "
                        "each workload timed alone, as in the search)"),
              L2P_PARAM(advise_args, check_only, L2P_P_BOOL, .ival = 0, .doc = "only check "
                        "the scalar and timing options and return None: advise() checks them "
                        "before it needs a device"),
              L2P_PARAM(advise_args, warmup, L2P_P_INT, .flags = L2P_P_NONE, .lo = LLONG_MIN,
                        .hi = LLONG_MAX, .what = "calls", .doc = "the workloads' untimed calls "
                        "before each timing (evaluate times them): checked by the core's "
                        "timing rule, [0, 1000000]"),
              L2P_PARAM(advise_args, hold_us, L2P_P_FLOAT, .flags = L2P_P_NONE,
                        .doc = "the spin before each sample (evaluate's): checked by the core's "
                        "timing rule, [0, 1e6]"));

/* The core's defaults of the scalar options: the one home that advise() reads its own
 * signature's defaults from. */
static PyObject *advise_defaults_impl(PyObject *m, const void *args)
{
    l2p_advise_options o;
    (void)m;
    (void)args;
    l2p_advise_options_default(&o);
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:d,s:d,s:K}", "tries",
                         (Py_ssize_t)o.tries, "search_repeat", (Py_ssize_t)o.search_repeat,
                         "repeat", (Py_ssize_t)o.repeat, "confirm_rounds",
                         (Py_ssize_t)o.confirm_rounds, "recheck_rounds",
                         (Py_ssize_t)o.recheck_rounds, "remeasure_levels",
                         (Py_ssize_t)o.remeasure_levels, "remeasure_rounds",
                         (Py_ssize_t)o.remeasure_rounds, "min_gain", o.min_gain, "confidence",
                         o.confidence, "seed", o.seed);
}
L2P_DEFINE_FN(advise_defaults_fn, l2p_no_args, advise_defaults_impl, "advise_defaults",
              "The advisor's default options (l2p_advise_options_default): tries, "
              "search_repeat, repeat, confirm_rounds, recheck_rounds, remeasure_levels, "
              "remeasure_rounds, min_gain, confidence, "
              "seed.", "dict[str, int | float]", L2P_NO_PARAMS);

const l2p_fn *const l2p_advise_fns[] = {&advise_search_fn, &advise_defaults_fn, NULL};
