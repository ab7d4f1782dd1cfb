"""The deployment fixture itself: four daemons up, a user logs in, DAGs parsed, a run without a
logical date goes through the scheduler, a LocalExecutor worker and the triggerer."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # includes starting the deployment


def test_deployment_runs_a_deferrable_task_without_a_logical_date(airflow_deployment, tmp_path):
    d = airflow_deployment
    assert set(d.pids) == {"api-server", "scheduler", "dag-processor", "triggerer"}
    assert d.api("GET", "/api/v2/dags", params={"limit": 100}).status_code == 200
    d.wait_for_dags("fault_triggerer")
    d.unpause("fault_triggerer")
    release = tmp_path / "release"
    run_id = d.trigger("fault_triggerer", {"release": str(release)})
    assert d.run("fault_triggerer", run_id)["logical_date"] is None
    d.wait_parked("fault_triggerer", run_id, "train")
    release.touch()
    run = d.wait_run("fault_triggerer", run_id, timeout=240)
    assert run["state"] == "success", d.failure_details("fault_triggerer", run_id)
    assert d.xcom("fault_triggerer", run_id, "train", "job_name").startswith("fault-triggerer-")
    # The job succeeded, so the triggerer ended the task (end_from_trigger): the master's output and
    # the summary are there, printed and pushed by the trigger — no worker resumed the task.
    assert d.xcom("fault_triggerer", run_id, "train", "return_value")["state"] == "Succeeded"
    shown = d.ui_log("fault_triggerer", run_id, "train")
    assert re.search(r"\[fault-triggerer-[a-z0-9-]+-master-0\] released", shown), shown[-3000:]
    worker_part = d.task_log("fault_triggerer", run_id, "train")
    assert "Pausing task as DEFERRED" in worker_part or "deferred" in worker_part.lower(), worker_part[-2000:]
    assert "released" not in worker_part and "succeeded" not in worker_part, worker_part[-2000:]
    # The first trigger of a fresh triggerer imports this provider's trigger module and its clients:
    # no step of the triggerer's loop may hold it (an import at module level or on the loop did, for
    # 1-4 s). Airflow's own "async thread was blocked" watchdog cannot say who blocked; asyncio's debug
    # mode names the coroutine, and a loop merely starved by a busy machine shows no such step.
    assert d.slow_loop_steps(at_least=0.5) == [], d.log("triggerer")[-3000:]
