/* Graph replays timed by CUDA events (l2p_replays.h), for the watcher's PyTorch replay hook:
 * replay_begin before the program's replay, replay_end after it, replay_harvest before the
 * blocks are read. Nothing here raises into the program's replay for a CUDA refusal: it is
 * counted (replay_counts) and that replay goes untimed. */
#include "l2p_py.h"
#include "params.h"

#include <limits.h>

#include "l2p_replays.h"

typedef struct {
    PyObject *label;
} label_args;

static PyObject *replay_label_impl(PyObject *m, const void *args)
{
    (void)m;
    PyObject *obj = ((const label_args *)args)->label;
    const char *text = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;
    if (!text) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "label: expected a str, got %.80s",
                         Py_TYPE(obj)->tp_name);
        return NULL;
    }
    int id = l2p_replays_label(text);
    if (id < 0)
        return PyErr_Format(PyExc_ValueError, "label: no room for another (%d labels kept)",
                            L2P_REPLAYS_LABELS);
    return PyLong_FromLong(id);
}
L2P_DEFINE_FN(replay_label_fn, label_args, replay_label_impl, "replay_label",
              "The id of a replay label (a graph's signature), interned for the process.", "int",
              L2P_PARAM(label_args, label, L2P_P_OBJECT, .flags = L2P_P_REQUIRED,
                        .pytype = "str", .doc = "the label"));

typedef struct {
    long long stream;
    long long label;
} begin_args;

static PyObject *replay_begin_impl(PyObject *m, const void *args)
{
    const begin_args *a = args;
    int slot = -1;
    l2p_status st = l2p_replays_begin((cudaStream_t)(uintptr_t)a->stream, (int)a->label, &slot);
    if (st != L2P_OK) return l2p_py_raise(l2p_state_from_module(m));
    return PyLong_FromLong(slot);
}
L2P_DEFINE_FN(replay_begin_fn, begin_args, replay_begin_impl, "replay_begin",
              "Before a replay on `stream`: its first event. Returns the slot to end, or -1 "
              "when the replay is not timed (the stream is capturing, the pool is full, an "
              "event call failed: counted in replay_counts).", "int",
              L2P_PARAM(begin_args, stream, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = LLONG_MAX, .what = "handle", .doc = "the raw cudaStream_t"),
              L2P_PARAM(begin_args, label, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = L2P_REPLAYS_LABELS - 1, .what = "id",
                        .doc = "a replay_label id"));

typedef struct {
    long long slot;
    long long stream;
} end_args;

static PyObject *replay_end_impl(PyObject *m, const void *args)
{
    (void)m;
    const end_args *a = args;
    l2p_replays_end((int)a->slot, (cudaStream_t)(uintptr_t)a->stream);
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(replay_end_fn, end_args, replay_end_impl, "replay_end",
              "After the replay: its second event on the same stream (a slot of -1 is "
              "ignored).", "None",
              L2P_PARAM(end_args, slot, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = -1,
                        .hi = L2P_REPLAYS_GENERATIONS * L2P_REPLAYS_SLOTS - 1, .what = "slot",
                        .doc = "replay_begin's answer"),
              L2P_PARAM(end_args, stream, L2P_P_INT, .flags = L2P_P_REQUIRED, .lo = 0,
                        .hi = LLONG_MAX, .what = "handle", .doc = "the raw cudaStream_t"));

static PyObject *replay_harvest_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    size_t added = 0;
    Py_BEGIN_ALLOW_THREADS
    l2p_replays_harvest(&added);
    Py_END_ALLOW_THREADS
    return PyLong_FromSize_t(added);
}
L2P_DEFINE_FN(replay_harvest_fn, l2p_no_args, replay_harvest_impl, "replay_harvest",
              "The timed replays whose events completed go into the activity log (one record "
              "each, named by their label); returns how many.", "int", L2P_NO_PARAMS);

static PyObject *replay_counts_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    l2p_replays_counts c;
    l2p_replays_counts_get(&c);
    return Py_BuildValue("{sKsKsKsKsK}", "timed", (unsigned long long)c.timed, "host",
                         (unsigned long long)c.host, "skipped", (unsigned long long)c.skipped,
                         "failed", (unsigned long long)c.failed, "pending",
                         (unsigned long long)c.pending);
}
L2P_DEFINE_FN(replay_counts_fn, l2p_no_args, replay_counts_impl, "replay_counts",
              "Replays timed (queued behind earlier GPU work when launched), host (the GPU idle "
              "at the pair's start, so the pair may time the launch too: logged under "
              "'host:' + label), skipped (capturing, pool full), failed (an event call) and "
              "pending, over the process.", "dict", L2P_NO_PARAMS);

const l2p_fn *const l2p_replays_fns[] = {&replay_label_fn, &replay_begin_fn, &replay_end_fn,
                                         &replay_harvest_fn, &replay_counts_fn, NULL};
