"""TrainingJobClient against the embedded API server over real HTTPS; job status driven as the
Training Operator would write it (``job_driver``)."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest

from airflow_provider_training.client import (
    JobDeleted,
    LogFollower,
    TrainingJobClient,
    WaitTimeout,
    job_state,
    summary,
)
from airflow_provider_training.client.errors import BadRequest, Conflict, NotFound
from tests.factories import simple_job as job
from tests.fixtures.job_driver import JobDriver


def wait_for_pods(
    client: TrainingJobClient, name: str, namespace: str, count: int, phase: str = "Running"
) -> list[dict]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pods = client.pods("PyTorchJob", name, namespace)
        if len(pods) == count and all(p.get("status", {}).get("phase") == phase for p in pods):
            return pods
        time.sleep(0.05)
    raise AssertionError(f"{name}: {count} pods did not become {phase}")


SLEEP = "import time; print('up', flush=True); time.sleep(120)"


def test_create_get_list_and_delete_with_propagation(job_client: TrainingJobClient, test_namespace: str) -> None:
    created = job_client.create(
        job(name="a", replicas={"Master": 1, "Worker": 1}, labels={"team": "x"}, script=SLEEP), namespace=test_namespace
    )
    job_client.create(job(name="b", script=SLEEP), namespace=test_namespace)
    assert created["metadata"]["uid"]
    assert job_client.get("PyTorchJob", "a", test_namespace)["metadata"]["uid"] == created["metadata"]["uid"]
    assert [j["metadata"]["name"] for j in job_client.list("PyTorchJob", test_namespace, "team=x")] == ["a"]
    wait_for_pods(job_client, "a", test_namespace, 2)
    wait_for_pods(job_client, "b", test_namespace, 1)

    assert job_client.delete("PyTorchJob", "a", test_namespace, propagation="Foreground")
    assert job_client.find("PyTorchJob", "a", test_namespace) is None
    assert job_client.pods("PyTorchJob", "a", test_namespace) == []  # pods went with the job
    assert not job_client.delete("PyTorchJob", "a", test_namespace)  # nothing left: no error

    assert job_client.delete("PyTorchJob", "b", test_namespace, propagation="Orphan")
    assert [p["metadata"]["name"] for p in job_client.pods("PyTorchJob", "b", test_namespace)] == ["b-master-0"]
    job_client.core.delete_namespaced_pod("b-master-0", test_namespace)


def test_delete_with_a_stale_uid_leaves_the_new_job_alone(job_client: TrainingJobClient, test_namespace: str) -> None:
    old = job_client.create(job(name="same"), namespace=test_namespace)
    job_client.delete("PyTorchJob", "same", test_namespace)
    new = job_client.create(job(name="same"), namespace=test_namespace)
    assert not job_client.delete("PyTorchJob", "same", test_namespace, uid=old["metadata"]["uid"])
    assert job_client.get("PyTorchJob", "same", test_namespace)["metadata"]["uid"] == new["metadata"]["uid"]


def test_replace_refuses_a_stale_version_and_apply_secret_overwrites(
    job_client: TrainingJobClient, test_namespace: str
) -> None:
    created = job_client.create(job(name="rv", labels={"v": "1"}), namespace=test_namespace)
    current = job_client.get("PyTorchJob", "rv", test_namespace)
    current["metadata"]["labels"]["v"] = "2"
    job_client.replace(current)
    with pytest.raises(Conflict):  # written over a version that is no longer current
        job_client.replace(created)
    assert job_client.get("PyTorchJob", "rv", test_namespace)["metadata"]["labels"]["v"] == "2"

    def secret(user: str) -> dict[str, Any]:
        meta = {"name": "creds", "namespace": test_namespace}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": {"KIT_USER": user}}

    job_client.apply_secret(secret("first"))
    job_client.apply_secret(secret("second"))  # the name is taken: the credentials are replaced
    stored = job_client.core.read_namespaced_secret("creds", test_namespace)
    assert base64.b64decode(stored.data["KIT_USER"]) == b"second"


def test_typed_errors_for_a_missing_pod_and_a_container_it_lacks(
    job_client: TrainingJobClient, test_namespace: str
) -> None:
    job_client.create(job(name="logs", script=SLEEP), namespace=test_namespace)
    wait_for_pods(job_client, "logs", test_namespace, 1)
    with pytest.raises(BadRequest, match="not valid"):  # what the cockpit shows as "not started yet"
        job_client.read_log("logs-master-0", test_namespace, container="sidecar")
    with pytest.raises(NotFound):
        job_client.read_log("logs-master-9", test_namespace)


def test_wait_returns_when_the_job_succeeds_and_costs_two_requests(
    job_client: TrainingJobClient, job_driver: JobDriver, test_namespace: str, counter: Any
) -> None:
    job_client.create(job(name="ok"), namespace=test_namespace)
    job_driver.start("PyTorchJob", "ok", test_namespace)
    job_driver.later(0.5, lambda: job_driver.touch("PyTorchJob", "ok", test_namespace))
    job_driver.later(1.5, lambda: job_driver.succeed("PyTorchJob", "ok", test_namespace))
    counter.calls.clear()
    started = time.monotonic()
    done = job_client.wait("PyTorchJob", "ok", test_namespace, timeout=20)
    took = time.monotonic() - started
    assert job_state(done).succeeded and job_state(done).reason == "PyTorchJobSucceeded"
    assert 1.4 < took < 3
    # one GET, one watch that saw the resync and then the Succeeded condition: no polling
    assert len(counter.calls) == 2 and counter.calls[1].endswith("watch")
    brief = summary(done)
    assert brief["state"] == "Succeeded" and brief["replica_statuses"] == {"Master": {"succeeded": 1}}
    assert brief["completed"] and brief["started"]


def test_wait_continues_after_the_server_ends_the_watch(
    client_api: Any, job_driver: JobDriver, test_namespace: str, counter: Any
) -> None:
    client = TrainingJobClient(client_api, watch_timeout=1, poll_interval=0.5)
    client.create(job(name="long"), namespace=test_namespace)
    job_driver.start("PyTorchJob", "long", test_namespace)
    job_driver.later(2.5, lambda: job_driver.fail("PyTorchJob", "long", test_namespace))
    counter.calls.clear()
    done = client.wait("PyTorchJob", "long", test_namespace, timeout=20)
    state = job_state(done)
    assert state.failed and state.reason == "PyTorchJobFailed" and "1 Master replica(s) failed" in state.message
    # watches resumed from the last resourceVersion, no GET between them
    assert [c.endswith("watch") for c in counter.calls].count(False) == 1
    assert 3 <= len(counter.calls) <= 5


def test_wait_times_out_and_reports_the_last_state(
    job_client: TrainingJobClient, job_driver: JobDriver, test_namespace: str
) -> None:
    job_client.create(job(name="slow"), namespace=test_namespace)
    job_driver.start("PyTorchJob", "slow", test_namespace)
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as timeout:
        job_client.wait("PyTorchJob", "slow", test_namespace, timeout=1.2)
    assert 1.1 < time.monotonic() - started < 3
    assert job_state(timeout.value.last or {}).phase == "Running"
    assert "did not finish within 1.2s" in str(timeout.value)


def test_wait_notices_deletion_and_replacement(
    job_client: TrainingJobClient, job_driver: JobDriver, test_namespace: str
) -> None:
    first = job_client.create(job(name="gone"), namespace=test_namespace)
    job_driver.later(0.5, lambda: job_client.delete("PyTorchJob", "gone", test_namespace))
    with pytest.raises(JobDeleted, match="was deleted while waiting"):
        job_client.wait("PyTorchJob", "gone", test_namespace, timeout=10)

    job_client.create(job(name="gone"), namespace=test_namespace)
    with pytest.raises(JobDeleted, match="replaced by another object"):
        job_client.wait("PyTorchJob", "gone", test_namespace, uid=first["metadata"]["uid"], timeout=10)


def test_pods_by_replica_type_and_index_logs_and_events(job_client: TrainingJobClient, test_namespace: str) -> None:
    script = "import time\nfor i in range(5): print('step', i, flush=True)\ntime.sleep(120)"
    created = job_client.create(
        job(name="p", replicas={"Master": 1, "Worker": 2}, script=script), namespace=test_namespace
    )
    uid = created["metadata"]["uid"]
    wait_for_pods(job_client, "p", test_namespace, 3)

    def names(pods: list[dict]) -> list[str]:
        return [p["metadata"]["name"] for p in pods]

    assert names(job_client.pods("PyTorchJob", "p", test_namespace, uid=uid)) == [
        "p-master-0",
        "p-worker-0",
        "p-worker-1",
    ]
    assert names(job_client.pods("PyTorchJob", "p", test_namespace, replica_type="Worker")) == [
        "p-worker-0",
        "p-worker-1",
    ]
    assert names(job_client.pods("PyTorchJob", "p", test_namespace, replica_type="worker", index=1)) == ["p-worker-1"]
    assert job_client.pods("PyTorchJob", "p", test_namespace, uid="another-job") == []
    deadline = time.monotonic() + 10
    while job_client.read_log("p-worker-1", test_namespace).count("step") < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job_client.read_log("p-worker-1", test_namespace, tail_lines=2) == "step 3\nstep 4\n"

    job_client.core.create_namespaced_event(
        test_namespace,
        {
            "metadata": {"generateName": "ev-"},
            "reason": "Pulled",
            "message": "unrelated",
            "type": "Normal",
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "unrelated", "namespace": test_namespace},
        },
    )
    events = job_client.events("PyTorchJob", "p", test_namespace, uid=uid)
    involved = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events}
    assert ("PyTorchJob", "p") in involved and ("Pod", "p-worker-1") in involved
    assert ("Pod", "unrelated") not in involved
    assert "SuccessfulCreatePod" in {e["reason"] for e in events}
    job_client.delete("PyTorchJob", "p", test_namespace)


def test_log_follower_prefixes_lines_and_follows_only_selected_replicas(
    job_client: TrainingJobClient, test_namespace: str
) -> None:
    lines: list[str] = []
    script = (
        "import os, time\n"
        "if os.environ.get('RANK') == '0':\n"
        "    print('epoch 1', flush=True); time.sleep(0.5); print('epoch 2', flush=True)\n"
        "else:\n"
        "    print('worker says hi', flush=True)"
    )
    body = job(name="f", replicas={"Master": 1, "Worker": 1}, script=script)
    # the follower starts before the pods exist: it must notice them through its pod watch
    follower = LogFollower(
        job_client,
        "PyTorchJob",
        "f",
        test_namespace,
        sink=lines.append,
        select=lambda pod: pod["metadata"]["labels"].get("training.kubeflow.org/job-role") == "master",
    ).start()
    time.sleep(0.3)
    job_client.create(body, namespace=test_namespace)
    done = job_client.wait("PyTorchJob", "f", test_namespace, timeout=30)
    follower.stop(drain=3)
    assert job_state(done).succeeded
    assert lines == ["[f-master-0] epoch 1", "[f-master-0] epoch 2"]


def test_log_follower_stopped_at_once_still_prints_a_finished_job_s_lines(
    job_client: TrainingJobClient, test_namespace: str
) -> None:
    """A job that ends before the follower's watch reaches its pods (a retry reattaching to a job
    that finishes right away) still has its replicas' lines in the task log."""
    job_client.create(job(name="quick", script="print('trained', flush=True)"), namespace=test_namespace)
    job_client.wait("PyTorchJob", "quick", test_namespace, timeout=30)
    lines: list[str] = []
    follower = LogFollower(job_client, "PyTorchJob", "quick", test_namespace, sink=lines.append).start()
    follower.stop(drain=30)  # (returns once the lines are read: 5 s was too short under CI's load)
    assert lines == ["[quick-master-0] trained"]


def test_a_stalled_log_stream_does_not_hold_up_stop(job_client: TrainingJobClient, test_namespace: str) -> None:
    job_client.create(
        job(name="stall", script="import time; print('only line', flush=True); time.sleep(120)"),
        namespace=test_namespace,
    )
    lines: list[str] = []
    follower = LogFollower(job_client, "PyTorchJob", "stall", test_namespace, sink=lines.append).start()
    deadline = time.monotonic() + 20
    while not lines and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    follower.stop(drain=0.5)  # the container still runs and writes nothing: its stream never ends
    assert time.monotonic() - started < 2
    assert lines == ["[stall-master-0] only line"]
    job_client.delete("PyTorchJob", "stall", test_namespace)


def test_batch_jobs_and_inference_services_use_the_same_client(
    job_client: TrainingJobClient, test_namespace: str
) -> None:
    batch = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "export"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "python:3.11", "command": ["python", "-c", "print('exported')"]}
                    ],
                }
            }
        },
    }
    job_client.create(batch, namespace=test_namespace)
    done = job_client.wait("Job", "export", test_namespace, timeout=30)
    assert job_state(done).succeeded
    [pod] = job_client.pods("Job", "export", test_namespace)
    assert job_client.read_log(pod["metadata"]["name"], test_namespace) == "exported\n"

    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "digits"},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "pytorch"}, "storageUri": "kit://r/m:v1"}}},
    }
    job_client.create(isvc, namespace=test_namespace)
    assert job_client.find("InferenceService", "digits", test_namespace) is not None
    assert job_client.delete("InferenceService", "digits", test_namespace)
