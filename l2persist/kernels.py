"""The kernels, as Python calls. Each takes device buffers (or anything ``as_buffer``
accepts), ``stream=`` and ``window=`` (a per-launch access policy window applied with
cudaLaunchKernelEx, leaving the stream's own attribute untouched)."""

from ._core import noop, scale_shift

__all__ = ["noop", "scale_shift"]
