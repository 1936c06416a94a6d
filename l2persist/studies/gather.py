"""The non-coherent cache study on this GPU: out[i] = src[map[i]] with a random map, plain /
const __restrict__ / texture-object variants, N = 2^0 .. 2^27 (2^22 in quick mode), 10
iterations each, ping-ponging src and out; data and maps made on the device. Counters (L1 /
texture hit rates) at a few sizes say which cache served the gathers."""

from __future__ import annotations

import time

import numpy as np

from .. import _core, kernels as K
from ..counters import measure
from ..results import PlotSpec

TITLE = "Gather through plain, read-only (restrict) and texture paths, N = 2^0..2^27"
NEEDS_GPU = True
SOURCE = ("A cc 3.5 study on a K20X: the read-only and texture paths helped most between 32 KiB "
          "and 4 MiB; texture fetches had a fixed overhead of about 7 ns per launch there. Its "
          "per-N table is not in our source material, so only these findings are compared.")
VARIANTS = ("plain", "restrict", "texture")
COUNTER_LOG2 = (13, 18, 23)
CHECK_LOG2 = 12  # every variant checked against NumPy at this N, on fresh data
NEEDS = ("gpu",)  # the hit-rate column also wants counters: skipped with a reason if absent
ROW = "the non-coherent cache study: log2 N = 0..27 x plain / restrict / texture, L1 hit rates"
INTRO = """# Gather through the plain, read-only and texture paths

**The source.** A study on a K20X (cc 3.5): `out[i] = in[map[i]]` with a random map, plain
pointers vs `const __restrict__` (the read-only data cache, `__ldg`) vs texture fetches, N =
2^0..2^27, 10 iterations each. Its findings: the read-only and texture paths helped most
between 32 KiB and 4 MiB, and texture fetches had a fixed cost of about 7 ns per launch.

**What we measure.** The same sweep with texture *objects* (texture references are gone since
CUDA 12), data and maps generated on the device, every variant checked against NumPy, and the
L1/texture hit rate from the counters at three sizes."""
WHY = """**Why.** Since Volta the L1 and the texture cache are one unit, and ordinary global loads
are cached in it. The read-only path no longer reaches a separate cache, so `restrict` and
`texture` mostly match `plain`; the hit rates above show the same L1 serving all three. The
texture path still costs a little per launch (descriptor fetch and its setup), visible only
at tiny N."""
KIB, MIB = 1 << 10, 1 << 20


def axes(ctx) -> dict:
    return {"log2n": range((22 if ctx.quick else 27) + 1)}


def run(ctx):
    dev = ctx.device
    iterations = 10
    # the largest N this run measures, and at least the NumPy check's 2^CHECK_LOG2
    nmax = 1 << max(ctx.values("log2n") + [CHECK_LOG2])
    wall0 = time.perf_counter()
    with _core.Stream(dev) as s, _core.empty(nmax, np.int32, dev) as a, \
            _core.empty(nmax, np.int32, dev) as b, _core.empty(nmax, np.int32, dev) as m:
        def point(log2n):
            n = 1 << log2n
            bufs, mp = [a[:n], b[:n]], m[:n]
            K.random_map(mp, log2n, stream=s)
            K.random_map(bufs[0], 1000 + log2n, range=2**31 - 1, stream=s)
            times = {}
            for v in VARIANTS:
                state = [0]

                def step(v=v):  # out = src[map], then swap src and out
                    i = state[0]
                    K.gather(bufs[1 - i], bufs[i], mp, v, check=False, stream=s)
                    state[0] = 1 - i

                # the source study's protocol: exactly `iterations` timed calls
                times[v] = ctx.measure(step, stream=s, warmup=1, repeat=iterations,
                                       max_samples=iterations)
            l1 = {}
            if log2n in COUNTER_LOG2 and not ctx.quick and ctx.has("counters", "L1 hit rates"):
                c = measure(lambda: [K.gather(bufs[1], bufs[0], mp, v, check=False, stream=s)
                                     for v in VARIANTS], ["l1_hit_rate"], device=dev,
                            per_kernel=True)
                l1 = {v: c[i]["l1_hit_rate"] for i, v in enumerate(VARIANTS)}
            us = {v: times[v]["ms"] * 1e3 for v in VARIANTS}
            return [{"bytes": 4 * n, "variant": v, "us": us[v], "q1_us": times[v]["q1_ms"] * 1e3,
                     "q3_us": times[v]["q3_ms"] * 1e3, "ns_per_element": us[v] * 1e3 / n,
                     "speedup_vs_plain": us["plain"] / us[v],
                     "l1_hit_rate": l1.get(v)} for v in VARIANTS]

        records = ctx.sweep(ctx.axes, point)
        # One check of every variant against NumPy at a mid size, on fresh data.
        n = 1 << CHECK_LOG2
        K.random_map(m[:n], 99, stream=s)
        ok = True
        with _core.empty(n, np.int32, dev) as out:
            for v in VARIANTS:
                out.fill_bytes(0xAB)
                K.gather(out, a[:n], m[:n], v, stream=s)
                s.synchronize()
                ok &= bool(np.array_equal(out.to_numpy(), a[:n].to_numpy()[m[:n].to_numpy()]))
    wall = time.perf_counter() - wall0
    return ctx.results(records, summary={"wall_s": wall, "numpy_check": ok}, columns=COLUMNS)


COLUMNS = [("log2n", "log2n (log2 N)"), ("bytes", "bytes of src"), ("variant", "variant"),
           ("us", "median us"), ("ns_per_element", "ns / element"),
           ("speedup_vs_plain", "vs plain"), ("l1_hit_rate", "L1 hit %")]


def _band(r) -> bool:  # where the K20X study saw its gains
    return 32 * KIB <= r["bytes"] <= 4 * MIB


def numbers(records) -> dict:
    """The headline numbers: median speed vs plain over 32 KiB..4 MiB, texture's extra cost
    at N <= 16 (None where a part of the sweep, --only, has no such records)."""
    by = lambda v, k: [r for r in records if r["variant"] == v and k(r)]  # noqa: E731
    small = lambda r: r["log2n"] <= 4  # noqa: E731
    median = lambda xs: float(np.median(xs)) if xs else None  # noqa: E731
    overhead = median([t["us"] - p["us"] for t, p in zip(by("texture", small),
                                                          by("plain", small))])
    return {"restrict_band_speedup": median([r["speedup_vs_plain"]
                                             for r in by("restrict", _band)]),
            "texture_band_speedup": median([r["speedup_vs_plain"] for r in by("texture", _band)]),
            "texture_overhead_ns": None if overhead is None else overhead * 1e3}


def findings(res) -> list:
    n = numbers(res.records)
    res.summary.update(n)
    notes = []
    if n["restrict_band_speedup"] is not None:
        notes.append(f"32 KiB..4 MiB: restrict {n['restrict_band_speedup']:.3f}x, texture "
                     f"{n['texture_band_speedup']:.3f}x plain (median); the K20X study saw its "
                     "largest gains there")
    if n["texture_overhead_ns"] is not None:
        notes.append(f"texture minus plain at N <= 16: {n['texture_overhead_ns']:.0f} ns of GPU "
                     "time per launch (the K20X study: ~7 ns; not comparable across 10 years of "
                     "hardware and timing)")
    notes.append(f"whole table {res.summary.get('wall_s', float('nan')):.2f} s wall; every "
                 f"variant checked against NumPy: {res.summary.get('numpy_check')}")
    l1 = [r for r in res.records if r.get("l1_hit_rate") is not None]
    if l1:
        notes.append("L1/texture hit rate (%): " + "; ".join(
            f"2^{r['log2n']} {r['variant']} {r['l1_hit_rate']:.1f}" for r in l1))
    return notes


def plot_spec(res) -> PlotSpec:
    n = numbers(res.records)
    band = ("" if n["restrict_band_speedup"] is None else
            f": restrict {n['restrict_band_speedup']:.3f}x, texture "
            f"{n['texture_band_speedup']:.3f}x plain over 32 KiB..4 MiB")
    # Drawn as ratios to plain, not as three times per element: on one time axis the three
    # lines lie within a few per cent of each other and texture's 3 % cannot be seen.
    return PlotSpec(x="bytes", y=["speedup_vs_plain"], hue="variant", logx=True, hline=1.0,
                    hline_label="plain loads (each time divided by plain's)",
                    where={"variant": ["restrict", "texture"]},
                    labels={"restrict": "const __restrict__ (read-only path)",
                            "texture": "texture object"},
                    vlines={32 * KIB: "32 KiB", 4 * MIB: "4 MiB"},
                    xlabel="bytes of src (log2 scale)",
                    ylabel="speed vs plain loads (>1 faster)",
                    title=f"Gather{band} (no gain on Hopper)")
