"""Host cost of enqueueing an empty kernel: l2persist against cuda.core (and CuPy's RawKernel
and a one-element PyTorch add where installed), in the same process, on the same device.

Each sample queues a spin kernel (one thread, 10 ms of GPU time) and then times the host
enqueueing 400 empty launches behind it: the GPU is busy spinning, so its own launch
throughput cannot hide (or add to) the host's cost. The launchers take their samples in
rounds, one sample each per round in a rotated order, so that a drift of the host's speed
over the run falls on all of them alike (the launchers lie within a few percent of each
other). The figure is the median over the samples of wall time / launches. The bar:
l2persist at or below cuda.core."""

from __future__ import annotations

import time
from contextlib import nullcontext

from .. import _core, kernels as K
from ..results import PlotSpec

TITLE = "Host cost of an empty launch: l2persist vs cuda.core, CuPy, PyTorch"
NEEDS_GPU = True
NEEDS = ("gpu", "cuda.core")
NOTEBOOK = False
SOURCE = "the bar: a launch through l2persist costs no more than one through cuda.core."
ROW = ("host microseconds per empty launch behind a spin kernel: l2persist, cuda.core, CuPy, "
       "PyTorch; bar: l2persist <= cuda.core")
COUNT = 400  # launches per sample: below the driver's queue depth (~1000)
SPIN_NS = 10_000_000


def _host_us(launch, spin, sync):
    """Host microseconds per enqueue, one sample, measured behind a spin kernel (after 200
    launches that bring the launcher's host state back: other launchers ran in between)."""
    for _ in range(200):
        launch()
    sync()
    spin()
    t0 = time.perf_counter()
    for _ in range(COUNT):
        launch()
    us = (time.perf_counter() - t0) / COUNT * 1e6
    sync()
    return us


def _interleaved(setups, trials):
    """{launcher: samples}: `trials` rounds, one sample of each launcher per round, the
    order rotated by one each round."""
    names = list(setups)
    out = {n: [] for n in names}
    for t in range(trials):
        k = t % len(names) if names else 0
        for n in names[k:] + names[:k]:
            launch, stream, sync, where = setups[n]
            with where:  # the peer's current stream / device, as its users launch
                out[n].append(_host_us(launch, lambda st=stream: K.spin(SPIN_NS, stream=st),
                                       sync))
    return out


def _cuda_core(index):
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    dev = Device(index)
    dev.set_current()
    prog = Program('extern "C" __global__ void empty() {}', code_type="c++",
                   options=ProgramOptions(arch=f"sm_{dev.arch}"))
    kernel = prog.compile("cubin").get_kernel("empty")
    stream = dev.create_stream()
    config = LaunchConfig(grid=1, block=1)
    return (lambda: launch(stream, config, kernel)), stream, stream.sync, nullcontext()


def _cupy(index):
    import cupy
    with cupy.cuda.Device(index):
        k = cupy.RawKernel(r'extern "C" __global__ void empty() {}', "empty")
        cs = cupy.cuda.Stream(non_blocking=True)
    return (lambda: k((1,), (1,), (), stream=cs)), cs, cs.synchronize, cupy.cuda.Device(index)


def _torch(index):
    import torch
    x = torch.ones(1, device=f"cuda:{index}")
    ts = torch.cuda.Stream(device=index)
    return (lambda: x.add_(1)), ts, ts.synchronize, torch.cuda.stream(ts)


OURS = "l2persist.kernels.noop"
# launcher (the table's name, what --only launcher= names) -> (need, its maker)
PEERS = {"cuda.core launch()": ("cuda.core", _cuda_core), "cupy.RawKernel": ("cupy", _cupy),
         "torch (1-element add_)": ("torch", _torch)}


def axes(ctx) -> dict:
    return {"launcher": [OURS, *PEERS]}


def run(ctx):
    dev = ctx.device
    trials = 11 if ctx.quick else 31
    with _core.Stream(dev) as s:
        setups = {}  # launcher -> (launch, its stream, its sync, the context it launches in)

        def prepare(launcher):
            if launcher == OURS:
                setups[launcher] = ((lambda: K.noop(stream=s)), s, s.synchronize, nullcontext())
            elif ctx.has(PEERS[launcher][0], launcher):
                setups[launcher] = PEERS[launcher][1](dev.index)
            else:
                return []
            return {"launcher": launcher}

        records = ctx.sweep(ctx.axes, prepare, desc="launch overhead")
        samples = _interleaved(setups, trials)
    for r in records:
        st = _core.stats(samples[r["launcher"]])
        r.update(us=st["median"], q1_us=st["q1"], q3_us=st["q3"], samples=st["n"])
    return ctx.results(records, columns=COLUMNS)


COLUMNS = [("launcher", "launcher"), ("us", "median host us"), ("q1_us", "q1"), ("q3_us", "q3")]


def _pair(records):
    """l2persist's record and cuda.core's (None where a part of the sweep left one out)."""
    ours = next((r for r in records if r["launcher"] == OURS), None)
    ref = next((r for r in records if r["launcher"].startswith("cuda.core")), None)
    return ours, ref


def findings(res) -> list:
    ours, ref = _pair(res.records)
    out = [f"{r['launcher']}: {r['us']:.2f} us per launch (IQR {r['q1_us']:.2f}-"
           f"{r['q3_us']:.2f})" + (f", {r['us'] / ours['us']:.2f}x l2persist" if ours else "")
           for r in res.records]
    if ours and ref:
        out.append(f"l2persist {ours['us']:.2f} us vs cuda.core {ref['us']:.2f} us in the same "
                   f"run: {ours['us'] / ref['us']:.3f}x")
    return out


def bars(res) -> list:
    ours, ref = _pair(res.records)
    if ours is None or ref is None:
        return []
    return [(f"l2persist's launch ({ours['us']:.2f} us) at or under cuda.core's "
             f"({ref['us']:.2f} us) in the same run", ours["us"] <= ref["us"])]


def plot_spec(res) -> PlotSpec:
    ours, ref = _pair(res.records)
    title = "Host cost of an empty launch" + (
        f": l2persist {ours['us'] / ref['us']:.2f}x cuda.core" if ours and ref else "")
    return PlotSpec(x="launcher", y=["us"], kind="bar", interval=["q1_us", "q3_us"],
                    interval_label="interquartile range",
                    labels={"us": "median"}, xlabel="launcher",
                    ylabel="host microseconds per launch", title=title)
