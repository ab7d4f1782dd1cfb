"""One way to reach a cluster: the hooks, and one ``DEFAULT`` meaning "``[training]
kubernetes_conn_id``, read when the task runs" for every operator that reaches one; "no connection"
is the embedded control plane of this machine, or, in a pod of an embedded control plane, that
plane through the pod's in-cluster configuration."""

from __future__ import annotations

import asyncio
import copy
import pickle
import time

import pytest

from airflow_provider_training.hooks.training import (
    DEFAULT,
    AsyncTrainingHook,
    ClusterUnavailable,
    TrainingHook,
    resolve_conn_id,
)


def test_default_survives_copies_and_pickles() -> None:
    # Airflow deep-copies operators (and their template fields): the sentinel must stay the sentinel.
    assert copy.deepcopy(DEFAULT) is DEFAULT
    assert pickle.loads(pickle.dumps(DEFAULT)) is DEFAULT


def test_default_is_read_when_the_hook_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "")
    assert resolve_conn_id(DEFAULT) is None
    assert TrainingHook().embedded
    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "cluster_a")
    assert resolve_conn_id(DEFAULT) == "cluster_a"
    assert TrainingHook().kubernetes_conn_id == "cluster_a"
    assert TrainingHook(kubernetes_conn_id=None).embedded  # None: the embedded control plane, as documented


@pytest.mark.parametrize(
    ("module", "cls", "kwargs"),
    [
        ("airflow_provider_training.operators.deploy", "InferenceServiceOperator", {"name": "m"}),
        ("airflow_provider_training.operators.modelkit", "ModelKitPackAndPushOperator", {"reference": "r/a/b:1"}),
    ],
)
@pytest.mark.parametrize("given", [{}, {"kubernetes_conn_id": None}])
def test_operators_read_the_configured_connection_at_run_time_not_at_parse_time(
    monkeypatch: pytest.MonkeyPatch, module: str, cls: str, kwargs: dict, given: dict
) -> None:
    import importlib

    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "")  # when the DAG file is parsed
    op = getattr(importlib.import_module(module), cls)(task_id="t", **kwargs, **given)
    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "cluster_b")  # when the task runs
    assert op.hook().kubernetes_conn_id == "cluster_b"


def test_an_empty_connection_id_is_the_embedded_control_plane() -> None:
    from airflow_provider_training.operators.deploy import InferenceServiceOperator

    assert InferenceServiceOperator(task_id="t", name="m", kubernetes_conn_id="").hook().embedded


def test_the_lookup_only_hook_never_starts_the_embedded_control_plane(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.setenv("AIRFLOW__TRAINING__EMBEDDED_HOME", str(tmp_path / "nothing-runs-here"))

    async def open_it() -> None:
        async with AsyncTrainingHook(kubernetes_conn_id=None, lookup_only=True).get_client():
            raise AssertionError("a client for a control plane that does not run")

    with pytest.raises(ClusterUnavailable, match="not running; start it with `airflow-training embedded start`"):
        asyncio.run(open_it())
    assert not (tmp_path / "nothing-runs-here").exists() or not any((tmp_path / "nothing-runs-here").iterdir())


# -- "no connection" inside a pod ------------------------------------------------------------------
IN_POD = """
import json, os
from kubernetes import client
from airflow_provider_training.hooks.training import TrainingHook
hook = TrainingHook()
pods = client.CoreV1Api(hook.api_client).list_namespaced_pod(os.environ["NAMESPACE"]).items
print(json.dumps({"embedded": hook.embedded, "pods": [p.metadata.name for p in pods],
                  "trigger": hook.trigger_connection()}))
"""


def _pretend_pod(monkeypatch: pytest.MonkeyPatch, tmp_path, host: str) -> None:
    """The two things in-cluster configuration is made of: the Service's address and the token."""
    from kubernetes.config import incluster_config

    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")


@pytest.mark.parametrize(
    ("host", "embedded_pod"),
    [
        ("127.0.0.1", True),  # the embedded control plane serves its pods on this machine's loopback
        ("::1", True),
        ("10.96.0.1", False),  # a cluster's `kubernetes` Service (a CI runner's pod): keeps the embedded plane
        ("127.0.0.1; rm -rf /", False),  # not an address
        ("1" * 100_000, False),
        ("", False),
    ],
)
def test_no_connection_in_a_pod_of_the_embedded_plane_means_that_plane(
    monkeypatch: pytest.MonkeyPatch, tmp_path, host: str, embedded_pod: bool
) -> None:
    from airflow_provider_training.hooks.training import in_embedded_pod
    from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator

    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "")
    _pretend_pod(monkeypatch, tmp_path, host)
    assert in_embedded_pod() is embedded_pod
    hook, aio = TrainingHook(), AsyncTrainingHook()
    assert hook.embedded is aio.embedded is not embedded_pod
    assert (hook.in_cluster, aio.in_cluster) == ((True, True) if embedded_pod else (None, None))
    # a pvc:// source is packed in a Job next to the claim: the pod cannot read the claim's directory
    packer = ModelKitPackAndPushOperator(task_id="t", reference="r/a/b:1", source="pvc://c/p")
    assert packer._runs_as_job() is embedded_pod
    if embedded_pod:  # the triggerer's own "no connection" is the same control plane
        assert hook.trigger_connection() == {"kubernetes_conn_id": None, "connection_extras": None}
    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "cluster_a")  # a connection always wins
    assert not TrainingHook().embedded and TrainingHook().in_cluster is None


def test_a_task_in_a_pod_of_the_embedded_plane_reaches_it_with_no_connection(
    kube_api, test_namespace: str, tmp_path
) -> None:
    """A real pod (a KubernetesExecutor worker, say) builds the hook with no connection: it reaches
    the control plane it runs on as its service account, and starts no control plane of its own."""
    import json
    import sys

    from kubernetes import client

    from tests.fixtures._kubernetes_executor import AIRFLOW_IMAGE
    from tests.paths import ROOT

    rbac = client.RbacAuthorizationV1Api(kube_api)
    rbac.create_namespaced_role_binding(
        test_namespace,
        {
            "metadata": {"name": "default-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": test_namespace}],
        },
    )
    home = tmp_path / "would-be-embedded-home"  # a path the pod sees: where a nested plane would start
    env = {
        "PYTHONPATH": f"{ROOT / 'src'}",
        "AIRFLOW_HOME": "/opt/airflow",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__TRAINING__KUBERNETES_CONN_ID": "",
        "AIRFLOW__TRAINING__EMBEDDED_HOME": str(home),
        "NAMESPACE": test_namespace,
    }
    container = {
        "name": "base",
        "image": AIRFLOW_IMAGE,
        "command": [sys.executable, "-c", IN_POD],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "volumeMounts": [{"name": "home", "mountPath": "/opt/airflow"}],
    }
    pod = {
        "metadata": {"name": "worker"},
        "spec": {"restartPolicy": "Never", "containers": [container], "volumes": [{"name": "home", "emptyDir": {}}]},
    }
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_pod(test_namespace, pod)
    deadline = time.monotonic() + 180
    while (phase := core.read_namespaced_pod("worker", test_namespace).status.phase) not in ("Succeeded", "Failed"):
        assert time.monotonic() < deadline, f"the pod is still {phase}"
        time.sleep(0.5)
    # (raw: the client would parse a log that looks like JSON and hand back its repr)
    log = core.read_namespaced_pod_log("worker", test_namespace, _preload_content=False).data.decode()
    assert phase == "Succeeded", log[-3000:]
    seen = json.loads(log.strip().splitlines()[-1])
    assert seen == {
        "embedded": False,
        "pods": ["worker"],
        "trigger": {"kubernetes_conn_id": None, "connection_extras": None},
    }
    assert not home.exists()  # no control plane was started from inside the pod
