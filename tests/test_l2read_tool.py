"""tools/investigations/l2read-vs-original on the CPU: the original's kernel is cut out by its braces, both
kernels are given the same passes (l2_read's default resolved once, through l2_read_shape),
and the bar counts launches from --bar-passes up."""

import argparse
import types

import numpy as np
import pytest


def _tool():
    import tool_script
    return tool_script.load("tools/investigations/l2read-vs-original")


# A stand-in with the original's declaration and nested braces (not its code).
SOURCE = """#include <x>
template <int N> __global__ void other(double *a) { a[0] = 1; }
template <int N, int BLOCKSIZE>
__global__ void sumKernel(double *A, const double *B, int blockRun) {
  for (int i = 0; i < N; i++) { if (i) { A[i] = B[i]; } }
}
int main() { return 0; }
"""


def test_cut_kernel_takes_the_template_to_its_closing_brace():
    t = _tool()
    cut = t.cut_kernel(SOURCE)
    assert cut.startswith("template <int N, int BLOCKSIZE>") and cut.endswith("}\n}")
    assert "other" not in cut and "main" not in cut
    with pytest.raises(ValueError, match="no `template"):
        t.cut_kernel(SOURCE.replace("sumKernel", "addKernel"))
    with pytest.raises(ValueError, match="braces"):
        t.cut_kernel(SOURCE[: SOURCE.index("int main")].rstrip().rstrip("}"))
    assert t.keywords("l2_read loads=32,load=nc") == {"loads": 32, "load": "nc"}
    assert t.keywords("l2_read") == {}


class _Buf:
    ptr = 4096

    def __init__(self, *a):
        pass

    def __getitem__(self, k):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    handle = 7

    def synchronize(self):
        pass


def test_compare_gives_both_kernels_the_same_passes_and_bars_short_launches(capsys):
    t = _tool()
    calls = []
    ratio = {1: 0.8, 3: 1.0, None: 1.01}

    def l2_read(view, r, stream=None, **kw):
        calls.append(("ours", r, kw))
        return ("ours", r)

    state = {}

    def orig_launch(blocks, run, a, b, s):
        calls.append(("orig", blocks, run))
        state["last"] = "orig"
        return 0

    def benchmark(fn, **kw):
        state["last"] = None
        out = fn()
        if state["last"] == "orig":
            return types.SimpleNamespace(median=1.0)
        return types.SimpleNamespace(median=1.0 / ratio[out[1]])

    K = types.SimpleNamespace(l2_read=l2_read, l2_read_shape=lambda n: {"repeats": 512})
    l2p = types.SimpleNamespace(Stream=_Buf, zeros=_Buf, benchmark=benchmark)
    lib = types.SimpleNamespace(orig_launch=orig_launch)
    dev = types.SimpleNamespace(properties=types.SimpleNamespace(name="fake"))
    args = argparse.Namespace(rounds=2, samples=1, loads=False, variant=[], bar=0.995,
                              bar_passes=3, json=None)
    assert t.compare(args, lib, dev, [8.0], [1, 3, None], np, l2p, K) == 0
    out = capsys.readouterr().out
    assert "| 8 | default (512) |" in out and "worst default ratio from 3 passes up: 1.000" in out
    # 8 MiB: 32 blocks of 256 KiB a pass; the default's 512 passes for both kernels
    assert {c[1:] for c in calls if c[0] == "orig"} == {(32, 32), (96, 32), (512 * 32, 32)}
    assert {c[1] for c in calls if c[0] == "ours"} == {1, 3, None}
    args.bar_passes = 1  # the one-pass launch at 0.8x now counts
    assert t.compare(args, lib, dev, [8.0], [1, 3, None], np, l2p, K) == 1
    assert "0.800 at 8 MiB x 1 (below the bar" in capsys.readouterr().out


def test_sectors_bar_fails_a_default_that_the_l1_partly_served(capsys):
    """--sectors: each kernel's L2 share is its counted sectors x 32 over the launch's bytes;
    the default's timing bar alone is not enough when the L1 served part of its reads."""
    t = _tool()
    share = {"ours": 0.5}

    def orig_launch(*a):
        return 0

    def measure(fn, metrics, device=None, warmup=None):
        fn()
        mine = "orig" if fn.__name__ == "fn" else "ours"  # the tool's closure for the original
        return {"l2_read_sectors": share.get(mine, 1.0) * state["bytes"] / 32}

    state = {"bytes": 3 * 8 * (1 << 20)}  # one cell: 8 MiB x 3 passes
    K = types.SimpleNamespace(l2_read=lambda view, r, stream=None, **kw: None,
                              l2_read_shape=lambda n: {"repeats": 512})
    l2p = types.SimpleNamespace(Stream=_Buf, zeros=_Buf, measure=measure,
                                benchmark=lambda fn, **kw: types.SimpleNamespace(median=1.0))
    lib = types.SimpleNamespace(orig_launch=orig_launch)
    dev = types.SimpleNamespace(properties=types.SimpleNamespace(name="fake"))
    args = argparse.Namespace(rounds=1, samples=1, loads=False, variant=[], bar=0.995,
                              bar_passes=3, json=None, sectors=True, min_share=0.93)
    assert t.compare(args, lib, dev, [8.0], [3], np, l2p, K) == 1
    out = capsys.readouterr().out
    assert "least L2 share of l2_read's default: 0.500 at 8 MiB x 3" in out
    assert "the L1 served part of its reads" in out
    share["ours"] = 0.99
    assert t.compare(args, lib, dev, [8.0], [3], np, l2p, K) == 0
    assert "| 8 | 3 | 1.000 | 0.990 |" in capsys.readouterr().out
    # counters that cannot be read: exit 2 with the reason, not a traceback
    def no_cupti(fn, metrics, device=None, warmup=None):
        raise RuntimeError("CUPTI: profiling not permitted")
    l2p.measure = no_cupti
    assert t.compare(args, lib, dev, [8.0], [3], np, l2p, K) == 2
    assert "--sectors: the counters cannot be read (CUPTI: profiling" in capsys.readouterr().out


def test_self_times_the_original_as_its_own_cell_and_says_what_a_cell_resolves(capsys):
    """--self: the original is timed once more as a separate cell (twice the launches), and
    its ratio to itself from --bar-passes up is printed as the resolution of one cell; the
    exit status still follows l2_read's default alone."""
    t = _tool()
    launches = []

    def orig_launch(blocks, run, a, b, s):
        launches.append(blocks)
        return 0

    K = types.SimpleNamespace(l2_read=lambda view, r, stream=None, **kw: None,
                              l2_read_shape=lambda n: {"repeats": 512})
    l2p = types.SimpleNamespace(Stream=_Buf, zeros=_Buf,
                                benchmark=lambda fn, **kw: (fn(), types.SimpleNamespace(
                                    median=1.0))[1])
    lib = types.SimpleNamespace(orig_launch=orig_launch)
    dev = types.SimpleNamespace(properties=types.SimpleNamespace(name="fake"))
    args = argparse.Namespace(rounds=1, samples=1, loads=False, variant=[], bar=0.995,
                              bar_passes=3, json=None, self_check=False)
    t.compare(args, lib, dev, [8.0], [3], np, l2p, K)
    alone = len(launches)
    assert "against itself" not in capsys.readouterr().out
    launches.clear()
    args.self_check = True
    assert t.compare(args, lib, dev, [8.0], [3], np, l2p, K) == 0
    out = capsys.readouterr().out
    assert len(launches) == 2 * alone  # warm-up and round, for two original cells
    assert "| again |" in out
    assert ("the original against itself from 3 passes up (what one cell can resolve): "
            "1.000-1.000, 0 of 1 cells below the bar 0.995") in out
