"""Capture tracking against real captures, trying to lose the race (l2p_capture.h): one thread
captures small graphs in a loop (PyTorch, then CuPy; global capture mode), another loops
switch_enter / set the persisting limit, a window on the capture stream, a persisting reset and
a device synchronize / switch_leave, as the live watcher's switcher does from its own thread.
A switch that ran while a capture was open would invalidate it (the limit and the synchronize
are illegal then) or fail itself; a capture that began inside a switch likewise. Each library
runs in a fresh process (CUPTI's one subscriber, and a deadlock would hang the process: a
timeout fails the test instead)."""

import json
import subprocess
import sys
import textwrap

import pytest

from l2persist.pytest_plugin import need

pytestmark = pytest.mark.gpu

_PRELUDE = textwrap.dedent("""
    import json, sys, threading, time
    import l2persist
    from l2persist import _core

    dev = l2persist.Device(0)
    props = dev.properties
    before_limit = dev.persisting_l2_limit
    limits = [props.persisting_l2_cache_max_size // 4, props.persisting_l2_cache_max_size // 2]
    _core.capture_watch_begin(0)
    stop = threading.Event()
    switch_errors, capture_errors, seen_inside = [], [], []

    def switcher(stream, target):
        wins = [l2persist.AccessPolicyWindow(target, hit_ratio=0.5), None]
        k = 0
        while not stop.is_set():
            if not _core.switch_enter():
                time.sleep(0.0002)               # a capture is open: try again soon
                continue
            try:
                k += 1
                time.sleep(0.001)                # the switch lasts: captures arrive inside it,
                dev.persisting_l2_limit = limits[k % 2]   # before its calls
                stream.access_policy_window = wins[k % 2]
                dev.reset_persisting_l2()
                dev.synchronize()
            except Exception as e:
                switch_errors.append(repr(e))
            finally:
                _core.switch_leave()

    def race(capture_once, stream, target, n):
        t = threading.Thread(target=switcher, args=(stream, target), daemon=True)
        t.start()
        time.sleep(0.05)
        for i in range(n):
            try:
                capture_once()
            except Exception as e:
                capture_errors.append(repr(e))
        stop.set()
        t.join(60)
        assert not t.is_alive(), "the switcher never finished"

    def report(**extra):
        _core.capture_watch_end()
        dev.persisting_l2_limit = before_limit
        print(json.dumps(dict(switch_errors=switch_errors, capture_errors=capture_errors,
                              seen_inside=sorted(set(seen_inside)),
                              open_after=_core.captures_open(),
                              counts=_core._capture_counts(), **extra)))
""")

_TORCH = _PRELUDE + textwrap.dedent("""
    import torch
    s = torch.cuda.Stream()
    x = torch.ones(1 << 16, device="cuda")
    stream = l2persist.Stream(wrap=s)
    graphs = []

    def capture_once():
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s, capture_error_mode="global"):
            y = x * 2 + 1
            seen_inside.append(_core.captures_open())
            time.sleep(0.0005)                   # the capture stays open a while
        g.replay()
        graphs.append((g, y))
        del graphs[:-2]

    race(capture_once, stream, x, 150)
    torch.cuda.synchronize()
    # the launch log shares the one subscriber: both work while tracking is on
    kernels, _, _, _ = _core._launch_log(lambda: x.add_(1), [], None)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        y = x * 3
        after_log = _core.captures_open()
    stream.access_policy_window = None
    report(logged=len(kernels), after_log=after_log)
""")

_CUPY = _PRELUDE + textwrap.dedent("""
    import cupy as cp
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(1 << 16, dtype=cp.float32)
    ys = [cp.empty_like(x) for _ in range(3)]    # no allocation inside a capture
    with s:                                      # the kernels compiled before capturing
        cp.multiply(x, 2, out=ys[0])
        cp.add(ys[0], 1, out=ys[0])
    s.synchronize()
    stream = l2persist.Stream(wrap=s)
    graphs, turn = [], iter(range(10 ** 9))

    def capture_once():
        y = ys[next(turn) % 3]
        with s:
            s.begin_capture(mode=cp.cuda.runtime.streamCaptureModeGlobal)
            try:
                cp.multiply(x, 2, out=y)
                cp.add(y, 1, out=y)
                seen_inside.append(_core.captures_open())
                time.sleep(0.0005)               # the capture stays open a while
            finally:
                g = s.end_capture()
            g.launch(stream=s)
        graphs.append(g)
        del graphs[:-2]

    race(capture_once, stream, x, 300)
    s.synchronize()
    stream.access_policy_window = None
    report()
""")


def _run(code):
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("deadlock or stall: a capture and a switch waited for each other")
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check(out, n):
    print(json.dumps(out))                           # the counts, for the log (-s)
    assert out["capture_errors"] == [], out          # no capture invalidated or refused
    assert out["switch_errors"] == [], out           # no switch call refused by a capture
    assert out["seen_inside"] == [1], out            # every capture was counted while open
    assert out["open_after"] == 0, out
    c = out["counts"]
    assert c["begun"] - c["failed"] >= n and c["ended"] >= n and c["unmatched"] == 0, c
    assert c["switches"] > 0 and c["waited"] > 0, c  # they met: begins waited for switches


def test_torch_captures_and_switches_never_overlap():
    need("torch")
    out = _run(_TORCH)
    _check(out, 150)
    assert out["logged"] >= 1, out                   # the launch log ran beside tracking
    assert out["after_log"] == 1, out                # and tracking kept working after it


def test_cupy_captures_and_switches_never_overlap():
    need("cupy")
    _check(_run(_CUPY), 300)


def test_the_clock_arms_only_once_the_program_initialised_cuda():
    """driver_initialised, the clock's arming test, in a fresh process: False after importing
    l2persist and CuPy (which loads libcuda at import) and still False after asking; True once
    the program's own first CUDA call ran. Asking never initialises the driver."""
    need("cupy")
    code = textwrap.dedent("""
        import json
        from l2persist import _core
        import cupy
        before = [_core.driver_initialised(), _core.driver_initialised()]
        cupy.zeros(4).sum().item()          # the program's first CUDA work
        print(json.dumps({"before": before, "after": _core.driver_initialised()}))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {"before": [False, False], "after": True}, out
