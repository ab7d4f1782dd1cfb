"""Airflow's KubernetesExecutor with the embedded control plane as its cluster, laid out as the
official Helm chart lays out a release (``tests/fixtures/_kubernetes_executor.py``): every task
instance runs in a worker pod of namespace ``airflow`` made from the pod template, under the
``airflow-worker`` service account; the provider in it reaches the control plane through its
``kubernetes_default`` connection (``in_cluster``) under this provider's Role in ``ml``
(deploy/rbac/airflow-worker.yaml), and the api-server's Execution API over HTTP.

- ``train_package_deploy`` succeeds: one worker pod per task in ``kubectl get pods``, the job, the
  packaging Job and the InferenceService in ``ml``, the ModelKit in the registry;
- the worker pods' logs are the task logs: what the UI reads (the REST API's log endpoint) — from
  the pod through the Kubernetes API while the task runs (``KubernetesExecutor.get_task_log``, as
  the api-server's service account), from the logs claim the pod wrote once it finished;
- ``kill -9`` of the scheduler while a worker pod runs: the restarted scheduler adopts the pod (its
  ``airflow-worker`` label names the new scheduler job) and the task succeeds in its first try.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import httpx
import pytest

from tests.fixtures._kubernetes_executor import AIRFLOW_IMAGE, AIRFLOW_NAMESPACE, JOBS_NAMESPACE, kubectl
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),  # includes starting the deployment
    pytest.mark.parametrize("airflow_deployment", ["KubernetesExecutor"], indirect=True),
]
DAG_ID = "train_package_deploy"
TASKS = {"train", "package", "approve", "deploy", "smoke_test"}


def worker_pods(d: Any, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    """task_id -> its worker pod, as ``kubectl get pods`` lists them."""
    out = kubectl(d.kubeconfig, "-n", AIRFLOW_NAMESPACE, "get", "pods", "-l", f"dag_id={dag_id}", "-o", "json")
    pods = [p for p in json.loads(out)["items"] if p["metadata"]["annotations"].get("run_id") == run_id]
    return {p["metadata"]["annotations"]["task_id"]: p for p in pods}


@pytest.fixture(scope="module")
def run(airflow_deployment: Any) -> dict[str, Any]:
    d = airflow_deployment
    d.wait_for_dags(DAG_ID)
    d.unpause(DAG_ID)
    run_id = d.trigger(DAG_ID, {"epochs": 1, "namespace": JOBS_NAMESPACE})
    finished = d.wait_run(DAG_ID, run_id, timeout=600)
    finished["details"] = d.failure_details(DAG_ID, run_id) if finished["state"] != "success" else ""
    return finished


def test_train_package_deploy_runs_every_task_in_a_worker_pod(run, airflow_deployment, registry):
    d = airflow_deployment
    assert run["state"] == "success", run["details"]
    run_id = run["dag_run_id"]
    # A task is done when its pod reports it through the Execution API; the pod's process then ends.
    pods = wait_for(
        lambda: (
            (p := worker_pods(d, DAG_ID, run_id))
            and all(pod["status"]["phase"] in ("Succeeded", "Failed") for pod in p.values())
            and p
        ),
        60,
        "the worker pods to end",
        interval=0.5,
    )
    assert set(pods) == TASKS
    for task_id, pod in pods.items():
        assert pod["status"]["phase"] == "Succeeded", (task_id, pod["status"])
        assert pod["spec"]["serviceAccountName"] == "airflow-worker", task_id
        assert pod["spec"]["containers"][0]["image"] == AIRFLOW_IMAGE
        assert pod["metadata"]["labels"]["kubernetes_executor"] == "True"
    # what the provider made, it made in the jobs namespace, under the shipped Role
    job = d.xcom(DAG_ID, run_id, "train", "job_name")
    assert d.xcom(DAG_ID, run_id, "train", "job_namespace") == JOBS_NAMESPACE
    assert json.loads(kubectl(d.kubeconfig, "-n", JOBS_NAMESPACE, "get", "pytorchjob", job, "-o", "json"))["status"]
    # the worker cannot read the output claim's directory: the ModelKit was packed by a Job beside it
    # (deleted once it succeeded, on_finish_action's default)
    assert f"in Job {JOBS_NAMESPACE}/modelkit-package-" in d.ui_log(DAG_ID, run_id, "package")
    isvc = json.loads(kubectl(d.kubeconfig, "-n", JOBS_NAMESPACE, "get", "inferenceservice", "digits", "-o", "json"))
    assert isvc["status"]["url"] == d.xcom(DAG_ID, run_id, "deploy", "url")
    reference = d.xcom(DAG_ID, run_id, "package", "reference")
    digest = d.xcom(DAG_ID, run_id, "package", "digest")
    repository, tag = reference.removeprefix(f"{registry.host}/").rsplit(":", 1)
    manifest = httpx.get(
        f"http://{registry.host}/v2/{repository}/manifests/{tag}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        timeout=30,
    )
    assert manifest.status_code == 200 and manifest.headers["Docker-Content-Digest"] == digest


def test_worker_pod_logs_are_the_task_logs(run, airflow_deployment):
    d = airflow_deployment
    run_id = run["dag_run_id"]
    shown = d.ui_log(DAG_ID, run_id, "train")
    job = d.xcom(DAG_ID, run_id, "train", "job_name")
    # the operator's lines and the replicas' (streamed into the task log), written by the worker pod
    assert f"Submitted PyTorchJob {JOBS_NAMESPACE}/{job}" in shown, shown[-3000:]
    assert f"[{job}-master-0] rank 0: test accuracy" in shown, shown[-3000:]
    assert "/dag_id=train_package_deploy/" in shown  # read from the logs claim the pod wrote
    pod = worker_pods(d, DAG_ID, run_id)["train"]["metadata"]["name"]
    assert f"Submitted PyTorchJob {JOBS_NAMESPACE}/{job}" in kubectl(d.kubeconfig, "-n", AIRFLOW_NAMESPACE, "logs", pod)


def test_a_restarted_scheduler_adopts_a_running_worker_pod(run, airflow_deployment, tmp_path):
    d = airflow_deployment
    dag_id = "fault_scheduler"
    d.wait_for_dags(dag_id)
    d.unpause(dag_id)
    release = tmp_path / "release"
    run_id = d.trigger(dag_id, {"release": str(release)})
    wait_for(lambda: "is Running" in d.task_log(dag_id, run_id, "train"), 240, "the job to run", interval=0.5)
    # While the task runs, the UI reads its log from the pod, through the Kubernetes API
    shown = d.ui_log(dag_id, run_id, "train")
    assert "Found logs through kube API" in shown, shown[-3000:]
    [pod] = worker_pods(d, dag_id, run_id).values()
    first = pod["metadata"]["labels"]["airflow-worker"]

    d.kill("scheduler", signal.SIGKILL)
    d.start("scheduler")

    def adopted() -> str | None:
        [now] = worker_pods(d, dag_id, run_id).values()
        label = str(now["metadata"]["labels"]["airflow-worker"])
        return label if label != first and now["status"]["phase"] == "Running" else None

    second = wait_for(adopted, 180, "the new scheduler to adopt the running worker pod", interval=0.5)
    assert f"attempting to adopt pod {pod['metadata']['name']}" in d.log("scheduler")
    release.touch()
    finished = d.wait_run(dag_id, run_id, timeout=240)
    assert finished["state"] == "success", d.failure_details(dag_id, run_id)
    [ti] = d.task_instances(dag_id, run_id)
    assert ti["try_number"] == 1  # adopted, not reset and run again
    schedulers = d.api("GET", "/api/v2/jobs", params={"job_type": "SchedulerJob", "is_alive": True}).json()["jobs"]
    assert [str(j["id"]) for j in schedulers] == [second]
    [pod] = worker_pods(d, dag_id, run_id).values()
    assert pod["metadata"]["labels"]["airflow-worker"] == second
