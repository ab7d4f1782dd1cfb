"""Objects of every shape the conformance tests create: plain numbers where quantities belong
(``cpu: 1``, ``0.5``, ``nvidia.com/gpu: 1``), init containers, every volume type the node serves."""

from __future__ import annotations

import sys
from typing import Any

from airflow_provider_training.specs.kinds import ALL_KINDS

PY = sys.executable
# One replica type per kind that the operator accepts on its own.
FIRST_REPLICA = {
    "PyTorchJob": "Master",
    "TFJob": "Worker",
    "MPIJob": "Launcher",
    "XGBoostJob": "Master",
    "PaddleJob": "Master",
    "MXJob": "Scheduler",
    "JAXJob": "Worker",
}


def container(name: str = "main", code: str = "pass", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "python:3.11", "command": [PY, "-c", code], **extra}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("containers", [container()])
    spec.setdefault("restartPolicy", "Never")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def pods_of_every_shape(tmp_dir: str) -> list[dict[str, Any]]:
    numbers = {"requests": {"cpu": 0.5, "memory": "1Gi"}, "limits": {"cpu": 1, "memory": 2147483648}}
    return [
        pod("plain"),
        pod("numbers", containers=[container(resources=numbers, ports=[{"containerPort": 8080, "name": "http"}])]),
        pod("gpu", containers=[container(resources={"limits": {"nvidia.com/gpu": 1, "cpu": "2"}})]),
        pod(
            "init",
            initContainers=[container("setup", resources={"limits": {"cpu": 1, "memory": "64Mi"}})],
            containers=[container(resources={"requests": {"ephemeral-storage": "1G"}})],
        ),
        pod(
            "volumes",
            containers=[
                container(
                    volumeMounts=[
                        {"name": "claim", "mountPath": "/data"},
                        {"name": "scratch", "mountPath": "/scratch"},
                        {"name": "host", "mountPath": "/host"},
                        {"name": "config", "mountPath": "/etc/config"},
                        {"name": "secret", "mountPath": "/etc/secret"},
                    ],
                    env=[
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": 1}}},
                    ],
                    livenessProbe={"exec": {"command": ["true"]}},
                )
            ],
            volumes=[
                {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "emptyDir": {"sizeLimit": 1073741824}},
                {"name": "host", "hostPath": {"path": tmp_dir, "type": "Directory"}},
                {"name": "config", "configMap": {"name": "settings"}},
                {"name": "secret", "secret": {"secretName": "credentials"}},
            ],
        ),
    ]


def training_jobs() -> list[dict[str, Any]]:
    jobs = []
    for info in ALL_KINDS:
        replica_type = FIRST_REPLICA[info.kind]
        resources = {"limits": {"cpu": 1, "memory": "256Mi"}, "requests": {"cpu": "250m"}}  # a CRD allows int or string
        spec = {"containers": [container(info.default_container, resources=resources)]}
        extra = {"jobMode": "MXTrain"} if info.kind == "MXJob" else {}
        jobs.append(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": info.kind,
                "metadata": {"name": f"{info.singular}-numbers"},
                "spec": {
                    info.replica_specs_field: {
                        replica_type: {"replicas": 1, "restartPolicy": "Never", "template": {"spec": spec}}
                    },
                    **extra,
                },
            }
        )
    return jobs


def batch_job(name: str) -> dict[str, Any]:
    spec = {"restartPolicy": "Never", "containers": [container(resources={"limits": {"cpu": 1}})]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": {"spec": spec}}}
