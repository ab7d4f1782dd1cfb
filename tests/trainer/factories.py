"""Minimal valid Trainer v2 documents, for table-driven tests that break one rule at a time."""

from __future__ import annotations

from typing import Any

from tests.factories import DELETE, mutate

__all__ = ["DELETE", "mutate", "runtime", "trainjob"]


def trainjob(name: str = "tj", runtime_name: str = "torch-distributed", **trainer: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": runtime_name}}
    if trainer:
        spec["trainer"] = trainer
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "team"},
        "spec": spec,
    }


def runtime(
    name: str = "my-runtime",
    kind: str = "TrainingRuntime",
    ml_policy: dict[str, Any] | None = None,
    jobs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "python:3.11"}]}}},
        },
    }
    metadata: dict[str, Any] = {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}}
    if kind == "TrainingRuntime":
        metadata["namespace"] = "team"
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "mlPolicy": ml_policy if ml_policy is not None else {"numNodes": 1, "torch": {}},
            "template": {"spec": {"replicatedJobs": jobs if jobs is not None else [node]}},
        },
    }


def initializer_job(
    step: str, *, label: bool = True, container: str | None = None, mount: bool = True
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": container or step, "image": f"ghcr.io/kubeflow/trainer/{step}"}
    if mount:
        c["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
    template: dict[str, Any] = {"spec": {"template": {"spec": {"containers": [c]}}}}
    if label:
        template["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}}
    return {"name": step, "template": template}
