"""The replays' events as the extension exposes them (``_core.replay_*``, csrc/py/replays.c),
without a GPU: bad arguments are refused by name, and a CUDA refusal (no device here) is
counted, never raised, so that the program's replay it wraps goes on untimed."""
import pytest

from l2persist import _core


def test_replay_labels_are_interned_for_the_process():
    a = _core.replay_label("replay:k3-test-a")
    assert _core.replay_label("replay:k3-test-a") == a
    assert _core.replay_label("replay:k3-test-b") != a


@pytest.mark.parametrize("call, match", [
    (lambda: _core.replay_label(3), "label: expected a str"),
    (lambda: _core.replay_begin(-1, 0), "stream"),
    (lambda: _core.replay_begin(0, -1), "label"),
    (lambda: _core.replay_begin(0, 1023 + 1), "label"),
    (lambda: _core.replay_end(65536 * 16384, 0), "slot"),
])
def test_replay_events_refuse_bad_arguments_by_name(call, match):
    before = _core.replay_counts()
    with pytest.raises((TypeError, ValueError), match=match):
        call()
    assert _core.replay_counts() == before             # nothing counted, nothing pending


def test_a_label_never_made_is_refused():
    # ids are handed out in order: one past the highest made so far is not a label yet
    top = _core.replay_label("replay:k1-highest-so-far")
    with pytest.raises(ValueError, match="label: expected an id from l2p_replays_label"):
        _core.replay_begin(0, top + 1)


def test_a_cuda_refusal_is_counted_not_raised():
    try:
        _core.device_count()
        has_gpu = _core.device_count() > 0
    except Exception:
        has_gpu = False
    if has_gpu:
        pytest.skip("a GPU is here: tests/test_replay_events_gpu.py times real replays")
    label = _core.replay_label("replay:k1-no-device")
    before = _core.replay_counts()
    assert _core.replay_begin(0, label) == -1          # untimed: the replay goes on
    _core.replay_end(-1, 0)                             # the hook's end of an untimed one
    after = _core.replay_counts()
    assert after["failed"] == before["failed"] + 1 and after["pending"] == before["pending"]
    assert _core.replay_harvest() == 0
