"""tune(): does L2 persistence help *your* workload, and with which settings?

The search, the statistics and the decision are the C core's (``csrc/core/l2p_tune.c``); this
module installs each configuration the core asks for (the persisting limit, a window per stream
or graph), calls your ``fn`` between CUDA events, and restores everything it changed, also when
an exception or KeyboardInterrupt passes through.

Every result is quoted against what you have without l2persist: (a) persisting limit 0 and no
window, (b) the device's default limit and no window. (c) is the chosen set-aside without any
window (what the set-aside alone costs), (d) the chosen configuration. The pick is recommended
only when it beats the better of (a) and (b) beyond noise (the bootstrap interval of the
speedup lies above 1 and the speedup reaches ``min_gain``); otherwise the answer is "no
persistence".
"""

from __future__ import annotations

import contextlib
import html
import time
from dataclasses import dataclass, field

from . import _core
from ._format import human_bytes, node_label, read_json, save_json, tax_predicted, tax_source

__all__ = ["Target", "TuneResult", "Verdict", "describe", "timed_stream",
           "tune", "verdict",
           "EXPLAIN_COUNTERS"]

#: The search's defaults: the C core's (l2p_tune_options_default), read once here; tune() and
#: verdict() take theirs from it.
DEFAULTS = _core.tune_defaults()

# The counters that explain a persistence result (friendly names of counter_names()). On an
# H200 the set-aside alone (max, no window) left every sector count of the hot/cold kernel
# within 2 % (lookups, hits, misses, fabric, DRAM bytes) while L2 throughput fell from 73 % to
# 34 % of peak and the time grew 2.2x: the penalty is lost L2 throughput, not extra traffic.
EXPLAIN_COUNTERS = ("gpu_time_ns", "dram_bytes_read", "dram_bytes_write", "l2_hit_rate",
                    "l2_miss_sectors", "l2_fabric_sectors", "l2_throughput_pct",
                    "dram_throughput_pct", "l2_persisting_requests",
                    "l2_persisting_hit_requests", "l2_normal_requests", "l2_normal_hit_requests")


@dataclass(frozen=True)
class Target:
    """A region the tuner may put an access policy window on.

    ``on`` is where the window goes: an l2persist ``Stream``, a foreign stream (PyTorch, CuPy,
    cuda.core, or 0/1/2 for the default streams) or a ``Graph`` (every kernel node). ``None`` means tune's
    ``stream=``. Targets on the same stream are alternatives: a stream holds one window.
    """

    buffer: object
    offset: int = 0
    num_bytes: int | None = None
    on: object = None


@dataclass(frozen=True)
class Verdict:
    """The better-baseline rule applied to measured samples (``verdict()``): the baseline is
    the faster of (a) limit 0 and (b) the default limit, both without a window; the candidate
    helps when its speedup over that baseline reaches ``1 + min_gain`` and the bootstrap
    interval of the speedup lies above 1."""

    baseline: str          # "limit0" or "default"
    baseline_ms: float     # medians
    candidate_ms: float
    speedup: float         # baseline_ms / candidate_ms
    ci_low: float
    ci_high: float
    helps: bool
    slows: bool = False    # the rule's mirror: interval below 1, loss of at least min_gain
    confidence: float = DEFAULTS["confidence"]
    min_gain: float = DEFAULTS["min_gain"]

    @property
    def outcome(self) -> str:
        """In words: "helps" (the rule says so), "slows the work" (its mirror: the whole
        interval lies below 1 and the loss reaches min_gain) or "does not help" (neither)."""
        if self.helps:
            return "helps"
        return "slows the work" if self.slows else "does not help"

    def __str__(self) -> str:
        base = "limit 0" if self.baseline == "limit0" else "the default limit"
        ci = f"{self.confidence:.0%} interval {self.ci_low:.3f}-{self.ci_high:.3f}x"
        if self.helps:
            return (f"helps: {self.speedup:.3f}x faster than {base} ({self.baseline_ms:.4f} -> "
                    f"{self.candidate_ms:.4f} ms, {ci})")
        return (f"does not help beyond noise: {self.speedup:.3f}x against {base} ({ci}; "
                f"needs >= {1 + self.min_gain:.3f}x with the interval above 1)")


def verdict(limit0, default, candidate, *, min_gain: float = DEFAULTS["min_gain"],
            confidence: float = DEFAULTS["confidence"], seed: int = DEFAULTS["seed"],
            rounds: int = 1) -> Verdict:
    """Does ``candidate`` beat what a user has without l2persist? Three sequences of samples
    (ms): (a) limit 0 and no window, (b) the device's default limit and no window, and the
    candidate. The rule is the C core's (``l2p_tune_verdict``), the one ``tune`` uses.
    ``rounds``: when the three were measured in that many interleaved rounds of equal size,
    the interval also covers the spread between rounds (a drifting device)."""
    v = _core.tune_verdict(limit0, default, candidate, min_gain=min_gain,
                           confidence=confidence, seed=seed, rounds=rounds)
    return Verdict(confidence=confidence, min_gain=min_gain, **v)


class _Targets:
    """The tuner's targets as a Plan whose entries are off (each window's extent kept): the
    alternatives groups come from it, and each configuration is ``targets.configured(cfg)``,
    installed by the core's plan transaction (order, alternatives and restore live there)."""

    def __init__(self, dev, targets, stream):
        from .plan import Plan
        self.plan = Plan(dev)
        for t in targets:
            t = t if isinstance(t, Target) else Target(t)
            carrier = t.on if t.on is not None else stream
            if carrier is None:
                raise ValueError("targets: a window goes on a stream or a graph; pass stream= "
                                 "or Target(buffer, on=stream_or_graph)")
            w = _core.AccessPolicyWindow(t.buffer, t.num_bytes, offset=t.offset, clamp=True)
            self.plan.add(carrier, w, enabled=False)
        entries = self.plan.entries
        self.windows = [e["window"] for e in entries]
        self.carriers = [e["carrier"] for e in entries]
        self.groups = self.plan.groups

    def configured(self, config):
        return self.plan.configured(_plain(config))

    def first_stream(self):
        """A Stream for the first stream carrier (the timing stream when tune got none)."""
        for e in self.plan.entries:
            if e["kind"] == "stream":
                c = e["carrier"]
                return c if isinstance(c, _core.Stream) else \
                    _core.Stream(wrap=c, device=self.plan.device)
        return None


def describe(config) -> str:
    """A tuner configuration ({"set_aside", "windows": [None | {"hit_ratio", "hit_prop",
    "miss_prop"}]}) in words: "set-aside 11.25 MiB, window 0: hitRatio 0.50
    persisting/streaming"; "limit 0, no window" for doing nothing."""
    wins = [w for w in config["windows"] if w is not None]
    if config["set_aside"] == 0 and not wins:
        return "limit 0, no window"
    parts = [f"set-aside {human_bytes(config['set_aside'])}"]
    for i, w in enumerate(config["windows"]):
        if w is not None:
            parts.append(f"window {i}: hitRatio {w['hit_ratio']:.2f} "
                         f"{_name(w['hit_prop'])}/{_name(w['miss_prop'])}")
    if not wins:
        parts.append("no window")
    return ", ".join(parts)


def _name(prop) -> str:
    return getattr(prop, "name", str(prop)).lower()


def _plain(config):
    """A config with plain ints for the properties (JSON)."""
    return {"set_aside": config["set_aside"],
            "windows": [None if w is None else {"hit_ratio": w["hit_ratio"],
                                                 "hit_prop": int(w["hit_prop"]),
                                                 "miss_prop": int(w["miss_prop"])}
                        for w in config["windows"]]}


@dataclass
class TuneResult:
    """What tune() found: baselines, the pick, its speedup and interval, every trial."""

    device: str
    default_limit: int
    limit0_ms: float
    default_ms: float
    aside_ms: float
    found: dict
    found_ms: float
    recommended: dict
    persistence_helps: bool
    baseline: str
    speedup: float
    ci: tuple
    confidence: float
    evals: int
    wall_s: float
    trials: list = field(repr=False)
    set_aside_levels: list = field(repr=False)
    counters: dict | None = field(default=None, repr=False)
    #: Under MPS, the server's set-aside (bytes): the only one this process can have, so only
    #: the windows were searched and (a) = (b) = (c) is "no window" at it. None outside MPS.
    mps_set_aside: int | None = None
    #: What the recommended set-aside costs other work: a write-heavy probe at it against
    #: limit 0 ({"set_aside", "slowdown", "base_ms", "at_ms", "working_set"}), measured by
    #: l2persist.tax.probe, with the model's ``predicted`` slowdown for the same probe.
    #: None when the recommendation sets no set-aside of its own (limit 0
    #: or the default) or the probe could not run (then ``tax_note`` says why).
    tax: dict | None = None
    tax_note: str = ""
    #: Milliseconds one change of the persisting limit took (median of a set and a
    #: restore; it synchronises the device). None when the limit was not switched.
    switch_ms: float | None = None
    #: Scoped or process-wide (``_core.tune_scope``): saving_ms per call of fn, overhead_ms of
    #: setting and releasing the limit around a phase, min_calls (the shortest phase, in calls
    #: of fn, where scoping pays). None without a recommendation or a switch cost.
    scope: dict | None = None
    rechecked: int = 0
    confirm_rounds: int = 0
    #: With discovered targets: per buffer, its name, nodes, the window part and the window.
    placements: list | None = None
    #: The screening, per target: {"probe_ms", "kept"}; None when it did not run.
    screen: list | None = None
    #: The pick re-measured against both baselines in fresh interleaved rounds after the
    #: search ({"speedup", "ci", "held", "rounds"}); a pick that does not hold is not
    #: recommended. None when the search recommended nothing.
    recheck: dict | None = None
    _targets: object = field(default=None, repr=False, compare=False)

    @property
    def baseline_ms(self) -> float:
        """The better of (a) limit 0 and (b) the default limit, no window (the C core chose
        which: ``baseline``)."""
        return self.default_ms if self.baseline == "default" else self.limit0_ms

    def verdict(self) -> str:
        """The answer in one line, then one line on the tax and one on the scope when they
        apply."""
        lines = [self._answer()]
        if self.tax_line():
            lines.append(self.tax_line())
        if self.scope_line():
            lines.append(self.scope_line())
        return "\n".join(lines)

    def _answer(self) -> str:
        lo, hi = self.ci
        if self.mps_set_aside is not None:
            fixed = (f"under MPS the set-aside is the server's {human_bytes(self.mps_set_aside)}"
                     f" and only windows were tuned: ")
            if self.persistence_helps:
                return fixed + (f"{describe(self.recommended)} is {self.speedup:.3f}x faster "
                                f"than no window ({self.confidence:.0%} interval "
                                f"{lo:.3f}-{hi:.3f}x)")
            return fixed + (f"no window helps beyond noise (best found {self.speedup:.3f}x, "
                            f"interval {lo:.3f}-{hi:.3f}x)")
        if self.persistence_helps:
            return (f"persistence helps: {describe(self.recommended)} is {self.speedup:.3f}x "
                    f"faster than the better baseline ({self.confidence:.0%} interval "
                    f"{lo:.3f}-{hi:.3f}x; re-measured {self.recheck['speedup']:.3f}x)"
                    if self.recheck else
                    f"persistence helps: {describe(self.recommended)} is {self.speedup:.3f}x "
                    f"faster than the better baseline ({self.confidence:.0%} interval "
                    f"{lo:.3f}-{hi:.3f}x)")
        if self.recheck and not self.recheck["held"]:
            rlo, rhi = self.recheck["ci"]
            return (f"persistence does not help: the search's pick ({self.speedup:.3f}x, "
                    f"interval {lo:.3f}-{hi:.3f}x) did not hold when re-measured in fresh "
                    f"rounds ({self.recheck['speedup']:.3f}x, interval {rlo:.3f}-{rhi:.3f}x): "
                    f"use {describe(self.recommended)}")
        return (f"persistence does not help beyond noise (best found {self.speedup:.3f}x, "
                f"interval {lo:.3f}-{hi:.3f}x): use {describe(self.recommended)}")

    def tax_line(self) -> str:
        """What the set-aside costs all other work, in one line ("" when there is none)."""
        if self.tax is None:
            return self.tax_note
        t = self.tax
        who = ("every MPS client of this GPU pays it" if self.mps_set_aside is not None
               else "all other work of the process pays it while the limit is set")
        # fn's own tax, (c) against the better baseline, when (c) is at the probe's set-aside
        own = ""
        if self.found and self.found.get("set_aside") == t["set_aside"] and self.baseline_ms:
            own = (f"on fn itself {tax_source(True, '(c), no window, against the better baseline')}"
                   f" {self.aside_ms / self.baseline_ms:.3f}x; ")
        predicted = (f"; {tax_predicted(t['predicted'])}" if t.get("predicted") is not None
                     else "")
        probe = tax_source(True, f"a write-heavy probe over {human_bytes(t['working_set'])}")
        return (f"tax at set-aside {human_bytes(t['set_aside'])}: {own}on written data "
                f"{probe} {t['slowdown']:.2f}x slower ({t['base_ms']:.4f} -> "
                f"{t['at_ms']:.4f} ms){predicted}; {who}")

    def scope_line(self) -> str:
        """Set the limit around a phase, or for the process ("" without a recommendation)."""
        sc = self.scope
        if sc is None or not sc["min_calls"]:
            return ""
        cost = (f"setting and releasing the limit costs {sc['overhead_ms']:.2f} ms and "
                f"synchronises the device; each call of fn saves {sc['saving_ms']:.4f} ms")
        if sc["min_calls"] == 1:
            where = "set the limit around each phase that runs fn, even a single call"
        else:
            where = (f"set the limit around phases of at least {sc['min_calls']} calls of fn, "
                     f"or keep it for the process")
        return (f"scope: {where} ({cost}); never per kernel inside a pipeline, and not inside "
                f"a stream capture (the limit cannot change there: set it before capturing "
                f"or replaying)")

    def rows(self) -> list[dict]:
        base = self.baseline_ms
        if self.mps_set_aside is not None:
            rows = [(f"(a) MPS server's set-aside {human_bytes(self.mps_set_aside)}, no window",
                     self.limit0_ms), (f"(d) {describe(self.found)}", self.found_ms)]
            return [{"configuration": name, "median_ms": ms, "speedup": base / ms}
                    for name, ms in rows]
        rows = [("(a) limit 0, no window", self.limit0_ms),
                (f"(b) default limit {human_bytes(self.default_limit)}, no window",
                 self.default_ms),
                (f"(c) set-aside {human_bytes(self.found['set_aside'])}, no window",
                 self.aside_ms),
                (f"(d) {describe(self.found)}", self.found_ms)]
        return [{"configuration": name, "median_ms": ms, "speedup": base / ms}
                for name, ms in rows]

    def table(self, trials: bool = False) -> str:
        """Markdown: the four configurations (speedup against the better of (a) and (b)),
        the verdict, and with ``trials=True`` every configuration the search measured."""
        out = ["| configuration | median ms | speedup vs best baseline |", "|---|---:|---:|"]
        out += [f"| {r['configuration']} | {r['median_ms']:.4f} | {r['speedup']:.3f}x |"
                for r in self.rows()]
        out.append("")
        out.append(f"{self._answer()}; {self.evals} configurations searched in "
                   f"{self.wall_s:.1f} s on {self.device}.")
        out += [line for line in (self.tax_line(), self.scope_line()) if line]
        if self.placements:
            out += ["", "| buffer | nodes | bytes | window |", "|---|---|---:|---|"]
            for p in self.placements:
                w = p["window"]
                win = "none" if w is None else (
                    f"hitRatio {w['hit_ratio']:.2f} {_name(w['hit_prop'])}/"
                    f"{_name(w['miss_prop'])} over {human_bytes(p['window_bytes'])}"
                    + (f" at offset {p['window_offset']} (in part: max window)"
                       if p["partial"] else ""))
                if not p["searched"]:
                    win += " (screened out)"
                out.append(f"| {p['name']} | {', '.join(p['nodes'])} | "
                           f"{human_bytes(p['nbytes'])} | {win} |")
        if self.counters:
            out += ["", "| counter | baseline | pick |", "|---|---:|---:|"]
            out += [f"| {k} | {v['baseline']:.6g} | {v['pick']:.6g} |"
                    for k, v in self.counters.items()]
        if trials:
            out += ["", "| # | phase | configuration | median ms |", "|---:|---|---|---:|"]
            out += [f"| {i} | {t['phase']} | {describe(t['config'])} | {t['median']:.4f} |"
                    for i, t in enumerate(self.trials)]
        return "\n".join(out)

    def _repr_html_(self) -> str:
        # configurations name the user's buffers: escaped, as the verdict's lines are
        cells = "".join(f"<tr><td>{html.escape(r['configuration'])}</td><td>"
                        f"{r['median_ms']:.4f}</td><td>{r['speedup']:.3f}x</td></tr>"
                        for r in self.rows())
        return (f"<table><tr><th>configuration</th><th>median ms</th><th>speedup vs best "
                f"baseline</th></tr>{cells}</table>"
                + "".join(f"<p>{html.escape(line)}</p>" for line in self.verdict().splitlines()))

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if not k.startswith("_")}
        for k in ("found", "recommended"):
            d[k] = _plain(d[k])
        d["trials"] = [dict(t, config=_plain(t["config"])) for t in self.trials]
        d["ci"] = list(self.ci)
        return d

    def to_json(self, path=None) -> str:
        return save_json(self.to_dict(), path, indent=2)

    @classmethod
    def from_json(cls, text_or_path) -> "TuneResult":
        """A result saved with to_json(), e.g. to redraw it on a machine without a GPU (it
        cannot apply() there)."""
        import dataclasses
        d, where = read_json(text_or_path, what="an l2persist TuneResult")
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        missing = [k for k, f in fields.items() if k not in d and not k.startswith("_")
                   and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        unknown = sorted(k for k in d if k not in fields or k.startswith("_"))
        if missing or unknown:
            raise ValueError(
                f"{where}: not the JSON of a TuneResult (TuneResult.to_json): "
                + "; ".join(([f"missing field(s) {', '.join(map(repr, missing))}"]
                             if missing else [])
                            + ([f"unknown field(s) {', '.join(map(repr, unknown))}"]
                               if unknown else [])))
        try:
            d["ci"] = tuple(d["ci"])
            return cls(**d)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: not the JSON of a TuneResult (TuneResult.to_json): "
                             f"field 'ci': {e}") from None

    def plan(self, config: dict | None = None):
        """The recommended configuration (or ``config``) as an ``l2persist.Plan`` over the
        tuned streams and graphs: install it with ``with``, or save it with ``to_json``."""
        if self._targets is None:
            raise RuntimeError("plan: this result was loaded from JSON or its streams are "
                               "gone; run tune() again")
        return self._targets.configured(config or self.recommended)

    @contextlib.contextmanager
    def apply(self, config: dict | None = None):
        """Install the recommended configuration (or ``config``) on the tuned streams and
        graphs for the ``with`` block; restore the limit and windows after it (the Plan's
        transaction)."""
        if self._targets is None:
            raise RuntimeError("apply: this result was loaded from JSON or its streams are "
                               "gone; run tune() again")
        with self.plan(config):
            yield self


def tune(fn, targets=None, *, candidates=None, stream=None, device=None,
         repeat: int = DEFAULTS["repeat"], warmup: int = 2, max_evals: int | None = None,
         hit_ratios=None, tune_props: bool = True,
         confirm_rounds: int = DEFAULTS["confirm_rounds"],
         min_gain: float = DEFAULTS["min_gain"], confidence: float = DEFAULTS["confidence"],
         counters=None, hold_us: float = 50.0, seed: int = DEFAULTS["seed"], tax: bool = True,
         screen_keep: int = DEFAULTS["screen_keep"],
         recheck_rounds: int = DEFAULTS["recheck_rounds"]) -> TuneResult:
    """Find the persisting-L2 set-aside and access policy windows that make ``fn`` fastest,
    and say whether they beat doing nothing.

    Parameters:

    - ``fn()``: enqueues the workload (any library's kernels, or a graph launch) on
      ``stream``; it must be repeatable.
    - ``targets``: buffers (anything ``as_buffer`` takes) or ``Target``s (a sub-range, or a
      window on another stream or on a graph's kernel nodes). Targets on one stream are
      alternatives (a stream holds one window). ``None``: the buffers are discovered with
      ``l2persist.foreign.discover(fn, stream=, candidates=)`` (each candidate's window goes
      on the carrier discovery names: the graph nodes that use it, or the stream eager work
      runs on; ``fn`` itself is timed), and the result's
      ``placements`` say which buffer got which window on which nodes. A buffer larger than
      the device's ``accessPolicyMaxWindowSize`` is windowed in part: its first max bytes
      (``placements`` give the offset and size).
    - ``candidates``: with ``targets=None``, what discovery may match (tensors, a dict of
      name to tensor, l2persist buffers); the names appear in the report.
    - ``stream``: where ``fn`` runs and where windows go by default (any library's stream);
      ``device``: the device (default: the stream's, else 0).
    - ``repeat``, ``warmup``, ``hold_us``: each configuration is timed ``warmup`` +
      ``repeat`` times with CUDA events, each sample after a ``hold_us`` spin so that the
      launch overhead is hidden, persisting lines reset before each configuration.
    - ``max_evals``: distinct configurations searched, the two baselines included (default
      14 + 4 per target).
    - ``hit_ratios``: the hitRatio levels searched (ascending, in (0, 1]; default 0.1 .. 1.0).
    - ``tune_props``: also try hitProp NORMAL and missProp NORMAL on the best window.
    - ``confirm_rounds``: the pick and the baselines are re-measured in this many interleaved
      rounds (more, up to 8x, while the verdict is undecided).
    - ``min_gain``: the least speedup worth recommending (0.01: 1 %). Also the most a larger
      set-aside may be "within noise" of a smaller one before the smaller one is preferred.
    - ``confidence``: of the speedup's interval; "helps" needs the interval above 1.
    - ``counters``: ``True`` (or a list of names) also measures the counters of the better
      baseline and of the pick (``EXPLAIN_COUNTERS`` by default).
    - ``seed``: of the bootstrap (the search itself is deterministic given the timings).
    - ``tax``: probe what the recommended set-aside costs other work (``l2persist.tax``).
    - ``recheck_rounds``: a pick the search recommends is re-measured against both baselines
      in this many fresh interleaved rounds (0: not), more while the rule is undecided (as in
      the confirmation: one noisy round of three must not veto a real gain), and dropped
      for the better baseline when it decidedly no longer helps (measured:
      ``scatter_reduce_`` amax claimed 1.044x in the search and re-measured 0.975x). C core.

    Timing brackets the work: fn is run once first, noting where its work runs (its PyTorch
    CUDA graph replays, and through the launch log its kernel launches). If it ran on a stream
    other than the timed one (``g.replay()`` and eager PyTorch work run on PyTorch's *current*
    stream, a CuPy kernel on the stream it is given), ``stream=`` is refused with both streams
    named (or, with no ``stream=``, the stream the work ran on is timed): see ``timed_stream``.
    - ``screen_keep``: with more targets than this, or with several targets on one stream
      (alternatives: a stream holds one window), each is first probed once alone at the
      largest set-aside (the most a window on it can persist), and the search runs on the
      ``screen_keep`` fastest of those whose probe beat the better baseline (always on the
      fastest, so that a "don't" is searched for too); the others get no window (``screen``
      in the result, and in ``placements``). The budget follows: 14 + one probe per target +
      4 per searched target. 0: search all.

    The search (C core, ``l2p_tune.c``): the two baselines (limit 0; the default limit), a
    Fibonacci search along the guide's ridge (hitRatio = set-aside / bytes), a compass search
    of the hit ratio, the properties, a polish of the neighbours on every axis, a recheck of the
    four fastest windows interleaved (so that a drifting device cannot pick the winner) that
    prefers the smallest set-aside within noise (a set-aside taxes all other work), then the
    confirmation against both baselines by ``verdict``'s rule.

    A known limit: the search assumes the landscape has a slope around its optimum. An optimum
    at a single grid point off the ridge, with no gain at its neighbours (replayed: 15 %
    better at set-aside 7.5 MiB and hitRatio 1.0 for 32 MiB, flat elsewhere), is found only if
    the search happens to measure that point: it measures 14-18 of ~440, and in the replay it
    never does (``tests/test_tune_replay.py::test_isolated_optimum_is_not_found``). Measured
    landscapes (hot/cold, histograms, streaming, on the H100 and H200) have slopes.

    What it changes and restores: the device's persisting L2 limit (restored to what it was),
    the access policy windows of the streams and graphs it puts windows on (restored), and the
    persisting lines (reset after each configuration and at the end: lines made persisting by
    one configuration would otherwise outlive it). The limit cannot change inside a stream
    capture; do not call ``tune`` while any stream of the device is capturing. Changing the
    limit waits for all work in flight on the device (a device-wide synchronisation), which
    is why the result's ``scope`` says when to set it around a phase and when to keep it.
    Under MPS the set-aside is the server's: only windows are searched, and the tax line shows
    what the server's set-aside costs every client.
    """
    if stream is not None and not isinstance(stream, _core.Stream):
        # an int is a stream handle, not a device; a default stream's (0 / 1 / 2) is device's
        stream = _core.Stream(wrap=stream, device=device)
    if stream is not None:
        dev = stream.device
        if device is not None and _core.Device(device).index != dev.index:
            raise ValueError(f"device: {device} differs from the stream's device {dev.index}")
    else:
        dev = _core.Device(0 if device is None else device)
    found_targets = None
    if targets is None:
        found_targets = _discover(fn, stream, candidates)
        targets = [Target(c.buffer, on=c.carrier) for c in found_targets]
    elif candidates is not None:
        raise ValueError("candidates: only used to discover targets; pass targets=None with "
                         "it, or targets without it")
    targets = list(targets) if isinstance(targets, (list, tuple)) else [targets]
    inst = _Targets(dev, targets, stream)
    timing_stream = stream if stream is not None else inst.first_stream()
    timing_stream = timed_stream(fn, timing_stream, dev, given=stream is not None)
    from .plan import Plan
    session = Plan(dev)  # an empty plan: the transaction every configuration is applied in

    def evaluate(config, n):
        session.apply(inst.configured(config))
        return _core.time_calls(fn, stream=timing_stream, warmup=warmup, repeat=n,
                                device=dev, hold_us=hold_us)

    t0 = time.perf_counter()
    session.install()
    try:
        r = _core.tune_search(evaluate, dev, [w.num_bytes for w in inst.windows], inst.groups,
                              hit_ratios=hit_ratios, tune_props=tune_props,
                              max_evals=max_evals or 0, repeat=repeat,
                              confirm_rounds=confirm_rounds, min_gain=min_gain,
                              confidence=confidence, seed=seed, screen_keep=screen_keep,
                              recheck_rounds=recheck_rounds)
        recheck = r["recheck"]  # the C core's: fresh rounds, more while undecided
        measured = None
        if counters:
            names = list(EXPLAIN_COUNTERS if counters is True else counters)
            measured = _explain(fn, inst, session, dev, r, names)
    finally:
        session.restore()
    wall_s = time.perf_counter() - t0
    mps = dev.persisting_l2_limit if dev.mps else None
    res = TuneResult(
        device=dev.properties.name, default_limit=dev.default_persisting_l2_limit,
        limit0_ms=r["limit0_ms"], default_ms=r["default_ms"], aside_ms=r["aside_ms"],
        found=r["found"], found_ms=r["found_ms"], recommended=r["recommended"],
        persistence_helps=r["persistence_helps"], baseline=r["baseline"], speedup=r["speedup"],
        ci=(r["ci_low"], r["ci_high"]), confidence=confidence, evals=r["evals"],
        wall_s=wall_s, trials=r["trials"], set_aside_levels=r["set_aside_levels"],
        counters=measured, mps_set_aside=mps, rechecked=r["rechecked"], screen=r["screen"],
        confirm_rounds=r["confirm_rounds"], recheck=recheck, _targets=inst)
    if found_targets is not None:
        res.placements = _placements(found_targets, inst, res.recommended, res.screen)
    if res.persistence_helps and mps is None:
        res.switch_ms = _switch_ms(dev, res.recommended["set_aside"])
        if res.switch_ms is not None:
            res.scope = _core.tune_scope(res.switch_ms, res.baseline_ms, res.found_ms)
    if tax:
        _probe_tax(res, dev, timing_stream)
    return res


def _handle(stream) -> int:
    return 0 if stream is None else stream.handle


def timed_stream(fn, stream, dev, *, given: bool):
    """The stream whose events bracket fn's work: `stream`, checked against where fn's work
    ran when it ran once (``l2persist.process.discover.work_streams``): the PyTorch stream of
    each CUDA graph replay, and through the launch log the stream of each kernel launch. Work
    that ran elsewhere is refused with a ValueError naming both streams when `stream` was
    `given`; otherwise the stream it ran on is timed (refused too where it ran on several and
    none is `stream`). Measured: ``tune(lambda: g.replay(), stream=s)`` with the replay on
    PyTorch's current stream timed 6 us of nothing and called it 1.574x faster; eager PyTorch
    work on its current stream with the events on ``stream=s`` timed 4.7 us of nothing while
    the right window gained 1.69x (H100).

    Several streams are accepted where `stream` is among them (fn joins its other streams to
    it, or its events would not bracket them; l2persist cannot tell). Where no launch log can
    be made (CUPTI missing, or another tool holding its one subscriber) only the replays are
    checked. Events against wall time cannot tell work on another stream from host-bound work:
    a small graph replayed on the timed stream itself timed 6.8 us in events against 407 us of
    wall time per call (H200, a notebook run), so that check was tried and removed."""
    from .process.discover import LaunchStreams, stream_key, work_streams
    work = work_streams(fn, dev)
    handles = sorted({stream_key(s.cuda_stream) for s in work.replays})
    if len(handles) > 1:
        raise ValueError(f"fn: replays CUDA graphs on {len(handles)} streams "
                         f"({', '.join(hex(h) for h in handles)}); time each on its own")
    if handles and handles[0] != stream_key(_handle(stream)):
        if given:
            raise ValueError(
                f"stream: fn replays its CUDA graph on stream {handles[0]:#x} (PyTorch's "
                f"current stream when it ran), but the events go on stream "
                f"{_handle(stream):#x}, where they would time nothing. Pass "
                f"stream=torch.cuda.current_stream(), or replay under "
                f"`with torch.cuda.stream(s):`")
        stream = _core.Stream(wrap=work.replays[0])
    ran = work.launch_streams()
    if ran and stream_key(_handle(stream)) not in ran:
        here = _handle(stream)
        if ran[0] in work.gone:
            raise ValueError(
                f"stream: fn's kernels ran on stream {ran[0]:#x} ({work.kernels_on(ran[0])}), "
                f"which fn destroyed before it returned (a stream made per call): nothing can "
                f"time or window a stream that no longer exists. Launch fn's kernels on a "
                f"stream that outlives fn and pass it as stream=")
        if given or handles or len(ran) > 1:
            where = "; ".join(f"{h:#x} ({work.kernels_on(h)})" for h in ran)
            raise ValueError(
                f"stream: fn's kernels ran on stream{'s' if len(ran) > 1 else ''} {where}, but "
                f"the events go on stream {here:#x}, where they would time nothing. Pass "
                f"stream= the stream fn's work runs on (PyTorch's eager work: "
                f"torch.cuda.current_stream(); CuPy's: the stream its kernels are given), or "
                f"run the work on stream {here:#x} (`with torch.cuda.stream(s):`, "
                f"`with cupy.cuda.Stream.from_external(s):`)")
        stream = LaunchStreams(device=dev)(ran[0])
    return stream


def _discover(fn, stream, candidates):
    """The buffers fn's kernels use, from l2persist.process.discover."""
    try:
        from .process import discover as discovery
    except ImportError as e:
        raise ValueError("targets: none given, and l2persist.process.discover, which discovers "
                         f"them, is not available ({e}); pass targets=") from None
    found = list(discovery.discover(fn, stream=stream, candidates=candidates))
    if not found:
        raise ValueError("targets: none given and discovery found no buffer in fn's kernels; "
                         "pass targets= or candidates=")
    return found


def _placements(found, inst, config, screen):
    """Per discovered buffer: its name, the nodes that use it, and the window it got (the
    part of it a window covers, when it is larger than the device's max window), and whether
    the screening kept it for the search."""
    out = []
    for i, (c, w, spec) in enumerate(zip(found, inst.windows, config["windows"])):
        offset = w.base_ptr - w.target.ptr
        # Nodes as text ("position:kernel"): the placements are stored as JSON and printed.
        out.append({"name": c.name, "nodes": [node_label(n) for n in c.nodes],
                    "nbytes": int(c.nbytes),
                    "window_offset": offset, "window_bytes": w.num_bytes,
                    "partial": w.num_bytes < c.nbytes, "window": spec,
                    "searched": True if screen is None else screen[i]["kept"]})
    return out


def _switch_ms(dev, set_aside):
    """The cost of one change of the persisting limit (ms, median of setting it and setting
    it back). Each change synchronises the device."""
    before = dev.persisting_l2_limit
    if set_aside == before:
        return None
    times = []
    try:
        for value in (set_aside, before):
            t = time.perf_counter()
            dev.persisting_l2_limit = value
            times.append((time.perf_counter() - t) * 1e3)
    finally:
        if dev.persisting_l2_limit != before:
            dev.persisting_l2_limit = before
    return sum(times) / len(times)


def _probe_tax(res, dev, stream):
    """Fill res.tax from l2persist.tax.probe at the set-aside the result leaves in place."""
    set_aside = res.mps_set_aside if res.mps_set_aside is not None else (
        res.recommended["set_aside"] if res.persistence_helps else 0)
    if not set_aside or (res.mps_set_aside is None and set_aside == res.default_limit):
        return
    try:
        from . import tax as tax_module
    except ImportError:
        res.tax_note = ("tax: not measured (l2persist.tax is not available); a set-aside can "
                        "slow written data of all other work")
        return
    if res.mps_set_aside is not None:
        # An MPS client cannot set limit 0 for the probe's baseline: give the model's word.
        pred = tax_module.predict(dev, set_aside)
        res.tax_note = (f"tax, not measured (an MPS client cannot set limit 0): "
                        f"{pred.summary()}; every MPS client of this GPU pays it")
        return
    p = tax_module.probe(dev, set_aside, stream=stream)
    res.tax = {"set_aside": int(set_aside), "slowdown": float(p.slowdown),
               "base_ms": float(p.base_ms), "at_ms": float(p.at_ms),
               "working_set": int(p.working_set), "predicted": float(p.predicted)}


def _explain(fn, inst, session, dev, r, names):
    """Counters of the better baseline and of the found configuration, fn warmed inside the
    pass (a CUPTI pass starts with an invalidated L2)."""
    from .counters import measure

    base_cfg = {"set_aside": r["set_aside_levels"][0] if r["baseline"] == "limit0"
                else dev.default_persisting_l2_limit,
                "windows": [None] * len(inst.windows)}
    out = {}
    for key, cfg in (("baseline", base_cfg), ("pick", r["found"])):
        session.apply(inst.configured(cfg))
        c = measure(fn, names, device=dev, warmup=fn)
        for name in names:
            out.setdefault(name, {})[key] = c[name]
    return out
