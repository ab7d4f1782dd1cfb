"""Pod and headless-Service objects for one replica index, in Kubernetes JSON shape
(``createNewPod`` / ``CreateNewService``, §3.2-§3.3; MPI's ``newWorker`` / ``newLauncher``, §4.3).

The pod spec is the replica template with the kind's env appended to each container, the kind's
init containers, and the restartPolicy mapping (``ExitCode`` becomes ``Never``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training.frameworks import labels, mpi
from airflow_provider_training.frameworks.addressing import Addressing, ClusterAddressing
from airflow_provider_training.frameworks.base import FrameworkPlugin
from airflow_provider_training.frameworks.events import WARNING, Event
from airflow_provider_training.specs.jobs import TrainingJob

TEMPLATE_RESTART_POLICY_REASON = "SetPodTemplateRestartPolicy"
MPI_TEMPLATE_RESTART_POLICY_REASON = "SettedPodTemplateRestartPolicy"
TEMPLATE_RESTART_POLICY_MESSAGE = "Restart policy in pod template will be overwritten by restart policy in replica spec"


@dataclass
class BuiltPod:
    pod: dict[str, Any]
    events: list[Event] = field(default_factory=list)


def pod_restart_policy(replica_policy: str | None) -> str:
    """``SetRestartPolicy``: ExitCode is carried out by the controller, so the pod gets Never."""
    return "Never" if replica_policy == "ExitCode" else (replica_policy or "")


def owner_reference(job: TrainingJob) -> dict[str, Any]:
    return {
        "apiVersion": job.KIND.api_version,
        "kind": job.KIND.kind,
        "name": job.name,
        "uid": job.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _template(job: TrainingJob, rtype: str) -> dict[str, Any]:
    spec = job.replica_specs[rtype]
    return copy.deepcopy(spec.template.to_dict()) if spec.template is not None else {}


def build_pod(
    plugin: FrameworkPlugin,
    job: TrainingJob,
    rtype: str,
    index: int,
    addressing: Addressing | None = None,
) -> BuiltPod:
    """The pod the operator creates for ``rtype`` index ``index`` of the (defaulted) ``job``."""
    addressing = addressing or ClusterAddressing()
    if plugin.info.kind == "MPIJob":
        return _mpi_pod(plugin, job, rtype, index)
    template = _template(job, rtype)
    meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    pod_labels = dict(meta.get("labels") or {})
    pod_labels.update(labels.replica_labels(plugin.info.operator_name, job.name, rtype, index))
    if plugin.is_master_role(job, rtype, index):
        pod_labels[labels.JOB_ROLE] = "master"
    for container in pod_spec.get("containers") or []:
        extra = plugin.injected_env(job, rtype, index, container["name"], addressing)
        if extra:
            container["env"] = [*(container.get("env") or []), *(e.to_dict() for e in extra)]
    init = plugin.extra_init_containers(job, rtype, index, addressing)
    if init:
        pod_spec["initContainers"] = [*(pod_spec.get("initContainers") or []), *init]
    events = []
    if pod_spec.get("restartPolicy"):
        events.append(Event(WARNING, TEMPLATE_RESTART_POLICY_REASON, TEMPLATE_RESTART_POLICY_MESSAGE))
    pod_spec["restartPolicy"] = pod_restart_policy(job.replica_specs[rtype].restart_policy)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": plugin.pod_name(job, rtype, index),
            "namespace": job.namespace,
            "labels": pod_labels,
            "ownerReferences": [owner_reference(job)],
        },
        "spec": pod_spec,
    }
    if meta.get("annotations"):
        pod["metadata"]["annotations"] = dict(meta["annotations"])
    return BuiltPod(pod, events)


def build_service(plugin: FrameworkPlugin, job: TrainingJob, rtype: str, index: int) -> dict[str, Any] | None:
    """The headless Service named like the pod; None for MPI, which creates none.

    Ports are those of the container named like the kind's default container; with no such
    container the operator fails with "failed to find the port", and so do we.
    """
    if not plugin.has_services:
        return None
    info = plugin.info
    template = job.replica_specs[rtype].template
    pod = template.spec if template is not None else None
    container = pod.container(info.default_container) if pod is not None else None
    if container is None:
        raise ValueError(
            f"{info.kind} {job.name}: failed to find the port: spec.{info.replica_specs_field}[{rtype}] "
            f"has no container named {info.default_container!r}"
        )
    selector = labels.replica_labels(info.operator_name, job.name, rtype, index)
    ports = [{"name": p.name, "port": p.container_port} for p in container.ports or [] if p.name]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": plugin.pod_name(job, rtype, index),
            "namespace": job.namespace,
            "labels": dict(selector),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {"clusterIP": "None", "selector": selector, "ports": ports},
    }


def _mpi_pod(plugin: FrameworkPlugin, job: TrainingJob, rtype: str, index: int) -> BuiltPod:
    template = _template(job, rtype)
    meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    containers = pod_spec.get("containers") or []
    if not containers:
        raise ValueError(f"MPIJob {job.name}: spec.mpiReplicaSpecs[{rtype}] has no containers")
    info = plugin.info
    pod_labels = dict(meta.get("labels") or {})
    events: list[Event] = []
    main = containers[0]
    if rtype == mpi.LAUNCHER:
        pod_labels.update(labels.replica_labels(info.operator_name, job.name, rtype, None))
        pod_labels[labels.JOB_ROLE] = "master"
        if not pod_spec.get("serviceAccountName"):
            pod_spec["serviceAccountName"] = mpi.launcher_name(job)
        pod_spec["initContainers"] = [*(pod_spec.get("initContainers") or []), _kubectl_delivery(job)]
        extra = plugin.injected_env(job, rtype, index, main["name"])
        main["env"] = [*(main.get("env") or []), *(e.to_dict() for e in extra)]
        main["volumeMounts"] = [
            *(main.get("volumeMounts") or []),
            {"name": mpi.KUBECTL_VOLUME, "mountPath": mpi.KUBECTL_MOUNT_PATH},
            {"name": mpi.CONFIG_VOLUME, "mountPath": mpi.CONFIG_MOUNT_PATH},
        ]
        if pod_spec.get("restartPolicy"):
            events.append(Event(WARNING, MPI_TEMPLATE_RESTART_POLICY_REASON, TEMPLATE_RESTART_POLICY_MESSAGE))
        items = [
            {"key": mpi.KUBEXEC, "path": mpi.KUBEXEC, "mode": 0o555},
            {"key": mpi.HOSTFILE, "path": mpi.HOSTFILE, "mode": 0o444},
            {"key": mpi.DISCOVER_HOSTS, "path": mpi.DISCOVER_HOSTS, "mode": 0o555},
        ]
        pod_spec["volumes"] = [
            *(pod_spec.get("volumes") or []),
            {"name": mpi.KUBECTL_VOLUME, "emptyDir": {}},
            {"name": mpi.CONFIG_VOLUME, "configMap": {"name": mpi.config_map_name(job), "items": items}},
        ]
    else:
        pod_labels.update(labels.replica_labels(info.operator_name, job.name, rtype, index))
        if not main.get("command"):
            # Workers only host mpirun's remote processes; this also replaces any args.
            main["command"] = ["sleep"]
            main["args"] = ["365d"]
        main["volumeMounts"] = [
            *(main.get("volumeMounts") or []),
            {"name": mpi.CONFIG_VOLUME, "mountPath": mpi.CONFIG_MOUNT_PATH},
        ]
        item = {"key": mpi.KUBEXEC, "path": mpi.KUBEXEC, "mode": 0o555}
        pod_spec["volumes"] = [
            *(pod_spec.get("volumes") or []),
            {"name": mpi.CONFIG_VOLUME, "configMap": {"name": mpi.config_map_name(job), "items": [item]}},
        ]
    pod_spec["restartPolicy"] = pod_restart_policy(job.replica_specs[rtype].restart_policy)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": plugin.pod_name(job, rtype, index),
            "namespace": job.namespace,
            "labels": pod_labels,
            "ownerReferences": [owner_reference(job)],
        },
        "spec": pod_spec,
    }
    if meta.get("annotations"):
        pod["metadata"]["annotations"] = dict(meta["annotations"])
    return BuiltPod(pod, events)


def _kubectl_delivery(job: TrainingJob) -> dict[str, Any]:
    resources = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
    return {
        "name": mpi.KUBECTL_DELIVERY_NAME,
        "image": mpi.KUBECTL_DELIVERY_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "TARGET_DIR", "value": mpi.KUBECTL_MOUNT_PATH}, {"name": "NAMESPACE", "value": job.namespace}],
        "volumeMounts": [
            {"name": mpi.KUBECTL_VOLUME, "mountPath": mpi.KUBECTL_MOUNT_PATH},
            {"name": mpi.CONFIG_VOLUME, "mountPath": mpi.CONFIG_MOUNT_PATH},
        ],
        "resources": {"limits": dict(resources), "requests": dict(resources)},
    }


def mpi_config_map(
    plugin: FrameworkPlugin, job: TrainingJob, running_workers: list[int], addressing: Addressing | None = None
) -> dict[str, Any]:
    """The ``{job}-config`` ConfigMap (hostfile, kubexec.sh, discover_hosts.sh)."""
    assert isinstance(plugin, mpi.MPIPlugin)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": mpi.config_map_name(job),
            "namespace": job.namespace,
            "labels": {"app": job.name},
            "ownerReferences": [owner_reference(job)],
        },
        "data": plugin.config_data(job, running_workers, addressing or ClusterAddressing()),
    }
