"""What an object's status says: finished or not, and how (pure functions over API dicts).

Training jobs finish with a ``Succeeded`` or ``Failed`` condition whose status is ``"True"``
(``training-operator.md`` §3.6; ``Failed`` wins, the operator accepts no change after it). batch/v1
Jobs finish with ``Complete`` or ``Failed``; an InferenceService is done when ``Ready`` is ``True``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"

SUCCEEDED = "Succeeded"
FAILED = "Failed"


@dataclass(frozen=True)
class JobState:
    """``phase`` is the newest condition that holds (``Created``, ``Running``, ``Restarting``, ``Succeeded``…)."""

    phase: str
    finished: bool = False
    succeeded: bool = False
    reason: str = ""
    message: str = ""

    @property
    def failed(self) -> bool:
        return self.finished and not self.succeeded


def _true(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    for condition in conditions:
        if condition.get("type") == kind and str(condition.get("status")) == "True":
            return condition
    return None


def job_state(obj: dict[str, Any]) -> JobState:
    status = obj.get("status") or {}
    conditions: list[dict[str, Any]] = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    kind = obj.get("kind")
    success_type = {"Job": "Complete", "TrainJob": "Complete", "InferenceService": "Ready"}.get(str(kind), SUCCEEDED)
    if (failed := _true(conditions, FAILED)) is not None and kind != "InferenceService":
        return JobState(FAILED, True, False, str(failed.get("reason", "")), str(failed.get("message", "")))
    if (done := _true(conditions, success_type)) is not None:
        return JobState(SUCCEEDED, True, True, str(done.get("reason", "")), str(done.get("message", "")))
    holding = [c for c in conditions if str(c.get("status")) == "True"]
    if holding:
        last = holding[-1]
        return JobState(str(last.get("type")), False, False, str(last.get("reason", "")), str(last.get("message", "")))
    return JobState("Pending")


def summary(obj: dict[str, Any]) -> dict[str, Any]:
    """The compact, JSON-safe description an operator returns (and pushes to XCom)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    state = job_state(obj)
    return {
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "state": state.phase,
        "reason": state.reason,
        "message": state.message,
        "created": meta.get("creationTimestamp"),
        "started": status.get("startTime"),
        "completed": status.get("completionTime"),
        "replica_statuses": status.get("replicaStatuses") or {},
    }


def is_master_role(pod: dict[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_ROLE_LABEL) == "master"


def replica_of(pod: dict[str, Any]) -> tuple[str, int]:
    """``(replica type, index)`` from the operator's labels (``("worker", 1)``)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    index = labels.get(REPLICA_INDEX_LABEL, "")
    return str(labels.get(REPLICA_TYPE_LABEL, "")), int(index) if str(index).isdigit() else -1


def main_container(pod: dict[str, Any], preferred: str | None = None) -> str | None:
    """The container whose output is the replica's: the kind's default container, else the first one."""
    names = [c.get("name") for c in ((pod.get("spec") or {}).get("containers") or [])]
    if preferred and preferred in names:
        return preferred
    return str(names[0]) if names else None


def container_started(pod: dict[str, Any], container: str | None) -> tuple[bool, int]:
    """Whether the container has run (so it has a log) and its restart count."""
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") == container:
            state = cs.get("state") or {}
            return ("running" in state or "terminated" in state), int(cs.get("restartCount") or 0)
    return status.get("phase") in ("Running", "Succeeded", "Failed"), 0


@dataclass(frozen=True)
class ReplicaFailure:
    pod: str
    exit_code: int | None
    reason: str

    def describe(self) -> str:
        code = f"exit code {self.exit_code}" if self.exit_code is not None else "no exit code"
        return f"{self.pod} ({code}{', ' + self.reason if self.reason else ''})"


def replica_failure(pod: dict[str, Any], container: str | None) -> ReplicaFailure | None:
    """How a replica failed: its container's last non-zero exit, or a Failed pod phase."""
    status = pod.get("status") or {}
    name = str((pod.get("metadata") or {}).get("name"))
    for cs in status.get("containerStatuses") or []:
        if container and cs.get("name") != container:
            continue
        for key in ("state", "lastState"):
            terminated = (cs.get(key) or {}).get("terminated")
            if terminated and int(terminated.get("exitCode") or 0) != 0:
                return ReplicaFailure(name, int(terminated["exitCode"]), str(terminated.get("reason") or ""))
    if status.get("phase") == FAILED:
        return ReplicaFailure(name, None, str(status.get("reason") or ""))
    return None


def finished(obj: dict[str, Any]) -> bool:
    return job_state(obj).finished


def owned_by(pod: dict[str, Any], uid: str | None) -> bool:
    """A pod with owner references belongs to ``uid``'s job only if one of them names it."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return uid is None or not owners or any(o.get("uid") == uid for o in owners)


def replica_of_job(pod: dict[str, Any], kind: str, uid: str | None) -> bool:
    """Whether a pod the job's label selector found is one of the job's own (not a namesake's).
    A TrainJob's pods are owned by its JobSet's Jobs, so only the label (the JobSet's name) tells."""
    return owned_by(pod, None if kind == "TrainJob" else uid)


def mappings(value: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in a JSON-like document, the outer ones first (replica templates of any kind
    sit at different depths)."""
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from mappings(v)
    elif isinstance(value, list):
        for v in value:
            yield from mappings(v)


def job_images(obj: Any) -> list[str]:
    """Every ``image`` in a job document or object (replica templates of any kind), first seen first:
    what the provenance statement and the lineage facets name as the training's images."""
    found: list[str] = []
    for mapping in mappings(obj):
        image = mapping.get("image")
        if isinstance(image, str) and image not in found:
            found.append(image)
    return found
