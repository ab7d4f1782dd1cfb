"""Job condition bookkeeping exactly as ``pkg/util/status.go`` (``training-operator.md`` §3.6, §3.8).

``set_condition`` reproduces upstream's rules: nothing changes once ``Failed=True`` exists; the
same type/status/reason is a no-op (message included); an unchanged status keeps its
``lastTransitionTime``; the new condition is appended last (the ``State`` printer column); adding
Running drops Restarting and vice versa; adding Succeeded/Failed flips Running to ``False``.
"""

from __future__ import annotations

from datetime import datetime

from airflow_provider_training.frameworks.timeutil import format_time
from airflow_provider_training.specs.common import JobCondition, JobStatus

CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
SUSPENDED = "Suspended"
FAILED = "Failed"

TRUE = "True"
FALSE = "False"


def reason(kind: str, verb: str) -> str:
    """``NewReason``: the kind followed by the verb (``PyTorchJobRunning``)."""
    return f"{kind}{verb}"


def has_true(status: JobStatus, type_: str) -> bool:
    return any(c.type == type_ and c.status == TRUE for c in status.conditions or [])


def find(status: JobStatus, type_: str) -> JobCondition | None:
    for condition in status.conditions or []:
        if condition.type == type_:
            return condition
    return None


def set_condition(status: JobStatus, type_: str, cond_status: str, why: str, message: str, now: datetime) -> bool:
    """``UpdateJobConditions``; mutates ``status`` and says whether anything changed."""
    if has_true(status, FAILED):
        return False
    current = find(status, type_)
    if current is not None and current.status == cond_status and current.reason == why:
        return False
    stamp = format_time(now)
    transition = stamp
    if current is not None and current.status == cond_status:
        transition = current.last_transition_time or stamp
    new = JobCondition(
        type=type_,
        status=cond_status,
        reason=why,
        message=message,
        last_update_time=stamp,
        last_transition_time=transition,
    )
    status.conditions = [*_filter_out(status.conditions or [], type_), new]
    return True


def _filter_out(conditions: list[JobCondition], type_: str) -> list[JobCondition]:
    kept: list[JobCondition] = []
    for c in conditions:
        if (type_ == RESTARTING and c.type == RUNNING) or (type_ == RUNNING and c.type == RESTARTING):
            continue
        if c.type == type_:
            continue
        if type_ in (FAILED, SUCCEEDED) and c.type == RUNNING:
            c = c.model_copy(update={"status": FALSE})
        kept.append(c)
    return kept


# The §3.8 catalogue entries every kind shares. Kind-specific running/succeeded/failed messages
# live with each plugin because their wording (namespace or not, ``mxjob``) differs per kind.


def created_message(kind: str, name: str) -> str:
    return f"{kind} {name} is created."


def suspended_message(kind: str, name: str) -> str:
    return f"{kind} {name} is suspended."


def resumed_message(kind: str, name: str) -> str:
    return f"{kind} {name} is resumed."


def backoff_limit_message(name: str) -> str:
    return f"Job {name} has failed because it has reached the specified backoff limit"


def deadline_message(name: str) -> str:
    return f"Job {name} has failed because it was active longer than specified deadline"


def pod_restarting_message(name: str, rtype: str) -> str:
    return f"job {name} is restarting because {rtype} replica(s) failed."


def exit_code_failed_message(name: str, rtype: str) -> str:
    # Go's %q quoting: the quotes are part of the message.
    return f'job "{name}" is failing because "{rtype}" replica(s) failed.'


def mark_created(status: JobStatus, kind: str, name: str, now: datetime) -> bool:
    """What the create-event predicate does (``onOwnerCreateFunc``)."""
    return set_condition(status, CREATED, TRUE, reason(kind, CREATED), created_message(kind, name), now)
