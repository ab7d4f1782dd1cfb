"""``InferenceServiceOperator`` in real DAG runs (``dag.test()``) against the session's control plane
and registry: create, update (a rollout) in deferrable mode, failure with KServe's reason and the
predictor's log tail, and the rollback that keeps the last good model in the spec."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.deploy.conftest import ISVC, delete_and_wait, task_states, xcoms

pytestmark = pytest.mark.slow

DAG = """
from airflow.sdk import DAG
from airflow_provider_training.operators.deploy import InferenceServiceOperator

with DAG("{dag_id}", schedule=None):
    InferenceServiceOperator(
        task_id="deploy",
        name="{name}",
        namespace="{namespace}",
        storage_uri="{reference}",
        registry_conn_id="deploy_registry",
        deferrable={deferrable},
        poll_interval=0.5,
        timeout=120,
        log_tail_lines=5,
    )
"""


def run_deploy(write_dag: Any, dag_id: str, name: str, namespace: str, reference: str, deferrable: bool) -> Any:
    dag = write_dag(
        DAG.format(dag_id=dag_id, name=name, namespace=namespace, reference=reference, deferrable=deferrable), dag_id
    )
    return dag.test()


def served_digit(url: str, name: str) -> int:
    from sklearn.datasets import load_digits

    row = load_digits().data[0].tolist()  # a zero
    body = {"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP32", "data": row}]}
    out = httpx.post(f"{url}/v2/models/{name}/infer", json=body, timeout=30).json()["outputs"][0]["data"]
    return max(range(10), key=out.__getitem__)


def test_create_then_update_deferrable(
    write_dag, airflow_db, embedded_default, registry_connection, digits_models, kube_api, isvc_api, test_namespace
):
    name = "digits"
    try:
        first = run_deploy(write_dag, "deploy_create", name, test_namespace, digits_models["v1"].reference, False)
        assert task_states(first) == {"deploy": "success"}
        pushed = xcoms("deploy_create", first.run_id)
        url = pushed[("deploy", "url")]
        obj = isvc_api.get_namespaced_custom_object(*ISVC[:2], test_namespace, ISVC[2], name)
        assert pushed[("deploy", "inference_service_uid")] == obj["metadata"]["uid"]
        assert pushed[("deploy", "return_value")]["storage_uri"] == digits_models["v1"].uri
        assert obj["metadata"]["annotations"]["serving.kserve.io/storage-secret"] == "kitops-credentials"
        assert served_digit(url, name) == 0

        second = run_deploy(write_dag, "deploy_update", name, test_namespace, digits_models["v2"].reference, True)
        assert task_states(second) == {"deploy": "success"}
        result = xcoms("deploy_update", second.run_id)[("deploy", "return_value")]
        assert result["url"] == url  # same InferenceService, same URL, new revision
        obj = isvc_api.get_namespaced_custom_object(*ISVC[:2], test_namespace, ISVC[2], name)
        assert obj["spec"]["predictor"]["model"]["storageUri"] == digits_models["v2"].uri
        assert obj["status"]["components"]["predictor"]["latestReadyRevision"] == result["revision"]
        assert served_digit(url, name) == 0
    finally:
        delete_and_wait(kube_api, test_namespace, name)


def test_failed_rollout_fails_the_task_with_reason_and_log_tail_and_rolls_back(
    write_dag, airflow_db, embedded_default, registry_connection, digits_models, registry, kube_api, isvc_api,
    test_namespace, capfd,
):  # fmt: skip
    name = "digits-bad"
    try:
        good = run_deploy(write_dag, "deploy_good", name, test_namespace, digits_models["v1"].reference, False)
        assert task_states(good) == {"deploy": "success"}
        url = xcoms("deploy_good", good.run_id)[("deploy", "url")]
        capfd.readouterr()

        missing = f"{registry.host}/deploy-tests/digits:missing"
        bad = run_deploy(write_dag, "deploy_bad", name, test_namespace, missing, False)
        output = capfd.readouterr()

        assert task_states(bad) == {"deploy": "failed"}
        log = output.out + output.err
        assert f"InferenceService {test_namespace}/{name} failed: ModelLoadFailed" in log
        assert "storage-initializer" in log and "missing" in log  # the predictor's log tail
        assert "rolled InferenceService" in log
        obj = isvc_api.get_namespaced_custom_object(*ISVC[:2], test_namespace, ISVC[2], name)
        assert obj["spec"]["predictor"]["model"]["storageUri"] == digits_models["v1"].uri  # rolled back
        assert served_digit(url, name) == 0  # and the good model never stopped serving
    finally:
        delete_and_wait(kube_api, test_namespace, name)
