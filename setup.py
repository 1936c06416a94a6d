"""Build l2persist._core from the C core, the CPython/NumPy glue and the CUDA kernels.

Every ``kernels/*.cu`` is compiled by nvcc into an object file (one ``-gencode`` per target
architecture plus PTX of the newest) and handed to the linker beside the C sources, the way
CuPy's build does it. The runtime is linked statically (``cudart_static``) so the module works
wherever the toolkit is, or is not, installed: the driver is found at run time, and a machine
with no driver gets ``cudaErrorInsufficientDriver`` from the first call, never an import error.

Environment:
  L2P_CUDA_ARCH   comma-separated compute capabilities to build for, e.g. ``90`` or ``80,90``
                  (default: 80,86,89,90,100,120 plus PTX of the newest).
  CUDA_HOME / CUDA_PATH   where the toolkit is; otherwise nvcc is looked up on PATH.
"""

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEFAULT_ARCHS = ("80", "86", "89", "90", "100", "120")
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


def cuda_archs():
    text = os.environ.get("L2P_CUDA_ARCH", "").strip()
    if not text:
        return DEFAULT_ARCHS
    archs = tuple(a.strip().replace("sm_", "").replace(".", "") for a in text.split(",") if a.strip())
    for a in archs:
        if not a.isdigit():
            raise RuntimeError(f"L2P_CUDA_ARCH: {a!r} is not a compute capability such as 90")
    return archs


def gencode_flags(archs):
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    newest = max(archs, key=int)
    flags.append(f"-gencode=arch=compute_{newest},code=compute_{newest}")
    return flags


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
        flags = ["-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xcompiler", "-Wall",
                 "--expt-relaxed-constexpr", *gencode_flags(cuda_archs())]
        flags += [f"-I{d}" for d in include_dirs]

        def one(src):
            obj = os.path.join(out_dir, os.path.basename(src) + ".o")
            if not self.force and os.path.exists(obj) and os.path.getmtime(obj) >= max(
                    os.path.getmtime(p) for p in [src] + glob(os.path.join(HERE, "kernels", "*.h*"))
                    + glob(os.path.join(HERE, "csrc", "core", "*.h"))):
                return obj
            cmd = [nvcc, "-c", src, "-o", obj, *flags]
            print(" ".join(cmd), flush=True)
            subprocess.check_call(cmd)
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
                        "-Wno-cast-function-type", "-O2"],
)

setup(ext_modules=[core], cmdclass={"build_ext": CudaBuildExt})
