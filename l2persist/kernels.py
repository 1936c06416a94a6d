"""The kernels, as Python calls. Each takes device buffers (or anything ``as_buffer``
accepts), ``stream=`` and ``window=`` (a per-launch access policy window applied with
cudaLaunchKernelEx, leaving the stream's own attribute untouched). Arguments are checked in C
and bad ones raise ValueError / TypeError naming the argument.

Load flavours: ``default ca cg cs lu cv nc evict_first evict_last evict_normal``;
store flavours: ``wb cg cs wt`` (see docs/flavours.md for the SASS each one emits).
"""

from ._core import (bulk_read, gather, gather_errors, hot_cold, hot_cold_read, l2_read, noop, pattern, random_map,
                    scale_shift, seed_map, streaming)

LOAD_FLAVOURS = ("default", "ca", "cg", "cs", "lu", "cv", "nc", "evict_first", "evict_last",
                 "evict_normal")
STORE_FLAVOURS = ("wb", "cg", "cs", "wt")

# Bytes each streaming operation moves through device memory per byte of buffer.
STREAM_TRAFFIC = {"read": 1, "write": 1, "copy": 2, "triad": 3}


def stream_read(src, **kw):
    """Read every 16-byte word of ``src`` once."""
    return streaming("read", src=src, **kw)


def stream_write(dst, **kw):
    """Write every 16-byte word of ``dst`` once."""
    return streaming("write", dst=dst, **kw)


def stream_copy(dst, src, **kw):
    """dst = src, 16 bytes per access."""
    return streaming("copy", dst=dst, src=src, **kw)


def triad(dst, b, c, scalar=3.0, **kw):
    """dst = b + scalar * c on float32 buffers (STREAM's triad)."""
    return streaming("triad", dst=dst, src=b, src2=c, scalar=scalar, **kw)


__all__ = ["LOAD_FLAVOURS", "bulk_read", "STORE_FLAVOURS", "STREAM_TRAFFIC", "gather", "gather_errors", "hot_cold",
           "hot_cold_read", "l2_read", "noop", "pattern", "random_map", "scale_shift",
           "seed_map", "stream_copy", "stream_read", "stream_write", "streaming", "triad"]
