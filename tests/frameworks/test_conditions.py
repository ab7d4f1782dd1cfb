"""Condition bookkeeping (§3.6) and the §3.8 catalogue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_provider_training.frameworks import conditions as cond
from airflow_provider_training.specs.common import JobStatus

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def view(status: JobStatus) -> list[tuple[str, str, str | None]]:
    return [(c.type, c.status, c.reason) for c in status.conditions or []]


def test_successful_pytorch_job_sequence_matches_reference_example() -> None:
    s = JobStatus()
    cond.mark_created(s, "PyTorchJob", "pj", T0)
    cond.set_condition(s, cond.RUNNING, cond.TRUE, "PyTorchJobRunning", "PyTorchJob pj is running.", T0)
    cond.set_condition(
        s, cond.SUCCEEDED, cond.TRUE, "PyTorchJobSucceeded", "PyTorchJob pj is successfully completed.", T0
    )
    assert view(s) == [
        ("Created", "True", "PyTorchJobCreated"),
        ("Running", "False", "PyTorchJobRunning"),
        ("Succeeded", "True", "PyTorchJobSucceeded"),
    ]
    assert s.conditions is not None and s.conditions[0].message == "PyTorchJob pj is created."
    assert s.state == "Succeeded"


def test_failed_is_terminal() -> None:
    s = JobStatus()
    cond.set_condition(s, cond.FAILED, cond.TRUE, "XFailed", "m", T0)
    assert not cond.set_condition(s, cond.RUNNING, cond.TRUE, "XRunning", "m", T0)
    assert not cond.set_condition(s, cond.SUCCEEDED, cond.TRUE, "XSucceeded", "m", T0)
    assert view(s) == [("Failed", "True", "XFailed")]


def test_same_status_and_reason_keeps_old_message_and_times() -> None:
    s = JobStatus()
    cond.set_condition(s, cond.RUNNING, cond.TRUE, "R", "first", T0)
    assert not cond.set_condition(s, cond.RUNNING, cond.TRUE, "R", "second", T0 + timedelta(seconds=5))
    assert s.conditions is not None and s.conditions[0].message == "first"


def test_reason_change_keeps_transition_time_and_moves_to_end() -> None:
    s = JobStatus()
    cond.set_condition(s, cond.RUNNING, cond.TRUE, "A", "m", T0)
    cond.set_condition(s, cond.CREATED, cond.TRUE, "C", "m", T0)
    cond.set_condition(s, cond.RUNNING, cond.TRUE, "B", "m2", T0 + timedelta(seconds=9))
    assert view(s) == [("Created", "True", "C"), ("Running", "True", "B")]
    running = s.conditions[-1] if s.conditions else None
    assert running is not None
    assert running.last_transition_time == "2025-01-01T00:00:00Z"
    assert running.last_update_time == "2025-01-01T00:00:09Z"


def test_running_and_restarting_exclude_each_other() -> None:
    s = JobStatus()
    cond.set_condition(s, cond.RUNNING, cond.TRUE, "R", "m", T0)
    cond.set_condition(s, cond.RESTARTING, cond.TRUE, "X", "m", T0)
    assert view(s) == [("Restarting", "True", "X")]
    cond.set_condition(s, cond.RUNNING, cond.TRUE, "R", "m", T0)
    assert view(s) == [("Running", "True", "R")]


def test_catalogue_messages() -> None:
    assert cond.backoff_limit_message("j") == "Job j has failed because it has reached the specified backoff limit"
    assert cond.deadline_message("j") == "Job j has failed because it was active longer than specified deadline"
    assert cond.pod_restarting_message("j", "Worker") == "job j is restarting because Worker replica(s) failed."
    assert cond.exit_code_failed_message("j", "Worker") == 'job "j" is failing because "Worker" replica(s) failed.'
    assert cond.suspended_message("TFJob", "j") == "TFJob j is suspended."
    assert cond.resumed_message("TFJob", "j") == "TFJob j is resumed."
