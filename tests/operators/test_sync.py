"""TrainingJobOperator in real Airflow runs (``dag.test()``) against the embedded control plane."""

from __future__ import annotations

from typing import Any

from tests.fixtures.job_driver import JobDriver

DAG = '''
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider_training.operators import PyTorchJobOperator

JOB = {{
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {{"name": "{name}"}},
    "spec": {{"pytorchReplicaSpecs": {{"Master": {{"replicas": 1, "restartPolicy": "Never",
        "template": {{"spec": {{"containers": [{{"name": "pytorch", "image": "python:3.11",
                                               "command": ["python", "train.py"]}}]}}}}}}}}}},
}}

with DAG("{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(task_id="train", job=JOB, namespace="{namespace}", {extra})
'''


def dag_source(dag_id: str, namespace: str, name: str = "mnist", extra: str = "") -> str:
    return DAG.format(dag_id=dag_id, namespace=namespace, name=name, extra=extra)


def succeed_with_logs(driver: JobDriver, job: dict[str, Any]) -> None:
    meta = job["metadata"]
    driver.start(job["kind"], meta["name"], meta["namespace"], log={f"{meta['name']}-master-0": ["epoch 1 loss 0.5"]})
    driver.log(meta["namespace"], f"{meta['name']}-master-0", ["epoch 2 loss 0.2"])
    driver.succeed(job["kind"], meta["name"], meta["namespace"])


def test_sync_success(run_dag: Any, autopilot: Any, test_namespace: str) -> None:
    pilot = autopilot("PyTorchJob", test_namespace, "airflow-training/dag-id=sync_success", succeed_with_logs)
    dr = run_dag(dag_source("sync_success", test_namespace), "sync_success")
    ti = dr.get_task_instance("train")
    assert ti.state == "success", ti.state
    assert len(pilot.seen) == 1
