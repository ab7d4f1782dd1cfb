"""The deployment fixture itself: four daemons up, a user logs in, DAGs parsed, a run without a
logical date goes through the scheduler, a LocalExecutor worker and the triggerer."""

from __future__ import annotations

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
    d.wait_deferred("fault_triggerer", run_id, "train")
    release.touch()
    run = d.wait_run("fault_triggerer", run_id, timeout=240)
    assert run["state"] == "success", d.failure_details("fault_triggerer", run_id)
    assert d.xcom("fault_triggerer", run_id, "train", "job_name").startswith("fault-triggerer-")
    # The first trigger of a fresh triggerer imports this provider's trigger module and clients:
    # that must not hold the triggerer's event loop (it did for 1-4 s when the clients were imported
    # at module level, on the loop).
    assert "async thread was blocked" not in d.log("triggerer"), d.log("triggerer")[-3000:]
