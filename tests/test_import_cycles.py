"""No import cycle inside ``src/airflow_provider_training``: each module's imports, module-level or
inside a function (a lazy import still ties the two modules together), read from the source with
``ast`` — nothing is imported, so the test is cheap and sees every module.

A cycle means the two modules are one unit split across files; it also made
``operators/deploy.py → lineage.py → modelkit_provenance.py → deploy.py`` depend on import order.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT

PACKAGE = "airflow_provider_training"
SRC = ROOT / "src" / PACKAGE


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The provider's modules ``path`` imports (``from pkg import mod`` counts as ``pkg.mod`` when
    that is a module, else as ``pkg``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c` of a name inside a module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in SRC.rglob("*.py")}
    modules = set(paths)
    return {m: imports(paths[m], modules) for m in sorted(modules)}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_reads_lazy_and_relative_imports() -> None:
    edges = graph()
    # a function-level import (the lineage facets are imported when OpenLineage asks for them)
    assert f"{PACKAGE}.operators.lineage" in edges[f"{PACKAGE}.operators.deploy"]
    assert f"{PACKAGE}.client.state" in edges[f"{PACKAGE}.client"]


def test_no_import_cycle_in_the_provider() -> None:
    found = cycles(graph())
    # A package's __init__ that re-exports its modules, and a module of it that imports the package,
    # is a cycle too: import the module (client.state), not the package (client).
    assert found == [], "import cycles (each a set of modules that import each other): " + "; ".join(
        " <-> ".join(c) for c in found
    )
