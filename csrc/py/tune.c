/* tune_search(): the C tuner (csrc/core/l2p_tune.c) driven from Python. The extension only
 * converts: each evaluation calls the Python `evaluate(config, repeat)`, which installs the
 * configuration, runs the user's workload and returns the samples; every decision is the
 * core's. */
#include "l2p_py.h"

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
static PyObject *config_obj(l2p_state *st, const l2p_tune_config *c)
{
    PyObject *wins = PyList_New((Py_ssize_t)c->n_targets);
    if (!wins) return NULL;
    for (size_t i = 0; i < c->n_targets; i++) {
        PyObject *w = window_obj(st, &c->win[i]);
        if (!w) {
            Py_DECREF(wins);
            return NULL;
        }
        PyList_SET_ITEM(wins, (Py_ssize_t)i, w);
    }
    return Py_BuildValue("{s:n,s:N}", "set_aside", (Py_ssize_t)c->set_aside, "windows", wins);
}

static l2p_status call_evaluate(void *ctx, const l2p_tune_config *cfg, size_t repeat,
                                double *samples)
{
    bridge *b = ctx;
    PyObject *c = config_obj(b->st, cfg), *res = NULL, *seq = NULL;
    if (c) res = PyObject_CallFunction(b->evaluate, "Nn", c, (Py_ssize_t)repeat);
    if (res) seq = PySequence_Fast(res, "evaluate: must return a sequence of samples (ms)");
    Py_XDECREF(res);
    if (seq && PySequence_Fast_GET_SIZE(seq) != (Py_ssize_t)repeat) {
        PyErr_Format(PyExc_ValueError, "evaluate: returned %zd samples, %zu were asked for",
                     PySequence_Fast_GET_SIZE(seq), repeat);
        Py_CLEAR(seq);
    }
    for (size_t i = 0; seq && i < repeat; i++) {
        samples[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
        if (samples[i] == -1.0 && PyErr_Occurred()) Py_CLEAR(seq);
    }
    if (!seq) {
        b->python_error = 1;
        return L2P_ERR_STATE;
    }
    Py_DECREF(seq);
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

/* The screening per target: [{"probe_ms", "kept"}, ...], or None when it did not run. */
static PyObject *screen_obj(const l2p_tune_result *r)
{
    if (!r->screened) Py_RETURN_NONE;
    PyObject *out = PyList_New((Py_ssize_t)r->screened);
    for (size_t i = 0; out && i < r->screened; i++) {
        PyObject *d = Py_BuildValue("{s:d,s:O}", "probe_ms", r->screen_ms[i], "kept",
                                    r->kept[i] ? Py_True : Py_False);
        if (!d) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, d);
    }
    return out;
}

static PyObject *result_obj(l2p_state *st, const l2p_tune_result *r)
{
    PyObject *trials = PyList_New((Py_ssize_t)r->n_trials), *levels;
    if (!trials) return NULL;
    for (size_t i = 0; i < r->n_trials; i++) {
        PyObject *t = trial_obj(st, &r->trials[i]);
        if (!t) {
            Py_DECREF(trials);
            return NULL;
        }
        PyList_SET_ITEM(trials, (Py_ssize_t)i, t);
    }
    levels = PyList_New((Py_ssize_t)r->n_levels);
    for (size_t i = 0; levels && i < r->n_levels; i++) {
        PyObject *v = PyLong_FromSize_t(r->levels[i]);
        if (!v) Py_CLEAR(levels);
        else PyList_SET_ITEM(levels, (Py_ssize_t)i, v);
    }
    if (!levels) {
        Py_DECREF(trials);
        return NULL;
    }
    PyObject *screen = screen_obj(r);
    if (!screen) {
        Py_DECREF(trials);
        Py_DECREF(levels);
        return NULL;
    }
    return Py_BuildValue("{s:N,s:N,s:n,s:N,s:N,s:O,s:s,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:n,s:O,s:n,s:N}",
                         "trials",
                         trials, "set_aside_levels", levels, "evals", (Py_ssize_t)r->evals,
                         "found", config_obj(st, &r->found), "recommended",
                         config_obj(st, &r->recommended), "persistence_helps",
                         r->persistence_helps ? Py_True : Py_False, "baseline",
                         r->baseline ? "default" : "limit0", "limit0_ms", r->base_ms[0],
                         "default_ms", r->base_ms[1], "aside_ms", r->aside_ms, "found_ms", r->found_ms, "speedup",
                         r->speedup, "ci_low", r->ci_low, "ci_high", r->ci_high, "rechecked",
                         (Py_ssize_t)r->rechecked, "smaller_preferred",
                         r->smaller_preferred ? Py_True : Py_False, "confirm_rounds",
                         (Py_ssize_t)r->confirm_rounds, "screen", screen);
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
        long long v;
        if (l2p_py_size_arg(PySequence_Fast_GET_ITEM(b, i), "target_bytes", &v) < 0) goto done;
        if (v <= 0) {
            PyErr_Format(PyExc_ValueError, "target_bytes: entry %zd is %lld; a window covers "
                         ">= 1 byte", i, v);
            goto done;
        }
        o->target_bytes[i] = (size_t)v;
        o->group[i] = PyLong_AsLong(PySequence_Fast_GET_ITEM(g, i)) & 0x7fffffff;
        if (PyErr_Occurred()) goto done;
    }
    rc = 0;
done:
    Py_XDECREF(b);
    Py_XDECREF(g);
    return rc;
}

static int device_facts(l2p_state *st, int index, l2p_tune_options *o)
{
    l2p_device_props p;
    l2p_aside_info a;
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

static PyObject *fn_tune_search(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"evaluate", "device", "target_bytes", "groups", "hit_ratios",
                            "tune_props", "max_evals", "repeat", "confirm_rounds", "min_gain",
                            "confidence", "seed", "facts", "phases", "screen_keep", NULL};
    l2p_state *st = l2p_state_from_module(m);
    PyObject *dev = Py_None, *bytes, *groups, *ratios = Py_None, *facts = Py_None;
    Py_ssize_t max_evals = 0, repeat = 10, rounds = 3;
    unsigned long long seed = 0x9e3779b97f4a7c15ull;
    unsigned int phases = L2P_TUNE_ALL;
    Py_ssize_t screen_keep = 0;
    int index, props = 1;
    l2p_tune_options o;
    l2p_tune_result r;
    bridge b = {st, NULL, 0};
    l2p_tune_options_default(&o);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|$OpnnnddKOIn:tune_search", names,
                                     &b.evaluate, &dev, &bytes, &groups, &ratios, &props,
                                     &max_evals, &repeat, &rounds, &o.min_gain, &o.confidence,
                                     &seed, &facts, &phases, &screen_keep))
        return NULL;
    if (!PyCallable_Check(b.evaluate))
        return PyErr_Format(PyExc_TypeError, "evaluate: expected a callable");
    if (max_evals < 0 || repeat < 1 || rounds < 1)
        return PyErr_Format(PyExc_ValueError, "max_evals (%zd), repeat (%zd), confirm_rounds "
                            "(%zd): counts must be >= 0, >= 1, >= 1", max_evals, repeat, rounds);
    o.max_evals = (size_t)max_evals;
    o.repeat = (size_t)repeat;
    o.confirm_rounds = (size_t)rounds;
    o.tune_props = props;
    o.seed = seed;
    o.phases = phases;
    if (screen_keep < 0)
        return PyErr_Format(PyExc_ValueError, "screen_keep: %zd is below 0", screen_keep);
    o.screen_keep = (size_t)screen_keep;
    if (facts != Py_None) { /* (granule, max, default): a device described, e.g. in tests */
        Py_ssize_t g, mx, def;
        if (!PyArg_ParseTuple(facts, "nnn:facts", &g, &mx, &def)) return NULL;
        if (g < 0 || mx < 0 || def < 0 || def > mx)
            return PyErr_Format(PyExc_ValueError, "facts: (granule, max, default) must be >= 0 "
                                "with default <= max, got (%zd, %zd, %zd)", g, mx, def);
        o.granule = (size_t)g;
        o.persisting_max = (size_t)mx;
        o.default_limit = (size_t)def;
    } else if (l2p_py_device_index(st, dev, &index) < 0 || device_facts(st, index, &o) < 0) {
        return NULL;
    }
    if (targets_arg(bytes, groups, &o) < 0 || hit_ratios_arg(ratios, &o) < 0) return NULL;
    if (l2p_tune_check_options(&o) != L2P_OK) return l2p_py_raise(st);
    l2p_status rc = l2p_tune_run(&o, call_evaluate, &b, &r);
    if (b.python_error) return NULL;
    if (rc != L2P_OK) return l2p_py_raise(st);
    PyObject *res = result_obj(st, &r);
    l2p_tune_result_free(&r);
    return res;
}

static PyObject *fn_speedup_ci(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"base", "cand", "confidence", "seed", NULL};
    l2p_state *st = l2p_state_from_module(m);
    PyObject *base, *cand;
    double conf = 0.95, ratio, lo, hi;
    unsigned long long seed = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$dK:speedup_ci", names, &base, &cand, &conf,
                                     &seed))
        return NULL;
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(base, NPY_DOUBLE, 1, 1,
                                                        NPY_ARRAY_CARRAY_RO);
    PyArrayObject *c = a ? (PyArrayObject *)PyArray_FROMANY(cand, NPY_DOUBLE, 1, 1,
                                                            NPY_ARRAY_CARRAY_RO)
                         : NULL;
    PyObject *res = NULL;
    if (c) {
        l2p_status rc = l2p_tune_speedup_ci(PyArray_DATA(a), (size_t)PyArray_SIZE(a),
                                            PyArray_DATA(c), (size_t)PyArray_SIZE(c), conf, seed,
                                            &ratio, &lo, &hi);
        res = rc == L2P_OK ? Py_BuildValue("(ddd)", ratio, lo, hi) : l2p_py_raise(st);
    }
    Py_XDECREF(a);
    Py_XDECREF(c);
    return res;
}

/* A 1-d float64 array over a sequence of samples (ms), or NULL with the error naming it. */
static PyArrayObject *samples_arg(PyObject *obj, const char *name)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_DOUBLE, 1, 1,
                                                        NPY_ARRAY_CARRAY_RO);
    if (!a && PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: expected a 1-d sequence of samples (ms)", name);
    }
    return a;
}

static PyObject *fn_tune_verdict(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"limit0", "default", "candidate", "min_gain", "confidence", "seed",
                            "rounds", NULL};
    l2p_state *st = l2p_state_from_module(m);
    PyObject *objs[3], *res = NULL;
    PyArrayObject *arr[3] = {NULL, NULL, NULL};
    double min_gain = 0.01, conf = 0.95;
    unsigned long long seed = 0x9e3779b97f4a7c15ull;
    Py_ssize_t rounds = 1;
    l2p_tune_verdict_t v;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$ddKn:tune_verdict", names, &objs[0],
                                     &objs[1], &objs[2], &min_gain, &conf, &seed, &rounds))
        return NULL;
    if (rounds < 1)
        return PyErr_Format(PyExc_ValueError, "rounds: %zd is below 1", rounds);
    for (int i = 0; i < 3; i++)
        if (!(arr[i] = samples_arg(objs[i], names[i]))) goto done;
    if (l2p_tune_verdict(PyArray_DATA(arr[0]), (size_t)PyArray_SIZE(arr[0]),
                         PyArray_DATA(arr[1]), (size_t)PyArray_SIZE(arr[1]),
                         PyArray_DATA(arr[2]), (size_t)PyArray_SIZE(arr[2]), (size_t)rounds,
                         min_gain, conf, seed, &v) != L2P_OK) {
        res = l2p_py_raise(st);
        goto done;
    }
    res = Py_BuildValue("{s:s,s:d,s:d,s:d,s:d,s:d,s:O}", "baseline",
                        v.baseline ? "default" : "limit0", "baseline_ms", v.baseline_ms,
                        "candidate_ms", v.candidate_ms, "speedup", v.speedup, "ci_low",
                        v.ci_low, "ci_high", v.ci_high, "helps", v.helps ? Py_True : Py_False);
done:
    for (int i = 0; i < 3; i++) Py_XDECREF(arr[i]);
    return res;
}

static PyObject *fn_tune_scope(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"switch_ms", "base_ms", "found_ms", NULL};
    double sw, base, found;
    l2p_tune_scope_t s;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ddd:tune_scope", names, &sw, &base, &found))
        return NULL;
    if (l2p_tune_scope(sw, base, found, &s) != L2P_OK) return l2p_py_raise(l2p_state_from_module(m));
    return Py_BuildValue("{s:d,s:d,s:n,s:d}", "saving_ms", s.saving_ms, "overhead_ms",
                         s.overhead_ms, "min_calls", (Py_ssize_t)s.min_calls, "share",
                         L2P_TUNE_SCOPE_SHARE);
}

static PyObject *fn_set_aside_levels(PyObject *m, PyObject *args)
{
    (void)m;
    unsigned long long granule, pmax, def;
    size_t lv[L2P_TUNE_MAX_LEVELS];
    if (!PyArg_ParseTuple(args, "KKK:set_aside_levels", &granule, &pmax, &def)) return NULL;
    size_t n = l2p_tune_set_aside_levels(granule, pmax, def, lv, L2P_TUNE_MAX_LEVELS);
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        PyObject *v = PyLong_FromSize_t(lv[i]);
        if (!v) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, v);
    }
    return out;
}

PyMethodDef l2p_tune_functions[] = {
    {"tune_search", (PyCFunction)(void (*)(void))fn_tune_search, METH_VARARGS | METH_KEYWORDS,
     "tune_search(evaluate, device, target_bytes, groups, *, hit_ratios=None, tune_props=True, "
     "max_evals=0, repeat=10, confirm_rounds=3, min_gain=0.01, confidence=0.95, seed=11400714819323198485, "
     "facts=None, phases=63, screen_keep=0)\n--\n\n"
     "The C tuner's search; evaluate(config, repeat) installs a configuration and returns "
     "repeat samples (ms). Returns the trials, the pick and its confirmed speedup. "
     "screen_keep: with more targets, one probe each first and the search on that many. "
     "phases: for tests only, a mask of the search's parts (l2p_tune.h)."},
    {"tune_verdict", (PyCFunction)(void (*)(void))fn_tune_verdict, METH_VARARGS | METH_KEYWORDS,
     "tune_verdict(limit0, default, candidate, *, min_gain=0.01, confidence=0.95, "
     "seed=11400714819323198485, rounds=1)\n--\n\n"
     "The better-baseline rule: samples (ms) of limit 0, of the default limit and of a "
     "candidate; returns the better baseline, the medians, the speedup with its bootstrap "
     "interval and whether the candidate helps. rounds > 1: the three were measured in that "
     "many interleaved rounds of equal size, and the interval resamples whole rounds."},
    {"tune_scope", (PyCFunction)(void (*)(void))fn_tune_scope, METH_VARARGS | METH_KEYWORDS,
     "tune_scope(switch_ms, base_ms, found_ms)\n--\n\n"
     "Scoped or process-wide: the saving per call, the cost of setting and releasing the limit "
     "around a phase, and the fewest calls per phase for which scoping pays."},
    {"speedup_ci", (PyCFunction)(void (*)(void))fn_speedup_ci, METH_VARARGS | METH_KEYWORDS,
     "speedup_ci(base, cand, *, confidence=0.95, seed=1)\n--\n\n"
     "median(base) / median(cand) and its percentile-bootstrap interval, computed in C."},
    {"set_aside_levels", fn_set_aside_levels, METH_VARARGS,
     "set_aside_levels(granule, persisting_max, default_limit)\n--\n\n"
     "The set-aside levels the tuner searches: 0, each granule up to the max, the default."},
    {NULL, NULL, 0, NULL}};
