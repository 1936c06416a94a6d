"""The set-aside tax: what a persisting-L2 set-aside costs work that never asks for
persistence.

On Hopper a set-aside of a quarter of the L2 or more shrinks the L2 capacity that *written*
lines can use, by more than the set-aside itself: random writes slow down once their working
set exceeds about ``L2 - 1.3 * set_aside`` (up to 4.8x at the maximum); atomics pay up to 2x,
reads only at the maximum and over large tables; the driver's default (3 of 16 granules)
costs nothing. Real writes come with inputs streamed alongside (``out[idx] = val`` reads
12 bytes per 4 written): those lines take capacity from written lines too, and the knee
comes earlier (``predict(..., companion=3)``). The model, its constants and the
measurements they are fitted to live in the C core (``csrc/core/l2p_tax.h``); this module
only gathers a chip's facts and measures.

The model is a prior, not the truth: on the H100 fused AdamW's knees came 10-14 MiB after
its prediction. ``measure(fn, s)`` on your own work (and the advisor's per-workload and
per-kernel tax) is the figure to trust. Every result here says which it is (``source``:
``"measured"`` or ``"model"``; ``summary()`` labels each figure), and where both exist the
measurement leads and is the one used (``TaxPrediction.slowdown``).

The set-aside belongs to the CUDA context that sets it, so the tax is per process: another
process holding the maximum set-aside, idle or busy, did not slow this process's writes,
while this process's own maximum slowed them 4.9x (H200). A fresh process starts at the
driver's default and cannot see another process's limit. Under MPS the server's set-aside
(``CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT`` when it started) taxes every
client alike (``python -m l2persist check`` says what this process can see).

    >>> from l2persist import tax
    >>> p = tax.predict(dev, 30 << 20)       # no GPU work: the model
    >>> p.knee_bytes, p.slowdown_at(32 << 20)
    >>> tax.predict(dev, 30 << 20, companion=3).knee_bytes   # with inputs streamed alongside
    >>> r = tax.probe(dev, 30 << 20)         # a short measured write-heavy probe
    >>> r.slowdown, r.base_ms, r.at_ms, r.working_set
    >>> m = tax.measure(my_step, 30 << 20)   # the tax on your own work, with its interval
    >>> m.slowdown, m.interval, m.rounds
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from . import _core
from . import _format
from ._format import TAX_MEASURED, TAX_MODEL, human_bytes, tax_predicted, tax_source

KINDS = ("read", "write", "rmw", "atomic")
SHAPES = tuple(s["name"] for s in _core.tax_shapes())  # the core's access shapes
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
    measured: "TaxMeasurement | None" = field(default=None, compare=False)
    # the companion stream: bytes read alongside per byte written (0: none) and what the
    # core has for it (beta: the knee C / (1 + beta k), from the line, the word and the
    # write's miss cost; the cap on what it takes, a share of the L2; the capacity
    # coefficient it competes under; the stream's own cost a; the bytes it takes from
    # written lines here; the chip whose rows gave them; None: no rows, no effect)
    companion: float = 0.0
    companion_footprint: float = 0.0
    companion_cap: float = 0.0
    companion_coeff: float = 0.0
    stream_cost: float = 0.0
    companion_bytes: int = 0
    companion_basis: "str | None" = None
    companion_rows: "dict | None" = field(default=None, compare=False, repr=False)
    # the access shape (``predict(shape=...)``) and its own constants: its capacity line's
    # coefficient and onset (a fraction of the L2; above 1: no tax measured), its miss cost
    # P; shape_basis None: no rows of the shape, the numbers are random writes'
    shape: str = "random"
    shape_basis: "str | None" = None
    shape_coeff: float = 0.0
    shape_onset: float = 0.0
    shape_penalty: float = 0.0

    def slowdown_at(self, ws_bytes, kind: "str | None" = None) -> float:
        """Expected time at this set-aside over time at limit 0 for accesses of ``kind``
        (default: the shape's own, ``write`` for random) over ``ws_bytes`` (with this
        prediction's shape and companion stream)."""
        return self.slowdowns_at([ws_bytes], kind)[0]

    def slowdowns_at(self, ws_bytes, kind: "str | None" = None) -> list:
        """``slowdown_at`` at each working set of ``ws_bytes`` (a curve: the model's
        constants are fitted once for all of them)."""
        if kind is None:
            kind = _SHAPE_KIND[self.shape]
        return _core.tax_slowdowns(self.compute_capability, self.l2_bytes, self.set_aside,
                                   self.granule, self.persisting_max, kind,
                                   ws_bytes, companion=self.companion,
                                   companion_rows=self.companion_rows, shape=self.shape)

    @property
    def source(self) -> str:
        """Where the tax this result leads with comes from: ``"measured"`` when a measurement
        is attached (``measured``: your work; ``probe``: the write-heavy probe), else
        ``"model"`` (the prior). The measurement wins: ``slowdown`` and ``summary`` lead
        with it."""
        return TAX_MEASURED if (self.measured or self.probe) is not None else TAX_MODEL

    @property
    def slowdown(self) -> float:
        """The tax this result leads with (``source`` says which): your work's measured
        slowdown (``measured``), else the probe's (``probe``), else the model's for the
        shape's accesses over ``probe_working_set`` (a prior)."""
        m = self.measured if self.measured is not None else self.probe
        return m.slowdown if m is not None else self.slowdown_at(self.probe_working_set)

    def summary(self) -> str:
        """The tax in one line, each figure labelled ``measured`` or ``model``: what was
        measured first (your work, then the probe), the model's prediction after it."""
        measured = [m.summary() for m in (self.measured, self.probe) if m is not None]
        return "; ".join(measured + [self._model_summary()])

    def __str__(self) -> str:
        return self.summary()

    def _model_summary(self) -> str:
        """The model's prediction as text, labelled as the model's."""
        if self.set_aside == 0:
            return "no set-aside: no tax"
        label = tax_source(False)
        if not self.taxed:
            return (f"{label}: set-aside {human_bytes(self.set_aside)}: no tax (it starts at "
                    f"{self.onset_fraction:.0%} of the L2, "
                    f"{human_bytes(int(self.onset_fraction * self.l2_bytes))})")
        ws = self.probe_working_set
        basis = "" if self.exact else f" (constants of the {self.basis}, the closest measured chip)"
        return (f"{label}: set-aside {human_bytes(self.set_aside)}: written working sets above "
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

    @property
    def source(self) -> str:
        """Always ``"measured"`` (``predicted`` is the model's figure for the same probe)."""
        return TAX_MEASURED

    def summary(self) -> str:
        """The probe in one line: measured first, then what the model predicted for it."""
        label = tax_source(True, f"the write-heavy probe over {human_bytes(self.working_set)}")
        return (f"{label}: set-aside {human_bytes(self.set_aside)}: {self.slowdown:.2f}x the "
                f"time at limit 0 ({self.base_ms:.4g} -> {self.at_ms:.4g} ms); "
                f"{tax_predicted(self.predicted)}")

    def __str__(self) -> str:
        return self.summary()


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


def shapes() -> list[dict]:
    """The model's access shapes: each one's ``name`` (``predict(shape=...)``), the ``kind``
    of its accesses, how the project's probe measures it (``pattern``, ``row_words``,
    ``arrays``, ``companion_reused``) and ``what`` work has it."""
    return _core.tax_shapes()


_SHAPE_KIND = {s["name"]: s["kind"] for s in _core.tax_shapes()}


def predict(device_or_properties, set_aside: int, *, companion: float = 0.0,
            companion_rows=None, shape: str = "random") -> TaxPrediction:
    """The model's tax at ``set_aside`` bytes (no GPU work; a Device is asked only for its
    properties and granule).

    ``companion``: bytes streamed alongside per byte written (PyTorch's ``out[idx] = val``
    with int64 indices and float32 values: (8 + 4) / 4 = 3); the stream's lines live in the
    L2 alongside the written ones (their footprint grows with the table, up to a cap), so the
    knee comes earlier. Its constants are fitted in the C core
    from the companion rows of the project's own probe (``companion_measurements()``;
    ``companion_rows=`` fits them from other rows, e.g. a fresh sweep's,
    ``l2persist.studies.set_aside_tax.companion_rows(path)``). Without rows the stream
    changes nothing; with
    ``companion=0`` the model is the one without the term.

    The set-aside is this process's: it belongs to the CUDA context that sets it, so
    another process's set-aside does not tax this one (measured: another process holding
    the maximum did not slow this process's writes). Under MPS the server's applies to
    every client.

    ``shape``: how the work writes, as you would say it of your own work (``shapes()``):
    ``"random"`` 4-byte writes at random positions (``out[idx] = val``, ``index_copy_``);
    ``"atomic"`` random atomic adds (``scatter_add_``, ``index_add_``); ``"rows"`` whole
    128-byte rows written at random rows (an embedding backward's rows of 32 floats);
    ``"sweep"`` a sequential read-modify-write sweep over arrays side by side, ``companion``
    counting the arrays read alongside and re-read every pass (an optimizer step: param, m
    and v written, the gradient read: companion 1/3). Each shape has its own constants,
    fitted from the project's probe of that shape (``tools/investigations/tax-sweep --shapes``); a shape
    without rows is predicted as random writes (``shape_basis`` None)."""
    name, cc, l2, granule, pmax = _chip(device_or_properties)
    m = _core.tax_predict(cc, l2, set_aside, granule=granule,
                          persisting_l2_cache_max_size=pmax, companion=companion,
                          companion_rows=companion_rows, shape=shape)
    c, sh = m["companion"], m["shape"]
    return TaxPrediction(name=name, compute_capability=m["compute_capability"],
                         l2_bytes=m["l2_bytes"], set_aside=m["set_aside"],
                         granule=m["granule"], persisting_max=m["persisting_max"],
                         knee_bytes=m["knee_bytes"], capacity_coeff=m["capacity_coeff"],
                         onset_fraction=m["onset_fraction"], base_bytes=m["base_bytes"],
                         taxed=m["taxed"],
                         probe_working_set=m["probe_working_set"],
                         penalty=dict(m["penalty"]), basis=m["basis"], exact=m["exact"],
                         companion=c["ratio"], companion_footprint=c["footprint"],
                         companion_cap=c["cap"], companion_coeff=c["coeff"],
                         stream_cost=c["stream_cost"],
                         companion_bytes=c["bytes"], companion_basis=c["basis"],
                         companion_rows=companion_rows, shape=sh["name"],
                         shape_basis=sh["basis"], shape_coeff=sh["coeff"],
                         shape_onset=sh["onset"], shape_penalty=sh["penalty"])


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


_probe = probe  # set_aside_tax's `probe` flag hides the function


@dataclass(frozen=True)
class TaxMeasurement:
    """The tax measured on the caller's own work (``measure``): ``slowdown`` = median time at
    the set-aside over median time at limit 0, with its ``interval`` at ``confidence``;
    ``rounds`` interleaved rounds were taken (``converged``: the interval lies within
    +-tolerance of the slowdown; False: the round cap ended it first)."""

    set_aside: int          # as the driver granted it (read back)
    slowdown: float
    interval: tuple
    rounds: int
    base_ms: float          # median at limit 0
    at_ms: float            # median at the set-aside
    converged: bool
    confidence: float
    tolerance: float
    base_samples: tuple = field(default=(), repr=False, compare=False)
    at_samples: tuple = field(default=(), repr=False, compare=False)

    @property
    def source(self) -> str:
        """Always ``"measured"``: on your own work (``tax.measure``)."""
        return TAX_MEASURED

    def summary(self) -> str:
        """The measurement in one line, labelled as measured on your work."""
        lo, hi = self.interval
        label = tax_source(True, f"on your work, tax.measure: {self.rounds} rounds")
        return (f"{label}: set-aside {human_bytes(self.set_aside)}: {self.slowdown:.3f}x the "
                f"time at limit 0 ({self.confidence:.0%} interval {lo:.3f}-{hi:.3f}"
                f"{'' if self.converged else ', not within the tolerance'}; "
                f"{self.base_ms:.4g} -> {self.at_ms:.4g} ms)")

    def __str__(self) -> str:
        return self.summary()


def _measure_device(device, stream):
    """The device measured: the stream's (an l2persist Stream) or ``device`` (default 0)."""
    if isinstance(stream, _core.Stream):
        dev = stream.device
        if device is not None and _core.Device(device).index != dev.index:
            raise ValueError(f"device: {device} differs from the stream's device {dev.index}")
        return dev
    return device if isinstance(device, _core.Device) else _core.Device(
        0 if device is None else device)


def measure(fn, set_aside: int, *, device=None, stream=None, repeat: int = 5,
            warmup: int = 2, min_rounds: int = 3, max_rounds: int = 20,
            tolerance: float = 0.02, confidence: float = 0.95,
            hold_us: float | None = None) -> TaxMeasurement:
    """What ``set_aside`` bytes cost ``fn``, your own work: ``fn()`` timed with CUDA events on
    ``stream`` (None: the legacy default stream, where PyTorch's and CuPy's default work
    runs) at limit 0 and at ``set_aside``, in interleaved rounds of ``repeat`` samples each
    (``warmup`` calls before each), until the interval of the slowdown lies within
    +-``tolerance`` (95 % by default; at least ``min_rounds``, at most ``max_rounds``). No
    window is set: this is the tax on work that never asks for persistence.

    The loop, the statistics and the argument ranges are the C core's (``l2p_tax_measure``);
    the limit found before is restored afterwards, also when ``fn`` raises or the run is
    interrupted (KeyboardInterrupt). The set-aside is this process's (it belongs to the
    CUDA context): another process's set-aside is not measured here, and does not tax this
    process's work. Under MPS the server's set-aside cannot be changed: the limit refuses.

        >>> r = tax.measure(train_step, dev.properties.persisting_l2_cache_max_size)
        >>> r.slowdown, r.interval, r.rounds
    """
    dev = _measure_device(device, stream)
    # the set-aside's type and range are the core's check; the driver grants whole granules
    target = predict(dev, set_aside).set_aside
    _core.tax_measure(None, repeat=repeat, min_rounds=min_rounds, max_rounds=max_rounds,
                      confidence=confidence, tolerance=tolerance)
    timing = {} if hold_us is None else {"hold_us": hold_us}
    granted = [target]
    from .plan import Plan
    arms = (Plan(dev, set_aside=0), Plan(dev, set_aside=target))
    session = Plan(dev)  # the plans' one transaction: restored as found, also on errors

    def evaluate(at, n):
        got = session.apply(arms[1 if at else 0])  # the limit changes only when it differs
        if at:
            granted[0] = got
        return _core.time_calls(fn, stream=stream, warmup=warmup, repeat=n, device=dev,
                                **timing)

    with session:
        r = _core.tax_measure(evaluate, repeat=repeat, min_rounds=min_rounds,
                              max_rounds=max_rounds, confidence=confidence,
                              tolerance=tolerance)
    return TaxMeasurement(set_aside=granted[0], slowdown=r["slowdown"],
                          interval=tuple(r["interval"]), rounds=r["rounds"],
                          base_ms=r["base_ms"], at_ms=r["at_ms"], converged=r["converged"],
                          confidence=confidence, tolerance=tolerance,
                          base_samples=tuple(r["base_samples"]),
                          at_samples=tuple(r["at_samples"]))


def set_aside_tax(device, set_aside: int | None = None, *, probe: bool = False,
                  stream=None, work=None) -> TaxPrediction:
    """What ``set_aside`` (default: the device's current limit) costs other work: the model's
    prediction, with ``.probe`` measured when ``probe=True`` (the project's write-heavy
    probe) and ``.measured`` when ``work`` is given (``measure(work, set_aside)`` on
    ``stream``: the tax on your own work). Attached as ``Device.set_aside_tax``. The
    set-aside is this process's: another process's does not tax this one."""
    dev = device if isinstance(device, _core.Device) else _core.Device(device)
    if set_aside is None:
        set_aside = dev.persisting_l2_limit
    p = predict(dev, set_aside)
    import dataclasses
    if probe:
        p = dataclasses.replace(p, probe=_probe(dev, set_aside, stream=stream))
    if work is not None:
        p = dataclasses.replace(p, measured=measure(work, set_aside, device=dev, stream=stream))
    return p


def label(measured: bool, how: str = "") -> str:
    """The label every printed tax carries: ``"measured (how)"`` or ``"model"`` (the one
    home of these words is ``l2persist._format``; studies and tools print through this)."""
    return tax_source(measured, how)


def model_predicted(value, fmt="{:.2f}x") -> str:
    """The model's figure beside a measurement of the same thing, after it:
    ``"the model predicted 2.30x"`` (``fmt``: a format string or a callable)."""
    return tax_predicted(value, fmt)


def measurements() -> tuple[list, list, list]:
    """The rows the model is fitted to (and held out from the fit): (knees, slowdowns,
    limit-0 knees)."""
    return _core.tax_rows()


def measured_knee(ws, slowdowns, threshold: float = KNEE_THRESHOLD) -> tuple[float, float]:
    """(lo, hi]: where a measured slowdown curve (ws ascending) first reaches ``threshold``;
    hi is 0 when it never does."""
    return _core.tax_measured_knee(list(ws), list(slowdowns), float(threshold))


def companion_measurements() -> dict:
    """The companion-stream rows the model's stream constants are fitted from
    (``{"knees": [...], "streams": [...]}``, written into the core by tools/investigations/tax-fit)."""
    return _core.tax_companion_rows()


def fit_companion(capacities, companions, knees, *, footprint) -> float:
    """F_cap of knee = max(C / (1 + beta k), C - F_cap) given beta (``footprint``): the most
    the stream takes (C and knees as fractions of the L2; F_cap too, 1 when no cap fits
    better than none)."""
    return _core.tax_fit_companion(list(capacities), list(companions), list(knees),
                                   footprint=float(footprint))


def fit_stream_cost(companions, time_ratios) -> float:
    """a of time_ratio = 1 + a k: what the stream itself costs per byte written."""
    return _core.tax_fit_stream_cost(list(companions), list(time_ratios))


def fit_capacity(l2_bytes, set_asides, knees) -> float:
    """c of knee = L2 - c * set_aside, by least squares (any consistent unit)."""
    return _core.tax_fit_capacity(float(l2_bytes), list(set_asides), list(knees))


def fit_penalty(l2_bytes, coeff, set_asides, ws, slowdowns, *, base=None) -> float:
    """The miss penalty P that best explains measured slowdowns, given c and the capacity
    of written lines at limit 0 (``base``; default: the L2 size)."""
    return _core.tax_fit_penalty(float(l2_bytes), float(coeff), list(set_asides), list(ws),
                                 list(slowdowns), base=-1.0 if base is None else float(base))


__all__ = ["KINDS", "KNEE_THRESHOLD", "SHAPES", "TaxMeasurement", "TaxPrediction", "TaxProbe",
           "companion_measurements", "fit_capacity", "fit_companion", "fit_penalty",
           "fit_stream_cost", "label", "measure", "measured_knee", "measurements",
           "model_predicted", "predict", "probe", "probe_working_set", "set_aside_tax",
           "shapes"]

# The binding (csrc/py/device.c) imports nothing from this package: Device.set_aside_tax and
# DeviceProperties' repr and HTML reach the Python they hand over to through these hooks,
# registered when l2persist imports this module.
_core._set_hooks(set_aside_tax=set_aside_tax, record_repr=_format.record_repr,
                 record_html=_format.record_html)
