"""The training cockpit's test DAG (tests/ui): a 2-replica PyTorchJob whose replicas report metrics
and then wait for a signal file (so a test can act while they run; ``worker_exit`` makes worker 0
fail), and a packaging task that pushes a ModelKit."""

from datetime import datetime

from airflow.sdk import DAG, Param

from airflow_provider_training.operators import PyTorchJobOperator
from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator

# Each replica runs this (Jinja-rendered: {{ params.* }}). RANK 0 is the master, 1 is worker 0.
REPLICA = """
import json, os, pathlib, sys, time
rank = int(os.environ.get("RANK", "0"))
for epoch in range(1, {{ params.epochs }} + 1):
    print("rank", rank, "epoch", epoch, flush=True)
    if rank == 0:
        print("METRIC " + json.dumps(dict(step=epoch, loss=round(1.0 / epoch, 4), accuracy=round(1 - 0.5 / epoch, 4))), flush=True)
    time.sleep(0.2)
go = pathlib.Path("{{ params.go_file }}")
while not go.exists():
    time.sleep(0.05)
failing = int("{{ params.worker_exit }}")
if rank == 0 and failing:
    time.sleep(5)  # the worker's failure decides the job, not the master's success
if rank == 1:
    print("worker 0 wrote this after the page opened:", go.read_text().strip(), flush=True)
    for _ in range({{ params.ticks }}):  # for benchmarks/cockpit.py: when each line was printed
        print("TICK", time.time(), flush=True)
        time.sleep(0.1)
    if failing:
        print("Traceback (most recent call last):", flush=True)
        print("RuntimeError: loss is NaN", flush=True)
    sys.exit(failing)
"""


def replica(count):
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {
            "spec": {"containers": [{"name": "pytorch", "image": "python:3.11", "command": ["python", "-c", REPLICA]}]}
        },
    }


with DAG(
    "cockpit_training",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={
        "epochs": Param(3, type="integer"),
        "workers": Param(1, type="integer"),
        "worker_exit": Param(0, type="integer"),
        "ticks": Param(0, type="integer"),
        "go_file": Param("/nonexistent", type="string"),
        "model_dir": Param("/nonexistent", type="string"),
        "reference": Param("", type="string"),
    },
) as dag:
    train = PyTorchJobOperator(
        task_id="train",
        job={
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "spec": {
                "runPolicy": {"backoffLimit": 0},
                "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica("{{ params.workers }}")},
            },
        },
        log_replicas="none",
    )
    package = ModelKitPackAndPushOperator(
        task_id="package",
        source="{{ params.model_dir }}",
        reference="{{ params.reference }}",
        registry_conn_id="modelkit_registry_default",
    )
    train >> package
