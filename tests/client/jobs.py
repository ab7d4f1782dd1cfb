"""Job documents the client and operator tests submit.

By default a job is *driven*: ``runPolicy.managedBy`` names another controller, so the embedded job
controller leaves it alone and the test writes its status (``job_driver``), which lets a test pick
exit codes, stall a log stream or keep a job running forever. ``script=`` makes a *real* job whose
replicas run ``python -c <script>`` under the embedded controllers.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_training.specs.kinds import KINDS


def job(
    kind: str = "PyTorchJob",
    name: str = "train",
    replicas: dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
    script: str | None = None,
) -> dict[str, Any]:
    info = KINDS[kind]
    replicas = replicas or {info.replica_types[0]: 1}
    container = {
        "name": info.default_container,
        "image": "python:3.11",
        "command": ["python", "-c", script or "print('training')"],
    }
    specs = {
        rtype: {"replicas": count, "restartPolicy": "Never", "template": {"spec": {"containers": [dict(container)]}}}
        for rtype, count in replicas.items()
    }
    spec: dict[str, Any] = {info.replica_specs_field: specs}
    if kind == "MXJob":
        spec["jobMode"] = "MXTrain"
    if script is None:
        spec["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": meta, "spec": spec}
