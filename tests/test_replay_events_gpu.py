"""advise --replay-events on a GPU (issue 50 item 2): the zoo's 225-node decode graphs timed by
CUDA events around each replay, as a plain program run as a subprocess (tests/zoo_check.py's
check: the same digest plain and under advise, advise exit 0), and what the summary says the
events did: they timed the graphs (every graph node the probe recorded belonged to a timed
replay), no event call failed, and, the program's eager work being small, the kernel records
stayed off in the blocks."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from zoo_check import check_program

pytestmark = pytest.mark.gpu


def test_decode_graphs_timed_by_events_same_digest(tmp_path):
    res = check_program("decode_big", tmp_path, flags=["--replay-events"])
    t = res.get("timing") or {}
    assert t.get("asked") is True, t
    assert t.get("source") == "events", f"events did not time the graphs: {t}"
    r = t.get("replays") or {}
    assert r.get("timed", 0) > 0 and r.get("failed") == 0, r
    assert t.get("records_off") is True and t.get("eager_share") < 0.02, t
    # every block was given a sample (the search did not stop for want of records)
    assert res.get("stopped") is None, res.get("stopped")
    # the targets are weighed by the kernels that read them, as without events (at 65b4c57
    # they weighed nothing under events, and only the baselines were compared)
    assert any(t["weight_ms"] > 0 for t in res.get("targets") or []), res.get("targets")
    assert len(res.get("arms") or []) > 2, res.get("arms")
    # the events alone time the search: CUPTI was let go at the probe's end and the graphs
    # made again (process/letgo.py), and the same digest says their replays ran right after
    gone = t.get("cupti_after_probe")
    assert gone and gone[0] == "released", (gone, res.get("cupti"))
    assert t.get("graphs_renewed", 0) >= 1, t
    assert (res.get("cupti") or {}).get("now") == "released", res.get("cupti")
    # each arm's windows read back from the graphs' kernel nodes (no launch attributes without
    # CUPTI): every arm checked, none with a window it did not set
    wl = res.get("windows_landed") or {}
    assert wl.get("checked") and wl.get("from") == "nodes", wl
    assert wl["arms"] and all(a["foreign"] == 0 for a in wl["arms"]), wl["arms"]


def test_replay_events_never_join_or_break_a_capture():
    """replay_begin on a stream that captures records nothing (an event there would join the
    program's graph); on the legacy stream while another stream captures, the query may be
    refused (counted, never raised) or, the capturing stream being non-blocking, answered; either
    way the capture goes on and the graph it made computes what the same work does eagerly."""
    import torch
    from l2persist import _core
    label = _core.replay_label("replay:k1-capture-test")
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    x = torch.rand(1 << 16, device="cuda", generator=gen)
    y = torch.empty_like(x)
    g, s = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    before = _core.replay_counts()
    with torch.cuda.graph(g, stream=s):
        y.copy_(x * 2)
        on_capture = _core.replay_begin(s.cuda_stream, label)
        legacy = _core.replay_begin(0, label)
        y.add_(1)
    mid = _core.replay_counts()
    assert on_capture == -1 and mid["skipped"] == before["skipped"] + 1, (before, mid)
    if legacy == -1:
        assert mid["failed"] == before["failed"] + 1, (before, mid)
    else:
        _core.replay_end(legacy, 0)
    y.fill_(float("nan"))                     # poisoned: the replay must write every element
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2 + 1)
    torch.cuda.synchronize()
    _core.replay_harvest()
    after = _core.replay_counts()
    assert after["pending"] == before["pending"], (before, after)


def test_a_pair_is_kept_only_where_its_replay_was_queued_behind_work():
    """l2p_replays_end asks whether the GPU had reached the pair's first event once the pair
    was enqueued: a replay queued behind a sleep of several ms is timed under its label; one
    whose first event the GPU reached before the launch returned (the host slow to launch: a
    2 ms pause between the pair's start and the replay) is logged under "host:" + the label,
    since its pair holds the host's time. Three of the one, seven of the other, each counted
    as such (equal counts would pass with the rule the wrong way round)."""
    import time

    import torch
    from l2persist import _core
    label = _core.replay_label("replay:k1-queued-test")
    x = torch.rand(1 << 16, device="cuda")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.graph(g, stream=s):
        x.mul_(1.0001)
    g.replay()                                      # its upload: not in a timed replay
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream().cuda_stream
    before = _core.replay_counts()
    for queued in (True,) * 3 + (False,) * 7:
        torch.cuda.synchronize()
        if queued:
            torch.cuda._sleep(20_000_000)           # ~10 ms of GPU time ahead of the pair
        slot = _core.replay_begin(stream, label)
        assert slot >= 0
        if not queued:
            time.sleep(0.002)                       # the GPU reaches the first event meanwhile
        g.replay()
        _core.replay_end(slot, stream)
    torch.cuda.synchronize()
    _core.replay_harvest()
    after = _core.replay_counts()
    assert after["timed"] - before["timed"] == 3, (before, after)
    assert after["host"] - before["host"] == 7, (before, after)
    assert after["failed"] == before["failed"] and after["pending"] == before["pending"]


def test_a_pair_ended_on_one_thread_leaves_another_threads_capture_alone():
    """A replay's pair begun and ended (its first event queried) on one thread while another
    thread holds a capture open in PyTorch's default, global mode: in that mode an event query
    from elsewhere invalidates the capture, so the core asks with its thread relaxed. The
    capture goes on, and the graph it made computes what the same work does eagerly."""
    import threading

    import torch
    from l2persist import _core
    label = _core.replay_label("replay:k1-thread-test")
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    x = torch.rand(1 << 16, device="cuda", generator=gen)
    y = torch.empty_like(x)
    work = torch.zeros(1 << 10, device="cuda")
    g, s, other = torch.cuda.CUDAGraph(), torch.cuda.Stream(), torch.cuda.Stream()
    opened, ended, said = threading.Event(), threading.Event(), []

    def pair_elsewhere():
        opened.wait(10)
        try:
            slot = _core.replay_begin(other.cuda_stream, label)
            with torch.cuda.stream(other):
                work.add_(1)
            _core.replay_end(slot, other.cuda_stream)
            said.append(slot)
        finally:
            ended.set()
    t = threading.Thread(target=pair_elsewhere)
    t.start()
    before = _core.replay_counts()
    with torch.cuda.graph(g, stream=s):
        y.copy_(x * 2)
        opened.set()
        assert ended.wait(10)
        y.add_(1)
    t.join(10)
    assert said and said[0] >= 0, said
    y.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2 + 1)
    _core.replay_harvest()
    after = _core.replay_counts()
    assert after["failed"] == before["failed"] and after["pending"] == before["pending"]
    assert after["timed"] + after["host"] == before["timed"] + before["host"] + 1, (before, after)


_RESET_SCRIPT = textwrap.dedent("""
    import ctypes, json
    import numpy as np
    import l2persist
    from l2persist import _core, kernels as K

    cuda = ctypes.CDLL("libcuda.so.1")

    def reset():  # what cudaDeviceReset does, by any library in the process
        dev = ctypes.c_int()
        assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
        assert cuda.cuDevicePrimaryCtxReset_v2(dev) == 0

    out = {}
    label = _core.replay_label("replay:k1-reset-test")
    s = l2persist.Stream()
    done = _core.replay_begin(s.handle, label)    # one pair timed, so the pool has events
    K.noop(stream=s)
    _core.replay_end(done, s.handle)
    s.synchronize()
    _core.replay_harvest()
    before = _core.replay_counts()
    stale = _core.replay_begin(s.handle, label)   # pending across the reset
    s.synchronize()
    reset()
    s2 = l2persist.Stream()                       # the program's stream in the new context
    fresh = _core.replay_begin(s2.handle, label)
    K.noop(stream=s2)
    _core.replay_end(stale, s2.handle)            # the stale pair's end: ignored
    _core.replay_end(fresh, s2.handle)
    s2.synchronize()
    _core.replay_harvest()
    after = _core.replay_counts()
    out["slots"] = [done, stale, fresh]
    out["timed"] = (after["timed"] + after["host"]) - (before["timed"] + before["host"])
    out["failed"] = after["failed"] - before["failed"]
    out["pending"] = after["pending"]

    # a counter session whose work resets the device: refused by name, CUPTI's objects of the
    # dead context never touched, and the next session refused with what works
    a = l2persist.zeros(4096, np.uint32)
    o = l2persist.zeros(4096, np.uint32)
    try:
        l2persist.measure(reset, ["gpu_time_ns"])
        out["measure"] = None
    except Exception as e:
        out["measure"] = f"{type(e).__name__}: {e}"
    a = l2persist.zeros(4096, np.uint32)
    o = l2persist.zeros(4096, np.uint32)
    try:
        l2persist.measure(lambda: K.pattern(a, o), ["global_load_requests"])
        out["after"] = None
    except Exception as e:
        out["after"] = f"{type(e).__name__}: {e}"
    K.pattern(a, o)                               # the device is usable
    l2persist.Device(0).synchronize()
    print(json.dumps(out))
""")


def test_a_device_reset_forgets_the_replay_events_and_the_counter_session():
    """The program resets the device (cuDevicePrimaryCtxReset, what cudaDeviceReset does)
    between replays, and inside a counter session's work (P5 of the handle review): the replay
    events made before are forgotten, never used (the pair pending across the reset counted
    failed, its late end ignored) and the next replay is timed on new events; the session's
    pass is refused as "was reset", CUPTI's objects of the dead context are never called (that
    crashed, H200 1b28dc3), and the next session is refused with what works (CUPTI's Range
    Profiler opens no other session in that process: tools/investigations/counters-after-reset),
    the device staying usable."""
    r = subprocess.run([sys.executable, "-c", _RESET_SCRIPT], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    done, stale, fresh = out["slots"]
    assert done >= 0 and stale >= 0 and fresh >= 0, out
    assert fresh != stale, out                       # another generation's id
    assert out["timed"] == 1 and out["failed"] == 1 and out["pending"] == 0, out
    assert out["measure"] is not None and "was reset" in out["measure"], out
    assert out["after"] is not None and "measure in a new process" in out["after"], out
