"""The tuner on built-in workloads: the guide's hot/cold kernel (read-write and read-only,
16 and 32 MiB hot, 1 GiB cold) and the guide's worked example (kernel A x10 + B on data1).
Each: the baselines (a) limit 0 and (b) default, (c) the found set-aside without a window,
tune's pick, its speedup over the better baseline with a bootstrap interval, and the verdict."""

from __future__ import annotations

import contextlib

import numpy as np

from .. import _core, kernels as K
from ..tax import label as tax_label
from ..tune import describe, tune
from ..results import PlotSpec
from .atlas import histogram

TITLE = "tune() on the guide's workloads: does persistence help, with which settings?"
NEEDS_GPU = True
SOURCE = "l2persist's own question: a speedup counts only against limit 0 / the default."
MIB = 1 << 20
HIST_FRACTION = 0.8   # the atomic histogram's accumulator, as a share of L2 (the atlas's size)
ROW = "`tune()` on the guide's workloads and on PyTorch workloads"
INTRO = """# `tune`: does persistence help *this* workload, and with which settings?

`l2persist.tune(fn, targets)` searches set-aside levels, windows on/off, hitRatio and the hit
and miss properties (in C), confirms the pick against (a) limit 0, (b) the default limit and
(c) the set-aside alone in interleaved rounds, and recommends it only when the bootstrap
interval of the speedup lies above 1 and the gain is at least 1 %.

**What we measure.** The guide's hot/cold kernel (read-write and read-only), the guide's
worked example and, with PyTorch, an atomic histogram (`index_add_` into an accumulator of
0.8 x L2), each tuned from scratch. For each pick, what its set-aside costs all other work of
the process (the tax: a write-heavy probe at that set-aside against limit 0) and whether to
set the limit around a phase or keep it for the process (setting it synchronises the
device)."""
WHY = """**Reading the verdicts.** A "does not help" is an answer, not a failure: the honest
baseline is the device as it comes. The foreign workloads in `l2persist.workloads` (PyTorch
embedding lookups, SpMV, an MLP) get the same treatment above when PyTorch is installed."""
# extra notebook cells, after the findings
NOTEBOOK_CELLS = ['''# Workloads from other libraries (PyTorch): tune them the same way.
try:
    import torch
    from l2persist import workloads
    HAVE_TORCH = LIVE and torch.cuda.is_available()
except ImportError:
    HAVE_TORCH = False
if HAVE_TORCH:
    for name, build in workloads.WORKLOADS.items():
        w = build()
        r = l2persist.tune(w.fn, w.targets, stream=w.stream, repeat=7)
        print(f"{name} ({w.description}); results still right: {w.check()}")
        print("   ", r.verdict())
else:
    print("PyTorch with a GPU is needed to tune its workloads here.")''']


@contextlib.contextmanager
def guide_workloads(dev, hots, cold_n, rng):
    """The guide's workloads on one stream (this study's and tune-grid's): the hot/cold
    kernel over a hot slice of up to max(hots) MiB and a cold array of cold_n int32, and the
    guide's worked example (kernel A x10 + B on data1, the guide's set-aside in size). Yields
    (stream, hot_cold(mode, mib) -> (fn, hot), guide fn, data1)."""
    props = dev.properties
    set_aside = _core.default_set_aside(props.l2_cache_size, props.persisting_l2_cache_max_size)
    with _core.Stream(dev) as s, \
            _core.to_device(rng.integers(0, 9, cold_n, dtype=np.int32), dev) as cold, \
            _core.to_device(rng.integers(0, 9, max(hots) * MIB // 4, dtype=np.int32), dev) as hot_all, \
            _core.to_device(rng.random(set_aside // 4, dtype=np.float32), dev) as data1:
        def guide():
            for _ in range(10):
                K.scale_shift(data1, 1.0, 1.0, stream=s)
            K.scale_shift(data1, 2.0, 0.0, stream=s)

        def hot_cold(mode, mib):
            hot = hot_all[: mib * MIB // 4]
            return (lambda: K.hot_cold(hot, cold, read_only=mode == "ro", stream=s)), hot
        yield s, hot_cold, guide, data1


HISTOGRAM = f"histogram {HIST_FRACTION} x L2 (PyTorch index_add_)"


def _workloads(quick: bool) -> dict:
    """workload (the table's name, what --only workload= names) -> (mode, hot MiB)."""
    out = {f"hot/cold {m} {h} MiB": (m, h) for h in ((16,) if quick else (16, 32))
           for m in ("rw", "ro")}
    out["guide example A x10 + B"] = ("guide", 0)
    out[HISTOGRAM] = ("histogram", 0)  # skipped, with the reason, without PyTorch
    return out


def axes(ctx) -> dict:
    return {"workload": list(_workloads(ctx.quick))}


def run(ctx):
    dev = ctx.device
    props = dev.properties
    rng = np.random.default_rng()
    workloads = _workloads(ctx.quick)
    hots = [mib for w, (mode, mib) in workloads.items() if mode in ("rw", "ro")]
    repeat = 7 if ctx.quick else 10
    cold_n = (256 if ctx.quick else 1024) * MIB // 4
    with guide_workloads(dev, hots, cold_n, rng) as (s, hot_cold, guide, data1):
        def point(workload):
            mode, mib = workloads[workload]
            work = None
            if mode == "histogram" and not _have_torch():
                ctx.skipped.append((workload, "it needs PyTorch with CUDA"))
                return []
            if mode == "guide":
                fn, target = guide, data1
            elif mode == "histogram":
                work = histogram(s, int(HIST_FRACTION * props.l2_cache_size) // 256 * 256,
                                 (16 if ctx.quick else 64) * MIB, rng)
                fn, target = work.fn, work.target
            else:
                fn, target = hot_cold(mode, mib)
            try:
                r = tune(fn, [target], stream=s, device=dev, repeat=repeat)
            finally:
                if work is not None:
                    work.close()
            return {"limit0_ms": r.limit0_ms, "default_ms": r.default_ms,
                    "aside_ms": r.aside_ms, "pick": describe(r.recommended),
                    "pick_ms": r.found_ms if r.persistence_helps else r.baseline_ms,
                    "speedup": r.speedup if r.persistence_helps else 1.0,
                    "ci_low": r.ci[0], "ci_high": r.ci[1], "helps": r.persistence_helps,
                    "evals": r.evals, "tune_s": r.wall_s,
                    # what the pick's set-aside costs other work, and where to set it
                    # (tune reports both): None where the pick sets no set-aside of its own
                    "tax_slowdown": r.tax["slowdown"] if r.tax else None,
                    "tax_set_aside_mib": r.tax["set_aside"] / MIB if r.tax else None,
                    "switch_ms": r.switch_ms,
                    "scope_min_calls": r.scope["min_calls"] if r.scope else None,
                    "tax_line": r.tax_line(), "scope_line": r.scope_line()}

        records = ctx.sweep(ctx.axes, point)
    return ctx.results(records, columns=COLUMNS)


COLUMNS = [("workload", "workload"), ("limit0_ms", "(a) limit 0 ms"),
           ("default_ms", "(b) default ms"), ("aside_ms", "(c) set-aside ms"),
           ("pick", "tune's pick"), ("speedup", "vs best baseline"), ("helps", "helps"),
           ("tax_slowdown", "tax, measured (write probe)"),
           ("scope_min_calls", "scope: calls per phase"),
           ("evals", "evaluations"), ("tune_s", "tune s")]


def _have_torch() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def findings(res) -> list:
    out = []
    for r in res.records:
        line = f"{r['workload']}: " + (
            f"{r['speedup']:.3f}x with {r['pick']} (95% CI {r['ci_low']:.3f}-"
            f"{r['ci_high']:.3f})" if r["helps"] else
            f"persistence does not help (CI {r['ci_low']:.3f}-{r['ci_high']:.3f}); keep "
            f"limit 0 / the default")
        # the tax and the scope in short (the records keep tune's lines); records stored
        # before tune reported them have neither
        if r.get("tax_slowdown"):
            line += (f"; tax at set-aside {r['tax_set_aside_mib']:g} MiB: "
                     f"{tax_label(True, 'a write-heavy probe')} {r['tax_slowdown']:.2f}x "
                     "slower")
        if r.get("scope_min_calls"):
            line += (f"; scope: set the limit around phases of >= {r['scope_min_calls']} calls "
                     f"(a switch costs {r['switch_ms']:.2f} ms and synchronises the device)")
        out.append(line)
    return out


def plot_spec(res) -> PlotSpec:
    helps = [r for r in res.records if r["helps"]]
    best = max(helps, key=lambda r: r["speedup"]) if helps else None
    title = (f"tune: persistence helps {len(helps)} of {len(res.records)} workloads"
             + (f", at most {best['speedup']:.2f}x ({best['workload']})" if best else ""))
    return PlotSpec(x="workload", y=["speedup"], kind="bar", hline=1.0,
                    interval=["ci_low", "ci_high"],
                    labels={"speedup": "recommended (1.0: keep the default)"},
                    xlabel="workload",
                    ylabel="speed vs better of limit 0 / default (>1 faster)", title=title)
