"""Every object the tests build: training-job documents (raw, driven, minimal, typed), replicas, pods,
conditions and Trainer v2 documents. One place, so a new kind or a changed default is one edit.

Which builder to use:

- ``job_document(kind, name, specs)`` + ``replica(code)``: a job the embedded controllers run for
  real (``python -c code`` replicas).
- ``simple_job(kind, name, replicas, script=None)``: the client and operator tests' job. Without
  ``script`` it is *driven*: ``runPolicy.managedBy`` names another controller, so the embedded job
  controller leaves it alone and the test writes its status (``tests/fixtures/job_driver.py``).
- ``minimal(kind)`` + ``mutate(doc, path, value)``: the smallest valid job of each kind, to break
  one rule at a time (webhook and loader tests).
- ``typed_job(kind, name, replicas)``: a defaulted ``TrainingJob`` for the pure ``frameworks`` tests.
- ``pytorchjob``, ``pod``, ``condition``: objects the API-server tests write themselves.
- ``trainjob``, ``runtime``, ``initializer_job``: minimal valid Trainer v2 documents (a TrainJob, a
  TrainingRuntime or ClusterTrainingRuntime, an initializer's replicatedJob).
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from airflow_provider_training.specs import load_job, with_defaults
from airflow_provider_training.specs.jobs import TrainingJob
from airflow_provider_training.specs.kinds import KINDS, kind_info

PY = sys.executable
IMAGE = "python:3.11"
JOB_LABEL = "training.kubeflow.org/job-name"
DRIVEN = {"managedBy": "kueue.x-k8s.io/multikueue"}  # a controller that is not the embedded one

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


# -- the pieces --------------------------------------------------------------------------------------


def container(name: str, command: list[str] | None = None, image: str = IMAGE, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": image}
    if command is not None:
        out["command"] = command
    out.update(extra)
    return out


def replica_spec(
    containers: list[dict[str, Any]], replicas: int | None = None, restart: str | None = None, **pod: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"template": {"spec": {"containers": containers, **pod}}}
    if replicas is not None:
        out["replicas"] = replicas
    if restart is not None:
        out["restartPolicy"] = restart
    return out


def job_document(kind: str, name: str, specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A job of ``kind`` with the replica specs ``specs`` (``{"Master": replica(...)}``)."""
    info = kind_info(kind)
    body: dict[str, Any] = {info.replica_specs_field: specs, **spec}
    if kind == "MXJob":
        body.setdefault("jobMode", "MXTrain")
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name}, "spec": body}


# -- real replicas -----------------------------------------------------------------------------------


def replica(
    code: str,
    replicas: int = 1,
    restart: str = "OnFailure",
    container_name: str = "pytorch",
    container: dict[str, Any] | None = None,
    port: tuple[str, int] | None = None,
    **pod: Any,
) -> dict[str, Any]:
    """A replica spec whose container runs ``python -c code``."""
    c: dict[str, Any] = {"name": container_name, "image": IMAGE, "command": [PY, "-c", code]}
    if port:
        c["ports"] = [{"name": port[0], "containerPort": port[1]}]
    c.update(container or {})
    return replica_spec([c], replicas, restart, **pod)


def simple_job(
    kind: str = "PyTorchJob",
    name: str = "train",
    replicas: dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
    script: str | None = None,
) -> dict[str, Any]:
    """A job with one container per replica type; driven (see the module) unless ``script`` is given."""
    info = KINDS[kind]
    command = ["python", "-c", script or "print('training')"]
    specs = {
        rtype: replica_spec([container(info.default_container, command)], count, "Never")
        for rtype, count in (replicas or {info.replica_types[0]: 1}).items()
    }
    doc = job_document(kind, name, specs, **({} if script is not None else {"runPolicy": dict(DRIVEN)}))
    if labels:
        doc["metadata"]["labels"] = labels
    return doc


# -- documents that break one rule at a time -----------------------------------------------------------


def minimal(kind: str, name: str = "job1") -> dict[str, Any]:
    """The smallest valid job of ``kind`` (``TOPOLOGY``)."""
    info = KINDS[kind]

    def main(rtype: str) -> dict[str, Any]:
        name_ = info.default_container if kind != "MPIJob" else f"mpi-{rtype.lower()}"
        return container(name_, ["python", "-c", "pass"])

    specs = {rtype: replica_spec([main(rtype)], count, "Never") for rtype, count in TOPOLOGY[kind].items()}
    return job_document(kind, name, specs)


DELETE = object()


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


# -- typed jobs for the pure frameworks tests --------------------------------------------------------


def typed_job(kind: str, name: str, replicas: dict[str, int], namespace: str = "default", **spec: Any) -> TrainingJob:
    """The defaulted ``TrainingJob`` (uid ``uid-1``) with ``replicas`` of one ``img`` container each."""
    name_ = "launcher" if kind == "MPIJob" else KINDS[kind].default_container
    doc = job_document(kind, name, {rt: replica_spec([container(name_, image="img")], n) for rt, n in replicas.items()})
    doc["spec"].update(spec)
    doc["metadata"].update(namespace=namespace, uid="uid-1")
    return with_defaults(load_job(doc))


# -- objects the API-server tests write themselves ----------------------------------------------------


def pytorchjob(name: str, workers: int = 0, **spec: Any) -> dict[str, Any]:
    """A PyTorchJob the job controller leaves alone (``runPolicy.managedBy``, §5.5): the API tests
    write its pods and status themselves."""
    main = container("pytorch", ["python", "-c", "pass"])
    specs: dict[str, Any] = {"Master": replica_spec([main], 1, "OnFailure")}
    if workers:
        specs["Worker"] = replica_spec([dict(main)], workers, "OnFailure")
    spec.setdefault("runPolicy", dict(DRIVEN))
    return job_document("PyTorchJob", name, specs, **spec)


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    containers: tuple[str, ...] = ("pytorch",),
    owner: dict[str, Any] | None = None,
    claim: str | None = None,
) -> dict[str, Any]:
    """A pod bound to a node no agent serves: the API tests write its status themselves."""
    spec: dict[str, Any] = {"nodeName": "api-test-node", "containers": [container(c) for c in containers]}
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


# -- Trainer v2 documents, valid and minimal (one rule broken at a time with ``mutate``) ----------------


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
