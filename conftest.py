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

pytest_plugins = sorted(
    f"tests.fixtures.{path.stem}"
    for path in (Path(__file__).parent / "tests" / "fixtures").glob("*.py")
    if not path.name.startswith("_")
)
