"""The kernels, as Python calls. Each takes device buffers (or anything ``as_buffer``
accepts), ``stream=`` and (all but ``random_map``) ``window=``: a per-launch access policy
window applied with cudaLaunchKernelEx, leaving the stream's own attribute untouched.
Arguments are checked in C and bad ones raise ValueError / TypeError naming the argument.
``threads`` always means threads per block.

The kernel list, their signatures and the flavour names come from the C kernel table
(``csrc/py/kernels.c``): ``KERNELS``, ``LOAD_FLAVOURS``, ``STORE_FLAVOURS``. Load flavours
pick the load instruction's cache operator or L2 eviction hint; store flavours the store's
(see docs/flavours.md for the SASS each one emits).
"""

from . import _core
from ._core import (KERNELS, LOAD_FLAVOURS, SINK_MAGIC, STORE_FLAVOURS, gather_errors, l2_read_shape,
                    seed_map, sink_take)

globals().update({name: getattr(_core, name) for name in KERNELS})

# Bytes each streaming operation moves through device memory per byte of buffer.
STREAM_TRAFFIC = {"read": 1, "write": 1, "copy": 2, "triad": 3}


# streaming's triad scalar default, from its C row (one source).
_TRIAD_SCALAR = float(next(d for n, _t, d, _k in _core._signatures["streaming"][0]
                           if n == "scalar"))
_KW_DOC = ("``**kw``: streaming's keyword arguments: ``load`` / ``store`` (flavours), "
           "``blocks`` / ``threads`` (default 4 x 512 per SM), ``stream``, ``window``.")


def stream_read(src, **kw):
    """Read every 16-byte word of ``src`` (16-byte aligned, a multiple of 16 bytes) once.
    """
    return _core.streaming("read", src=src, **kw)


def stream_write(dst, **kw):
    """Write every 16-byte word of ``dst`` (16-byte aligned, a multiple of 16 bytes) once.
    """
    return _core.streaming("write", dst=dst, **kw)


def stream_copy(dst, src, **kw):
    """dst = src, 16 bytes per access; ``dst`` and ``src`` have one size.
    """
    return _core.streaming("copy", dst=dst, src=src, **kw)


def triad(dst, b, c, scalar=_TRIAD_SCALAR, **kw):
    """dst = b + scalar * c on float32 buffers of one size (STREAM's triad).
    """
    return _core.streaming("triad", dst=dst, src=b, src2=c, scalar=scalar, **kw)


for _f in (stream_read, stream_write, stream_copy, triad):
    _f.__doc__ += "\n" + _KW_DOC
del _f

__all__ = ["KERNELS", "LOAD_FLAVOURS", "SINK_MAGIC", "STORE_FLAVOURS", "STREAM_TRAFFIC", *KERNELS,
           "gather_errors", "l2_read_shape", "seed_map", "sink_take", "stream_copy", "stream_read",
           "stream_write", "triad"]
