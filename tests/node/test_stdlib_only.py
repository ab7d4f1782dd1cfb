"""The processes the node agent starts (``python -I -S entry.py ...``: a pod's supervisor, the zygote,
``exec`` into a pod, the MPI rsh agent, the kit shim) run without site-packages, so everything they
import is the standard library or a module of the provider that is itself only that. Found from the
source (no process started): an import of ``specs`` or pydantic in one of them fails every pod."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import airflow_provider_training

PACKAGE = Path(airflow_provider_training.__file__).parent
NODE = PACKAGE / "embedded" / "node"
ENTRY_POINTS = ("entry", "supervisor", "zygote", "podexec", "execclient", "orted", "kitshim")


def _module_file(name: str) -> Path | None:
    parts = name.split(".")[1:]
    base = PACKAGE.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            # "from airflow_provider_training.embedded.node import supervisor" imports a module too
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def _outside_stdlib(start: Path) -> dict[str, str]:
    """Each import outside the standard library reached from ``start``, with the module importing it."""
    seen: set[Path] = set()
    todo, outside = [start], {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "airflow_provider_training":
                # the package's __init__ modules are stubbed (entry.py), so only the modules themselves count
                target = _module_file(name)
                if target is not None and target.name != "__init__.py":
                    todo.append(target)
                elif target is not None and not str(target.parent).startswith(str(NODE.parent)):
                    outside[name] = path.name  # a package outside embedded/: its __init__ is not stubbed
            elif top not in sys.stdlib_module_names and top != "__future__":
                outside[name] = path.name
    return outside


def test_what_the_node_starts_imports_only_the_standard_library() -> None:
    for entry in ENTRY_POINTS:
        assert _outside_stdlib(NODE / f"{entry}.py") == {}, entry


def test_the_check_sees_a_third_party_import_two_modules_away(tmp_path: Path) -> None:
    (tmp_path / "first.py").write_text("import json\nfrom airflow_provider_training.specs import unstructured\n")
    assert "airflow_provider_training.specs" in _outside_stdlib(tmp_path / "first.py")
    (tmp_path / "second.py").write_text("from airflow_provider_training.embedded.node import proctree\nimport yaml\n")
    assert _outside_stdlib(tmp_path / "second.py") == {"yaml": "second.py"}
