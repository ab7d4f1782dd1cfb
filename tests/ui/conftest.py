"""One real Airflow deployment (four processes) per session for the cockpit's tests, wired to the
session's embedded control plane and OCI registry, with the cockpit's test DAG deployed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ui.dag_source import DAG_ID, SOURCE
from tests.ui.deployment import Deployment

ARTIFACTS = Path(__file__).resolve().parents[2] / ".run" / "ui-artifacts"


@pytest.fixture(scope="session")
def cockpit(tmp_path_factory: pytest.TempPathFactory, control_plane, registry) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("cockpit")
    registry_conn = {"conn_type": "modelkit_registry", "host": registry.host, "extra": {"plain_http": True}}
    deployment = Deployment.create(
        root,
        extra_env={
            "AIRFLOW__TRAINING__KUBERNETES_CONN_ID": "",
            "AIRFLOW__TRAINING__EMBEDDED_HOME": str(control_plane.home),
            "AIRFLOW_CONN_COCKPIT_REGISTRY": json.dumps(registry_conn),
        },
    )
    deployment.add_dag(SOURCE, f"{DAG_ID}.py")
    try:
        deployment.start()
        deployment.wait_dag(DAG_ID)
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
