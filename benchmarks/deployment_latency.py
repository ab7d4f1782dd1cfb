"""Airflow's own latency around a training job: a real deployment (api-server, scheduler,
dag-processor, triggerer; LocalExecutor) against ``dag.test()``, side by side in the same run.

Two intervals per run, seen from outside by polling the control plane every 50 ms:

- **start**: from the trigger (``POST /api/v2/dags/{id}/dagRuns``, or the call of ``dag.test()``)
  until the job's first replica is ``Running``;
- **finish**: from the job's ``Succeeded`` until the training task is ``success`` (its end date).

The DAG is the deployment tests' ``fault_clear`` (one PyTorchJob replica that waits for a release
file, created here once the replica runs), so the job itself costs next to nothing.

    PYTHONPATH=src:. python benchmarks/deployment_latency.py [--runs 3] [--deferrable]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DAG = "fault_clear"

DAG_TEST = """
import json, sys, time
from airflow.dag_processing.dagbag import DagBag
dag = DagBag(dag_folder=sys.argv[1]).get_dag(sys.argv[2])
print("T0", time.time(), flush=True)
run = dag.test(run_conf=json.loads(sys.argv[3]))
[ti] = [t for t in run.get_task_instances() if t.task_id == "train"]
print("END", ti.state, ti.end_date.timestamp(), flush=True)
"""


def kube(plane: Any) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


def watch_job(
    api: Any, seen: set[str], release: Path, timeout: float = 600, failed: Any = lambda: None
) -> tuple[float, float]:
    """(time the first replica of a new job of DAG was Running, time the job Succeeded)."""
    from kubernetes import client

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    selector = f"airflow-training/dag-id={DAG}"
    deadline = time.time() + timeout
    running = 0.0
    while time.time() < deadline:
        if (why := failed()) is not None:
            raise RuntimeError(why)
        if not running:
            for pod in core.list_namespaced_pod("default", label_selector=selector).items:
                if pod.metadata.uid not in seen and pod.status.phase == "Running":
                    seen.add(pod.metadata.uid)
                    running = time.time()
                    release.touch()
        else:
            for job in custom.list_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs")["items"]:
                if job["metadata"]["uid"] in seen:
                    continue
                done = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}
                if (
                    done.get("Succeeded") == "True"
                    and (job.get("metadata") or {}).get("labels", {}).get("airflow-training/dag-id") == DAG
                ):
                    seen.add(job["metadata"]["uid"])
                    return running, time.time()
        time.sleep(0.05)
    raise TimeoutError("the job did not run and succeed in time")


def deployment_run(d: Any, api: Any, seen: set[str], tmp: Path, i: int) -> tuple[float, float]:
    release = tmp / f"release-deployment-{i}"
    t0 = time.time()
    run_id = d.trigger(DAG, {"release": str(release)})
    running, succeeded = watch_job(api, seen, release)
    run = d.wait_run(DAG, run_id, timeout=600)
    assert run["state"] == "success", d.failure_details(DAG, run_id)
    [ti] = d.task_instances(DAG, run_id)
    from datetime import datetime

    end = datetime.fromisoformat(ti["end_date"].replace("Z", "+00:00")).timestamp()
    return running - t0, end - succeeded


def dag_test_run(env: dict[str, str], api: Any, seen: set[str], tmp: Path, i: int) -> tuple[float, float]:
    release = tmp / f"release-dagtest-{i}"
    log = tmp / f"dag-test-{i}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                DAG_TEST,
                str(ROOT / "tests/deployment/dags"),
                DAG,
                json.dumps({"release": str(release)}),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()

    def failed() -> str | None:
        code = proc.poll()
        return None if code is None else f"dag.test() exited {code}: {log.read_text()[-3000:]}"

    running, succeeded = watch_job(api, seen, release, failed=failed)
    proc.wait(timeout=600)
    reader.join(timeout=10)
    t0 = float(next(line.split()[1] for line in lines if line.startswith("T0 ")))
    _, state, end = next(line.split() for line in lines if line.startswith("END "))
    assert state == "success", lines[-20:]
    return running - t0, float(end) - succeeded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from tests.fixtures.airflow_deployment import start_deployment
    from tests.fixtures.control_plane import FAST_SETTINGS

    from airflow_provider_training.embedded import start, stop

    tmp = Path(tempfile.mkdtemp(prefix="bench-deployment-"))
    plane = start(tmp / "plane", env=FAST_SETTINGS)
    d = None
    try:
        d = start_deployment(tmp / "airflow", plane, SimpleNamespace(host="127.0.0.1:9"))
        d.wait_for_dags(DAG)
        d.unpause(DAG)
        # dag.test() in its own Airflow home (own SQLite DB), same control plane, the DAG from the same file
        test_home = tmp / "dag-test-home"
        test_env = {k: v for k, v in d.env.items() if not k.startswith("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE")}
        test_env |= {
            "AIRFLOW_HOME": str(test_home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{test_home / 'airflow.db'}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "tests/deployment/dags"),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        }
        test_home.mkdir()
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"], env=test_env, check=True, capture_output=True
        )
        api = kube(plane)
        seen: set[str] = set()
        results: dict[str, list[tuple[float, float]]] = {"deployment": [], "dag.test()": []}
        for i in range(args.runs):  # alternate, so load drifts hit both alike
            results["deployment"].append(deployment_run(d, api, seen, tmp, i))
            results["dag.test()"].append(dag_test_run(test_env, api, seen, tmp, i))
    finally:
        if d is not None:
            d.stop()
        stop(tmp / "plane", replicas=True)

    print(
        f"{'':12} {'trigger -> replica Running':>28} {'job Succeeded -> task success':>31}   (median of {args.runs}, s)"
    )
    medians = {}
    for name, rows in results.items():
        medians[name] = (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))
        print(
            f"{name:12} {medians[name][0]:28.2f} {medians[name][1]:31.2f}   runs: {[tuple(round(x, 2) for x in r) for r in rows]}"
        )
    dep, test = medians["deployment"], medians["dag.test()"]
    print(f"{'ratio':12} {dep[0] / test[0]:27.2f}x {dep[1] / max(test[1], 1e-3):30.2f}x   (deployment / dag.test())")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
