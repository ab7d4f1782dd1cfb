"""The seed's two systems, unchanged, one after the other: ``pytorch-mnist-ddp.yaml`` trains
``dags/code/train.py`` on 4 replicas (relaxed GPU policy: no GPU here), then ``package-job.yaml``
(in the same namespace) waits for it with ``kubectl`` from inside its pod, logs in to the registry
with ``kit login -p``, packs the claim's ``/output`` and pushes it. The registry is a real one
with TLS and Basic auth standing in for TCR; ``TCR_*`` reach the ``kit`` image through the image
mapping. The seed files are ``tests/data/seed``'s.

As on TKE, the Job's pod runs as its namespace's ``default`` service account, which may do
nothing: its ``kubectl wait`` is refused with kube-apiserver's 403 until the shipped Role
(``deploy/rbac/packaging-job.yaml`` and, for a Job that names no account,
``packaging-job-default-sa.yaml``) is applied."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from airflow_provider_training.embedded import start, stop
from tests import paths
from tests.fixtures.control_plane import FAST_SETTINGS
from tests.fixtures.registry import RunningRegistry
from tests.requires import requires

SEED = paths.SEED
REPO = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).with_name("kubectl")

pytestmark = requires("torch")


def test_package_job_runs_after_the_ddp_job(tmp_path: Path, registry_factory: Callable[..., RunningRegistry]) -> None:
    registry = registry_factory(auth="basic", tls=True)
    home = tmp_path / "plane"
    home.mkdir()
    kit_env = {
        "TCR_REGISTRY": registry.host,
        "TCR_USERNAME": str(registry.username),
        "TCR_PASSWORD": str(registry.password),
        "SSL_CERT_FILE": str(registry.ca_cert),
        "KITOPS_HOME": str(tmp_path / "kitops"),
    }
    images = [
        {"match": "pytorch/pytorch:*", "workingDir": str(REPO / "dags" / "code")},
        {"match": "ghcr.io/kitops-ml/kit:*", "env": kit_env},
    ]
    (home / "images.yaml").write_text(yaml.safe_dump({"images": images}))
    plane = start(
        home, env={**FAST_SETTINGS, "AIRFLOW_TRAINING_GPU_POLICY": "relaxed", "AIRFLOW_TRAINING_GPUS": "none"}
    )

    def kubectl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(plane.kubeconfig), "-n", "kubeflow", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    try:
        # the seed's spec.cleanPodPolicy is refused by strict validation, on a cluster too
        assert kubectl("apply", "--validate=warn", "-f", str(SEED / "pytorch-mnist-ddp.yaml")).returncode == 0
        assert kubectl("apply", "-f", str(SEED / "package-job.yaml")).returncode == 0
        forbidden = (
            'Error from server (Forbidden): pytorchjobs.kubeflow.org "pytorch-mnist-ddp" is forbidden: User '
            '"system:serviceaccount:kubeflow:default" cannot get resource "pytorchjobs" in API group "kubeflow.org" '
            'in the namespace "kubeflow"'
        )
        deadline = time.monotonic() + 120
        while forbidden not in (refused := kubectl("logs", "job/package-trained-model").stdout):
            assert time.monotonic() < deadline, f"no 403 in the Job's log:\n{refused}"
            time.sleep(0.5)
        assert kubectl("delete", "job", "package-trained-model", "--wait", timeout=120).returncode == 0
        rbac = REPO / "deploy" / "rbac"
        granted = kubectl(
            "apply", "-f", str(rbac / "packaging-job.yaml"), "-f", str(rbac / "packaging-job-default-sa.yaml")
        )
        assert granted.returncode == 0, granted.stderr
        assert kubectl("apply", "-f", str(SEED / "package-job.yaml")).returncode == 0
        waited = kubectl("wait", "--for=condition=complete", "job/package-trained-model", "--timeout=300s", timeout=320)
        pod_logs = kubectl("logs", "job/package-trained-model").stdout
        assert waited.returncode == 0, waited.stderr + pod_logs
        assert "pytorchjob.kubeflow.org/pytorch-mnist-ddp condition met" in pod_logs  # kubectl, in the pod
        assert "Log in successful" in pod_logs
        assert str(registry.password) not in pod_logs

        model = (home / "volumes" / "pvc" / "kubeflow" / "model-output-pvc" / "model.pt").read_bytes()
        manifest_path = registry.storage / "docker/registry/v2/repositories/ml-models/mnist-model/_manifests/tags"
        link = (manifest_path / "v1.0.0" / "current" / "link").read_text().strip()
        manifest = json.loads(registry.blob_data(link).read_bytes())
        found = []
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=io.BytesIO(registry.blob_data(layer["digest"]).read_bytes())) as tar:
                for member in tar.getmembers():
                    if member.name.endswith("model.pt"):
                        found.append(tar.extractfile(member).read())  # type: ignore[union-attr]
        assert found == [model]  # the trained model's bytes, in the registry
    finally:
        stop(home, replicas=True)
