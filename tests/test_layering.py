"""The import graph: every module has a level, no module imports one above it, no two modules
import each other (directly or round a longer circle), and loading a run needs no training code.

Levels, lowest first (a unit is a top-level module or package of ``keras_memnmt``):
``files``, ``atomic`` and ``runtime``; ``data``; ``layers`` and ``decoding``; ``models`` and ``testing``;
``config`` and ``pictures``; ``rundir``; ``evaluation``; ``export`` and
``training``; ``recipes``; ``cli``; then the deprecated import paths, which only re-export.
A module may import its own level or below (imports inside functions included).
"""

import ast
import os
import re
import subprocess
import sys

import pytest

import keras_memnmt

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

LEVELS = {
    "files": 0,
    "tokens": 0,
    "runtime": 0,
    "atomic": 0,
    "data": 1,
    "layers": 2,
    "decoding": 2,
    "models": 3,
    "testing": 3,
    "config": 4,
    "pictures": 4,
    "rundir": 5,
    "evaluation": 6,
    "export": 7,
    "training": 7,
    "recipes": 8,
    "serving": 8,
    "cli": 9,
    # Deprecated import paths (each re-exports a module that moved).
    "runs": 10,
    "records": 10,
    "outputs": 10,
    "results": 10,
    "inference": 10,
    "compare": 10,
    "settings": 10,
    "inspection": 10,
    "plots": 10,
}
ROOT = os.path.dirname(keras_memnmt.__file__)


def _modules() -> dict[str, str]:
    """Dotted name -> path of every module of the package (tests beside the code left out)."""
    found = {}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py") and not name.endswith("_test.py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, os.path.dirname(ROOT))[:-3].split(os.sep)
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "keras_memnmt" else None


def _imports(path: str):
    """The modules that the file ``path`` imports, anywhere in it: ``from P import X`` gives
    ``P.X`` where that is a module of the package, else ``P``."""
    tree = ast.parse(open(path).read())
    package = os.path.relpath(os.path.dirname(path), os.path.dirname(ROOT)).replace(os.sep, ".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's own package
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a package's ``__init__`` left out where
    it only gathers its own modules' names: an edge to it is an edge to the package)."""
    return {name: {m for m in _imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def test_every_module_has_a_level():
    missing = sorted({_unit(name) for name in MODULES if _unit(name)} - set(LEVELS))
    assert not missing, f"modules of no level in LEVELS: {missing}"


def test_no_module_imports_one_above_it():
    wrong = [
        f"{name} imports {other}"
        for name, others in _graph().items()
        for other in others
        if LEVELS.get(_unit(other) or "", -1) > LEVELS.get(_unit(name) or "", 99)
    ]
    assert not wrong, wrong


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_circles():
    # A package's __init__ imports its own modules to gather their names, and they may use
    # its names in turn: that is one unit, not a circle. Every other cycle is one.
    graph = _graph()
    packages = {name for name, path in MODULES.items() if path.endswith("__init__.py")}
    inner = {
        name: {
            o
            for o in others
            if not (o in packages and name.startswith(o + ".")) and not (name in packages and o.startswith(name + "."))
        }
        for name, others in graph.items()
    }
    assert not _circles(inner), _circles(inner)


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_loading_and_translating_a_run_does_not_import_training():
    code = (
        "import sys, keras_memnmt.rundir.runs, keras_memnmt.evaluation.translation, keras_memnmt.cli; "
        "print(sorted(m for m in sys.modules if m.startswith('keras_memnmt.training')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_command_line_stays_thin():
    # The command line parses and dispatches; the work is the library's. A command's
    # function that grows past 80 lines holds work that belongs below it.
    long = []
    for name, path in MODULES.items():
        if _unit(name) == "cli":
            for node in ast.walk(ast.parse(open(path).read())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                    long.append(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not long, long


def _map_sections() -> dict[str, str]:
    """docs/development.md's "Where things live" tree: package path -> the text under its
    heading line (``""`` is the package's own top level)."""
    text = open(os.path.join(os.path.dirname(ROOT), "docs", "development.md"), encoding="utf-8").read()
    block = text.split("## Where things live", 1)[1].split("```", 2)[1]
    lines = [line for line in block.splitlines() if line.strip()]
    assert lines[0] == "keras_memnmt/", lines[0]
    lines = lines[1:]
    sections, stack = {"": ""}, []  # stack of (indent, package path)
    for line in lines:
        indent = len(line) - len(line.lstrip())
        first = line.split()[0]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        owner = stack[-1][1] if stack else ""
        sections[owner] = sections.get(owner, "") + line + "\n"
        if first.endswith("/"):
            path = f"{owner}/{first[:-1]}".strip("/")
            stack.append((indent, path))
            sections.setdefault(path, "")
            sections[path] += line + "\n"
    return sections


def test_the_map_in_the_docs_names_every_module():
    # docs/development.md "Where things live": every module of the package under its
    # package's heading (the recipes, one preset per file, are named by their folder).
    sections, whole = _map_sections(), "\n".join(_map_sections().values())
    missing = []
    for path in MODULES.values():
        relative = os.path.relpath(path, ROOT)
        folder, file = os.path.split(relative)
        if file == "__init__.py" or folder == "recipes":
            continue
        if not re.search(rf"(?<![\w/]){re.escape(file)}\b", sections.get(folder, "")) and relative not in whole:
            missing.append(relative)
    assert not missing, f"modules the map in docs/development.md does not name: {missing}"
