/* Capture tracking and the switch lock (l2p_capture.h): every stream capture in the process,
 * known from CUDA's callbacks whoever begins it, and the protocol that keeps the live watcher's
 * switches and the program's captures apart. The rules are the core's; this file converts
 * arguments and errors, and releases the GIL wherever the core may wait (a switch waits for
 * another switcher; CUPTI's subscription may wait for a callback in flight). The CUPTI callback
 * itself never touches Python. */
#include "l2p_py.h"
#include "params.h"

#include "l2p_capture.h"

typedef struct {
    int device;
} watch_args;

static PyObject *watch_begin_impl(PyObject *m, const void *args)
{
    const watch_args *a = args;
    l2p_status st;
    Py_BEGIN_ALLOW_THREADS
    st = l2p_capture_watch_begin(a->device);
    Py_END_ALLOW_THREADS
    if (st != L2P_OK) return l2p_py_raise(l2p_state_from_module(m));
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(watch_begin_fn, watch_args, watch_begin_impl, "capture_watch_begin",
              "Track every stream capture in the process (CUPTI's driver callbacks on each "
              "capture begin and end, whoever makes it: PyTorch, CuPy, XLA, a raw driver call; "
              "any device), so that switch_enter knows whether one is open. Captures begun "
              "before this are not known. ValueError while tracking already; "
              "NotSupportedError without CUPTI or where another tool holds its one subscriber; "
              "NoDeviceError without a GPU.", "None",
              L2P_PARAM(watch_args, device, L2P_P_DEVICE, .doc = "a device whose driver reads "
                        "the streams' capture states; None: the current one"));

static PyObject *watch_end_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    Py_BEGIN_ALLOW_THREADS
    l2p_capture_watch_end();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(watch_end_fn, l2p_no_args, watch_end_impl, "capture_watch_end",
              "Stop tracking captures (captures_open() keeps its last value); idempotent.",
              "None", L2P_NO_PARAMS);

static PyObject *captures_open_impl(PyObject *m, const void *args)
{
    (void)m;
    (void)args;
    return PyLong_FromLong(l2p_captures_open());
}
L2P_DEFINE_FN(captures_open_fn, l2p_no_args, captures_open_impl, "captures_open",
              "How many stream captures are open in the process now, as tracking counted them "
              "(0 where tracking never ran).", "int", L2P_NO_PARAMS);

static PyObject *switch_enter_impl(PyObject *m, const void *args)
{
    int entered;
    (void)args;
    Py_BEGIN_ALLOW_THREADS
    entered = l2p_switch_enter();
    Py_END_ALLOW_THREADS
    if (entered < 0) return l2p_py_raise(l2p_state_from_module(m));
    return PyBool_FromLong(entered);
}
L2P_DEFINE_FN(switch_enter_fn, l2p_no_args, switch_enter_impl, "switch_enter",
              "Enter a plan switch: True when no capture is open or about to begin (switch, "
              "then call switch_leave on this thread; until then a capture that begins "
              "waits), False when one is (nothing is held: try later). Waits while another "
              "thread's switch is inside. ValueError where this thread is inside a switch "
              "already.", "bool", L2P_NO_PARAMS);

static PyObject *switch_leave_impl(PyObject *m, const void *args)
{
    (void)args;
    if (l2p_switch_leave() != L2P_OK) return l2p_py_raise(l2p_state_from_module(m));
    Py_RETURN_NONE;
}
L2P_DEFINE_FN(switch_leave_fn, l2p_no_args, switch_leave_impl, "switch_leave",
              "Leave the switch this thread entered (switch_enter returned True); captures "
              "waiting to begin go on. ValueError where this thread is not inside a switch.",
              "None", L2P_NO_PARAMS);

static PyObject *counts_impl(PyObject *m, const void *args)
{
    l2p_capture_counts c;
    unsigned long vetoed, late;
    (void)m;
    (void)args;
    l2p_capture_counts_get(&c);
    l2p_cupti_vetoes(&vetoed, &late);
    return Py_BuildValue("{sksksksksksksksksksk}", "begun", c.begun, "failed", c.failed,
                         "ended", c.ended, "unmatched", c.unmatched, "waited", c.waited,
                         "refused", c.refused, "switches", c.switches, "withdrew", c.withdrew,
                         "vetoed", vetoed, "vetoed_late", late);
}
L2P_DEFINE_FN(counts_fn, l2p_no_args, counts_impl, "_capture_counts",
              "What capture tracking and the switch lock saw since the process started "
              "(diagnostics): begun (begins counted, failed ones included), failed, ended "
              "(ends that closed a capture), unmatched (of those, captures begun before "
              "tracking), waited (begins that waited for a switch), refused (switch_enter "
              "calls that found a capture open or about to begin), switches (entered), withdrew "
              "(begins that withdrew a release of CUPTI the count was handed to, from the count's "
              "side), vetoed (begins that reached a pending or withdrawn release on its own "
              "subscriber), vetoed_late (of those, begins that met a finalize under way and "
              "went on after 50 ms).",
              "dict[str, int]", L2P_NO_PARAMS);

const l2p_fn *const l2p_capture_fns[] = {&watch_begin_fn, &watch_end_fn, &captures_open_fn,
                                         &switch_enter_fn, &switch_leave_fn, &counts_fn, NULL};
