"""What touches other libraries and other programs: PyTorch's and CuPy's hooks, discovery of
their buffers, and the start-up bootstrap that watches a program l2persist does not call into.

- ``process.torch``: every patch l2persist puts on PyTorch (``keep_graphs``,
  ``window_captures``, the replay notes) and its graph capture;
- ``process.cupy``: CuPy's streams, graphs and kernel handles;
- ``process.discover``: which buffers a callable's kernels use, where a window reaches them,
  and which streams its work runs on (``l2persist.foreign`` re-exports its public names).
"""

from . import cupy, discover, torch

__all__ = ["cupy", "discover", "torch"]
