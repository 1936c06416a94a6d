/* tune_search(): the C tuner (csrc/core/l2p_tune.c) driven from Python. The extension only
 * converts: each evaluation calls the Python `evaluate(config, repeat)`, which installs the
 * configuration, runs the user's workload and returns the samples; every decision is the
 * core's. Every entry point is a row (params.h); the counts' ranges are the core's
 * (l2p_tune_check_options), the rows only refuse negative ones. */
#include "l2p_py.h"
#include "params.h"

#include <string.h>

#include "l2p_tune.h"

typedef struct {
    l2p_state *st;
    PyObject *evaluate;
    int python_error; /* evaluate raised: the exception is pending */
} bridge;

static PyObject *window_obj(l2p_state *st, const l2p_tune_window *w)
{
    if (!w->on) Py_RETURN_NONE;
    PyObject *hp = l2p_access_property(st, w->hit_prop);
    PyObject *mp = hp ? l2p_access_property(st, w->miss_prop) : NULL;
    PyObject *r = mp ? Py_BuildValue("{s:d,s:O,s:O}", "hit_ratio", w->hit_ratio, "hit_prop", hp,
                                     "miss_prop", mp)
                     : NULL;
    Py_XDECREF(hp);
    Py_XDECREF(mp);
    return r;
}

/* {"set_aside": bytes, "windows": [None | {"hit_ratio", "hit_prop", "miss_prop"}, ...]} */
PyObject *l2p_py_config(l2p_state *st, size_t set_aside, size_t n, const l2p_tune_window *win)
{
    PyObject *wins = PyList_New((Py_ssize_t)n);
    if (!wins) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *w = window_obj(st, &win[i]);
        if (!w) {
            Py_DECREF(wins);
            return NULL;
        }
        PyList_SET_ITEM(wins, (Py_ssize_t)i, w);
    }
    return Py_BuildValue("{s:n,s:N}", "set_aside", (Py_ssize_t)set_aside, "windows", wins);
}

static PyObject *config_obj(l2p_state *st, const l2p_tune_config *c)
{
    return l2p_py_config(st, c->set_aside, c->n_targets, c->win);
}

int l2p_py_samples(PyObject *res, const char *who, size_t repeat, double *samples)
{
    PyObject *seq = res ? PySequence_Fast(res, "the callback must return a sequence of "
                                               "samples (ms)") : NULL;
    Py_XDECREF(res);
    if (seq && PySequence_Fast_GET_SIZE(seq) != (Py_ssize_t)repeat) {
        PyErr_Format(PyExc_ValueError, "%s: returned %zd samples, %zu were asked for", who,
                     PySequence_Fast_GET_SIZE(seq), repeat);
        Py_CLEAR(seq);
    }
    for (size_t i = 0; seq && i < repeat; i++) {
        samples[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
        if (samples[i] == -1.0 && PyErr_Occurred()) Py_CLEAR(seq);
    }
    if (!seq) return -1;
    Py_DECREF(seq);
    return 0;
}

static l2p_status call_evaluate(void *ctx, const l2p_tune_config *cfg, size_t repeat,
                                double *samples)
{
    bridge *b = ctx;
    PyObject *c = config_obj(b->st, cfg);
    PyObject *res = c ? PyObject_CallFunction(b->evaluate, "Nn", c, (Py_ssize_t)repeat) : NULL;
    if (l2p_py_samples(res, "evaluate", repeat, samples) < 0) {
        b->python_error = 1;
        return L2P_ERR_STATE;
    }
    return L2P_OK;
}

static PyObject *trial_obj(l2p_state *st, const l2p_tune_trial *t)
{
    static const char *phases[] = {"baseline", "ridge", "hit_ratio", "props", "polish",
                                   "confirm", "recheck", "screen"};
    PyObject *c = config_obj(st, &t->config);
    return c ? Py_BuildValue("{s:N,s:d,s:d,s:d,s:n,s:s}", "config", c, "median", t->median, "q1",
                             t->q1, "q3", t->q3, "n", (Py_ssize_t)t->n, "phase",
                             phases[t->phase])
             : NULL;
}

/* A list of n items made by item(ctx, i); NULL with an exception when one fails. The one
 * list builder of this file (trials, levels, the screening). */
static PyObject *list_of(size_t n, PyObject *(*item)(const void *ctx, size_t i),
                         const void *ctx)
{
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        PyObject *v = item(ctx, i);
        if (!v) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, v);
    }
    return out;
}

static PyObject *size_item(const void *ctx, size_t i)
{
    return PyLong_FromSize_t(((const size_t *)ctx)[i]);
}

static PyObject *screen_item(const void *ctx, size_t i)
{
    const l2p_tune_result *r = ctx;
    return Py_BuildValue("{s:d,s:O}", "probe_ms", r->screen_ms[i], "kept",
                         r->kept[i] ? Py_True : Py_False);
}

typedef struct {
    l2p_state *st;
    const l2p_tune_result *r;
} trials_ctx;

static PyObject *trial_item(const void *ctx, size_t i)
{
    const trials_ctx *t = ctx;
    return trial_obj(t->st, &t->r->trials[i]);
}

static PyObject *result_obj(l2p_state *st, const l2p_tune_result *r)
{
    trials_ctx tc = {st, r};
    PyObject *trials = list_of(r->n_trials, trial_item, &tc);
    PyObject *levels = trials ? list_of(r->n_levels, size_item, r->levels) : NULL;
    /* the screening per target: [{"probe_ms", "kept"}, ...], or None when it did not run */
    PyObject *screen = !levels ? NULL
                       : r->screened ? list_of(r->screened, screen_item, r)
                                     : Py_NewRef(Py_None);
    /* the recheck of a recommended pick: {"speedup", "ci", "held", "rounds"}, or None */
    PyObject *recheck = !screen ? NULL
                        : r->held < 0 ? Py_NewRef(Py_None)
                                      : Py_BuildValue("{s:d,s:[dd],s:O,s:n}", "speedup",
                                                      r->held_speedup, "ci", r->held_ci_low,
                                                      r->held_ci_high, "held",
                                                      r->held ? Py_True : Py_False, "rounds",
                                                      (Py_ssize_t)r->held_rounds);
    if (!recheck) {
        Py_XDECREF(trials);
        Py_XDECREF(levels);
        Py_XDECREF(screen);
        return NULL;
    }
    return Py_BuildValue(
        "{s:N,s:N,s:n,s:N,s:N,s:O,s:s,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:n,s:O,s:n,s:N,s:N}",
        "trials", trials, "set_aside_levels", levels, "evals", (Py_ssize_t)r->evals,
        "found", config_obj(st, &r->found), "recommended", config_obj(st, &r->recommended),
        "persistence_helps", r->persistence_helps ? Py_True : Py_False,
        "baseline", r->baseline ? "default" : "limit0", "limit0_ms", r->base_ms[0],
        "default_ms", r->base_ms[1], "aside_ms", r->aside_ms, "found_ms", r->found_ms,
        "speedup", r->speedup, "ci_low", r->ci_low, "ci_high", r->ci_high,
        "rechecked", (Py_ssize_t)r->rechecked,
        "smaller_preferred", r->smaller_preferred ? Py_True : Py_False,
        "confirm_rounds", (Py_ssize_t)r->confirm_rounds, "screen", screen, "recheck",
        recheck);
}

static int hit_ratios_arg(PyObject *obj, l2p_tune_options *o)
{
    if (obj == Py_None) return 0;
    PyObject *seq = PySequence_Fast(obj, "hit_ratios: expected a sequence of floats in (0, 1]");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > L2P_TUNE_MAX_LEVELS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "hit_ratios: %zd levels given; 1..%d are allowed", n,
                     L2P_TUNE_MAX_LEVELS);
        return -1;
    }
    o->n_hit_ratios = (size_t)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        o->hit_ratios[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (o->hit_ratios[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* Target window sizes and stream groups: two sequences of equal length. */
static int targets_arg(PyObject *bytes, PyObject *groups, l2p_tune_options *o)
{
    PyObject *b = PySequence_Fast(bytes, "target_bytes: expected a sequence of ints");
    PyObject *g = b ? PySequence_Fast(groups, "groups: expected a sequence of ints") : NULL;
    int rc = -1;
    if (!g) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(b);
    if (n < 1 || n > L2P_TUNE_MAX_TARGETS || PySequence_Fast_GET_SIZE(g) != n) {
        PyErr_Format(PyExc_ValueError, "targets: %zd given (with %zd groups); 1..%d targets, "
                     "one group each, can be tuned", n, PySequence_Fast_GET_SIZE(g),
                     L2P_TUNE_MAX_TARGETS);
        goto done;
    }
    o->n_targets = (size_t)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v, grp;
        if (l2p_py_ranged_int(PySequence_Fast_GET_ITEM(b, i), "target_bytes", "bytes", 1,
                              LLONG_MAX, &v) < 0 ||
            l2p_py_ranged_int(PySequence_Fast_GET_ITEM(g, i), "groups", "a stream group", 0,
                              INT_MAX, &grp) < 0)
            goto done;
        o->target_bytes[i] = (size_t)v;
        o->group[i] = (int)grp;
    }
    rc = 0;
done:
    Py_XDECREF(b);
    Py_XDECREF(g);
    return rc;
}

/* (granule, max, default): a device described, e.g. in tests. */
static int facts_arg(PyObject *facts, l2p_device_facts *o)
{
    static const char *names[] = {"facts[0] (granule)", "facts[1] (persisting_max)",
                                  "facts[2] (default_limit)"};
    long long v[3];
    if (!PyTuple_Check(facts) || PyTuple_GET_SIZE(facts) != 3) {
        PyErr_Format(PyExc_TypeError, "facts: expected None or a tuple (granule, "
                     "persisting_max, default_limit) of 3 ints, got %s", Py_TYPE(facts)->tp_name);
        return -1;
    }
    for (int i = 0; i < 3; i++)
        if (l2p_py_ranged_int(PyTuple_GET_ITEM(facts, i), names[i], "bytes", 0, LLONG_MAX,
                              &v[i]) < 0)
            return -1;
    if (v[2] > v[1]) {
        PyErr_Format(PyExc_ValueError, "facts: the default limit %lld is above the max %lld",
                     v[2], v[1]);
        return -1;
    }
    o->granule = (size_t)v[0];
    o->persisting_max = (size_t)v[1];
    o->default_limit = (size_t)v[2];
    return 0;
}

static int device_facts(l2p_state *st, PyObject *dev, l2p_device_facts *o)
{
    int index;
    l2p_device_props p;
    l2p_aside_info a;
    if (l2p_py_device_index(st, dev, &index) < 0) return -1;
    if (l2p_device_get_properties(index, &p) != L2P_OK ||
        l2p_device_persisting_granule(index, &o->granule) != L2P_OK ||
        l2p_device_default_persisting_limit(index, &o->default_limit) != L2P_OK ||
        l2p_device_aside_info(index, &a) != L2P_OK)
        return l2p_py_raise_int(st);
    o->persisting_max = p.persisting_l2_cache_max_size;
    /* An MPS client cannot change the set-aside: search the windows at the server's. */
    o->set_aside_fixed = a.mps == 1;
    return 0;
}

/* A bootstrap seed: None (the entry point's default) or an int in [0, 2^64 - 1] (a row's INT
 * is a long long: the tuner's default seed is above 2^63). */
static int seed_arg(PyObject *obj, unsigned long long dflt, unsigned long long *out)
{
    *out = dflt;
    if (obj == Py_None) return 0;
    if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        *out = PyLong_AsUnsignedLongLong(obj);
        if (!(*out == (unsigned long long)-1 && PyErr_Occurred())) return 0;
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "seed: %R is outside [0, 2^64 - 1]", obj);
        return -1;
    }
    PyErr_Format(PyExc_TypeError, "seed: expected None or an int in [0, 2^64 - 1], got %s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

int l2p_py_device_facts(l2p_state *st, PyObject *dev, PyObject *facts, l2p_device_facts *out)
{
    return facts != Py_None ? facts_arg(facts, out) : device_facts(st, dev, out);
}

#define TUNE_SEED 0x9e3779b97f4a7c15ull /* the tuner's and the verdict's default seed */
#define SEED_DOC(dflt) "the bootstrap's seed, an int in [0, 2^64 - 1]; None: " dflt
#define SEED_PARAM(S) \
    L2P_PARAM(S, seed, L2P_P_OBJECT, .flags = L2P_P_KWONLY, .pytype = "int | None", \
              .doc = SEED_DOC("0x9E3779B97F4A7C15"))

typedef struct {
    PyObject *evaluate, *device, *target_bytes, *groups, *hit_ratios;
    int tune_props;
    long long max_evals, repeat, confirm_rounds;
    double min_gain, confidence;
    PyObject *seed, *facts;
    long long phases, screen_keep, recheck_rounds;
} tune_search_args;

static PyObject *tune_search_impl(PyObject *m, const void *args)
{
    const tune_search_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    l2p_tune_options o;
    l2p_tune_result r;
    bridge b = {st, a->evaluate, 0};
    l2p_tune_options_default(&o);
    o.max_evals = (size_t)a->max_evals;
    o.repeat = (size_t)a->repeat;
    o.confirm_rounds = (size_t)a->confirm_rounds;
    o.min_gain = a->min_gain;
    o.confidence = a->confidence;
    o.tune_props = a->tune_props;
    o.phases = (unsigned)a->phases;
    o.screen_keep = (size_t)a->screen_keep;
    o.recheck_rounds = (size_t)a->recheck_rounds;
    if (seed_arg(a->seed, TUNE_SEED, &o.seed) < 0) return NULL;
    l2p_device_facts f = {0};
    if (l2p_py_device_facts(st, a->device, a->facts, &f) < 0) return NULL;
    o.granule = f.granule;
    o.persisting_max = f.persisting_max;
    o.default_limit = f.default_limit;
    o.set_aside_fixed = f.set_aside_fixed;
    if (targets_arg(a->target_bytes, a->groups, &o) < 0 || hit_ratios_arg(a->hit_ratios, &o) < 0)
        return NULL;
    if (l2p_tune_check_options(&o) != L2P_OK) return l2p_py_raise(st);
    l2p_status rc = l2p_tune_run(&o, call_evaluate, &b, &r);
    if (b.python_error) return NULL;
    if (rc != L2P_OK) return l2p_py_raise(st);
    PyObject *res = result_obj(st, &r);
    l2p_tune_result_free(&r);
    return res;
}
L2P_DEFINE_FN(tune_search_fn, tune_search_args, tune_search_impl, "tune_search",
              "The C tuner's search; evaluate(config, repeat) installs a configuration and "
              "returns repeat samples (ms). Returns the trials, the pick and its confirmed "
              "speedup.", "dict[str, object]",
              L2P_PARAM(tune_search_args, evaluate, L2P_P_CALLABLE, .flags = L2P_P_REQUIRED,
                        .pytype = "Callable[[dict[str, object], int], Sequence[float]]",
                        .doc = "installs a configuration and returns `repeat` samples (ms)"),
              L2P_PARAM(tune_search_args, device, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "DeviceLike", .doc = "the device measured (unused with "
                        "facts=)"),
              L2P_PARAM(tune_search_args, target_bytes, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "each target window's bytes "
                        "(>= 1), 1..16 targets"),
              L2P_PARAM(tune_search_args, groups, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[int]", .doc = "each target's stream group (targets "
                        "of one group share a stream, which holds one window at a time)"),
              L2P_PARAM(tune_search_args, hit_ratios, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "Sequence[float] | None", .doc = "ascending levels in (0, 1]; "
                        "None: 0.1 .. 1.0"),
              L2P_PARAM(tune_search_args, tune_props, L2P_P_BOOL, .flags = L2P_P_KWONLY,
                        .ival = 1, .doc = "also try hitProp NORMAL and missProp NORMAL"),
              L2P_PARAM(tune_search_args, max_evals, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = 0, .lo = 0, .hi = LLONG_MAX, .what = "evaluations",
                        .doc = "distinct configurations measured, the baselines included; 0: "
                        "the core's default"),
              L2P_PARAM(tune_search_args, repeat, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = 10, .lo = 0, .hi = LLONG_MAX, .what = "samples",
                        .doc = "samples per evaluation, in [1, 100000]"),
              L2P_PARAM(tune_search_args, confirm_rounds, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = 3, .lo = 0, .hi = LLONG_MAX, .what = "rounds",
                        .doc = "interleaved re-measurements of the pick and the baselines, in "
                        "[1, 1000]"),
              L2P_PARAM(tune_search_args, min_gain, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = 0.01, .doc = "the least speedup worth recommending, in [0, 1)"),
              L2P_PARAM(tune_search_args, confidence, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = 0.95, .doc = "of the speedup's interval, in (0.5, 1)"),
              SEED_PARAM(tune_search_args),
              L2P_PARAM(tune_search_args, facts, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "tuple[int, int, int] | None", .doc = "(granule, "
                        "persisting_max, default_limit) in bytes: a device described (tests); "
                        "None: device's"),
              L2P_PARAM(tune_search_args, phases, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = L2P_TUNE_ALL, .lo = 0, .hi = UINT_MAX, .what = "a bit mask",
                        .doc = "for tests only: the parts of the search kept (l2p_tune.h)"),
              L2P_PARAM(tune_search_args, screen_keep, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = L2P_TUNE_SCREEN_KEEP, .lo = 0, .hi = LLONG_MAX,
                        .what = "targets", .doc = "with more targets than this (> 0), or "
                        "alternatives on one stream: one probe each first and the search on at "
                        "most that many fastest that beat the better baseline; 0: no "
                        "screening"),
              L2P_PARAM(tune_search_args, recheck_rounds, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = L2P_TUNE_RECHECK_ROUNDS, .lo = 0, .hi = LLONG_MAX,
                        .what = "rounds", .doc = "a recommended pick re-measured against both "
                        "baselines in this many fresh interleaved rounds (more while "
                        "undecided), dropped when the verdict after them does not say it helps, in "
                        "[0, 1000]; 0: not"));

/* A 1-d float64 array over a sequence of samples (ms), or NULL with the error naming it. */
static PyArrayObject *samples_arg(PyObject *obj, const char *name)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_DOUBLE, 1, 1,
                                                        NPY_ARRAY_CARRAY_RO);
    if (!a && (PyErr_ExceptionMatches(PyExc_ValueError) ||
               PyErr_ExceptionMatches(PyExc_TypeError))) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: expected a 1-d sequence of samples (ms)", name);
    }
    return a;
}

typedef struct {
    PyObject *base, *cand;
    double confidence;
    PyObject *seed;
} speedup_ci_args;

static PyObject *speedup_ci_impl(PyObject *m, const void *args)
{
    const speedup_ci_args *a = args;
    l2p_state *st = l2p_state_from_module(m);
    unsigned long long seed;
    double ratio, lo, hi;
    if (seed_arg(a->seed, 1, &seed) < 0) return NULL;
    PyArrayObject *b = samples_arg(a->base, "base");
    PyArrayObject *c = b ? samples_arg(a->cand, "cand") : NULL;
    PyObject *res = NULL;
    if (c) {
        l2p_status rc = l2p_tune_speedup_ci(PyArray_DATA(b), (size_t)PyArray_SIZE(b),
                                            PyArray_DATA(c), (size_t)PyArray_SIZE(c),
                                            a->confidence, seed, &ratio, &lo, &hi);
        res = rc == L2P_OK ? Py_BuildValue("(ddd)", ratio, lo, hi) : l2p_py_raise(st);
    }
    Py_XDECREF(b);
    Py_XDECREF(c);
    return res;
}
L2P_DEFINE_FN(speedup_ci_fn, speedup_ci_args, speedup_ci_impl, "speedup_ci",
              "median(base) / median(cand) and its percentile-bootstrap interval, computed in "
              "C: (ratio, low, high).", "tuple[float, float, float]",
              L2P_PARAM(speedup_ci_args, base, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "the baseline's samples (ms, > 0)"),
              L2P_PARAM(speedup_ci_args, cand, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "the candidate's samples (ms, > 0)"),
              L2P_PARAM(speedup_ci_args, confidence, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = 0.95, .doc = "of the interval"),
              L2P_PARAM(speedup_ci_args, seed, L2P_P_OBJECT, .flags = L2P_P_KWONLY,
                        .pytype = "int | None", .doc = SEED_DOC("1")));

typedef struct {
    PyObject *limit0, *deflt, *candidate;
    double min_gain, confidence;
    PyObject *seed;
    long long rounds;
} tune_verdict_args;

static PyObject *tune_verdict_impl(PyObject *m, const void *args)
{
    const tune_verdict_args *a = args;
    static const char *names[3] = {"limit0", "default", "candidate"};
    PyObject *objs[3] = {a->limit0, a->deflt, a->candidate}, *res = NULL;
    PyArrayObject *arr[3] = {NULL, NULL, NULL};
    unsigned long long seed;
    l2p_tune_verdict_t v;
    if (seed_arg(a->seed, TUNE_SEED, &seed) < 0) return NULL;
    for (int i = 0; i < 3; i++)
        if (!(arr[i] = samples_arg(objs[i], names[i]))) goto done;
    if (l2p_tune_verdict(PyArray_DATA(arr[0]), (size_t)PyArray_SIZE(arr[0]),
                         PyArray_DATA(arr[1]), (size_t)PyArray_SIZE(arr[1]),
                         PyArray_DATA(arr[2]), (size_t)PyArray_SIZE(arr[2]), (size_t)a->rounds,
                         a->min_gain, a->confidence, seed, &v) != L2P_OK) {
        res = l2p_py_raise(l2p_state_from_module(m));
        goto done;
    }
    res = Py_BuildValue("{s:s,s:d,s:d,s:d,s:d,s:d,s:O,s:O}", "baseline",
                        v.baseline ? "default" : "limit0", "baseline_ms", v.baseline_ms,
                        "candidate_ms", v.candidate_ms, "speedup", v.speedup, "ci_low",
                        v.ci_low, "ci_high", v.ci_high, "helps", v.helps ? Py_True : Py_False,
                        "slows", v.slows ? Py_True : Py_False);
done:
    for (int i = 0; i < 3; i++) Py_XDECREF(arr[i]);
    return res;
}
/* The field is `deflt` (default is a C keyword); the row names the parameter "default". */
L2P_DEFINE_FN(tune_verdict_fn, tune_verdict_args, tune_verdict_impl, "tune_verdict",
              "The better-baseline rule: the better baseline, the medians, the speedup with its "
              "bootstrap interval, and whether the candidate helps or slows the work.",
              "dict[str, str | float | bool]",
              L2P_PARAM(tune_verdict_args, limit0, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "samples (ms) at limit 0, no "
                        "window"),
              {.name = "default", .type = L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
               .offset = offsetof(tune_verdict_args, deflt), .pytype = "Sequence[float]",
               .doc = "samples (ms) at the device's default limit, no window"},
              L2P_PARAM(tune_verdict_args, candidate, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "Sequence[float]", .doc = "samples (ms) of the candidate"),
              L2P_PARAM(tune_verdict_args, min_gain, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = 0.01, .doc = "the least speedup that helps, in [0, 1)"),
              L2P_PARAM(tune_verdict_args, confidence, L2P_P_FLOAT, .flags = L2P_P_KWONLY,
                        .fval = 0.95, .doc = "of the interval, in (0.5, 1)"),
              SEED_PARAM(tune_verdict_args),
              L2P_PARAM(tune_verdict_args, rounds, L2P_P_INT, .flags = L2P_P_KWONLY,
                        .ival = 1, .lo = 1, .hi = LLONG_MAX, .what = "rounds",
                        .doc = "> 1: the three were measured in that many interleaved rounds of "
                        "equal size, and the interval also covers the spread between rounds"));

typedef struct {
    double switch_ms, base_ms, found_ms;
} tune_scope_args;

static PyObject *tune_scope_impl(PyObject *m, const void *args)
{
    const tune_scope_args *a = args;
    l2p_tune_scope_t s;
    if (l2p_tune_scope(a->switch_ms, a->base_ms, a->found_ms, &s) != L2P_OK)
        return l2p_py_raise(l2p_state_from_module(m));
    return Py_BuildValue("{s:d,s:d,s:n,s:d}", "saving_ms", s.saving_ms, "overhead_ms",
                         s.overhead_ms, "min_calls", (Py_ssize_t)s.min_calls, "share",
                         L2P_TUNE_SCOPE_SHARE);
}
L2P_DEFINE_FN(tune_scope_fn, tune_scope_args, tune_scope_impl, "tune_scope",
              "Scoped or process-wide: the saving per call, the cost of setting and releasing "
              "the limit around a phase, and the fewest calls per phase for which scoping "
              "pays.", "dict[str, float]",
              L2P_PARAM(tune_scope_args, switch_ms, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .doc = "the cost of one change of the persisting limit (ms)"),
              L2P_PARAM(tune_scope_args, base_ms, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .doc = "one call at the better baseline (ms)"),
              L2P_PARAM(tune_scope_args, found_ms, L2P_P_FLOAT, .flags = L2P_P_REQUIRED,
                        .doc = "one call with the tuned configuration (ms)"));

typedef struct {
    long long granule, persisting_max, default_limit;
} levels_args;

static PyObject *set_aside_levels_impl(PyObject *m, const void *args)
{
    (void)m;
    const levels_args *a = args;
    size_t lv[L2P_TUNE_MAX_LEVELS];
    size_t n = l2p_tune_set_aside_levels((size_t)a->granule, (size_t)a->persisting_max,
                                         (size_t)a->default_limit, lv, L2P_TUNE_MAX_LEVELS);
    return list_of(n, size_item, lv);
}
L2P_DEFINE_FN(set_aside_levels_fn, levels_args, set_aside_levels_impl, "set_aside_levels",
              "The set-aside levels the tuner searches (bytes, ascending): 0, each granule up "
              "to the max, the default.", "list[int]",
              L2P_PARAM(levels_args, granule, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = LLONG_MAX, .what = "bytes", .doc = "the driver's set-aside step"),
              L2P_PARAM(levels_args, persisting_max, L2P_P_INT, .flags = L2P_P_REQUIRED,
                        .lo = 0, .hi = LLONG_MAX, .what = "bytes",
                        .doc = "the device's persisting_l2_cache_max_size"),
              L2P_PARAM(levels_args, default_limit, L2P_P_INT, .flags = L2P_P_REQUIRED,
                        .lo = 0, .hi = LLONG_MAX, .what = "bytes",
                        .doc = "the limit the device had before l2persist touched it"));

/* The core's defaults of tune's scalar options: the one home tune() reads its signature's
 * defaults from (as advise_defaults() for advise()). */
static PyObject *tune_defaults_impl(PyObject *m, const void *args)
{
    l2p_tune_options o;
    (void)m;
    (void)args;
    l2p_tune_options_default(&o);
    return Py_BuildValue("{s:n,s:n,s:n,s:d,s:d,s:K,s:n}", "repeat", (Py_ssize_t)o.repeat,
                         "confirm_rounds", (Py_ssize_t)o.confirm_rounds, "recheck_rounds",
                         (Py_ssize_t)o.recheck_rounds, "min_gain", o.min_gain, "confidence",
                         o.confidence, "seed", o.seed, "screen_keep", (Py_ssize_t)o.screen_keep);
}
L2P_DEFINE_FN(tune_defaults_fn, l2p_no_args, tune_defaults_impl, "tune_defaults",
              "The tuner's default options (l2p_tune_options_default): repeat, confirm_rounds, "
              "recheck_rounds, min_gain, confidence, seed, screen_keep.",
              "dict[str, int | float]", L2P_NO_PARAMS);

const l2p_fn *const l2p_tune_fns[] = {&tune_defaults_fn, &tune_search_fn, &tune_verdict_fn, &tune_scope_fn,
                                      &speedup_ci_fn, &set_aside_levels_fn, NULL};
