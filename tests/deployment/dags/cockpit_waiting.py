"""DAGs of the cockpit's tests of a tab opened early, long logs, charts and TrainJob progress
(tests/ui/test_cockpit_waiting.py, tests/ui/test_cockpit_charts.py).

``cockpit_gated``: ``gate`` waits for the file ``params.gate_file`` (so a test opens the train task's
tab before its job exists), ``train`` runs a 1-replica PyTorchJob that prints ``params.steps``
METRIC lines (loss from 1.7 down to ``1.7 * 10**-params.decades``) and ``params.lines`` numbered
lines, then waits for ``params.go_file``; ``after`` makes no job and no ModelKit, and fails when
``params.fail_after`` is set (a DAG run that failed after its job succeeded).

``cockpit_trainjob``: a 1-node TrainJob that prints a METRIC line, reports its progress with the
Kubeflow SDK's ``update_trainjob_status(42, 30, {"loss": 0.5})`` when ``params.python`` has the SDK,
and waits for ``params.go_file``; a test may write ``status.trainerStatus`` meanwhile too.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, Param, task

from airflow_provider_training.operators import PyTorchJobOperator, TrainJobOperator

REPLICA = """
import json, pathlib, time
steps, lines, decades = {{ params.steps }}, {{ params.lines }}, {{ params.decades }}
for step in range(1, steps + 1):
    loss = 1.7 * 10 ** (-decades * (step - 1) / max(1, steps - 1))
    print("METRIC " + json.dumps({"step": step, "loss": loss, "accuracy": 1 - loss / 2}), flush=True)
for n in range(1, lines + 1):
    print(f"line {n} of {lines}", flush=True)
go = pathlib.Path("{{ params.go_file }}")
while not go.exists():
    time.sleep(0.05)
print("done", flush=True)
"""

NODE = """
import json, pathlib, time
print("METRIC " + json.dumps({"step": 1, "loss": 0.9}), flush=True)
try:
    from kubeflow.trainer import update_trainjob_status
except ImportError:
    pass
else:  # Trainer's status server, as training code reports to it
    print("reported", update_trainjob_status(42, 30, {"loss": 0.5}), flush=True)
go = pathlib.Path("{{ params.go_file }}")
while not go.exists():
    time.sleep(0.05)
print("METRIC " + json.dumps({"step": 2, "loss": 0.4}), flush=True)
"""

PATHS = {"gate_file": Param("/nonexistent", type="string"), "go_file": Param("/nonexistent", type="string")}

with DAG(
    "cockpit_gated",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={
        **PATHS,
        "steps": Param(3, type="integer"),
        "decades": Param(1, type="number"),
        "lines": Param(0, type="integer"),
        "fail_after": Param(False, type="boolean"),
    },
):

    @task
    def gate(params=None) -> None:
        path = Path(params["gate_file"])
        deadline = time.monotonic() + 600
        while not path.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} did not appear")
            time.sleep(0.1)

    @task
    def after(params=None) -> None:
        if params["fail_after"]:
            raise RuntimeError("failing after the training job, as asked (params.fail_after)")

    train = PyTorchJobOperator(
        task_id="train",
        job={
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "spec": {
                "runPolicy": {"backoffLimit": 0},
                "pytorchReplicaSpecs": {
                    "Master": {
                        "replicas": 1,
                        "restartPolicy": "Never",
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "pytorch", "image": "python:3.11", "command": ["python", "-c", REPLICA]}
                                ]
                            }
                        },
                    }
                },
            },
        },
        log_replicas="none",
    )
    gate() >> train >> after()

with DAG(
    "cockpit_trainjob",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"go_file": Param("/nonexistent", type="string"), "python": Param("python", type="string")},
):
    TrainJobOperator(
        task_id="train",
        job={
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": 1, "command": ["{{ params.python }}", "-c", NODE]},
            },
        },
        log_replicas="none",
    )
