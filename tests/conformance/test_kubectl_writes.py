"""kubectl's write paths as users type them: typed ``create`` commands (protobuf bodies), labels and
annotations, ``get -w`` with columns, ``-o wide`` and ``delete --wait``."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from airflow_provider_training.embedded import ControlPlane
from tests.conformance.conftest import KUBECTL, Kubectl


def _secret(kubectl: Kubectl, name: str) -> dict[str, object]:
    return json.loads(kubectl("get", "secret", name, "-o", "json").stdout)  # type: ignore[no-any-return]


def test_create_secrets_of_every_kind(kubectl: Kubectl, control_plane: ControlPlane) -> None:
    out = kubectl("create", "secret", "generic", "tcr", "--from-literal=username=robot", "--from-literal=empty=")
    assert out.stdout.strip() == "secret/tcr created"
    generic = _secret(kubectl, "tcr")
    assert generic["type"] == "Opaque"
    assert generic["data"] == {"username": base64.b64encode(b"robot").decode(), "empty": ""}
    assert "generateName" not in generic["metadata"]  # type: ignore[operator]

    kubectl(
        "create",
        "secret",
        "docker-registry",
        "pull",
        "--docker-server=tcr.example",
        "--docker-username=u",
        "--docker-password=p4ss",
    )
    registry = _secret(kubectl, "pull")
    assert registry["type"] == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(registry["data"][".dockerconfigjson"]))  # type: ignore[index]
    assert config["auths"]["tcr.example"]["password"] == "p4ss"

    tls = control_plane.home / "tls"
    kubectl("create", "secret", "tls", "web", f"--cert={tls / 'server.crt'}", f"--key={tls / 'server.key'}")
    web = _secret(kubectl, "web")
    assert web["type"] == "kubernetes.io/tls"
    assert base64.b64decode(web["data"]["tls.crt"]) == (tls / "server.crt").read_bytes()  # type: ignore[index]


def test_create_configmap_service_from_the_command_line_and_label_annotate(kubectl: Kubectl, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hello')\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\xff\x10")
    kubectl(
        "create", "configmap", "code", f"--from-file={tmp_path / 'train.py'}", f"--from-file={tmp_path / 'blob.bin'}"
    )
    stored = json.loads(kubectl("get", "configmap", "code", "-o", "json").stdout)
    assert stored["data"] == {"train.py": "print('hello')\n"}
    assert base64.b64decode(stored["binaryData"]["blob.bin"]) == b"\x00\xff\x10"
    kubectl("label", "configmap", "code", "team=ml")
    kubectl("annotate", "configmap", "code", "owner=alice")
    assert kubectl("get", "configmap", "-l", "team=ml", "-o", "name").stdout.strip() == "configmap/code"
    kubectl("label", "configmap", "code", "team-")
    stored = json.loads(kubectl("get", "configmap", "code", "-o", "json").stdout)
    assert "team" not in (stored["metadata"].get("labels") or {})
    assert stored["metadata"]["annotations"] == {"owner": "alice"}
    kubectl("create", "service", "nodeport", "web", "--tcp=80:8080", "--node-port=30080")
    service = json.loads(kubectl("get", "service", "web", "-o", "json").stdout)["spec"]
    assert service["ports"] == [
        {"name": "80-8080", "port": 80, "targetPort": 8080, "nodePort": 30080, "protocol": "TCP"}
    ]
    assert (service["type"], service["selector"]) == ("NodePort", {"app": "web"})
    done = kubectl("create", "namespace", stored["metadata"]["namespace"], check=False)
    assert done.returncode == 1 and "AlreadyExists" in done.stderr


def _read_until(process: subprocess.Popen[str], word: str, timeout: float) -> str:
    """What ``process`` printed until a line with ``word`` (or ``timeout``); a thread reads, so a
    silent process never blocks the test."""
    assert process.stdout is not None
    stream, lines, seen = process.stdout, [], threading.Event()

    def read() -> None:
        for line in stream:
            lines.append(line)
            if word in line:
                seen.set()
                return

    threading.Thread(target=read, daemon=True).start()
    seen.wait(timeout)
    return "".join(lines)


def test_get_watch_prints_columns_and_wide_shows_the_pod_ip(
    kubectl: Kubectl, kubectl_env: dict[str, str], test_namespace: str
) -> None:
    watcher = subprocess.Popen(
        [str(KUBECTL), "-n", test_namespace, "get", "pods", "-w"],
        env=kubectl_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        time.sleep(1)  # the watch is open (an empty namespace prints nothing)
        kubectl(
            "run",
            "sleeper",
            "--image=python:3.11",
            "--restart=Never",
            "--command",
            "--",
            sys.executable,
            "-c",
            "import time; time.sleep(2)",
        )
        kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/sleeper", timeout=60)
        # `kubectl wait` and the watcher get the final event on separate watches: on a loaded
        # machine the watcher may print it a moment later, so read until it has (or 30 s)
        out = _read_until(watcher, "Completed", timeout=30)
    finally:
        os.killpg(watcher.pid, signal.SIGTERM)
        watcher.wait(timeout=10)
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]  # the header, once
    assert all(line[0] == "sleeper" for line in lines[1:]) and len(lines) >= 3
    assert "Completed" in {line[2] for line in lines[1:]}
    wide = kubectl("get", "pods", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    ip = kubectl("get", "pod", "sleeper", "-o", "jsonpath={.status.podIP}").stdout
    assert ip.startswith("127.") and wide[1].split()[5] == ip and wide[1].split()[6] == "embedded"


def test_delete_wait_returns_once_the_pod_is_gone(kubectl: Kubectl) -> None:
    kubectl(
        "run",
        "long",
        "--image=python:3.11",
        "--restart=Never",
        "--command",
        "--",
        sys.executable,
        "-c",
        "import time; time.sleep(600)",
    )
    kubectl("wait", "--for=condition=Ready", "pod/long", timeout=60)
    out = kubectl("delete", "pod", "long", "--wait", "--grace-period=1", timeout=60)
    assert 'pod "long" deleted' in out.stdout
    gone = kubectl("get", "pod", "long", check=False)
    assert gone.returncode == 1 and 'pods "long" not found' in gone.stderr


def test_kubeflow_namespace_shows_the_operator(kubectl_env: dict[str, str]) -> None:
    done = subprocess.run(
        [str(KUBECTL), "get", "pods", "-n", "kubeflow", "-l", "control-plane=kubeflow-training-operator"],
        env=kubectl_env,
        capture_output=True,
        text=True,
        check=True,
    )
    row = done.stdout.splitlines()[1].split()
    assert row[:3] == ["training-operator-embedded", "1/1", "Running"]
    refused = subprocess.run(
        [str(KUBECTL), "exec", "-n", "kubeflow", "training-operator-embedded", "--", "true"],
        env=kubectl_env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1 and "stands for the embedded control plane's controllers" in refused.stderr
    logs = subprocess.run(
        [str(KUBECTL), "logs", "-n", "kubeflow", "training-operator-embedded"],
        env=kubectl_env,
        capture_output=True,
        text=True,
    )
    assert logs.returncode == 0 and "serving the Kubernetes API" in logs.stdout  # the daemon's own log
