"""Stream windows' bookkeeping without a GPU (l2persist/process/streams.py): how the launch
log's launches are grouped, which streams may be windowed, and how StreamWindows sets, holds
and puts back each stream's own window. The watcher's use of them is the sim's
(tests/test_live_sim_cpu.py); real streams are the GPU tests' (tests/test_live_gpu.py)."""
import types

import pytest

from l2persist import _core
from l2persist.process import streams

A, B, C = 0x7F00_0000_0000, 0x7F10_0000_0000, 0x7F20_0000_0000


def _kernel(i, name, stream, grid=(64, 1, 1)):
    return (i, name, grid, (256, 1, 1), 0, 2, stream)


def test_recurring_launches_are_grouped_by_kernel_shape_stream_and_buffers():
    records = [(A, 1 << 20, 0), (B, 1 << 20, 0), (C, 1 << 20, 0)]
    kernels = [_kernel(0, "k_add", 7), _kernel(1, "k_add", 7), _kernel(2, "k_add", 7),
               _kernel(3, "k_add", 9), _kernel(4, "k_add", 7), _kernel(5, "k_init", 7),
               _kernel(6, "k_add", 7, grid=(32, 1, 1)), _kernel(7, "k_add", 7, grid=(32, 1, 1))]
    uses = [(0, 0, 0, A, 0), (1, 0, 0, A + 64, 0),      # the same allocation: one group
            (2, 0, 0, B, 1),                             # another buffer: its own group
            (3, 0, 0, A, 0),                             # another stream
            (4, 0, 0, A, 0), (4, 1, 8, C, 2),            # another argument too
            (5, 0, 0, C, 2),
            (6, 0, 0, A, 0), (7, 0, 0, A, 0)]            # another launch shape
    groups = streams.launch_groups(kernels, records, uses)
    # launched once each: launches 2, 3, 4, 5 (set-up work, or a pattern seen once)
    assert [(g.names, g.stream, g.launches) for g in groups] == [
        (["k_add"], 7, 2), (["k_add"], 7, 2)]
    first, shaped = groups
    assert first.signature != shaped.signature       # the launch shape is in the signature
    assert first.signature == _core.graph_signature([kernels[0][:-1]])
    assert first.uses == [(0, 0, 0, A, 0)]            # the first launch's words, at node 0
    # its own records only: each is used by it (a target's place has an anchor word)
    assert first.records == [records[0]]
    assert all(first.anchor(i) is not None for i in range(len(first.records)))
    assert first.nodes_of(0) == [0] and first.nodes_of(1) == []
    assert first.anchor(0) == (0, 0, 0, A) and first.anchor(1) is None
    both = streams.launch_groups(kernels + [_kernel(8, "k_add", 7)], records,
                                 uses + [(8, 0, 0, A, 0), (8, 1, 8, C, 2)])
    two = next(g for g in both if len(g.uses) == 2)
    assert two.records == [records[0], records[2]]
    assert two.uses == [(0, 0, 0, A, 0), (0, 1, 8, C, 1)]
    assert first.replays == 2 and first.ref() is first


def test_only_default_and_pool_streams_are_known(monkeypatch):
    monkeypatch.setattr(streams, "POOL", {})
    assert streams.known(0) and streams.known(1)      # the legacy default stream
    assert not streams.known(2)                       # per-thread: not the watcher's to set
    assert not streams.known(0x5EED)
    streams.note_stream(types.SimpleNamespace(cuda_stream=0x5EED))
    assert streams.known(0x5EED)
    streams.note_stream(object())                    # not a stream: ignored, never raised
    assert set(streams.POOL) == {0x5EED}


class _World:
    def __init__(self):
        self.win = {5: "theirs"}                      # the program's own window on stream 5
        self.sets = []
        self.closed = 0


@pytest.fixture
def world(monkeypatch):
    w = _World()

    class Stream:
        def __init__(self, wrap, device=None):
            self.h = wrap if isinstance(wrap, int) else int(wrap.cuda_stream)
            self.device = device

        @property
        def access_policy_window(self):
            return w.win.get(self.h)

        @access_policy_window.setter
        def access_policy_window(self, win):
            w.win[self.h] = win
            w.sets.append((self.h, win))

        def close(self):
            w.closed += 1
    monkeypatch.setattr(streams._core, "Stream", Stream)
    monkeypatch.setattr(streams, "POOL", {5: types.SimpleNamespace(cuda_stream=5)})
    return w


def test_stream_windows_set_change_and_put_back(world):
    sw = streams.StreamWindows()
    sw.set({0: ("k1", "w1"), 5: ("k2", "w2")})
    assert world.win == {0: "w1", 5: "w2"}
    n = len(world.sets)
    sw.set({0: ("k1", "w1"), 5: ("k2", "w2")})        # unchanged: nothing touched
    assert len(world.sets) == n
    sw.set({0: ("k3", "w3")})                         # stream 5 not wanted: its own back
    assert world.win == {0: "w3", 5: "theirs"}
    assert sw.restore() == []
    assert world.win == {0: None, 5: "theirs"} and world.closed == 2
    assert sw.restore() == [] and world.closed == 2   # idempotent


def test_the_legacy_stream_is_the_watched_devices(world):
    """Handles 0 and 1 name the current device's legacy stream: every stream is wrapped with
    the watched device (a default stream's window set and put back there, whichever GPU the
    program's thread has current; a pooled stream must be on it)."""
    sw = streams.StreamWindows(device=1)
    sw.set({0: ("k", "w"), 1: ("k", "w"), 5: ("k", "w")})
    assert [sw.wrapped[h].device for h in (0, 1, 5)] == [1, 1, 1]
    assert streams.StreamWindows().device == 0


def test_a_capture_holds_the_windows_off_until_it_ends(world):
    sw = streams.StreamWindows()
    sw.set({5: ("k", "w")})
    sw.suspend()
    assert world.win[5] == "theirs"
    sw.set({5: ("k2", "w2")})                         # wanted while held: set at resume
    assert world.win[5] == "theirs"
    sw.resume()
    assert world.win[5] == "w2"
    sw.resume()                                       # nothing held: nothing changes
    assert world.win[5] == "w2"
    sw.suspend()
    sw.restore()                                      # exit during a capture: theirs back
    assert world.win[5] == "theirs"


def test_a_failed_put_back_is_reported_and_the_rest_go_on(world, monkeypatch):
    sw = streams.StreamWindows()
    sw.set({0: ("k", "w"), 5: ("k", "w")})
    stream0 = sw.wrapped[0]
    original = type(stream0).access_policy_window

    def fail_on_0(self, win):
        if self.h == 0:
            raise RuntimeError("cudaErrorInvalidResourceHandle")
        original.fset(self, win)
    monkeypatch.setattr(type(stream0), "access_policy_window",
                        property(original.fget, fail_on_0))
    failed = sw.restore()
    assert len(failed) == 1 and "stream 0x0" in failed[0] and "InvalidResource" in failed[0]
    assert world.win[5] == "theirs"
