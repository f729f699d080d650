"""The import graph of the package holds the layering of ARCHITECTURE.md ("Import layers"):
every module is in exactly one layer, imports only from its own layer and those below, and
no modules import each other in a circle.

The graph is read from the source (``ast``), module by module: every ``import`` and
``from ... import`` statement, at module level or inside a function, to a module of the
package. Importing ``a.b.c`` runs the packages ``a.b`` on the way, so those are edges too,
except the root package ``ldpfast`` (Python runs it before any of its modules; it is the
top of the table and imports eagerly only the modules it names below it).

Not edges: imports under ``if TYPE_CHECKING:`` (never executed; they let a lower layer
name a higher layer's type in an annotation, e.g. ``Aggregator.frequencies -> Estimate``,
while the call itself goes through the hook ``ldpfast.estimates`` fills), and modules
loaded by name with ``importlib`` (the registry's protocol discovery and plug-ins, the
lazy submodules of ``ldpfast`` and ``ldpfast.protocols``, the deprecated old paths).
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "ldpfast"

Edge = Tuple[str, str, int]  # importer, imported module, line


def layer_table(text: str) -> List[Tuple[str, List[str]]]:
    """``[(layer name, module patterns)]``, lowest layer first, from the "Import layers"
    table of ARCHITECTURE.md (rows ``| n name | `pattern`, ... |``)."""
    section = text.split("## Import layers", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| *(\d+) ([^|]+?) *\| *(.+?) *\|$", section, re.M)
    assert [int(n) for n, _, _ in rows] == list(range(len(rows))), "layers must be numbered 0, 1, 2, ..."
    return [(name, re.findall(r"`([\w.*]+)`", patterns)) for _, name, patterns in rows]


def module_sources(package: Path) -> Dict[str, str]:
    """``{dotted name: source}`` of every module of ``package`` (``_core.pyi`` stands for
    the compiled core)."""
    out = {}
    for path in sorted(package.rglob("*.py")) + sorted(package.glob("*.pyi")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path.read_text(encoding="utf-8")
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every import statement, at any depth, except in ``if TYPE_CHECKING:`` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def import_edges(sources: Mapping[str, str]) -> List[Edge]:
    """The import graph of the modules in ``sources`` (edges to modules outside it are
    dropped), with the packages each import runs on the way (the root package excepted)."""
    root = next(iter(sources)).split(".")[0]
    packages = {name.rpartition(".")[0] for name in sources if "." in name}
    edges = []
    for name, source in sources.items():
        here = name if name in packages or name == root else name.rpartition(".")[0]
        for node in _imports(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = here.split(".")[:len(here.split(".")) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in sources else module
                           for alias in node.names]
            for target in targets:
                while target not in sources and "." in target:   # an attribute, not a module
                    target = target.rpartition(".")[0]
                parts = target.split(".")
                for depth in range(2, len(parts) + 1):             # the packages on the way, then the module
                    reached = ".".join(parts[:depth])
                    if reached in sources and reached != name and not name.startswith(reached + "."):
                        edges.append((name, reached, node.lineno))
    return edges


def layer_of(table: List[Tuple[str, List[str]]], modules) -> Dict[str, List[int]]:
    """``{module: [index of each layer whose patterns match it]}`` (``x.*``: x and below)."""
    out: Dict[str, List[int]] = {}
    for module in modules:
        out[module] = [i for i, (_, patterns) in enumerate(table)
                       if any(module == p or fnmatch.fnmatchcase(module, p) or (p.endswith(".*") and module == p[:-2])
                              for p in patterns)]
    return out


def circles(edges: List[Edge]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    graph: Dict[str, Set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def upward(edges: List[Edge], layers: Mapping[str, List[int]]) -> List[Edge]:
    return [(a, b, line) for a, b, line in edges if layers[b][0] > layers[a][0]]


@pytest.fixture(scope="module")
def graph():
    table = layer_table((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    sources = module_sources(PACKAGE)
    return table, sources, import_edges(sources)


def test_every_module_is_in_exactly_one_layer(graph):
    table, sources, _ = graph
    layers = layer_of(table, sources)
    assert len(sources) > 60 and "ldpfast.protocols.frequency.ocms" in sources and "ldpfast._core" in sources
    wrong = {module: [table[i][0] for i in found] for module, found in layers.items() if len(found) != 1}
    assert not wrong, f"modules in no layer or in several (ARCHITECTURE.md, Import layers): {wrong}"


def test_no_module_imports_from_a_higher_layer(graph):
    table, sources, edges = graph
    layers = layer_of(table, sources)
    assert any(layers[b][0] < layers[a][0] for a, b, _ in edges)  # the graph is there
    bad = [f"{a} (layer {layers[a][0]}) line {line} imports {b} (layer {layers[b][0]})"
           for a, b, line in upward(edges, layers)]
    assert not bad, "imports from a higher layer:\n" + "\n".join(bad)


def test_no_modules_import_each_other_in_a_circle(graph):
    _, _, edges = graph
    found = circles(edges)
    assert not found, f"import circles: {found}"


def test_the_checks_catch_a_circle_an_upward_import_and_a_stray_module():
    """The same functions on a made-up package: a core module that imports an adapter (a
    function-local import, as Reports.to_arrow once did), the adapter importing it back, a
    TYPE_CHECKING import (not an edge), and a module in no layer."""
    sources = {
        "pkg": "from . import core\n",
        "pkg.core": "import typing\nif typing.TYPE_CHECKING:\n    from .adapters import arrow\n"
                    "def to_arrow():\n    from .adapters.arrow import write\n",
        "pkg.adapters": "",
        "pkg.adapters.arrow": "from ..core import Reports\n",
        "pkg.stray": "",
    }
    table = [("core", ["pkg.core"]), ("adapters", ["pkg.adapters.*", "pkg"])]
    edges = import_edges(sources)
    assert sorted((a, b) for a, b, _ in edges) == [
        ("pkg", "pkg.core"), ("pkg.adapters.arrow", "pkg.core"), ("pkg.core", "pkg.adapters"),
        ("pkg.core", "pkg.adapters.arrow")]
    layers = layer_of(table, sources)
    assert layers["pkg.stray"] == [] and layers["pkg.adapters"] == [1]
    assert [(a, b) for a, b, _ in upward(edges, {k: v or [0] for k, v in layers.items()})] == [
        ("pkg.core", "pkg.adapters"), ("pkg.core", "pkg.adapters.arrow")]
    assert circles(edges) == [["pkg.adapters.arrow", "pkg.core"]]
    text = "## Import layers\n\n| layer | modules |\n|---|---|\n| 0 core | `pkg.core` |\n| 1 adapters | `pkg.*` |\n"
    assert layer_table(text) == [("core", ["pkg.core"]), ("adapters", ["pkg.*"])]
