"""Capture tracking and the switch lock without a GPU (csrc/py/capture.c, l2p_capture.h):
what capture_watch_begin raises, switches entered and left with no capture open, the lock held
across threads (and the GIL not held while waiting for it), argument errors. The protocol's race
is C-tested (tests/c/test_capture.c) and run for real in test_capture_watch_gpu.py."""

import subprocess
import sys
import textwrap

import pytest

import l2persist
from l2persist import _core


@pytest.fixture(autouse=True)
def _no_switch_left():
    """Each test starts and ends outside any switch on this thread."""
    yield
    with pytest.raises(ValueError, match="not inside a switch"):
        _core.switch_leave()


def test_watch_begin_without_a_gpu_names_the_reason():
    if _core.device_count() > 0:
        pytest.skip("a GPU is here: test_capture_watch_gpu.py covers capture_watch_begin")
    for args in ((), (0,), (3,)):
        with pytest.raises(l2persist.NoDeviceError, match="no CUDA device was found"):
            _core.capture_watch_begin(*args)
    assert _core.captures_open() == 0
    _core.capture_watch_end()                      # nothing to stop: no error, twice
    _core.capture_watch_end()


def test_watch_begin_argument_errors():
    with pytest.raises(TypeError, match="device: expected None, an int index or a Device, got str"):
        _core.capture_watch_begin("0")
    with pytest.raises(TypeError, match="got bool"):
        _core.capture_watch_begin(True)
    with pytest.raises(TypeError):
        _core.capture_watch_begin(0, 1)
    with pytest.raises(TypeError):
        _core.capture_watch_begin(devic=0)
    for fn in (_core.switch_enter, _core.switch_leave, _core.captures_open,
               _core.capture_watch_end):
        with pytest.raises(TypeError, match="at most 0 positional"):
            fn(1)


def test_switch_with_no_capture():
    assert _core.captures_open() == 0 and type(_core.captures_open()) is int
    for _ in range(3):
        entered = _core.switch_enter()
        assert entered is True
        assert _core.switch_leave() is None


def test_switch_state_errors_name_the_call():
    with pytest.raises(ValueError, match="switch_leave: this thread is not inside a switch"):
        _core.switch_leave()
    assert _core.switch_enter() is True
    with pytest.raises(ValueError, match="switch_enter: this thread is inside a switch already"):
        _core.switch_enter()
    _core.switch_leave()


# In a subprocess: a switch_enter that held the GIL while waiting would hang the process.
_THREADS = textwrap.dedent("""
    import threading, time
    from l2persist import _core
    assert _core.switch_enter() is True
    log = []

    def other():
        try:
            _core.switch_leave()
        except ValueError as e:
            log.append(("leave refused", str(e)))
        log.append(("entered", _core.switch_enter()))
        _core.switch_leave()

    t = threading.Thread(target=other, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not log and time.monotonic() < deadline:   # Python runs here while `other` waits
        time.sleep(0.01)
    time.sleep(0.2)
    assert [k for k, _ in log] == ["leave refused"], log   # still waiting: our switch is inside
    assert "not inside a switch" in log[0][1]
    _core.switch_leave()
    t.join(10)
    assert not t.is_alive(), "switch_enter still waiting after the switch left"
    assert log[1] == ("entered", True), log
    print("ok")
""")


def test_a_switch_belongs_to_its_thread_and_others_wait_for_it():
    """Another thread's switch_enter waits while this thread's switch is inside, without holding
    the GIL (this thread goes on running Python and leaves); its leave cannot end ours."""
    try:
        r = subprocess.run([sys.executable, "-c", _THREADS], capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("deadlock: a thread waiting in switch_enter kept the GIL, so the switch "
                    "could not be left")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_stub_and_docstrings_say_what_they_return():
    assert "True when no capture is open" in _core.switch_enter.__doc__
    assert "Returns: bool" in _core.switch_enter.__doc__
    assert "whoever makes it" in _core.capture_watch_begin.__doc__


def test_the_driver_is_not_initialised_by_asking(tmp_path):
    """driver_initialised (the clock's arming test) in a fresh process: without a driver it is
    False and loads nothing; asked twice, the same (the question makes no CUDA call)."""
    code = ("from l2persist import _core\n"
            "a = _core.driver_initialised(); b = _core.driver_initialised()\n"
            "maps = open('/proc/self/maps').read()\n"
            "print(a, b, 'libcuda.so' in maps)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    a, b, mapped = p.stdout.split()
    assert a == b
    if mapped == "False":          # no driver in the process: it cannot be initialised
        assert a == "False"
