"""What the embedded API server returns deserialises in the newest official Python client (37,
pydantic models, strict types) with zero validation errors: every built-in kind, their lists and
watch events, pods written by users and by every controller. Before the canonical form, one
``nvidia.com/gpu: 1`` made ``list_namespaced_pod`` fail for the whole namespace."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from airflow_provider_training.embedded import ControlPlane
from tests.conformance import objects

PROBE = Path(__file__).with_name("client37_probe.py")


def _create_everything(kube_api: Any, namespace: str, tmp_path: Path) -> None:
    core, batch, custom = client.CoreV1Api(kube_api), client.BatchV1Api(kube_api), client.CustomObjectsApi(kube_api)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "settings"}, "data": {"mode": "fast"}})
    core.create_namespaced_secret(namespace, {"metadata": {"name": "credentials"}, "stringData": {"token": "t0k"}})
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": 0.5}}},
        },
    )
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "web"},
            "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]},
        },
    )
    for body in objects.pods_of_every_shape(str(tmp_path)):
        core.create_namespaced_pod(namespace, body)
    batch.create_namespaced_job(namespace, objects.batch_job("numbers"))
    for job in objects.training_jobs():
        plural = job["kind"].lower() + "s"
        custom.create_namespaced_custom_object("kubeflow.org", "v1", namespace, plural, job)
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "numbers"},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "pytorch"}, "storageUri": "pvc://data/model"}}},
    }
    custom.create_namespaced_custom_object("serving.kserve.io", "v1beta1", namespace, "inferenceservices", isvc)


def _wait_for_controllers(kube_api: Any, namespace: str) -> list[Any]:
    core = client.CoreV1Api(kube_api)
    deadline = time.monotonic() + 60
    while True:
        pods = core.list_namespaced_pod(namespace).items
        owners = {ref.kind for p in pods for ref in p.metadata.owner_references or []}
        finished = [p for p in pods if p.status.phase in ("Succeeded", "Failed")]
        if {"PyTorchJob", "TFJob", "JAXJob", "Job"} <= owners and len(finished) >= 4:
            return pods
        assert time.monotonic() < deadline, f"controllers made pods of {owners}, finished {len(finished)}"
        time.sleep(0.2)


def test_everything_deserialises_in_client_37(
    control_plane: ControlPlane, kube_api: Any, test_namespace: str, client37_python: Path, tmp_path: Path
) -> None:
    _create_everything(kube_api, test_namespace, tmp_path)
    pods = _wait_for_controllers(kube_api, test_namespace)
    done = subprocess.run(
        [str(client37_python), str(PROBE), str(control_plane.kubeconfig), test_namespace],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["version"].startswith("37.")
    assert report["errors"] == []
    read = report["read"]
    assert read["pods"] == len(pods) >= 12  # 5 written by hand, the rest by the controllers
    for what in ("services", "configmaps", "secrets", "persistentvolumeclaims", "events", "jobs", "namespaces"):
        assert read[what] >= 1, what
    assert read["watch pods"] >= len(pods) and read["watch events"] >= 1
    # 7 Training Operator v1 CRDs + TrainJob, TrainingRuntime, ClusterTrainingRuntime and JobSet
    assert read["customresourcedefinitions"] == 11 and read["pytorchjobs"] == 1


def test_quantities_come_back_canonical(kube_api: Any, test_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    for body in objects.pods_of_every_shape("/tmp")[1:3]:
        core.create_namespaced_pod(test_namespace, body)
    raw = json.loads(core.read_namespaced_pod("numbers", test_namespace, _preload_content=False).data)
    resources = raw["spec"]["containers"][0]["resources"]
    assert resources == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "2147483648"},
    }  # decimal stays decimal
    assert raw["status"]["qosClass"] == "Burstable"
    gpu = json.loads(core.read_namespaced_pod("gpu", test_namespace, _preload_content=False).data)
    limits = {"nvidia.com/gpu": "1", "cpu": "2"}
    assert gpu["spec"]["containers"][0]["resources"] == {"limits": limits, "requests": limits}
    spec = gpu["spec"]
    assert (spec["dnsPolicy"], spec["schedulerName"], spec["serviceAccountName"]) == (
        "ClusterFirst",
        "default-scheduler",
        "default",
    )
    assert spec["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"  # tagged python:3.11
    assert spec["enableServiceLinks"] is True and spec["terminationGracePeriodSeconds"] == 30
