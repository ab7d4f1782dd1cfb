"""The Kubeflow SDK (``kubeflow`` 0.5.0, ``TrainerClient`` with its Kubernetes backend) against the
embedded control plane, in its own venv: list runtimes, train a function on 2 nodes of
``torch-distributed``, wait for ``Complete``, read node-0's log, list and delete."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded import ControlPlane

PROBE = Path(__file__).with_name("sdk_probe.py")


def test_trainer_client_runs_a_function_on_two_nodes(
    kubeflow_sdk_python: Path, control_plane: ControlPlane, test_namespace: str, kube_api: Any, tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(kubeflow_sdk_python), str(PROBE), str(control_plane.kubeconfig), test_namespace, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Trainer control-plane version info is not available" not in done.stderr  # the install's ConfigMap
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"torch-distributed", "jax-distributed", "xgboost-distributed"} <= set(report["runtimes"])
    assert (report["status"], report["num_nodes"], report["steps"]) == ("Complete", 2, ["node-0", "node-1"])
    assert report["logs"] == ["sdk rank 0 of 2 node 0 sum 3.0"]
    assert report["listed"] == [report["name"]]
    assert (tmp_path / PROBE.name).is_file()  # the SDK's script, written in the pods' working directory
    from kubernetes import client

    left = client.CustomObjectsApi(kube_api).list_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", test_namespace, "trainjobs"
    )
    assert left["items"] == []  # delete_job went through
