"""Results.load checks its layout: a malformed file raises ValueError naming the file and the
field, a truncated one names the file, bytes are refused (TypeError)."""

import json
import pathlib

import pytest

from l2persist.results import Results

ROOT = pathlib.Path(__file__).resolve().parent.parent
STORED = ROOT / "notebooks" / "results" / "granularity.json"


def write(tmp_path, d, name="r.json"):
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return p


def good():
    return json.loads(STORED.read_text())


def test_stored_file_loads_from_str_and_pathlike():
    a, b = Results.load(str(STORED)), Results.load(STORED)
    assert a == b and len(a) == len(good()["records"]) and a.study == "granularity"


def test_records_as_a_string_names_records_and_the_file(tmp_path):
    d = good()
    d["records"] = "0123456789"
    p = write(tmp_path, d)
    with pytest.raises(ValueError, match=r"r\.json.*'records'.*array"):
        Results.load(p)


def test_a_record_that_is_not_an_object(tmp_path):
    d = good()
    d["records"][1] = 5
    with pytest.raises(ValueError, match=r"r\.json.*record 1"):
        Results.load(write(tmp_path, d))


@pytest.mark.parametrize("key", ["format", "study", "meta", "records"])
def test_missing_key_names_key_and_file(tmp_path, key):
    d = good()
    del d[key]
    with pytest.raises(ValueError, match=rf"r\.json.*{key!r}.*missing"):
        Results.load(write(tmp_path, d))


@pytest.mark.parametrize("key,value", [("meta", []), ("study", 3), ("notes", "x"),
                                       ("summary", []), ("format", True), ("plot", 1)])
def test_wrong_types_name_the_field(tmp_path, key, value):
    d = good()
    d[key] = value
    with pytest.raises(ValueError, match=rf"r\.json.*{key!r}"):
        Results.load(write(tmp_path, d))


def test_other_format_version(tmp_path):
    d = good()
    d["format"] = 99
    with pytest.raises(ValueError, match=r"r\.json.*format 99"):
        Results.load(write(tmp_path, d))


def test_not_an_object(tmp_path):
    with pytest.raises(ValueError, match=r"r\.json.*object"):
        Results.load(write(tmp_path, [1, 2]))


def test_truncated_file_names_the_file(tmp_path):
    p = tmp_path / "cut.json"
    p.write_text(STORED.read_text()[:500])
    with pytest.raises(ValueError, match=r"cut\.json.*not valid JSON"):
        Results.load(p)


def test_bad_plot_layout(tmp_path):
    d = good()
    d["plot"] = {"nonsense": 1}
    with pytest.raises(ValueError, match=r"r\.json.*'plot'"):
        Results.load(write(tmp_path, d))


@pytest.mark.parametrize("value", [STORED.read_bytes(), bytes(str(STORED), "utf-8"),
                                   bytearray(b"{}")])
def test_bytes_are_not_a_path(value):
    with pytest.raises(TypeError, match="bytes|bytearray"):
        Results.load(value)


def test_other_types_are_refused():
    with pytest.raises(TypeError, match="int"):
        Results.load(3)


def test_missing_file_is_oserror_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        Results.load(tmp_path / "nope.json")


def test_round_trip_keeps_bars():
    r = Results.load(STORED)
    r.bars = [{"bar": "x below y", "met": False}, {"bar": "z", "met": True}]
    back = Results.from_json(r.to_json())
    assert back == r and back.unmet_bars() == ["x below y"]


def test_merge_joins_parts_of_one_sweep_and_refuses_others():
    from l2persist.results import Results
    a = Results("atlas", [{"w": "x", "v": 1}], {"device_name": "NVIDIA H200", "only": {"w": ["x"]},
                                               "wall_s": 1.5})
    b = Results("atlas", [{"w": "y", "v": 2}], {"device_name": "NVIDIA H200", "only": {"w": ["y"]},
                                               "wall_s": 2.0})
    m = Results.merge([a, b])
    assert [r["w"] for r in m.records] == ["x", "y"] and "only" not in m.meta
    assert m.meta["wall_s"] == 3.5 and m.meta["merged_parts"] == [{"w": ["x"]}, {"w": ["y"]}]
    with pytest.raises(ValueError, match="parts: at least one"):
        Results.merge([])
    with pytest.raises(ValueError, match="parts: study"):
        Results.merge([a, Results("gather", [], {"device_name": "NVIDIA H200"})])
    with pytest.raises(ValueError, match="parts: device"):
        Results.merge([a, Results("atlas", [], {"device_name": "NVIDIA H100 80GB HBM3"})])


def test_empty_results_table_says_so():
    import l2persist
    assert l2persist.Results is Results
    assert Results("x", []).table() == "(no records)"
    assert Results("x", [], notes=["n"]).table() == "(no records)\n\n- n"


def _coalescing_figure(tmp_path):
    pytest.importorskip("matplotlib")
    import l2persist.studies as S
    res = S.run("coalescing", progress=False)
    return res.plot(tmp_path / "c.png")


def test_plot_title_fits_the_figure(tmp_path):
    fig = _coalescing_figure(tmp_path)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title = fig.axes[0].title
    assert title.get_text()
    box = title.get_window_extent(renderer)
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1 + 0.5, (box, fig.bbox)


def test_a_series_hidden_under_another_says_so(tmp_path):
    fig = _coalescing_figure(tmp_path)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "sectors (Maxwell and later): same values as Kepler non-caching (32 B segments)" \
        in texts, texts
    assert not any("Kepler caching" in t and "same values" in t for t in texts)


def test_gather_plot_names_its_reference_series(tmp_path):
    """The gather plot draws restrict and texture divided by plain: plain is in the legend."""
    pytest.importorskip("matplotlib")
    import l2persist.studies as S
    res = S.load(ROOT / "notebooks" / "results" / "gather.json")
    fig = res.plot(tmp_path / "g.png")
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("plain loads") for t in texts), texts
    assert len(texts) == 3


@pytest.mark.parametrize("facet", [None, "f"])
def test_a_long_title_wraps_inside_the_figure(tmp_path, facet):
    pytest.importorskip("matplotlib")
    from l2persist.results import PlotSpec
    title = "A title that says a great deal about what the plot shows, " * 4
    recs = [{"x": x, "y": x * x, "f": f} for x in (1, 2, 3) for f in ("a", "b")]
    res = Results("x", recs, plot_spec=PlotSpec(x="x", y=["y"], title=title, facet=facet))
    fig = res.plot(tmp_path / "t.png")
    fig.canvas.draw()
    text = fig._suptitle if facet else fig.axes[0].title
    assert "\n" in text.get_text()
    box = text.get_window_extent(fig.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1 + 0.5 and box.y1 <= fig.bbox.y1 + 0.5, box


def test_stored_note_names_gpu_driver_and_revision():
    res = Results.load(STORED)
    note = res.stored_note("no driver here")
    m = res.meta
    assert note.startswith("Drawn from stored results: the granularity study as measured on "
                           f"{m['device_name']} (compute capability {m['compute_capability']}")
    assert f"a driver supporting CUDA {m['driver_supports']}" in note
    assert f"at revision {m['git_revision']}" in note and m["date"][:10] in note
    assert note.endswith("This machine has no usable CUDA GPU: no driver here.")


def test_stored_notebooks_open_with_the_stored_note():
    """A study notebook committed without a GPU run opens by saying it was drawn from stored
    results, and from which GPU, driver and revision (one wording: Results.stored_note)."""
    import nbformat
    from l2persist import studies
    for s in studies.list_studies():
        book = studies.notebook_file(s.name)
        if not book or not s.needs:
            continue
        nb = nbformat.read(str(ROOT / "notebooks" / book), as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        text = "".join(o.get("text", "") for o in first.outputs if o.output_type == "stream")
        if not text.startswith("Drawn from stored results"):
            assert text.startswith(f"{s.name}: NVIDIA"), (book, text)  # a live run's header
            continue
        stored = Results.load(ROOT / "notebooks" / "results" / f"{s.name}.json")
        assert stored.stored_note() in text, (book, text)
        assert "This machine has no usable CUDA GPU: " in text


def test_the_studies_stopping_rule_is_the_cores():
    """Context.measure stops when IQR <= noise x median: the rule is l2p_stats_settled's,
    reached through _core.stats(noise=)."""
    import pytest as _pytest
    from l2persist import _core as core
    st = core.stats([5, 1, 4, 2, 3], noise=0.7)
    assert st["settled"] is True and st["iqr"] == 2 and st["median"] == 3
    assert core.stats([5, 1, 4, 2, 3], noise=0.6)["settled"] is False
    assert "settled" not in core.stats([1.0, 2.0])
    with _pytest.raises(ValueError, match="noise"):
        core.stats([1.0], noise=-1.0)
