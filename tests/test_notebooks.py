"""Every notebook runs top to bottom (code cells executed in order in one namespace).
Notebooks whose metadata says they need a GPU are GPU tests."""

import json
import pathlib

import pytest


BOOKS = sorted(pathlib.Path(__file__).resolve().parent.parent.joinpath("notebooks").glob("*.ipynb"))


def _needs_gpu(path):
    return json.loads(path.read_text())["metadata"].get("l2persist", {}).get("gpu", True)


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.gpu) if _needs_gpu(p) else p
                                  for p in BOOKS], ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.chdir(path.parent)
    ns = {"__name__": "__main__"}
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        exec(compile(src, f"{path.name}[cell {i}]", "exec"), ns)  # noqa: S102


def test_there_are_notebooks():
    assert len(BOOKS) >= 4
