"""``airflow-training validate -f`` on Trainer v2 files, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.factories import mutate, runtime, trainjob


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_training.cli", "validate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_trainjob_and_its_runtime_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "train.yaml"
    job = mutate(trainjob(numNodes=2), "spec.runtimeRef", {"name": "my-runtime", "kind": "TrainingRuntime"})
    bad = mutate(trainjob("bad", env=[{"name": "PET_NNODES", "value": "4"}]), "spec.runtimeRef.name", "jax-distributed")
    path.write_text(yaml.safe_dump_all([runtime(), job, trainjob("on-default", numNodes=2), bad]))
    result = _run("-f", str(path))
    out = result.stdout
    assert result.returncode == 0, out + result.stderr  # PET_* is reserved for torch only: jax accepts it
    assert f"{path}#1: TrainingRuntime team/my-runtime: valid" in out
    assert f"{path}#2: TrainJob team/tj: valid (0 error(s), 0 warning(s))" in out
    assert f"{path}#3: TrainJob team/on-default: valid (0 error(s), 0 warning(s))" in out

    path.write_text(yaml.safe_dump_all([mutate(bad, "spec.runtimeRef.name", "torch-distributed")]))
    result = _run("-f", str(path))
    assert result.returncode == 1
    assert "TrainJob team/bad: INVALID (1 error(s), 0 warning(s))" in result.stdout
    assert "must not have reserved envs, invalid envs configured: [PET_NNODES]" in result.stdout
    assert "1 invalid document(s)" in result.stderr


def test_strict_makes_unknown_trainjob_fields_errors(tmp_path: Path) -> None:
    path = tmp_path / "tj.yaml"
    path.write_text(yaml.safe_dump(mutate(trainjob(numNodes=1), "spec.trainer.replicas", 2)))
    lenient = _run("-f", str(path))
    assert lenient.returncode == 0 and "warning: spec.trainer.replicas: unknown field" in lenient.stdout
    strict = _run("--strict", "-f", str(path))
    assert strict.returncode == 1 and "error: spec.trainer.replicas: unknown field" in strict.stdout
