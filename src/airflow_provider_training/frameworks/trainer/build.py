"""TrainJob + runtime → the objects upstream's controller applies (``trainer-v2.md`` §3): the JobSet,
and for MPI the SSH Secret and the hostfile ConfigMap. Pure: the caller creates them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training.frameworks.trainer import plugins, trainerstatus, upsert
from airflow_provider_training.frameworks.trainer.info import BuildError, RuntimeInfo, new_runtime_info
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.crds import TRAINJOB
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob
from airflow_provider_training.specs.unstructured import controller_ref

__all__ = [
    "BuildError",
    "Built",
    "build",
    "endpoints",
    "new_ssh_key",
    "ssh_auth_secret",
]


@dataclass
class Built:
    jobset: dict[str, Any]
    # The status server's CA ConfigMap, the MPI SSH Secret (when ``ssh_key`` was given) and hostfile
    # ConfigMap: what the pods mount, created before the JobSet.
    objects: list[dict[str, Any]] = field(default_factory=list)
    info: RuntimeInfo | None = None
    # MPI slots per node, None for other frameworks.
    slots: int | None = None


def endpoints(info: RuntimeInfo, podset_name: str) -> Iterator[str]:
    """``IdentifyPodNetwork``: ``<tj>-<rJob>-<jobIndex>-<podIndex>.<subdomain>`` for every pod."""
    podset = info.podset(podset_name)
    if podset is None:
        return
    job = info.replicated_job(podset)
    subdomain = (info.spec.get("network") or {}).get("subdomain") or info.name
    for replica in range(int(job.get("replicas", 1))):
        for pod in range(podset.count):
            yield f"{info.name}-{podset.name}-{replica}-{pod}.{subdomain}"


def _initializers(info: RuntimeInfo) -> None:
    initializer = info.trainjob.spec.initializer
    for podset in info.podsets:
        if podset.ancestor not in (c.DATASET_INITIALIZER, c.MODEL_INITIALIZER):
            continue
        info.replicated_job(podset)["replicas"] = 1
        source = None
        if initializer is not None:
            source = initializer.dataset if podset.ancestor == c.DATASET_INITIALIZER else initializer.model
        if source is None:
            continue
        container = info.container(podset, podset.ancestor, init_too=False)
        if container is None:
            continue
        if source.storage_uri is not None:
            upsert.env(container, upsert.value(c.STORAGE_URI_ENV, source.storage_uri))
        upsert.env(container, *(env.to_dict() for env in source.env or []))
        if source.secret_ref is not None:
            container.setdefault("envFrom", []).append({"secretRef": {"name": source.secret_ref.get("name", "")}})


def _trainer(info: RuntimeInfo) -> None:
    trainer = info.trainjob.spec.trainer
    mpi = info.ml_policy.mpi
    run_launcher_as_node = bool(mpi and mpi.run_launcher_as_node)
    for podset in info.podsets:
        trainer_job = podset.ancestor == c.ANCESTOR_TRAINER
        if trainer_job:
            info.replicated_job(podset)["replicas"] = 1
        if not (trainer_job or (run_launcher_as_node and podset.name == c.NODE)) or trainer is None:
            continue
        container = info.container(podset, c.NODE, init_too=False)
        if container is None:
            continue
        if trainer_job:
            if trainer.image is not None:
                container["image"] = trainer.image
            if trainer.command is not None:
                container["command"] = list(trainer.command)
            if trainer.args is not None:
                container["args"] = list(trainer.args)
        upsert.env(container, *(env.to_dict() for env in trainer.env or []))


def _pod_group(info: RuntimeInfo) -> None:
    policy = info.runtime.spec.pod_group_policy or {}
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if policy.get("coscheduling") is not None:
        labels["scheduling.x-k8s.io/pod-group"] = info.name
    if policy.get("volcano") is not None:
        annotations["scheduling.k8s.io/group-name"] = info.name
    if not labels and not annotations:
        return
    for podset in info.podsets:
        pod = info.replicated_job(podset).setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
        metadata = pod.setdefault("metadata", {})
        if labels:
            metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
        if annotations:
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}


def build(
    trainjob: TrainJob,
    runtime: TrainingRuntime,
    *,
    ssh_key: str | None = None,
    status_server: trainerstatus.StatusServer | None = None,
) -> Built:
    """The objects for ``trainjob`` on ``runtime`` (both with CRD defaults applied).

    ``ssh_key`` is the PEM private key for an MPI TrainJob's SSH Secret (see :func:`ssh_auth_secret`);
    without it no Secret is built (upstream creates it once and never changes it).
    ``status_server``: the ``TrainJobStatus`` feature gate on (upstream's default is off), with the
    server the trainer reports to: its env, token volume and the ``<tj>-tls-config`` ConfigMap.
    Raises :class:`BuildError` where the controller's build fails.
    """
    info = new_runtime_info(trainjob, runtime)
    plugins.torch(info)
    slots = plugins.mpi(info)
    plugins.plain(info)
    plugins.jax(info)
    plugins.xgboost(info)
    if status_server is not None:
        trainerstatus.enforce(info, status_server)
    _pod_group(info)
    for podset in info.podsets:  # SyncParallelCount
        job_spec = info.replicated_job(podset).setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = podset.count
        job_spec["completions"] = podset.count
    _initializers(info)
    _trainer(info)
    spec = info.spec
    spec["suspend"] = bool(trainjob.spec.suspend)
    metadata: dict[str, Any] = {"name": trainjob.name, "namespace": trainjob.namespace}
    if info.labels:
        metadata["labels"] = dict(info.labels)
    if info.annotations:
        metadata["annotations"] = dict(info.annotations)
    metadata["ownerReferences"] = [controller_ref(trainjob, TRAINJOB)]
    jobset = {"apiVersion": c.JOBSET_API_VERSION, "kind": c.JOBSET, "metadata": metadata, "spec": spec}
    built = Built(jobset, info=info, slots=slots)
    if status_server is not None:
        built.objects.append(
            trainerstatus.tls_config(
                trainjob.namespace, trainjob.name, controller_ref(trainjob, TRAINJOB), status_server.ca_pem
            )
        )
    if slots is not None:
        if ssh_key is not None:
            built.objects.append(ssh_auth_secret(trainjob, ssh_key))
        built.objects.append(_hostfile(info, trainjob, slots))
    return built


def _hostfile(info: RuntimeInfo, trainjob: TrainJob, slots: int) -> dict[str, Any]:
    mpi = info.ml_policy.mpi
    run_launcher_as_node = bool(mpi and mpi.run_launcher_as_node)
    lines = []
    for podset in info.podsets:
        if podset.name == c.NODE or (run_launcher_as_node and podset.name == c.LAUNCHER):
            lines += [f"{endpoint} slots={slots}\n" for endpoint in endpoints(info, podset.name)]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{trainjob.name}{c.MPI_HOSTFILE_CONFIGMAP_SUFFIX}",
            "namespace": trainjob.namespace,
            "ownerReferences": [controller_ref(trainjob, TRAINJOB)],
        },
        "data": {c.MPI_HOSTFILE_NAME: "".join(lines)},
    }


def new_ssh_key() -> str:
    """A fresh ECDSA P-521 private key in PEM (``EC PRIVATE KEY``), as upstream generates one."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return pem.decode()


def ssh_auth_secret(trainjob: TrainJob, private_key_pem: str) -> dict[str, Any]:
    """``<tj>-mpi-ssh-auth``: type ``kubernetes.io/ssh-auth``, immutable, the key and its authorized_keys line."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{trainjob.name}{c.MPI_SSH_AUTH_SECRET_SUFFIX}",
            "namespace": trainjob.namespace,
            "ownerReferences": [controller_ref(trainjob, TRAINJOB)],
        },
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
        "data": {
            "ssh-privatekey": base64.b64encode(private_key_pem.encode()).decode(),
            "ssh-publickey": base64.b64encode(public + b"\n").decode(),
        },
    }
