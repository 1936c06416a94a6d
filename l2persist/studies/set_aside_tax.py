"""The set-aside tax: 4-byte reads, writes, read-modify-writes and atomicAdds (random and
streaming) over a table of h bytes, with no window and no persisting access, swept over the
set-aside s and h; each point against limit 0. Counters at the maximum set-aside against
limit 0 show the mechanism; the measured knees are compared with the model's
(l2persist.tax) and the model's constants refitted from them."""

from __future__ import annotations

import numpy as np

from .. import _core, kernels as K
from .. import tax
from ..counters import counters_available, measure
from ..results import PlotSpec
from ..timing import benchmark

TITLE = "The set-aside tax: what a persisting set-aside costs work that never asks for it"
NEEDS_GPU = True
SOURCE = ("CUDA Programming Guide, 'L2 set-aside for persisting accesses': normal accesses "
          "may use the set-aside while persisting lines do not (measured on the H200: written "
          "lines lose capacity beyond the set-aside on Hopper: knee near L2 - (4/3) s).")
ROW = ("random / streaming reads, writes, read-modify-writes and atomics over set-aside x "
       "working set, no window; knees vs the C model, counters at the maximum")
INTRO = """# The set-aside tax: what a persisting set-aside costs work that never asks for it

**The source.** The CUDA Programming Guide says normal accesses may use the persisting-L2
set-aside while no persisting line needs it. On Hopper that does not hold for *written* lines:
a set-aside shrinks the L2 capacity that dirty data can use, by more than the set-aside itself.

**What we measure.** One launch of 16.8 M random (or streaming) 4-byte reads, writes,
read-modify-writes or `atomicAdd`s over a table of h MiB, with **no window and no persisting
access at all**, at every set-aside s swept, each point against the same launch at limit 0.
The C model (`l2persist.tax.predict`) gives the knee, the working set above which written
lines slow down: `L2 - c * s` once s reaches a quarter of the L2 (c fitted per chip from
measurements). The heatmaps draw that knee over the measured slowdowns; counters (CUPTI) at
limit 0 and at the maximum set-aside show what changes."""
WHY = """**What to do about it.**

- **A set-aside is a process-wide tax on written data.** It applies to every kernel of the
  process (every client under MPS, where the server's percentage sets it), whether or not it
  uses a window: PyTorch, cuBLAS, CuPy work included. Measure what it costs your work:
  `l2persist.tax.measure(fn, s)`, or the advisor's per-workload and per-kernel tax.
  `l2persist.tax.predict(dev, s)` is the model, a prior (on the H100 fused AdamW's knees came
  10-14 MiB after it); `l2persist.tax.set_aside_tax(dev, s, probe=True)` adds a short
  measured probe. Every printed figure says `measured` or `model`; the measurement wins.
- **The driver's default (3 granules) costs nothing measurable** (the finding above): the tax
  starts at a quarter of the L2.
- **Benchmarks**: run `python -m l2persist check` first (it exits non-zero, with one line
  saying why, when the set-aside is neither 0 nor the default), or time inside
  `with l2persist.persisting_l2_disabled():`. A set-aside left behind by an earlier test or
  library makes write-heavy kernels look up to several times slower (pytest `--l2p-guard`
  names the test that leaves it).
- **Compare persistence against limit 0**, not against the same set-aside without a window:
  the latter already pays the tax."""
MIB = 1 << 20
ACCESS_WORDS = {"read": "reads", "write": "writes", "rmw": "read-modify-writes",
                "atomic": "atomicAdds"}
THRESHOLD = tax.KNEE_THRESHOLD
# What explains the tax: write-backs (DRAM write bytes), refills (DRAM read bytes), how
# often written sectors hit, the L2's misses and how busy it is.
COUNTERS = ("gpu_time_ns", "l2_write_hit_rate", "l2_hit_rate", "l2_miss_sectors",
            "dram_bytes_write", "dram_bytes_read", "l2_throughput_pct")


def _mib(nbytes: int):
    """Bytes as MiB, a whole number where it is one (what --only names)."""
    return nbytes // MIB if nbytes % MIB == 0 else nbytes / MIB


def axes(ctx) -> dict:
    """set_aside_mib: the set-aside asked for (whole granules; 0 is limit 0, each point's
    baseline); pattern and kind: the accesses (quick mode: the four kinds at random, and
    streaming writes); ws_mib: the table's size."""
    dev = ctx.device
    props = dev.properties
    l2, pmax = props.l2_cache_size, props.persisting_l2_cache_max_size
    granule = dev.persisting_l2_granule
    top = pmax // granule
    if ctx.quick:
        # 3 granules: the driver's default, and the largest set-aside without a tax
        asides = sorted({0, *(g * granule for g in (top - 7, top - 6, top - 4, top - 2, top)
                              if g > 0)})
        step, hi = 4 * MIB, l2 + 8 * MIB
    else:
        asides = [g * granule for g in range(top + 1)]
        step, hi = 2 * MIB, l2 * 3 // 2
    return {"set_aside_mib": [_mib(a) for a in asides], "pattern": ("random", "streaming"),
            "kind": tax.KINDS, "ws_mib": [_mib(w) for w in range(step, hi + 1, step)]}


def _measured(quick: bool, kind: str, pattern: str) -> bool:
    """Whether the sweep measures this access: every one, or in quick mode the random ones
    and streaming writes."""
    return not quick or pattern == "random" or kind == "write"


def run(ctx):
    dev = ctx.device
    if dev.persisting_l2_source != "process":
        raise _core.NotSupportedError(
            "the set-aside-tax study sweeps the set-aside, and under MPS it is the server's; "
            "run it outside MPS (python -m l2persist check shows the server's tax)")
    repeat = 5 if ctx.quick else 11
    have_counters = counters_available()[0]
    largest = max(ctx.values("ws_mib")) * MIB
    with _core.Stream(dev) as s, _core.zeros(int(largest) // 4, np.uint32, dev) as table:
        def time_point(set_aside_mib, pattern, kind, ws_mib):
            if not _measured(ctx.quick, kind, pattern):
                return []
            ws = round(ws_mib * MIB)
            view = table[: ws // 4]
            accesses = 1 << 24  # as the integrator's sweep: 16.8 M accesses per launch

            def fn():
                K.tax_probe(view, kind, pattern=pattern, accesses=accesses, stream=s)

            with dev.persisting_l2(round(set_aside_mib * MIB)) as granted:
                t = benchmark(fn, stream=s, warmup=2, repeat=repeat)
                rec = dict(set_aside=granted, ws=ws, ms=t.median, iqr_ms=t.iqr)
                if have_counters and _counted(ctx.quick, kind, pattern, ws, granted, dev):
                    c = measure(fn, list(COUNTERS), device=dev, warmup=fn)
                    rec.update({k: float(c[k]) for k in COUNTERS})
            return rec

        records = ctx.sweep(ctx.axes, time_point)
    for r in records:  # the set-aside granted (as asked, outside MPS), as the stored runs'
        r["ws_mib"] = r["ws"] / MIB
        r["set_aside_mib"] = r["set_aside"] / MIB
    _add_slowdowns(records, dev)
    _, summary = _findings(records, dev, have_counters)
    summary["real_work"] = _real_work(ctx)
    res = ctx.results(records, summary=summary, columns=COLUMNS)
    res.notes = findings(res)  # tools/investigations/tax-sweep calls run() without the runner's refresh
    return res


COLUMNS = [("kind", "kind"), ("pattern", "pattern"), ("set_aside_mib", "set_aside_mib (MiB)"),
           ("ws_mib", "ws_mib (working set, MiB)"), ("ms", "median ms"),
           ("slowdown", "measured vs limit 0"), ("predicted", "model's prediction"),
           ("l2_write_hit_rate", "write hit %"), ("dram_bytes_write", "DRAM write B")]


def _counted(quick, kind, pattern, ws, aside, dev):
    """Counters where they tell the mechanism: random accesses at limit 0 and at the maximum
    set-aside; quick: writes just above the model's knee and at the L2 size; full: writes,
    atomics and reads every 8 MiB."""
    props = dev.properties
    if pattern != "random" or aside not in (0, props.persisting_l2_cache_max_size):
        return False
    if quick:
        probe_ws = tax.probe_working_set(tax.predict(dev, props.persisting_l2_cache_max_size))
        step = 4 * MIB  # the quick sweep's
        return kind == "write" and ws in (probe_ws // step * step + step,
                                          props.l2_cache_size // step * step)
    return kind in ("write", "atomic", "read") and ws % (8 * MIB) == 0


def _add_slowdowns(records, dev):
    base = {(r["kind"], r["pattern"], r["ws"]): r["ms"] for r in records if r["set_aside"] == 0}
    for r in records:
        b = base.get((r["kind"], r["pattern"], r["ws"]))
        r["slowdown"] = None if b is None else r["ms"] / b
        r["predicted"] = (tax.predict(dev, r["set_aside"]).slowdown_at(r["ws"], r["kind"])
                          if r["pattern"] == "random" else None)


def _knees(records, dev):
    """Per set-aside: the measured knee of random writes and the model's (off_mib: how far
    the model's lies outside the measured interval; 0 when both say there is none)."""
    out = []
    for aside in sorted({r["set_aside"] for r in records if r["set_aside"] > 0}):
        curve = sorted((r["ws"], r["slowdown"]) for r in records
                       if r["set_aside"] == aside and r["kind"] == "write"
                       and r["pattern"] == "random" and r["slowdown"] is not None)
        if not curve:  # a part of the sweep (--only) without random writes
            continue
        lo, hi = tax.measured_knee([w for w, _ in curve], [s for _, s in curve], THRESHOLD)
        p = tax.predict(dev, aside)
        model = p.knee_bytes if p.taxed else None
        if hi:  # a measured knee: how far the model's lies outside (lo, hi]
            off = None if model is None else max(lo - model, model - hi, 0) / MIB
        else:   # none measured up to lo: the model agrees when it predicts none below lo
            off = 0.0 if model is None or model >= lo else (lo - model) / MIB
        out.append(dict(set_aside_mib=aside / MIB, measured_lo_mib=lo / MIB,
                        measured_hi_mib=hi / MIB if hi else None,
                        model_mib=None if model is None else model / MIB, off_mib=off))
    return out


def _findings(records, chip, have_counters):
    """(notes, summary) from the records; chip: a Device or the model's mapping of one
    (findings() builds it from the stored metadata)."""
    notes = []
    model = tax.predict(chip, 0)
    l2 = model.l2_bytes
    if not any(r["slowdown"] is not None for r in records):
        # a part of the sweep (--only) without limit 0 (or one that measured nothing)
        return (["no slowdowns: this part of the sweep has no point at limit 0 "
                 "(set_aside_mib=0), each point's baseline"], {})
    top = max(r["set_aside"] for r in records)
    knees = _knees(records, chip)
    within = [k for k in knees if k["off_mib"] is not None and k["off_mib"] <= 4]
    notes.append(f"where it starts: the model (l2persist.tax, constants of the {model.basis}) "
                 f"puts no tax below {100 * model.onset_fraction:g} % of the L2 "
                 f"({model.onset_fraction * l2 / MIB:g} MiB) and the knee of written lines "
                 f"at L2 - {model.capacity_coeff:.3f} s above it")
    notes.append(f"random-write knees, MiB (measured: the first working set {THRESHOLD}x "
                 "slower; the model is the prior): "
                 + "; ".join(f"s={k['set_aside_mib']:g} MiB: {tax.label(True)} "
                             + (f"({k['measured_lo_mib']:g}, {k['measured_hi_mib']:g}]"
                                if k["measured_hi_mib"] else
                                f"none up to {k['measured_lo_mib']:g}")
                             + ", " + tax.model_predicted(
                                 k["model_mib"], lambda v: "none" if v is None else f"{v:.1f}")
                             for k in knees)
                 + f"; {len(within)} of {len(knees)} within 4 MiB")
    for kind, pattern in dict.fromkeys((r["kind"], r["pattern"]) for r in records):
        at_top = [r for r in records if r["set_aside"] == top and r["kind"] == kind
                  and r["pattern"] == pattern and r["slowdown"] is not None]
        if not at_top:  # a part of the sweep without limit 0 at these sizes
            continue
        worst = max(at_top, key=lambda r: r["slowdown"])
        notes.append(f"{kind} ({pattern}) at the maximum set-aside {top / MIB:g} MiB: "
                     f"{tax.label(True)} up to "
                     f"{worst['slowdown']:.2f}x (working set {worst['ws_mib']:g} MiB)")
    fit = _refit(knees, records, l2)
    if fit:
        notes.append(f"refit from this run: knee = L2 - {fit['capacity_coeff']:.3f} s from "
                     f"s = {fit['onset_mib']:g} MiB on; writes at limit 0 slow past "
                     + (f"{fit['base_mib']:g} MiB" if fit["base_mib"] else "no point swept")
                     + "; miss penalty of writes "
                     f"{fit.get('penalty_write', float('nan')):.2f}")
    if have_counters:
        notes.extend(_mechanism(records, top))
    else:
        notes.append("counters unavailable (CUPTI): the mechanism is not shown in this run")
    heatmap = {"line": [(k["set_aside_mib"], k["model_mib"]) for k in knees
                        if k["model_mib"] is not None]}
    return notes, {"knees": knees, "refit": fit, "heatmap": heatmap}


def _chip(meta) -> dict:
    """The model's mapping of the device a stored run measured (its Results metadata)."""
    return {"name": meta.get("device_name", ""),
            "compute_capability": tuple(int(x) for x in meta["compute_capability"].split(".")),
            "l2_cache_size": meta["l2_cache_size"],
            "persisting_l2_cache_max_size": meta["persisting_l2_cache_max_size"]}


def _at_default(records, meta):
    """The note on the driver's default set-aside: the largest slowdown measured there."""
    default = meta.get("default_persisting_l2_limit")
    at = [r for r in records if r["set_aside"] == default and r["slowdown"] is not None]
    if not default or not at:
        return []
    granules = default / tax.predict(_chip(meta), default).granule
    lo = min(at, key=lambda r: r["slowdown"])["slowdown"]
    hi = max(at, key=lambda r: r["slowdown"])
    return [f"the driver's default set-aside {default / MIB:g} MiB ({granules:g} granules) "
            f"costs nothing measurable: {lo:.2f}x to {hi['slowdown']:.2f}x of limit 0 over all "
            f"{len(at)} points (worst: {hi['kind']} ({hi['pattern']}) over {hi['ws_mib']:g} MiB), "
            f"under the knee threshold {THRESHOLD}x"]


def findings(res) -> list:
    """The notes, from the stored records and metadata (no device needed)."""
    have = any("dram_bytes_write" in r for r in res.records)
    notes, _ = _findings(res.records, _chip(res.meta), have)
    kinds = [i for i, n in enumerate(notes) if " at the maximum set-aside " in n]
    at = kinds[-1] + 1 if kinds else len(notes)
    return (notes[:at] + _at_default(res.records, res.meta) + notes[at:]
            + real_work_notes(res.summary.get("real_work") or []))


# ---- real work: what the tax costs PyTorch work that never asks for persistence ----

REAL_WORK_GRANULES = 7   # besides the maximum: the middle of the taxed range
ENCODER = dict(d_model=512, nhead=8, dim_feedforward=2048, layers=4, batch=16, seq=256)
GCN = dict(nodes=200_000, edges=2_000_000, features=128, hidden=128, classes=16)


def _encoder_work(torch, ext):
    """A small transformer encoder (ENCODER): its training step (forward, backward, AdamW)
    and its inference forward, each on the l2persist stream behind ``ext``."""
    e = ENCODER
    layer = torch.nn.TransformerEncoderLayer(e["d_model"], e["nhead"], e["dim_feedforward"],
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, e["layers"], enable_nested_tensor=False).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(e["batch"], e["seq"], e["d_model"], device="cuda")

    def train():
        with torch.cuda.stream(ext):
            model.train()
            opt.zero_grad(set_to_none=True)
            model(x).pow(2).mean().backward()
            opt.step()

    def infer():
        with torch.cuda.stream(ext), torch.inference_mode():
            model.eval()
            model(x)
    return [("encoder training step", train), ("encoder inference forward", infer)]


def _gcn_work(torch, ext):
    """A two-layer torch_geometric GCN (GCN) training step on a random graph."""
    from torch_geometric.nn import GCNConv

    g = GCN
    x = torch.randn(g["nodes"], g["features"], device="cuda")
    edges = torch.randint(0, g["nodes"], (2, g["edges"]), device="cuda")
    y = torch.randint(0, g["classes"], (g["nodes"],), device="cuda")
    conv1 = GCNConv(g["features"], g["hidden"]).cuda()
    conv2 = GCNConv(g["hidden"], g["classes"]).cuda()
    opt = torch.optim.Adam([*conv1.parameters(), *conv2.parameters()], lr=1e-2)

    def step():
        with torch.cuda.stream(ext):
            opt.zero_grad(set_to_none=True)
            out = conv2(conv1(x, edges).relu(), edges)
            torch.nn.functional.cross_entropy(out, y).backward()
            opt.step()
    return [("torch_geometric GCN training step", step)]


def _real_work(ctx) -> list:
    """Each real workload measured with l2persist.tax.measure (interleaved rounds until the
    slowdown's 95 % interval is within +-2 %, no window) at the maximum set-aside and at
    REAL_WORK_GRANULES granules. Parts whose library is missing are skipped with a reason."""
    if not ctx.has("torch", "real work (a PyTorch encoder and a torch_geometric GCN)"):
        return []
    import torch

    dev = ctx.device
    props = dev.properties
    asides = [props.persisting_l2_cache_max_size,
              min(REAL_WORK_GRANULES * dev.persisting_l2_granule,
                  props.persisting_l2_cache_max_size)]
    out = []
    with _core.Stream(dev) as s:
        ext = torch.cuda.ExternalStream(s.handle)
        works = _encoder_work(torch, ext)
        try:
            works += _gcn_work(torch, ext)
        except ImportError as e:
            ctx.skipped.append(("the GCN training step", f"it needs torch_geometric ({e}; "
                                "pip install torch_geometric)"))
        for name, fn in works:
            fn()  # allocations and lazy state outside the timing
            s.synchronize()
            for aside in asides:
                r = tax.measure(fn, aside, stream=s, max_rounds=8 if ctx.quick else 20)
                out.append(dict(work=name, set_aside=r.set_aside,
                                granules=round(r.set_aside / dev.persisting_l2_granule),
                                slowdown=r.slowdown, low=r.interval[0], high=r.interval[1],
                                rounds=r.rounds, converged=r.converged, base_ms=r.base_ms,
                                at_ms=r.at_ms))
    return out


def real_work_notes(rows) -> list:
    """One note per real workload: its slowdown (and interval) at each set-aside measured."""
    notes = []
    for name in dict.fromkeys(r["work"] for r in rows):
        parts = [f"{r['slowdown']:.2f}x ({r['low']:.2f}-{r['high']:.2f}"
                 f"{'' if r['converged'] else ', not within +-2 %'}) at {r['granules']} "
                 f"granules ({r['set_aside'] / MIB:g} MiB)"
                 for r in sorted((r for r in rows if r["work"] == name),
                                 key=lambda r: -r["set_aside"])]
        base = next(r["base_ms"] for r in rows if r["work"] == name)
        notes.append(f"real work, {name} ({base:.3g} ms at limit 0, no window), "
                     f"{tax.label(True, 'tax.measure')}: "
                     + ", ".join(parts))
    return notes


def derive(records) -> None:
    """The plot's panel: access kind and pattern in one column."""
    for r in records:
        r["access"] = f"{r['kind']}, {r['pattern']}"


def plot_spec(res) -> PlotSpec:
    """Slowdown heatmaps, set-aside x working set, one per access; the model's knee over them
    (l2persist.tax.predict on the stored device's properties)."""
    chip = _chip(res.meta)
    asides = sorted({r["set_aside"] for r in res.records if r["slowdown"] is not None})
    if not asides or max(asides) == 0:  # a part of the sweep (--only)
        raise ValueError("the plot draws the slowdown at each set-aside against limit 0, and "
                         "this part of the sweep has " + (
                             "no point at limit 0 (set_aside_mib=0)" if not asides else
                             "no set-aside above 0"))
    knees = [tax.predict(chip, s) for s in asides]
    curve = [[p.knee_bytes / MIB, s / MIB] for s, p in zip(asides, knees) if p.taxed]
    top = max(asides)
    worst = {}
    for r in res.records:
        if r["set_aside"] == top and r["slowdown"] is not None:
            key = r["kind"] if r["pattern"] == "random" else f"streaming {r['kind']}"
            worst[key] = max(worst.get(key, 0.0), r["slowdown"])
    said = ", ".join(f"{k} {v:.1f}x" for k, v in worst.items())
    return PlotSpec(
        x="ws_mib", y=["slowdown"], hue="set_aside_mib", kind="heatmap", facet="access",
        facet_cols=3, cmap="YlOrRd", vrange=[1.0, None],
        facet_titles={f"{k}, {p}": f"{p} 4-byte {ACCESS_WORDS[k]}" for k in tax.KINDS
                      for p in ("random", "streaming")},
        labels={"set_aside_mib": "set-aside, MiB (no window)"},
        xlabel="working set, MiB", ylabel="time / time at limit 0",
        curve=curve, curve_label="model knee: written lines slow down right of it",
        title=(f"{res.meta.get('device_name', '')}: a set-aside of {top / MIB:g} MiB with no "
               f"window slows work that never asks for persistence (worst: {said})"))


def _refit(knees, records, l2):
    pts = [k for k in knees if k["measured_hi_mib"] and k["measured_lo_mib"] > 0]
    base = _base_capacity(records)
    if not pts:
        return None
    s = [k["set_aside_mib"] for k in pts]
    mid = [(k["measured_lo_mib"] + k["measured_hi_mib"]) / 2 for k in pts]
    c = tax.fit_capacity(l2 / MIB, s, mid)
    onset = min(s)  # the smallest set-aside with a measured knee
    fit = {"capacity_coeff": c, "onset_mib": onset,
           "base_mib": None if base is None else base / MIB}
    w = [r for r in records if r["kind"] == "write" and r["pattern"] == "random"
         and r["set_aside_mib"] >= onset and r["slowdown"] is not None]
    try:
        fit["penalty_write"] = tax.fit_penalty(l2 / MIB, c, [r["set_aside_mib"] for r in w],
                                               [r["ws_mib"] for r in w],
                                               [r["slowdown"] for r in w],
                                               base=None if base is None else base / MIB)
    except ValueError:
        pass
    return fit


def _base_capacity(records):
    """Where random writes at limit 0 slow down against small tables (C(0)), as (lo, hi]'s
    midpoint in bytes; None when they never do."""
    curve = sorted((r["ws"], r["ms"]) for r in records if r["set_aside"] == 0
                   and r["kind"] == "write" and r["pattern"] == "random")
    if not curve:
        return None
    small = min(ms for _, ms in curve[: max(1, len(curve) // 3)])
    lo, hi = tax.measured_knee([w for w, _ in curve], [ms / small for _, ms in curve],
                               THRESHOLD)
    return (lo + hi) / 2 if hi and lo else None


def _mechanism(records, top):
    """Which counter moves with the tax: random writes at the maximum against limit 0."""
    pairs = []
    for r in records:
        if r["set_aside"] != top or r["kind"] != "write" or r["pattern"] != "random" \
                or "dram_bytes_write" not in r:
            continue
        base = next((b for b in records if b["set_aside"] == 0 and b["kind"] == "write"
                     and b["pattern"] == "random" and b["ws"] == r["ws"]
                     and "dram_bytes_write" in b), None)
        if base:
            pairs.append((base, r))
    if not pairs:
        return ["no counter pairs were measured"]
    notes = []
    for base, r in pairs:
        notes.append(f"random writes over {r['ws_mib']:g} MiB, limit 0 -> {top / MIB:g} MiB: "
                     f"{r['slowdown']:.2f}x slower; DRAM write bytes "
                     f"{base['dram_bytes_write'] / 1e6:.1f} -> {r['dram_bytes_write'] / 1e6:.1f}"
                     f" MB ({_grew(base, r):.1f}x); write hit rate "
                     f"{base['l2_write_hit_rate']:.1f} -> {r['l2_write_hit_rate']:.1f} %; DRAM "
                     f"read bytes {base['dram_bytes_read'] / 1e6:.1f} -> "
                     f"{r['dram_bytes_read'] / 1e6:.1f} MB; L2 throughput "
                     f"{base['l2_throughput_pct']:.0f} -> {r['l2_throughput_pct']:.0f} %")
    slowed = [(b, r) for b, r in pairs if r["slowdown"] and r["slowdown"] > THRESHOLD]
    written_back = [(b, r) for b, r in slowed if _grew(b, r) > 1.5]
    for b, r in written_back:
        kept = r["l2_write_hit_rate"] >= b["l2_write_hit_rate"] - 1.0
        notes.append(f"mechanism over {r['ws_mib']:g} MiB: write-backs. The same writes "
                     f"send {_grew(b, r):.1f}x the bytes to DRAM"
                     + (f" while the writes still hit ({r['l2_write_hit_rate']:.1f} %) and "
                        f"nothing more is read ({r['dram_bytes_read'] / 1e6:.1f} MB): the "
                        "written lines stay in the L2 but are cleaned early, as if the "
                        "set-aside capped the dirty data the L2 keeps, not the lines it holds"
                        if kept else f" and fewer writes hit ({b['l2_write_hit_rate']:.1f} -> "
                        f"{r['l2_write_hit_rate']:.1f} %): dirty lines are evicted early"))
    rest = [(b, r) for b, r in slowed if (b, r) not in written_back]
    for b, r in rest:
        notes.append(f"open: over {r['ws_mib']:g} MiB (past the L2 at limit 0 too) the writes "
                     f"are {r['slowdown']:.2f}x slower with only {_grew(b, r):.2f}x the "
                     f"write-backs and L2 miss sectors {b['l2_miss_sectors'] / 1e6:.2f} M -> "
                     f"{r['l2_miss_sectors'] / 1e6:.2f} M; L2 throughput falls "
                     f"{b['l2_throughput_pct']:.0f} -> {r['l2_throughput_pct']:.0f} %: these "
                     "counters do not show which L2 resource the set-aside takes there, nor why "
                     "written lines lose more capacity than the set-aside (c > 1)")
    return notes


def _grew(base, r) -> float:
    """How many times the DRAM write bytes of r are those of base."""
    return r["dram_bytes_write"] / max(base["dram_bytes_write"], 1.0)


# ---- the companion stream: the sweep the model's stream term is fitted from ----

COMPANION_FORMAT = "l2persist-tax-companion-sweep/1"
COMPANION_WORDS = (0, 1, 2, 3, 4, 6, 8)   # k: bytes streamed per byte written
HELD_OUT_WORDS = (3,)                       # k of PyTorch's out[idx] = val: never fitted
SMALL_WS_FRACTION = 0.25                    # the stream's own cost: tables of at most L2 / 4


def _sweep_grid(dev, step, what):
    """(granule, set-asides, table sizes) of a sweep: limit 0 and every set-aside from 4
    granules below the maximum to it; tables in ``step``s up to the L2 + 4 MiB. A sweep sets
    the limit: NotSupportedError under MPS (the server's)."""
    props = dev.properties
    if dev.persisting_l2_source != "process":
        raise _core.NotSupportedError(f"the {what} sweep sets the limit, and under MPS it is "
                                      "the server's: run it outside MPS")
    granule = dev.persisting_l2_granule
    top = props.persisting_l2_cache_max_size // granule
    asides = [0] + [g * granule for g in range(max(1, top - 6), top + 1)]
    return granule, asides, list(range(step, props.l2_cache_size + 4 * MIB + 1, step))


def companion_sweep(dev, *, words=COMPANION_WORDS, step=2 * MIB, rounds=3, repeat=5,
                    warmup=1, accesses=1 << 24, progress=None) -> dict:
    """Random 4-byte writes (the probe, ``accesses`` per launch) over tables of h bytes (h
    in ``step``s up to the L2 + 4 MiB) with a companion stream of k words read per write
    (k in ``words``), at limit 0 and every set-aside from 4 granules below the maximum to
    it; ``rounds`` rounds, each setting every limit once and timing every (k, h) there
    (median of ``repeat`` samples). Returns the sweep as a JSON-ready dict (what
    ``companion_rows`` reads); the limit found before is restored, also on errors."""
    from ..results import collect_metadata
    import time

    granule, asides, sizes = _sweep_grid(dev, step, "companion")
    words = [int(k) for k in words]
    meta = collect_metadata(dev)
    meta.update(granule=granule, accesses=accesses, rounds=rounds, repeat=repeat,
                warmup=warmup, step=step, format=COMPANION_FORMAT)
    ms = {}  # (set_aside, k, ws) -> [per-round medians]
    before = dev.persisting_l2_limit
    t0 = time.perf_counter()
    with _core.Stream(dev) as s, _core.zeros(max(sizes) // 4, np.uint32, dev) as table, \
            _core.zeros(max(max(words), 1) * accesses, np.uint32, dev) as comp:
        try:
            for rnd in range(rounds):
                for aside in asides:
                    dev.persisting_l2_limit = aside
                    granted = dev.persisting_l2_limit
                    for k in words:
                        for ws in sizes:
                            view = table[: ws // 4]
                            extra = dict(companion=comp, companion_words=k) if k else {}

                            def fn(view=view, extra=extra):
                                K.tax_probe(view, "write", accesses=accesses, stream=s, **extra)

                            samples = _core.time_calls(fn, stream=s, warmup=warmup,
                                                       repeat=repeat, device=dev)
                            ms.setdefault((granted, k, ws), []).append(
                                _core.stats(samples)["median"])
                if progress:
                    progress(f"round {rnd + 1}/{rounds}: {time.perf_counter() - t0:.1f} s")
        finally:
            _core.restore_persisting_l2(dev, before)
    meta["wall_s"] = round(time.perf_counter() - t0, 2)
    points = [dict(set_aside=a, companion=k, ws=w, ms=v, median_ms=_core.stats(v)["median"])
              for (a, k, w), v in sorted(ms.items())]
    return {"format": COMPANION_FORMAT, "meta": meta,
            "set_asides": sorted({p["set_aside"] for p in points}), "companions": words,
            "ws": sizes, "points": points}


def _chip_label(name: str) -> str:
    """'NVIDIA H200' -> 'H200' (the label the model's rows use; they match by cc and L2)."""
    words = name.replace("NVIDIA", "").split()
    return words[0] if words else name


def _sweep_of(sweep, fmt, what, source):
    """(the sweep, the chip part of its rows): a dict or a JSON path of format ``fmt``
    (ValueError naming it otherwise); the rows' chip, compute_capability, l2_mib and source
    (``source`` or one naming the run)."""
    if not isinstance(sweep, dict):
        from .._format import read_json
        sweep, _ = read_json(sweep)
    if not isinstance(sweep, dict) or sweep.get("format") != fmt:
        got = sweep.get("format") if isinstance(sweep, dict) else type(sweep).__name__
        raise ValueError(f"sweep: format {got!r}, expected {fmt!r}")
    meta = sweep["meta"]
    return sweep, dict(
        chip=_chip_label(meta.get("device_name", "")),
        compute_capability=[int(x) for x in str(meta["compute_capability"]).split(".")],
        l2_mib=meta["l2_cache_size"] / MIB,
        source=source or (f"{what} sweep on the {meta.get('device_name')}, "
                          f"{str(meta.get('date', ''))[:10]}, l2persist "
                          f"{meta.get('git_revision')}, CUDA {meta.get('cuda_runtime')}"))


def companion_rows(sweep, *, source: str | None = None) -> dict:
    """The model's companion rows from a sweep (``companion_sweep``'s dict or its JSON path):
    per set-aside above 0 and k > 0, the knee of the writes with the stream (first table
    ``THRESHOLD``x slower than at limit 0 with the same stream) and the same run's knee
    without it; per k > 0, the stream's own cost at limit 0 over small tables (median over
    tables up to L2 / 4 of time with the stream / time without). Odd granules below the
    maximum and k in ``HELD_OUT_WORDS`` are held out (fit False): the checks' rows."""
    sweep, base = _sweep_of(sweep, COMPANION_FORMAT, "companion", source)
    meta, cc, chip, l2_mib, source = (sweep["meta"], base["compute_capability"], base["chip"],
                                      base["l2_mib"], base["source"])
    granule, top = meta["granule"], max(sweep["set_asides"])
    t = {(p["set_aside"], p["companion"], p["ws"]): p["median_ms"] for p in sweep["points"]}
    sizes = sorted({p["ws"] for p in sweep["points"]})

    def knee(aside, k):
        curve = [(w, t[aside, k, w] / t[0, k, w]) for w in sizes
                 if (aside, k, w) in t and (0, k, w) in t]
        lo, hi = tax.measured_knee([w / MIB for w, _ in curve], [r for _, r in curve],
                                   THRESHOLD)
        return lo, hi

    knees = []
    for aside in sweep["set_asides"]:
        if aside == 0:
            continue
        alone = knee(aside, 0)
        g = round(aside / granule)
        for k in sweep["companions"]:
            if k == 0:
                continue
            lo, hi = knee(aside, k)
            held = (g % 2 == 1 and aside != top) or k in HELD_OUT_WORDS
            knees.append(dict(chip=chip, compute_capability=cc, l2_mib=l2_mib,
                              set_aside_mib=aside / MIB, companion=float(k), knee_lo_mib=lo,
                              knee_hi_mib=hi, alone_lo_mib=alone[0], alone_hi_mib=alone[1],
                              fit=not held, source=source))
    streams = []
    small = [w for w in sizes if w <= SMALL_WS_FRACTION * meta["l2_cache_size"]]
    for k in sweep["companions"]:
        ratios = [t[0, k, w] / t[0, 0, w] for w in small if (0, k, w) in t and (0, 0, w) in t]
        if k and ratios:
            streams.append(dict(chip=chip, compute_capability=cc, l2_mib=l2_mib,
                                companion=float(k), time_ratio=_core.stats(ratios)["median"],
                                source=source))
    return {"knees": knees, "streams": streams}


# ---- foreign work: how the model does on writes it was never fitted on ----

KNEE_BAR_MIB = 4.0       # a knee within this of the measured interval
SLOWDOWN_BAR = 0.25      # a slowdown within this (relative) of the measured


def _knee_off(model_bytes, lo, hi, taxed):
    """How far (MiB) a model's knee lies outside a measured (lo, hi] (bytes; hi 0: none up
    to lo): 0 inside; None when neither has one."""
    if hi:
        return max(lo - model_bytes, model_bytes - hi, 0) / MIB if taxed else None
    return max(lo - model_bytes, 0) / MIB if taxed else 0.0


def _curve_knee(model, kind, scale, up_to):
    """Where the model's own slowdown curve for ``kind`` first reaches ``THRESHOLD``: the ws
    (bytes; 1/8 MiB steps up to ``up_to``, the table ``scale`` bytes per byte of ws), found by
    the same rule as a measured knee; 0 when it never does. For shapes this is not always
    ``knee_bytes`` (atomics at 5 granules: 26.7 against 34.0 MiB on the H200)."""
    grid = range(MIB // 8, int(up_to) + 1, MIB // 8)
    curve = model.slowdowns_at([int(h * scale) for h in grid], kind)
    return tax.measured_knee(list(grid), curve, THRESHOLD)[1]


def validation_summary(records, chip, *, companion_rows=None) -> dict:
    """Foreign work against the model. ``records``: one per (workload, set_aside, ws) with
    ``kind``, ``companion`` (its k at that ws), ``slowdown`` (and its interval), optionally
    ``shape`` (default random) and ``table`` (the bytes the shape applies to at that ws:
    the model's knee is scaled back to ws; default ws). Per workload
    and set-aside: the measured knee (first ws ``THRESHOLD``x slower), the model's knee with
    the workload's k and access ``shape`` (a record's; absent: random) (``companion_rows``:
    fitted from those rows; None: the core's own) and
    without (k = 0, the model before the companion term), and each measured slowdown against
    both. The bars: knees within ``KNEE_BAR_MIB``, slowdowns within ``SLOWDOWN_BAR``. Beside
    the model's knee (``knee_bytes``), where its own slowdown curve first reaches the threshold
    (``curve_knee_*``: the measured knee's definition), counted apart, not in the bar."""
    out = []
    groups = {}
    for r in records:
        groups.setdefault((r["workload"], r["set_aside"]), []).append(r)
    for (name, aside), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r["ws"])
        lo, hi = tax.measured_knee([r["ws"] for r in rs], [r["slowdown"] for r in rs],
                                   THRESHOLD)
        at = next((r for r in rs if r["ws"] == hi), rs[-1])
        k, shape = at["companion"], rs[0].get("shape", "random")
        scale = at.get("table", at["ws"]) / at["ws"]  # the model's table per byte of ws
        model = tax.predict(chip, aside, companion=k, companion_rows=companion_rows,
                            shape=shape)
        alone = tax.predict(chip, aside)
        points = []
        for r in rs:
            m = tax.predict(chip, aside, companion=r["companion"], companion_rows=companion_rows,
                            shape=shape).slowdown_at(r.get("table", r["ws"]), r["kind"])
            a = alone.slowdown_at(r["ws"], r["kind"])
            points.append(dict(ws_mib=r["ws"] / MIB, measured=r["slowdown"], model=m,
                               alone=a, model_ok=abs(r["slowdown"] / m - 1) <= SLOWDOWN_BAR,
                               alone_ok=abs(r["slowdown"] / a - 1) <= SLOWDOWN_BAR))
        off = _knee_off(model.knee_bytes / scale, lo, hi, model.taxed)
        curve = _curve_knee(model, rs[0]["kind"], scale, 2 * rs[-1]["ws"])
        off_curve = _knee_off(curve, lo, hi, curve > 0)
        off_alone = _knee_off(alone.knee_bytes, lo, hi, alone.taxed)
        out.append(dict(
            workload=name, kind=rs[0]["kind"], shape=shape,
            shape_basis=model.shape_basis, set_aside=aside,
            granules=round(aside / model.granule), companion=k,
            knee_lo_mib=lo / MIB, knee_hi_mib=hi / MIB if hi else None,
            model_knee_mib=model.knee_bytes / scale / MIB,
            alone_knee_mib=alone.knee_bytes / MIB,
            knee_off_mib=off, alone_knee_off_mib=off_alone,
            knee_ok=off is not None and off <= KNEE_BAR_MIB,
            curve_knee_mib=curve / MIB if curve else None, curve_knee_off_mib=off_curve,
            curve_knee_ok=off_curve is not None and off_curve <= KNEE_BAR_MIB,
            alone_knee_ok=off_alone is not None and off_alone <= KNEE_BAR_MIB,
            slowdowns_ok=sum(p["model_ok"] for p in points),
            alone_slowdowns_ok=sum(p["alone_ok"] for p in points), points=points,
            companion_basis=model.companion_basis))
    n = len(out)
    totals = dict(
        groups=n, knees_ok=sum(g["knee_ok"] for g in out),
        curve_knees_ok=sum(g["curve_knee_ok"] for g in out),
        alone_knees_ok=sum(g["alone_knee_ok"] for g in out),
        slowdowns=sum(len(g["points"]) for g in out),
        slowdowns_ok=sum(g["slowdowns_ok"] for g in out),
        alone_slowdowns_ok=sum(g["alone_slowdowns_ok"] for g in out))
    totals["bar_met"] = (totals["knees_ok"] == n and totals["slowdowns_ok"] == totals["slowdowns"])
    return {"groups": out, "totals": totals}


def validation_table(summary) -> list[str]:
    """The summary as text lines: one per workload and set-aside, then the totals."""
    lines = ["workload             shape  k     s  | knee measured | model (k) | off  | "
             "without k | off  | slowdowns within 25 %: model / without k | worst model"]
    for g in summary["groups"]:
        meas = (f"({g['knee_lo_mib']:g}, {g['knee_hi_mib']:g}]" if g["knee_hi_mib"]
                else f"none to {g['knee_lo_mib']:g}")
        worst = max(g["points"], key=lambda p: abs(p["measured"] / p["model"] - 1))
        off = "-" if g["knee_off_mib"] is None else f"{g['knee_off_mib']:.1f}"
        off0 = "-" if g["alone_knee_off_mib"] is None else f"{g['alone_knee_off_mib']:.1f}"
        lines.append(
            f"{g['workload']:<20} {g.get('shape', 'random'):<6} {g['companion']:5.2f} "
            f"{g['granules']:3d}g | "
            f"{meas:>13} | {g['model_knee_mib']:9.1f} | {off:>4} | {g['alone_knee_mib']:9.1f} | "
            f"{off0:>4} | {g['slowdowns_ok']:2d}/{len(g['points'])} / "
            f"{g['alone_slowdowns_ok']:2d}/{len(g['points'])} | {worst['measured']:.2f}x vs "
            f"{worst['model']:.2f}x at {worst['ws_mib']:g} MiB")
    t = summary["totals"]
    lines.append(f"knees within {KNEE_BAR_MIB:g} MiB: model {t['knees_ok']}/{t['groups']} "
                 f"(where its own curve first reaches {THRESHOLD:g}x: "
                 f"{t.get('curve_knees_ok', '-')}/{t['groups']}), "
                 f"without k {t['alone_knees_ok']}/{t['groups']}; slowdowns within "
                 f"{SLOWDOWN_BAR:.0%}: model {t['slowdowns_ok']}/{t['slowdowns']}, without k "
                 f"{t['alone_slowdowns_ok']}/{t['slowdowns']}; the bar is "
                 + ("met" if t["bar_met"] else "NOT met"))
    return lines


# ---- the access shapes: the sweep the shapes' constants are fitted from ----

SHAPE_FORMAT = "l2persist-tax-shape-sweep/1"
SHAPE_WORDS = (0, 1, 2, 4)     # companion words per access (a sweep's: per position)
SHAPE_ACCESSES = 1 << 23       # per call, as the foreign work's 8 M writes


def shape_probes(names=None) -> list[dict]:
    """The core's shapes other than random writes (whose rows are the companion sweep's)."""
    shapes = [s for s in _core.tax_shapes() if s["name"] != "random"]
    if names:
        unknown = set(names) - {s["name"] for s in shapes}
        if unknown:
            raise ValueError(f"shapes: {sorted(unknown)} not among "
                             f"{', '.join(s['name'] for s in shapes)}")
        shapes = [s for s in shapes if s["name"] in names]
    return shapes


def _shape_call(shape, ws, words, accesses=SHAPE_ACCESSES):
    """(accesses per call, words of the table it uses, companion words it reads, k): a sweep
    takes whole passes over its arrays (at least one), reading one part's length per word."""
    n = ws // 4
    if shape["pattern"] == "streaming":
        part = n // shape["arrays"]
        passes = max(1, round(accesses / part))
        return passes * part, n, words * part, words / shape["arrays"]
    n -= n % shape["row_words"]
    return accesses, n, words * accesses, float(words)


def shape_sweep(dev, *, shapes=None, words=SHAPE_WORDS, step=2 * MIB, rounds=3, repeat=5,
                warmup=1, budget_s=80.0, progress=None) -> dict:
    """Each access shape's probe (``_core.tax_shapes()``: atomics, 128-byte rows, a sweep of
    3 arrays) over tables of h bytes (``step``s up to the L2 + 4 MiB) with k companion words
    per access (``words``), at limit 0 and every set-aside from 4 granules below the maximum
    to it; ``rounds`` rounds (none started that would end past ``budget_s`` at the pace of
    those before; at least one), each
    setting every limit once and timing every (shape, k, h) there (median of ``repeat``).
    Returns the JSON-ready sweep ``shape_rows`` reads; the limit found before is restored."""
    from ..results import collect_metadata
    import time

    probes = shape_probes(shapes)
    granule, asides, sizes = _sweep_grid(dev, step, "shape")
    words = [int(k) for k in words]
    meta = collect_metadata(dev)
    meta.update(granule=granule, rounds=rounds, repeat=repeat, warmup=warmup, step=step,
                format=SHAPE_FORMAT, shapes=probes)
    ms, calls = {}, {}
    before = dev.persisting_l2_limit
    comp_words = max(max(_shape_call(p, w, k)[2] for p in probes for w in sizes for k in words),
                     1)
    t0 = time.perf_counter()
    done = 0
    with _core.Stream(dev) as s, _core.zeros(max(sizes) // 4, np.uint32, dev) as table, \
            _core.zeros(comp_words, np.uint32, dev) as comp:
        try:
            for rnd in range(rounds):
                spent = time.perf_counter() - t0
                if rnd and spent + spent / rnd > budget_s:  # another round would overrun
                    break
                for aside in asides:
                    dev.persisting_l2_limit = aside
                    granted = dev.persisting_l2_limit
                    for p in probes:
                        for k in words:
                            for ws in sizes:
                                acc, n, cw, ratio = _shape_call(p, ws, k)
                                view = table[:n]
                                extra = dict(companion=comp[:cw], companion_words=k) if k else {}

                                def fn(view=view, extra=extra, p=p, acc=acc):
                                    K.tax_probe(view, p["kind"], pattern=p["pattern"],
                                                row_words=p["row_words"], arrays=p["arrays"],
                                                accesses=acc, stream=s, **extra)

                                samples = _core.time_calls(fn, stream=s, warmup=warmup,
                                                           repeat=repeat, device=dev)
                                key = (p["name"], granted, k, ws)
                                ms.setdefault(key, []).append(_core.stats(samples)["median"])
                                calls[key] = (acc, ratio)
                done = rnd + 1
                if progress:
                    progress(f"round {rnd + 1}/{rounds}: {time.perf_counter() - t0:.1f} s")
        finally:
            _core.restore_persisting_l2(dev, before)
    meta["wall_s"] = round(time.perf_counter() - t0, 2)
    meta["rounds_done"] = done
    points = [dict(shape=sh, set_aside=a, words=k, companion=calls[sh, a, k, w][1], ws=w,
                   accesses=calls[sh, a, k, w][0], ms=v, median_ms=_core.stats(v)["median"])
              for (sh, a, k, w), v in sorted(ms.items())]
    return {"format": SHAPE_FORMAT, "meta": meta, "shapes": [p["name"] for p in probes],
            "set_asides": sorted({p["set_aside"] for p in points}), "words": words,
            "ws": sizes, "points": points}


SLOWDOWN_STEP = 4 * MIB  # the slowdown rows a shape's P is fitted from: tables this far apart


def shape_rows(sweep, *, source: str | None = None) -> dict:
    """The model's rows of each shape from a shape sweep (``shape_sweep``'s dict or its JSON
    path), as ``companion_rows`` gives them for random writes, each with its ``shape``: per
    set-aside above 0 and k > 0 the knee with the stream and the same run's without it; per
    k > 0 the stream's own cost at limit 0 over tables up to L2 / 4; and slowdowns (every
    set-aside, k and table in ``SLOWDOWN_STEP``s) for the shape's miss cost. Odd granules
    below the maximum are held out (fit False)."""
    sweep, base = _sweep_of(sweep, SHAPE_FORMAT, "shape", source)
    meta = sweep["meta"]
    granule, top = meta["granule"], max(sweep["set_asides"])
    t = {(p["shape"], p["set_aside"], p["words"], p["ws"]): p["median_ms"]
         for p in sweep["points"]}
    ratio = {(p["shape"], p["words"]): p["companion"] for p in sweep["points"]}
    sizes = sorted({p["ws"] for p in sweep["points"]})
    out = {"knees": [], "streams": [], "slowdowns": []}
    for shape in sweep["shapes"]:
        def curve(aside, k):
            return [(w, t[shape, aside, k, w] / t[shape, 0, k, w]) for w in sizes
                    if (shape, aside, k, w) in t and (shape, 0, k, w) in t]

        def knee(aside, k):
            c = curve(aside, k)
            return tax.measured_knee([w / MIB for w, _ in c], [r for _, r in c], THRESHOLD)

        for aside in sweep["set_asides"]:
            if aside == 0:
                continue
            fit = not (round(aside / granule) % 2 == 1 and aside != top)
            alone = knee(aside, 0)
            for k in sweep["words"]:
                if (shape, k) not in ratio:
                    continue
                row = dict(base, shape=shape, set_aside_mib=aside / MIB,
                           companion=ratio[shape, k], fit=fit)
                for w, r in curve(aside, k):
                    if w % SLOWDOWN_STEP == 0:
                        out["slowdowns"].append(dict(row, ws_mib=w / MIB, slowdown=r))
                if k:
                    lo, hi = knee(aside, k)
                    out["knees"].append(dict(row, knee_lo_mib=lo, knee_hi_mib=hi,
                                             alone_lo_mib=alone[0], alone_hi_mib=alone[1]))
        small = [w for w in sizes if w <= SMALL_WS_FRACTION * meta["l2_cache_size"]]
        for k in sweep["words"]:
            r = [t[shape, 0, k, w] / t[shape, 0, 0, w] for w in small
                 if (shape, 0, k, w) in t and (shape, 0, 0, w) in t]
            if k and r:
                out["streams"].append(dict(base, shape=shape, companion=ratio[shape, k],
                                           time_ratio=_core.stats(r)["median"]))
    return out
