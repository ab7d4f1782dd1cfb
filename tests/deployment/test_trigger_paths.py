"""Every shipped DAG, started the ways users start it on a real deployment (scheduler, triggerer, API
server, LocalExecutor): runs without a logical date from the CLI (``airflow dags trigger [--conf]``),
the REST API v2 (``logical_date: null``) and the UI trigger form (REST with a Referer: ``triggered_by
ui``); ``scheduled_retraining`` from an event on its training-data Asset; and one run *with* a
logical date (REST), as a schedule or ``dag.test()`` makes them.

(``scheduled_retraining``'s cron schedule itself is not waited for: with ``catchup=False`` and no
``start_date`` Airflow 3.3 schedules its first run at the next 03:00, not at unpause.)

All runs start together and are shared by the assertions below (one deployment, one wait).
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest

from airflow_provider_training.operators.identity import DAG_ID, MAX_NAME, RUN_ID, TASK_ID, safe_label_value
from airflow_provider_training.operators.naming import DNS_1035, TAG

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # the shared runs start in the first test

SHIPPED = [
    "train_package_deploy",
    "scheduled_retraining",
    "ui_triggered_training",
    "tfjob_example",
    "mpijob_example",
    "xgboostjob_example",
    "package_in_training_job",
    "package_after_training",
]
# (dag_id, how, conf); "how" is rest | ui | cli
STARTS: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "train_package_deploy": ("train_package_deploy", "rest", {"epochs": 3}),
    "ui_form": ("ui_triggered_training", "ui", {"epochs": 2, "workers": 1}),
    "ui_cli_conf": ("ui_triggered_training", "cli", {"kind": "TFJob", "workers": 0, "epochs": 2}),
    "tfjob_example": ("tfjob_example", "cli", None),
    "tfjob_with_logical_date": ("tfjob_example", "dated", None),
    "mpijob_example": ("mpijob_example", "cli", None),
    "xgboostjob_example": ("xgboostjob_example", "rest", None),
    "package_in_training_job": ("package_in_training_job", "rest", None),
    "package_after_training": ("package_after_training", "cli", None),
}
TRAINING_TASKS = {
    "train_package_deploy": ["train"],
    "scheduled_retraining": ["train"],
    "ui_triggered_training": ["train_pytorchjob", "train_tfjob"],
    "tfjob_example": ["train"],
    "mpijob_example": ["train"],
    "xgboostjob_example": ["train"],
    "package_in_training_job": ["train_and_package"],
    "package_after_training": ["submit"],
}
PLURALS = {"PyTorchJob": "pytorchjobs", "TFJob": "tfjobs", "MPIJob": "mpijobs", "XGBoostJob": "xgboostjobs"}
TRIGGERED_BY = {"rest": "rest_api", "ui": "ui", "cli": "cli", "dated": "rest_api"}


def _asset_event(d: Any, name: str) -> None:
    assets = d.api("GET", "/api/v2/assets", params={"limit": 100}).json()["assets"]
    [asset] = [a for a in assets if a["name"] == name]
    response = d.api("POST", "/api/v2/assets/events", json={"asset_id": asset["id"], "extra": {"from": "test"}})
    assert response.status_code == 200, response.text


def _runs_of(d: Any, dag_id: str) -> list[dict[str, Any]]:
    return list(d.api("GET", f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 50}).json()["dag_runs"])


def _wait_for_run_types(d: Any, dag_id: str, types: set[str], timeout: float = 300) -> dict[str, str]:
    """Until a run of each type exists (the scheduler creates Asset-triggered runs on its loop)."""
    deadline = time.monotonic() + timeout
    while True:
        found = {r["run_type"]: r["dag_run_id"] for r in _runs_of(d, dag_id) if r["run_type"] in types}
        if set(found) == types or time.monotonic() > deadline:
            assert set(found) == types, f"{dag_id}: runs of types {sorted(found)} only, wanted {sorted(types)}"
            return found
        time.sleep(2)


@pytest.fixture(scope="module")
def runs(airflow_deployment: Any, kube_api: Any) -> dict[str, dict[str, Any]]:
    """label -> the finished run (REST representation, plus ``how``)."""
    from kubernetes import client

    d = airflow_deployment
    namespace = f"tpd-{uuid.uuid4().hex[:6]}"  # its own InferenceService "digits", apart from retraining's
    client.CoreV1Api(kube_api).create_namespace({"metadata": {"name": namespace}})
    d.wait_for_dags(*SHIPPED)
    for dag_id in SHIPPED:
        d.unpause(dag_id)  # scheduled_retraining: catchup=False schedules its latest 03:00 run now

    def start(label: str) -> tuple[str, str]:
        dag_id, how, conf = STARTS[label]
        if dag_id == "train_package_deploy":
            conf = {**(conf or {}), "namespace": namespace}
        if how == "cli":
            run_id = d.cli_trigger(dag_id, conf)
        elif how == "dated":
            run_id = d.trigger(dag_id, conf, logical_date=datetime.now(timezone.utc).isoformat())
        else:
            run_id = d.trigger(dag_id, conf, ui=how == "ui")
        return label, run_id

    with ThreadPoolExecutor(4) as pool:
        started = dict(pool.map(start, STARTS))
    _asset_event(d, "digits-training-data")
    retraining = _wait_for_run_types(d, "scheduled_retraining", {"asset_triggered"})

    finished: dict[str, dict[str, Any]] = {}
    everything = {label: (STARTS[label][0], run_id) for label, run_id in started.items()}
    everything |= {f"retraining_{kind}": ("scheduled_retraining", run_id) for kind, run_id in retraining.items()}
    for label, (dag_id, run_id) in everything.items():
        run = d.wait_run(dag_id, run_id, timeout=900)
        run["how"] = STARTS[label][1] if label in STARTS else label
        run["details"] = d.failure_details(dag_id, run_id) if run["state"] != "success" else ""
        finished[label] = run
    return finished


def test_every_shipped_dag_succeeds_when_triggered_without_a_logical_date(runs):
    failed = {label: run["details"] for label, run in runs.items() if run["state"] != "success"}
    assert not failed, "\n\n".join(failed.values())
    assert {run["dag_id"] for run in runs.values()} == set(SHIPPED)
    for label, run in runs.items():
        if label == "tfjob_with_logical_date":
            assert run["logical_date"] is not None
            continue
        assert run["logical_date"] is None, label
        if run["how"] in TRIGGERED_BY:
            assert str(run["triggered_by"]).lower() == TRIGGERED_BY[run["how"]], (label, run["triggered_by"])


def test_an_asset_event_retrains_without_a_logical_date(runs):
    by_asset = runs["retraining_asset_triggered"]
    assert by_asset["run_type"] == "asset_triggered" and str(by_asset["triggered_by"]).lower() == "asset"
    assert by_asset["logical_date"] is None
    assert by_asset["state"] == "success", by_asset["details"]


def test_each_training_task_made_one_job_named_after_its_run(runs, airflow_deployment, kube_api):
    from kubernetes import client

    d = airflow_deployment
    custom = client.CustomObjectsApi(kube_api)
    names: set[str] = set()
    for label, run in runs.items():
        dag_id, run_id = run["dag_id"], run["dag_run_id"]
        states = d.task_states(dag_id, run_id)
        for task_id in TRAINING_TASKS[dag_id]:
            if states.get(task_id) != "success":
                assert states.get(task_id) == "skipped", (label, task_id, states)  # the other branch
                continue
            name = d.xcom(dag_id, run_id, task_id, "job_name")
            kind = d.xcom(dag_id, run_id, task_id, "job_kind")
            namespace = d.xcom(dag_id, run_id, task_id, "job_namespace")
            assert DNS_1035.match(name) and len(name) <= MAX_NAME, name
            selector = f"{DAG_ID}={safe_label_value(dag_id)},{TASK_ID}={safe_label_value(task_id)},{RUN_ID}={safe_label_value(run_id)}"
            jobs = custom.list_namespaced_custom_object(
                "kubeflow.org", "v1", namespace, PLURALS[kind], label_selector=selector
            )["items"]
            assert [j["metadata"]["name"] for j in jobs] == [name], (label, task_id)
            conditions = {c["type"]: c["status"] for c in jobs[0]["status"].get("conditions") or []}
            assert conditions.get("Succeeded") == "True", (label, task_id, conditions)
            names.add(name)
    assert len(names) == sum(
        1
        for run in runs.values()
        for t in TRAINING_TASKS[run["dag_id"]]
        if d.task_states(run["dag_id"], run["dag_run_id"]).get(t) == "success"
    )  # no two runs share a job


def test_pushed_modelkits_are_in_the_registry_under_a_tag_per_run(runs, airflow_deployment, registry):
    d = airflow_deployment
    tags: dict[str, str] = {}
    for label, run in runs.items():
        dag_id, run_id = run["dag_id"], run["dag_run_id"]
        if "package" not in d.task_states(dag_id, run_id):
            continue
        reference = d.xcom(dag_id, run_id, "package", "reference")
        digest = d.xcom(dag_id, run_id, "package", "digest")
        repository, tag = reference.removeprefix(f"{registry.host}/").rsplit(":", 1)
        assert TAG.match(tag), tag
        tags[label] = f"{repository}:{tag}"
        for ref in (digest, tag):
            manifest = httpx.get(
                f"http://{registry.host}/v2/{repository}/manifests/{ref}",
                headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
                timeout=30,
            )
            assert manifest.status_code == 200, (label, ref, manifest.text)
            assert manifest.headers.get("Docker-Content-Digest") == digest, (label, ref)
    assert {"train_package_deploy", "ui_form", "ui_cli_conf", "xgboostjob_example"} <= set(tags)
    assert len(set(tags.values())) == len(tags), tags  # two runs on one day never share a tag
