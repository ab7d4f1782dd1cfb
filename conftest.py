"""Session-wide test setup.

Airflow reads AIRFLOW_HOME when it is first imported, so the temporary home is set here, before any
test module can import it. Shared heavy fixtures (Airflow metadata DB, OCI registry, embedded
control plane) live in ``tests/fixtures/*.py`` and are loaded as plugins, one instance per session.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_home = Path(tempfile.mkdtemp(prefix="apt-airflow-home-"))
os.environ["AIRFLOW_HOME"] = str(_home)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# Tests write DAG files here (dag.test() only runs DAGs it can find in a bundle); the repository's
# own dags/ are linked in by the DAG tests themselves.
(_home / "dags").mkdir()
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(_home / "dags")
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_home / 'airflow.db'}")
# Keep user state out of tests: the embedded control plane and ModelKit store live under tmp.
os.environ.setdefault("AIRFLOW_TRAINING_HOME", str(_home / "training"))
os.environ.setdefault("KITOPS_HOME", str(_home / "kitops"))
# dag.test() runs triggers in its own process: no scheduler, so none of the race the settle time
# guards against (triggers/settle.py); the deployment tier keeps the default.
os.environ.setdefault("AIRFLOW__TRAINING__DEFER_SETTLE_SECONDS", "0")

pytest_plugins = sorted(
    f"tests.fixtures.{path.stem}"
    for path in (Path(__file__).parent / "tests" / "fixtures").glob("*.py")
    if not path.name.startswith("_")
)

# The fast tier. A test is marked ``unit`` when it needs nothing heavy: no fixture declared ``@heavy``
# (``tests/fixtures/__init__.py``: the control plane, a registry, the Airflow DB, a deployment, a side
# venv, a node agent, and every fixture built on one of them), and its module imports nothing that
# starts processes, daemons, Airflow or torch itself. ``pytest -m unit`` runs them. A test that starts
# something the import check cannot see (through a helper module) marks itself ``integration``;
# ``slow`` tests are never in it either, nor ``generated`` ones (hundreds of hypothesis examples each).
# Imports that mean the module starts something heavy on its own.
HEAVY_IMPORTS = ("subprocess", "multiprocessing", "airflow", "torch", "airflow_provider_training.embedded.daemon")
HEAVY_NAMES = {"airflow_provider_training.embedded": {"start", "stop", "ensure_running", "ControlPlane"}}
_heavy_modules: dict[Path, bool] = {}


def _starts_things(path: Path) -> bool:
    import ast

    if path not in _heavy_modules:
        found = False
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
                if HEAVY_NAMES.get(node.module, set()) & {alias.name for alias in node.names}:
                    found = True
            else:
                continue
            found = found or any(m == h or m.startswith(h + ".") for m in modules for h in HEAVY_IMPORTS)
        _heavy_modules[path] = found
    return _heavy_modules[path]


def pytest_collection_modifyitems(config: object, items: list) -> None:  # type: ignore[type-arg]
    import pytest
    from tests.fixtures import HEAVY

    # Tests that ask the session's Airflow deployment for another executor (KubernetesExecutor) run
    # last: pytest ends one deployment before it starts the other, so run between the LocalExecutor
    # tests they would cost a second start of the LocalExecutor deployment (a minute or more).
    other_executor = [i for i in items if "airflow_deployment" in getattr(getattr(i, "callspec", None), "params", {})]
    if other_executor:
        items[:] = [i for i in items if i not in other_executor] + other_executor
    for item in items:
        if HEAVY.intersection(getattr(item, "fixturenames", ())) or _starts_things(Path(str(item.path))):
            continue
        if any(item.get_closest_marker(m) for m in ("slow", "integration", "generated")):
            continue
        item.add_marker(pytest.mark.unit)
