"""Airflow discovers the provider through its entry point, and its metadata passes Airflow's schema."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from importlib import resources

import jsonschema

from airflow_provider_training.get_provider_info import get_provider_info


def _airflow(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "airflow", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_airflow_lists_and_gets_the_provider() -> None:
    assert "airflow-provider-training" in _airflow("providers", "list", "--output", "plain")
    out = _airflow("providers", "get", "airflow-provider-training", "--output", "json")
    [info] = json.loads(out)
    assert info["Provider"] == "airflow-provider-training"
    from airflow_provider_training import __version__

    assert info["Version"] == __version__


def test_provider_info_matches_airflows_schema() -> None:
    schema = json.loads(resources.files("airflow").joinpath("provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "airflow-provider-training"


def test_declared_modules_import() -> None:
    info = get_provider_info()
    for group in ("operators", "sensors", "hooks", "triggers"):
        for entry in info.get(group, []):
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for connection in info["connection-types"]:
        module, _, cls = connection["hook-class-name"].rpartition(".")
        assert hasattr(importlib.import_module(module), cls)
