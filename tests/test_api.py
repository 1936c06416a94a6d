"""The API surface, without a GPU: signatures, the stub, __all__, the kernel table."""

import importlib
import inspect
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import l2persist
from l2persist import _core

ROOT = Path(__file__).resolve().parents[1]


def _public_callables():
    for name in dir(_core):
        obj = getattr(_core, name)
        if name.startswith("_") or not callable(obj):
            continue
        if isinstance(obj, type) and issubclass(obj, BaseException):
            continue  # exception classes take *args like every exception
        if isinstance(obj, type) and "__new__" not in vars(obj):
            continue  # made by functions, not constructed: Device(...) etc. are checked
        yield f"_core.{name}", obj
        if isinstance(obj, type):
            for m, v in vars(obj).items():
                if not m.startswith("_") and callable(v):
                    yield f"_core.{name}.{m}", getattr(obj, m)
    for name, obj in vars(_core).items():
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            for m, v in vars(obj).items():
                if not m.startswith("_") and isinstance(v, types.MethodDescriptorType):
                    yield f"_core.{name}.{m}", getattr(obj, m)


@pytest.mark.parametrize("name, obj", list(_public_callables()), ids=lambda x: x
                         if isinstance(x, str) else "")
def test_every_extension_callable_has_a_signature(name, obj):
    """The text signature is the row's: the same parameters in order, of the same kind, with
    the same defaults (what the one parser takes, _core._signatures); the one callable
    without a row is AccessProperty, CUDA's cudaAccessProperty as an IntEnum."""
    sig = inspect.signature(obj)
    row = _core._signatures.get(name.removeprefix("_core."))
    if row is None:
        assert obj is _core.AccessProperty, name
        assert {m.name: int(m) for m in obj} == {"NORMAL": 0, "STREAMING": 1, "PERSISTING": 2}
        return
    params = list(sig.parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    kinds = {"positional": inspect.Parameter.POSITIONAL_ONLY,
             "keyword": inspect.Parameter.POSITIONAL_OR_KEYWORD,
             "keyword_only": inspect.Parameter.KEYWORD_ONLY}
    # as in Python (and the parser): every parameter after a keyword-only one is keyword-only
    # too, whatever its row says (pattern's width .. store are rows of kind "keyword")
    want, star = [], False
    for n, _t, _d, k in row[0]:
        star = star or k == "keyword_only"
        want.append((n, kinds["keyword_only" if star else k]))
    assert [(p.name, p.kind) for p in params] == want, sig
    for p, (n, _t, default, _k) in zip(params, row[0]):
        if default is None:
            assert p.default is inspect.Parameter.empty, (name, n)
        else:
            assert repr(p.default) == default or str(p.default) == default, (name, n, p.default)


def test_kernel_signatures_come_from_the_table():
    assert set(_core.KERNELS) <= set(l2persist.kernels.__all__)
    for name in _core.KERNELS:
        params = inspect.signature(getattr(l2persist.kernels, name)).parameters
        assert "stream" in params and params["stream"].kind is inspect.Parameter.KEYWORD_ONLY
        # Every documented keyword is one the binder parses: an unknown one is refused by
        # name, a documented one never is (it may fail later, on its value or the device).
        with pytest.raises(TypeError, match="unexpected keyword argument 'no_such'"):
            getattr(_core, name)(no_such=1)
        required = [q.name for q in params.values() if q.default is inspect.Parameter.empty]
        for p in params.values():
            _documented_keyword_is_parsed(getattr(_core, name), p.name, required)
    assert _core.LOAD_FLAVOURS[0] == "default" and "evict_last" in _core.LOAD_FLAVOURS
    assert _core.STORE_FLAVOURS == ("wb", "cg", "cs", "wt")
    assert "'evict_first'" in _core.l2_read.__doc__  # choices listed from the same table


def _documented_keyword_is_parsed(fn, name, required):
    """fn(name=object()) gets past the keyword's name: the binder then reports the first
    required argument still missing, or refuses the value naming `name`, or (nothing missing,
    the value not yet looked at) fails on the device; it never accepts object()."""
    missing = [r for r in required if r != name]
    try:
        fn(**{name: object()})
    except (TypeError, ValueError) as e:
        want = f"missing required argument '{missing[0]}'" if missing else name
        assert want in str(e) and "unexpected keyword" not in str(e), (fn.__name__, name, e)
    except l2persist.CudaError as e:   # NoDeviceError without a GPU
        assert not missing, (fn.__name__, name, e)
    else:
        pytest.fail(f"{fn.__name__}({name}=object()) was accepted")


def test_threads_means_threads_per_block_everywhere():
    for name in _core.KERNELS:
        params = inspect.signature(getattr(_core, name)).parameters
        if "threads" in params:
            with pytest.raises(ValueError, match=r"threads: 2048 is outside \[1, 1024\]"):
                kwargs = {"threads": 2048}
                if name == "streaming":
                    getattr(_core, name)("read", **kwargs)
                elif name == "tax_probe":
                    getattr(_core, name)(None, "write", **kwargs)
                else:
                    getattr(_core, name)(**kwargs) if name not in ("pattern", "l2_read",
                                                                    "sm_read",
                                                                    "hot_cold_read") else \
                        getattr(_core, name)(*(None,) * _required(name), **kwargs)


def _required(name):
    params = inspect.signature(getattr(_core, name)).parameters.values()
    return sum(p.default is inspect.Parameter.empty for p in params)


def test_stub_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_stub.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_stub_is_typed_from_the_rows():
    """The stub types what the rows know: at most 5 Any, return types on every row-made
    callable, and the rows' defaults are the text signatures' (one source)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_stub
    finally:
        sys.path.pop(0)
    text = (ROOT / "l2persist" / "_core.pyi").read_text()
    assert gen_stub.count_any(text) <= 5, text
    for qualname, (params, returns) in _core._signatures.items():
        assert returns, qualname
        obj = _core
        for part in qualname.split("."):
            obj = getattr(obj, part)
        sig = inspect.signature(obj).parameters
        for name, _type, default, _kind in params:
            assert name in sig, (qualname, name)
            shown = sig[name].default
            if default is None:
                assert shown is inspect.Parameter.empty, (qualname, name)
            else:
                assert repr(shown) == default or str(shown) == default, (qualname, name)
    assert "def time_calls(" in text and "hold_us: float = 50.0" in text
    assert "-> list[float]" in text


def test_row_parameters_are_documented():
    """Every parameter of a row-made callable has a line in its docstring."""
    for qualname, (params, _) in _core._signatures.items():
        obj = _core
        for part in qualname.split("."):
            obj = getattr(obj, part)
        doc = obj.__doc__ or ""
        for name, *_ in params:
            assert f"    {name} (" in doc, (qualname, name)


def test_every_submodule_declares_all():
    for info in pkgutil.iter_modules(l2persist.__path__):
        if info.name == "_core":
            continue
        mod = importlib.import_module(f"l2persist.{info.name}")
        assert hasattr(mod, "__all__"), info.name
        for n in mod.__all__:
            assert hasattr(mod, n), f"{info.name}.{n}"
    for n in l2persist.__all__:
        assert hasattr(l2persist, n), n


def test_timing_defaults_have_one_source():
    """time_calls' documented defaults are its C defaults (L2P_TIME_* in l2p_timing.h); every
    Python caller that re-states hold_us takes the same value: a hold of 50 us, so the events
    time the GPU rather than the host's launch latency."""
    core = inspect.signature(_core.time_calls).parameters
    assert core["hold_us"].default == 50.0
    assert (core["warmup"].default, core["repeat"].default) == (3, 20)
    assert "hold_us" in _core.time_calls.__doc__
    for fn in (l2persist.benchmark, l2persist.tune):
        params = inspect.signature(fn).parameters
        assert params["hold_us"].default == core["hold_us"].default, fn.__name__
    bench = inspect.signature(l2persist.benchmark).parameters
    assert (bench["warmup"].default, bench["repeat"].default) == (3, 20)


def test_device_set_aside_tax_is_a_row_method():
    """Device.set_aside_tax is a row-made method (Device is immutable) with the documented
    signature, handing over to l2persist.tax.set_aside_tax; its range is the core's."""
    from l2persist import tax
    assert str(inspect.signature(_core.Device.set_aside_tax)) == \
        "(self, /, set_aside=None, *, probe=False, stream=None, work=None)"
    params, returns = _core._signatures["Device.set_aside_tax"]
    assert [p[0] for p in params] == ["set_aside", "probe", "stream", "work"]
    assert [p[3] for p in params] == ["keyword", "keyword_only", "keyword_only", "keyword_only"]
    assert returns == "l2persist.tax.TaxPrediction"
    stub = (ROOT / "l2persist" / "_core.pyi").read_text()
    assert ("def set_aside_tax(self, set_aside: int | None = None, *, probe: bool = False, "
            "stream: StreamLike = None, work: Callable[[], object] | None = None) -> "
            "l2persist.tax.TaxPrediction: ...") in stub
    # The path the method takes without a GPU: the core refuses a negative set-aside by name.
    chip = {"name": "H200", "compute_capability": (9, 0), "l2_cache_size": 60 << 20,
            "persisting_l2_cache_max_size": 45 << 20}
    with pytest.raises(ValueError, match=r"set_aside: -1 bytes is outside \[0, "):
        tax.predict(chip, -1)


@pytest.mark.gpu
def test_device_set_aside_tax_on_a_device(device):
    """The method gives what l2persist.tax gives, and refuses bad set-asides by name without
    touching the limit."""
    from l2persist import tax
    before = device.persisting_l2_limit
    with pytest.raises(ValueError, match="set_aside"):
        device.set_aside_tax(-1)
    with pytest.raises(ValueError, match="set_aside"):
        device.set_aside_tax(device.properties.persisting_l2_cache_max_size + 1)
    with pytest.raises(TypeError, match="set_aside"):
        device.set_aside_tax("1")
    assert device.persisting_l2_limit == before
    assert device.set_aside_tax(0) == tax.predict(device, 0)
    assert device.set_aside_tax() == tax.set_aside_tax(device)
    assert device.set_aside_tax(set_aside=0).probe is None


def _core_limits():
    """The core's argument ranges: the L2P_*_MIN / _MAX defines its checks enforce."""
    import re
    text = "".join((ROOT / "csrc" / "core" / h).read_text() for h in ("l2p_launch.h",
                                                                     "l2p_checks.h"))
    return {m[1]: int(m[2]) for m in re.finditer(r"#define (L2P_\w+_(?:MIN|MAX)) (\d+)", text)}


# (kernel, argument, its lowest and highest value: a number or the core's define)
_ROW_RANGES = [
    ("l2_read", "width", "L2P_L2_READ_WIDTH_MIN", "L2P_L2_READ_WIDTH_MAX"),
    ("l2_read", "loads", "L2P_L2_READ_LOADS_MIN", "L2P_L2_READ_LOADS_MAX"),
    ("l2_read", "repeats", 1, "L2P_REPEATS_MAX"),
    ("l2_read", "threads", 1, "L2P_THREADS_MAX"),
    ("sm_read", "sm", 0, "L2P_SM_ID_MAX"),
    ("sm_read", "chunk", 0, "L2P_CHUNK_MAX"),
    ("sm_read", "width", "L2P_L2_READ_WIDTH_MIN", "L2P_L2_READ_WIDTH_MAX"),
    ("sm_read", "loads", "L2P_L2_READ_LOADS_MIN", "L2P_L2_READ_LOADS_MAX"),
    ("sm_read", "threads", 1, "L2P_THREADS_MAX"),
    ("bulk_read", "repeats", 1, "L2P_REPEATS_MAX"),
    ("bulk_read", "chunk", "L2P_BULK_CHUNK_MIN", "L2P_BULK_CHUNK_MAX"),
    ("bulk_read", "blocks", 1, "L2P_BLOCKS_MAX"),
    ("pattern", "width", 1, "L2P_PATTERN_WIDTH_MAX"),
    ("pattern", "threads", 1, "L2P_THREADS_MAX"),
    ("hot_cold", "accesses", 1, "L2P_ACCESSES_MAX"),
]


@pytest.mark.parametrize("kernel, arg, lo, hi", _ROW_RANGES)
def test_kernel_row_ranges_are_the_cores(kernel, arg, lo, hi):
    """A row's range is the one the core's check enforces (tests/c/test_limits.c checks the
    core's side): the row refuses one past each bound by name and passes each bound on."""
    limits = _core_limits()
    lo, hi = (limits[v] if isinstance(v, str) else v for v in (lo, hi))
    fn = getattr(_core, kernel)
    buffers = (None,) * _required(kernel)
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ValueError, match=f"^{arg}: {bad} "):
            fn(*buffers, **{arg: bad})
    for good in (lo, hi):  # refused later, for the None buffers or the missing GPU, not for arg
        with pytest.raises(Exception) as e:
            fn(*buffers, **{arg: good})
        assert not str(e.value).startswith(f"{arg}:"), str(e.value)
