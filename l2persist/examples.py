"""The CUDA Programming Guide's worked example of L2 access management, as one call, with
the baselines a user has without l2persist.

The guide ("Device Memory L2 Access Management", example "Reset L2 Access to Normal"):
set aside L2 for persisting accesses, put a window (hitRatio 0.6) over data1 on a stream, run
kernel A ten times and kernel B once on data1, disable the window, reset persisting lines, and
run kernel C on data2 with the whole L2. Every step here is an l2persist call; this module only
orders them and times each kernel with CUDA events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _core
from .kernels import scale_shift


CONFIGS = ("limit0", "default", "set_aside", "window")
LABELS = {"limit0": "(a) limit 0, no window", "default": "(b) default limit, no window",
          "set_aside": "(c) guide's set-aside, no window",
          "window": "(d) guide's set-aside + window"}


@dataclass(frozen=True)
class GuideExampleResult:
    """Kernel times (ms) of the worked example under the four configurations: (a) persisting
    limit 0 and no window (what a user has without l2persist), (b) the device's default limit,
    (c) the guide's set-aside without the window, (d) the set-aside with the window."""

    device: str
    set_aside: int
    default_limit: int
    data1_bytes: int
    data2_bytes: int
    hit_ratio: float
    runs: dict

    @property
    def with_window(self) -> dict:
        return self.runs["window"]

    def _samples(self, config: str, kernel: str) -> list:
        return self.runs[config].get(f"{kernel}_samples", [self.runs[config][kernel]])

    def verdict(self, kernel: str = "A", config: str = "window"):
        """The better-baseline rule (``l2persist.tune.verdict``) for `kernel` under `config`
        against (a) limit 0 and (b) the default limit."""
        from .tune import verdict
        return verdict(self._samples("limit0", kernel), self._samples("default", kernel),
                       self._samples(config, kernel))

    def baseline(self, kernel: str = "A") -> float:
        """The better of (a) and (b): what the user has without l2persist."""
        return self.verdict(kernel).baseline_ms

    def speedup(self, kernel: str = "A", config: str = "window") -> float:
        """The better baseline's time over `config`'s (median, ms): > 1 means faster."""
        return self.verdict(kernel, config).speedup

    def table(self) -> str:
        from .tune import verdict
        rows = ["| configuration | A (ms, median) | B (ms) | C (ms) | A+B vs best baseline |",
                "|---|---:|---:|---:|---:|"]
        ab = {k: [self.runs[k]["A"] * 10 + self.runs[k]["B"]] for k in CONFIGS}
        for k in CONFIGS:
            r = self.runs[k]
            v = verdict(ab["limit0"], ab["default"], ab[k])
            rows.append(f"| {LABELS[k]} | {r['A']:.4f} | {r['B']:.4f} | {r['C']:.4f} | "
                        f"{v.speedup:.3f}x |")
        return "\n".join(rows)


def _time_once(fn, stream) -> float:
    return _core.time_calls(fn, stream=stream, warmup=0, repeat=1)[0]


def _run_sequence(stream, data1, data2, window, repeats: int) -> dict:
    """A x repeats and B on data1 (window on the stream if given); window off; reset; C."""
    times_a, times_b, times_c = [], [], []
    with stream.access_policy(window):
        for _ in range(repeats):
            times_a.append(_time_once(lambda: scale_shift(data1, 1.0, 1.0, stream=stream), stream))
        times_b.append(_time_once(lambda: scale_shift(data1, 2.0, 0.0, stream=stream), stream))
    stream.access_policy_window = None  # the guide: num_bytes = 0 disables the window
    _core.reset_persisting_l2(stream.device)
    times_c.append(_time_once(lambda: scale_shift(data2, 0.5, 1.0, stream=stream), stream))
    return {"A": float(np.median(times_a)), "B": times_b[0], "C": times_c[0],
            "A_samples": times_a}


def guide_example(device=None, *, data1_bytes: int | None = None,
                  data2_bytes: int | None = None, hit_ratio: float = 0.6,
                  repeats: int = 10) -> GuideExampleResult:
    """Run the guide's worked example under (a) limit 0, (b) the default limit, (c) the guide's
    set-aside min(0.75 L2, max) without the window and (d) with it, and time each kernel.

    data1 defaults to the guide's set-aside (the guide sizes the window to the persisting
    region), data2 to 4x the L2. Values are checked against NumPy at the end. The limit the
    device had is restored.
    """
    dev = _core.Device(0 if device is None else int(device))
    props = dev.properties
    set_aside = _core.default_set_aside(props.l2_cache_size, props.persisting_l2_cache_max_size)
    if data2_bytes is None:
        data2_bytes = 4 * props.l2_cache_size
    n1 = (data1_bytes if data1_bytes is not None else set_aside) // 4
    n2 = data2_bytes // 4
    rng = np.random.default_rng()
    host1 = rng.random(n1, dtype=np.float32)
    host2 = rng.random(n2, dtype=np.float32)
    limits = {"limit0": 0, "default": dev.default_persisting_l2_limit, "set_aside": set_aside,
              "window": set_aside}
    runs = {}
    with _core.Stream(dev) as stream, _core.to_device(host1, dev) as data1, \
            _core.to_device(host2, dev) as data2:
        window = _core.AccessPolicyWindow(data1, hit_ratio=hit_ratio, clamp=True)
        for name in CONFIGS:
            with dev.persisting_l2(limits[name]) as granted:
                runs[name] = _run_sequence(stream, data1, data2,
                                           window if name == "window" else None, repeats)
                limits[name] = granted
        stream.synchronize()
        _check(data1, host1, repeats, len(CONFIGS), data2, host2)
    return GuideExampleResult(device=props.name, set_aside=limits["window"],
                              default_limit=limits["default"], data1_bytes=n1 * 4,
                              data2_bytes=n2 * 4, hit_ratio=hit_ratio, runs=runs)


def _check(data1, host1, repeats, runs, data2, host2) -> None:
    """Every run applied A (x+1) repeats times, then B (2x); C (0.5x+1) once: compare with
    NumPy."""
    expect1 = host1.copy()
    for _ in range(runs):
        for _ in range(repeats):
            expect1 = expect1 * np.float32(1.0) + np.float32(1.0)
        expect1 = expect1 * np.float32(2.0)
    expect2 = host2.copy()
    for _ in range(runs):
        expect2 = expect2 * np.float32(0.5) + np.float32(1.0)
    np.testing.assert_allclose(data1.to_numpy(), expect1, rtol=1e-5)
    np.testing.assert_allclose(data2.to_numpy(), expect2, rtol=1e-6)

__all__ = ["CONFIGS", "LABELS", "GuideExampleResult", "guide_example"]
