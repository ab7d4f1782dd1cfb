"""Faults under the real scheduler (DAGs of ``tests/deployment/dags/deployment_faults.py``: a
PyTorchJob whose Master waits for a release file the test creates).

- ``kill -9`` of the triggerer while the training task is deferred: a new triggerer takes the
  trigger over, the run succeeds, exactly one job exists;
- ``kill -9`` of the process running the operator (sync mode) mid-wait: the retry reattaches to the
  same running job through the task state store — no ``-r2`` duplicate;
- ``airflow tasks clear`` of a finished training task: a new job under a new name, the old one kept.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.operators.identity import DAG_ID, RUN_ID, safe_label_value
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def jobs_of(kube_api: Any, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    from kubernetes import client

    selector = f"{DAG_ID}={safe_label_value(dag_id)},{RUN_ID}={safe_label_value(run_id)}"
    found = client.CustomObjectsApi(kube_api).list_namespaced_custom_object(
        "kubeflow.org", "v1", "default", "pytorchjobs", label_selector=selector
    )
    return sorted(found["items"], key=lambda j: j["metadata"]["creationTimestamp"])


def succeeded(job: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Succeeded" and c["status"] == "True" for c in job.get("status", {}).get("conditions") or []
    )


@pytest.fixture(scope="module")
def faults(airflow_deployment: Any) -> Any:
    d = airflow_deployment
    d.wait_for_dags("fault_triggerer", "fault_worker", "fault_clear")
    for dag_id in ("fault_triggerer", "fault_worker", "fault_clear"):
        d.unpause(dag_id)
    return d


def test_a_new_triggerer_takes_over_a_deferred_training_task_after_kill_9(faults, kube_api, tmp_path):
    d = faults
    release = tmp_path / "release"
    run_id = d.trigger("fault_triggerer", {"release": str(release)})
    d.wait_parked("fault_triggerer", run_id, "train")
    folder = d.task_logs / "dag_id=fault_triggerer" / f"run_id={run_id}" / "task_id=train"

    def trigger_logs() -> list[Path]:
        return [p for p in folder.glob("attempt=1.log.trigger.*.log") if "starting" in p.read_text(errors="replace")]

    wait_for(trigger_logs, 180, "the first triggerer to start the trigger", interval=0.5)
    old = d.pids["triggerer"]
    d.kill("triggerer", signal.SIGKILL)
    d.start("triggerer")
    assert d.pids["triggerer"] != old
    # the new triggerer (another triggerer job, another log file) starts the orphaned trigger
    wait_for(lambda: len(trigger_logs()) >= 2, 120, "a new triggerer to take the trigger over", interval=0.5)
    release.touch()
    run = d.wait_run("fault_triggerer", run_id, timeout=240)
    assert run["state"] == "success", d.failure_details("fault_triggerer", run_id)
    jobs = jobs_of(kube_api, "fault_triggerer", run_id)
    assert [j["metadata"]["name"] for j in jobs] == [d.xcom("fault_triggerer", run_id, "train", "job_name")]
    assert succeeded(jobs[0])


def test_a_retry_after_kill_9_of_the_worker_reattaches_through_the_task_state_store(faults, kube_api, tmp_path):
    d = faults
    release, pids = tmp_path / "release", tmp_path / "pids"
    pids.mkdir()
    run_id = d.trigger("fault_worker", {"release": str(release), "pid_dir": str(pids)})
    wait_for(
        lambda: "Submitted PyTorchJob" in d.task_log("fault_worker", run_id, "train", 1),
        180,
        "the job to be submitted",
        interval=0.5,
    )
    [first] = wait_for(lambda: jobs_of(kube_api, "fault_worker", run_id), 180, "the job to exist", interval=0.5)
    wait_for(
        lambda: (
            "is Running" in d.task_log("fault_worker", run_id, "train", 1)
            or "is Created" in d.task_log("fault_worker", run_id, "train", 1)
        ),
        180,
        "the operator to be waiting",
        interval=0.5,
    )
    os.kill(int((pids / "train.1.pid").read_text()), signal.SIGKILL)

    second = wait_for(lambda: d.task_log("fault_worker", run_id, "train", 2), 240, "the retry to start", interval=0.5)
    wait_for(
        lambda: "Reattaching to" in d.task_log("fault_worker", run_id, "train", 2),
        180,
        "the retry to reattach",
        interval=0.5,
    )
    second = d.task_log("fault_worker", run_id, "train", 2)
    assert "found through the task state store" in second, second[-3000:]
    assert "Submitted PyTorchJob" not in second
    release.touch()
    run = d.wait_run("fault_worker", run_id, timeout=240)
    assert run["state"] == "success", d.failure_details("fault_worker", run_id)
    jobs = jobs_of(kube_api, "fault_worker", run_id)
    assert [j["metadata"]["uid"] for j in jobs] == [first["metadata"]["uid"]]  # one job, no -r2
    assert succeeded(jobs[0])
    tries = {ti["task_id"]: ti["try_number"] for ti in d.task_instances("fault_worker", run_id)}
    assert tries["train"] == 2


def test_clear_of_a_finished_training_task_submits_a_new_job_and_keeps_the_old_one(faults, kube_api, tmp_path):
    d = faults
    release = tmp_path / "release"
    release.touch()  # the job finishes at once
    run_id = d.cli_trigger("fault_clear", {"release": str(release)})
    run = d.wait_run("fault_clear", run_id, timeout=240)
    assert run["state"] == "success", d.failure_details("fault_clear", run_id)
    old = d.xcom("fault_clear", run_id, "train", "job_name")

    # Airflow 3.3.2 matches --task-regex as a substring of the task id (partial_subset), not a regex
    d.cli("tasks", "clear", "fault_clear", "--task-regex", "train", "--yes")

    def cleared_and_done() -> bool:
        [ti] = d.task_instances("fault_clear", run_id)
        return ti["try_number"] == 2 and ti["state"] in ("success", "failed")

    wait_for(cleared_and_done, 240, "the cleared task to run again", interval=0.5)
    assert d.task_states("fault_clear", run_id)["train"] == "success", d.failure_details("fault_clear", run_id)
    new = d.xcom("fault_clear", run_id, "train", "job_name")
    assert new == f"{old}-r2"
    jobs = jobs_of(kube_api, "fault_clear", run_id)
    assert [j["metadata"]["name"] for j in jobs] == [old, new]
    assert all(succeeded(j) for j in jobs)  # the first run's job is kept as history
