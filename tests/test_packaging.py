"""The build's own rules, without a compiler: where the toolkit comes from, the kernel-object
cache (a fake nvcc counts its runs) and tools/test's floor on the number of tests."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_backend"))
import l2p_nvcc  # noqa: E402
import l2p_toolkit  # noqa: E402

FAKE_NVCC = """#!/bin/sh
# Writes its arguments as the "object", so flags and sources decide the bytes.
if [ "$1" = "--version" ]; then echo "fake nvcc, release 13.0"; exit 0; fi
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
echo "$@" > "$out"
echo run >> "$(dirname "$0")/runs"
"""


def _toolkit(tmp_path, name="cuda"):
    root = tmp_path / name
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(FAKE_NVCC)
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return root


@pytest.fixture(autouse=True)
def _own_build_env(monkeypatch):
    """The caller's cache and nvcc log (CI sets both) are not the fake nvcc's to use."""
    for var in ("L2P_NVCC_LOG", "L2P_BUILD_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def project(tmp_path):
    """A project tree with two kernels and a header, and a cache of its own."""
    src = tmp_path / "proj"
    (src / "kernels").mkdir(parents=True)
    (src / "kernels" / "a.cu").write_text('#include "h.cuh"\n')
    (src / "kernels" / "b.cu").write_text('#include "h.cuh"\n')
    (src / "kernels" / "h.cuh").write_text("// v1\n")
    return src


def _compile(project, nvcc, monkeypatch, cache, flags=("-O3",), force=False):
    monkeypatch.setenv("L2P_BUILD_CACHE", str(cache))
    monkeypatch.chdir(project)
    c = l2p_nvcc.KernelCompiler(str(nvcc), list(flags), str(project),
                                [str(project / "kernels")], str(project / "tmpbuild"), force)
    objects = c.compile_all(["kernels/a.cu", "kernels/b.cu"], 2, "test")
    assert all(os.path.exists(o) for o in objects)
    return c.nvcc_runs, objects


def test_second_build_runs_nvcc_zero_times(tmp_path, project, monkeypatch):
    nvcc = _toolkit(tmp_path) / "bin" / "nvcc"
    cache = tmp_path / "cache"
    runs, objects = _compile(project, nvcc, monkeypatch, cache)
    assert runs == 2 and all(o.startswith(str(cache)) for o in objects)
    assert _compile(project, nvcc, monkeypatch, cache) == (0, objects)
    # The same sources elsewhere (an unpacked sdist) find the same objects.
    moved = tmp_path / "moved"
    project.rename(moved)
    assert _compile(moved, nvcc, monkeypatch, cache) == (0, objects)


def test_cache_key_follows_headers_flags_and_compiler(tmp_path, project, monkeypatch):
    nvcc = _toolkit(tmp_path) / "bin" / "nvcc"
    cache = tmp_path / "cache"
    _, first = _compile(project, nvcc, monkeypatch, cache)
    (project / "kernels" / "h.cuh").write_text("// v2\n")       # a header both include
    runs, second = _compile(project, nvcc, monkeypatch, cache)
    assert runs == 2 and set(second).isdisjoint(first)
    runs, _ = _compile(project, nvcc, monkeypatch, cache, flags=("-O2",))
    assert runs == 2
    other = _toolkit(tmp_path, "other") / "bin" / "nvcc"
    other.write_text(FAKE_NVCC + "# another build of nvcc\n")
    runs, _ = _compile(project, other, monkeypatch, cache)
    assert runs == 2
    # Touching a file (mtime only) changes nothing.
    os.utime(project / "kernels" / "h.cuh")
    assert _compile(project, nvcc, monkeypatch, cache)[0] == 0


def test_cache_off(tmp_path, project, monkeypatch):
    nvcc = _toolkit(tmp_path) / "bin" / "nvcc"
    monkeypatch.setenv("L2P_BUILD_CACHE", "0")
    assert l2p_nvcc.cache_dir() is None
    for _ in range(2):
        runs, objects = _compile(project, nvcc, monkeypatch, "0")
        assert runs == 2 and all(o.startswith(str(project / "tmpbuild")) for o in objects)


def test_cache_dir_default(monkeypatch, tmp_path):
    monkeypatch.delenv("L2P_BUILD_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert l2p_nvcc.cache_dir() == str(tmp_path / "l2persist")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert l2p_nvcc.cache_dir() == str(tmp_path / "home" / ".cache" / "l2persist")


def test_nvcc_log_has_one_line_per_run(tmp_path, project, monkeypatch):
    nvcc = _toolkit(tmp_path) / "bin" / "nvcc"
    log = tmp_path / "nvcc.log"
    monkeypatch.setenv("L2P_NVCC_LOG", str(log))
    _compile(project, nvcc, monkeypatch, tmp_path / "cache")
    _compile(project, nvcc, monkeypatch, tmp_path / "cache")
    assert len(log.read_text().splitlines()) == 2


def test_toolkit_rule(tmp_path, monkeypatch):
    root = _toolkit(tmp_path)
    monkeypatch.delenv("L2P_CUDA_FROM_PYPI", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(root))
    assert l2p_toolkit.machine_toolkit() == str(root)
    assert l2p_toolkit.build_requirements() == []
    # No toolkit anywhere: the build asks pip for NVIDIA's wheels ...
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert l2p_toolkit.machine_toolkit() is None
    reqs = l2p_toolkit.build_requirements()
    assert any(r.startswith("nvidia-cuda-nvcc==13.") for r in reqs)
    assert any(r.startswith("nvidia-cuda-runtime==13.") for r in reqs)
    # ... and finds nvcc where they unpack, on sys.path.
    site = tmp_path / "site"
    wheel_root = site / "nvidia" / "cu13"
    (wheel_root / "bin").mkdir(parents=True)
    (wheel_root / "bin" / "nvcc").write_text(FAKE_NVCC)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nothing"), str(site)])
    assert l2p_toolkit.find_toolkit() == str(wheel_root)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nothing")])
    with pytest.raises(RuntimeError, match="no CUDA toolkit found"):
        l2p_toolkit.find_toolkit()
    # L2P_CUDA_FROM_PYPI=1 ignores the machine's toolkit.
    monkeypatch.setenv("CUDA_HOME", str(root))
    monkeypatch.setenv("L2P_CUDA_FROM_PYPI", "1")
    assert l2p_toolkit.machine_toolkit() is None


def _tools_test(*args, **env):
    """tools/test's floor logic, without its C tests (they run in their own step: on a GPU
    machine each call would time the C timing tests again)."""
    env = {"L2P_SKIP_CTEST": "1", **env}
    return subprocess.run(["bash", str(ROOT / "tools" / "test"), *args], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=300)


def test_tools_test_runs_the_c_tests_unless_told_not_to(tmp_path):
    """The C tests are part of tools/test; L2P_SKIP_CTEST=1 leaves only them out."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "make").write_text("#!/bin/sh\necho fake-make-ran >&2\nexit 3\n")
    (fake / "make").chmod(0o755)
    path = f"{fake}{os.pathsep}{os.environ['PATH']}"
    r = _tools_test("tests/test_packaging.py", "-k", "cache_dir_default", PATH=path,
                    L2P_SKIP_CTEST="")
    assert r.returncode != 0 and "fake-make-ran" in r.stderr
    assert "the C tests failed" in r.stderr
    r = _tools_test("tests/test_packaging.py", "-k", "cache_dir_default", PATH=path)
    assert r.returncode == 0 and "fake-make-ran" not in r.stderr, r.stderr


def test_tools_test_fails_when_no_test_ran():
    r = _tools_test("tests/test_packaging.py", "-k", "no_such_test_zzz")
    assert r.returncode != 0
    assert "collected no tests" in r.stderr.strip().splitlines()[-1]


def test_tools_test_fails_below_the_floor():
    r = _tools_test("tests/test_packaging.py", "-k", "cache_dir_default", L2P_MIN_TESTS="2")
    assert r.returncode != 0
    assert "only 1 tests passed, fewer than the floor of 2" in r.stderr
    r = _tools_test("tests/test_packaging.py", "-k", "cache_dir_default", L2P_MIN_TESTS="1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tools/test: 1 tests passed (floor 1)" in r.stdout


def test_tools_test_floor_counts_only_passed_tests(tmp_path):
    """Skipped tests check nothing: three that skip and one that passes fall below a floor of
    2, and the pass alone meets a floor of 1."""
    f = tmp_path / "test_floor_probe.py"
    f.write_text("import pytest\n\n"
                 "@pytest.mark.parametrize('i', range(3))\n"
                 "def test_skips(i):\n    pytest.skip('no reason to run')\n\n"
                 "def test_passes():\n    pass\n")
    r = _tools_test(str(f), L2P_MIN_TESTS="2")
    assert r.returncode != 0, r.stdout + r.stderr
    assert "only 1 tests passed, fewer than the floor of 2" in r.stderr
    r = _tools_test(str(f), "-k", "skips", L2P_MIN_TESTS="1")      # all skipped: a failure
    assert r.returncode != 0 and "only 0 tests passed" in r.stderr, r.stdout + r.stderr
    r = _tools_test(str(f), L2P_MIN_TESTS="1")
    assert r.returncode == 0 and "1 tests passed (floor 1)" in r.stdout, r.stdout + r.stderr


def test_unusable_cache_builds_without_it(tmp_path, project, monkeypatch):
    nvcc = _toolkit(tmp_path) / "bin" / "nvcc"
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    runs, objects = _compile(project, nvcc, monkeypatch, blocker / "cache")
    assert runs == 2 and all(o.startswith(str(project / "tmpbuild")) for o in objects)


def test_pytest_plugin_entry_point_is_declared():
    """`pytest --l2p-guard` works wherever l2persist is installed: the plugin is a pytest11
    entry point, named by its module so that a conftest's pytest_plugins or -p naming the
    module loads the same plugin once (another name: "Plugin already registered")."""
    import tomllib
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["entry-points"]["pytest11"] == {
        "l2persist.pytest_plugin": "l2persist.pytest_plugin"}


def test_pytest_plugin_loads_outside_the_repo_once(tmp_path):
    """From an installed l2persist: a test file elsewhere runs under --l2p-guard with no -p,
    and a conftest that also names the plugin does not load it twice."""
    from importlib import metadata
    try:
        eps = metadata.distribution("l2persist").entry_points
    except metadata.PackageNotFoundError:
        pytest.skip("l2persist is not installed (pip install -e .): no entry points to load")
    assert any(ep.group == "pytest11" and ep.name == "l2persist.pytest_plugin" for ep in eps), \
        "the installed l2persist lacks the pytest11 entry point: reinstall it (pip install -e .)"
    (tmp_path / "test_mine.py").write_text(
        "import pytest\n\n@pytest.mark.gpu\ndef test_on_gpu():\n    pass\n\n"
        "def test_anywhere():\n    pass\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS")}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--l2p-guard", "test_mine.py"]
    for conftest in ("", 'pytest_plugins = ["l2persist.pytest_plugin"]\n'):
        (tmp_path / "conftest.py").write_text(conftest)
        r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=env,
                           timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "already registered" not in r.stdout + r.stderr
        assert "2 passed" in r.stdout or "1 passed, 1 skipped" in r.stdout, r.stdout


def test_pytest_plugin_asks_cuda_only_for_gpu_tests(monkeypatch):
    """Loaded in every pytest run of the environment, the plugin leaves CUDA alone in a run
    without gpu tests (another project's: the runtime would start in its process)."""
    import l2persist
    from l2persist import pytest_plugin

    class Item:
        def __init__(self, *marks):
            self.keywords = dict.fromkeys(marks, True)
            self.added = []

        def add_marker(self, m):
            self.added.append(m)

    def no_cuda_here():
        raise AssertionError("CUDA was asked")

    monkeypatch.setattr(l2persist, "no_device_reason", no_cuda_here)
    pytest_plugin.pytest_collection_modifyitems(None, [Item("slow"), Item()])
    with pytest.raises(AssertionError, match="CUDA was asked"):
        pytest_plugin.pytest_collection_modifyitems(None, [Item("gpu")])


def _defined_functions(path):
    """The external functions a C file defines (a definition starts a line, not static)."""
    import re
    return set(re.findall(r"^(?!static\b)[A-Za-z_][\w \*]*?\b(l2p_\w+)\s*\([^;]*?\)\s*\{",
                          path.read_text(), re.M | re.S))


def test_type_files_do_not_depend_on_module_c():
    """module.c registers every type; the type files reach the module state through state.c.
    A function of module.c used by a type file would close a circle (module.c -> type file ->
    module.c) through every file of csrc/py."""
    py = ROOT / "csrc" / "py"
    mine = _defined_functions(py / "module.c")
    assert "l2p_state_from_type" in _defined_functions(py / "state.c")
    for f in sorted(py.glob("*.[ch]")):
        if f.name == "module.c":
            continue
        text = f.read_text()
        used = sorted(name for name in mine if name in text)
        assert not used, f"{f.name} uses {used}, defined in module.c"
    # and state.c depends on no other file of the extension
    state = (py / "state.c").read_text()
    others = set().union(*(_defined_functions(f) for f in py.glob("*.c") if f.name != "state.c"))
    assert not sorted(name for name in others if name in state)


def test_manifest_names_only_folders_that_exist():
    """Every graft / prune / include of MANIFEST.in names something in the tree (a missing
    folder warns 'no directories found matching' at every sdist build)."""
    for line in (ROOT / "MANIFEST.in").read_text().splitlines():
        words = line.split("#")[0].split()
        if not words:
            continue
        if words[0] == "graft":
            assert (ROOT / words[1]).is_dir(), line
        elif words[0] == "include":
            assert all((ROOT / w).exists() for w in words[1:]), line


def test_build_wheel_links_against_an_old_glibc():
    """tools/build-wheel links the module against glibc 2.28's symbol versions (zig cc from
    the ziglang wheel as setuptools' LDSHARED) and asks auditwheel for manylinux_2_28: a link
    against this machine's glibc (2.34+: pthread_*, dl* at GLIBC_2.34) could only be tagged
    for it."""
    text = (ROOT / "tools" / "build-wheel").read_text()
    assert "GLIBC=${GLIBC:-2.28}" in text
    assert 'pip" install -q ziglang' in text
    assert '"$ZIG" cc -target $ARCH-linux-gnu.$GLIBC' in text
    assert 'export LDSHARED="$WORK/zig-ld -shared"' in text
    assert 'PLAT=(--plat "manylinux_${GLIBC/./_}_$ARCH")' in text
    r = subprocess.run(["bash", "-n", str(ROOT / "tools" / "build-wheel")], capture_output=True)
    assert r.returncode == 0, r.stderr
