"""CuPy: what l2persist needs from CuPy and tells it, in one file.

CuPy is never imported here: each helper takes the module where it is in use
(``sys.modules``), so that ``import l2persist`` stays free of it.

* ``cupy_stream``: CuPy's view of a stream it did not make (an l2persist Stream's handle);
* ``on_stream``: CuPy's current stream pointed at a capturing stream while discovery
  captures (CuPy launches on its current stream; a ``RawKernel`` called with ``stream=``
  another stream is not captured at all, and discovery then reads the launch log);
* ``graph_handle``: the ``cudaGraph_t`` of a ``cupy.cuda.Graph``, or the reason there is none;
* ``function_handle``: the ``CUfunction`` of a ``RawKernel`` or a ``RawModule`` function.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

__all__ = ["StreamHandle", "cupy_stream", "on_stream", "graph_handle", "function_handle",
           "is_cupy"]


class StreamHandle:
    """A bare cudaStream_t as an object of the CUDA stream protocol (``__cuda_stream__``):
    what ``cupy.cuda.Stream.from_external`` takes (the first GPU run found an int refused), and
    what ``l2persist.Stream(wrap=)`` takes for a handle that a launch itself reported (the
    launch log's), which a bare int would not be."""

    def __init__(self, handle: int):
        self.handle = int(handle)

    def __cuda_stream__(self):
        return (0, self.handle)

    def __repr__(self) -> str:
        return f"StreamHandle({self.handle:#x})"


def cupy_stream(cupy, handle: int):
    """CuPy's view of a stream it did not make (the handle of an l2persist.Stream):
    ``cupy.cuda.Stream.from_external`` where CuPy has it (CuPy 14 deprecates ExternalStream),
    ``cupy.cuda.ExternalStream`` on older CuPy."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:  # it takes an object of the CUDA stream protocol
        return from_external(StreamHandle(handle))
    return cupy.cuda.ExternalStream(handle)


def on_stream(handle: int):
    """A context in which CuPy's current stream is `handle`, where CuPy is in use (nothing
    otherwise)."""
    stack = contextlib.ExitStack()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        stack.enter_context(cupy_stream(cupy, handle))
    return stack


def is_cupy(obj: Any) -> bool:
    return (type(obj).__module__ or "").startswith("cupy")


def graph_handle(graph: Any) -> int:
    """The cudaGraph_t a ``cupy.cuda.Graph`` holds; ValueError where it holds none (CuPy
    destroys the graph right after instantiating it and keeps only the executable, whose
    nodes the driver can neither list nor window)."""
    handle = int(getattr(graph, "graph", 0) or 0)
    if not handle:
        raise ValueError(
            "as_graph: this CuPy graph keeps only its executable (CuPy destroys the "
            "cudaGraph_t after instantiating it), whose nodes cannot be windowed. Capture "
            "the same calls with l2persist instead: `with s.capture() as g:` on an "
            "l2persist.Stream s, running them inside `with cupy.cuda.Stream.from_external(s):`")
    return handle


def function_handle(kernel: Any) -> int:
    """The CUfunction of a CuPy ``RawKernel`` (through its ``Function``) or of a
    ``RawModule.get_function(...)``."""
    fn = kernel.kernel if hasattr(kernel, "kernel") else kernel   # RawKernel -> Function
    return int(fn.ptr)
