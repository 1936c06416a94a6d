"""Build l2persist._core from the C core, the CPython/NumPy glue and the CUDA kernels.

Every ``kernels/*.cu`` is compiled by nvcc into an object file (one ``-gencode`` per target
architecture plus PTX of the newest) and handed to the linker beside the C sources, the way
CuPy's build does it. The runtime is linked statically (``cudart_static``) so the module works
wherever the toolkit is, or is not, installed: the driver is found at run time, and a machine
with no driver gets ``cudaErrorInsufficientDriver`` from the first call, never an import error.

The toolkit: ``CUDA_HOME`` / ``CUDA_PATH``, else nvcc on ``PATH``, else NVIDIA's CUDA 13.0
wheels from PyPI, which the in-tree backend (``_backend/l2p_backend.py``) asks pip for when
neither is there; the rule is in ``_backend/l2p_toolkit.py``.

Environment:
  L2P_CUDA_ARCH   comma-separated targets, e.g. ``90``, ``80,90`` or ``90a`` (arch-specific
                  features); default: those of 80, 86, 89, 90, 100, 120 that this nvcc
                  supports (``nvcc --list-gpu-arch``), plus PTX of the newest, so the
                  driver can JIT for GPUs newer than the toolkit.
  L2P_BUILD_JOBS  how many nvcc processes run at once (default: the CPU count).
  CUDA_HOME / CUDA_PATH   where the toolkit is; otherwise nvcc is looked up on PATH.
  L2P_CUDA_FROM_PYPI=1    build with NVIDIA's wheels even where a toolkit is installed.
  L2P_BUILD_CACHE  where compiled kernel objects are cached (default
                  ``$XDG_CACHE_HOME/l2persist``, else ``~/.cache/l2persist``); ``0``: no cache.
                  An object is reused only when nvcc (version and binaries), every flag, the
                  runtime headers, the kernel source and every project header hash the same;
                  so a second ``pip install`` with nothing changed runs nvcc zero times.
  L2P_NVCC_LOG    a file that gets one line appended per nvcc run.

Progress (one line per kernel file) goes to stdout and, since pip hides that without ``-v``,
to the terminal (``/dev/tty``) when there is one. The fatbin is compressed
(-Xfatbin=-compress-all).
"""

import os
import re
import subprocess
import sys
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import ExecError, PlatformError

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_backend"))
import l2p_nvcc  # noqa: E402  (in-tree build helpers, shipped in the sdist)
import l2p_toolkit  # noqa: E402

# Persisting L2 needs compute capability 8.0: nothing older is built.
WANTED_ARCHS = ("80", "86", "89", "90", "100", "120")


def supported_archs(nvcc):
    """The real architectures this nvcc can target (CuPy also picks by toolkit)."""
    try:
        out = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {m for m in re.findall(r"compute_(\d+)", out)}


def cuda_archs(nvcc):
    text = os.environ.get("L2P_CUDA_ARCH", "").strip()
    if not text:
        have = supported_archs(nvcc)
        archs = tuple(a for a in WANTED_ARCHS if have is None or a in have)
        if not archs:
            raise RuntimeError(f"{nvcc} supports none of {', '.join(WANTED_ARCHS)}")
        return archs
    archs = tuple(a.strip().replace("sm_", "").replace("compute_", "").replace(".", "")
                  for a in text.split(",") if a.strip())
    for a in archs:
        if not re.fullmatch(r"\d+[af]?", a):
            raise RuntimeError(f"L2P_CUDA_ARCH: {a!r} is not a target such as 90 or 90a")
    return archs


def gencode_flags(archs):
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    # PTX of the newest plain target (arch-specific 'a' targets have no forward-compatible PTX).
    plain = [a for a in archs if a.isdigit()]
    if plain:
        newest = max(plain, key=int)
        flags.append(f"-gencode=arch=compute_{newest},code=compute_{newest}")
    return flags


class CudaBuildExt(build_ext):
    """build_ext that compiles the .cu sources with nvcc and links their objects."""

    def build_extension(self, ext):
        # setuptools prints a DistutilsError as one "error: ..." line; anything else would end
        # under pages of traceback (nvcc's own messages are printed above either way).
        try:
            self.build_cuda_extension(ext)
        except RuntimeError as e:
            raise PlatformError(str(e)) from None
        except subprocess.CalledProcessError as e:
            raise ExecError(f"l2persist: nvcc failed (exit {e.returncode}): "
                            f"{' '.join(map(str, e.cmd[:3]))} ...") from None

    def build_cuda_extension(self, ext):
        cuda_home = l2p_toolkit.find_toolkit()
        cu_sources = [s for s in ext.sources if s.endswith(".cu")]
        ext.sources = [s for s in ext.sources if not s.endswith(".cu")]
        ext.include_dirs += l2p_toolkit.include_dirs(cuda_home)
        ext.library_dirs += l2p_toolkit.library_dirs(cuda_home)
        if cuda_home == l2p_toolkit.machine_toolkit():
            # Where CUPTI is looked for at run time after the usual library paths (a toolkit
            # from PyPI sits in a temporary build environment: no use at run time).
            ext.define_macros.append(("L2P_CUDA_HOME", '"%s"' % cuda_home))
        objects = self.compile_cuda(cuda_home, cu_sources, ext.include_dirs)
        ext.extra_objects = list(ext.extra_objects or []) + objects
        ext.depends = list(ext.depends) + [self.config_stamp(objects + [repr(ext.define_macros)])]
        super().build_extension(ext)

    def config_stamp(self, lines):
        """A file that changes when the kernel objects or macros do: setuptools relinks a
        module only when a dependency is newer, and cached objects keep their old mtimes, so
        without it a build for other targets (L2P_CUDA_ARCH) would keep the old module."""
        path = os.path.join(self.build_temp, "l2p-config.txt")
        text = "\n".join(lines) + "\n"
        os.makedirs(self.build_temp, exist_ok=True)
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)
        return path

    def compile_cuda(self, cuda_home, sources, include_dirs):
        nvcc = os.path.join(cuda_home, "bin", "nvcc")
        archs = cuda_archs(nvcc)
        flags = ["-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xcompiler", "-Wall",
                 "--expt-relaxed-constexpr", "-Xfatbin=-compress-all", *gencode_flags(archs)]
        # NumPy's headers are the C glue's, not the kernels': they stay out of the cache key.
        kernel_includes = [os.path.abspath(d) for d in include_dirs if d != numpy_include()]
        compiler = l2p_nvcc.KernelCompiler(nvcc, flags, HERE, kernel_includes,
                                           os.path.join(self.build_temp, "kernels"), self.force)
        jobs = int(os.environ.get("L2P_BUILD_JOBS", os.cpu_count() or 1))
        return compiler.compile_all(sources, jobs, f"{', '.join('sm_' + a for a in archs)} "
                                                   f"with {nvcc}")


def numpy_include():
    import numpy
    return numpy.get_include()


sources = sorted(glob("csrc/core/*.c")) + sorted(glob("csrc/py/*.c")) + sorted(glob("kernels/*.cu"))

core = Extension(
    "l2persist._core",
    sources=sources,
    include_dirs=["csrc/core", "csrc/py", "kernels", "csrc/cupti_shim", numpy_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")],
    libraries=["cudart_static", "dl", "rt", "pthread", "stdc++", "m"],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type", "-Werror=implicit-function-declaration",
                        "-O2"],
)

setup(ext_modules=[core], cmdclass={"build_ext": CudaBuildExt})
