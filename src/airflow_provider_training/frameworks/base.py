"""The interface every kind's plugin implements, and the helpers they share.

A plugin answers the kind-specific questions of the reconcile loop (``training-operator.md`` §4):
which pod is the master, what environment the operator appends to a container, how a replica's pod
is dressed (``dress_pod``), which pods, Services and ConfigMaps the job needs now (``plan_pods``,
the operator's ``ReconcilePods`` / ``ReconcileServices``) and how replica counts turn into
conditions (``UpdateJobStatus``). The generic answers are the defaults here; a kind that takes its
own path upstream (MPI) overrides them in its own module. ``job`` is always the defaulted job
(``specs.with_defaults``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from airflow_provider_training.frameworks import conditions as cond
from airflow_provider_training.frameworks import labels
from airflow_provider_training.frameworks.addressing import Addressing, ClusterAddressing, ReplicaRef
from airflow_provider_training.frameworks.bodies import (
    ConfigMapBody,
    RoleBindingBody,
    RoleBody,
    ServiceAccountBody,
)
from airflow_provider_training.frameworks.events import WARNING, Event
from airflow_provider_training.frameworks.pods import PodState, of_type
from airflow_provider_training.frameworks.timeutil import format_time
from airflow_provider_training.specs.common import JobStatus, ReplicaSpec, ReplicaStatus
from airflow_provider_training.specs.jobs import TrainingJob
from airflow_provider_training.specs.kinds import KindInfo
from airflow_provider_training.specs.pod import EnvVar

CLUSTER = ClusterAddressing()
TEMPLATE_RESTART_POLICY_REASON = "SetPodTemplateRestartPolicy"
TEMPLATE_RESTART_POLICY_MESSAGE = "Restart policy in pod template will be overwritten by restart policy in replica spec"


class InjectionError(ValueError):
    """The operator could not build a replica's environment (pod creation fails upstream too)."""


@dataclass
class StatusUpdate:
    status: JobStatus
    events: list[Event] = field(default_factory=list)


# --- what ``plan_pods`` asks the controller to do, in order --------------------------------------


@dataclass(frozen=True)
class CreatePod:
    rtype: str
    index: int


@dataclass(frozen=True)
class DeletePod:
    """Delete the pod (and, for kinds with Services, the Service of the same name)."""

    name: str


@dataclass(frozen=True)
class CreateService:
    rtype: str
    index: int


@dataclass(frozen=True)
class DeleteService:
    name: str


@dataclass(frozen=True)
class ApplyConfigMap:
    """Create the ConfigMap, or bring an existing one's ``data`` to this."""

    config_map: ConfigMapBody


@dataclass(frozen=True)
class EnsureObject:
    """Create the object unless one of its name exists; with ``update``, bring those top-level fields
    of an existing one to these (MPI's launcher ServiceAccount, Role and RoleBinding)."""

    body: ServiceAccountBody | RoleBody | RoleBindingBody
    update: tuple[str, ...] = ()


PodAction = CreatePod | DeletePod | CreateService | DeleteService | ApplyConfigMap | EnsureObject


class FrameworkPlugin:
    info: ClassVar[KindInfo]
    # What a node running all replicas on one machine adds to the environment of every process of
    # this kind's pods, for what a cluster's images and network would provide (MPI's loopback pins).
    local_process_env: ClassVar[Mapping[str, str]] = {}
    template_restart_policy_reason: ClassVar[str] = TEMPLATE_RESTART_POLICY_REASON

    # --- identity -------------------------------------------------------------------------
    def pod_name(self, job: TrainingJob, rtype: str, index: int) -> str:
        """``GenGeneralName``: ``{job}-{rtype-lower}-{index}`` with ``/`` replaced by ``-``."""
        return f"{job.name}-{rtype.lower()}-{index}".replace("/", "-")

    def replica_ref(self, job: TrainingJob, rtype: str, index: int) -> ReplicaRef:
        return ReplicaRef(job.namespace, job.name, rtype, index, self.pod_name(job, rtype, index))

    def is_master_role(self, job: TrainingJob, rtype: str, index: int) -> bool:
        raise NotImplementedError

    def replica_types(self, job: TrainingJob) -> list[str]:
        """Replica types of the job in a fixed order: the kind's table order, then unknown keys.

        Upstream walks a Go map (random order); a fixed order keeps results reproducible.
        """
        specs = job.replica_specs
        known = [t for t in self.info.replica_types if t in specs]
        return known + sorted(t for t in specs if t not in known)

    @property
    def has_services(self) -> bool:
        return True

    @property
    def deleting_running_pod_fails(self) -> bool:
        """Whether a Running pod being deleted counts as failed in the replica counts (§3.5)."""
        return True

    # --- pods -------------------------------------------------------------------------------
    def dress_pod(
        self,
        job: TrainingJob,
        rtype: str,
        index: int,
        pod_labels: dict[str, str],
        pod_spec: dict[str, Any],
        addressing: Addressing = CLUSTER,
    ) -> list[Event]:
        """Turn a copy of the replica template into the kind's pod (``createNewPod``, §3.2): labels,
        the injected env, the kind's init containers; returns the events it warrants. The caller
        sets the name, owner and restartPolicy."""
        pod_labels.update(labels.replica_labels(self.info.operator_name, job.name, rtype, index))
        if self.is_master_role(job, rtype, index):
            pod_labels[labels.JOB_ROLE] = "master"
        for container in pod_spec.get("containers") or []:
            extra = self.injected_env(job, rtype, index, container["name"], addressing)
            if extra:
                container["env"] = [*(container.get("env") or []), *(e.to_dict() for e in extra)]
        init = self.extra_init_containers(job, rtype, index, addressing)
        if init:
            pod_spec["initContainers"] = [*(pod_spec.get("initContainers") or []), *init]
        return self.template_warnings(pod_spec)

    def template_warnings(self, pod_spec: dict[str, Any]) -> list[Event]:
        """The warning for a restartPolicy set in the template (the replica spec's wins), in the
        kind's spelling of its reason."""
        if pod_spec.get("restartPolicy"):
            return [Event(WARNING, self.template_restart_policy_reason, TEMPLATE_RESTART_POLICY_MESSAGE)]
        return []

    def plan_pods(
        self,
        job: TrainingJob,
        pods: list[PodState],
        services: Mapping[str, dict[str, Any]],
        addressing: Addressing = CLUSTER,
    ) -> list[PodAction]:
        """What the job needs now (``ReconcilePods`` + ``ReconcileServices``): surplus indices deleted,
        missing pods created — all pods first, so the node can start them while the Services are
        written — then missing Services created and surplus ones deleted. ``services``: the job's
        Services by name."""
        pods_: list[PodAction] = []
        services_: list[PodAction] = []
        for rtype in self.replica_types(job):
            wanted = job.replica_specs[rtype].replicas or 0
            mine = of_type(pods, rtype)
            existing = {s.index for s in mine}
            pods_ += [DeletePod(s.name) for s in mine if s.index is not None and s.index >= wanted]
            pods_ += [CreatePod(rtype, index) for index in range(wanted) if index not in existing]
            if not self.has_services:
                continue
            services_ += [
                CreateService(rtype, index)
                for index in range(wanted)
                if self.pod_name(job, rtype, index) not in services
            ]
            for name, service in services.items():
                service_labels = service["metadata"].get("labels") or {}
                idx = str(service_labels.get(labels.REPLICA_INDEX, ""))
                if service_labels.get(labels.REPLICA_TYPE) == rtype.lower() and idx.isdigit() and int(idx) >= wanted:
                    services_.append(DeleteService(name))
        return pods_ + services_

    # --- environment ------------------------------------------------------------------------
    def injected_env(
        self,
        job: TrainingJob,
        rtype: str,
        index: int,
        container_name: str,
        addressing: Addressing = CLUSTER,
    ) -> list[EnvVar]:
        raise NotImplementedError

    def extra_init_containers(
        self, job: TrainingJob, rtype: str, index: int, addressing: Addressing = CLUSTER
    ) -> list[dict[str, Any]]:
        """Init containers ``SetClusterSpec`` appends (only PyTorch has one)."""
        return []

    # --- status -----------------------------------------------------------------------------
    def update_status(self, job: TrainingJob, status: JobStatus, pods: list[PodState], now: datetime) -> StatusUpdate:
        """The kind's ``UpdateJobStatus``: ``status`` carries this pass's replica counts."""
        raise NotImplementedError


# --- helpers shared by the plugins ----------------------------------------------------------


def env(name: str, value: str) -> EnvVar:
    return EnvVar(name=name, value=value)


def replicas(job: TrainingJob, rtype: str) -> int:
    spec = job.replica_specs.get(rtype)
    return (spec.replicas or 0) if spec is not None else 0


def total_replicas(job: TrainingJob) -> int:
    return sum(spec.replicas or 0 for spec in job.replica_specs.values())


def template_port(job: TrainingJob, rtype: str, fallback: int | None = None) -> int:
    """The default-named port of the default container in ``rtype``'s template.

    ``fallback`` is what the kind uses when it is missing (TF 2222, Paddle 36543); without one the
    operator fails pod creation, and so do we, naming what to add.
    """
    info = job.KIND
    spec = job.replica_specs.get(rtype)
    pod = spec.template.spec if spec is not None and spec.template is not None else None
    for container in pod.containers if pod is not None else []:
        if container.name == info.default_container:
            port = container.port(info.default_port_name)
            if port is not None:
                return port
    if fallback is not None:
        return fallback
    raise InjectionError(
        f"{info.kind} {job.name}: failed to find the port: add a port named "
        f"{info.default_port_name!r} to the {info.default_container!r} container of "
        f"spec.{info.replica_specs_field}[{rtype}]"
    )


def address(plugin: FrameworkPlugin, job: TrainingJob, rtype: str, index: int, addressing: Addressing) -> str:
    return addressing.host(plugin.replica_ref(job, rtype, index))


def port_of(
    plugin: FrameworkPlugin,
    job: TrainingJob,
    rtype: str,
    index: int,
    addressing: Addressing,
    fallback: int | None = None,
) -> int:
    declared = template_port(job, rtype, fallback)
    return addressing.port(plugin.replica_ref(job, rtype, index), job.KIND.default_port_name, declared)


def counts(status: JobStatus, rtype: str) -> ReplicaStatus:
    return (status.replica_statuses or {}).get(rtype) or ReplicaStatus()


def ensure_start_time(status: JobStatus, now: datetime) -> None:
    if status.start_time is None:
        status.start_time = format_time(now)


def ensure_completion_time(status: JobStatus, now: datetime) -> None:
    if status.completion_time is None:
        status.completion_time = format_time(now)


@dataclass(frozen=True)
class Tally:
    """One replica type's numbers as ``UpdateJobStatus`` reads them."""

    spec: ReplicaSpec
    replicas: int
    active: int
    succeeded: int
    failed: int

    @property
    def expected(self) -> int:
        return self.replicas - self.succeeded


def tally(job: TrainingJob, status: JobStatus, rtype: str) -> Tally:
    spec = job.replica_specs[rtype]
    c = counts(status, rtype)
    return Tally(spec, spec.replicas or 0, c.active or 0, c.succeeded or 0, c.failed or 0)


class Recorder:
    """Collects condition changes and events while a status rule runs."""

    def __init__(self, kind: str, status: JobStatus, now: datetime) -> None:
        self.kind = kind
        self.status = status
        self.now = now
        self.events: list[Event] = []

    def condition(self, type_: str, verb: str, message: str, status: str = cond.TRUE) -> None:
        cond.set_condition(self.status, type_, status, cond.reason(self.kind, verb), message, self.now)

    def event(self, type_: str, verb: str, message: str) -> None:
        self.events.append(Event(type_, cond.reason(self.kind, verb), message))

    def running(self, message: str) -> None:
        self.condition(cond.RUNNING, cond.RUNNING, message)

    def succeeded(self, message: str) -> None:
        self.event("Normal", cond.SUCCEEDED, message)
        ensure_completion_time(self.status, self.now)
        self.condition(cond.SUCCEEDED, cond.SUCCEEDED, message)

    def restarting(self, message: str) -> None:
        self.event("Warning", cond.RESTARTING, message)
        self.condition(cond.RESTARTING, cond.RESTARTING, message)

    def failed(self, message: str, reason_verb: str = cond.FAILED) -> None:
        self.event("Normal", cond.FAILED, message)
        ensure_completion_time(self.status, self.now)
        self.condition(cond.FAILED, reason_verb, message)

    def result(self) -> StatusUpdate:
        return StatusUpdate(self.status, self.events)
