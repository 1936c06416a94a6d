"""The CUDA Programming Guide's worked example of L2 access management, as one call.

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


@dataclass(frozen=True)
class GuideExampleResult:
    """Kernel times (ms) of the worked example, run with and without the window."""

    device: str
    set_aside: int
    data1_bytes: int
    data2_bytes: int
    hit_ratio: float
    with_window: dict
    without_window: dict

    def speedup(self, kernel: str = "A") -> float:
        """Time without the window over time with it (median, ms)."""
        return self.without_window[kernel] / self.with_window[kernel]

    def table(self) -> str:
        rows = ["| kernel | with window (ms) | without (ms) | speedup |", "|---|---:|---:|---:|"]
        for k in ("A", "B", "C"):
            rows.append(f"| {k} | {self.with_window[k]:.4f} | {self.without_window[k]:.4f} | "
                        f"{self.without_window[k] / self.with_window[k]:.2f}x |")
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
    """Run the guide's worked example twice (with the window, then without) and time it.

    data1 defaults to the granted set-aside (the guide sizes the window to the persisting
    region), data2 to 4x the L2. Values are checked against NumPy at the end.
    """
    dev = _core.Device(0 if device is None else int(device))
    props = dev.properties
    if data2_bytes is None:
        data2_bytes = 4 * props.l2_cache_size
    rng = np.random.default_rng()
    with dev.persisting_l2() as granted, _core.Stream(dev) as stream:
        n1 = (data1_bytes if data1_bytes is not None else granted) // 4
        n2 = data2_bytes // 4
        host1 = rng.random(n1, dtype=np.float32)
        host2 = rng.random(n2, dtype=np.float32)
        with _core.to_device(host1, dev) as data1, _core.to_device(host2, dev) as data2:
            window = _core.AccessPolicyWindow(data1, hit_ratio=hit_ratio, clamp=True)
            with_w = _run_sequence(stream, data1, data2, window, repeats)
            without = _run_sequence(stream, data1, data2, None, repeats)
            stream.synchronize()
            _check(data1, host1, repeats, data2, host2)
    return GuideExampleResult(device=props.name, set_aside=granted, data1_bytes=n1 * 4,
                              data2_bytes=n2 * 4, hit_ratio=hit_ratio, with_window=with_w,
                              without_window=without)


def _check(data1, host1, repeats, data2, host2) -> None:
    """Both runs applied A (x+1) repeats times, then B (2x): compare with NumPy."""
    expect1 = host1.copy()
    for _ in range(2):
        for _ in range(repeats):
            expect1 = expect1 * np.float32(1.0) + np.float32(1.0)
        expect1 = expect1 * np.float32(2.0)
    expect2 = host2.copy()
    for _ in range(2):
        expect2 = expect2 * np.float32(0.5) + np.float32(1.0)
    np.testing.assert_allclose(data1.to_numpy(), expect1, rtol=1e-6)
    np.testing.assert_allclose(data2.to_numpy(), expect2, rtol=1e-6)
