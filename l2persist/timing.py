"""Event timing. The samples are taken and the statistics computed in C."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from . import _core

# time_calls' defaults, from its C signature (csrc/core/l2p_timing.h's L2P_TIME_*): one source.
_DEFAULTS = {p.name: p.default for p in inspect.signature(_core.time_calls).parameters.values()}


@dataclass(frozen=True)
class Timing:
    """Timing of repeated calls, in milliseconds."""

    median: float
    min: float
    max: float
    mean: float
    stdev: float
    iqr: float
    samples: tuple = field(repr=False)
    counters: object = field(default=None, repr=False)

    @classmethod
    def from_samples(cls, samples, counters=None) -> "Timing":
        s = _core.stats(samples)
        return cls(median=s["median"], min=s["min"], max=s["max"], mean=s["mean"],
                   stdev=s["stdev"], iqr=s["iqr"], samples=tuple(samples), counters=counters)

    def bandwidth(self, nbytes: int) -> float:
        """Bytes per second at the median time."""
        return nbytes / (self.median * 1e-3)


def benchmark(fn, *, stream=None, warmup: int = _DEFAULTS["warmup"],
              repeat: int = _DEFAULTS["repeat"], device=None, flush_l2: bool = False,
              graph: bool = False, hold_us: float = _DEFAULTS["hold_us"],
              counters=None) -> Timing:
    """Time ``fn()`` with CUDA events recorded on ``stream`` around each call.

    ``fn`` must enqueue its work on that stream (``None``: the legacy default stream; a
    ``Stream`` or a foreign stream handle); ``warmup`` calls run first and are not kept, then
    ``repeat`` samples are taken. ``device`` (an index or ``Device``; default the current one)
    names where the events go when no stream says it.
    ``flush_l2=True`` writes a buffer of twice the L2 before every sample (outside the timed
    region) so each sample starts with a cold cache; it does not release persisting lines
    (``reset_persisting_l2`` does that). ``graph=True`` captures ``fn`` once and times graph
    replays, for kernels shorter than the launch overhead (needs ``stream=``).

    Before each sample a one-thread kernel spins on the GPU for ``hold_us`` microseconds, so
    that the host has enqueued the sample's launches before the GPU reaches the start event:
    the samples then measure GPU execution, not the host's launch latency (as nvbench does).
    ``hold_us=0`` times what a caller launching from idle sees.

    ``counters=[...]`` also measures those metrics (``l2persist.measure``) on one more call of
    the same ``fn``, after the timed ones and with the same cache preparation (an L2 flush
    before each pass when ``flush_l2``), and attaches them as ``Timing.counters``.
    """
    samples = _core.time_calls(fn, stream=stream, warmup=warmup, repeat=repeat, device=device,
                               flush_l2=flush_l2, graph=graph, hold_us=hold_us)
    measured = None
    if counters:
        from .counters import measure
        if stream is None:
            dev = device
        elif isinstance(stream, _core.Stream):
            dev = stream.device
        else:  # a foreign stream: ask the driver which device it belongs to
            with _core.Stream(stream) as wrapped:
                dev = wrapped.device
        prep = (lambda: _core.time_calls(lambda: None, stream=stream, warmup=0, repeat=1,
                                         device=dev, flush_l2=True, hold_us=0)) \
            if flush_l2 else None
        measured = measure(fn, counters, device=dev, warmup=prep)
    return Timing.from_samples(samples, counters=measured)

__all__ = ["Timing", "benchmark"]
