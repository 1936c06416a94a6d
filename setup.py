"""Build l2persist._core from the C core, the CPython/NumPy glue and the CUDA kernels.

Every ``kernels/*.cu`` is compiled by nvcc into an object file (one ``-gencode`` per target
architecture plus PTX of the newest) and handed to the linker beside the C sources, the way
CuPy's build does it. The runtime is linked statically (``cudart_static``) so the module works
wherever the toolkit is, or is not, installed: the driver is found at run time, and a machine
with no driver gets ``cudaErrorInsufficientDriver`` from the first call, never an import error.

Environment:
  L2P_CUDA_ARCH   comma-separated targets, e.g. ``90``, ``80,90`` or ``90a`` (arch-specific
                  features); default: those of 80, 86, 89, 90, 100, 120 that this nvcc
                  supports (``nvcc --list-gpu-arch``), plus PTX of the newest, so the
                  driver can JIT for GPUs newer than the toolkit.
  L2P_BUILD_JOBS  how many nvcc processes run at once (default: the CPU count).
  CUDA_HOME / CUDA_PATH   where the toolkit is; otherwise nvcc is looked up on PATH.

Kernel objects are cached in build/ under a name keyed on the nvcc version and every flag
(targets included), so changing L2P_CUDA_ARCH rebuilds instead of reusing old GPU code. The
fatbin is compressed (-Xfatbin=-compress-all).
"""

import hashlib
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Persisting L2 needs compute capability 8.0: nothing older is built.
WANTED_ARCHS = ("80", "86", "89", "90", "100", "120")
HERE = os.path.dirname(os.path.abspath(__file__))


def find_cuda_home():
    for var in ("CUDA_HOME", "CUDA_PATH"):
        path = os.environ.get(var)
        if path and os.path.exists(os.path.join(path, "bin", "nvcc")):
            return path
    nvcc = shutil.which("nvcc")
    if nvcc:
        return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    raise RuntimeError(
        "l2persist needs the CUDA toolkit to build: set CUDA_HOME (or CUDA_PATH) to it, "
        "or put nvcc on PATH")


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


def nvcc_version(nvcc):
    try:
        return subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return ""


class CudaBuildExt(build_ext):
    """build_ext that compiles the .cu sources with nvcc and links their objects."""

    def build_extension(self, ext):
        cuda_home = find_cuda_home()
        cu_sources = [s for s in ext.sources if s.endswith(".cu")]
        ext.sources = [s for s in ext.sources if not s.endswith(".cu")]
        ext.include_dirs.append(os.path.join(cuda_home, "include"))
        for lib in ("lib64", os.path.join("targets", "x86_64-linux", "lib"), "lib"):
            path = os.path.join(cuda_home, lib)
            if os.path.isdir(path):
                ext.library_dirs.append(path)
        # Where CUPTI is looked for at run time after the usual library paths.
        ext.define_macros.append(("L2P_CUDA_HOME", '"%s"' % cuda_home))
        objects = self.compile_cuda(cuda_home, cu_sources, ext.include_dirs)
        ext.extra_objects = list(ext.extra_objects or []) + objects
        super().build_extension(ext)

    def compile_cuda(self, cuda_home, sources, include_dirs):
        nvcc = os.path.join(cuda_home, "bin", "nvcc")
        out_dir = os.path.join(self.build_temp, "kernels")
        os.makedirs(out_dir, exist_ok=True)
        archs = cuda_archs(nvcc)
        flags = ["-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xcompiler", "-Wall",
                 "--expt-relaxed-constexpr", "-Xfatbin=-compress-all", *gencode_flags(archs)]
        flags += [f"-I{d}" for d in include_dirs]
        key = hashlib.sha256("\0".join([nvcc, nvcc_version(nvcc), *flags]).encode()).hexdigest()[:12]
        headers = glob(os.path.join(HERE, "kernels", "*.h*")) + glob(
            os.path.join(HERE, "csrc", "core", "*.h"))
        print(f"l2persist: nvcc for {', '.join('sm_' + a for a in archs)} "
              f"({len(sources)} kernel files)", flush=True)
        done = []

        def one(src):
            obj = os.path.join(out_dir, f"{os.path.basename(src)}.{key}.o")
            fresh = os.path.exists(obj) and os.path.getmtime(obj) >= max(
                os.path.getmtime(p) for p in [src] + headers)
            if self.force or not fresh:
                subprocess.check_call([nvcc, "-c", src, "-o", obj, *flags])
            done.append(src)
            print(f"  [{len(done)}/{len(sources)}] {os.path.basename(src)}"
                  f"{' (cached)' if fresh and not self.force else ''}", flush=True)
            return obj

        jobs = int(os.environ.get("L2P_BUILD_JOBS", os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, sources))


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
