"""advise(): one persistence plan for every graph and hot function of a process.

The persisting set-aside belongs to the CUDA context: a process has one, changing it waits for
the whole device, and every kernel of the process pays it, windowed or not (measured on the
H200 with no window anywhere: a PyTorch training step 1.18x, its inference forward 1.31x and a
torch_geometric step 1.24x slower at the maximum). So the question a server faces is not "does
persistence help this graph" but "which one set-aside, and which windows on which graphs,
make the whole process faster". ``advise`` answers it on the process's own work::

    advice = l2persist.advise({
        "decode_bs1": (lambda: g1.replay(), 0.5),   # fn, share of the process's GPU time
        "decode_bs8": (lambda: g8.replay(), 0.3),
        "hash_upsert": (upsert, 0.2),
    })
    print(advice)                 # one line per workload: baseline, plan, speedup, its tax
    with advice.plan:             # install the one plan for the process
        serve()
    advice.plan.to_json("plan.json")   # and apply it at the next start with Plan.from_json

The search and every decision are the C core's (``csrc/core/l2p_advise.c``): a joint search
over the set-aside with each workload's windows searched at each level, the objective the
weighted total time of all workloads (so each one's tax is measured on itself), then a
confirmation in fresh interleaved rounds of every workload at limit 0, the default limit, the
chosen set-aside without windows and the whole plan. The advice is "don't" unless the weighted
total helps by ``verdict``'s rule and no workload marked ``must_not_slow`` slows.
"""

from __future__ import annotations

import dataclasses
import html
import time
import warnings
from dataclasses import dataclass, field

from . import _core
from ._format import human_bytes, load_json, save_json
from .tune import Target, timed_stream

__all__ = ["DEFAULTS", "advise", "Advice", "WorkloadAdvice", "WorkloadSet"]

#: The advisor's default options, from their one home: the C core's
#: l2p_advise_options_default (tries, search_repeat, repeat, confirm_rounds, recheck_rounds,
#: remeasure_levels, remeasure_rounds, min_gain, confidence, seed). advise()'s signature shows
#: them.
DEFAULTS = _core.advise_defaults()

#: Targets per workload considered (discovery gives the largest first).
MAX_TARGETS = 8
#: Workloads one advice weighs (the core's L2P_ADVISE_MAX_WORK).
MAX_WORKLOADS = 64


@dataclass
class WorkloadAdvice:
    """One workload under the advice, from the confirmation rounds (medians, ms)."""

    name: str
    weight: float
    baseline: str          # "limit0" or "default": its better baseline
    limit0_ms: float
    default_ms: float
    aside_ms: float        # at the chosen set-aside, no window: its own tax
    plan_ms: float         # under the whole plan the search found (the advice installs it
                           # only when it helps; else this is what "don't" turned down)
    speedup: float         # better baseline / plan
    ci: tuple
    tax: float             # aside_ms / better baseline (> 1: the set-aside costs it)
    helps: bool
    slows: bool
    must_not_slow: bool
    windows: list = field(default_factory=list)  # [{"buffer", "bytes", "hit_ratio", ...}]
    note: str = ""
    coef: float = 0.0      # its coefficient in the weighted total (weight_unit's)

    @property
    def baseline_ms(self) -> float:
        return self.default_ms if self.baseline == "default" else self.limit0_ms


@dataclass
class Advice:
    """The advisor's answer: one set-aside for the process and each workload's windows."""

    device: str
    helps: bool
    set_aside: int          # the recommended set-aside (the limit to install)
    found_set_aside: int    # the search's pick, recommended only when helps
    baseline: str           # the better process-wide baseline: "limit0" or "default"
    total_base_ms: float    # weighted totals (sum of weight * ms, or shares of GPU time)
    total_plan_ms: float
    speedup: float
    ci: tuple
    blocked_by: str | None  # a must_not_slow workload the plan slows
    workloads: dict
    levels: list            # [(set-aside, weighted total in the search)]
    evals: int
    confirm_rounds: int
    wall_s: float
    min_gain: float
    weight_unit: str
    #: The plan re-measured in fresh rounds after the search ({"speedup", "ci", "held",
    #: "rounds"}); None when the confirmation recommended nothing.
    recheck: dict | None = None
    # The baseline a "don't" installs: limit 0 only where the confirmation's interval says it
    # is faster than the default, else the default, which changes nothing (C: l2p_tune_verdict)
    kept: str = "default"
    _plan: object = field(default=None, repr=False, compare=False)

    @property
    def plan(self):
        """The recommended ``l2persist.Plan`` (the better baseline without windows when the
        advice is "don't"): ``with advice.plan:`` installs it; ``to_json`` saves it."""
        if self._plan is None:
            raise RuntimeError("plan: this advice was loaded from JSON; run advise() again, "
                               "or load the plan saved with Plan.to_json")
        return self._plan

    def verdict(self) -> str:
        lo, hi = self.ci
        again = (f"; re-measured {self.recheck['speedup']:.3f}x" if self.recheck else "")
        if self.helps:
            return (f"persist: set-aside {human_bytes(self.set_aside)} with the windows below "
                    f"makes the weighted total {self.speedup:.3f}x faster than "
                    f"{_base(self.baseline)} (95 % interval {lo:.3f}-{hi:.3f}x{again})")
        if self.recheck and not self.recheck["held"]:
            rlo, rhi = self.recheck["ci"]
            return (f"don't persist: the plan found ({self.speedup:.3f}x on the weighted total) "
                    f"did not hold when re-measured in fresh rounds "
                    f"({self.recheck['speedup']:.3f}x, interval {rlo:.3f}-{rhi:.3f}x); keep "
                    f"{_base(self.kept)}")
        why = (f"it would slow {self.blocked_by}, marked must_not_slow" if self.blocked_by
               else f"the best plan found gives {self.speedup:.3f}x on the weighted total "
                    f"(interval {lo:.3f}-{hi:.3f}x; needs >= {1 + self.min_gain:.3f}x with "
                    f"the interval above 1)")
        return f"don't persist: {why}; keep {_base(self.kept)}"

    def table(self) -> str:
        out = [self.verdict(), "",
               "| workload | weight | baseline ms | found plan ms | speedup (95 % CI) | own tax at "
               f"{human_bytes(self.found_set_aside)} (measured) | windows |",
               "|---|---:|---:|---:|---|---:|---|"]
        for w in self.workloads.values():
            wins = "; ".join(f"{x['buffer']} hitRatio {x['hit_ratio']:.2f}"
                             for x in w.windows) or (w.note or "none")
            flag = " (must not slow)" if w.must_not_slow else ""
            out.append(f"| {w.name}{flag} | {w.weight:g} | {w.baseline_ms:.4f} | "
                       f"{w.plan_ms:.4f} | {w.speedup:.3f}x ({w.ci[0]:.3f}-{w.ci[1]:.3f}) | "
                       f"{w.tax:.3f}x | {wins} |")
        out.append("")
        out.append(f"{self.evals} evaluations and {self.confirm_rounds} confirmation rounds in "
                   f"{self.wall_s:.1f} s on {self.device}; weights are "
                   f"{'shares of GPU time' if self.weight_unit == 'share' else 'calls per second'}.")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        # names are the user's: escaped, as the verdict's text is
        rows = "".join(
            f"<tr><td>{html.escape(w.name)}</td><td>{w.weight:g}</td><td>{w.baseline_ms:.4f}"
            f"</td><td>{w.plan_ms:.4f}</td><td>{w.speedup:.3f}x</td><td>{w.tax:.3f}x</td></tr>"
            for w in self.workloads.values())
        return (f"<p>{html.escape(self.verdict())}</p><table><tr><th>workload</th><th>weight"
                f"</th><th>baseline ms</th><th>plan ms</th><th>speedup</th>"
                f"<th>own tax (measured)</th></tr>"
                f"{rows}</table>")

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if not k.startswith("_")}
        d["workloads"] = {k: dict(vars(w), ci=list(w.ci)) for k, w in self.workloads.items()}
        d["ci"] = list(self.ci)
        # a level the search did not reach has no total (NaN): null in strict JSON
        d["levels"] = [[lvl, None if t != t else t] for lvl, t in self.levels]
        return d

    def to_json(self, path=None) -> str:
        return save_json(self.to_dict(), path, indent=2)

    @classmethod
    def from_json(cls, text_or_path) -> "Advice":
        """An advice saved with ``to_json`` (JSON text, or a file: str or os.PathLike), e.g.
        to read it again on a machine without a GPU (its ``plan`` is not kept: save that with
        ``Plan.to_json``)."""
        d = load_json(text_or_path, what="an l2persist Advice")
        try:
            d["ci"] = tuple(d["ci"])
            d["workloads"] = {k: WorkloadAdvice(**dict(w, ci=tuple(w["ci"])))
                              for k, w in d["workloads"].items()}
            d["levels"] = [(lvl, float("nan") if t is None else t) for lvl, t in d["levels"]]
            return cls(**d)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"text_or_path: not the JSON of an Advice (Advice.to_json): "
                             f"{type(e).__name__}: {e}") from None


def _base(which: str) -> str:
    return "the default limit" if which == "default" else "limit 0"


@dataclass
class _Work:
    name: str
    fn: object
    weight: float
    stream: object = None
    targets: list | None = None
    candidates: object = None
    must_not_slow: bool = False
    note: str = ""
    names: list = field(default_factory=list)


_KEYS = ("fn", "weight", "stream", "targets", "candidates", "must_not_slow")


def _spec(name, spec, must_not_slow) -> _Work:
    """One workload's specification, checked without touching a device (its stream and
    targets are converted later, by _bind, once every workload's values are known good)."""
    if not isinstance(name, str):
        raise TypeError(f"workloads: keys are names (str), got {type(name).__name__}")
    if not name.strip():
        raise ValueError(f"workloads: the name {name!r} is empty; each workload needs a name "
                         "(it names its windows and its row of the advice)")
    where = f"workloads[{name!r}]"
    if callable(spec):
        w = _Work(name, spec, 1.0)
    elif isinstance(spec, tuple) and len(spec) == 2:
        if not callable(spec[0]):
            raise TypeError(f"{where}: (fn, weight) needs a callable fn, got "
                            f"{type(spec[0]).__name__}")
        w = _Work(name, spec[0], spec[1])
    elif isinstance(spec, dict):
        w = _from_dict(where, name, spec)
    else:
        raise TypeError(f"{where}: expected fn, (fn, weight) or a dict with 'fn', "
                        f"got {type(spec).__name__}")
    if isinstance(w.weight, bool) or not isinstance(w.weight, (int, float)) or \
            not w.weight > 0 or w.weight == float("inf"):
        raise ValueError(f"{where}: weight {w.weight!r} must be a finite number > 0")
    w.must_not_slow = w.must_not_slow or name in must_not_slow
    return w


def _from_dict(where: str, name: str, spec: dict) -> _Work:
    unknown = set(spec) - set(_KEYS)
    if unknown:
        raise TypeError(f"{where}: unknown keys {sorted(unknown)} (the keys: "
                        f"{', '.join(_KEYS)})")
    if "fn" not in spec:
        raise TypeError(f"{where}: the dict needs 'fn', the callable that runs the workload")
    if not callable(spec["fn"]):
        raise TypeError(f"{where}['fn']: expected a callable, got {type(spec['fn']).__name__}")
    flag = spec.get("must_not_slow", False)
    if not isinstance(flag, bool):
        raise TypeError(f"{where}['must_not_slow']: expected True or False, got {flag!r}")
    targets = spec.get("targets")
    if targets is not None and not isinstance(targets, (list, tuple)):
        raise TypeError(f"{where}['targets']: expected a list of buffers or Targets, got "
                        f"{type(targets).__name__}")
    candidates = spec.get("candidates")
    if isinstance(candidates, (bool, int, float, complex, str, bytes)):
        raise TypeError(f"{where}['candidates']: expected buffers to discover among (a list, "
                        f"a dict of names to buffers, or a module), got "
                        f"{type(candidates).__name__}")
    return _Work(name, spec["fn"], spec.get("weight", 1.0), spec.get("stream"), targets,
                 candidates, flag)


def _bind(w: _Work, device=None) -> None:
    """A checked workload's stream and given targets as l2persist objects (a foreign object
    may need the driver: this runs after every workload's values were checked). A default
    stream's handle is ``device``'s stream."""
    if w.stream is not None and not isinstance(w.stream, _core.Stream):
        w.stream = _core.Stream(wrap=w.stream, device=device)
    if w.targets is None:
        return
    bound = []
    for i, t in enumerate(w.targets):
        target = t if isinstance(t, Target) else Target(t)
        try:
            buf = _core.as_buffer(target.buffer)
        except TypeError as e:  # the converter names its own argument "obj"
            raise TypeError(f"workloads[{w.name!r}]['targets'][{i}]: "
                            f"{str(e).removeprefix('obj: ')}") from None
        bound.append(dataclasses.replace(target, buffer=buf))
    w.targets = bound


def _targets_of(w: _Work):
    """(targets, names): given, or discovered (a workload discovery cannot reach still counts
    in the objective: it pays the set-aside)."""
    if w.targets is not None:  # Targets already (_bind)
        return list(w.targets), [f"target{i}" for i in range(len(w.targets))]
    from . import foreign
    try:
        found = foreign.discover(w.fn, stream=w.stream, candidates=w.candidates)
    except (foreign.DiscoveryError, ValueError) as e:
        w.note = f"no window searched: {e}"
        warnings.warn(f"advise: {w.name}: {w.note}", RuntimeWarning, stacklevel=3)
        return [], []
    found = found[:MAX_TARGETS]
    return [Target(c.buffer, on=c.carrier) for c in found], [c.name for c in found]


class WorkloadSet:
    """A process's workloads over one Plan of all their targets (each target's window off, its
    extent kept), with the stream each is timed on (``tune``'s check that the events bracket
    the work). ``advise`` searches through it; a study re-measures and grids through it.

    ``evaluate(i, config, n)`` installs ``config`` (the tuner's form, one window spec per
    target of every workload) in the set's transaction and times workload i ``n`` times.
    Use it as a context manager: the transaction is restored at the end."""

    def __init__(self, workloads, *, device=None, must_not_slow=(), warmup: int = 2,
                 hold_us: float = 50.0):
        if not isinstance(workloads, dict) or not workloads:
            raise TypeError("workloads: expected a non-empty dict name -> fn | (fn, weight) | "
                            "dict")
        if len(workloads) > MAX_WORKLOADS:
            raise ValueError(f"workloads: {len(workloads)} workloads, at most {MAX_WORKLOADS} "
                             f"(group small ones into one fn)")
        if isinstance(must_not_slow, str):
            must_not_slow = (must_not_slow,)
        if not isinstance(must_not_slow, (tuple, list, set, frozenset)) or \
                not all(isinstance(n, str) for n in must_not_slow):
            raise TypeError(f"must_not_slow: expected workload names (a str or a list of "
                            f"them), got {must_not_slow!r}")
        unknown = set(must_not_slow) - set(workloads)
        if unknown:
            raise ValueError(f"must_not_slow: {sorted(unknown)} are not workloads "
                             f"({sorted(workloads)})")
        self.works = [_spec(k, v, set(must_not_slow)) for k, v in workloads.items()]
        # the timing options by the core's rule (time_calls'), before any device is needed
        _core.advise_search(_no_eval, 0, [], [], [], [], [], check_only=True, warmup=warmup,
                            hold_us=hold_us)
        for w in self.works:
            _bind(w, device)
        from .plan import Plan
        self.union = Plan(device)  # None: the current device, as for a Plan
        self.dev = self.union.device
        self.warmup, self.hold_us = warmup, hold_us
        self.owner, self.streams = [], []
        for i, w in enumerate(self.works):
            self._add(i, w)
        self.windows = [e["window"] for e in self.union.entries]
        self.session = Plan(self.dev)

    def _add(self, i, w):
        targets, names = _targets_of(w)
        first = None
        for t, n in zip(targets, names):
            carrier = t.on if t.on is not None else w.stream
            if carrier is None:
                raise ValueError(f"workloads[{w.name!r}]: target {n} needs a carrier: pass "
                                 f"'stream' or Target(buffer, on=...)")
            win = _core.AccessPolicyWindow(t.buffer, t.num_bytes, offset=t.offset, clamp=True)
            self.union.add(carrier, win, name=f"{w.name}/{n}", carrier_name=w.name,
                           enabled=False)
            if first is None and self.union.entries[-1]["kind"] == "stream":
                first = carrier
            self.owner.append(i)
            w.names.append(n)
        s = w.stream
        if s is None and first is not None:
            s = first if isinstance(first, _core.Stream) else _core.Stream(wrap=first)
        self.streams.append(timed_stream(w.fn, s, self.dev, given=w.stream is not None))

    @property
    def names(self) -> list:
        return [w.name for w in self.works]

    def off(self, set_aside: int) -> dict:
        """The configuration `set_aside` with every window off."""
        return {"set_aside": set_aside, "windows": [None] * len(self.windows)}

    def time(self, i: int, n: int) -> list:
        return _core.time_calls(self.works[i].fn, stream=self.streams[i], warmup=self.warmup,
                                repeat=n, device=self.dev, hold_us=self.hold_us)

    def evaluate(self, i: int, config: dict, n: int) -> list:
        self.session.apply(self.union.configured(config))
        return self.time(i, n)

    def evaluate_mix(self, config: dict, n: int) -> list:
        """``config`` installed once, then every workload interleaved as the process runs
        them: one untimed round, then ``n`` rounds of one timed call of each workload in
        turn (the order rotated each round), with no reset of persisting lines between
        calls. Returns the samples workload-major (workload i's n samples, then i + 1's).
        Each call is timed alone (its own events, no warm-up of its own), so a workload
        whose lines the others evicted pays for it here, and windows that over-fill the one
        set-aside evict each other as they would in the process."""
        self.session.apply(self.union.configured(config))
        return [t for samples in self.time_mix(n) for t in samples]

    def time_mix(self, n: int) -> list:
        """Per workload, ``n`` samples of it interleaved with the others under whatever is
        installed now (``evaluate_mix`` without the install): one untimed round first."""
        order = list(range(len(self.works)))
        for i in order:
            self._call(i)
        out = [[] for _ in order]
        for j in range(n):
            for i in order[j % len(order):] + order[:j % len(order)]:
                out[i].append(self._call(i))
        return out

    def _call(self, i: int) -> float:
        return _core.time_calls(self.works[i].fn, stream=self.streams[i], warmup=0, repeat=1,
                                device=self.dev, hold_us=self.hold_us)[0]

    def coefficients(self, weight_unit: str) -> list:
        """Each workload's coefficient in the weighted total: with shares of GPU time,
        share / its time now (so the total is sum(share * t / t_now)); with calls per
        second, the rate (sum(calls * t))."""
        if weight_unit == "calls":
            return [float(w.weight) for w in self.works]
        now = [sorted(self.time(i, 5))[2] for i in range(len(self.works))]
        return [w.weight / t for w, t in zip(self.works, now)]

    def __enter__(self):
        self.session.install()
        return self

    def __exit__(self, *exc):
        self.session.restore()
        return False


def advise(workloads, *, device=None, weight_unit: str = "share", must_not_slow=(),
           min_gain: float = DEFAULTS["min_gain"], confidence: float = DEFAULTS["confidence"],
           repeat: int = DEFAULTS["repeat"], search_repeat: int = DEFAULTS["search_repeat"],
           confirm_rounds: int = DEFAULTS["confirm_rounds"], tries: int = DEFAULTS["tries"],
           warmup: int = 2, hold_us: float = 50.0, seed: int = DEFAULTS["seed"],
           recheck_rounds: int = DEFAULTS["recheck_rounds"],
           remeasure_levels: int = DEFAULTS["remeasure_levels"],
           remeasure_rounds: int = DEFAULTS["remeasure_rounds"],
           interleave: bool = True) -> Advice:
    """One persistence plan for a whole process, found and checked on its own work.

    - ``workloads``: name -> ``fn``, ``(fn, weight)`` or a dict with ``fn`` and any of
      ``weight``, ``stream`` (where fn runs; default: the stream its graph replays run on,
      else the stream discovery names, else the legacy stream), ``targets`` (buffers or
      ``Target``s; default: discovered as ``tune`` does), ``candidates`` (names for
      discovery), ``must_not_slow`` (True or False). At most 64. A ``WorkloadSet`` made
      before is taken as it is (``device``, ``must_not_slow``, ``warmup`` and ``hold_us``
      are then its own: passing them here is refused).
    - ``device``: an index or ``Device`` (None: the current device, as for a ``Plan``).
    - ``weight_unit``: ``"share"`` (default): each weight is the workload's share of the
      process's GPU time; ``"calls"``: its calls per second. The objective is the weighted
      total time: with shares, sum(share * t / t_now); with calls, sum(calls * t).
    - ``must_not_slow``: names of workloads a plan may not slow (by the verdict's mirror:
      the interval below 1 and a loss of at least ``min_gain``).
    - ``min_gain``, ``confidence``: the verdict's rule on the weighted total. The default gain
      is above ``tune``'s: a process-wide set-aside taxes work the advisor does not see, so a
      smaller gain is not worth it. A workload's window is part of a plan only if
      it saves at least ``min_gain / 2`` of that workload's time in the search.
    - ``repeat``, ``search_repeat``, ``confirm_rounds``, ``tries``, ``warmup``, ``hold_us``:
      samples per arm and round in the confirmation, per evaluation in the search, rounds
      (up to 4x while undecided), targets tried alone per workload and level, and each
      timing's warm-up calls and spin.
    - ``recheck_rounds``: a plan the confirmation recommends is re-measured against both
      baselines in this many fresh interleaved rounds after the confirmation (more while
      undecided, up to 4x; 0: not), and dropped for the better baseline when it no longer
      helps by the same rule (C core).
    - ``remeasure_levels``, ``remeasure_rounds``: before the set-aside level is picked, the
      search's this many best levels (each with its windows) are measured again in this many
      fresh rounds, levels in ABBA order, and the level is picked on their pooled medians
      (0: one pass's medians decide); levels x rounds more evaluations per workload.
    - ``interleave`` (default True): the confirmation and the recheck run the workloads
      interleaved call by call under one installation per arm (``WorkloadSet.evaluate_mix``),
      as the process runs them: one workload's persisting lines meet the others' accesses,
      and windows whose persisting footprints together exceed the set-aside evict each
      other. The search still times each workload alone. False: the confirmation times each
      workload alone too (the optimistic reading, for work that runs in long phases).

    The defaults of the search's options are the C core's (``DEFAULTS``, from
    ``_core.advise_defaults()``). The options and every workload's specification are checked
    before any workload runs and before a device is needed. Evaluations grow linearly with the
    workloads. What it changes and restores: the persisting limit and the windows of every
    carrier it touches (one Plan transaction), also when an exception passes through. Do not
    call it while a stream of the device captures.
    """
    if weight_unit not in ("share", "calls"):
        raise ValueError(f"weight_unit: {weight_unit!r} is not 'share' or 'calls'")
    if not isinstance(interleave, bool):
        raise TypeError(f"interleave: expected True or False, got {interleave!r}")
    options = dict(tries=tries, search_repeat=search_repeat, repeat=repeat,
                   confirm_rounds=confirm_rounds, recheck_rounds=recheck_rounds,
                   remeasure_levels=remeasure_levels, remeasure_rounds=remeasure_rounds,
                   min_gain=min_gain, confidence=confidence, seed=seed)
    _core.advise_search(_no_eval, 0, [], [], [], [], [], check_only=True, **options)
    if isinstance(workloads, WorkloadSet):
        given = [k for k, v, default in (("device", device, None),
                                         ("must_not_slow", bool(must_not_slow), False),
                                         ("warmup", warmup, 2), ("hold_us", hold_us, 50.0))
                 if v != default]
        if given:
            raise TypeError(f"advise: {', '.join(given)} belong to the WorkloadSet given; "
                            f"pass them to WorkloadSet(...)")
        ws = workloads
    else:
        ws = WorkloadSet(workloads, device=device, must_not_slow=must_not_slow, warmup=warmup,
                         hold_us=hold_us)
    t0 = time.perf_counter()
    with ws:
        coef = ws.coefficients(weight_unit)
        extra = {"mix": ws.evaluate_mix} if interleave else {}
        r = _core.advise_search(ws.evaluate, ws.dev, coef, [w.must_not_slow for w in ws.works],
                                ws.owner, [w.num_bytes for w in ws.windows], ws.union.groups,
                                **options, **extra)
    return _advice(r, ws, coef, time.perf_counter() - t0, min_gain, weight_unit)


def _no_eval(*_):
    raise AssertionError("advise_search(check_only=True) evaluates nothing")


def _advice(r, ws, coef, wall_s, min_gain, weight_unit) -> Advice:
    works, owner, windows = ws.works, ws.owner, ws.windows
    found = r["found"]["windows"]
    out = {}
    for i, (w, wr) in enumerate(zip(works, r["work"])):
        mine = []
        for k, spec in enumerate(found):
            if owner[k] == i and spec is not None:
                mine.append({"buffer": w.names[owner[:k].count(i)],
                             "bytes": windows[k].num_bytes, "hit_ratio": spec["hit_ratio"],
                             "hit_prop": int(spec["hit_prop"]),
                             "miss_prop": int(spec["miss_prop"])})
        out[w.name] = WorkloadAdvice(
            name=w.name, weight=float(w.weight), baseline=wr["baseline"],
            limit0_ms=wr["limit0_ms"], default_ms=wr["default_ms"], aside_ms=wr["aside_ms"],
            plan_ms=wr["plan_ms"], speedup=wr["speedup"], ci=(wr["ci_low"], wr["ci_high"]),
            tax=wr["tax"], helps=wr["helps"], slows=wr["slows"],
            must_not_slow=w.must_not_slow, windows=mine if r["helps"] else [], note=w.note,
            coef=coef[i])
    rec = {"set_aside": r["recommended_set_aside"],
           "windows": found if r["helps"] else [None] * len(found)}
    blocked = works[r["blocked_by"]].name if r["blocked_by"] >= 0 else None
    return Advice(device=ws.dev.properties.name, helps=r["helps"],
                  set_aside=r["recommended_set_aside"], found_set_aside=r["found"]["set_aside"],
                  baseline=r["baseline"], total_base_ms=r["total_base_ms"],
                  total_plan_ms=r["total_plan_ms"], speedup=r["speedup"],
                  ci=(r["ci_low"], r["ci_high"]), blocked_by=blocked, workloads=out,
                  levels=[tuple(x) for x in r["levels"]], evals=r["evals"],
                  confirm_rounds=r["confirm_rounds"], wall_s=wall_s, min_gain=min_gain,
                  weight_unit=weight_unit, recheck=r["recheck"], kept=r["keep"],
                  _plan=ws.union.configured(rec))
