"""Where the CUDA toolkit for building l2persist comes from: the machine, or PyPI.

One rule, used by both the PEP 517 backend (``l2p_backend``: which build requirements to ask
pip for) and ``setup.py`` (which nvcc, headers and libraries to build with):

1. ``CUDA_HOME`` or ``CUDA_PATH`` naming a directory with ``bin/nvcc``;
2. ``nvcc`` on ``PATH``;
3. otherwise NVIDIA's wheels (``PYPI_REQUIREMENTS``), which pip installs into the isolated
   build environment and which unpack a toolkit layout under ``site-packages/nvidia/cu13``.

``L2P_CUDA_FROM_PYPI=1`` skips 1 and 2 (to test step 3, or to build with a known nvcc).
The wheels are pinned to CUDA 13.0, the oldest 13.x: code built by it runs on every driver
that supports CUDA 13 (r580 and newer), and its PTX JITs on all of them.
"""

import os
import shutil
import sys

# The compiler, its front end (cicc in nvidia-nvvm, crt headers), the runtime headers with
# libcudart_static.a, and the CUPTI headers that csrc/core/l2p_counters.c compiles against.
PYPI_REQUIREMENTS = [
    "nvidia-cuda-nvcc==13.0.*",
    "nvidia-nvvm==13.0.*",
    "nvidia-cuda-crt==13.0.*",
    "nvidia-cuda-runtime==13.0.*",
    "nvidia-cuda-cupti==13.0.*",
]
PYPI_SUBDIR = os.path.join("nvidia", "cu13")


def _has_nvcc(root):
    return bool(root) and os.path.isfile(os.path.join(root, "bin", "nvcc"))


def from_pypi_forced():
    return os.environ.get("L2P_CUDA_FROM_PYPI", "") not in ("", "0")


def machine_toolkit():
    """The toolkit installed on this machine (a directory with bin/nvcc), or None."""
    if from_pypi_forced():
        return None
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if _has_nvcc(os.environ.get(var)):
            return os.environ[var]
    nvcc = shutil.which("nvcc")
    if nvcc:
        return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    return None


def pypi_toolkit():
    """The toolkit that NVIDIA's wheels unpacked on sys.path (the build environment), or None."""
    for entry in sys.path:
        root = os.path.join(entry or os.getcwd(), PYPI_SUBDIR)
        if _has_nvcc(root):
            return root
    return None


def build_requirements():
    """Extra build requirements: NVIDIA's wheels when the machine has no toolkit."""
    return [] if machine_toolkit() else list(PYPI_REQUIREMENTS)


def find_toolkit():
    """The toolkit to build with; a one-line RuntimeError when there is none."""
    root = machine_toolkit() or pypi_toolkit()
    if root:
        return root
    raise RuntimeError(
        "l2persist: no CUDA toolkit found (no nvcc on PATH, no CUDA_HOME or CUDA_PATH) and "
        "NVIDIA's compiler wheels are not in the build environment. Install with build "
        "isolation (plain `pip install .`, which fetches " + ", ".join(PYPI_REQUIREMENTS) +
        "), or set CUDA_HOME to a CUDA 13 toolkit.")


def include_dirs(root):
    """Runtime and CUPTI headers: CUPTI sits beside the runtime's in the wheels and in recent
    toolkits, under extras/CUPTI in older ones."""
    dirs = [os.path.join(root, "include"), os.path.join(root, "extras", "CUPTI", "include")]
    return [d for d in dirs if os.path.isdir(d)]


def library_dirs(root):
    """Where libcudart_static.a is: lib64 (toolkit), targets/... (distro layouts), lib (wheels)."""
    dirs = [os.path.join(root, d)
            for d in ("lib64", os.path.join("targets", "x86_64-linux", "lib"), "lib")]
    return [d for d in dirs if os.path.isdir(d)]
