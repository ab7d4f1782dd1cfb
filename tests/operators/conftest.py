from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_provider_training.embedded import ControlPlane


@pytest.fixture
def embedded_default(control_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch) -> ControlPlane:
    """``[training] kubernetes_conn_id`` empty and ``embedded_home`` = the session control plane: the
    operators' default cluster is the embedded one, as on a laptop."""
    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "")
    monkeypatch.setenv("AIRFLOW__TRAINING__EMBEDDED_HOME", str(control_plane.home))
    return control_plane


@pytest.fixture
def run_dag(write_dag: Callable[..., Any], embedded_default: ControlPlane) -> Iterator[Callable[..., Any]]:
    """Write a DAG file, ``dag.test()`` it and return the DagRun with its task instances."""

    def run(source: str, dag_id: str, **kwargs: Any) -> Any:
        dag = write_dag(source, dag_id)
        return dag.test(**kwargs)

    yield run
