"""RunPolicy decisions (``training-operator.md`` §5): backoffLimit, activeDeadlineSeconds,
cleanPodPolicy, ttlSecondsAfterFinished, suspend / resume.

Differences from the Training Operator v1.9.4, fixed on purpose (the README lists them under
"Differences from the Training Operator"):

1. **activeDeadlineSeconds is enforced on time.** Upstream's work queue is a no-op, so the
   deadline is only checked when some other event triggers a reconcile (kubeflow/trainer#3358).
   :func:`deadline_at` gives the moment to wake up; :func:`next_wakeup` combines it with the TTL.
2. **ExitCode retries count against backoffLimit.** Upstream deletes and recreates the pod, so
   restartCount stays 0 and such retries are unlimited (kubeflow/trainer#2045).
   :func:`past_backoff_limit` adds the controller's count of ExitCode retries.
3. **completionTime is set on a permanent ExitCode failure** (see ``restarts.py``).

Kept as upstream: the backoff / deadline failure sets Failed *before* cleanup, so cleanPodPolicy
is honoured (the 1.9.4 behaviour), and ``Never`` replicas are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from airflow_provider_training.frameworks import conditions as cond
from airflow_provider_training.frameworks.base import FrameworkPlugin, ensure_completion_time, total_replicas
from airflow_provider_training.frameworks.events import NORMAL, Event
from airflow_provider_training.frameworks.pods import FAILED, PENDING, RUNNING, SUCCEEDED, PodState, of_type
from airflow_provider_training.frameworks.timeutil import format_time, parse_time
from airflow_provider_training.specs.common import JobStatus
from airflow_provider_training.specs.jobs import TrainingJob

COUNTED_POLICIES = ("OnFailure", "Always", "ExitCode")


def past_backoff_limit(
    plugin: FrameworkPlugin, job: TrainingJob, pods: list[PodState], exit_code_retries: int = 0
) -> bool:
    """``PastBackoffLimit`` (test B) plus the ExitCode retries the controller has made."""
    limit = job.run_policy.backoff_limit
    if limit is None:
        return False
    restarts = exit_code_retries
    for rtype in plugin.replica_types(job):
        if job.replica_specs[rtype].restart_policy not in COUNTED_POLICIES:
            continue
        restarts += sum(p.restart_count for p in of_type(pods, rtype) if p.phase == RUNNING)
    return restarts > 0 if limit == 0 else restarts >= limit


def exceeds_backoff_limit(job: TrainingJob, previous: JobStatus, pods: list[PodState]) -> bool:
    """Test A: a new failure while not all replicas are active and ``backoffLimit`` is 0.

    Upstream compares ``NumRequeues + 1 > backoffLimit`` with a no-op queue (NumRequeues = 0).
    """
    limit = job.run_policy.backoff_limit
    if limit is None:
        return False
    failed = sum(1 for p in pods if p.phase == FAILED)
    previously = sum((s.failed or 0) for s in (previous.replica_statuses or {}).values())
    active = sum(1 for p in pods if p.phase not in (SUCCEEDED, FAILED) and not p.deleting)
    return failed > previously and active != total_replicas(job) and limit < 1


def deadline_at(job: TrainingJob, status: JobStatus) -> datetime | None:
    seconds = job.run_policy.active_deadline_seconds
    if seconds is None or status.start_time is None:
        return None
    return parse_time(status.start_time) + timedelta(seconds=seconds)


def past_active_deadline(job: TrainingJob, status: JobStatus, now: datetime) -> bool:
    at = deadline_at(job, status)
    return at is not None and now >= at


@dataclass
class Transition:
    """A new status plus the events to record."""

    status: JobStatus
    events: list[Event] = field(default_factory=list)


def check_limits(
    plugin: FrameworkPlugin,
    job: TrainingJob,
    status: JobStatus,
    pods: list[PodState],
    now: datetime,
    exit_code_retries: int = 0,
) -> Transition | None:
    """§5.2: None, or the job failed by backoffLimit / activeDeadlineSeconds (status updated).

    The caller then deletes pods per :func:`pods_to_delete_when_finished` (the job is finished).
    """
    if exceeds_backoff_limit(job, status, pods) or past_backoff_limit(plugin, job, pods, exit_code_retries):
        message = cond.backoff_limit_message(job.name)
    elif past_active_deadline(job, status, now):
        message = cond.deadline_message(job.name)
    else:
        return None
    out = status.model_copy(deep=True)
    ensure_completion_time(out, now)
    why = cond.reason(plugin.info.kind, cond.FAILED)
    cond.set_condition(out, cond.FAILED, cond.TRUE, why, message, now)
    return Transition(out, [Event(NORMAL, why, message)])


def pods_to_delete_when_finished(job: TrainingJob, pods: list[PodState]) -> list[str]:
    """cleanPodPolicy on a finished job (§5.1); each pod's same-named Service goes with it."""
    policy = job.run_policy.clean_pod_policy or "None"
    if policy == "All":
        return [p.name for p in pods]
    if policy == "Running":
        return [p.name for p in pods if p.phase in (RUNNING, PENDING)]
    return []


def ttl_expires_at(job: TrainingJob, status: JobStatus) -> datetime | None:
    """When the finished job object itself is deleted; None = never (no TTL, or no completionTime)."""
    ttl = job.run_policy.ttl_seconds_after_finished
    if ttl is None or status.completion_time is None or not status.finished:
        return None
    return parse_time(status.completion_time) + timedelta(seconds=ttl)


def ttl_expired(job: TrainingJob, status: JobStatus, now: datetime) -> bool:
    at = ttl_expires_at(job, status)
    return at is not None and now > at and not job.run_policy.suspend


def next_wakeup(job: TrainingJob, status: JobStatus) -> datetime | None:
    """The earliest time a reconcile must run even if nothing else happens (deadline or TTL)."""
    if status.finished:
        return ttl_expires_at(job, status)
    if job.run_policy.suspend:
        return None
    return deadline_at(job, status)


def is_suspended(job: TrainingJob) -> bool:
    return bool(job.run_policy.suspend)


def suspend(plugin: FrameworkPlugin, job: TrainingJob, status: JobStatus, now: datetime) -> Transition:
    """§5.4 while ``suspend`` is true: the caller deletes every pod and Service (any cleanPodPolicy)."""
    kind = plugin.info.kind
    out = status.model_copy(deep=True)
    for counts in (out.replica_statuses or {}).values():
        counts.active = None  # 0, which omitempty leaves out
    message = cond.suspended_message(kind, job.name)
    why = cond.reason(kind, cond.SUSPENDED)
    if cond.has_true(out, cond.RUNNING):
        cond.set_condition(out, cond.RUNNING, cond.FALSE, why, message, now)
    if not cond.has_true(out, cond.SUSPENDED):
        cond.set_condition(out, cond.SUSPENDED, cond.TRUE, why, message, now)
    return Transition(out, [Event(NORMAL, why, message)])


def resume_if_suspended(
    plugin: FrameworkPlugin, job: TrainingJob, status: JobStatus, now: datetime
) -> Transition | None:
    """§3.1 step 7.4: Suspended=True but ``suspend`` off → Suspended=False, startTime = now."""
    if not cond.has_true(status, cond.SUSPENDED) or is_suspended(job):
        return None
    kind = plugin.info.kind
    out = status.model_copy(deep=True)
    message = cond.resumed_message(kind, job.name)
    why = cond.reason(kind, "Resumed")
    cond.set_condition(out, cond.SUSPENDED, cond.FALSE, why, message, now)
    out.start_time = format_time(now)
    return Transition(out, [Event(NORMAL, why, message)])


def is_managed_elsewhere(job: TrainingJob) -> bool:
    """§5.5: a set managedBy other than the training operator means: leave the job alone."""
    managed_by = job.run_policy.managed_by
    return managed_by is not None and managed_by != "kubeflow.org/training-operator"
