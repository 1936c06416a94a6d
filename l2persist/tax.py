"""The set-aside tax: what a persisting-L2 set-aside costs work that never asks for
persistence.

On Hopper a set-aside of a quarter of the L2 or more shrinks the L2 capacity that *written*
lines can use, by more than the set-aside itself: random writes slow down once their working
set exceeds about ``L2 - 1.3 * set_aside`` (up to 4.8x at the maximum); atomics pay up to 2x,
reads only at the maximum and over large tables; the driver's default (3 of 16 granules)
costs nothing. The model, its constants
and the measurements they are fitted to live in the C core (``csrc/core/l2p_tax.h``); this
module only gathers a chip's facts and measures.

    >>> from l2persist import tax
    >>> p = tax.predict(dev, 30 << 20)       # no GPU work: the model
    >>> p.knee_bytes, p.slowdown_at(32 << 20)
    >>> r = tax.probe(dev, 30 << 20)         # a short measured write-heavy probe
    >>> r.slowdown, r.base_ms, r.at_ms, r.working_set
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from . import _core
from ._format import human_bytes

KINDS = ("read", "write", "rmw", "atomic")
KNEE_THRESHOLD = 1.15  # a measured knee: the first working set this much slower (as the fits')


@dataclass(frozen=True)
class TaxPrediction:
    """The model at one set-aside. ``knee_bytes``: the written working set above which writes
    slow down; ``slowdown_at(ws_bytes, kind)``: the expected slowdown against limit 0."""

    name: str
    compute_capability: tuple
    l2_bytes: int
    set_aside: int          # as the hardware applies it: rounded up to the granule
    granule: int
    persisting_max: int
    knee_bytes: int
    capacity_coeff: float   # c of knee = L2 - c * set_aside
    onset_fraction: float   # the tax starts at set-asides of this fraction of the L2
    base_bytes: int         # the capacity written lines have at limit 0
    taxed: bool             # the set-aside reaches the onset
    penalty: dict           # P per access kind (a miss's cost relative to a hit)
    probe_working_set: int  # the standard write-heavy probe's working set (just above the knee)
    basis: str              # the measured chip whose constants these are
    exact: bool             # False: an unmeasured chip, given the closest one's constants
    probe: "TaxProbe | None" = field(default=None, compare=False)

    def slowdown_at(self, ws_bytes, kind: str = "write") -> float:
        """Expected time at this set-aside over time at limit 0, for random 4-byte accesses
        of ``kind`` over ``ws_bytes``."""
        return _core.tax_slowdown(self.compute_capability, self.l2_bytes, self.set_aside,
                                  self.granule, self.persisting_max, kind, float(ws_bytes))

    def summary(self) -> str:
        """The tax in one line."""
        if self.set_aside == 0:
            return "no set-aside: no tax"
        if not self.taxed:
            return (f"set-aside {human_bytes(self.set_aside)}: no tax (it starts at "
                    f"{self.onset_fraction:.0%} of the L2, "
                    f"{human_bytes(int(self.onset_fraction * self.l2_bytes))})")
        ws = self.probe_working_set
        basis = "" if self.exact else f" (constants of the {self.basis}, the closest measured chip)"
        return (f"set-aside {human_bytes(self.set_aside)}: written working sets above "
                f"{human_bytes(self.knee_bytes)} slow down (random writes over "
                f"{human_bytes(ws)}: {self.slowdown_at(ws):.1f}x, atomics "
                f"{self.slowdown_at(ws, 'atomic'):.1f}x, reads {self.slowdown_at(ws, 'read'):.1f}x)"
                f"{basis}")


@dataclass(frozen=True)
class TaxProbe:
    """A measured write-heavy probe: random 4-byte writes over ``working_set`` bytes, median
    of ``repeat`` runs at limit 0 (``base_ms``) and at the set-aside (``at_ms``)."""

    set_aside: int
    working_set: int
    base_ms: float
    at_ms: float
    predicted: float

    @property
    def slowdown(self) -> float:
        return self.at_ms / self.base_ms


def _chip(obj):
    """(name, compute_capability, l2_cache_size, granule, persisting_l2_cache_max_size) of a
    Device, a device index, DeviceProperties or a mapping with their keys, as given: the
    values are checked where the model reads them (the C core's rows name each key and its
    range). granule 0: the model's L2 / 16; no persisting maximum: 0 (the L2 bounds it)."""
    if isinstance(obj, bool):
        raise TypeError("device_or_properties: expected a Device, a device index, "
                        "DeviceProperties or a mapping, got bool")
    if isinstance(obj, int):
        obj = _core.Device(obj)
    granule = 0
    if isinstance(obj, _core.Device):
        # the driver's step, probed on the device; without persisting L2 the model refuses
        granule = obj.persisting_l2_granule if obj.supports_persisting_l2 else 0
        obj = obj.properties
    if isinstance(obj, _core.DeviceProperties):
        obj = obj.as_dict()
    if not isinstance(obj, Mapping):
        raise TypeError("device_or_properties: expected a Device, a device index, "
                        f"DeviceProperties or a mapping, got {type(obj).__name__}")
    try:
        cc, l2 = obj["compute_capability"], obj["l2_cache_size"]
    except KeyError as e:
        raise ValueError(f"device_or_properties: the mapping lacks {e.args[0]!r} (needs "
                         "compute_capability, l2_cache_size and optionally granule and "
                         "persisting_l2_cache_max_size)") from None
    return (str(obj.get("name", "")), cc, l2, obj.get("granule", granule),
            obj.get("persisting_l2_cache_max_size", 0))


def predict(device_or_properties, set_aside: int) -> TaxPrediction:
    """The model's tax at ``set_aside`` bytes (no GPU work; a Device is asked only for its
    properties and granule). The set-aside is this process's: it belongs to the CUDA context
    that sets it, so another process's set-aside does not tax this one (except under MPS,
    where the server's applies to every client)."""
    name, cc, l2, granule, pmax = _chip(device_or_properties)
    m = _core.tax_predict(cc, l2, set_aside, granule=granule,
                          persisting_l2_cache_max_size=pmax)
    return TaxPrediction(name=name, compute_capability=m["compute_capability"],
                         l2_bytes=m["l2_bytes"], set_aside=m["set_aside"],
                         granule=m["granule"], persisting_max=m["persisting_max"],
                         knee_bytes=m["knee_bytes"], capacity_coeff=m["capacity_coeff"],
                         onset_fraction=m["onset_fraction"], base_bytes=m["base_bytes"],
                         taxed=m["taxed"],
                         probe_working_set=m["probe_working_set"],
                         penalty=dict(m["penalty"]), basis=m["basis"], exact=m["exact"])


def probe_working_set(prediction: TaxPrediction) -> int:
    """The standard probe's working set for a prediction (the C core's rule)."""
    return prediction.probe_working_set


def probe(device, set_aside: int, *, stream=None, repeat: int = 9,
          working_set: int | None = None, kind: str = "write") -> TaxProbe:
    """Measure the tax: random writes (``kind``) over a working set just above the predicted
    knee, median time at limit 0 and at ``set_aside``; persisting lines are reset and the
    limit restored afterwards, also on errors."""
    import numpy as np

    from . import kernels as K
    from .timing import benchmark

    dev = device if isinstance(device, _core.Device) else _core.Device(device)
    p = predict(dev, set_aside)
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat: {repeat!r} is not an int >= 1")
    ws = probe_working_set(p) if working_set is None else int(working_set)
    if ws < 4:
        raise ValueError(f"working_set: {ws} bytes is below one 4-byte word")
    own = stream is None
    s = _core.Stream(dev) if own else stream
    try:
        with _core.zeros(ws // 4, np.uint32, dev) as table:
            def fn():
                K.tax_probe(table, kind, stream=s)

            with dev.persisting_l2(0):
                base = benchmark(fn, stream=s, warmup=2, repeat=repeat).median
            with dev.persisting_l2(set_aside):
                at = benchmark(fn, stream=s, warmup=2, repeat=repeat).median
    finally:
        if own:
            s.close()
    return TaxProbe(set_aside=p.set_aside, working_set=ws, base_ms=base, at_ms=at,
                    predicted=p.slowdown_at(ws, kind))


_measure = probe  # set_aside_tax's `probe` flag hides the function


def set_aside_tax(device, set_aside: int | None = None, *, probe: bool = False,
                  stream=None) -> TaxPrediction:
    """What ``set_aside`` (default: the device's current limit) costs other work: the model's
    prediction, with ``.probe`` measured when ``probe=True``. Attached as
    ``Device.set_aside_tax``."""
    dev = device if isinstance(device, _core.Device) else _core.Device(device)
    if set_aside is None:
        set_aside = dev.persisting_l2_limit
    p = predict(dev, set_aside)
    if not probe:
        return p
    import dataclasses
    return dataclasses.replace(p, probe=_measure(dev, set_aside, stream=stream))


def measurements() -> tuple[list, list, list]:
    """The rows the model is fitted to (and held out from the fit): (knees, slowdowns,
    limit-0 knees)."""
    return _core.tax_rows()


def measured_knee(ws, slowdowns, threshold: float = KNEE_THRESHOLD) -> tuple[float, float]:
    """(lo, hi]: where a measured slowdown curve (ws ascending) first reaches ``threshold``;
    hi is 0 when it never does."""
    return _core.tax_measured_knee(list(ws), list(slowdowns), float(threshold))


def fit_capacity(l2_bytes, set_asides, knees) -> float:
    """c of knee = L2 - c * set_aside, by least squares (any consistent unit)."""
    return _core.tax_fit_capacity(float(l2_bytes), list(set_asides), list(knees))


def fit_penalty(l2_bytes, coeff, set_asides, ws, slowdowns, *, base=None) -> float:
    """The miss penalty P that best explains measured slowdowns, given c and the capacity
    of written lines at limit 0 (``base``; default: the L2 size)."""
    return _core.tax_fit_penalty(float(l2_bytes), float(coeff), list(set_asides), list(ws),
                                 list(slowdowns), base=-1.0 if base is None else float(base))


__all__ = ["KINDS", "KNEE_THRESHOLD", "TaxPrediction", "TaxProbe", "fit_capacity",
           "fit_penalty", "measured_knee", "measurements", "predict", "probe",
           "probe_working_set", "set_aside_tax"]
