"""The TrainJob status step (``trainer-v2.md`` §1.5, §4): conditions, jobsStatus, suspend, deadline."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from airflow_provider_training.frameworks.trainer.status import reconcile_status

T0 = "2026-12-01T10:00:00Z"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def _tj(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "tj", "creationTimestamp": T0},
        "spec": {"runtimeRef": {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org",
                                "kind": "ClusterTrainingRuntime"}, **spec},
    }  # fmt: skip


def _js(*conditions: dict[str, Any], succeeded: int = 0, active: int = 1) -> dict[str, Any]:
    return {
        "status": {
            "conditions": list(conditions),
            "replicatedJobsStatus": [
                {"name": "node", "ready": active, "succeeded": succeeded, "failed": 0, "active": active, "suspended": 0}
            ],
        }
    }


def test_running_has_no_conditions_and_complete_is_copied_from_the_jobset() -> None:
    running = reconcile_status(_tj(), _js(), _at("2026-12-01T10:00:05Z"))
    assert running.status == {
        "jobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]
    }
    completed = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                 "message": "jobset completed successfully", "lastTransitionTime": "2026-12-01T10:05:00Z"}  # fmt: skip
    done = reconcile_status(_tj(), _js(completed, succeeded=1, active=0), _at("2026-12-01T10:05:01Z"))
    assert done.status["conditions"] == [{**completed, "type": "Complete"}]
    assert done.status["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    # Finished and the JobSet gone (TTL): the status stays as it was.
    tj = {**_tj(), "status": done.status}
    after = reconcile_status(tj, None, _at("2026-12-01T11:00:00Z"))
    assert after.status == done.status and not after.jobset_missing


def test_failed_is_copied_and_a_stale_failed_is_dropped() -> None:
    failed = {"type": "Failed", "status": "True", "reason": "FailedJobs", "lastTransitionTime": T0,
              "message": "jobset failed due to one or more job failures (first failed job: tj-node-0)"}  # fmt: skip
    step = reconcile_status(_tj(), _js(failed), _at(T0))
    assert step.status["conditions"][0]["reason"] == "FailedJobs"
    fixed = reconcile_status({**_tj(), "status": step.status}, _js(), _at(T0))
    assert "conditions" not in fixed.status


def test_suspend_and_resume() -> None:
    suspended = reconcile_status(_tj(suspend=True), _js(active=0), _at("2026-12-01T10:01:00Z"))
    (cond,) = suspended.status["conditions"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "Suspended", "TrainJob is suspended")
    resumed = reconcile_status({**_tj(), "status": suspended.status}, _js(), _at("2026-12-01T10:02:00Z"))
    (cond,) = resumed.status["conditions"]
    assert (cond["status"], cond["reason"], cond["message"], cond["lastTransitionTime"]) == (
        "False",
        "Resumed",
        "TrainJob is resumed",
        "2026-12-01T10:02:00Z",
    )


def test_active_deadline() -> None:
    early = reconcile_status(_tj(activeDeadlineSeconds=60), _js(), _at("2026-12-01T10:00:20Z"))
    assert early.requeue_after == 40 and not early.delete_jobset
    late = reconcile_status(_tj(activeDeadlineSeconds=60), _js(), _at("2026-12-01T10:01:01Z"))
    assert late.delete_jobset
    (cond,) = late.status["conditions"]
    assert (cond["type"], cond["reason"], cond["message"]) == (
        "Failed",
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    # The deadline failure survives later passes, even once the JobSet is gone.
    again = reconcile_status(
        {**_tj(activeDeadlineSeconds=60), "status": late.status}, None, _at("2026-12-01T10:02:00Z")
    )
    assert again.status["conditions"] == late.status["conditions"] and not again.jobset_missing
    # After a resume the clock starts at the resume.
    resumed = {"conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed", "message": "TrainJob is resumed",
                               "lastTransitionTime": "2026-12-01T11:00:00Z"}]}  # fmt: skip
    step = reconcile_status({**_tj(activeDeadlineSeconds=60), "status": resumed}, _js(), _at("2026-12-01T11:00:30Z"))
    assert step.requeue_after == 30


def test_unsupported_runtime_and_missing_jobset() -> None:
    tj = _tj()
    tj["spec"]["runtimeRef"]["kind"] = "Foo"
    step = reconcile_status(tj, None, _at(T0), runtime_supported=False)
    assert step.status["conditions"][0]["message"] == "unsupported runtime: Foo.trainer.kubeflow.org"
    assert reconcile_status(_tj(), None, _at(T0)).jobset_missing
