"""``airflow-training migrate --check``: the PyTorchJob and its migrated TrainJob run side by side
on a temporary embedded control plane; what their replicas saw is compared and differences reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def pytorchjob(env: dict[str, str], worker_env: dict[str, str] | None = None) -> dict:
    def replica(values: dict[str, str]) -> dict:
        container = {
            "name": "pytorch",
            "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
            "command": ["python", "train.py"],
            "env": [{"name": k, "value": v} for k, v in values.items()],
            "resources": {"limits": {"cpu": "1"}},
        }
        return {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(env), "Worker": replica(worker_env or env)}},
    }


def migrate_check(tmp_path: Path, doc: dict) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "pj.yaml"
    path.write_text(yaml.safe_dump(doc))
    command = [sys.executable, "-m", "airflow_provider_training.cli", "migrate", "--check", "-f", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_check_runs_both_and_reports_what_differs(tmp_path: Path) -> None:
    # Per-replica-type env cannot be carried (one template for every node): the check shows it.
    done = migrate_check(tmp_path, pytorchjob({"EPOCHS": "3"}, {"EPOCHS": "3", "ROLE": "worker"}))
    out = done.stdout
    assert "# check: v1 mnist: Succeeded; v2 mnist: Complete" in out, done.stderr
    assert "# check: nodes: v1 2; v2 2" in out
    assert "# check: ranks: v1 0, 1; v2 0, 1" in out
    assert "env EPOCHS" not in out  # carried over: both saw EPOCHS=3
    assert "# check: env ROLE: v1 only  <- DIFFERENT" in out
    assert "kind: TrainJob" in out  # the migration itself is still printed
    assert done.returncode == 1
