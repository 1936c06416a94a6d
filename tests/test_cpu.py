"""What works without a GPU: import, device counting, errors, policy arithmetic, statistics,
the CLI."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import l2persist
from l2persist import _core

no_gpu = pytest.mark.skipif(l2persist.is_available(), reason="checks the no-GPU behaviour")


def test_import_and_counts_never_raise():
    n = l2persist.device_count()
    assert isinstance(n, int) and n >= 0
    assert l2persist.is_available() is (n > 0)
    assert (l2persist.no_device_reason() is None) is (n > 0)


def test_exception_hierarchy():
    assert issubclass(l2persist.CudaError, RuntimeError)
    assert issubclass(l2persist.CudaMemoryError, l2persist.CudaError)
    assert issubclass(l2persist.CudaMemoryError, MemoryError)
    assert issubclass(l2persist.NotSupportedError, l2persist.CudaError)
    assert issubclass(l2persist.NoDeviceError, l2persist.CudaError)


@no_gpu
@pytest.mark.parametrize("make", [
    lambda: l2persist.Device(0),
    lambda: l2persist.empty(4),
    lambda: l2persist.Stream(),
    lambda: l2persist.reset_persisting_l2(),
])
def test_no_device_error_names_the_reason(make):
    with pytest.raises(l2persist.NoDeviceError) as e:
        make()
    assert "no CUDA device" in str(e.value)
    assert e.value.name.startswith("cudaError")
    assert isinstance(e.value.code, int) and e.value.code != 0


def test_device_index_types():
    with pytest.raises(TypeError, match="index"):
        l2persist.Device("0")
    with pytest.raises(TypeError, match="index"):
        l2persist.Device(True)


def test_bad_device_index_names_the_count():
    n = l2persist.device_count()
    err = ValueError if n else l2persist.NoDeviceError
    with pytest.raises(err) as e:
        l2persist.Device(n + 3)
    if n:
        assert f"has {n} CUDA device" in str(e.value)


def test_guide_sharing_arithmetic():
    # The guide: two 16 KB windows on a 16 KB set-aside get hitRatio 0.5 each.
    assert l2persist.plan_hit_ratios([16384, 16384], [1, 1], 16384) == [(16384, 0.5),
                                                                        (16384, 0.5)]


def test_plan_hit_ratios_water_fills_and_respects_the_budget(rng):
    for _ in range(50):
        k = int(rng.integers(1, 8))
        sizes = [int(s) for s in rng.integers(0, 1 << 24, k)]
        weights = [float(w) for w in rng.random(k) + 0.01]
        set_aside = int(rng.integers(0, 1 << 25))
        max_window = int(rng.integers(1, 1 << 24))
        plan = l2persist.plan_hit_ratios(sizes, weights, set_aside, max_window)
        nb = np.array([p[0] for p in plan], dtype=float)
        r = np.array([p[1] for p in plan])
        assert np.all(nb == np.minimum(sizes, max_window))
        assert np.all((r >= 0) & (r <= 1))
        used = float(np.sum(nb * r))
        assert used <= set_aside * (1 + 1e-9) + 1e-6
        # Either every window is full, or the set-aside is used up.
        if not np.all((r == 1) | (nb == 0)):
            assert used == pytest.approx(min(set_aside, nb.sum()), rel=1e-9)


@pytest.mark.parametrize("weights, match", [([-1, 1], "weight"), ([0, 0], "weight")])
def test_plan_hit_ratios_bad_weights(weights, match):
    with pytest.raises(ValueError, match=match):
        l2persist.plan_hit_ratios([100, 100], weights, 100)


def test_default_set_aside_is_the_guides_rule():
    assert _core.default_set_aside(62914560, 39321600) == 39321600          # H200
    assert _core.default_set_aside(41943040, 31457280) == 31457280          # A100
    assert _core.default_set_aside(4000, 10000) == 3000


def test_stats_match_numpy(rng):
    x = rng.random(101) * 5
    s = _core.stats(list(x))
    assert s["median"] == pytest.approx(np.median(x))
    assert s["q1"] == pytest.approx(np.percentile(x, 25))
    assert s["q3"] == pytest.approx(np.percentile(x, 75))
    assert s["stdev"] == pytest.approx(np.std(x, ddof=1))
    assert s["min"] == x.min() and s["max"] == x.max()
    t = l2persist.Timing.from_samples(list(x))
    assert t.iqr == pytest.approx(np.percentile(x, 75) - np.percentile(x, 25))
    with pytest.raises(ValueError, match="samples"):
        _core.stats([])


def test_access_property_values_are_cudas():
    assert [int(p) for p in l2persist.AccessProperty] == [0, 1, 2]
    assert l2persist.AccessProperty.PERSISTING.name == "PERSISTING"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "l2persist", *args], capture_output=True,
                          text=True, timeout=120)


@no_gpu
def test_cli_without_gpu_says_so_and_exits_0():
    r = _cli()
    assert r.returncode == 0, r.stderr
    assert "No CUDA device was found" in r.stdout
    assert "hit_ratio=0.50" in r.stdout
    assert "| 9 threads, non-caching | efficiency 56.25 |" in r.stdout
    assert _cli("--require-gpu").returncode == 2
    info = json.loads(_cli("--json").stdout)
    assert info["devices"] == 0 and info["reason"]["name"].startswith("cudaError")


def test_human_bytes():
    assert l2persist.human_bytes(62914560) == "60 MiB"
    assert l2persist.human_bytes(39321600) == "37.50 MiB"
    assert l2persist.human_bytes(12) == "12 B"


def test_seed_map_matches_this_libc_when_glibc():
    import ctypes
    import ctypes.util
    import platform
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the study's map is glibc's rand()")
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.srand(0)
    want = [libc.rand() % 1000 for _ in range(20000)]
    assert l2persist.kernels.seed_map(20000, 1000).tolist() == want
    with pytest.raises(ValueError, match="range"):
        l2persist.kernels.seed_map(10, 0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(load="ldg"), "load: 'ldg' is not one of default, ca, cg"),
    (dict(store="st"), "store: 'st' is not one of wb, cg, cs, wt"),
    (dict(width=3), "width: 3 is not one of 1, 2, 4, 8, 16"),
    (dict(threads=0), r"threads: 0 is outside \[1, 1024\]"),
])
def test_kernel_arguments_checked_before_any_device_work(kwargs, match):
    with pytest.raises(ValueError, match=match):
        l2persist.kernels.pattern(None, None, **kwargs)


def test_counter_names_need_no_gpu():
    names = l2persist.counter_names()
    assert names["l2_hit_rate"] == "lts__t_sector_hit_rate.pct"
    assert names["global_load_efficiency"] == \
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"
    ok, why = l2persist.counters_available()
    assert isinstance(ok, bool) and (ok or "CUPTI" in why)


@no_gpu
def test_measure_without_gpu_is_no_device_error():
    with pytest.raises(l2persist.NoDeviceError):
        l2persist.measure(lambda: None, ["gpu_time_ns"])


def test_device_memory_is_refused_as_a_stream():
    class Pointer:  # a CuPy MemoryPointer shape: .ptr and .mem
        ptr, mem = 4096, None

    class Array:
        ptr = 4096
        __cuda_array_interface__ = {"shape": (1,), "typestr": "<f4", "data": (4096, False),
                                    "version": 3}

    for obj in (Pointer(), Array()):
        with pytest.raises(TypeError, match="is device memory, not a stream"):
            l2persist.Stream(wrap=obj)


def test_bare_int_stream_handles_are_refused():
    # A wrong raw handle would crash the driver at the launch; only 0, 1, 2 are ints.
    for h in (3, 12345, 2**40, -1):
        with pytest.raises(ValueError, match="bare int handle"):
            l2persist.Stream(wrap=h)


def test_argument_name_is_added_without_losing_the_cuda_details():
    class Foreign:  # a CAI producer whose pointer the runtime is asked about
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False),
                                    "version": 3}

    with pytest.raises((l2persist.CudaError, ValueError)) as info:
        l2persist.kernels.scale_shift(Foreign())
    assert str(info.value).startswith("data: ")
    if isinstance(info.value, l2persist.CudaError):
        assert info.value.call == "cudaPointerGetAttributes" and info.value.code > 0


def test_cli_runs_the_model_study_and_saves_what_loads_back(tmp_path):
    import subprocess
    import sys
    from l2persist.results import Results
    j, p, c = tmp_path / "c.json", tmp_path / "c.png", tmp_path / "c.csv"
    out = subprocess.run([sys.executable, "-m", "l2persist", "run", "coalescing", "--quick",
                          "--json", str(j), "--plot", str(p), "--csv", str(c)],
                         capture_output=True, text=True, check=True).stdout
    assert "sectors" in out and p.stat().st_size > 1000 and c.read_text().startswith("size,")
    r = Results.load(j)
    assert r.study == "coalescing" and len(r) > 0 and Results.from_json(r.to_json()) == r
    listing = subprocess.run([sys.executable, "-m", "l2persist", "list"], capture_output=True,
                             text=True, check=True).stdout
    assert "gather" in listing and "runs anywhere" in listing


def test_metadata_names_the_revision_it_was_told(monkeypatch):
    from l2persist.results import collect_metadata
    monkeypatch.setenv("L2P_GIT_REVISION", "abc123def456+dirty")
    assert collect_metadata()["git_revision"] == "abc123def456+dirty"
    monkeypatch.delenv("L2P_GIT_REVISION")
    rev = collect_metadata()["git_revision"]
    # without it, the checkout's own: HEAD's first 12 hex digits, "+dirty" when a tracked
    # file differs from HEAD (asked of git here in other words: diff --quiet)
    import shutil
    from pathlib import Path
    root = Path(l2persist.__file__).resolve().parent.parent
    if not (root / ".git").exists() or shutil.which("git") is None:
        assert rev is None
        return
    git = ["git", "-C", str(root)]
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:                 # a .git that names a repository not here
        assert rev is None
        return
    dirty = subprocess.run(git + ["diff", "--quiet", "HEAD"], capture_output=True).returncode
    sha = head.stdout.strip()
    assert len(sha) == 40 and rev == sha[:12] + ("+dirty" if dirty else "")


def _libcuda_loads():
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@no_gpu
def test_one_no_driver_reason_everywhere():
    """The reason says what is true here (no driver, or a driver too old), in the same words
    in no_device_reason(), NoDeviceError and the report; never "driver version is
    insufficient" when there is no driver at all."""
    import subprocess
    import sys
    code, name, reason = l2persist._core.no_device_reason()
    if name == "cudaErrorInsufficientDriver":
        if _libcuda_loads():
            assert reason.startswith("the NVIDIA driver is too old") and "CUDA" in reason
        else:
            assert reason.startswith("no NVIDIA driver is installed")
    assert "insufficient" not in reason
    assert l2persist.no_device_reason() == f"{reason} ({name})"
    with pytest.raises(l2persist.NoDeviceError) as e:
        l2persist.Device(0)
    assert reason in str(e.value)
    r = subprocess.run([sys.executable, "-m", "l2persist"], capture_output=True, text=True)
    assert reason in r.stdout + r.stderr


def test_cupti_from_the_pypi_wheel_is_found(tmp_path, monkeypatch):
    """An install with only a driver gets CUPTI from nvidia-cuda-cupti (nvidia/cu13/lib): the
    counters point the core's loader at it, and never override a path the user set."""
    from l2persist import counters
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcupti.so.13").write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    importlib.invalidate_caches()
    assert counters.wheel_cupti() == str(lib / "libcupti.so.13")
    monkeypatch.delenv("L2P_CUPTI_LIBRARY", raising=False)
    counters._point_at_wheel_cupti()
    assert os.environ["L2P_CUPTI_LIBRARY"] == str(lib / "libcupti.so.13")
    monkeypatch.setenv("L2P_CUPTI_LIBRARY", "/mine/libcupti.so")
    counters._point_at_wheel_cupti()
    assert os.environ["L2P_CUPTI_LIBRARY"] == "/mine/libcupti.so"


def test_the_cupti_already_in_the_process_is_the_one_loaded(tmp_path):
    """PyTorch maps its own libcupti (libcupti.so.12 from NVIDIA's wheel): the core uses that
    copy rather than load a second CUPTI beside it (two copies in one process attach to one
    driver). A stand-in library named and sonamed libcupti.so.12 is mapped first; the core
    then finds it lacking the Range Profiler instead of loading the toolkit's. With the
    diagnostic switch L2P_CUPTI_IGNORE_MAPPED=1 the core loads by path as before."""
    import shutil
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in library")
    src = tmp_path / "fake.c"
    src.write_text("int cuptiGetVersion(unsigned *v) { *v = 1; return 0; }\n")
    fake = tmp_path / "libcupti.so.12"
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcupti.so.12", "-o", str(fake),
                    str(src)], check=True)
    code = ("import ctypes, sys, l2persist\n"
            f"ctypes.CDLL({str(fake)!r})\n"
            "ok, why = l2persist._core.counters_available()\n"
            "maps = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libcupti' in l})\n"
            "print(repr((ok, why, maps)))\n")

    def run(**env):
        e = {k: v for k, v in os.environ.items() if k != "L2P_CUPTI_LIBRARY"}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**e, **env}, check=True)
        return eval(r.stdout.strip().splitlines()[-1])  # noqa: S307 - our own repr

    ok, why, maps = run()
    assert not ok and "CUPTI lacks" in why, why
    assert maps == [str(fake)], maps
    toolkit = [p for p in ("/usr/local/cuda/lib64/libcupti.so",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so") if os.path.exists(p)]
    if toolkit:
        ok, why, maps = run(L2P_CUPTI_IGNORE_MAPPED="1", L2P_CUPTI_LIBRARY=toolkit[0])
        assert ok and len(maps) == 2 and str(fake) in maps, (ok, why, maps)
