"""The cockpit's tests run in the session's real Airflow deployment (``airflow_deployment``,
``tests/fixtures/airflow_deployment.py``), whose second DAG bundle holds ``cockpit_training``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

ARTIFACTS = ROOT / ".run" / "ui-artifacts"
DAG_ID = "cockpit_training"

# Tokens as the deployment's own auth manager signs them for two more users: ``viewer`` (read-only
# role) and ``outsider`` (signed in, no role: may read no DAG). The fixture configures one admin.
_MINT = """
import json
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
manager = SimpleAuthManager()
print(json.dumps({name: manager.generate_jwt(SimpleAuthManagerUser(username=name, role=role))
                  for name, role in (("viewer", "viewer"), ("outsider", None))}))
"""


@pytest.fixture(scope="session")
def cockpit(airflow_deployment):
    airflow_deployment.wait_for_dags(DAG_ID)
    airflow_deployment.unpause(DAG_ID)
    minted = subprocess.run(
        [sys.executable, "-c", _MINT],
        env=airflow_deployment.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    airflow_deployment.user_tokens = {"admin": airflow_deployment.token(), **json.loads(minted.stdout.splitlines()[-1])}
    return airflow_deployment


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
