"""l2persist: control and see how an NVIDIA GPU caches global memory.

Read a device's L2 facts, set the persisting-L2 set-aside, put access policy windows on
streams, graph kernel nodes and single launches, run cache-study kernels on device buffers and
time them. All policy and kernels live in the C core (``l2persist._core``); importing this
package makes no CUDA call, so it works on machines without a GPU.
"""

from ._core import (
    AccessPolicyWindow,
    AccessProperty,
    CudaError,
    CudaMemoryError,
    Device,
    DeviceBuffer,
    DeviceProperties,
    Graph,
    KernelNode,
    NoDeviceError,
    NotSupportedError,
    Stream,
    as_buffer,
    copy,
    device_count,
    empty,
    plan_hit_ratios,
    plan_windows,
    reset_persisting_l2,
    to_device,
    zeros,
)
from ._format import human_bytes
from .timing import Timing, benchmark
from . import coalescing, kernels
from .counters import Counters, counter_names, counters_available, measure
from . import examples
from .tune import Target, TuneResult
from . import foreign
from .foreign import as_graph, keep_graphs, launch, window_captures
from .plan import Plan
from .advise import Advice, WorkloadSet, advise
from .tune import tune  # noqa: E402 - the function; the module stays l2persist.tune in sys.modules
from . import tax
from .state import L2State, l2_state, persisting_l2_disabled
from .results import Results as Results  # a study's records + metadata (l2persist.studies)
from .process.bootstrap import mark  # a unit of work ended: `advise --` switches only there

__version__ = "0.1.0"


def is_available() -> bool:
    """True when at least one CUDA device can be used."""
    return device_count() > 0


def no_device_reason() -> str | None:
    """Why no device can be used, or None when one can: "<reason> (<runtime error>)", where
    the reason tells a missing driver from one too old (and the CUDA version it needs). The
    same words as NoDeviceError's and the report's (one C function makes them)."""
    from ._core import no_device_reason as _why

    why = _why()
    return None if why is None else f"{why[2]} ({why[1]})"


__all__ = [
    "Counters", "counter_names", "counters_available", "measure",
    "AccessPolicyWindow", "AccessProperty", "CudaError", "coalescing", "CudaMemoryError", "Device",
    "DeviceBuffer", "DeviceProperties", "Graph", "KernelNode", "NoDeviceError",
    "NotSupportedError", "Stream", "Timing", "as_buffer", "copy", "benchmark", "device_count", "empty",
    "human_bytes", "is_available", "kernels", "no_device_reason", "plan_hit_ratios",
    "plan_windows", "reset_persisting_l2", "to_device", "zeros", "examples", "Target",
    "TuneResult", "tune", "foreign", "as_graph", "launch", "tax", "L2State", "l2_state",
    "persisting_l2_disabled", "Plan", "advise", "Advice", "WorkloadSet", "keep_graphs", "window_captures",
    "Results", "mark",
]
