"""The node agent as a user meets it: replicas survive a kill -9 of the daemon and the job ends
right; env and volumes resolved like the kubelet; memory limits; GPUs that cannot be had."""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from airflow_provider_training.embedded import ControlPlane, start, stop
from tests.controllers.jobs import Jobs, conditions
from tests.factories import job_document as job
from tests.factories import replica
from tests.fixtures.control_plane import FAST_SETTINGS
from tests.waiting import alive, wait_for


def _api(plane: ControlPlane) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


@pytest.fixture
def private_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    plane = start(tmp_path / "home", env=FAST_SETTINGS)
    yield plane
    stop(tmp_path / "home", replicas=True)


def test_replicas_survive_kill_9_of_the_daemon_and_the_job_finishes(private_plane: ControlPlane) -> None:
    home = private_plane.home
    api = _api(private_plane)
    jobs = Jobs(api, "default")
    gate = home.parent / "gate"  # (not in the data directory: no pod sees it)
    wait_gate = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)\nprint('finished')"
    jobs.create(
        job(
            "PyTorchJob",
            "survivor",
            {
                "Master": replica(wait_gate),
                "Worker": replica(wait_gate, replicas=2),
            },
        )
    )
    wait_for(
        lambda: len(jobs.pods("survivor")) == 3 and all(p.status.phase == "Running" for p in jobs.pods("survivor")),
        20,
        "all replicas running",
    )
    pids = [int(p.status.container_statuses[0].container_id.split("//")[1]) for p in jobs.pods("survivor")]
    api.close()
    os.kill(private_plane.pid, signal.SIGKILL)
    time.sleep(0.3)
    assert all(alive(pid) for pid in pids)  # the replicas did not go down with the daemon
    gate.touch()  # they finish while no daemon runs
    wait_for(lambda: not any(alive(pid) for pid in pids), 10, "replicas to finish")
    plane = start(home, env=FAST_SETTINGS)
    api = _api(plane)
    jobs = Jobs(api, "default")
    done = jobs.wait("PyTorchJob", "survivor", "Succeeded", timeout=20)
    assert conditions(done)[-1] == (
        "Succeeded",
        "True",
        "PyTorchJobSucceeded",
        "PyTorchJob survivor is successfully completed.",
    )
    assert {p.status.container_statuses[0].restart_count for p in jobs.pods("survivor")} == {0}
    assert jobs.logs("survivor-worker-1").strip() == "finished"
    api.close()


def test_stop_keeps_replicas_running_unless_asked_to_stop_them_too(
    private_plane: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    home = private_plane.home
    api = _api(private_plane)
    jobs = Jobs(api, "default")
    jobs.create(job("PyTorchJob", "sleeper", {"Master": replica("import time\ntime.sleep(300)")}))
    wait_for(lambda: [p.status.phase for p in jobs.pods("sleeper")] == ["Running"], 20, "the replica running")
    [pod] = jobs.pods("sleeper")
    pid = int(pod.status.container_statuses[0].container_id.split("//")[1])
    api.close()
    stop(home)  # a plain stop leaves replicas to a restarted daemon
    assert alive(pid)
    # ... and says so, never silently (a benchmark once left thousands behind)
    assert f"1 pod(s) of {home} keep running under their supervisors" in caplog.text
    assert "embedded stop --all" in caplog.text
    stop(home, replicas=True)  # `airflow-training embedded stop --all`
    wait_for(lambda: not alive(pid), 10, "the replica to stop")


def test_env_sources_expansion_volumes_and_working_dir(kube_api: Any, test_namespace: str, tmp_path: Path) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map(
        test_namespace, {"metadata": {"name": "settings"}, "data": {"lr": "0.1", "mode": "fast"}}
    )
    core.create_namespaced_secret(
        test_namespace, {"metadata": {"name": "creds"}, "data": {"token": base64.b64encode(b"s3cret").decode()}}
    )
    host = tmp_path / "host"
    host.mkdir()
    (host / "in.txt").write_text("from the host")
    code = (
        "import json, os; print(json.dumps({'env': {k: os.environ.get(k) for k in "
        "['CFG_lr', 'LR', 'TOKEN', 'POD', 'IP', 'COMBINED', 'LATER', 'ESCAPED']}, 'argv': __import__('sys').argv[1:], "
        "'cwd': os.getcwd(), 'host': open('/data/in.txt').read(), 'cm': open('/etc/settings/mode').read(), "
        "'secret': open('/etc/creds/token').read()}))"
    )
    container = {
        "args": ["$(LR)", "$$(LR)", "$(MISSING)"],
        "workingDir": "/work-area",
        "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "settings"}}],
        "env": [
            {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "lr"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "COMBINED", "value": "$(POD)@$(IP) lr=$(CFG_lr) $(LATER)"},
            {"name": "LATER", "value": "defined-after"},
            {"name": "ESCAPED", "value": "$$(POD)"},
        ],
        "volumeMounts": [
            {"name": "host", "mountPath": "/data"},
            {"name": "cm", "mountPath": "/etc/settings"},
            {"name": "secret", "mountPath": "/etc/creds"},
        ],
    }
    volumes = [
        {"name": "host", "hostPath": {"path": str(host)}},
        {"name": "cm", "configMap": {"name": "settings"}},
        {"name": "secret", "secret": {"secretName": "creds"}},
    ]
    jobs = Jobs(kube_api, test_namespace)
    jobs.create(job("PyTorchJob", "envjob", {"Master": replica(code, container=container, volumes=volumes)}))
    jobs.wait("PyTorchJob", "envjob", "Succeeded")
    seen = json.loads(jobs.logs("envjob-master-0"))
    ip = jobs.pod("envjob-master-0").status.pod_ip
    assert seen["env"] == {
        "CFG_lr": "0.1",
        "LR": "0.1",
        "TOKEN": "s3cret",
        "POD": "envjob-master-0",
        "IP": ip,
        "COMBINED": f"envjob-master-0@{ip} lr=0.1 $(LATER)",  # only earlier variables expand
        "LATER": "defined-after",
        "ESCAPED": "$(POD)",
    }
    assert seen["argv"] == ["0.1", "$(LR)", "$(MISSING)"]  # args see all; $$ escapes; unknown stays
    assert seen["cwd"] == "/work-area" and not Path("/work-area").exists()  # made in the pod's view only
    assert (seen["host"], seen["cm"], seen["secret"]) == ("from the host", "fast", "s3cret")
    assert not Path("/etc/settings").exists() and not Path("/data/in.txt").exists()  # nothing leaked to the host


def test_missing_secret_keeps_the_pod_waiting_with_an_event(kube_api: Any, test_namespace: str) -> None:
    container = {"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}]}
    jobs = Jobs(kube_api, test_namespace)
    jobs.create(job("PyTorchJob", "nosecret", {"Master": replica("print(1)", container=container)}))
    wait_for(
        lambda: any(
            e.reason == "Failed" and 'secret "absent" not found' in e.message for e in jobs.events("nosecret-master-0")
        ),
        10,
        "the Failed event",
    )
    waiting = jobs.pod("nosecret-master-0").status.container_statuses[0].state.waiting
    assert waiting.reason == "CreateContainerConfigError"
    client.CoreV1Api(kube_api).create_namespaced_secret(
        test_namespace, {"metadata": {"name": "absent"}, "stringData": {"k": "v"}}
    )
    jobs.wait("PyTorchJob", "nosecret", "Succeeded", timeout=15)


def test_memory_limit_kills_with_oomkilled_137(kube_api: Any, test_namespace: str) -> None:
    hog = "b = []\nwhile True: b.append(bytearray(16 * 1024 * 1024))"
    container = {"resources": {"limits": {"memory": "64Mi"}}}
    jobs = Jobs(kube_api, test_namespace)
    jobs.create(job("PyTorchJob", "hog", {"Master": replica(hog, restart="Never", container=container)}))
    failed = jobs.wait("PyTorchJob", "hog", "Failed", timeout=20)
    assert failed["status"]["conditions"][-1]["reason"] == "PyTorchJobFailed"
    terminated = jobs.pod("hog-master-0").status.container_statuses[0].state.terminated
    assert (terminated.reason, terminated.exit_code) == ("OOMKilled", 137)


def test_gpu_request_that_cannot_be_had_stays_pending(kube_api: Any, test_namespace: str) -> None:
    container = {"resources": {"limits": {"nvidia.com/gpu": 64}}}
    jobs = Jobs(kube_api, test_namespace)
    jobs.create(job("PyTorchJob", "gpu", {"Master": replica("print(1)", container=container)}))
    wait_for(
        lambda: any(
            e.reason == "FailedScheduling" and "Insufficient nvidia.com/gpu" in e.message
            for e in jobs.events("gpu-master-0")
        ),
        10,
        "FailedScheduling",
    )
    pod = jobs.pod("gpu-master-0")
    assert pod.status.phase == "Pending" and pod.status.conditions[0].reason == "Unschedulable"
    assert jobs.get("PyTorchJob", "gpu")["status"]["conditions"][-1]["type"] == "Created"
