"""Minimal valid documents of each kind, for table-driven tests to break one rule at a time."""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_training.specs.kinds import KINDS

# Replica types that make a minimal valid job of each kind.
TOPOLOGY = {
    "PyTorchJob": {"Master": 1, "Worker": 2},
    "TFJob": {"Chief": 1, "Worker": 2},
    "MPIJob": {"Launcher": 1, "Worker": 2},
    "XGBoostJob": {"Master": 1, "Worker": 2},
    "PaddleJob": {"Worker": 2},
    "MXJob": {"Scheduler": 1, "Server": 1, "Worker": 2},
    "JAXJob": {"Worker": 2},
}


def container(kind: str, rtype: str) -> dict[str, Any]:
    info = KINDS[kind]
    name = info.default_container if kind != "MPIJob" else f"mpi-{rtype.lower()}"
    return {"name": name, "image": "python:3.11", "command": ["python", "-c", "pass"]}


def minimal(kind: str, name: str = "job1") -> dict[str, Any]:
    info = KINDS[kind]
    replicas = {
        rtype: {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container(kind, rtype)]}},
        }
        for rtype, count in TOPOLOGY[kind].items()
    }
    spec: dict[str, Any] = {info.replica_specs_field: replicas}
    if kind == "MXJob":
        spec["jobMode"] = "MXTrain"
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def mutate(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Copy ``doc`` and set (or, with ``value=DELETE``, remove) the dotted ``path``; ``[i]`` indexes lists."""
    out = copy.deepcopy(doc)
    node: Any = out
    parts = path.replace("]", "").replace("[", ".").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if value is DELETE:
        del node[int(last) if isinstance(node, list) else last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


DELETE = object()
