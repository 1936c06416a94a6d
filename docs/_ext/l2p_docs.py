"""The l2persist docs' own Sphinx extension.

- Results pages from the stored results: ``l2p-study`` (one study's stored run: the source,
  what was measured, the findings recomputed by the study's code, the bars, the plot, every
  record and why), ``l2p-studies`` (the table of studies), ``l2p-devices`` (the lent GPUs'
  L2 facts) and ``l2p-data`` (a table of one docs/data/*.json file). The numbers live once,
  in the results files; the pages draw them (the text comes from l2p_results.py).
- Signatures of the C extension from its type stub (l2persist/_core.pyi): the extension's
  text signatures carry no types, the stub does.
- Our own names resolved wherever autodoc wrote them with the module they were defined in
  (``l2persist._core.Device`` is documented as ``l2persist.Device``).
- Every public name documented: the build fails (a warning, and warnings are errors) when a
  name of ``l2persist.__all__`` or of a documented module's ``__all__`` has no entry.

Generated Markdown is parsed by MyST where the directive stands, so results pages are .md.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

import l2p_results as R

logger = logging.getLogger(__name__)

ROOT = R.ROOT


# ---------------------------------------------------------------- results pages

class _MarkdownDirective(Directive):
    """A directive whose output is Markdown (l2p_results), parsed by MyST in place."""

    def parse_markdown(self, lines: list[str]) -> list[nodes.Node]:
        box = nodes.container(classes=["l2p-generated"])
        source = self.state.document.current_source or "l2p_docs"
        self.state.nested_parse(StringList(lines, source=source), self.content_offset, box)
        return [box]

    def depends(self, *paths):
        for p in paths:
            self.state.document.settings.record_dependencies.add(p)


class StudyDirective(_MarkdownDirective):
    """``l2p-study NAME``: one study's stored run (notebooks/results/NAME.json, or :file:):
    its introduction, where it was measured, the findings recomputed from the records, the
    bars, the plot, every record and why."""

    required_arguments = 1
    option_spec = {
        "file": directives.unchanged,        # results file stem (atlas-h100)
        "columns": directives.unchanged,     # keys to show, comma separated
        "no-prose": directives.flag,         # leave out the study's introduction and why
        "no-plot": directives.flag,
        "no-table": directives.flag,
    }

    def run(self):
        stem = self.options.get("file", self.arguments[0])
        try:
            res = R.load(stem)
        except FileNotFoundError as e:
            raise self.error(f"l2p-study: {e}")
        self.depends(R.results_path(stem))
        cols = [c.strip() for c in self.options["columns"].split(",")] \
            if "columns" in self.options else None
        head, tail = R.study_markdown(res, prose="no-prose" not in self.options,
                                      table="no-table" not in self.options, columns=cols)
        out = self.parse_markdown(head)
        png = None if "no-plot" in self.options else R.plot_png(res)
        if png:
            out.append(nodes.raw("", f'<p><img class="l2p-plot" alt="the {res.study} plot" '
                                     f'src="data:image/png;base64,{png}"/></p>', format="html"))
        if tail:
            out += self.parse_markdown(tail)
        return out


class StudiesDirective(_MarkdownDirective):
    """``l2p-studies``: every study, what it runs, its needs, its results page and notebook."""

    option_spec = {"pages": directives.unchanged}  # e.g. /results/: where the results pages are

    def run(self):
        env = self.state.document.settings.env
        prefix = self.options.get("pages", "/results/")

        def page_for(name):
            return f"{prefix}{name}" if f"{prefix.lstrip('/')}{name}" in env.found_docs else None
        return self.parse_markdown(R.studies_markdown(page_for, env.config.l2p_repository))


class DevicesDirective(_MarkdownDirective):
    """``l2p-devices``: the L2 facts of every GPU a stored result was measured on."""

    def run(self):
        md, used = R.devices_markdown()
        self.depends(*used)
        return self.parse_markdown(md)


class DataDirective(_MarkdownDirective):
    """``l2p-data FILE [FILE ...]``: a table of stored JSON files (docs/data/FILE or
    notebooks/results/FILE); several files: their rows in the order named, each with its file,
    GPU and revision (``l2p_results.several``); see ``l2p_results.data_markdown`` for the
    options."""

    required_arguments = 1
    optional_arguments = 32
    option_spec = {"rows": directives.unchanged, "columns": directives.unchanged,
                   "where": directives.unchanged, "meta": directives.flag}

    def run(self):
        loaded = []
        for name in self.arguments:
            path = R.data_path(name)
            if path is None:
                raise self.error(f"l2p-data: no file {name} in docs/data or notebooks/results")
            self.depends(path)
            with open(path) as f:
                loaded.append((name, json.load(f)))
        rows = self.options.get("rows", "rows")
        try:
            if len(loaded) == 1:
                name, data = loaded[0]
            else:
                name, data, rows = "several", R.several(loaded, rows), "rows"
            md = R.data_markdown(name, data, rows=rows,
                                 columns=self.options.get("columns"),
                                 where=self.options.get("where", ""),
                                 meta="meta" in self.options and len(loaded) == 1)
        except (KeyError, IndexError, ValueError) as e:
            raise self.error(f"l2p-data {' '.join(self.arguments)}: {type(e).__name__}: {e}")
        return self.parse_markdown(md)


# ---------------------------------------------------------------- signatures from the stub

STUB = os.path.join(ROOT, "l2persist", "_core.pyi")


def _stub_index() -> dict[str, tuple[str, str | None]]:
    """{qualified name: (parameters, return annotation)} of every function and method in the
    stub, names qualified to where the docs document them."""
    import l2persist
    with open(STUB) as f:
        tree = ast.parse(f.read())
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    aliases = {n.target.id for n in tree.body
               if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
               and ast.unparse(n.annotation) == "TypeAlias"}
    public = set(l2persist.__all__)

    def qualify(text: str) -> str:
        def one(m):
            word = m.group(0)
            if word in public and word in classes:
                return f"l2persist.{word}"
            if word in aliases or word in classes:
                return f"l2persist._core.{word}"
            return word
        return re.sub(r"(?<![\w.])[A-Za-z_]\w*(?![\w])", one, text)

    def entry(fn: ast.FunctionDef, method: bool):
        args = fn.args
        if method:
            pos = list(args.posonlyargs) + list(args.args)
            if pos and pos[0].arg == "self":
                args = ast.arguments(**{**{f: getattr(args, f) for f in args._fields}})
                if args.posonlyargs:
                    args.posonlyargs = args.posonlyargs[1:]
                else:
                    args.args = args.args[1:]
        params = qualify(ast.unparse(args))
        ret = qualify(ast.unparse(fn.returns)) if fn.returns is not None else None
        return f"({params})", ret

    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = entry(node, False)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    out[f"{node.name}.{item.name}"] = entry(item, True)
    return out


_STUB: dict | None = None


def _from_core(obj) -> bool:
    """An object of the C extension (its types say they are l2persist's)."""
    from l2persist import _core
    name = getattr(obj, "__name__", None)
    return name is not None and getattr(_core, name, None) is obj


def _core_qualname(what: str, obj) -> str | None:
    """The stub's name for an object of the C extension, or None."""
    if what == "class":
        return f"{obj.__name__}.__init__" if _from_core(obj) else None
    owner = getattr(obj, "__objclass__", None)
    if owner is not None:
        return f"{owner.__name__}.{obj.__name__}" if _from_core(owner) else None
    return obj.__name__ if _from_core(obj) else None


def process_signature(app, what, name, obj, options, signature, return_annotation):
    global _STUB
    if what not in ("function", "method", "class"):
        return None
    key = _core_qualname(what, obj)
    if key is None:
        return None
    if _STUB is None:
        _STUB = _stub_index()
    if key not in _STUB:
        return None
    params, ret = _STUB[key]
    return params, (None if what == "class" else ret)


# ---------------------------------------------------------------- docstrings as written

def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


_ARG = re.compile(r"^(\s+)(\w+) \((.*)\): (.*)$")


def _arguments_as_fields(lines):
    """The C rows' docstrings end with an ``Arguments:`` block of ``name (type): what``
    lines (what ``help()`` shows): as parameter fields here."""
    try:
        start = lines.index("Arguments:")
    except ValueError:
        return
    fields, i = [], start + 1
    while i < len(lines):
        m = _ARG.match(lines[i])
        if m:
            fields.append(f":param {m.group(2)}: {m.group(4)}")
        elif lines[i].strip() and fields and _indent(lines[i]) > 4:
            fields[-1] += " " + lines[i].strip()
        elif lines[i].strip():
            break
        i += 1
    lines[start:i] = fields + [""]


def list_after_paragraph(app, what, name, obj, options, lines):
    """A docstring written like Markdown may start a ``- item`` list right under a
    paragraph line, which reStructuredText reads as an indentation error: give such a list
    the blank line before it that both languages mean there. A constant's entry shows
    its own text, not the docstring of its type (dict's)."""
    own = type(obj).__doc__ if what == "data" else None
    if own and lines and lines[0].strip() == own.strip().splitlines()[0].strip():
        lines[:] = []
    _arguments_as_fields(lines)
    last = max((k for k, line in enumerate(lines) if line.strip()), default=None)
    if last is not None and re.fullmatch(r"Returns: [\w\[\], |.]+", lines[last].strip()) \
            and (what == "class" or _core_qualname("method", obj) is not None):
        del lines[last]  # the C rows' "Returns: T": the signature shows it (from the stub)
    i = 1
    while i < len(lines):
        line, prev = lines[i], lines[i - 1]
        if (line.lstrip().startswith("- ") and prev.strip()
                and not prev.lstrip().startswith("- ") and _indent(prev) <= _indent(line)):
            # prev is a paragraph line unless it continues an item above it
            j = i - 1
            while j >= 0 and lines[j].strip() and not lines[j].lstrip().startswith("- "):
                j -= 1
            in_item = j >= 0 and lines[j].strip() and _indent(lines[j]) < _indent(prev)
            if not in_item:
                lines.insert(i, "")
                i += 1
        i += 1


# ---------------------------------------------------------------- our names, wherever defined

def resolve_own_names(app, env, node, contnode):
    """``l2persist._core.Device`` -> ``l2persist.Device``; ``l2persist.plan.Plan`` ->
    ``l2persist.Plan``: a name of ours written with the module it was defined in resolves to
    where the docs document it (the public name first, else the one entry of that name)."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not (target.startswith("l2persist.") or "." not in target):
        return None
    objects = env.get_domain("py").objects
    last = target.rsplit(".", 1)[-1]
    candidates = [f"l2persist.{last}"] if target.startswith("l2persist.") else []
    found = next((c for c in candidates if c in objects), None)
    if found is None:
        same = [k for k in objects if k.startswith("l2persist.") and k.endswith("." + last)]
        mod = node.get("py:module") or ""
        near = [k for k in same if mod and k.startswith(mod + ".")]
        pick = near if len(near) == 1 else same
        if len(pick) != 1:
            return None
        found = pick[0]
    entry = objects[found]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode,
                        found)


# ---------------------------------------------------------------- every public name

# Modules whose __all__ is public API, besides l2persist itself.
PUBLIC_MODULES = ["l2persist.kernels", "l2persist.coalescing", "l2persist.tax",
                  "l2persist.foreign", "l2persist.examples", "l2persist.studies",
                  "l2persist.results", "l2persist.state", "l2persist.timing",
                  "l2persist.counters", "l2persist.plan", "l2persist.advise", "l2persist.tune",
                  "l2persist.workloads", "l2persist.pytest_plugin"]
# Names that are public by __all__ but are pytest's hooks, not a user's API.
NOT_API = {"l2persist.pytest_plugin": {"pytest_addoption", "pytest_configure",
                                       "pytest_collection_modifyitems"}}


def check_public_names(app, env):
    import l2persist
    objects = env.get_domain("py").objects
    modules = env.get_domain("py").modules
    documented = set(objects) | set(modules)
    missing = []
    for name in l2persist.__all__:
        if f"l2persist.{name}" not in documented:
            missing.append(f"l2persist.{name}")
    for modname in PUBLIC_MODULES:
        try:
            mod = importlib.import_module(modname)
        except ImportError as e:  # autodoc has said so already, as a warning
            missing.append(f"{modname} (cannot be imported: {e})")
            continue
        for name in getattr(mod, "__all__", []):
            if name in NOT_API.get(modname, ()):
                continue
            if f"{modname}.{name}" not in documented and f"l2persist.{name}" not in documented:
                missing.append(f"{modname}.{name}")
    if modules and missing:  # (a partial build that read no API page checks nothing)
        logger.warning("public names without an entry in the API reference (add them to a "
                       "page under docs/api/): %s", ", ".join(missing), type="l2p",
                       subtype="api")


def setup(app):
    app.add_config_value("l2p_repository", "https://github.com/l2persist/l2persist", "env")
    app.add_directive("l2p-study", StudyDirective)
    app.add_directive("l2p-studies", StudiesDirective)
    app.add_directive("l2p-data", DataDirective)
    app.add_directive("l2p-devices", DevicesDirective)
    app.connect("autodoc-process-signature", process_signature)
    app.connect("autodoc-process-docstring", list_after_paragraph)
    app.connect("missing-reference", resolve_own_names)
    app.connect("env-check-consistency", check_public_names)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
