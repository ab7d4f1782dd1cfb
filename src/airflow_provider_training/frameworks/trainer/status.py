"""The TrainJob controller's status step (``trainer-v2.md`` §2, §4) as a pure function: drop a stale
``Failed``, set ``Suspended``, copy ``Complete``/``Failed`` and ``jobsStatus`` from the JobSet, and
enforce ``activeDeadlineSeconds``. The caller patches the status and deletes the JobSet if told to.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

SUSPENDED = ("Suspended", "True", "Suspended", "TrainJob is suspended")
RESUMED = ("Suspended", "False", "Resumed", "TrainJob is resumed")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "TrainJob exceeded its active deadline")
RUNTIME_NOT_SUPPORTED = "TrainingRuntimeNotSupported"
COUNTERS = ("ready", "succeeded", "failed", "active", "suspended")


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def find(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((cond for cond in conditions if cond.get("type") == kind), None)


def is_true(conditions: list[dict[str, Any]], kind: str) -> bool:
    cond = find(conditions, kind)
    return cond is not None and cond.get("status") == "True"


def set_condition(conditions: list[dict[str, Any]], new: dict[str, Any], now: datetime) -> None:
    """``meta.SetStatusCondition``: lastTransitionTime moves only when the status flips."""
    existing = find(conditions, new["type"])
    stamp = new.get("lastTransitionTime") or _rfc3339(now)
    if existing is None:
        conditions.append({**new, "lastTransitionTime": stamp})
        return
    if existing.get("status") != new["status"]:
        existing["status"] = new["status"]
        existing["lastTransitionTime"] = stamp
    existing["reason"] = new.get("reason", "")
    existing["message"] = new.get("message", "")
    if "observedGeneration" in new:
        existing["observedGeneration"] = new["observedGeneration"]


def finished(conditions: list[dict[str, Any]]) -> bool:
    return is_true(conditions, "Complete") or is_true(conditions, "Failed")


@dataclass
class StatusStep:
    status: dict[str, Any]
    delete_jobset: bool = False
    # Seconds until the deadline check is due again (None: no deadline pending).
    requeue_after: float | None = None
    # The JobSet is missing while the TrainJob is not finished: the controller retries with back-off.
    jobset_missing: bool = False


def reconcile_status(
    trainjob: dict[str, Any], jobset: dict[str, Any] | None, now: datetime, *, runtime_supported: bool = True
) -> StatusStep:
    """The TrainJob's next status from its spec, its current status and its JobSet (None if absent)."""
    spec = trainjob.get("spec") or {}
    status = copy.deepcopy(trainjob.get("status") or {})
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    failed = find(conditions, "Failed")
    if failed is not None and failed.get("reason") != DEADLINE_EXCEEDED[0]:
        conditions.remove(failed)
    if not runtime_supported:
        ref = spec.get("runtimeRef") or {}
        key = f"{ref.get('kind', '')}.{ref['apiGroup']}" if ref.get("apiGroup") else str(ref.get("kind", ""))
        set_condition(
            conditions,
            {
                "type": "Failed",
                "status": "True",
                "reason": RUNTIME_NOT_SUPPORTED,
                "message": f"unsupported runtime: {key}",
            },
            now,
        )
    if spec.get("suspend"):
        set_condition(conditions, _cond(SUSPENDED), now)
    elif is_true(conditions, "Suspended"):
        set_condition(conditions, _cond(RESUMED), now)
    step = StatusStep(status)
    deadline_failed = find(conditions, "Failed")
    if deadline_failed is not None and deadline_failed.get("reason") != DEADLINE_EXCEEDED[0]:
        deadline_failed = None
    if jobset is None:
        step.jobset_missing = not finished(conditions) and runtime_supported
    else:
        js_conditions = (jobset.get("status") or {}).get("conditions") or []
        for js_type, tj_type in (("Completed", "Complete"), ("Failed", "Failed")):
            cond = find(js_conditions, js_type)
            if cond is not None and cond.get("status") == "True":
                set_condition(conditions, {**copy.deepcopy(cond), "type": tj_type}, now)
        replicated = (jobset.get("status") or {}).get("replicatedJobsStatus")
        if replicated is not None:
            status["jobsStatus"] = [
                {"name": item["name"], **{k: int(item.get(k, 0)) for k in COUNTERS}} for item in replicated
            ]
        else:
            status.pop("jobsStatus", None)
        if deadline_failed is not None:
            set_condition(conditions, deadline_failed, now)
    _deadline(trainjob, conditions, now, step)
    if not conditions:
        status.pop("conditions")
    return step


def _cond(parts: tuple[str, str, str, str]) -> dict[str, Any]:
    kind, value, reason, message = parts
    return {"type": kind, "status": value, "reason": reason, "message": message}


def _deadline(trainjob: dict[str, Any], conditions: list[dict[str, Any]], now: datetime, step: StatusStep) -> None:
    spec = trainjob.get("spec") or {}
    seconds = int(spec.get("activeDeadlineSeconds") or 0)
    if seconds == 0 or finished(conditions) or spec.get("suspend"):
        return
    start_text = (trainjob.get("metadata") or {}).get("creationTimestamp")
    suspended = find(conditions, "Suspended")
    if suspended is not None and suspended.get("status") == "False":
        start_text = suspended.get("lastTransitionTime")
    if not start_text:
        return
    deadline = _parse(str(start_text)) + timedelta(seconds=seconds)
    if now > deadline:
        reason, message = DEADLINE_EXCEEDED
        set_condition(conditions, {"type": "Failed", "status": "True", "reason": reason, "message": message}, now)
        step.delete_jobset = True
        return
    step.requeue_after = max((deadline - now).total_seconds(), 1.0)


__all__ = ["StatusStep", "find", "finished", "is_true", "reconcile_status", "set_condition"]
