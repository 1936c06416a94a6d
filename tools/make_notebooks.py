#!/usr/bin/env python3
"""Write notebooks/*.ipynb: one notebook per study, its prose taken from the study module
(l2persist/studies/<name>.py: INTRO, WHY, NOTEBOOK_CELLS), plus a tour of the API; and the
README's study table (studies.readme_table()). Code cells whose source is unchanged keep their
stored outputs. tools/gpu-check (NOTEBOOKS=1) executes them on a GPU; tools/run_notebooks.py
re-executes them anywhere (without a GPU a study notebook draws the stored results).

    python tools/make_notebooks.py          # (re)write the sources
"""

import os

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(HERE, "notebooks")

SETUP = '''# Run live on a GPU, or show the results stored beside this notebook.
import os
import l2persist
from l2persist import studies

STUDY = "{study}"
LIVE = l2persist.is_available()
QUICK = os.environ.get("L2P_NOTEBOOK_QUICK") == "1"   # the test suite's short run
if LIVE:
    res = studies.run(STUDY, quick=QUICK, progress=False)
    if not QUICK:
        os.makedirs("results", exist_ok=True)
        res.to_json(f"results/{{STUDY}}.json")          # what a GPU-less reader loads
    print(res.header())
else:
    # No usable GPU here: the results stored from a run on a real GPU (which one, its driver
    # and l2persist's revision are printed), findings and plot recomputed from the records.
    res = studies.load(f"results/{{STUDY}}.json")
    print(res.stored_note(l2persist.no_device_reason()))'''

CPU_SETUP = '''import l2persist
from l2persist import studies

res = studies.run("{study}", progress=False)   # a model: no GPU needed
print(res.header())'''

TABLE = "res   # the records, as a table (res.to_pandas() gives a DataFrame)"
PLOT = "fig = res.plot()"
NOTES = 'for note in res.notes:\n    print("-", note)'
META = ('{k: v for k, v in res.meta.items() if k in ("device_name", "compute_capability", '
        '"driver_supports", "cuda_runtime", "l2_cache_size", "persisting_l2_limit_before", '
        '"persisting_l2_limit_after", "git_revision", "date")}')

# Quotes the stored run's numbers; tests/test_findings.py recomputes them from its output.
TOUR_WINDOW = """**The window made it slower.** In the stored run on the H200 the window took 0.840 ms
against 0.577 ms at limit 0: **46 % slower**, on the stream, per launch and on the graph alike.
The window is not what costs: `dev.persisting_l2()` sets the guide's set-aside (37.5 MiB here),
and on Hopper a set-aside slows read-write traffic through the rest of the L2 (the
`persistence` notebook's "set-aside alone" rows; `run set-aside-counters`). This hot region
is read-write, so the window wins back less than the set-aside takes. Compare against limit
0, not against the set-aside without a window, and let `l2persist.tune` decide per workload."""

TOUR = [
    new_markdown_cell("""# A tour of l2persist

The device's L2 facts, the persisting-L2 set-aside, access policy windows on a stream, a
graph's kernel nodes and a single launch, timing and counters. Every cell needs a GPU; the
first says so plainly where there is none, and the others then do nothing."""),
    new_code_cell('''import numpy as np
import l2persist as l2p
from l2persist import AccessPolicyWindow, kernels as K

LIVE = l2p.is_available()
if not LIVE:
    print("This machine has no usable CUDA GPU:", l2p.no_device_reason())
    print("The outputs stored below come from a live run on the GPU their first line names.")
else:
    from l2persist.results import collect_metadata
    dev = l2p.Device(0)
    m = collect_metadata(dev)  # what a study's results record: where, with what, when
    print(f"{m['device_name']} - L2 {l2p.human_bytes(m['l2_cache_size'])}; a driver "
          f"supporting CUDA {m['driver_supports']}, CUDA runtime {m['cuda_runtime']}; "
          f"l2persist {m['l2persist_version']} at revision {m['git_revision']}; {m['date']}")'''),
    new_code_cell('''if LIVE:
    display(dev.properties)
    print("persisting limit now", l2p.human_bytes(dev.persisting_l2_limit),
          "- default", l2p.human_bytes(dev.default_persisting_l2_limit),
          "- granule", l2p.human_bytes(dev.persisting_l2_granule))
    # Under MPS the set-aside is the MPS server's, fixed at its start: l2persist reads its
    # size and refuses other values (the driver would accept them, the hardware ignore them).
    print("set-aside decided by:", dev.persisting_l2_source, "- MPS client:", dev.mps)'''),
    new_markdown_cell("""The set-aside is a context manager: it restores the limit it found, even when an
exception passes through. The driver rounds requests up to a granule; the value you get back
is what you have."""),
    new_code_cell('''if LIVE:
    with dev.persisting_l2(fraction=0.5) as granted:
        print("granted", l2p.human_bytes(granted))
    print("restored to", l2p.human_bytes(dev.persisting_l2_limit))'''),
    new_markdown_cell("""A window on a stream, on one launch only, and on a captured graph's kernel nodes; each
timed against no set-aside at all (limit 0)."""),
    new_code_cell('''if LIVE:
    rng = np.random.default_rng()
    hot = l2p.to_device(rng.integers(0, 9, (16 << 20) // 4, dtype=np.int32))
    cold = l2p.to_device(rng.integers(0, 9, (512 << 20) // 4, dtype=np.int32))
    with l2p.Stream() as s:
        run = lambda **kw: K.hot_cold(hot, cold, stream=s, **kw)
        with dev.persisting_l2(0):
            base = l2p.benchmark(run, stream=s).median
        with dev.persisting_l2():
            w = AccessPolicyWindow(hot, hit_ratio=1.0)
            with s.access_policy(w, reset=True):
                on_stream = l2p.benchmark(run, stream=s).median
            per_launch = l2p.benchmark(lambda: run(window=w), stream=s).median
            with s.capture() as g:
                run()
            g.set_access_policy_window(w)
            graph = l2p.benchmark(lambda: g.launch(s), stream=s).median
            g.close()
    print(f"limit 0, no window {base:.3f} ms; window on the stream {on_stream:.3f} ms; "
          f"per launch {per_launch:.3f} ms; on the graph's nodes {graph:.3f} ms")
    hot.close(); cold.close()'''),
    new_markdown_cell(TOUR_WINDOW),
    new_markdown_cell("""Counters explain the times: here the L2 hit rate and DRAM bytes of one launch."""),
    new_code_cell('''if LIVE and l2p.counters_available()[0]:
    with l2p.zeros((8 << 20) // 4, np.int32) as a:
        c = l2p.measure(lambda: K.l2_read(a, 4), ["l2_hit_rate", "dram_bytes_read", "l1_hit_rate"],
                        warmup=lambda: K.l2_read(a, 1))
    print(dict(c))'''),
]


def study_notebook(study: str):
    """One study's notebook, its prose and extra cells taken from the study module."""
    from l2persist import studies
    meta = studies.info(study)
    cells = [new_markdown_cell(meta.intro or f"# {meta.title}\n\n{meta.source}"),
             new_code_cell((SETUP if meta.needs else CPU_SETUP).format(study=study)),
             new_code_cell(TABLE), new_code_cell(PLOT),
             new_markdown_cell("**What we found** (computed from the records above):"),
             new_code_cell(NOTES)]
    cells += [new_code_cell(c) for c in studies.notebook_cells(study)]
    cells += [new_markdown_cell(meta.why)] if meta.why else []
    cells += [new_markdown_cell("Where and with what this ran (the Results metadata):"),
              new_code_cell(META)]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def write(nb, path) -> None:
    """Write nb; a code cell whose source is unchanged keeps the outputs stored at path (so
    prose edits do not throw away outputs that only a GPU can make)."""
    if os.path.exists(path):
        old = nbformat.read(path, as_version=4)
        stored = {c.source: c for c in old.cells if c.cell_type == "code" and c.get("outputs")}
        for c in nb.cells:
            if c.cell_type == "code" and c.source in stored:
                c.outputs = stored[c.source].outputs
                c.execution_count = stored[c.source].execution_count
    for i, c in enumerate(nb.cells):  # stable ids: a rewrite changes only what changed
        c.id = f"cell-{i:02d}"
    nbformat.write(nb, path)


README = os.path.join(HERE, "README.md")
BEGIN, END = "<!-- study table: tools/make_notebooks.py writes it -->", "<!-- end of study table -->"


def _replace(text: str, begin: str, end: str, body: str) -> str:
    a, b = text.index(begin), text.index(end)
    return text[:a] + begin + "\n" + body + "\n" + text[b:]


def readme_with_table(text: str) -> str:
    """The README text with its study table replaced by the one the study modules give (the
    findings are on the docs' results pages, generated from the stored results)."""
    from l2persist import studies
    return _replace(text, BEGIN, END, studies.readme_table())


def main():
    import sys
    sys.path.insert(0, HERE)
    from l2persist import studies
    os.makedirs(OUT, exist_ok=True)
    names = [n for n in studies.study_names() if studies.notebook_file(n)]
    for study in names:
        write(study_notebook(study), os.path.join(OUT, studies.notebook_file(study)))
    tour = new_notebook(cells=TOUR)
    tour.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    write(tour, os.path.join(OUT, "00_tour.ipynb"))
    with open(README) as f:
        text = f.read()
    with open(README, "w") as f:
        f.write(readme_with_table(text))
    print(f"wrote {len(names) + 1} notebooks to {OUT} and the study table in {README}")


if __name__ == "__main__":
    main()
