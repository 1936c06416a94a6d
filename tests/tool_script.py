"""A script under tools/ (a file without .py) loaded as a module, for tests of its parts."""
import importlib.machinery
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load(relpath: str):
    """``relpath`` from the repository root, e.g. "tools/investigations/zoo-advise"."""
    path = ROOT / relpath
    name = path.name.replace("-", "_") + "_tool"
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(mod)
    return mod
