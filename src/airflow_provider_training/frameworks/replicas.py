"""Replica counts as a snapshot of the pods that exist now (``UpdateJobReplicaStatuses``, §3.5)."""

from __future__ import annotations

from airflow_provider_training.frameworks import labels
from airflow_provider_training.frameworks.base import FrameworkPlugin
from airflow_provider_training.frameworks.pods import FAILED, RUNNING, SUCCEEDED, PodState, of_type
from airflow_provider_training.specs.common import JobStatus, ReplicaStatus
from airflow_provider_training.specs.jobs import TrainingJob


def replica_statuses(plugin: FrameworkPlugin, job: TrainingJob, pods: list[PodState]) -> dict[str, ReplicaStatus]:
    """Counts per replica type of the spec; zero counts are left out (``omitempty``).

    A Running pod being deleted counts as failed where the plugin says so
    (``deleting_running_pod_fails``; MPI's own counter ignores the deletion timestamp). ``selector`` is set only for kinds with a scale subresource.
    """
    info = plugin.info
    out: dict[str, ReplicaStatus] = {}
    for rtype in plugin.replica_types(job):
        active = succeeded = failed = 0
        for pod in of_type(pods, rtype):
            if pod.phase == RUNNING:
                if pod.deleting and plugin.deleting_running_pod_fails:
                    failed += 1
                else:
                    active += 1
            elif pod.phase == SUCCEEDED:
                succeeded += 1
            elif pod.phase == FAILED:
                failed += 1
        status = ReplicaStatus()
        if active:
            status.active = active
        if succeeded:
            status.succeeded = succeeded
        if failed:
            status.failed = failed
        if info.scale_subresource:
            status.selector = labels.format_selector(labels.replica_labels(info.operator_name, job.name, rtype, None))
        out[rtype] = status
    return out


def fold_active_into_succeeded(status: JobStatus) -> None:
    """Once a job has Succeeded, ``succeeded += active; active = 0`` (§3.1 step 7.2)."""
    for counts in (status.replica_statuses or {}).values():
        if counts.active:
            counts.succeeded = (counts.succeeded or 0) + counts.active
            counts.active = None
