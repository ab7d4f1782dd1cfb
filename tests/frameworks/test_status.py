"""Each kind's UpdateJobStatus (§4.x) driven through the replica snapshot (§3.5)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_provider_training.frameworks import PodState, plugin
from airflow_provider_training.frameworks.replicas import fold_active_into_succeeded, replica_statuses
from airflow_provider_training.specs.common import JobStatus
from tests.factories import typed_job as make_job

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def pod(rtype: str, index: int, phase: str, exit_code: int | None = None, deleting: bool = False) -> PodState:
    return PodState(f"p-{rtype}-{index}", rtype.lower(), index, phase, deleting=deleting, exit_code=exit_code)


def run(kind: str, replicas: dict[str, int], pods: list[PodState], **spec: object) -> JobStatus:
    p = plugin(kind)
    job = make_job(kind, "j", replicas, namespace="ns", **spec)
    status = JobStatus(replica_statuses=replica_statuses(p, job, pods))
    return p.update_status(job, status, pods, NOW).status


def last(status: JobStatus) -> tuple[str, str | None, str | None]:
    assert status.conditions
    c = status.conditions[-1]
    return (c.type, c.reason, c.message)


CASES = [
    # kind, replicas, pods, spec, expected last condition
    (
        "PyTorchJob",
        {"Master": 1, "Worker": 1},
        [pod("Master", 0, "Running")],
        {},
        ("Running", "PyTorchJobRunning", "PyTorchJob j is running."),
    ),
    (
        "PyTorchJob",
        {"Master": 1, "Worker": 2},
        [pod("Master", 0, "Succeeded"), pod("Worker", 0, "Running")],
        {},
        ("Succeeded", "PyTorchJobSucceeded", "PyTorchJob j is successfully completed."),
    ),
    (
        "PyTorchJob",
        {"Worker": 2},
        [pod("Worker", 0, "Running"), pod("Worker", 1, "Pending")],
        {},
        ("Running", "PyTorchJobRunning", "PyTorchJob ns/j is running."),
    ),
    (
        "PyTorchJob",
        {"Worker": 2},
        [pod("Worker", 0, "Succeeded"), pod("Worker", 1, "Running")],
        {"elasticPolicy": {}},
        ("Succeeded", "PyTorchJobSucceeded", "PyTorchJob ns/j successfully completed."),
    ),
    (
        "PyTorchJob",
        {"Master": 1, "Worker": 1},
        [pod("Master", 0, "Running"), pod("Worker", 0, "Failed", 1)],
        {},
        ("Restarting", "PyTorchJobRestarting", "PyTorchJob j is restarting because 1 Worker replica(s) failed."),
    ),
    (
        "PaddleJob",
        {"Worker": 2},
        [pod("Worker", 0, "Succeeded"), pod("Worker", 1, "Succeeded")],
        {},
        ("Succeeded", "PaddleJobSucceeded", "PaddleJob ns/j successfully completed."),
    ),
    (
        "PaddleJob",
        {"Worker": 2},
        [pod("Worker", 0, "Succeeded"), pod("Worker", 1, "Running")],
        {"elasticPolicy": {}},
        ("Running", "PaddleJobRunning", "PaddleJob ns/j is running."),
    ),
    (
        "JAXJob",
        {"Worker": 2},
        [pod("Worker", 0, "Running"), pod("Worker", 1, "Failed", 2)],
        {},
        ("Failed", "JAXJobFailed", "JAXJob j is failed because 1 Worker replica(s) failed."),
    ),
    (
        "TFJob",
        {"Worker": 3},
        [pod("Worker", 0, "Succeeded", 0), pod("Worker", 1, "Running")],
        {},
        ("Succeeded", "TFJobSucceeded", "TFJob ns/j successfully completed."),
    ),
    (
        "TFJob",
        {"Worker": 3},
        [pod("Worker", 0, "Succeeded", 0), pod("Worker", 1, "Running")],
        {"successPolicy": "AllWorkers"},
        ("Running", "TFJobRunning", "TFJob ns/j is running."),
    ),
    (
        "TFJob",
        {"Chief": 1, "PS": 1, "Worker": 1},
        [pod("Chief", 0, "Running"), pod("PS", 0, "Failed", 1)],
        {},
        ("Failed", "TFJobFailed", "TFJob ns/j has failed because 1 PS replica(s) failed."),
    ),
    (
        "TFJob",
        {"Worker": 2},
        [pod("Worker", 0, "Running"), pod("Worker", 1, "Failed", 1)],
        {"enableDynamicWorker": True},
        ("Running", "TFJobRunning", "TFJob ns/j is running."),
    ),
    (
        "XGBoostJob",
        {"Master": 1, "Worker": 1},
        [pod("Master", 0, "Succeeded"), pod("Worker", 0, "Succeeded")],
        {},
        ("Succeeded", "XGBoostJobSucceeded", "XGBoostJob j is successfully completed."),
    ),
    (
        "XGBoostJob",
        {"Master": 1, "Worker": 1},
        [pod("Master", 0, "Running"), pod("Worker", 0, "Failed", 1)],
        {},
        ("Failed", "XGBoostJobFailed", "XGBoostJob j is failed because 1 Worker replica(s) failed."),
    ),
    (
        "MPIJob",
        {"Launcher": 1, "Worker": 2},
        [pod("Launcher", 0, "Failed", 1)],
        {},
        ("Failed", "MPIJobMPIJobFailed", "MPIJob j is failed because 1 Launcher replica(s) failed."),
    ),
    (
        "MPIJob",
        {"Launcher": 1, "Worker": 2},
        [pod("Launcher", 0, "Succeeded"), pod("Worker", 0, "Running")],
        {},
        ("Succeeded", "MPIJobSucceeded", "MPIJob j is successfully completed."),
    ),
    (
        "MXJob",
        {"Scheduler": 1, "Worker": 1},
        [pod("Scheduler", 0, "Running"), pod("Worker", 0, "Failed", 1)],
        {},
        ("Failed", "MXJobFailed", "mxjob j is failed because 1 Worker replica(s) failed."),
    ),
    (
        "MXJob",
        {"Worker": 1},
        [pod("Worker", 0, "Succeeded")],
        {},
        ("Succeeded", "MXJobSucceeded", "MXJob j is successfully completed."),
    ),
]


@pytest.mark.parametrize(("kind", "replicas", "pods", "spec", "expected"), CASES)
def test_status_rule(
    kind: str, replicas: dict[str, int], pods: list[PodState], spec: dict[str, object], expected: tuple[str, str, str]
) -> None:
    status = run(kind, replicas, pods, **spec)
    assert last(status) == expected
    assert status.start_time == "2025-01-01T12:00:00Z"
    finished = expected[0] in ("Succeeded", "Failed")
    assert (status.completion_time is not None) == finished


def test_never_policy_fails_pytorch() -> None:
    p = plugin("PyTorchJob")
    job = make_job("PyTorchJob", "j", {"Master": 1, "Worker": 1}, namespace="ns")
    job.replica_specs["Worker"].restart_policy = "Never"
    pods = [pod("Master", 0, "Running"), pod("Worker", 0, "Failed", 137)]
    status = p.update_status(job, JobStatus(replica_statuses=replica_statuses(p, job, pods)), pods, NOW).status
    assert last(status) == ("Failed", "PyTorchJobFailed", "PyTorchJob j is failed because 1 Worker replica(s) failed.")


def test_replica_snapshot_counts_and_selector() -> None:
    p = plugin("PyTorchJob")
    job = make_job("PyTorchJob", "j", {"Master": 1, "Worker": 3})
    pods = [
        pod("Master", 0, "Running"),
        pod("Worker", 0, "Running", deleting=True),
        pod("Worker", 1, "Succeeded"),
        pod("Worker", 2, "Pending"),
    ]
    counts = {k: v.to_dict() for k, v in replica_statuses(p, job, pods).items()}
    sel = "training.kubeflow.org/job-name=j,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type="
    assert counts == {
        "Master": {"active": 1, "selector": sel + "master"},
        "Worker": {"succeeded": 1, "failed": 1, "selector": sel + "worker"},
    }
    assert (
        "selector"
        not in replica_statuses(plugin("TFJob"), make_job("TFJob", "t", {"Worker": 1}), [])["Worker"].to_dict()
    )


def test_fold_active_into_succeeded() -> None:
    p = plugin("PyTorchJob")
    job = make_job("PyTorchJob", "j", {"Master": 1, "Worker": 2})
    status = JobStatus(
        replica_statuses=replica_statuses(p, job, [pod("Worker", 0, "Running"), pod("Worker", 1, "Succeeded")])
    )
    fold_active_into_succeeded(status)
    assert status.replica_statuses is not None
    assert (status.replica_statuses["Worker"].active, status.replica_statuses["Worker"].succeeded) == (None, 2)
