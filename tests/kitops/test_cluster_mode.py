"""Cluster-mode packaging, end to end: ``ModelKitPackAndPushOperator`` with a ``pvc://`` source and a
``kubernetes`` connection (to the session's embedded control plane, through its kubeconfig — the
cluster code path) runs a ``batch/v1`` Job with KitOps' image; the control plane maps that image to
this checkout's ``kit`` CLI (``tests/fixtures/control_plane.py``), so the Job really logs in, packs the
claim's directory and pushes to the Basic-auth registry."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_provider_training.embedded import ControlPlane
from airflow_provider_training.kitops import packagejob, transfer
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.credentials import Credential
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.reference import parse
from airflow_provider_training.kitops.unpack import unpack
from tests.fixtures.control_plane import kit_image_dir
from tests.kitops.conftest import make_tree
from tests.kitops.test_operators import _asset_events, _xcoms

FILES = {
    "Kitfile": "manifestVersion: 1.0.0\npackage:\n  name: mnist\nmodel:\n  name: mnist\n  path: model\n"
    "code:\n  - path: src\ndocs:\n  - path: README.md\n",
    "model/weights.bin": bytes(range(256)) * 64,
    "model/config.json": '{"layers": 3}',
    "src/train.py": "print('train')\n",
    "README.md": "# mnist\n",
}
WRONG_PASSWORD = "not-the-Pa55word"


def _conn(monkeypatch: pytest.MonkeyPatch, name: str, doc: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}", json.dumps(doc))


@pytest.fixture
def cluster(control_plane: ControlPlane, registry_basic: Any, monkeypatch: pytest.MonkeyPatch) -> ControlPlane:
    _conn(
        monkeypatch,
        "kube_embedded",
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(control_plane.kubeconfig)}},
    )
    registry = {"conn_type": "modelkit_registry", "host": registry_basic.host, "extra": {"plain_http": True}}
    _conn(monkeypatch, "tcr_basic", {**registry, "login": registry_basic.username, "password": registry_basic.password})
    _conn(monkeypatch, "tcr_wrong", {**registry, "login": registry_basic.username, "password": WRONG_PASSWORD})
    return control_plane


def _registry_manifest(registry: Any, repository: str, tag: str) -> tuple[str, bytes]:
    response = httpx.get(
        f"{registry.url}/v2/{repository}/manifests/{tag}",
        auth=(registry.username, registry.password),
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    response.raise_for_status()
    return response.headers["Docker-Content-Digest"], response.content


def test_pack_and_push_runs_as_a_job_on_the_cluster(
    write_dag: Any, cluster: ControlPlane, registry_basic: Any, kube_api: Any, test_namespace: str,
    tmp_path: Path, capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from kubernetes import client

    make_tree(cluster.home / "volumes" / "pvc" / test_namespace / "model-output" / "run1", FILES)
    repo = f"ml-models/mnist-{test_namespace}"
    dag = write_dag(
        f"""
        from airflow.sdk import DAG
        from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator, ModelKitPackOperator

        with DAG("modelkit_cluster", schedule=None):
            ModelKitPackAndPushOperator(
                task_id="package", source="pvc://model-output/run1", namespace="{test_namespace}",
                reference="{registry_basic.host}/{repo}:v1", registry_conn_id="tcr_basic",
                kubernetes_conn_id="kube_embedded", on_finish_action="keep", poll_interval=0.5, timeout=120,
            )
            ModelKitPackAndPushOperator(
                task_id="wrong_password", source="pvc://model-output/run1", namespace="{test_namespace}",
                reference="{registry_basic.host}/{repo}:never", registry_conn_id="tcr_wrong",
                registry_secret_name="wrong-credentials", kubernetes_conn_id="kube_embedded",
                poll_interval=0.5, timeout=120,
            )
            ModelKitPackOperator(
                task_id="pack_only", source="pvc://model-output/run1", namespace="{test_namespace}",
                reference="{registry_basic.host}/{repo}:v2", kubernetes_conn_id="kube_embedded",
            )
        """,
        "modelkit_cluster",
    )
    capfd.readouterr()
    run = dag.test()
    output = capfd.readouterr()
    task_log = output.out + output.err
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        "package": "success",
        "wrong_password": "failed",
        "pack_only": "failed",
    }, task_log[-3000:]

    # XCom: the digest is the registry's manifest digest, the size its manifest + blobs.
    x = _xcoms("modelkit_cluster", run.run_id)
    digest, raw = _registry_manifest(registry_basic, repo, "v1")
    assert x[("package", "reference")] == f"{registry_basic.host}/{repo}:v1"
    assert x[("package", "digest")] == digest
    manifest = json.loads(raw)
    assert x[("package", "size")] == len(raw) + manifest["config"]["size"] + sum(
        layer["size"] for layer in manifest["layers"]
    )
    assert {layer["path"] for layer in x[("package", "return_value")]["layers"]} == {"model", "src", "README.md"}
    events = _asset_events(f"modelkit://{registry_basic.host}/{repo}")
    assert [(e["tag"], e["digest"]) for e in events] == [("v1", digest)]

    # The pushed ModelKit unpacks to the claim's bytes.
    ref = parse(f"{registry_basic.host}/{repo}:v1")
    store = LocalStore(tmp_path / "verify")
    cred = Credential(registry_basic.username, registry_basic.password)
    with make_client(registry_basic.host, plain_http=True, credential=cred) as registry_client:
        assert transfer.pull(store, ref, registry_client).digest == digest
    out = unpack(store, ref, tmp_path / "out").directory
    for name, content in FILES.items():
        expected = content.encode() if isinstance(content, str) else content
        assert (out / name).read_bytes() == expected, name

    # The Job (kept) mounts the claim read-only and takes its credentials from the Secret, not its spec.
    jobs = client.BatchV1Api(kube_api).list_namespaced_job(test_namespace, _preload_content=False)
    by_task = {j["metadata"]["labels"]["airflow.apache.org/task-id"]: j for j in json.loads(jobs.data)["items"]}
    job = by_task["package"]
    assert [c["type"] for c in job["status"]["conditions"] if c["status"] == "True"][-1] == "Complete"
    pod_spec = job["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    assert container["image"] == packagejob.KIT_IMAGE
    claim = {"name": "source", "persistentVolumeClaim": {"claimName": "model-output", "readOnly": True}}
    assert claim in pod_spec["volumes"]
    env = {e["name"]: e for e in container["env"]}
    assert env["KIT_PASSWORD"]["valueFrom"] == {"secretKeyRef": {"name": "kitops-credentials", "key": "KIT_PASSWORD"}}
    core = client.CoreV1Api(kube_api)
    pods = core.list_namespaced_pod(test_namespace, label_selector=f"job-name={job['metadata']['name']}")
    pod_log = core.read_namespaced_pod_log(pods.items[0].metadata.name, test_namespace)
    assert "Log in successful" in pod_log and f"Pushed {digest}" in pod_log
    assert f"Pushed {digest}" in task_log  # the pod's log is followed into the task log

    # The password is nowhere but in the Secret: not in the Jobs, the pod log, the task log, XCom or
    # any kit command line (the image's kit records its argv).
    argv = (kit_image_dir(cluster.home) / "argv.log").read_text()
    assert f"kit login {registry_basic.host} -u {registry_basic.username} --password-stdin --plain-http" in argv
    everything = [json.dumps(job), json.dumps(by_task["wrong_password"]), pod_log, task_log, repr(x), argv]
    assert not [text for text in everything if registry_basic.password in text or WRONG_PASSWORD in text]
    secret = core.read_namespaced_secret("kitops-credentials", test_namespace)
    assert secret.string_data is None  # stringData is write-only, as on kube-apiserver
    assert base64.b64decode(secret.data["KIT_PASSWORD"]).decode() == registry_basic.password

    # Wrong password: the task fails with the Job's reason and kit's own error; nothing was pushed.
    failed = by_task["wrong_password"]["metadata"]["name"]
    assert f"packaging Job {test_namespace}/{failed} failed: BackoffLimitExceeded" in task_log
    assert f"authentication to {registry_basic.host} failed (HTTP 401 with credentials)" in task_log
    tags = httpx.get(
        f"{registry_basic.url}/v2/{repo}/tags/list", auth=(registry_basic.username, registry_basic.password)
    )
    assert tags.json()["tags"] == ["v1"]

    # A ModelKit packed in a Job would vanish with its pod: packing alone on a cluster is refused.
    assert "use ModelKitPackAndPushOperator, which packs and pushes in one Job" in task_log
