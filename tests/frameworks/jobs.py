"""Small job documents for the frameworks tests."""

from __future__ import annotations

from typing import Any

from airflow_provider_training.specs import KINDS, load_job, with_defaults
from airflow_provider_training.specs.jobs import TrainingJob


def replica(container: str, replicas: int | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": container, "image": "img"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    spec.update(extra)
    return spec


def make_job(kind: str, name: str, replicas: dict[str, int], namespace: str = "default", **spec: Any) -> TrainingJob:
    info = KINDS[kind]
    container = "launcher" if kind == "MPIJob" else info.default_container
    doc: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
        "spec": {info.replica_specs_field: {rt: replica(container, n) for rt, n in replicas.items()}, **spec},
    }
    if kind == "MXJob":
        doc["spec"].setdefault("jobMode", "MXTrain")
    return with_defaults(load_job(doc))
