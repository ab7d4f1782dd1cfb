"""A task whose cluster connection lacks a permission fails with one sentence naming it: a real
Airflow run (``dag.test()``) of ``PyTorchJobOperator`` through a ``kubernetes`` connection whose
kubeconfig holds a service account's token, the account bound to the shipped
``deploy/rbac/airflow-worker.yaml`` Role with ``create`` on the training jobs taken out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from airflow_provider_training.embedded import ControlPlane
from tests.operators.helpers import dag_file, job_literal
from tests.paths import ROOT


def _kubeconfig(path: Path, plane: ControlPlane, token: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": plane.api_url, "certificate-authority": str(plane.ca)}}
                ],
                "users": [{"name": "worker", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "worker"}}],
                "current-context": "c",
            }
        )
    )
    return path


def test_a_missing_permission_fails_the_task_with_one_sentence_naming_it(
    run_dag: Any,
    control_plane: ControlPlane,
    kube_api: Any,
    test_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: Any,
) -> None:
    core, rbac = client.CoreV1Api(kube_api), client.RbacAuthorizationV1Api(kube_api)
    core.create_namespaced_service_account(test_namespace, {"metadata": {"name": "airflow-worker"}})
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "rbac" / "airflow-worker.yaml").read_text()) if d]
    role = next(d for d in docs if d["kind"] == "Role")
    role["rules"][0]["verbs"].remove("create")  # the training jobs' rule: everything but submitting
    rbac.create_namespaced_role(test_namespace, role)
    binding = {
        "metadata": {"name": "airflow-worker"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": "airflow-worker", "namespace": test_namespace}],
    }
    rbac.create_namespaced_role_binding(test_namespace, binding)
    token = core.create_namespaced_service_account_token(
        "airflow-worker", test_namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    kubeconfig = _kubeconfig(tmp_path / "worker.kubeconfig", control_plane, token)
    connection = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
    monkeypatch.setenv("AIRFLOW_CONN_RBAC_WORKER", json.dumps(connection))

    dr = run_dag(
        dag_file(
            "forbidden",
            f'PyTorchJobOperator(task_id="train", namespace="{test_namespace}", '
            f'kubernetes_conn_id="rbac_worker", job={job_literal()})',
        ),
        "forbidden",
    )
    assert dr.get_task_instance("train").state == "failed"
    out = "".join(capfd.readouterr())
    assert (
        f"The Kubernetes API refused to let system:serviceaccount:{test_namespace}:airflow-worker create "
        f'pytorchjobs.kubeflow.org in namespace "{test_namespace}" (403 Forbidden): grant it with this '
        "provider's Role in deploy/rbac/airflow-worker.yaml (docs/cluster.md, Permissions)."
    ) in out
    assert token not in out
    assert (
        client.CustomObjectsApi(kube_api).list_namespaced_custom_object(
            "kubeflow.org", "v1", test_namespace, "pytorchjobs"
        )["items"]
        == []
    )
