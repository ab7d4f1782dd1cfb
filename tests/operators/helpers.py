"""DAG sources and job scripts shared by the Airflow-level tests."""

from __future__ import annotations

import json
from typing import Any

from tests.client.jobs import job
from tests.fixtures.job_driver import JobDriver

HEADER = '''
from datetime import datetime, timedelta
from airflow.sdk import DAG, Param
from airflow_provider_training.operators import *  # noqa: F403
from airflow_provider_training.sensors import TrainingJobSensor
'''


def dag_file(dag_id: str, body: str, params: str = "{}") -> str:
    return (HEADER + f'''
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, params={params}) as dag:
''' + "\n".join("    " + line for line in body.strip().splitlines()) + "\n")


def job_literal(kind: str = "PyTorchJob", name: str = "mnist", replicas: dict[str, int] | None = None) -> str:
    return json.dumps(job(kind, name, replicas))


def xcom(ti: Any, key: str) -> Any:
    return ti.xcom_pull(task_ids=ti.task_id, key=key)


def succeed(lines: list[str] | None = None, delay: float = 0.0) -> Any:
    def script(driver: JobDriver, job: dict[str, Any]) -> None:
        import time

        meta = job["metadata"]
        kind, name, ns = job["kind"], meta["name"], meta["namespace"]
        replicas = {rtype: spec.get("replicas", 1) for rtype, spec in _replica_specs(job).items()}
        pods = driver.start(kind, name, ns, replicas)
        for line in lines or []:
            driver.log(ns, pods[0], [line], container=_container(kind))
        time.sleep(delay)
        driver.succeed(kind, name, ns)

    return script


def fail(lines: list[str], exit_code: int = 3, delay: float = 0.0) -> Any:
    def script(driver: JobDriver, job: dict[str, Any]) -> None:
        import time

        meta = job["metadata"]
        pods = driver.start(job["kind"], meta["name"], meta["namespace"])
        driver.log(meta["namespace"], pods[0], lines, container=_container(job["kind"]))
        time.sleep(delay)
        driver.fail(job["kind"], meta["name"], meta["namespace"], replica=_first_type(job), exit_code=exit_code)

    return script


def run_only() -> Any:
    def script(driver: JobDriver, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        driver.start(job["kind"], meta["name"], meta["namespace"], log={f"{meta['name']}-{_first_type(job).lower()}-0": ["step 1"]})

    return script


def _replica_specs(job: dict[str, Any]) -> dict[str, Any]:
    from airflow_provider_training.specs.kinds import KINDS

    return dict(job["spec"][KINDS[job["kind"]].replica_specs_field])


def _first_type(job: dict[str, Any]) -> str:
    return next(iter(_replica_specs(job)))


def _container(kind: str) -> str:
    from airflow_provider_training.specs.kinds import KINDS

    return KINDS[kind].default_container
