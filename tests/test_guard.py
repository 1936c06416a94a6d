"""The pytest guard (--l2p-guard) catches planted leaking tests and names them; L2State
snapshots compare and diff. No GPU needed: the planted suite replaces the snapshot source."""

import os
import pathlib

import pytest

from l2persist.state import L2State

ROOT = pathlib.Path(__file__).resolve().parents[1]
MIB = 1 << 20

CONFTEST = '''
import pytest
from l2persist import state

FAKE = {"limit": 0, "windows": ()}


def fake(device):
    return state.L2State(device=0, persisting_limit=FAKE["limit"], default_limit=0,
                         source="process", mps=False, mps_server_percentage=None,
                         windows=FAKE["windows"])


state.set_snapshot_source(fake)


@pytest.fixture
def fake_l2():
    return FAKE


@pytest.fixture
def tidy_limit():
    FAKE["limit"] = 3 << 20
    yield
    FAKE["limit"] = 0
'''

PLANTED = '''
def test_a_clean():
    pass


def test_b_changes_and_restores(fake_l2):
    fake_l2["limit"] = 5 << 20
    fake_l2["limit"] = 0


def test_c_fixture_restores(tidy_limit, fake_l2):
    assert fake_l2["limit"] == 3 << 20


def test_d_leaks_window(fake_l2):
    fake_l2["windows"] = (("stream 0x1234", 0x7f0000000000, 1 << 20, 1.0, 2, 1),)


def test_e_leaks_limit(fake_l2):
    fake_l2["limit"] = 11796480


def test_f_clean_after_leaks():
    pass
'''


@pytest.fixture
def planted(pytester, monkeypatch):
    # The subprocess imports this checkout's l2persist, not an installed one.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_planted=PLANTED)
    return pytester


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "l2persist.pytest_plugin", "-p", "no:randomly",
                                         "-p", "no:cacheprovider", *args)


def test_guard_names_the_leaking_tests(planted):
    r = run(planted, "--l2p-guard")
    r.assert_outcomes(passed=6, errors=2)
    out = r.stdout.str()
    r.stdout.fnmatch_lines([
        "*ERROR at teardown of test_d_leaks_window*",
        "*--l2p-guard: test_planted.py::test_d_leaks_window left the L2 state changed: "
        "window added on stream 0x1234: 1 MiB at 0x7f0000000000, hitRatio 1, "
        "hit PERSISTING, miss STREAMING*",
        "*ERROR at teardown of test_e_leaks_limit*",
        "*--l2p-guard: test_planted.py::test_e_leaks_limit left the L2 state changed: "
        "persisting limit: 0 B -> 11.25 MiB",
    ])
    for clean in ("test_a_clean", "test_b_changes", "test_c_fixture", "test_f_clean"):
        assert f"teardown of {clean}" not in out


def test_without_the_option_nothing_is_checked(planted):
    run(planted).assert_outcomes(passed=6)


def _state(limit=0, windows=(), default_limit=0):
    return L2State(device=0, persisting_limit=limit, default_limit=default_limit, source="process",
                   mps=False, mps_server_percentage=None, windows=windows)


def test_snapshots_compare_and_diff():
    w = ("stream 0x10", 0x1000, 4096, 0.5, 2, 1)
    a, b = _state(), _state(3 * MIB, (w,))
    assert a == _state() and a != b
    assert a.diff(a) == []
    assert a.diff(b) == ["persisting limit: 0 B -> 3 MiB",
                         "window added on stream 0x10: 4 KiB at 0x1000, hitRatio 0.5, "
                         "hit PERSISTING, miss STREAMING"]
    assert b.diff(a)[1].startswith("window removed from stream 0x10")
    c = _state(3 * MIB, (("stream 0x10", 0x1000, 4096, 1.0, 2, 1),))
    assert b.diff(c) == ["window on stream 0x10: 4 KiB at 0x1000, hitRatio 0.5, hit "
                         "PERSISTING, miss STREAMING -> 4 KiB at 0x1000, hitRatio 1, hit "
                         "PERSISTING, miss STREAMING"]
    assert _state(default_limit=5).diff(_state()) == ["default limit: 5 B -> 0 B"]


def test_snapshot_source_is_replaceable_and_restored():
    from l2persist import state

    prev = state.set_snapshot_source(lambda device: _state(7))
    try:
        assert state.l2_state(0).persisting_limit == 7
    finally:
        state.set_snapshot_source(prev)
    assert state._source is prev


def test_check_without_a_gpu_says_so(capsys, monkeypatch):
    from l2persist import state

    monkeypatch.setattr(state._core, "device_count", lambda: 0)
    assert state.check_main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no GPU") and out.count("\n") == 1


# ---- on a GPU: the real snapshot source ----

@pytest.mark.gpu
def test_snapshot_sees_windows_and_the_limit(device):
    import numpy as np

    import l2persist

    before = l2persist.l2_state(device)
    with l2persist.zeros(1 << 18, np.uint8, device) as buf, l2persist.Stream(device) as s:
        s.access_policy_window = l2persist.AccessPolicyWindow(buf, hit_ratio=0.5)
        with_window = l2persist.l2_state(device)
        assert with_window != before
        (line,) = before.diff(with_window)
        assert line.startswith(f"window added on stream {s.handle:#x}: 256 KiB at "
                               f"{buf.ptr:#x}, hitRatio 0.5")
        s.access_policy_window = None
        assert l2persist.l2_state(device) == before
    if device.persisting_l2_source == "process":
        with device.persisting_l2(device.properties.persisting_l2_cache_max_size):
            changed = l2persist.l2_state(device)
            assert changed.diff(before)[0].startswith("persisting limit: ")
        assert l2persist.l2_state(device) == before


@pytest.mark.gpu
def test_open_streams_lists_each_open_stream_until_it_closes_or_dies(device):
    """The list l2_state reads every open Stream's window from: made and wrapped streams, newest
    first; a closed (twice) or dead one leaves it, a Stream that failed to open never joins."""
    import l2persist
    from l2persist import _core

    before = _core.open_streams()

    def new():
        return [s for s in _core.open_streams() if not any(s is b for b in before)]

    a = l2persist.Stream(device)
    b = l2persist.Stream(wrap=1)  # the legacy default stream, borrowed
    c = l2persist.Stream(device)
    got = new()
    assert len(got) == 3 and got[0] is c and got[1] is b and got[2] is a
    b.close()
    b.close()
    got = new()
    assert len(got) == 2 and got[0] is c and got[1] is a
    with pytest.raises((TypeError, ValueError)):
        l2persist.Stream(wrap=object())
    del got, c  # c dies unclosed (no reference left): its dealloc unlinks it
    got = new()
    assert len(got) == 1 and got[0] is a
    a.close()
    assert new() == []
    assert len(_core.open_streams()) == len(before)


@pytest.mark.gpu
def test_persisting_l2_disabled_restores_also_on_errors(device):
    import l2persist

    if device.persisting_l2_source != "process":
        pytest.skip("under MPS the set-aside is the server's")
    pmax = device.properties.persisting_l2_cache_max_size
    with device.persisting_l2(pmax) as granted:
        with l2persist.persisting_l2_disabled(device) as dev:
            assert dev.persisting_l2_limit == 0
        assert device.persisting_l2_limit == granted
        with pytest.raises(KeyError):
            with l2persist.persisting_l2_disabled(device.index):
                assert device.persisting_l2_limit == 0
                raise KeyError("inside")
        assert device.persisting_l2_limit == granted


@pytest.mark.gpu
def test_check_flags_a_set_aside_that_is_not_the_default(device, capsys):
    from l2persist import state

    if device.persisting_l2_source != "process" or state.PERCENT_VAR in os.environ:
        pytest.skip("the set-aside is set outside this process")
    pmax = device.properties.persisting_l2_cache_max_size
    default = device.default_persisting_l2_limit
    with device.persisting_l2(default):
        assert state.check_main(["--device", str(device.index)]) == 0
    assert "(0 or the default)" in capsys.readouterr().out
    if pmax != default:
        with device.persisting_l2(pmax):
            assert state.check_main(["--device", str(device.index)]) == 1
        out = capsys.readouterr().out
        assert out.count("\n") == 1 and "not 0 or the default" in out


def test_default_stream_windows_wrap_the_default_streams(monkeypatch):
    """Handles 1 and 2 are the default streams: they must reach Stream as wrap=, since a bare
    int is a device index (a snapshot then skipped them, or made a stream on GPU 1), with the
    device whose default streams they are (else the current device's were read)."""
    import types
    from l2persist import state
    calls = []

    def fake_stream(*args, **kw):
        calls.append((args, kw))
        raise ValueError("no device here")
    monkeypatch.setattr(state, "_core", types.SimpleNamespace(
        Stream=fake_stream, CudaError=RuntimeError, NotSupportedError=NotImplementedError))
    assert state._default_stream_windows(0) == []
    assert calls == [((), {"wrap": 1, "device": 0}), ((), {"wrap": 2, "device": 0})]
