"""Device properties and the persisting-L2 set-aside, on a GPU."""

import json
import subprocess
import sys

import pytest

import l2persist
from l2persist.pytest_plugin import need

pytestmark = pytest.mark.gpu


def test_properties_match_cupy(device):
    cupy = need("cupy")
    ref = cupy.cuda.runtime.getDeviceProperties(0)
    p = device.properties
    name = ref["name"].decode() if isinstance(ref["name"], bytes) else ref["name"]
    assert p.name == name
    assert p.compute_capability == (ref["major"], ref["minor"])
    assert p.multiprocessor_count == ref["multiProcessorCount"]
    assert p.l2_cache_size == ref["l2CacheSize"]
    assert p.persisting_l2_cache_max_size == ref["persistingL2CacheMaxSize"]
    assert p.access_policy_max_window_size == ref["accessPolicyMaxWindowSize"]
    assert p.total_memory == ref["totalGlobalMem"]
    assert p.memory_bus_width == ref["memoryBusWidth"]
    assert p.global_l1_cache_supported == bool(ref["globalL1CacheSupported"])
    if "memoryClockRate" in ref:
        assert p.memory_clock_khz == ref["memoryClockRate"]
    assert p.peak_memory_bandwidth == pytest.approx(
        2 * p.memory_clock_khz * 1e3 * p.memory_bus_width / 8)


def test_properties_record(device):
    p = device.properties
    d = p.as_dict()
    assert d["l2_cache_size"] == p.l2_cache_size and d["name"] == p.name
    assert "l2_cache_size=" in repr(p) and "MiB" in repr(p)
    assert "<table>" in p._repr_html_() and p.name in p._repr_html_()


def test_limit_set_rounds_up_and_restores(device):
    start = device.persisting_l2_limit
    granule = device.persisting_l2_granule
    assert granule > 0 and device.persisting_l2_limit == start  # probing restored it
    mx = device.properties.persisting_l2_cache_max_size
    try:
        for asked in (12345, granule, granule + 1, mx):
            device.persisting_l2_limit = asked
            got = device.persisting_l2_limit
            assert got >= asked and got - asked < granule and got % granule == 0, (asked, got)
        device.persisting_l2_limit = 0
        assert device.persisting_l2_limit == 0
    finally:
        device.persisting_l2_limit = start
    assert device.persisting_l2_limit == start


def test_default_limit_is_what_the_process_found(device):
    assert device.default_persisting_l2_limit > 0  # not 0 on current drivers
    assert device.default_persisting_l2_limit == l2persist.Device(0).default_persisting_l2_limit


@pytest.mark.parametrize("value, exc, match", [
    (-1, ValueError, r"persisting_l2_limit: -1 bytes is outside \[0, "),
    (True, TypeError, "persisting_l2_limit"),
    (1.5, TypeError, "persisting_l2_limit"),
    ("1", TypeError, "persisting_l2_limit"),
    (None, TypeError, "persisting_l2_limit"),
])
def test_limit_bad_values(device, value, exc, match):
    start = device.persisting_l2_limit
    with pytest.raises(exc, match=match):
        device.persisting_l2_limit = value
    assert device.persisting_l2_limit == start


def test_limit_above_max_names_the_max(device):
    start = device.persisting_l2_limit
    mx = device.properties.persisting_l2_cache_max_size
    with pytest.raises(ValueError, match="persisting_l2_cache_max_size") as e:
        device.persisting_l2_limit = mx + 1
    assert str(mx) in str(e.value)
    assert device.persisting_l2_limit == start


def test_bad_index_names_the_count():
    n = l2persist.device_count()
    with pytest.raises(ValueError, match=f"has {n} CUDA device"):
        l2persist.Device(n)
    with pytest.raises(ValueError, match="valid indices"):
        l2persist.Device(-1)


def test_scope_default_is_the_guides_rule_and_restores(device):
    start = device.persisting_l2_limit
    p = device.properties
    want = min(int(0.75 * p.l2_cache_size), p.persisting_l2_cache_max_size)
    with device.persisting_l2() as granted:
        assert granted == device.persisting_l2_limit
        assert granted >= want and granted - want < device.persisting_l2_granule
    assert device.persisting_l2_limit == start


def test_scope_restores_through_an_exception(device):
    start = device.persisting_l2_limit
    with pytest.raises(KeyError):
        with device.persisting_l2(fraction=0.5):
            assert device.persisting_l2_limit != start or start >= \
                device.properties.persisting_l2_cache_max_size // 2
            raise KeyError("boom")
    assert device.persisting_l2_limit == start


def test_scope_arguments(device):
    start = device.persisting_l2_limit
    with device.persisting_l2(3 * device.persisting_l2_granule) as granted:
        assert granted == 3 * device.persisting_l2_granule
    with pytest.raises(TypeError, match="not both"):
        device.persisting_l2(1, fraction=0.5)
    with pytest.raises(ValueError, match=r"fraction: 1.5 is outside \[0, 1\]"):
        device.persisting_l2(fraction=1.5)
    scope = device.persisting_l2(0)
    with scope:
        pass
    with pytest.raises(RuntimeError, match="already entered"):
        with scope:
            pass
    assert device.persisting_l2_limit == start


def test_release_and_reset(device):
    start = device.persisting_l2_limit
    try:
        device.persisting_l2_limit = device.persisting_l2_granule
        l2persist.reset_persisting_l2(device)
        assert device.persisting_l2_limit == device.persisting_l2_granule  # reset keeps it
        device.release_persisting_l2()
        assert device.persisting_l2_limit == 0
    finally:
        device.persisting_l2_limit = start


def test_supports_persisting_l2(device):
    cc = device.properties.compute_capability
    assert device.supports_persisting_l2 is (cc >= (8, 0))


def test_cli_report_on_gpu(device):
    r = subprocess.run([sys.executable, "-m", "l2persist"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert device.properties.name in r.stdout and "persisting L2 max" in r.stdout
    j = subprocess.run([sys.executable, "-m", "l2persist", "--json", "--device", "0"],
                       capture_output=True, text=True, timeout=120)
    rep = json.loads(j.stdout)["reports"][0]
    assert rep["l2_cache_size"] == device.properties.l2_cache_size
    assert rep["persisting_l2_granule"] == device.persisting_l2_granule
    bad = subprocess.run([sys.executable, "-m", "l2persist", "--device", "99"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--device 99" in bad.stderr


def test_restore_persisting_l2_is_the_scopes_restore(device):
    """_core.restore_persisting_l2 (restore.c's one restore, for the tuner and the studies)
    puts the limit back and demotes persisting lines, like persisting_l2()'s exit."""
    if device.persisting_l2_source != "process":
        pytest.skip("the set-aside is an MPS server's here")
    start = device.persisting_l2_limit
    other = 2 * device.persisting_l2_granule if start != 2 * device.persisting_l2_granule \
        else 3 * device.persisting_l2_granule
    device.persisting_l2_limit = other
    try:
        assert device.persisting_l2_limit == other
    finally:
        granted = l2persist._core.restore_persisting_l2(device, start)
    assert granted == start == device.persisting_l2_limit
    with pytest.raises(ValueError, match=r"^limit: -1 is outside \["):
        l2persist._core.restore_persisting_l2(device, -1)
    assert device.persisting_l2_limit == start
