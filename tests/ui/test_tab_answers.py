"""What a tab is told when its task has no job or ModelKit (wait, or a neutral why), the pages of a
replica's log, and a running TrainJob's phase (pure functions of ui/task.py and ui/views.py)."""

from __future__ import annotations

from airflow_provider_training.ui import task, views

KEY = task.TaskKey("d", "manual__2026-01-01T00:00:00+00:00", "train")


def summary(state: str | None, *links: str, operator: str = "PyTorchJobOperator") -> task.TaskSummary:
    return task.TaskSummary(state=state, operator=operator, links=frozenset(links))


def test_a_training_task_that_has_not_submitted_yet_is_waited_for():
    for state in (None, "scheduled", "queued", "running", "deferred", "up_for_retry", "restarting"):
        answer = task.missing(summary(state, task.JOB_LINK), KEY, "job")
        assert answer["waiting"] is True, state
        assert answer["state"] == state
        assert "has not submitted a training job yet" in answer["detail"]


def test_no_wait_where_no_job_will_come():
    deploy = task.missing(summary("running", operator="InferenceServiceOperator"), KEY, "job")
    assert deploy["waiting"] is False
    assert "it is not a training task (InferenceServiceOperator)" in deploy["detail"]
    failed = task.missing(summary("failed", task.JOB_LINK), KEY, "job")
    assert failed == {
        "detail": "task train of run manual__2026-01-01T00:00:00+00:00 finished (failed) without having submitted a training job",
        "waiting": False,
        "state": "failed",
    }
    assert task.missing(None, KEY, "job")["detail"].endswith("does not exist")
    # the train task's ModelKit tab
    kit = task.missing(summary("success", task.JOB_LINK), KEY, "modelkit")
    assert kit["waiting"] is False and "it is not a ModelKit task" in kit["detail"]
    pushing = task.missing(summary("running", task.MODELKIT_LINK), KEY, "modelkit")
    assert pushing["waiting"] is True and "has not pushed a ModelKit yet" in pushing["detail"]
    mapped = task.missing(None, task.TaskKey("d", "r", "train", 3), "job")
    assert "task train[3] of run r" in mapped["detail"]


def test_log_pages_count_lines_from_the_first():
    lines = [f"line {n}" for n in range(1, 1201)]
    last = views.log_page(lines, 1000, None, 100_000)
    assert (last["start"], last["total"], last["lines"][0], last["lines"][-1]) == (200, 1200, "line 201", "line 1200")
    earlier = views.log_page(lines, 1000, last["start"], 100_000)
    assert (earlier["start"], len(earlier["lines"]), earlier["lines"][-1]) == (0, 200, "line 200")
    assert not last["truncated"]
    # hostile or odd requests: past the end, nothing before the first line, an empty log
    assert views.log_page(lines, 10, 10**9, 100_000)["lines"] == lines[-10:]
    assert views.log_page(lines, 10, 0, 100_000) == {"lines": [], "start": 0, "total": 1200, "truncated": False}
    assert views.log_page([], 200, None, 100_000) == {"lines": [], "start": 0, "total": 0, "truncated": False}
    # oversized: a container with more lines than the window says so
    assert views.log_page(["x"] * 50, 10, None, 50)["truncated"] is True


def test_a_trainjob_with_an_active_job_reads_running():
    trainjob = {"kind": "TrainJob", "metadata": {"name": "tj"}, "status": {}}
    assert views.job_view(trainjob)["phase"] == "Pending"
    trainjob["status"]["jobsStatus"] = [{"name": "node", "active": 2, "ready": 2, "succeeded": 0, "failed": 0}]
    assert views.job_view(trainjob)["phase"] == "Running"
    trainjob["status"]["conditions"] = [{"type": "Complete", "status": "True", "reason": "JobsCompleted"}]
    assert views.job_view(trainjob)["phase"] == "Succeeded"
    # hostile: a status that is not what the CRD says reads as it did
    assert views.job_view({"kind": "TrainJob", "status": {"jobsStatus": ["x", {"active": None}]}})["phase"] == "Pending"
