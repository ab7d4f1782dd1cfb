"""A worker that dies mid-wait, and a task that is killed: a real Airflow run (``dag.test()``, what
``airflow dags test`` runs) in a subprocess that the test SIGKILLs or SIGTERMs.

``airflow dags test`` names each run after the current time, so a second invocation would be another
DAG run, not a retry of the crashed one; the subprocess therefore calls ``dag.test()`` with a fixed
``run_after`` so that the rerun has the crashed run's run_id, as the scheduler's retry would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.operators.helpers import dag_file, job_literal
from tests.waiting import wait_for

LOGICAL_DATE = "2026-01-01T00:00:00+00:00"


RUNNER = """
import sys
from datetime import datetime
from airflow.dag_processing.dagbag import DagBag
dag = DagBag(dag_folder=sys.argv[1]).dags[sys.argv[2]]
when = datetime.fromisoformat(sys.argv[3])
dag.test(logical_date=when, run_after=when)
"""


def _dags_test(dag: Any, control_plane: Any, out: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "AIRFLOW__TRAINING__KUBERNETES_CONN_ID": "",
        "AIRFLOW__TRAINING__EMBEDDED_HOME": str(control_plane.home),
    }
    with open(out, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-c", RUNNER, dag.fileloc, dag.dag_id, LOGICAL_DATE],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _jobs(job_driver: Any, namespace: str) -> list[str]:
    items = job_driver.custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")["items"]
    return [j["metadata"]["name"] for j in items]


def test_a_retry_after_a_worker_crash_reattaches_to_the_running_job(
    write_dag: Any, embedded_default: Any, job_driver: Any, test_namespace: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"  # the training runs until the test creates this file
    script = f"import os, time\nprint('training', flush=True)\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)"
    dag = write_dag(
        dag_file(
            "crash",
            f'''
PyTorchJobOperator(task_id="train", job={job_literal(script=script)}, namespace="{test_namespace}", poll_interval=1)
''',
        ),
        "crash",
    )
    first = _dags_test(dag, embedded_default, tmp_path / "first.log")
    try:
        wait_for(
            lambda: "is Running" in (tmp_path / "first.log").read_text(errors="replace"),
            90,
            "the job to run",
            interval=0.1,
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the worker dies: no on_kill, no cleanup
        first.wait(10)
    assert _jobs(job_driver, test_namespace) == ["mnist"]

    second = _dags_test(dag, embedded_default, tmp_path / "second.log")
    try:
        wait_for(
            lambda: "Reattaching to PyTorchJob" in (tmp_path / "second.log").read_text(errors="replace"),
            90,
            "the retry to reattach",
            interval=0.1,
        )
        go.touch()
        assert second.wait(60) == 0, (tmp_path / "second.log").read_text(errors="replace")[-3000:]
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    assert _jobs(job_driver, test_namespace) == ["mnist"]  # exactly one job: no duplicate submission
    done = job_driver.custom.get_namespaced_custom_object("kubeflow.org", "v1", test_namespace, "pytorchjobs", "mnist")
    assert done["status"]["conditions"][-1]["type"] == "Succeeded"
    assert "[mnist-master-0] training" in (tmp_path / "second.log").read_text(errors="replace")


def test_killing_the_running_task_deletes_the_job(
    write_dag: Any, embedded_default: Any, job_driver: Any, test_namespace: str, tmp_path: Path
) -> None:
    dag = write_dag(
        dag_file(
            "killed",
            f'''
PyTorchJobOperator(task_id="train", job={job_literal(script="import time; time.sleep(120)")},
                   namespace="{test_namespace}")
''',
        ),
        "killed",
    )
    proc = _dags_test(dag, embedded_default, tmp_path / "killed.log")
    try:
        wait_for(
            lambda: "is Running" in (tmp_path / "killed.log").read_text(errors="replace"),
            90,
            "the job to run",
            interval=0.1,
        )
        os.kill(proc.pid, signal.SIGTERM)  # what the supervisor sends a task it kills; Airflow calls on_kill
        wait_for(lambda: _jobs(job_driver, test_namespace) == [], 30, "the job to be deleted", interval=0.1)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "the task was killed: PyTorchJob" in (tmp_path / "killed.log").read_text(errors="replace")
