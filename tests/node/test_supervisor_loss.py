"""kill -9 of a replica's supervisor: the node agent stops the container process the supervisor
left behind before it decides the pod's fate — never a pod reported finished while its process
runs (restartPolicy Never), never two live copies of one replica (OnFailure)."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from airflow_provider_training.embedded import ControlPlane
from tests.controllers.jobs import Jobs
from tests.factories import job_document as job
from tests.factories import replica
from tests.waiting import wait_for


def copies(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def kill_supervisor(plane: ControlPlane, pod: Any) -> None:
    pid = int((plane.home / "node" / "pods" / pod.metadata.uid / "supervisor.pid").read_text())
    os.kill(pid, signal.SIGKILL)


def test_never_pod_is_failed_only_after_its_process_is_stopped(
    control_plane: ControlPlane, kube_api: Any, test_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    marker = f"marker-{uuid.uuid4().hex}"
    code = f"import time  # {marker}\nwhile True: time.sleep(0.05)"
    core.create_namespaced_pod(
        test_namespace,
        {
            "metadata": {"name": "lonely"},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": "python:3.11", "command": [sys.executable, "-c", code]}],
            },
        },
    )
    wait_for(lambda: core.read_namespaced_pod("lonely", test_namespace).status.phase == "Running", 20, "running")
    assert len(copies(marker)) == 1
    kill_supervisor(control_plane, core.read_namespaced_pod("lonely", test_namespace))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod("lonely", test_namespace)
        if pod.status.phase == "Failed":
            break
        time.sleep(0.02)
    assert pod.status.phase == "Failed", pod.status
    assert copies(marker) == []  # reported Failed only once its process was gone
    assert "supervisor ended unexpectedly" in pod.status.message
    terminated = pod.status.container_statuses[0].state.terminated
    assert terminated is not None and terminated.exit_code == 137


def test_on_failure_replica_never_runs_twice(control_plane: ControlPlane, kube_api: Any, test_namespace: str) -> None:
    jobs = Jobs(kube_api, test_namespace)
    marker = f"marker-{uuid.uuid4().hex}"
    code = f"import time  # {marker}\nwhile True: time.sleep(0.05)"
    jobs.create(job("PyTorchJob", "twice", {"Master": replica(code, terminationGracePeriodSeconds=1)}))
    wait_for(lambda: [p.status.phase for p in jobs.pods("twice")] == ["Running"], 20, "the replica running")
    assert len(copies(marker)) == 1
    kill_supervisor(control_plane, jobs.pods("twice")[0])
    seen = []
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        seen.append(len(copies(marker)))
        time.sleep(0.02)
    assert max(seen) == 1, seen  # the original, then (after it was stopped) at most one replacement
    jobs.delete("PyTorchJob", "twice")
    wait_for(lambda: copies(marker) == [], 20, "the replica's process to end with its job")
