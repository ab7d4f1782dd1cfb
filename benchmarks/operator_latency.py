"""Time from a job's ``Succeeded`` condition to the Airflow task finishing (sync and deferrable
TrainingJobOperator under ``dag.test()``), and to the client's wait returning, against a naive loop
that GETs the job every 5 s — all measured in this run on an embedded control plane. The jobs are driven (``runPolicy.managedBy``
names another controller; this script writes their status) so the moment ``Succeeded`` is written
is known exactly.

    PYTHONPATH=src:. python benchmarks/operator_latency.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WORK = Path(tempfile.mkdtemp(prefix="bench-latency-"))
os.environ.update(
    {
        "AIRFLOW_HOME": str(WORK / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(WORK / "airflow" / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{WORK / 'airflow' / 'airflow.db'}",
        "AIRFLOW__TRAINING__KUBERNETES_CONN_ID": "",
        "AIRFLOW__TRAINING__EMBEDDED_HOME": str(WORK / "plane"),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }
)
(WORK / "airflow" / "dags").mkdir(parents=True)

DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider_training.operators import PyTorchJobOperator
with DAG("{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(task_id="train", job={job}, deferrable={deferrable}, log_replicas="master")
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    from airflow.dag_processing.dagbag import DagBag
    from kubernetes import client, config
    from tests.factories import simple_job as job
    from tests.fixtures.job_driver import JobDriver

    from airflow_provider_training.client import TrainingJobClient
    from airflow_provider_training.embedded import start, stop

    plane = start(WORK / "plane")
    try:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
        api = client.ApiClient(configuration)
        driver = JobDriver(api, WORK / "plane")
        jobs = TrainingJobClient(api)

        def play(name: str, stamps: list[float]) -> None:
            """Start the job once it is submitted, let the waiter settle, then mark it Succeeded."""
            while jobs.find("PyTorchJob", name, "default") is None:
                time.sleep(0.05)
            driver.start("PyTorchJob", name, "default")
            time.sleep(2.0)
            stamps.append(time.time())
            driver.succeed("PyTorchJob", name, "default")

        results: dict[str, list[float]] = {"sync": [], "deferrable": [], "client": [], "naive": []}
        for run in range(args.runs):
            for mode in ("sync", "deferrable"):
                name = f"{mode}-{run}"
                dag_id = f"latency_{mode}_{run}"
                path = WORK / "airflow" / "dags" / f"{dag_id}.py"
                path.write_text(DAG.format(dag_id=dag_id, job=job(name=name), deferrable=mode == "deferrable"))
                dag = DagBag(dag_folder=str(path)).dags[dag_id]
                stamps: list[float] = []
                player = threading.Thread(target=play, args=(name, stamps))
                player.start()
                dr = dag.test()
                player.join()
                ti = dr.get_task_instance("train")
                assert ti.state == "success", (mode, ti.state)
                results[mode].append(ti.end_date.timestamp() - stamps[0])

            for key in ("client", "naive"):
                name = f"{key}-{run}"
                jobs.create(job(name=name), namespace="default")
                stamps = []
                player = threading.Thread(target=play, args=(name, stamps))
                player.start()
                if key == "client":
                    jobs.wait("PyTorchJob", name, "default")
                else:
                    while not any(
                        c["type"] == "Succeeded"
                        for c in (jobs.get("PyTorchJob", name, "default").get("status") or {}).get("conditions", [])
                    ):
                        time.sleep(5)
                results[key].append(time.time() - stamps[0])
                player.join()

        baseline = statistics.median(results["naive"])
        print(f"runs: {args.runs}; seconds from Succeeded written to ...")
        print(f"{'':<46}{'median':>8}{'max':>8}{'vs naive':>10}")
        for key, label in (
            ("naive", "naive 5 s poll notices it"),
            ("client", "TrainingJobClient.wait returns"),
            ("sync", "task finished (sync, incl. Airflow)"),
            ("deferrable", "task finished (deferrable, incl. Airflow)"),
        ):
            values = results[key]
            print(
                f"{label:<46}{statistics.median(values):>8.3f}{max(values):>8.3f}"
                f"{statistics.median(values) / baseline:>10.3f}"
            )
    finally:
        stop(WORK / "plane", replicas=True)


if __name__ == "__main__":
    main()
