"""Image mode of the embedded node (``[training] embedded_runtime = oci``): the images of images/
built, pushed to a real registry and run with runc, with the kubelet's statuses and events for what
goes wrong on the way (a missing image, a private repository, a corrupt layer, no runc)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.embedded.node.oci import containerruntime as oci_runtime
from airflow_provider_training.embedded.node.podspec import PodConfigError
from airflow_provider_training.kitops.credentials import Credential
from airflow_provider_training.kitops.registry import RegistryClient, RegistryOptions
from tests.waiting import wait_for

KUBECTL_TIMEOUT = 120
# the first test to use built_images waits for the build (tests/fixtures/images.py: minutes when cold)
IMAGE_TEST_TIMEOUT = 2400


def core(plane: Any) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    return client.CoreV1Api(client.ApiClient(configuration))


@pytest.fixture
def namespace(oci_control_plane: Any) -> Any:
    api = core(oci_control_plane)
    name = f"img-{uuid.uuid4().hex[:8]}"
    api.create_namespace({"metadata": {"name": name}})
    yield name
    api.delete_namespace(name)


def pod(name: str, image: str, command: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    if command:
        container["command"] = command
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [container], **spec},
    }


def waiting_reason(api: Any, namespace: str, name: str) -> str:
    statuses = api.read_namespaced_pod(name, namespace).status.container_statuses or []
    return statuses[0].state.waiting.reason if statuses and statuses[0].state.waiting else ""


def events(api: Any, namespace: str, name: str) -> list[str]:
    items = api.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [f"{e.type} {e.reason} {e.message}" for e in items]


# -- what needs no image ------------------------------------------------------------------------------
def test_without_runc_a_pod_that_asks_for_image_mode_gets_a_clear_error_and_process_mode_is_unaffected(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("AIRFLOW_TRAINING_RUNC", str(tmp_path / "no-runc-here"))
    monkeypatch.setenv("AIRFLOW_TRAINING_RUNTIME", "oci")
    runtime = oci_runtime.OciRuntime(tmp_path, tmp_path / "node", lambda uid: None, lambda *a: None)
    try:
        asks = pod("p", "python:3.11")
        asks["metadata"]["annotations"] = {oci_runtime.RUNTIME_ANNOTATION: "oci"}
        with pytest.raises(PodConfigError) as raised:
            runtime.wants(asks)
        assert raised.value.reason == "CreateContainerError"
        assert "runc" in raised.value.message and "no-runc-here" in raised.value.message
        assert runtime.wants(pod("q", "python:3.11")) is False  # the node's default falls back to processes
        hostile = pod("r", "python:3.11")
        hostile["metadata"]["annotations"] = {oci_runtime.RUNTIME_ANNOTATION: "docker; rm -rf /" * 100}
        with pytest.raises(PodConfigError, match=r"'oci' .* or 'process'"):
            runtime.wants(hostile)
    finally:
        runtime.close()


def test_pull_secret_credentials_are_read_as_the_kubelet_reads_them():
    config = {"auths": {"ccr.ccs.tencentyun.com": {"auth": base64.b64encode(b"user:pa:ss").decode()}}}
    secret = {
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }
    found = oci_runtime.docker_config_credential(secret, "ccr.ccs.tencentyun.com")
    assert found == Credential("user", "pa:ss")
    assert oci_runtime.docker_config_credential(secret, "other.example.com") is None
    assert oci_runtime.docker_config_credential({"data": {".dockerconfigjson": "%%% not base64"}}, "x") is None
    huge = {"data": {".dockerconfigjson": base64.b64encode(b"[" * 100_000).decode()}}
    assert oci_runtime.docker_config_credential(huge, "x") is None


# -- a tiny image, pushed with the project's registry client ------------------------------------------
def push_tiny_image(registry: Any, repository: str, username: str = "", password: str = "") -> tuple[str, str]:
    """One gzip layer with one file; returns (reference, layer digest)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = os.urandom(64 * 1024)
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    blob = gzip.compress(raw.getvalue())
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": ["/hello"]},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()]},
        }
    ).encode()
    credential = Credential(username, password) if username else None
    with RegistryClient(registry.host, credential, RegistryOptions(plain_http=True)) as client:
        path = Path(f"/tmp/images-tiny-{uuid.uuid4().hex}")
        path.write_bytes(blob)
        try:
            client.push_blob(repository, digest, len(blob), path)
        finally:
            path.unlink()
        config_digest = client.push_bytes(repository, config)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": len(config),
            },
            "layers": [
                {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": len(blob)}
            ],
        }
        client.put_manifest(repository, "v1", json.dumps(manifest).encode())
    return f"{registry.host}/{repository}:v1", digest


# -- the node running images -------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(IMAGE_TEST_TIMEOUT)
def test_a_pod_runs_its_image_as_the_image_user_and_kubectl_exec_enters_it(oci_control_plane, built_images, namespace):
    api = core(oci_control_plane)
    image = built_images.reference("training")
    api.create_namespaced_pod(namespace, pod("sleeper", image, ["sleep", "600"]))
    wait_for(
        lambda: api.read_namespaced_pod("sleeper", namespace).status.phase == "Running",
        120.0,
        "the pod to run",
        interval=0.3,
    )
    env = {**os.environ, "KUBECONFIG": str(oci_control_plane.kubeconfig)}
    out = subprocess.run(
        ["kubectl", "exec", "-n", namespace, "sleeper", "--", "sh", "-c", "id -u; cat /etc/airflow-provider-training/image; pwd; command -v python"],
        capture_output=True, text=True, env=env, timeout=KUBECTL_TIMEOUT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1000", "digits-train", "/workspace", "/opt/venv/bin/python"]
    status = api.read_namespaced_pod("sleeper", namespace).status.container_statuses[0]
    assert status.image_id.endswith(built_images.digests["training"]["digest"])
    said = [e.split(" ", 2)[1:] for e in events(api, namespace, "sleeper")]
    reasons = [reason for reason, *_ in said]
    assert "Pulled" in reasons and "Started" in reasons
    # as the kubelet: "Pulling" only where the node did not hold the image yet (an earlier test of the
    # session may have pulled it), and then "Pulled" says it was pulled, not that it was present
    present = any(reason == "Pulled" and "already present on machine" in rest[0] for reason, *rest in said)
    assert present or "Pulling" in reasons, said
    api.delete_namespaced_pod("sleeper", namespace)


@pytest.mark.slow
@pytest.mark.timeout(IMAGE_TEST_TIMEOUT)
def test_a_missing_image_is_err_image_pull_then_image_pull_back_off_naming_the_registrys_answer(
    oci_control_plane, built_images, namespace
):
    api = core(oci_control_plane)
    image = f"{built_images.registry}/ml-models/no-such-image:v1"
    api.create_namespaced_pod(namespace, pod("missing", image, ["true"]))
    wait_for(lambda: waiting_reason(api, namespace, "missing") == "ErrImagePull", 60, "ErrImagePull", interval=0.3)
    wait_for(
        lambda: waiting_reason(api, namespace, "missing") == "ImagePullBackOff", 60, "ImagePullBackOff", interval=0.3
    )
    said = events(api, namespace, "missing")
    assert any(f'Failed Failed to pull image "{image}"' in e and "not found" in e for e in said), said
    assert any(e == f'Normal BackOff Back-off pulling image "{image}"' for e in said), said
    assert "Warning Failed Error: ImagePullBackOff" in said
    message = api.read_namespaced_pod("missing", namespace).status.container_statuses[0].state.waiting.message
    assert image in message
    api.delete_namespaced_pod("missing", namespace)


@pytest.mark.slow
@pytest.mark.timeout(IMAGE_TEST_TIMEOUT)
def test_a_private_repository_needs_its_pull_secret(oci_control_plane, built_images, registry_basic, namespace):
    api = core(oci_control_plane)
    reference, _ = push_tiny_image(registry_basic, "team/private", registry_basic.username, registry_basic.password)
    api.create_namespaced_pod(namespace, pod("anonymous", reference, ["/hello"]))
    said = wait_for(
        lambda: [e for e in events(api, namespace, "anonymous") if "Failed to pull image" in e],
        60,
        "the 401",
        interval=0.3,
    )
    assert "401 Unauthorized" in said[0], said
    assert registry_basic.password not in " ".join(events(api, namespace, "anonymous"))
    auth = base64.b64encode(f"{registry_basic.username}:{registry_basic.password}".encode()).decode()
    config = json.dumps({"auths": {registry_basic.host: {"auth": auth}}})
    api.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "pull"},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": config},
        },
    )
    api.create_namespaced_pod(namespace, pod("with-secret", reference, ["/hello"], imagePullSecrets=[{"name": "pull"}]))
    # pulled with the secret; /hello is no program, so the container cannot start: past the pull
    wait_for(
        lambda: any("Successfully pulled image" in e for e in events(api, namespace, "with-secret")),
        60,
        "the pull with the secret",
        interval=0.3,
    )
    for name in ("anonymous", "with-secret"):
        api.delete_namespaced_pod(name, namespace)


@pytest.mark.slow
@pytest.mark.timeout(IMAGE_TEST_TIMEOUT)
def test_a_corrupt_layer_is_a_digest_mismatch_and_nothing_is_cached(
    oci_control_plane, built_images, registry_factory, namespace
):
    api = core(oci_control_plane)
    registry = registry_factory()
    reference, layer_digest = push_tiny_image(registry, "team/corrupt")
    data = registry.blob_data(layer_digest)
    data.write_bytes(data.read_bytes()[:-100] + b"x" * 100)
    api.create_namespaced_pod(namespace, pod("corrupt", reference, ["/hello"]))
    said = wait_for(
        lambda: [e for e in events(api, namespace, "corrupt") if "Failed to pull image" in e],
        60,
        "the mismatch",
        interval=0.3,
    )
    assert "digest" in said[0] and layer_digest in said[0], said
    cache = Path(oci_control_plane.home) / "node" / "oci"
    assert not (cache / "layers" / "sha256" / layer_digest.split(":")[1]).exists()
    assert [p.name for p in (cache / "tmp").iterdir()] == []
    api.delete_namespaced_pod("corrupt", namespace)
