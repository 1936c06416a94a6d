"""The notebooks run top to bottom under a real Jupyter kernel (nbclient + ipykernel), importing
this tree's l2persist. Without a GPU every notebook still runs: the study notebooks load the
results stored beside them from a GPU run (findings and plot recomputed by the study code),
the tour says there is no GPU. On a GPU the studies run live, in quick mode."""

import concurrent.futures
import json
import os
import pathlib
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOOKS = sorted(ROOT.joinpath("notebooks").glob("*.ipynb"))


def _execute(path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    for attempt in (1, 2):
        nb = nbformat.read(str(path), as_version=4)
        client = nbclient.NotebookClient(nb, timeout=600, startup_timeout=120,
                                         kernel_name="python3",
                                         resources={"metadata": {"path": str(path.parent)}})
        try:
            client.execute()
            return nb
        except nbclient.exceptions.CellExecutionError as e:
            # its message is the failing cell alone: what the cells before it printed (a
            # study's table and notes: why it had nothing to draw) goes with it
            raise AssertionError(f"{e}\n{_printed_before(nb)}") from None
        except RuntimeError as e:
            # A kernel that never answered its first request ran none of the notebook: start
            # one more (on the H200 a kernel started beside three others once stayed silent
            # for 60 s). A cell's error is a CellExecutionError and fails at once.
            if attempt == 2 or not str(e).startswith("Kernel didn't respond"):
                raise


#: The most of the earlier cells' printed text a failed notebook's message carries.
PRINTED_CHARS = 6000


def _printed_before(nb) -> str:
    """The text the notebook's cells printed up to the failing one (an HTML table read as
    text), its last PRINTED_CHARS characters."""
    import re
    said = []
    for c in nb.cells:
        for o in c.get("outputs", []) if c.cell_type == "code" else ():
            if o.get("output_type") == "error":
                break
            data = o.get("data", {})
            text = o.get("text") or data.get("text/plain") or ""
            if "text/html" in data:
                text = re.sub(r"<[^>]+>", " ", data["text/html"])
            said.append(text if isinstance(text, str) else "".join(text))
    text = "\n".join(t.strip() for t in said if t.strip())
    return "the cells before it printed:\n" + (text[-PRINTED_CHARS:] or "(nothing)")


def _jobs():
    """How many notebooks run at once: L2P_NOTEBOOK_JOBS, else up to 4 (a kernel spends most
    of its time starting and importing; the quick studies are short)."""
    try:
        return max(1, int(os.environ.get("L2P_NOTEBOOK_JOBS", "")))
    except ValueError:
        return max(1, min(4, os.cpu_count() or 1))


def _reads_counters(path) -> bool:
    """Whether the notebook may open a CUPTI profiler session, which one process at a time
    may hold on a device (another gets CUPTI_ERROR_HARDWARE_BUSY): its own cells or its
    study's code call measure() or the counters module."""
    import re
    from l2persist import studies
    text = path.read_text()
    for s in studies.list_studies():
        if studies.notebook_file(s.name) == path.name:
            mod = ROOT / "l2persist" / "studies" / (s.name.replace("-", "_") + ".py")
            text += mod.read_text() if mod.exists() else "measure("  # unknown: assume it does
    return bool(re.search(r"\bmeasure\(|counters", text))


@pytest.fixture(scope="module")
def executed(request):
    """Every notebook executed once, each in its own kernel, several at a time: those that
    may read counters one after another in one lane, each other one in a lane of its own.
    Gives its notebook object, or the exception its execution raised. The run happens at the
    first test that asks, with the quick studies and the inline backend."""
    for mod in ("nbformat", "nbclient", "ipykernel"):
        pytest.importorskip(mod)
    mp = pytest.MonkeyPatch()
    mp.setenv("L2P_NOTEBOOK_QUICK", "1")
    mp.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws
    mp.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    counters = [p for p in BOOKS if _reads_counters(p)]
    lanes = [counters] + [[p] for p in BOOKS if p not in counters]
    out = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(_jobs()) as pool:
            futures = [(lane, pool.submit(_execute_lane, lane)) for lane in lanes if lane]
        for lane, f in futures:
            out.update(f.result())
        return out
    finally:
        mp.undo()


def _execute_lane(paths):
    """{name: notebook or the exception}; a failure does not stop the lane. With
    L2P_NOTEBOOK_TIMES set (tools/gpu-check sets it), each notebook's start and end (wall
    clock, seconds) and its lane's first notebook are appended to that file, one JSON line
    each: where the fixture's time goes."""
    got = {}
    for p in paths:
        start = time.time()
        try:
            got[p.name] = _execute(p)
        except BaseException as e:  # noqa: BLE001 - reported by the notebook's own test
            got[p.name] = e
        _note_time(p.name, paths[0].name, start, time.time())
    return got


def _note_time(name, lane, start, end):
    path = os.environ.get("L2P_NOTEBOOK_TIMES")
    if not path:
        return
    try:  # a log that cannot be written must not fail the notebooks
        with open(path, "a") as f:  # pid: which pytest run (gpu-check REPEAT=N appends)
            f.write(json.dumps({"notebook": name, "lane": lane, "start": round(start, 2),
                                "end": round(end, 2), "pid": os.getpid()}) + "\n")
    except OSError:
        pass


def _outputs(nb, kind):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if kind in o.get("data", {}) or o.get("output_type") == kind]


@pytest.mark.parametrize("path", BOOKS, ids=lambda p: p.name)
def test_notebook_executes_under_a_kernel(path, executed):
    nb = executed[path.name]
    if isinstance(nb, BaseException):
        raise nb
    assert not _outputs(nb, "error")
    if path.name != "00_tour.ipynb":
        assert _outputs(nb, "image/png"), "the study's plot is drawn"


def test_notebooks_are_committed_with_outputs_from_a_gpu():
    """Every code cell has its output; what needs a GPU shows a GPU's numbers (live, or the
    stored results of a GPU run), never a GPU-less failure."""
    from l2persist import studies
    assert len(BOOKS) >= 6
    gpu_books = {studies.notebook_file(s.name) for s in studies.list_studies()
                 if s.needs} | {"00_tour.ipynb"}
    with_plots = 0
    for path in BOOKS:
        nb = json.loads(path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(c.get("outputs") for c in code), f"{path.name}: a code cell has no output"
        text = json.dumps([c["outputs"] for c in code])
        assert "Traceback" not in text and '"error"' not in text, path.name
        if path.name in gpu_books:
            assert "NVIDIA" in text, f"{path.name}: the outputs name no GPU"
        if path.name == "00_tour.ipynb":  # a live run: its first line says where and with what
            assert "no usable CUDA GPU" not in text, f"{path.name}: outputs from a GPU-less run"
            first = "".join(code[0]["outputs"][0].get("text", ""))
            assert all(w in first for w in ("NVIDIA", "driver supporting CUDA", "revision")), \
                first
        with_plots += any("image/png" in o.get("data", {}) for c in code for o in c["outputs"])
    assert with_plots >= 5


def test_stored_results_load_without_a_gpu():
    from l2persist.results import Results
    stored = sorted(ROOT.joinpath("notebooks", "results").glob("*.json"))
    assert len(stored) >= 7
    for p in stored:
        r = Results.load(p)
        assert r.records and r.meta["device_name"].startswith("NVIDIA")
        assert Results.from_json(r.to_json()) == r


def test_stored_results_carry_the_plot_their_study_draws_now():
    """Results.load (no study code) draws the stored plot spec; it must be the one the study's
    current code derives (studies.load), or a reader of the file sees a plot the notebooks no
    longer show (gather's three overlapping lines, an unnamed set-aside legend)."""
    from l2persist import studies
    from l2persist.results import Results
    for p in sorted(ROOT.joinpath("notebooks", "results").glob("*.json")):
        plain, derived = (json.loads(json.dumps(r.plot_spec and r.plot_spec.as_dict()))
                          for r in (Results.load(p), studies.load(p)))  # as a file holds it
        assert plain == derived, p.name


def test_a_failed_cell_says_what_the_cells_before_it_printed(tmp_path):
    """A notebook that fails in the suite is read from its log: the error carries the earlier
    cells' text (a table given as HTML read as text), not only the failing cell."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from nbformat.v4 import new_code_cell, new_notebook
    nb = new_notebook(cells=[
        new_code_cell('print("eager: advise gave no plan")'),
        new_code_cell('from IPython.display import HTML\nHTML("<table><td>the notes</td></table>")'),
        new_code_cell('raise ValueError("nothing to draw")'),
        new_code_cell('print("never run")')])
    path = tmp_path / "fails.ipynb"
    nbformat.write(nb, str(path))
    with pytest.raises(AssertionError) as info:
        _execute(path)
    said = str(info.value)
    assert "nothing to draw" in said
    before = said.split("the cells before it printed:")[1]
    assert "eager: advise gave no plan" in before and "the notes" in before
    assert "<td>" not in before and "never run" not in said
