"""Fixtures of the deploy tests: two trained digit classifiers pushed as ModelKits, InferenceServices
that are deleted (and their predictor processes stopped) after each test, and the embedded control
plane of the session as the default cluster of the Airflow tasks."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops import transfer
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.reference import parse
from tests.paths import ROOT
from tests.waiting import wait_for

ISVC = ("serving.kserve.io", "v1beta1", "inferenceservices")


@dataclass(frozen=True)
class PushedModel:
    reference: str
    digest: str
    directory: Path

    @property
    def uri(self) -> str:
        return f"kit://{self.reference}"

    def logits(self, rows: Any) -> list[list[float]]:
        """What this model answers for ``rows``, computed here without the predictor."""
        import torch

        module = torch.jit.load(str(self.directory / "model.pt"))
        with torch.no_grad():
            return module(torch.tensor(rows, dtype=torch.float32)).tolist()  # type: ignore[no-any-return]


def train(out: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "dags/code/train.py"), "--output", str(out), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def push(directory: Path, reference: str) -> PushedModel:
    ref = parse(reference)
    packmod.pack(directory, reference=ref)
    with make_client(ref.registry, plain_http=True) as client:
        result = transfer.push(LocalStore(), ref, client)
    return PushedModel(str(ref), result.digest, directory)


@pytest.fixture(scope="session")
def digits_models(tmp_path_factory: pytest.TempPathFactory, registry: Any) -> dict[str, PushedModel]:
    """``v1`` (2 epochs) and ``v2`` (6 epochs, another seed) in ``<registry>/deploy-tests/digits``."""
    root = tmp_path_factory.mktemp("digits-models")
    runs = {
        "v1": train(root / "v1", "--epochs", "2"),
        "v2": train(root / "v2", "--epochs", "6", "--seed", "1"),
    }
    for proc in runs.values():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    return {tag: push(root / tag, f"{registry.host}/deploy-tests/digits:{tag}") for tag in runs}


@pytest.fixture
def isvc_api(kube_api: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(kube_api)


@pytest.fixture
def plain_http_secret(kube_api: Any, test_namespace: str) -> str:
    """The Secret the storage initializer reads for the test registry (plain HTTP, no login)."""
    from kubernetes import client

    client.CoreV1Api(kube_api).create_namespaced_secret(
        test_namespace,
        {"metadata": {"name": "kitops-credentials"}, "stringData": {"KIT_UNPACK_FLAGS": "--plain-http"}},
    )
    return "kitops-credentials"


def pods_of(kube_api: Any, namespace: str, name: str) -> list[Any]:
    from kubernetes import client

    return list(
        client.CoreV1Api(kube_api)
        .list_namespaced_pod(namespace, label_selector=f"serving.kserve.io/inferenceservice={name}")
        .items
    )


def delete_and_wait(kube_api: Any, namespace: str, name: str, timeout: float = 30) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    try:
        client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(*ISVC[:2], namespace, ISVC[2], name)
    except ApiException as exc:
        if exc.status != 404:
            raise
    deadline = time.monotonic() + timeout
    while pods_of(kube_api, namespace, name):
        assert time.monotonic() < deadline, f"predictor pods of {namespace}/{name} were not deleted"
        time.sleep(0.1)


@pytest.fixture
def inference_services(kube_api: Any, isvc_api: Any, test_namespace: str) -> Iterator[Callable[..., dict[str, Any]]]:
    """``create(spec, annotations=None, name=None)`` creates an InferenceService in the test's namespace;
    all are deleted at teardown (so their predictor processes stop before the control plane does)."""
    created: list[str] = []

    def create(
        spec: dict[str, Any], annotations: dict[str, str] | None = None, name: str | None = None
    ) -> dict[str, Any]:
        name = name or f"isvc-{uuid.uuid4().hex[:6]}"
        body = {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": spec,
        }
        created.append(name)
        obj: dict[str, Any] = isvc_api.create_namespaced_custom_object(*ISVC[:2], test_namespace, ISVC[2], body)
        return obj

    yield create
    for name in created:
        delete_and_wait(kube_api, test_namespace, name)


def wait_for_isvc(
    isvc_api: Any, namespace: str, name: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = 90
) -> dict[str, Any]:
    """The InferenceService ``name`` once ``predicate`` holds for it; on a timeout, its last status."""
    last: dict[str, Any] = {}

    def check() -> dict[str, Any] | None:
        last["obj"] = obj = isvc_api.get_namespaced_custom_object(*ISVC[:2], namespace, ISVC[2], name)
        return obj if predicate(obj) else None

    def said() -> str:
        return f"{name}; last status: {json.dumps(last['obj'].get('status'), indent=1)}"

    return wait_for(check, timeout, said, interval=0.1)


def ready(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    predictor = (status.get("components") or {}).get("predictor") or {}
    return (
        status.get("observedGeneration") == obj["metadata"]["generation"]
        and any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        and predictor.get("latestReadyRevision") == predictor.get("latestCreatedRevision")
    )


def failed(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return status.get("observedGeneration") == obj["metadata"]["generation"] and (
        (status.get("modelStatus") or {}).get("transitionStatus") in ("BlockedByFailedLoad", "InvalidSpec")
    )


@pytest.fixture
def embedded_default(control_plane: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Tasks without a ``kubernetes_conn_id`` reach the session's control plane."""
    monkeypatch.setenv("AIRFLOW_TRAINING_HOME", str(control_plane.home))
    return control_plane


@pytest.fixture
def registry_connection(registry: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ``modelkit_registry`` connection to the session's plain-HTTP registry."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_DEPLOY_REGISTRY",
        json.dumps({"conn_type": "modelkit_registry", "host": registry.host, "extra": {"plain_http": True}}),
    )
    return "deploy_registry"


def xcoms(dag_id: str, run_id: str) -> dict[tuple[str, str], Any]:
    from airflow.models.xcom import XComModel
    from airflow.settings import Session

    with Session() as session:
        rows = session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.run_id == run_id).all()
        out = {}
        for r in rows:
            value = r.value
            if isinstance(value, (bytes, str)):
                with contextlib.suppress(ValueError):
                    value = json.loads(value)
            out[(r.task_id, r.key)] = value
        return out


def task_states(run: Any) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.settings import Session

    with Session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id)
        return {ti.task_id: str(ti.state) for ti in tis}
