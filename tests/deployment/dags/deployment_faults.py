"""DAGs of the deployment tests' fault scenarios (a second DAG bundle of the test deployment).

Each trains a PyTorchJob whose Master waits until the file ``params.release`` exists, so a test
decides when the job finishes — after it has killed the triggerer or the task's process. Every try
writes its process id to ``<params.pid_dir>/<task_id>.<try>.pid`` so a test can ``kill -9`` exactly
the process running the operator.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param

from airflow_provider_training.operators import PyTorchJobOperator
from airflow_provider_training.operators.naming import MACROS

WAIT = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.2)\nprint('released')"


def record_pid(context: Any) -> None:
    folder = context["params"].get("pid_dir")
    if folder:
        ti = context["ti"]
        Path(folder, f"{ti.task_id}.{ti.try_number}.pid").write_text(str(os.getpid()))


def waiting_job(prefix: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "{{ run_name('" + prefix + "') }}"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "pytorch",
                                    "image": "ccr.ccs.tencentyun.com/ml-models/digits-train:latest",
                                    "command": ["python", "-c", WAIT, "{{ params.release }}"],
                                }
                            ]
                        }
                    },
                }
            }
        },
    }


PARAMS = {
    "release": Param("/nonexistent", type="string", description="The job finishes once this file exists."),
    "pid_dir": Param("", type="string", description="Where each try writes its pid."),
}

for dag_id, deferrable, retries in (
    ("fault_triggerer", True, 0),
    ("fault_worker", False, 1),
    ("fault_clear", False, 0),
    ("fault_scheduler", False, 0),  # kill -9 of the scheduler while the task waits (KubernetesExecutor)
):
    with DAG(
        dag_id=dag_id,
        schedule=None,
        catchup=False,
        params=PARAMS,
        user_defined_macros=MACROS,
        tags=["deployment-tests"],
        doc_md=__doc__,
    ):
        PyTorchJobOperator(
            task_id="train",
            job=waiting_job(dag_id.replace("_", "-")),
            deferrable=deferrable,
            retries=retries,
            retry_delay=timedelta(seconds=1),
            poll_interval=1.0,
            pre_execute=record_pid,
        )
