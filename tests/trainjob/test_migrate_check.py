"""``airflow-training migrate --check``: the PyTorchJob and its migrated TrainJob run side by side
on a temporary embedded control plane; what their replicas saw is compared and differences reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from airflow_provider_training.specs.kinds import KINDS


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


def job(kind: str, name: str, replicas: dict[str, int], env: dict[str, dict[str, str]], **spec: object) -> dict:
    """A v1 job of ``kind`` whose replica types get the environment ``env`` names for them."""
    info = KINDS[kind]

    def replica(rtype: str, count: int) -> dict:
        container = {
            "name": info.default_container,
            "image": "python:3.11",
            "command": ["/usr/sbin/sshd", "-De"] if (kind, rtype) == ("MPIJob", "Worker") else ["python", "train.py"],
            "env": [{"name": k, "value": v} for k, v in env.get(rtype, {}).items()],
        }
        return {"replicas": count, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}

    specs = {rtype: replica(rtype, count) for rtype, count in replicas.items()}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name},
            "spec": {info.replica_specs_field: specs, **spec}}  # fmt: skip


def test_every_kind_is_checked_or_refused_with_its_reason(tmp_path: Path) -> None:
    same = {"EPOCHS": "3"}
    docs = [
        job("JAXJob", "jx", {"Worker": 2}, {"Worker": same}),
        # per-replica-type env cannot be carried: the check shows it for XGBoost too
        job("XGBoostJob", "xg", {"Master": 1, "Worker": 2}, {"Master": same, "Worker": {**same, "ROLE": "w"}}),
        job("MPIJob", "mp", {"Launcher": 1, "Worker": 3}, {"Launcher": same}, slotsPerWorker=2),
        job("TFJob", "tf", {"Chief": 1, "Worker": 2}, {}),
        job("PaddleJob", "pd", {"Worker": 2}, {}),
        job("MXJob", "mx", {"Scheduler": 1, "Server": 1, "Worker": 2}, {}, jobMode="MXTrain"),
    ]
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    command = [sys.executable, "-m", "airflow_provider_training.cli", "migrate", "--check", "-f", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert "# check: v1 jx: Succeeded; v2 jx: Complete" in out, done.stderr
    assert "# check: ranks: v1 0, 1; v2 0, 1" in out
    assert "# check: the replicas saw the same nodes, ranks and environment (1 variables of yours)" in out
    assert "# check: v1 xg: Succeeded; v2 xg: Complete" in out
    assert "# check: nodes: v1 3; v2 3" in out
    assert "# check: ranks: v1 0, 1, 2; v2 0, 1, 2" in out
    assert "# check: env ROLE: v1 only  <- DIFFERENT" in out
    assert "# check: v1 mp: Succeeded; v2 mp: Complete" in out
    assert "# check: hosts in the launcher's hostfile: v1 3; v2 3" in out
    assert "# check: slots per host: v1 slots=2; v2 slots=2" in out
    assert "# check: the launcher saw the same hosts, slots and environment (1 variables of yours)" in out
    for kind, name, framework, field, missing in (
        ("TFJob", "tf", "TensorFlow", "spec.tfReplicaSpecs", "TF_CONFIG"),
        ("PaddleJob", "pd", "PaddlePaddle", "spec.paddleReplicaSpecs", "PADDLE_JOB_ID"),
        ("MXJob", "mx", "MXNet", "spec.mxReplicaSpecs", "MX_CONFIG"),
    ):
        refusal = next(line for line in out.splitlines() if line.startswith(f"# check: {kind} {name} not run"))
        assert f"Trainer v2.3.0 has no {framework} plugin" in refusal
        assert field in refusal and missing in refusal and refusal.endswith("<- DIFFERENT")
    assert out.count("kind: TrainJob") == 6  # every migration is still printed
    assert done.returncode == 1
