"""Argument refusals of the kernel binder and the function rows name the argument and the
allowed range, and come before any device call: every test here runs without a GPU (and
gives the same answer with one)."""

import inspect
import re

import numpy as np
import pytest

from l2persist import _core

F32 = r"\[-3\.40282e\+38, 3\.40282e\+38\]"   # float32's range: the kernels take C floats
FLOAT_ARGS = [("scale_shift", "scale"), ("scale_shift", "shift"), ("streaming", "scalar")]


def _call_with(kernel, name, value):
    """The kernel with one float argument set and its other arguments valid or absent: the
    float is converted before any buffer or device is looked at."""
    if kernel == "scale_shift":
        return _core.scale_shift(np.zeros(4, np.float32), **{name: value})
    return _core.streaming("read", **{name: value})


@pytest.mark.parametrize("kernel, name", FLOAT_ARGS)
@pytest.mark.parametrize("value", ["1.5", None, 1j, True, object()])
def test_kernel_float_refuses_a_non_number_by_name(kernel, name, value):
    with pytest.raises(TypeError, match=rf"^{name}: expected a real number in {F32}, got "
                       rf"{type(value).__name__}$"):
        _call_with(kernel, name, value)


@pytest.mark.parametrize("kernel, name", FLOAT_ARGS)
def test_kernel_float_refuses_an_int_beyond_a_double_by_name(kernel, name):
    with pytest.raises(ValueError, match=rf"^{name}: 100000000000\.\.\. \(401 digits\) is not "
                       rf"a finite float; expected a real number in {F32}$"):
        _call_with(kernel, name, 10**400)
    # beyond the str() digit limit too, where the repr itself fails
    with pytest.raises(ValueError, match=rf"^{name}: an int too large to print is not a "
                       rf"finite float; expected a real number in {F32}$"):
        _call_with(kernel, name, 10**5000)


@pytest.mark.parametrize("kernel, name", FLOAT_ARGS)
@pytest.mark.parametrize("value", [1e300, -1e39, float("inf"), float("nan")])
def test_kernel_float_refuses_what_a_float32_cannot_hold_by_name(kernel, name, value):
    with pytest.raises(ValueError, match=rf"^{name}: {re.escape(repr(value))} is outside {F32}$"):
        _call_with(kernel, name, value)


def test_kernel_float_range_is_documented():
    for kernel, name in FLOAT_ARGS:
        assert f"    {name} (float): a finite real number in [-3.40282e+38, 3.40282e+38]" in \
            getattr(_core, kernel).__doc__


def test_function_rows_share_the_float_converter():
    """time_calls' hold_us (a function row) goes through the same converter."""
    with pytest.raises(TypeError, match=r"^hold_us: expected a real number, got str$"):
        _core.time_calls(lambda: None, hold_us="50")
    with pytest.raises(ValueError, match=r"^hold_us: 100000000000\.\.\. \(401 digits\) is not "
                       r"a finite float$"):
        _core.time_calls(lambda: None, hold_us=10**400)


@pytest.mark.parametrize("value", [2**64, 2**63, -2**63 - 1, -2**70])
def test_bare_int_stream_outside_64_bits_is_refused_by_name(value):
    with pytest.raises(ValueError, match=r"^stream: a bare int handle \(an int outside 64 bits"
                       r"\) .* an int must be 0 / 1 \(legacy\) / 2 \(per-thread\)"):
        _core.noop(stream=value)


def test_bare_int_stream_in_64_bits_but_not_default_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^stream: a bare int handle \(-1\) .* an int must "
                       r"be 0 / 1 \(legacy\) / 2 \(per-thread\)"):
        _core.noop(stream=-1)


class _ForeignStream:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class _TorchLikeStream:
    def __init__(self, handle):
        self.cuda_stream = handle


@pytest.mark.parametrize("make, source", [(_ForeignStream, r"__cuda_stream__\(\)'s handle"),
                                          (_TorchLikeStream, r"\.cuda_stream")])
def test_foreign_stream_handle_outside_64_bits_is_refused_by_name(make, source):
    rng = r"\[0, 2\^64 - 1\]"
    with pytest.raises(ValueError, match=rf"^stream: {source} is an int above 64 bits; "
                       rf"expected an int handle in {rng}$"):
        _core.noop(stream=make(2**64))
    with pytest.raises(ValueError, match=rf"^stream: {source} is an int below 64 bits"):
        _core.noop(stream=make(-2**70))
    with pytest.raises(ValueError, match=rf"^stream: {source} is -5, outside {rng}"):
        _core.noop(stream=make(-5))
    with pytest.raises(TypeError, match=rf"^stream: {source} is a str; expected an int handle "
                       rf"in {rng}$"):
        _core.noop(stream=make("0x1"))


def test_signature_kinds_agree_with_the_parser():
    """_core._signatures (the stub's source) records each parameter's kind as the parser and
    the text signature take it: keyword-only from the first keyword-only one on (pattern's
    width .. store, advise_search's evaluate .. groups are not; tries .. are)."""
    kinds = {"positional": inspect.Parameter.POSITIONAL_ONLY,
             "keyword": inspect.Parameter.POSITIONAL_OR_KEYWORD,
             "keyword_only": inspect.Parameter.KEYWORD_ONLY}
    for qualname, (params, _) in _core._signatures.items():
        obj = _core
        for part in qualname.split("."):
            obj = getattr(obj, part)
        shown = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
        assert [(n, kinds[k]) for n, _t, _d, k in params] == [(p.name, p.kind) for p in shown], \
            qualname
    pattern = dict((n, k) for n, _t, _d, k in _core._signatures["pattern"][0])
    assert pattern["src"] == "keyword" and pattern["threads"] == "keyword_only"
    assert pattern["width"] == pattern["store"] == "keyword_only"
    # and the parser agrees: width cannot be passed by position
    with pytest.raises(TypeError, match=r"pattern\(\) takes at most 2 positional arguments"):
        _core.pattern(None, None, 4)


@pytest.mark.parametrize("window", [object(), 1, "w"])
def test_noop_refuses_a_bad_window_before_the_device(window):
    with pytest.raises(TypeError, match=r"^window: expected None or an AccessPolicyWindow, "
                       rf"got {type(window).__name__}$"):
        _core.noop(window=window)


def test_kernels_refuse_a_bad_window_before_buffers_and_device():
    """Every kernel with window= refuses a non-window by name before it converts buffers or
    asks for a device (the buffers here are host arrays, which would be refused too)."""
    for name in _core.KERNELS:
        params = inspect.signature(getattr(_core, name)).parameters
        if "window" not in params:
            continue
        required = [p.name for p in params.values() if p.default is inspect.Parameter.empty]
        args = {r: ("read" if r == "op" else "write" if r == "kind" else np.zeros(4, np.int32))
                for r in required}
        with pytest.raises(TypeError, match=r"^window: expected None or an AccessPolicyWindow"):
            getattr(_core, name)(**args, window=object())
