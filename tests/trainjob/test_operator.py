"""TrainJobOperator in real Airflow runs (``dag.test()``) against the embedded control plane: the v1
operators' contract for TrainJobs — identity, node-0's log in the task log, trainerStatus progress,
and a failure report naming the failed step with its exit code and log tail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from tests.operators.helpers import dag_file, xcom
from tests.trainjob.helpers import GROUP, PY, VERSION, runtime, trainjob

STEPS = (
    "import os, time\n"
    "rank = os.environ['PET_NODE_RANK']\n"
    "for step in (1, 2):\n"
    "    print(f'rank {rank} step {step}', flush=True); time.sleep(1.5)\n"
)
# What training code does with the Kubeflow SDK (its own venv: it pins an older kubernetes client):
# rank 0 reports progress to Trainer's status server, then both ranks step.
REPORTING_STEPS = (
    "import os\n"
    "if os.environ['PET_NODE_RANK'] == '0':\n"
    "    from kubeflow.trainer import update_trainjob_status\n"
    "    print('reported', update_trainjob_status(42, 30, {'loss': 0.5}), flush=True)\n" + STEPS
)
CRASH = "import os, sys\nprint('rank', os.environ['PET_NODE_RANK'], 'cannot read the data', flush=True)\nsys.exit(3 if os.environ['PET_NODE_RANK'] == '1' else 0)\n"


def test_trainjob_operator_streams_node_0_and_logs_the_sdks_progress_reports(
    run_dag: Any, test_namespace: str, kube_api: Any, capfd: Any, kubeflow_sdk_python: Path
) -> None:
    job = trainjob("steps", numNodes=2, command=[str(kubeflow_sdk_python), "-c", REPORTING_STEPS])
    dr = run_dag(
        dag_file("tj_ok", f'TrainJobOperator(task_id="train", job={job!r}, namespace="{test_namespace}")'),
        "tj_ok",
    )
    ti = dr.get_task_instance("train")
    assert ti.state == "success"
    assert (xcom(ti, "job_kind"), xcom(ti, "job_name")) == ("TrainJob", "steps")
    result = xcom(ti, "return_value")
    assert (result["state"], result["reason"]) == ("Succeeded", "AllJobsCompleted")
    stored = client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
        GROUP, VERSION, test_namespace, "trainjobs", "steps"
    )
    assert stored["metadata"]["labels"]["airflow-training/task-id"] == "train"
    out = "".join(capfd.readouterr())
    assert "] rank 0 step 2" in out and "rank 1 step" not in out  # node-0 only, by default
    assert "] reported True" in out  # update_trainjob_status, unchanged, inside the pod
    assert f"TrainJob {test_namespace}/steps progress: 42%; about 30 s left; loss=0.5" in out


def test_trainjob_operator_failure_names_the_step_exit_code_and_log(
    run_dag: Any, test_namespace: str, kube_api: Any, capfd: Any
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    never = runtime("no-retry", {"numNodes": 1, "torch": {}}, job_spec={"backoffLimit": 0})
    never["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] = (
        "Never"
    )
    custom.create_namespaced_custom_object(GROUP, VERSION, test_namespace, "trainingruntimes", never)
    job = trainjob("crash", runtime="no-retry", kind="TrainingRuntime", numNodes=2, command=[PY, "-c", CRASH])
    dr = run_dag(
        dag_file("tj_fail", f'TrainJobOperator(task_id="train", job={job!r}, namespace="{test_namespace}")'),
        "tj_fail",
    )
    assert dr.get_task_instance("train").state == "failed"
    out = "".join(capfd.readouterr())
    assert (
        f"TrainJob {test_namespace}/crash failed: FailedJobs: jobset failed due to one or more job failures "
        "(first failed job: crash-node-0)" in out
    )
    assert "Failed steps: node-1" in out
    assert "(exit code 3" in out and "rank 1 cannot read the data" in out


def test_trainjob_operator_refuses_an_invalid_trainjob_before_submitting(
    run_dag: Any, test_namespace: str, kube_api: Any, capfd: Any
) -> None:
    job = trainjob("bad", numNodes=2, command=[PY, "-c", "pass"], env=[{"name": "PET_MASTER_PORT", "value": "1"}])
    dr = run_dag(
        dag_file("tj_bad", f'TrainJobOperator(task_id="train", job={job!r}, namespace="{test_namespace}")'),
        "tj_bad",
    )
    assert dr.get_task_instance("train").state == "failed"
    assert "PET_MASTER_PORT" in "".join(capfd.readouterr())
    listed = client.CustomObjectsApi(kube_api).list_namespaced_custom_object(
        GROUP, VERSION, test_namespace, "trainjobs"
    )
    assert listed["items"] == []


def test_deferrable_operator_and_sensor_wait_for_trainjobs(
    run_dag: Any, test_namespace: str, kube_api: Any, capfd: Any, kubeflow_sdk_python: Path
) -> None:
    deferred = trainjob("deferred", numNodes=1, command=[str(kubeflow_sdk_python), "-c", REPORTING_STEPS])
    submitted = trainjob("watched", numNodes=1, command=[PY, "-c", STEPS])
    body = f"""
TrainJobOperator(task_id="train", job={deferred!r}, namespace="{test_namespace}", deferrable=True)
submit = TrainJobOperator(task_id="submit", job={submitted!r}, namespace="{test_namespace}", wait_for_completion=False)
wait = TrainingJobSensor(task_id="wait", job_name="watched", kind="TrainJob", namespace="{test_namespace}",
                         deferrable=True)
submit >> wait
"""
    dr = run_dag(dag_file("tj_defer", body), "tj_defer")
    states = {ti.task_id: ti.state for ti in dr.get_task_instances()}
    assert states == {"train": "success", "submit": "success", "wait": "success"}
    assert xcom(dr.get_task_instance("wait"), "return_value")["state"] == "Succeeded"
    out = "".join(capfd.readouterr())
    assert "] rank 0 step 2" in out  # node-0's log printed when the deferred task resumed
    # the trigger logged the progress report while the task was deferred
    assert f"TrainJob {test_namespace}/deferred progress: 42%; about 30 s left; loss=0.5" in out
