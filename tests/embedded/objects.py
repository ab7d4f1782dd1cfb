"""Small objects the embedded tests create."""

from __future__ import annotations

from typing import Any

JOB_LABEL = "training.kubeflow.org/job-name"


def pytorchjob(name: str, workers: int = 0, **spec: Any) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["python", "-c", "pass"]}
    replicas: dict[str, Any] = {
        "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}
    }
    if workers:
        replicas["Worker"] = {
            "replicas": workers,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [dict(container)]}},
        }
    # These API tests write pods and status themselves: the job controller must leave such jobs
    # alone, which it does for jobs another controller manages (runPolicy.managedBy, §5.5).
    spec.setdefault("runPolicy", {"managedBy": "kueue.x-k8s.io/multikueue"})
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": replicas, **spec},
    }


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    containers: tuple[str, ...] = ("pytorch",),
    owner: dict[str, Any] | None = None,
    claim: str | None = None,
) -> dict[str, Any]:
    # Bound to a node no agent serves: these API tests write the pod's status themselves.
    spec: dict[str, Any] = {
        "nodeName": "api-test-node",
        "containers": [{"name": c, "image": "python:3.11"} for c in containers],
    }
    if claim:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastUpdateTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
