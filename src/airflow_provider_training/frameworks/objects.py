"""Pod and headless-Service objects for one replica index, in Kubernetes JSON shape
(``createNewPod`` / ``CreateNewService``, §3.2-§3.3).

The pod is the replica template dressed by the kind's plugin (``FrameworkPlugin.dress_pod``: labels,
env, init containers; MPI's launcher and workers are dressed in ``mpi.py``), with the restartPolicy
mapping (``ExitCode`` becomes ``Never``), the operator's name and the controlling owner.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training.frameworks import labels
from airflow_provider_training.frameworks.addressing import Addressing, ClusterAddressing
from airflow_provider_training.frameworks.base import (
    TEMPLATE_RESTART_POLICY_MESSAGE,
    TEMPLATE_RESTART_POLICY_REASON,
    FrameworkPlugin,
)
from airflow_provider_training.frameworks.bodies import PodBody, ServiceBody
from airflow_provider_training.frameworks.events import Event
from airflow_provider_training.specs.jobs import TrainingJob
from airflow_provider_training.specs.unstructured import controller_ref

__all__ = [
    "TEMPLATE_RESTART_POLICY_MESSAGE",
    "TEMPLATE_RESTART_POLICY_REASON",
    "BuiltPod",
    "build_pod",
    "build_service",
    "pod_restart_policy",
]


@dataclass
class BuiltPod:
    pod: PodBody
    events: list[Event] = field(default_factory=list)


def pod_restart_policy(replica_policy: str | None) -> str:
    """``SetRestartPolicy``: ExitCode is carried out by the controller, so the pod gets Never."""
    return "Never" if replica_policy == "ExitCode" else (replica_policy or "")


def build_pod(
    plugin: FrameworkPlugin,
    job: TrainingJob,
    rtype: str,
    index: int,
    addressing: Addressing | None = None,
) -> BuiltPod:
    """The pod the operator creates for ``rtype`` index ``index`` of the (defaulted) ``job``."""
    spec = job.replica_specs[rtype]
    template: dict[str, Any] = copy.deepcopy(spec.template.to_dict()) if spec.template is not None else {}
    meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    pod_labels = dict(meta.get("labels") or {})
    events = plugin.dress_pod(job, rtype, index, pod_labels, pod_spec, addressing or ClusterAddressing())
    pod_spec["restartPolicy"] = pod_restart_policy(spec.restart_policy)
    pod: PodBody = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": plugin.pod_name(job, rtype, index),
            "namespace": job.namespace,
            "labels": pod_labels,
            "ownerReferences": [controller_ref(job, job.KIND)],
        },
        "spec": pod_spec,
    }
    if meta.get("annotations"):
        pod["metadata"]["annotations"] = dict(meta["annotations"])
    return BuiltPod(pod, events)


def build_service(plugin: FrameworkPlugin, job: TrainingJob, rtype: str, index: int) -> ServiceBody | None:
    """The headless Service named like the pod; None for kinds without Services (MPI).

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
            "ownerReferences": [controller_ref(job, job.KIND)],
        },
        "spec": {"clusterIP": "None", "selector": selector, "ports": ports},
    }
