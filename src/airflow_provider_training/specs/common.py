"""Types shared by every kind (``common_types.go``; ``training-operator.md`` §2)."""

from __future__ import annotations

from typing import Any

from airflow_provider_training.specs.base import KubeModel
from airflow_provider_training.specs.pod import PodTemplateSpec


class ReplicaSpec(KubeModel):
    replicas: int | None = None
    template: PodTemplateSpec | None = None
    restart_policy: str | None = None


class SchedulingPolicy(KubeModel):
    min_available: int | None = None
    queue: str | None = None
    min_resources: dict[str, int | str] | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: int | None = None


class RunPolicy(KubeModel):
    clean_pod_policy: str | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool | None = None
    managed_by: str | None = None


class RDZVConf(KubeModel):
    key: str | None = None
    value: str | None = None


class ElasticPolicy(KubeModel):
    """PyTorchJob's elasticPolicy; PaddleJob uses the min/max/maxRestarts/metrics subset."""

    min_replicas: int | None = None
    max_replicas: int | None = None
    rdzv_backend: str | None = None
    rdzv_port: int | None = None
    rdzv_host: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: list[RDZVConf] | None = None
    standalone: bool | None = None
    n_proc_per_node: int | None = None
    max_restarts: int | None = None
    metrics: list[dict[str, Any]] | None = None


class JobCondition(KubeModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_update_time: str | None = None
    last_transition_time: str | None = None


class ReplicaStatus(KubeModel):
    active: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    label_selector: dict[str, Any] | None = None
    selector: str | None = None


class JobStatus(KubeModel):
    conditions: list[JobCondition] | None = None
    replica_statuses: dict[str, ReplicaStatus] | None = None
    start_time: str | None = None
    completion_time: str | None = None
    last_reconcile_time: str | None = None

    def condition(self, type_: str) -> JobCondition | None:
        for condition in self.conditions or []:
            if condition.type == type_:
                return condition
        return None

    def is_true(self, type_: str) -> bool:
        condition = self.condition(type_)
        return condition is not None and condition.status == "True"

    @property
    def state(self) -> str | None:
        """The printer column ``State``: the type of the last condition."""
        return self.conditions[-1].type if self.conditions else None

    @property
    def finished(self) -> bool:
        return self.is_true("Succeeded") or self.is_true("Failed")
