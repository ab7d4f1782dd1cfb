"""What the common ``ReconcilePods`` does with a Failed pod (``training-operator.md`` §3.4).

``OnFailure`` / ``Always`` and an ``ExitCode`` exit of 128 or more (signals: 137 = SIGKILL) are
retried by deleting the pod so it is recreated under the same name; an ``ExitCode`` exit of
1-127 fails the job; ``Never`` is left to the kind's status rules.

Difference from the Training Operator (fixed here, see the README): the permanent ExitCode failure
also sets ``completionTime`` (upstream leaves it nil for PyTorch, Paddle, JAX and XGBoost, so a
TTL never fires).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from airflow_provider_training.frameworks import conditions as cond
from airflow_provider_training.frameworks.base import FrameworkPlugin, ensure_completion_time
from airflow_provider_training.frameworks.events import NORMAL, WARNING, Event
from airflow_provider_training.frameworks.pods import FAILED, PodState, of_type
from airflow_provider_training.specs.common import JobStatus
from airflow_provider_training.specs.jobs import TrainingJob

RETRY = "retry"
FAIL = "fail"
NONE = "none"


def is_retryable_exit_code(code: int) -> bool:
    return code >= 128


def failed_pod_action(restart_policy: str | None, exit_code: int) -> str:
    """RETRY, FAIL or NONE for a pod in phase Failed."""
    if restart_policy in ("OnFailure", "Always"):
        return RETRY
    if restart_policy == "ExitCode":
        return RETRY if is_retryable_exit_code(exit_code) else FAIL
    return NONE


@dataclass
class PodOutcome:
    """Pods to delete for a retry, and the events to record, from one pass over the pods."""

    delete: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # Deletions made because of an ExitCode retry (the controller adds them to its running count
    # for backoffLimit, see runpolicy.past_backoff_limit).
    exit_code_retries: int = 0


def handle_failed_pods(
    plugin: FrameworkPlugin, job: TrainingJob, status: JobStatus, pods: list[PodState], now: datetime
) -> PodOutcome:
    """Apply the per-pod part of ``ReconcilePods``; mutates ``status`` conditions."""
    kind, name, ns = plugin.info.kind, job.name, job.namespace
    outcome = PodOutcome()
    if not plugin.has_services:
        # MPIJob has its own ReconcilePods, which never deletes or fails pods (§4.3).
        return outcome
    for rtype in plugin.replica_types(job):
        policy = job.replica_specs[rtype].restart_policy
        for pod in of_type(pods, rtype):
            if pod.exit_code is not None:
                outcome.events.append(
                    Event(NORMAL, "ExitedWithCode", f"Pod: {ns}.{pod.name} exited with code {pod.exit_code}")
                )
            if pod.phase != FAILED:
                continue
            action = failed_pod_action(policy, pod.exit_code_or_sentinel)
            if action == RETRY:
                outcome.delete.append(pod.name)
                if policy == "ExitCode":
                    outcome.exit_code_retries += 1
                message = cond.pod_restarting_message(name, rtype)
                outcome.events.append(Event(WARNING, cond.reason(kind, cond.RESTARTING), message))
                cond.set_condition(status, cond.RESTARTING, cond.TRUE, cond.reason(kind, cond.RESTARTING), message, now)
            elif action == FAIL:
                message = cond.exit_code_failed_message(name, rtype)
                outcome.events.append(Event(WARNING, cond.reason(kind, cond.FAILED), message))
                if not cond.has_true(status, cond.FAILED):
                    ensure_completion_time(status, now)
                cond.set_condition(status, cond.FAILED, cond.TRUE, cond.reason(kind, cond.FAILED), message, now)
    return outcome
