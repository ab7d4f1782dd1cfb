"""Restart decisions (§3.4) and RunPolicy (§5), including the documented fixes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_training.frameworks import PodState, plugin
from airflow_provider_training.frameworks import runpolicy as rp
from airflow_provider_training.frameworks.restarts import FAIL, NONE, RETRY, failed_pod_action, handle_failed_pods
from airflow_provider_training.specs.common import JobStatus
from tests.factories import typed_job as make_job

T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("policy", "code", "action"),
    [
        ("OnFailure", 1, RETRY),
        ("Always", 0, RETRY),
        ("ExitCode", 137, RETRY),
        ("ExitCode", 128, RETRY),
        ("ExitCode", 0xBEEF, RETRY),
        ("ExitCode", 127, FAIL),
        ("ExitCode", 1, FAIL),
        ("Never", 137, NONE),
    ],
)
def test_failed_pod_action(policy: str, code: int, action: str) -> None:
    assert failed_pod_action(policy, code) == action


def test_exit_code_retry_deletes_pod_and_sets_restarting() -> None:
    p = plugin("PyTorchJob")
    job = make_job("PyTorchJob", "j", {"Master": 1, "Worker": 1})
    job.replica_specs["Worker"].restart_policy = "ExitCode"
    status = JobStatus()
    pods = [PodState("j-worker-0", "worker", 0, "Failed", exit_code=137)]
    out = handle_failed_pods(p, job, status, pods, T0)
    assert out.delete == ["j-worker-0"] and out.exit_code_retries == 1
    assert [(e.reason, e.message) for e in out.events] == [
        ("ExitedWithCode", "Pod: default.j-worker-0 exited with code 137"),
        ("PyTorchJobRestarting", "job j is restarting because Worker replica(s) failed."),
    ]
    assert status.conditions and status.conditions[-1].type == "Restarting"


def test_exit_code_permanent_failure_sets_completion_time() -> None:
    p = plugin("PyTorchJob")
    job = make_job("PyTorchJob", "j", {"Master": 1})
    job.replica_specs["Master"].restart_policy = "ExitCode"
    status = JobStatus()
    out = handle_failed_pods(p, job, status, [PodState("j-master-0", "master", 0, "Failed", exit_code=1)], T0)
    assert out.delete == []
    assert status.conditions and (
        status.conditions[-1].type,
        status.conditions[-1].reason,
        status.conditions[-1].message,
    ) == ("Failed", "PyTorchJobFailed", 'job "j" is failing because "Master" replica(s) failed.')
    assert status.completion_time == "2025-01-01T00:00:00Z"  # fixed: upstream leaves it nil


def test_mpi_failed_pods_are_left_alone() -> None:
    job = make_job("MPIJob", "m", {"Launcher": 1})
    out = handle_failed_pods(
        plugin("MPIJob"), job, JobStatus(), [PodState("m-launcher", "launcher", None, "Failed", exit_code=1)], T0
    )
    assert out.delete == [] and out.events == []


@pytest.mark.parametrize(
    ("limit", "restarts", "exit_code_retries", "past"),
    [(None, 9, 9, False), (0, 0, 0, False), (0, 1, 0, True), (3, 2, 0, False), (3, 3, 0, True), (3, 1, 2, True)],
)
def test_past_backoff_limit(limit: int | None, restarts: int, exit_code_retries: int, past: bool) -> None:
    job = make_job("PyTorchJob", "j", {"Master": 1}, runPolicy={"backoffLimit": limit} if limit is not None else {})
    pods = [PodState("j-master-0", "master", 0, "Running", restart_count=restarts)]
    assert rp.past_backoff_limit(plugin("PyTorchJob"), job, pods, exit_code_retries) is past


def test_never_replicas_do_not_count_toward_backoff() -> None:
    job = make_job("TFJob", "t", {"Worker": 1}, runPolicy={"backoffLimit": 1})
    pods = [PodState("t-worker-0", "worker", 0, "Running", restart_count=5)]
    assert not rp.past_backoff_limit(plugin("TFJob"), job, pods)


def test_backoff_limit_failure_message_and_completion_time() -> None:
    p = plugin("XGBoostJob")
    job = make_job("XGBoostJob", "x", {"Master": 1}, runPolicy={"backoffLimit": 1})
    job.replica_specs["Master"].restart_policy = "OnFailure"
    pods = [PodState("x-master-0", "master", 0, "Running", restart_count=1)]
    result = rp.check_limits(p, job, JobStatus(start_time="2025-01-01T00:00:00Z"), pods, T0)
    assert result is not None
    c = result.status.conditions[-1] if result.status.conditions else None
    assert c is not None and (c.type, c.reason, c.message) == (
        "Failed",
        "XGBoostJobFailed",
        "Job x has failed because it has reached the specified backoff limit",
    )
    assert result.status.completion_time == "2025-01-01T00:00:00Z"


def test_active_deadline_on_time() -> None:
    p = plugin("JAXJob")
    job = make_job("JAXJob", "jx", {"Worker": 1}, runPolicy={"activeDeadlineSeconds": 30})
    status = JobStatus(start_time="2025-01-01T00:00:00Z")
    assert rp.deadline_at(job, status) == T0 + timedelta(seconds=30)
    assert rp.next_wakeup(job, status) == T0 + timedelta(seconds=30)
    assert rp.check_limits(p, job, status, [], T0 + timedelta(seconds=29)) is None
    result = rp.check_limits(p, job, status, [], T0 + timedelta(seconds=30))
    assert result is not None and result.status.conditions
    assert (
        result.status.conditions[-1].message == "Job jx has failed because it was active longer than specified deadline"
    )


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [("None", []), ("Running", ["a", "b"]), ("All", ["a", "b", "c", "d"])],
)
def test_clean_pod_policy(policy: str, deleted: list[str]) -> None:
    job = make_job("PyTorchJob", "j", {"Master": 1}, runPolicy={"cleanPodPolicy": policy})
    pods = [
        PodState("a", "worker", 0, "Running"),
        PodState("b", "worker", 1, "Pending"),
        PodState("c", "worker", 2, "Succeeded"),
        PodState("d", "master", 0, "Failed"),
    ]
    assert rp.pods_to_delete_when_finished(job, pods) == deleted


def test_ttl() -> None:
    job = make_job("PyTorchJob", "j", {"Master": 1}, runPolicy={"ttlSecondsAfterFinished": 60})
    running = JobStatus(completion_time=None)
    assert rp.ttl_expires_at(job, running) is None
    done = JobStatus(
        completion_time="2025-01-01T00:00:00Z",
        conditions=[{"type": "Succeeded", "status": "True"}],  # type: ignore[list-item]
    )
    assert rp.next_wakeup(job, done) == T0 + timedelta(seconds=60)
    assert not rp.ttl_expired(job, done, T0 + timedelta(seconds=60))
    assert rp.ttl_expired(job, done, T0 + timedelta(seconds=61))


def test_suspend_then_resume() -> None:
    p = plugin("MPIJob")
    job = make_job("MPIJob", "m", {"Launcher": 1}, runPolicy={"suspend": True})
    status = JobStatus(start_time="2024-12-31T00:00:00Z", replica_statuses={"Launcher": {"active": 1}})  # type: ignore[dict-item]
    from airflow_provider_training.frameworks import conditions as cond

    cond.mark_created(status, "MPIJob", "m", T0)
    cond.set_condition(status, "Running", "True", "MPIJobRunning", "MPIJob m is running.", T0)
    suspended = rp.suspend(p, job, status, T0).status
    assert [(c.type, c.status, c.reason) for c in suspended.conditions or []] == [
        ("Created", "True", "MPIJobCreated"),
        ("Running", "False", "MPIJobSuspended"),
        ("Suspended", "True", "MPIJobSuspended"),
    ]
    assert suspended.start_time == "2024-12-31T00:00:00Z"  # kept while suspended
    assert suspended.replica_statuses and suspended.replica_statuses["Launcher"].active is None
    assert rp.resume_if_suspended(p, job, suspended, T0) is None  # still suspended
    job.run_policy.suspend = False
    resumed = rp.resume_if_suspended(p, job, suspended, T0 + timedelta(hours=1))
    assert resumed is not None
    last = resumed.status.conditions[-1] if resumed.status.conditions else None
    assert last is not None and (last.type, last.status, last.reason, last.message) == (
        "Suspended",
        "False",
        "MPIJobResumed",
        "MPIJob m is resumed.",
    )
    assert resumed.status.start_time == "2025-01-01T01:00:00Z"


@pytest.mark.parametrize(
    ("managed_by", "skip"),
    [(None, False), ("kubeflow.org/training-operator", False), ("kueue.x-k8s.io/multikueue", True)],
)
def test_managed_by(managed_by: str | None, skip: bool) -> None:
    job = make_job("PyTorchJob", "j", {"Master": 1}, runPolicy={"managedBy": managed_by} if managed_by else {})
    assert rp.is_managed_elsewhere(job) is skip
