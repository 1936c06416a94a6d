"""The examples of the README and of the docs run, so that none drifts from the API.

- Every ```python block of README.md and docs/**/*.md is run: each file's blocks in order in
  one fresh interpreter (a subprocess, in a temporary directory), as a reader would paste them.
- A block that needs a GPU says so in its fence: ```python gpu. Further words name modules it
  needs: ```python gpu torch. Where no GPU is found, a file's blocks without the mark still run
  (they must not depend on marked ones), and the marked ones are compiled and their l2persist
  names checked; the run of every block of a file is a `gpu` test, skipped with the runtime's
  reason by l2persist's pytest plugin. On a GPU the named modules are required
  (pytest_plugin.need), as for the interop tests.
- Static checks of every block, marked or not: it compiles; every ``l2persist`` name it uses
  (``l2p.kernels.gather``, ``from l2persist.tune import verdict``) exists; every call of an
  l2persist callable binds to its signature (keyword names, positional count).
- Shell blocks (sh, bash, console) are not run, but every ``python -m l2persist ...`` line
  names a command of the CLI's command table, options that command's ``--help`` lists, and
  for ``run`` a real study.
- With Sphinx installed, the site builds with warnings as errors and no broken internal link
  (tools/docs; CI runs it as its own step).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

import l2persist

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
SHELLS = {"sh", "bash", "console", "shell"}


def _rel(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


def blocks(path: pathlib.Path) -> list[tuple[str, list[str], int, str]]:
    """(language, flags, first code line (1-based), code) of each fenced block of a Markdown
    file. A fence is three or more backticks or tildes; it closes on the same kind, at least
    as long, with nothing after it."""
    out, fence, info, start, code = [], None, "", 0, []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if fence is None:
            m = re.match(r"^(`{3,}|~{3,})\s*(.*)$", stripped)
            if m and not (m[1][0] == "`" and "`" in m[2]):  # CommonMark: no ` in its info
                fence, info, start, code = m[1], m[2].strip(), i + 1, []
        elif re.fullmatch(re.escape(fence[0]) + "{%d,}" % len(fence), stripped):
            words = info.split()
            out.append((words[0] if words else "", words[1:], start, "\n".join(code)))
            fence = None
        else:
            code.append(line)
    assert fence is None, f"{_rel(path)}: a fence opened at line {start - 1} never closes"
    return out


def python_blocks(path):
    return [(flags, line, code) for lang, flags, line, code in blocks(path) if lang == "python"]


WITH_PYTHON = [p for p in FILES if python_blocks(p)]
IDS = [_rel(p) for p in WITH_PYTHON]


def test_the_readme_and_the_guides_have_examples():
    names = {_rel(p) for p in WITH_PYTHON}
    assert "README.md" in names and "docs/getting-started.md" in names
    assert sum(n.startswith("docs/guides/") for n in names) >= 10, sorted(names)
    # the marks are the ones documented above: gpu, then module names
    for path in WITH_PYTHON:
        for flags, line, _ in python_blocks(path):
            assert all(re.fullmatch(r"[a-z_][\w.]*", f) for f in flags), (_rel(path), line)
            assert flags[:1] in ([], ["gpu"]), f"{_rel(path)}:{line}: flags {flags}: 'gpu' first"


# ---------------------------------------------------------------- running the blocks

_RUNNER = r"""
import json, sys, traceback
ns = {"__name__": "__main__"}
for path, line, code in json.load(open(sys.argv[1])):
    try:
        exec(compile("\n" * (line - 1) + code, path, "exec"), ns)
    except BaseException:
        traceback.print_exc()
        print(f"test_docs: the block at {path}:{line} failed", file=sys.stderr)
        sys.exit(1)
"""


def _run(path: pathlib.Path, chosen, tmp_path, timeout: int):
    todo = [(_rel(path), line, code) for _, line, code in chosen]
    script = tmp_path / "blocks.json"
    script.write_text(json.dumps(todo))
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", _RUNNER, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (f"{_rel(path)}: an example failed\n--- stdout\n"
                               f"{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-6000:]}")
    return r


def _having(gpu: bool):
    """(files, ids) of the files with a block that is (gpu=True) or is not marked gpu."""
    pick = [(p, i) for p, i in zip(WITH_PYTHON, IDS)
            if any(("gpu" in f) == gpu for f, _, _ in python_blocks(p))]
    return [p for p, _ in pick], [i for _, i in pick]


@pytest.mark.parametrize("path", _having(False)[0], ids=_having(False)[1])
def test_examples_without_a_gpu_run(path, tmp_path):
    """Every block not marked gpu runs, on any machine, in order, in one interpreter."""
    _run(path, [b for b in python_blocks(path) if "gpu" not in b[0]], tmp_path, timeout=300)


@pytest.mark.gpu
@pytest.mark.parametrize("path", _having(True)[0], ids=_having(True)[1])
def test_examples_on_a_gpu_run(path, tmp_path):
    """Every block of the file, marked or not, in order in one interpreter, on GPU 0."""
    from l2persist.pytest_plugin import need
    chosen = python_blocks(path)
    for flags, _, _ in chosen:
        for module in flags[1:]:
            need(module)
    _run(path, chosen, tmp_path, timeout=900)


# ---------------------------------------------------------------- static checks of every block

def _resolve(obj, attrs):
    for a in attrs:
        obj = getattr(obj, a)
    return obj


class _Names(ast.NodeVisitor):
    """Checks one block's use of l2persist against the package, carrying the names bound to
    l2persist objects from earlier blocks of the same file."""

    def __init__(self, where, known):
        self.where, self.known, self.problems = where, known, []

    def _import(self, module: str):
        import importlib
        return importlib.import_module(module)

    def visit_Import(self, node):
        for a in node.names:
            if a.name == "l2persist" or a.name.startswith("l2persist."):
                mod = self._import(a.name)
                if a.asname:
                    self.known[a.asname] = mod
                else:
                    self.known["l2persist"] = self._import("l2persist")

    def visit_ImportFrom(self, node):
        if node.module and (node.module == "l2persist" or node.module.startswith("l2persist.")):
            mod = self._import(node.module)
            for a in node.names:
                try:
                    obj = getattr(mod, a.name)
                except AttributeError:
                    try:
                        obj = self._import(f"{node.module}.{a.name}")
                    except ImportError:
                        self.problems.append(f"{self.where}:{node.lineno}: from {node.module} "
                                             f"import {a.name}: no such name")
                        continue
                self.known[a.asname or a.name] = obj

    def _chain(self, node):
        """(root name, [attrs]) of a.b.c, or None."""
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.insert(0, node.attr)
            node = node.value
        return (node.id, attrs) if isinstance(node, ast.Name) else None

    def visit_Attribute(self, node):
        chain = self._chain(node)
        if chain and chain[0] in self.known:
            try:
                _resolve(self.known[chain[0]], chain[1])
            except AttributeError:
                self.problems.append(f"{self.where}:{node.lineno}: "
                                     f"{'.'.join([chain[0], *chain[1]])}: no such name")
            return  # the chain is checked whole
        self.generic_visit(node)

    def visit_Call(self, node):
        chain = self._chain(node.func)
        if chain and chain[0] in self.known:
            try:
                fn = _resolve(self.known[chain[0]], chain[1])
            except AttributeError:
                fn = None  # reported by visit_Attribute
            if fn is not None and callable(fn) and not any(
                    isinstance(a, ast.Starred) for a in node.args) and all(
                    k.arg is not None for k in node.keywords):
                try:
                    sig = inspect.signature(fn)
                except (TypeError, ValueError):
                    sig = None
                if sig is not None:
                    try:
                        sig.bind_partial(*[None] * len(node.args),
                                         **{k.arg: None for k in node.keywords})
                    except TypeError as e:
                        self.problems.append(f"{self.where}:{node.lineno}: "
                                             f"{'.'.join([chain[0], *chain[1]])}(...): {e}")
        self.generic_visit(node)

    def visit_Assign(self, node):
        self.generic_visit(node)
        # a name rebound to something else is no longer l2persist's
        for t in node.targets:
            if isinstance(t, ast.Name):
                self.known.pop(t.id, None)


@pytest.mark.parametrize("path", WITH_PYTHON, ids=IDS)
def test_examples_compile_and_name_real_api(path):
    """Every block, marked gpu or not, compiles and uses only l2persist names that exist,
    called with arguments their signatures take (so a GPU example is checked here too)."""
    known, problems = {}, []
    for flags, line, code in python_blocks(path):
        where = _rel(path)
        try:
            tree = ast.parse("\n" * (line - 1) + code, where)
        except SyntaxError as e:
            problems.append(f"{where}:{e.lineno}: {e.msg}")
            continue
        v = _Names(where, known)
        v.visit(tree)
        problems += v.problems
    assert not problems, "\n".join(problems)


def test_the_static_check_catches_drift(tmp_path):
    """The name and signature checks fail on a renamed function, a wrong keyword, and a
    name that was never exported."""
    page = tmp_path / "page.md"
    page.write_text("```python gpu\nimport l2persist as l2p\nfrom l2persist import kernels as K\n"
                    "l2p.benchmrk(lambda: None)\nl2p.benchmark(lambda: None, streem=None)\n"
                    "K.gather(1, 2, 3, 'plain', 4)\nfrom l2persist import nothing_here\n```\n")
    (flags, line, code), = python_blocks(page)
    v = _Names("page.md", {})
    v.visit(ast.parse("\n" * (line - 1) + code))
    text = "\n".join(v.problems)
    assert "l2p.benchmrk: no such name" in text
    assert "streem" in text and "K.gather" in text and "nothing_here" in text
    assert len(v.problems) == 4, text


# ---------------------------------------------------------------- the command lines shown

def _commands() -> dict:
    """The CLI's command table: name -> entry (l2persist.cli.COMMANDS)."""
    from l2persist import cli
    return dict(cli.COMMANDS)


@functools.lru_cache(maxsize=None)
def _help(command: str | None) -> str:
    """``python -m l2persist [COMMAND] --help``, as a user sees it."""
    args = [sys.executable, "-m", "l2persist"] + ([command] if command else []) + ["--help"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, f"{' '.join(args[1:])} failed:\n{r.stderr[-2000:]}"
    return r.stdout


def command_lines(path: pathlib.Path):
    """(line number, the arguments after ``python -m l2persist``) of every such command in
    the file's shell blocks (continuation lines joined, comments dropped)."""
    out = []
    for lang, _, start, code in blocks(path):
        if lang not in SHELLS:
            continue
        lines = code.splitlines()
        i = 0
        while i < len(lines):
            n, text = start + i, lines[i]
            while text.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text.rstrip()[:-1] + " " + lines[i]
            i += 1
            text = re.sub(r"^\s*\$\s+", "", text)
            for m in re.finditer(r"\bpython3? -m l2persist\b", text):
                rest = text[m.end():]
                try:
                    words = shlex.split(rest, comments=True)
                except ValueError:
                    words = rest.split()
                for stop in ("&&", "||", ";", "|"):  # the next command of the line
                    if stop in words:
                        words = words[:words.index(stop)]
                out.append((n, words))
    return out


SHELL_FILES = [p for p in FILES if command_lines(p)]


def _options(words: list[str]) -> tuple[str | None, list[str], list[str]]:
    """(command, options, positionals) of l2persist's own part of a command line: everything
    before a ``--`` (after it comes the watched program), brackets of a synopsis removed."""
    if "--" in words:
        words = words[:words.index("--")]
    words = [w.strip("[]") for w in words]
    words = [w for w in words if w and w != "..."]
    command = words[0] if words and not words[0].startswith("-") else None
    rest = words[1:] if command else words
    return command, [w.split("=")[0] for w in rest if w.startswith("--")], \
        [w for w in rest if not w.startswith("-")]


@pytest.mark.parametrize("path", SHELL_FILES, ids=[_rel(p) for p in SHELL_FILES])
def test_command_lines_name_real_commands_and_options(path):
    from l2persist import studies
    commands, problems = _commands(), []
    for n, words in command_lines(path):
        command, options, positionals = _options(words)
        where = f"{_rel(path)}:{n}: python -m l2persist {' '.join(words)}"
        if command is not None and command not in commands:
            problems.append(f"{where}: no command {command!r} (the commands: "
                            f"{', '.join(commands)})")
            continue
        text = _help(command)
        for opt in options:
            if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text):
                problems.append(f"{where}: {opt} is not an option of "
                                f"`python -m l2persist{' ' + command if command else ''}`")
        if command == "run" and positionals and not positionals[0].isupper():  # not STUDY
            if positionals[0] not in studies.study_names():
                problems.append(f"{where}: no study {positionals[0]!r}")
    assert not problems, "\n".join(problems)


def test_the_command_check_catches_drift(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```sh\npython -m l2persist advice -- python x.py\n"
                    "python -m l2persist run gather --quik\npython -m l2persist run nosuch\n"
                    "python -m l2persist --jsn\n```\n")
    lines = command_lines(page)
    assert [w[:2] for _, w in lines] == [["advice", "--"], ["run", "gather"], ["run", "nosuch"],
                                         ["--jsn"]]
    assert _options(lines[0][1])[0] == "advice" and "advice" not in _commands()
    assert "--quik" in _options(lines[1][1])[1] and "--quik" not in _help("run")
    assert _options(lines[3][1]) == (None, ["--jsn"], [])


def test_readme_commands_are_the_ones_ci_runs():
    """The README's two quick-start commands as CI runs them (.ci/run runs the README's test
    command, tools/test, after the editable install with the test extra)."""
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m pip install -e . && python3 -m l2persist\n" in readme
    assert 'python3 -m pip install -e ".[test]" && tools/test\n' in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index('python3 -m pip install -e ".[test]"') < ci.index("\ntools/test\n")
    assert "\ntools/docs" in ci


def test_readme_docs_install_is_the_docs_extra_that_ci_installs():
    """The README installs the docs' tools as the docs extra, and CI installs that extra's list
    from pyproject.toml (no second list to drift): it holds what tools/docs needs, pytest
    included (the API reference imports the pytest plugin)."""
    import tomllib
    readme = (ROOT / "README.md").read_text()
    assert 'python3 -m pip install -e ".[docs]"' in readme
    docs = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["docs"]
    names = {re.split(r"[<>=!~ ]", d, maxsplit=1)[0] for d in docs}
    assert {"sphinx", "myst-parser", "pytest"} <= names
    ci = (ROOT / ".ci" / "run").read_text()
    assert '["optional-dependencies"]["docs"]' in ci and "sphinx>=" not in ci
    assert ci.index('["optional-dependencies"]["docs"]') < ci.index("\ntools/docs")


def test_readme_opens_with_what_it_does_then_the_quick_start():
    """The first screen: a short description, then the two quick-start commands."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines.index("## Quick start") <= 8
    assert len(lines) <= 200


def test_readme_says_needs_a_gpu_where_a_reader_sees_it():
    """A fence's info string (`python gpu`) is not shown by GitHub: every GPU-only block, and the
    advise / apply / verify commands, are introduced by text that says so."""
    text = (ROOT / "README.md").read_text()
    blocks = [m.start() for m in re.finditer(r"^```python gpu", text, re.M)]
    blocks.append(text.rfind("```", 0, text.index("python -m l2persist advise")))
    assert len(blocks) >= 4
    for at in blocks:
        before = text[:at].rstrip()
        para = before[before.rfind("\n\n") + 2:]     # the paragraph just above the block
        assert "needs a gpu" in para.lower(), para[-200:]


def test_readme_gives_verifys_exit_statuses():
    text = " ".join((ROOT / "README.md").read_text().split())
    assert ("0 the plan still holds, 1 it no longer helps, 2 bad invocation or no usable device "
            "or a plan from another GPU model, 3 inconclusive") in text


# ---------------------------------------------------------------- the built site

# Collected only where the docs' tools are installed: a skip elsewhere would count against
# tools/gpu-check's allow-list of skips on the GPU machine, and CI builds the docs in a step of
# its own (after tools/test, so this is not built twice there).
_SPHINX = all(importlib.util.find_spec(m) for m in ("sphinx", "myst_parser")) and bool(
    shutil.which("bash"))


if _SPHINX:
    def test_the_docs_build_without_warnings_or_broken_links(tmp_path):
        """tools/docs: Sphinx with warnings as errors and nitpicky references, then every internal
        link and anchor of the built pages."""
        r = subprocess.run(["bash", str(ROOT / "tools" / "docs"), str(tmp_path / "docs")],
                           capture_output=True, text=True, timeout=900, cwd=ROOT,
                           env=dict(os.environ, MPLBACKEND="Agg"))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
        assert "0 warnings" in r.stdout and "internal links" in r.stdout
