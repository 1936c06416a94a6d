"""Other libraries' CUDA graphs and kernels: borrow them, find their buffers, window their nodes.

``as_graph(obj)`` gives an l2persist :class:`~l2persist.Graph` over a graph another library
owns (never destroying it), whose kernel nodes carry per-node access policy windows.
``launch(kernel, ...)`` launches another library's kernel with a window on that one launch.
``Graph.buffers(candidates=...)`` lists the buffers its kernels use (the scan is the C core's:
``csrc/core/l2p_graphscan.h``). ``discover(fn)`` finds, for the tuner, the buffers a callable's
kernels use and a carrier per buffer on which a window reaches those kernels.

What touches other libraries lives in ``l2persist.process``: PyTorch's hooks
(``keep_graphs``, ``window_captures``, the replay notes) in ``process/torch.py``, CuPy in
``process/cupy.py``, discovery in ``process/discover.py``; this module keeps the borrowing and
the launches, and re-exports the rest under the names it always had.

Where a window set on a borrowed graph takes effect (measured on the H100, driver 580, torch
2.11; the GPU tests in tests/test_foreign_gpu.py check it):

* **PyTorch** ``torch.cuda.CUDAGraph(keep_graph=True)``: the window is set on the raw graph's
  nodes (``raw_cuda_graph()``), then l2persist calls the owner's ``instantiate()``, which
  destroys PyTorch's executable and instantiates the raw graph again: the owner's next
  ``g.replay()`` runs with the window (0.869 ms against 1.679 ms without; setting it to None the
  same way removes it). Without ``keep_graph=True`` PyTorch keeps no raw graph: ``as_graph``
  says so. Setting an attribute after instantiation and calling ``cuGraphExecUpdate`` reports
  success and changes nothing, so l2persist never relies on it.
* **CuPy** ``cupy.cuda.Graph``: CuPy destroys the ``cudaGraph_t`` right after instantiating
  it and keeps only the executable, whose nodes the driver can neither list nor window:
  ``as_graph`` refuses and says to capture the CuPy calls on an l2persist stream instead.
* **cuda.core** ``GraphBuilder``: after ``end_building()`` the builder holds the
  ``CUgraph``; ``as_graph(builder)`` borrows it, and every ``builder.complete()`` made after
  the windows were set instantiates them (a ``cuda.core`` ``Graph`` already completed is an
  executable and is refused like one). Not yet measured on a GPU.
* **Raw handles**: an int (or a cuda.bindings ``CUgraph``) is taken as a ``cudaGraph_t`` that
  the caller vouches for. Windows are set on its nodes; an executable made *after* that (by the
  caller, or by ``Graph.launch``) has them; one made before does not.
* A bare ``cudaGraphExec_t`` cannot be windowed at all: the driver gives no way back from an
  executable to its nodes' attributes.

Persisting lines outlive the graph that made them until ``l2persist.reset_persisting_l2()``:
reset between trials.
"""

from __future__ import annotations

from typing import Any, Iterable

from . import _core
from ._core import Graph
from ._format import node_label  # noqa: F401 - re-exported (tune's placements, the tests)
from .process import cupy as _cupy
from .process import torch as _torch
from .process.discover import (  # noqa: F401 - the discovery names, re-exported
    BufferRecord, BufferTable, BufferUse, Candidate, DiscoveryError, LaunchedKernel, NodeGroup,
    _capture_torch, discover, graph_buffers as _graph_buffers, owner_sees_windows)
from .process.torch import (  # noqa: F401 - PyTorch's hooks, re-exported
    keep_graphs, late_bound, torch_cuda_graph, window_captures)

__all__ = ["as_graph", "discover", "launch", "keep_graphs", "window_captures", "BufferRecord",
           "BufferTable", "NodeGroup", "Candidate", "DiscoveryError", "torch_cuda_graph"]


# ---- owners -------------------------------------------------------------------------------

def _module_of(obj: Any) -> str:
    return type(obj).__module__ or ""


def as_graph(obj: Any = None, *, exec: Any = None, device: Any = None) -> Graph:
    """An l2persist Graph over another library's CUDA graph, borrowed (never destroyed).

    ``obj``: a ``torch.cuda.CUDAGraph`` made with ``keep_graph=True`` after its capture ended;
    a ``cudaGraph_t`` as an int or a cuda.bindings ``CUgraph``; an l2persist Graph (returned as
    is). ``exec=``: a ``cudaGraphExec_t`` alone is refused (its nodes cannot be windowed).
    The Graph lists ``kernel_nodes`` (name, grid, block), reads and sets per-node windows
    (``node.access_policy_window``, ``set_access_policy_window(w, nodes=...)``,
    ``nodes_window(nodes)``), and ``buffers()``. For a PyTorch owner each change re-instantiates
    the owner so that its own ``replay()`` has the windows; see the module's docstring for the
    other owners.
    """
    if isinstance(obj, Graph):
        return obj
    if obj is None:
        if exec is not None:
            raise ValueError(
                "as_graph: a cudaGraphExec_t alone cannot carry windows: the driver can neither "
                "list an executable graph's nodes nor set their attributes (and cuGraphExecUpdate "
                "was measured to apply no window). Pass the cudaGraph_t it was instantiated from "
                "and instantiate again after setting windows")
        raise TypeError("as_graph: obj is required (a torch.cuda.CUDAGraph, a cudaGraph_t int)")
    if _torch.is_torch_graph(obj):
        return _torch.borrow(obj, device)
    mod, name = _module_of(obj), type(obj).__name__
    if _cupy.is_cupy(obj):
        return _core._borrow_graph(_cupy.graph_handle(obj), device, obj)
    if mod.startswith("cuda.core") and name == "GraphBuilder":
        mnff = getattr(obj, "_mnff", None)
        handle = getattr(mnff, "graph", None)
        if not handle:
            raise ValueError("as_graph: this cuda.core GraphBuilder holds no graph yet: call "
                             "end_building() first (and complete() after setting windows)")
        return _core._borrow_graph(int(handle), device, obj)
    if mod.startswith("cuda.core") and name == "Graph":
        raise ValueError(
            "as_graph: a cuda.core Graph is an executable (cudaGraphExec_t), whose nodes cannot "
            "be windowed: borrow its GraphBuilder after end_building() with as_graph(builder), "
            "set the windows, then call builder.complete() for an executable that has them")
    if "Exec" in name:
        return as_graph(None, exec=obj)
    if isinstance(obj, bool):
        raise TypeError("as_graph: expected a graph, got bool")
    if isinstance(obj, int) or name in ("CUgraph", "cudaGraph_t"):
        return _core._borrow_graph(int(obj), device, obj)
    raise TypeError(
        f"as_graph: expected a torch.cuda.CUDAGraph(keep_graph=True), a cudaGraph_t (int or "
        f"CUgraph) or an l2persist Graph, got {mod}.{name}")


def _owner_changed(graph: Graph) -> None:
    """A window on a borrowed graph's node changed: make the owner's next replay see it (the
    binding's owner_changed hook, called after every change). PyTorch: instantiate() again.
    Other owners: nothing can reach their executable; l2persist's own launch() instantiates
    afresh."""
    owner = graph.owner
    if owner is not None:
        _torch.reinstantiate(owner)


# ---- foreign launches ---------------------------------------------------------------------

def _function_of(kernel: Any) -> tuple[int, bool]:
    """(handle, is_kernel) for the kinds of kernel objects l2persist.launch takes."""
    if isinstance(kernel, bool):
        raise TypeError("kernel: expected a kernel object or a CUfunction int, got bool")
    if isinstance(kernel, int):
        return kernel, False
    mod, name = _module_of(kernel), type(kernel).__name__
    if name == "CUfunction":                      # cuda.bindings
        return int(kernel), False
    if name == "CUkernel":
        return int(kernel), True
    if mod.startswith("cupy"):
        return _cupy.function_handle(kernel), False
    if mod.startswith("cuda.core"):               # a cuda.core Kernel holds a CUkernel
        h = getattr(kernel, "handle", None) or getattr(kernel, "_handle", None)
        if h is not None:
            return int(h), type(h).__name__ != "CUfunction"
    if mod.startswith("triton"):
        if getattr(kernel, "function", None) is None and hasattr(kernel, "_init_handles"):
            kernel._init_handles()
        f = getattr(kernel, "function", None)
        if f is not None:
            return int(f), False
    raise TypeError(
        f"kernel: expected a cuda.core Kernel, a CuPy RawKernel or RawModule function, a Triton "
        f"compiled kernel or a CUfunction int, got {mod}.{name}")


def launch(kernel: Any, grid: Any, block: Any, args: Iterable = (), *, stream=None, window=None,
           shared_mem: int = 0, device=None) -> None:
    """Launch another library's kernel through cuLaunchKernelEx, with an access policy window
    on this one launch.

    kernel: a cuda.core ``Kernel``, a CuPy ``RawKernel`` or ``RawModule.get_function(...)``,
    a Triton compiled kernel, or a ``CUfunction`` int. grid, block: an int or 1-3 ints.
    args: buffers (DeviceBuffer, CuPy / PyTorch arrays: their device address), ints, floats,
    NumPy scalars, each written at the width of the kernel's parameter (cuFuncGetParamInfo);
    the count must match. window: an AccessPolicyWindow or None. stream: an l2persist Stream,
    a foreign stream, or None (the legacy default stream on `device`).
    """
    handle, is_kernel = _function_of(kernel)
    if not isinstance(shared_mem, int) or isinstance(shared_mem, bool):
        raise TypeError(f"shared_mem: expected an int, got {type(shared_mem).__name__}")
    _core._launch_ex(handle, is_kernel, grid, block, list(args),
                     stream, window, shared_mem, device)


# The binding (csrc/py) imports nothing from this package: a Graph's methods reach the Python
# they need through hooks handed over here, when l2persist imports this module.
_core._set_hooks(owner_changed=_owner_changed, owner_handle=_torch.owner_handle,
                 graph_buffers=_graph_buffers,
                 node_group=NodeGroup)
