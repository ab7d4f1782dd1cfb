"""One heavy request stops no one (issue 25, items 1-3): while a 1,000-node TrainJob is created
and deleted (and a suspended one of 20,000 nodes deleted), while a ConfigMap of 150,000 keys is
created, read, listed, patched and deleted, and while ``kubectl exec`` sends a 1 MB command, a
second client's ``GET /api/v1/namespaces`` stays under 200 ms at the 99th percentile.

Before the fix each of them held the API server's event loop for seconds (item 1: minutes), so
that second client waited as long (p99 5-7 s). The bound is generous against a loaded CI machine:
on an idle 2-core one the p99 is tens of milliseconds (``benchmarks/hardening.py --only lag``
measures it). On a machine so oversubscribed that the same client already waits long beside an
idle daemon (a second of samples first), the bound is ``IDLE_FACTOR`` times that idle p99: what is
checked is what the heavy request adds, not how busy the machine is.

A private daemon: its pods ask for a GPU it does not have, so a 1,000-pod job's pods are created
and stay Pending, and it runs jobs of up to 200,000 pods (``AIRFLOW_TRAINING_MAX_PODS_PER_JOB``) so
that the 20,000-node TrainJob and an Indexed Job past kube-apiserver's limit reach the controllers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_provider_training.embedded import ControlPlane, start, stop
from tests.fixtures.control_plane import FAST_SETTINGS
from tests.paging import count
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

KUBECTL = Path(sys.executable).with_name("kubectl")
P99_LIMIT = 0.2
IDLE_FACTOR = 3
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
PODS = "/api/v1/namespaces/default/pods"
JOBS = "/apis/batch/v1/namespaces/default/jobs"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    home = tmp_path_factory.mktemp("heavy")
    env = {**FAST_SETTINGS, "AIRFLOW_TRAINING_GPUS": "none", "AIRFLOW_TRAINING_MAX_PODS_PER_JOB": "200000"}
    started = start(home, env=env)
    try:
        yield started
    finally:
        stop(home, replicas=True)


def _client(plane: ControlPlane) -> httpx.Client:
    return httpx.Client(
        base_url=plane.api_url,
        verify=str(plane.ca),
        headers={"Authorization": f"Bearer {plane.token}"},
        timeout=httpx.Timeout(60),
    )


@pytest.fixture
def http(plane: ControlPlane) -> Iterator[httpx.Client]:
    with _client(plane) as client:
        yield client


@contextmanager
def second_client(plane: ControlPlane) -> Iterator[list[float]]:
    """``GET /api/v1/namespaces`` every 10 ms from another connection, a second beside the idle
    daemon and then while the block runs; the block's latencies (seconds) are checked against
    ``P99_LIMIT`` (or ``IDLE_FACTOR`` times the idle p99, if more) when it ends."""
    latencies: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with _client(plane) as client:
            while not done.is_set():
                started = time.perf_counter()
                assert client.get("/api/v1/namespaces").status_code == 200
                latencies.append(time.perf_counter() - started)
                time.sleep(0.01)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    time.sleep(1)
    idle = _p99(latencies)
    latencies.clear()
    try:
        yield latencies
    finally:
        done.set()
        thread.join()
    ordered = sorted(latencies)
    p99, limit = _p99(ordered), max(P99_LIMIT, IDLE_FACTOR * idle)
    print(
        f"GET /api/v1/namespaces beside it: n={len(ordered)} p50 {ordered[len(ordered) // 2] * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms (idle p99 {idle * 1000:.0f} ms)"
    )
    assert len(ordered) >= 20, "the second client hardly got an answer"
    assert p99 < limit, (
        f"p99 {p99 * 1000:.0f} ms (max {ordered[-1] * 1000:.0f} ms, n={len(ordered)}, idle p99 {idle * 1000:.0f} ms)"
    )


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


def trainjob(name: str, nodes: int, suspend: bool = False) -> dict[str, Any]:
    trainer = {
        "numNodes": nodes,
        "command": [sys.executable, "-c", "pass"],
        "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}},  # Pending here: no processes to start
    }
    spec = {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer, "suspend": suspend}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


def test_a_1000_node_trainjob_created_and_deleted_stops_no_one(plane: ControlPlane, http: httpx.Client) -> None:
    """Item 1: its pods were written (and their addresses kept) on the event loop, the whole
    network bookkeeping rewritten per pod; the deletion of a suspended 20,000-node one took minutes."""
    with second_client(plane):
        assert http.post(TRAINJOBS, json=trainjob("big", 1000)).status_code == 201
        wait_for(lambda: count(http, PODS) == 1000, 120, "1,000 pods", interval=0.2)
        assert http.delete(f"{TRAINJOBS}/big").status_code == 200
        wait_for(
            lambda: count(http, PODS) == 0 and count(http, JOBS) == 0, 120, "the jobs and pods to go", interval=0.2
        )

        assert http.post(TRAINJOBS, json=trainjob("suspended", 20_000, suspend=True)).status_code == 201
        wait_for(
            lambda: count(http, JOBS) == 1, 120, "the condition", interval=0.2
        )  # its JobSet's Job, suspended: no pods
        assert http.delete(f"{TRAINJOBS}/suspended").status_code == 200
        wait_for(lambda: count(http, JOBS) == 0, 120, "the jobs to go", interval=0.2)
    assert count(http, PODS) == 0


def test_a_configmap_of_150000_keys_stops_no_one(plane: ControlPlane, http: httpx.Client) -> None:
    """Item 2: managed fields and JSON of a 2 MB object took 5-14 s per request, on the event loop."""
    data = {f"key-{i}": "" for i in range(150_000)}
    with second_client(plane):
        created = http.post(CONFIGMAPS, json={"metadata": {"name": "wide"}, "data": data})
        assert created.status_code == 201, created.text[:300]
        got = http.get(f"{CONFIGMAPS}/wide").json()
        assert len(got["data"]) == 150_000
        fields = got["metadata"]["managedFields"][0]["fieldsV1"]["f:data"]
        assert len(fields) == 150_000 and list(fields)[:2] == ["f:key-0", "f:key-1"]  # sorted, as kube-apiserver
        listed = http.get(CONFIGMAPS).json()
        assert [len(i.get("data", {})) for i in listed["items"] if i["metadata"]["name"] == "wide"] == [150_000]
        patched = http.patch(
            f"{CONFIGMAPS}/wide",
            content=json.dumps({"data": {"key-7": "seven"}}),
            headers={"content-type": "application/merge-patch+json"},
        )
        assert patched.status_code == 200 and patched.json()["data"]["key-7"] == "seven"
        assert http.delete(f"{CONFIGMAPS}/wide").status_code == 200
    assert http.get(f"{CONFIGMAPS}/wide").status_code == 404


def test_a_1_mb_exec_command_stops_no_one(plane: ControlPlane, http: httpx.Client) -> None:
    """Item 3: a long exec command (its WebSocket upgrade line) was never answered."""
    pod = {
        "metadata": {"name": "sleeper"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11",
                    "command": [sys.executable, "-c", "import time; time.sleep(600)"],
                }
            ],
        },
    }
    assert http.post(PODS, json=pod).status_code == 201
    wait_for(
        lambda: (http.get(f"{PODS}/sleeper").json().get("status") or {}).get("phase") == "Running",
        90,
        "the sleeper pod to run",
        interval=0.2,
    )
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "KUBECACHEDIR": str(plane.home / "kube-cache")}
    argv = [str(KUBECTL), "exec", "sleeper", "--", "sh", "-c", "echo $#", "_", *["x" * 100_000] * 10]
    with second_client(plane):
        for _ in range(3):
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
            assert done.stdout == "10\n", done.stderr[-500:]
    http.delete(f"{PODS}/sleeper")


def test_an_indexed_job_past_kube_apiserver_limit_is_the_jobsets_creation_failure(http: httpx.Client) -> None:
    """kube-apiserver refuses an Indexed Job of parallelism > 100,000; the JobSet controller records
    its refusal as a ``JobCreationFailed`` event, and no Job (nor pod) is created."""
    job_spec = {
        "parallelism": 150_000,
        "completions": 150_000,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "python:3.11"}]}},
    }
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "toowide"},
        "spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": job_spec}}]},
    }
    assert http.post("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets", json=jobset).status_code == 201

    def failure() -> list[str]:
        events = http.get("/api/v1/namespaces/default/events").json()["items"]
        return [e["message"] for e in events if e["reason"] == "JobCreationFailed"]

    wait_for(lambda: bool(failure()), 30, "the failure", interval=0.2)
    assert failure()[0] == (
        'job "toowide-w-0" creation failed with error: Job.batch "toowide-w-0" is invalid: spec.parallelism: '
        "Invalid value: 150000: must be less than or equal to 100000 when completion mode is Indexed"
    )
    assert count(http, JOBS) == 0
    http.delete("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/toowide")
