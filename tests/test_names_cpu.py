"""Kernel names a person reads (issue 50, item 6): the advise summary's notes and the HTML
report show kernels demangled and shortened by the core's rule (l2p_demangle.h), while the
names used as keys stay the driver's mangled ones. No GPU needed."""
from __future__ import annotations

import copy
import html
import json
import re
import types
from pathlib import Path

import pytest

from l2persist import _core
from l2persist._format import kernel_label, node_label
from l2persist.process.probe import Probe
from l2persist.process import report

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "tests" / "data" / "live" / "result-server-H200.json"

FILL = ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5Array"
        "IPcLi1EEEEEviT0_T1_")
FILL_SHORT = "at::native::vectorized_elementwise_kernel<4, FillFunctor<float>, …>"
GATHER = "_ZN2at6native24vectorized_gather_kernelILi16ElEEvPcS2_PT0_illllb"


def test_kernel_name_demangles_and_shortens():
    assert _core.kernel_name(FILL) == FILL_SHORT
    assert _core.kernel_name(FILL, short=False) == (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1>)")
    assert _core.kernel_name(FILL, max_chars=200) == (
        "at::native::vectorized_elementwise_kernel<4, FillFunctor<float>, Array<char*, 1>>")
    # the project keeps 255 characters of a name: a cut one says what it still can
    assert _core.kernel_name(FILL[:60]) == "at::native::vectorized_elementwise_kernel<…>"
    assert _core.kernel_name("nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_NNT") == \
        "nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_NNT"
    for n in range(1, 90):
        assert len(_core.kernel_name(FILL, max_chars=n)) <= n


def test_kernel_name_refuses_bad_arguments_by_name():
    with pytest.raises(TypeError, match=r"name: expected a str"):
        _core.kernel_name(b"_Z3foov")
    with pytest.raises(ValueError, match=r"name: .*NUL"):
        _core.kernel_name("_Z3foov\0")
    with pytest.raises(ValueError, match=r"max_chars: 0 is outside \[1, 4096\]"):
        _core.kernel_name(FILL, max_chars=0)


def test_node_labels_are_short_names():
    node = types.SimpleNamespace(position=3, name=FILL)
    assert node_label(node, 60) == "3:at::native::vectorized_elementwise_kernel<4, …>"


def _watcher(kernel_ns):
    """What _note_ungraphed reads of a watcher in advise mode: no graphs, no eager groups, the
    warm-up's GPU time per kernel (keyed by mangled name)."""
    return types.SimpleNamespace(all_graphs=lambda: [], eager=[], kernel_ns_warmup=kernel_ns,
                                 o=types.SimpleNamespace(mode="advise"), notes=[])


def test_the_summary_names_kernels_demangled_and_short():
    w = _watcher({FILL: 3e6, GATHER: 1e6})
    Probe(w).note_ungraphed()
    assert w.ungraphed["heaviest"] == [FILL, GATHER]          # keys stay as the driver gave
    (note,) = w.notes
    assert f"the heaviest: {FILL_SHORT}, at::native::vectorized_gather_kernel<16, long>)" \
        in note, note
    r = json.loads(RESULT.read_text())
    r["notes"] = w.notes
    text = report.summary_text(r)
    assert FILL_SHORT in text and "_ZN2at" not in text, text


def test_the_report_names_kernels_demangled_and_short(tmp_path):
    r = json.loads(RESULT.read_text())
    kernels = r["per_arm"]["0"]["kernels"]
    assert GATHER in kernels                   # the stored run's names are mangled
    for arm in r["per_arm"].values():          # and one more: PyTorch's fill, the heaviest
        arm["kernels"][FILL] = 1e3
    r["ungraphed"] = {"share": 0.5, "heaviest": [FILL]}
    keys = copy.deepcopy(r)
    path = tmp_path / "report.html"
    report.write_report(r, str(path))
    assert r == keys                           # drawing changes no key
    page = path.read_text()
    cells = re.findall(r'<code title="([^"]*)">([^<]*)</code>', page)
    shown = {html.unescape(t): html.unescape(c) for t, c in cells}
    full = _core.kernel_name(FILL, short=False)
    assert shown[full] == \
        "at::native::vectorized_elementwise_kernel<4, FillFunctor<float>, Array<char*, 1>>"
    assert shown[_core.kernel_name(GATHER, short=False)] == \
        "at::native::vectorized_gather_kernel<16, long>"
    assert not [c for c in shown.values() if c.startswith("_Z")], shown
    # the per-kernel bars and the kernels no window reaches
    assert kernel_label(FILL, report.BAR_LABEL_CHARS) == FILL_SHORT
    assert f"<title>{html.escape(FILL_SHORT)}</title>" in page
    assert f"(<code>{html.escape(FILL_SHORT)}</code>)" in page
    assert "_ZN2at6native29" not in page
