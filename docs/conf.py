"""Sphinx configuration of the l2persist docs. Build with tools/docs (warnings are errors,
nitpicky, internal links checked); the output goes to build/docs.

The API reference is generated from the package's docstrings and from the type stub
l2persist/_core.pyi (signatures of the C extension); the results pages are generated from
the stored study results (notebooks/results/*.json, docs/data/*.json) by the ``l2p_docs``
extension in docs/_ext, so that every measured number lives once, in its results file."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "_ext"))
sys.path.insert(0, ROOT)

try:
    import l2persist  # noqa: E402 - makes no CUDA call: the docs build without a GPU
except ImportError as e:  # the C extension is not built
    raise SystemExit(f"docs: cannot import l2persist ({e}); build it first: "
                     "python3 -m pip install -e .") from None

project = "l2persist"
author = "the l2persist authors"
copyright = "the l2persist authors"
release = version = l2persist.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "myst_parser",
    "l2p_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "data", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []

# MyST: headings get anchors (for links like guides/tune.md#the-verdict), $ is not maths.
myst_enable_extensions = ["deflist", "colon_fence"]
myst_heading_anchors = 3

# autodoc: members in source order; signatures of the C extension come from the stub
# (l2p_docs), type hints shown in the signature, short names.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
python_use_unqualified_type_names = True
autodoc_default_options = {"members": True}
autosummary_generate = False
# Docstrings are written with ``literal`` and `literal` alike.
default_role = "literal"

# Nitpicky, but names from other projects are not ours to document and no inventory of
# theirs is fetched (the build needs no network): they are written as they are.
nitpick_ignore_regex = [
    ("py:.*", r"(numpy|np|collections\.abc|typing|os|pathlib|types|torch|cupy|cuda|"
              r"matplotlib|pandas|pytest|_pytest|argparse|io|dataclasses|enum)(\..*)?"),
    ("py:.*", r"(Callable|Sequence|Mapping|Iterable|Iterator|Literal|Any|SupportsIndex|"
              r"ArrayLike|DTypeLike|TypeAlias|PathLike|Path|ndarray|dtype|DataFrame|"
              r"Figure|Axes|Enum|IntEnum|ABCMeta|EnumType|Generator|TextIO)"),
    ("py:class", r"(object|int|float|str|bytes|bool|tuple|list|dict|set|type|None|"
                 r"BaseException|Exception|RuntimeError|MemoryError)"),
]

html_theme = "alabaster"
html_title = f"l2persist {release}"
html_static_path: list[str] = []
html_theme_options = {
    "description": "Control and see how an NVIDIA GPU caches global memory",
    "fixed_sidebar": True,
    "page_width": "1180px",
    "sidebar_width": "240px",
}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}
html_show_sourcelink = False

# The repository's own URLs (pyproject.toml's [project.urls]).
l2p_repository = "https://github.com/l2persist/l2persist"
