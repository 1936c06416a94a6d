"""Compile the CUDA kernels with nvcc, through a cache that outlives pip's build directory.

pip builds in a fresh temporary directory each time, so objects kept beside the build are
never found again. They are kept in the user's cache directory instead:
``$L2P_BUILD_CACHE``, else ``$XDG_CACHE_HOME/l2persist``, else ``~/.cache/l2persist``
(``L2P_BUILD_CACHE=0`` turns the cache off). An object's name carries a hash of everything
that decides its bytes: nvcc's ``--version`` and binaries (nvcc, ptxas, cicc), every flag
(targets included), the runtime headers' version, the source and every project header it
could include (contents, never mtimes). Same inputs, same object: a second install with nothing changed runs nvcc zero
times. ``L2P_NVCC_LOG=FILE`` appends one line per nvcc run, which makes that checkable.

pip hides a backend's output unless ``-v`` is given, so progress also goes to ``/dev/tty``
when there is one (silently not, when there is none).
"""

import glob
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

KEEP_PER_SOURCE = 8  # cached objects kept per kernel file (other targets, other nvccs)
HEADER_PATTERNS = ("*.h", "*.cuh", "*.hpp", "string")  # cupti_shim/string has no suffix


def cache_dir():
    """The cache directory, or None when L2P_BUILD_CACHE=0."""
    env = os.environ.get("L2P_BUILD_CACHE", "")
    if env == "0":
        return None
    if env:
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "l2persist")


class Progress:
    """Lines on stdout (what pip -v and logs show) and on the terminal, if one can be opened."""

    def __init__(self):
        self.tty = None
        self.lock = threading.Lock()
        if not sys.stdout.isatty():
            try:
                self.tty = open("/dev/tty", "w")
                self.tty.write("\n")  # leave pip's "Building ..." line whole
            except OSError:
                self.tty = None

    def __call__(self, text):
        with self.lock:
            print(text, flush=True)
            if self.tty:
                try:
                    # \r and erase-to-end: pip's spinner may have written a character here.
                    self.tty.write("\r" + text + "\033[K\n")
                    self.tty.flush()
                except OSError:
                    self.tty = None

    def close(self):
        if self.tty:
            self.tty.close()
            self.tty = None


def _hash_files(h, root, paths):
    """Names relative to root (the sdist and the clone hash alike) and contents."""
    for path in paths:
        h.update(os.path.relpath(path, root).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())


def project_headers(root, include_dirs):
    """Every header under the project's own include directories: what a kernel can include."""
    found = set()
    for d in include_dirs:
        if os.path.abspath(d).startswith(root + os.sep):
            for pattern in HEADER_PATTERNS:
                found.update(glob.glob(os.path.join(d, pattern)))
    return sorted(found, key=lambda p: os.path.relpath(p, root))


def _nvcc_identity(nvcc):
    """nvcc's --version and the contents of the compiler's binaries (nvcc, ptxas, cicc).
    Contents rather than the path: NVIDIA's wheels unpack nvcc into a new temporary build
    environment for each pip run, and the same compiler must find its objects again."""
    try:
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        version = ""
    h = hashlib.sha256(version.encode())
    bin_dir = os.path.dirname(os.path.realpath(nvcc))
    for path in (os.path.join(bin_dir, "nvcc"), os.path.join(bin_dir, "ptxas"),
                 os.path.join(bin_dir, "..", "nvvm", "bin", "cicc")):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


class KernelCompiler:
    """Compiles .cu files to objects, reusing cached ones; counts the nvcc runs it made."""

    def __init__(self, nvcc, flags, root, include_dirs, build_temp, force=False):
        self.nvcc, self.flags, self.root, self.force = nvcc, list(flags), root, force
        self.include_flags = [f"-I{d}" for d in include_dirs]
        self.cache = cache_dir()
        self.build_temp = build_temp
        self.nvcc_runs = 0
        self.progress = None
        common = hashlib.sha256()
        common.update(_nvcc_identity(nvcc).encode())
        common.update("\0".join(self.flags).encode())
        # Headers outside the project (toolkit, wheels) are pinned by the runtime's version
        # header; project headers are hashed whole.
        for d in include_dirs:
            version_header = os.path.join(d, "cuda_runtime_api.h")
            if os.path.isfile(version_header):
                with open(version_header, "rb") as f:
                    common.update(hashlib.sha256(f.read()).digest())
                break
        _hash_files(common, root, project_headers(root, include_dirs))
        self.common = common
        self.count_lock = threading.Lock()

    @property
    def out_dir(self):
        return os.path.join(self.cache, "kernels") if self.cache else self.build_temp

    def object_path(self, src):
        h = self.common.copy()
        with open(src, "rb") as f:
            h.update(f.read())
        name = os.path.basename(src)
        return os.path.join(self.out_dir, f"{name}-{h.hexdigest()[:20]}.o")

    def compile_all(self, sources, jobs, label):
        self.progress = Progress()
        try:
            os.makedirs(self.out_dir, exist_ok=True)
        except OSError as e:  # a read-only home, say: build without the cache
            self.progress(f"l2persist: cache {self.cache} unusable ({e.strerror}): not cached")
            self.cache = None
            os.makedirs(self.out_dir, exist_ok=True)
        where = f"cache {self.cache}" if self.cache else "no cache (L2P_BUILD_CACHE=0)"
        self.progress(f"l2persist: {len(sources)} kernel files for {label}; {where}")
        done = []
        lock = threading.Lock()

        def one(src):
            obj = self.object_path(src)
            cached = bool(self.cache) and not self.force and os.path.exists(obj)
            if cached:
                os.utime(obj)  # most recently used: kept by prune()
            else:
                self._run_nvcc(src, obj)
            with lock:
                done.append(src)
                n = len(done)
            self.progress(f"  [{n}/{len(sources)}] {os.path.basename(src)}"
                          f"{' (cached)' if cached else ''}")
            return obj

        try:
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                objects = list(pool.map(one, sources))
            self.progress(f"l2persist: nvcc ran {self.nvcc_runs} time(s), "
                          f"{len(sources) - self.nvcc_runs} kernel object(s) from the cache")
        finally:
            self.progress.close()
        if self.cache:
            for src in sources:
                self.prune(src)
        return objects

    def _run_nvcc(self, src, obj):
        # Compile to a private name, then rename: a concurrent build never sees half an object.
        fd, tmp = tempfile.mkstemp(suffix=".o", dir=self.out_dir)
        os.close(fd)
        try:
            subprocess.check_call([self.nvcc, "-c", src, "-o", tmp, *self.flags,
                                   *self.include_flags])
            os.replace(tmp, obj)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        with self.count_lock:
            self.nvcc_runs += 1
        log = os.environ.get("L2P_NVCC_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.nvcc} {src} -> {obj}\n")

    def prune(self, src):
        """Keep the KEEP_PER_SOURCE most recently used objects of one kernel file."""
        name = os.path.basename(src)
        olds = sorted(glob.glob(os.path.join(self.out_dir, glob.escape(name) + "-*.o")),
                      key=os.path.getmtime, reverse=True)
        for path in olds[KEEP_PER_SOURCE:]:
            try:
                os.unlink(path)
            except OSError:
                pass
