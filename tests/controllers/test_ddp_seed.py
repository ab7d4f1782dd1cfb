"""The seed's PyTorch DDP example, applied with the real kubectl and only its GPU limit removed,
trains ``dags/code/train.py`` on 4 replicas (gloo on CPU); the seed's monitoring commands
(``tests/data/seed/COMMANDS.md``) run against it while it runs.

``train.py`` is found through the image mapping (``images.yaml``: the seed's image runs in
``dags/code``), so the YAML keeps its relative ``train.py``. A daemon of its own is used because
that mapping is a daemon setting.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_training.embedded import ControlPlane, start, stop
from tests.fixtures.control_plane import FAST_SETTINGS
from tests.paths import SEED as SEED_DIR
from tests.requires import requires

REPO = Path(__file__).resolve().parents[2]
SEED = SEED_DIR / "pytorch-mnist-ddp.yaml"
KUBECTL = Path(sys.executable).with_name("kubectl")

pytestmark = requires("torch")


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    home = tmp_path_factory.mktemp("ddp")
    (home / "images.yaml").write_text(
        yaml.safe_dump({"images": [{"match": "pytorch/pytorch:*", "workingDir": str(REPO / "dags" / "code")}]})
    )
    plane = start(home, env=FAST_SETTINGS)
    yield plane
    stop(home, replicas=True)


def kubectl(plane: ControlPlane, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(plane.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=kw.pop("timeout", 120),
        **kw,
    )


def test_seed_ddp_trains_on_four_replicas_and_commands_work(plane: ControlPlane, tmp_path: Path) -> None:
    doc = yaml.safe_load(SEED.read_text())
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        for c in spec["template"]["spec"]["containers"]:
            del c["resources"]["limits"]["nvidia.com/gpu"]  # the one change: no GPU here
    manifest = tmp_path / "ddp.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    applied = kubectl(plane, "apply", "--validate=warn", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr
    assert 'unknown field "spec.cleanPodPolicy"' in applied.stderr  # the seed's mistake, warned about

    ns = ["-n", "kubeflow"]
    follow = (
        subprocess.Popen(
            [str(KUBECTL), "--kubeconfig", str(plane.kubeconfig), "logs", "-f", "pytorch-mnist-ddp-worker-0", *ns],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if _wait_pod_started(plane, "pytorch-mnist-ddp-worker-0")
        else None
    )
    listed = kubectl(plane, "get", "pytorchjobs", *ns)
    assert "pytorch-mnist-ddp" in listed.stdout
    master = kubectl(
        plane,
        "get",
        "pods",
        "-l",
        "training.kubeflow.org/job-name=pytorch-mnist-ddp,training.kubeflow.org/replica-type=master",
        "-o",
        "name",
        *ns,
    ).stdout.strip()
    assert master == "pod/pytorch-mnist-ddp-master-0"
    master_logs = subprocess.Popen(
        [str(KUBECTL), "--kubeconfig", str(plane.kubeconfig), "logs", "-f", master, *ns],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    waited = kubectl(
        plane, "wait", "--for=condition=Succeeded", "pytorchjob/pytorch-mnist-ddp", "--timeout=240s", *ns, timeout=260
    )
    assert waited.returncode == 0, waited.stderr + _daemon_tail(plane)
    out, _ = master_logs.communicate(timeout=30)
    losses = [float(line.rsplit("loss ", 1)[1]) for line in out.splitlines() if "rank 0: epoch" in line]
    assert len(losses) == 10 and losses[-1] < losses[0]  # 10 epochs, and it learned
    if follow is not None:
        worker_out, _ = follow.communicate(timeout=30)
        assert "rank 1: epoch 10/10" in worker_out  # worker-0 is rank 1 (the master is rank 0)

    job = json.loads(kubectl(plane, "get", "pytorchjob", "pytorch-mnist-ddp", "-o", "json", *ns).stdout)
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in job["status"]["conditions"]] == [
        ("Created", "True", "PyTorchJobCreated", "PyTorchJob pytorch-mnist-ddp is created."),
        ("Running", "False", "PyTorchJobRunning", "PyTorchJob pytorch-mnist-ddp is running."),
        ("Succeeded", "True", "PyTorchJobSucceeded", "PyTorchJob pytorch-mnist-ddp is successfully completed."),
    ]
    described = kubectl(plane, "describe", "pytorchjob", "pytorch-mnist-ddp", *ns).stdout
    assert "SuccessfulCreatePod" in described and "PyTorchJobSucceeded" in described
    # The job succeeds when the master does (as upstream); workers may take a moment longer to exit.
    deadline = time.monotonic() + 30
    while True:
        pods = kubectl(plane, "get", "pods", "-l", "training.kubeflow.org/job-name=pytorch-mnist-ddp", *ns).stdout
        if pods.count("Completed") == 4 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert pods.count("Completed") == 4, pods
    output = plane.home / "volumes" / "pvc" / "kubeflow" / "model-output-pvc"
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["world_size"] == 4 and (output / "model.pt").stat().st_size > 0
    pod_events = kubectl(plane, "describe", "pod", "pytorch-mnist-ddp-master-0", *ns).stdout
    assert "Overcommitted" in pod_events  # 4 x 2 CPUs requested on a smaller machine


def _wait_pod_started(plane: ControlPlane, pod: str) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = kubectl(plane, "get", "pod", pod, "-n", "kubeflow", "-o", "jsonpath={.status.containerStatuses[0].state}")
        if "running" in out.stdout or "terminated" in out.stdout:
            return True
        time.sleep(0.1)
    return False


def _daemon_tail(plane: ControlPlane) -> str:
    return (plane.home / "daemon.log").read_text()[-3000:]
