"""``kubectl exec`` and ``kubectl cp`` (tar over exec) with the real kubectl 1.37, over the
WebSocket ``v5.channel.k8s.io`` protocol: streams, exit codes, TTY with resize, the pod's own view
(environment, working directory, mounts, loopback address), the errors kube-apiserver gives, and
10 concurrent 10 MiB streams with no byte lost."""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import hashlib
import json
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.conftest import KUBECTL, Kubectl

SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


def _create(kubectl: Kubectl, name: str, **spec: Any) -> None:
    spec.setdefault("containers", [{"name": "main", "image": "python:3.11", "command": SLEEP}])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"restartPolicy": "Never", **spec}}
    kubectl("create", "-f", "-", stdin=json.dumps(pod))


@pytest.fixture
def sleeper(kubectl: Kubectl, tmp_path: Path) -> str:
    """A running pod with two containers, env, a working directory and an emptyDir at /scratch."""
    mount = [{"name": "scratch", "mountPath": "/scratch"}]
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = [{"name": "GREETING", "value": "hello"}]
    containers = [
        {
            "name": "main",
            "image": "python:3.11",
            "command": SLEEP,
            "env": env,
            "volumeMounts": mount,
            "workingDir": str(workdir),
        },
        {"name": "side", "image": "python:3.11", "command": SLEEP, "env": [{"name": "GREETING", "value": "side"}]},
    ]
    _create(kubectl, "sleeper", containers=containers, volumes=[{"name": "scratch", "emptyDir": {}}])
    kubectl("wait", "--for=condition=Ready", "pod/sleeper", timeout=90)
    return str(workdir)


def test_streams_exit_code_env_workdir_container(kubectl: Kubectl, sleeper: str) -> None:
    done = kubectl(
        "exec", "sleeper", "--", "sh", "-c", 'echo "$GREETING $HOSTNAME"; pwd; echo oops >&2; exit 3', check=False
    )
    assert done.stdout.splitlines() == ["hello sleeper", sleeper]
    assert done.stderr.splitlines() == [
        'Defaulted container "main" out of: main, side',  # kubectl's own line: the pod has two
        "oops",
        "command terminated with exit code 3",
    ]
    assert done.returncode == 3
    assert kubectl("exec", "sleeper", "-c", "side", "--", "sh", "-c", "echo $GREETING").stdout == "side\n"
    # stdin, closed early: cat sees end of file and the command goes on
    assert kubectl("exec", "-i", "sleeper", "--", "sh", "-c", "cat; echo done", stdin="abc\n").stdout == "abc\ndone\n"
    assert kubectl("exec", "-i", "sleeper", "--", "sh", "-c", "cat; echo done", stdin="").stdout == "done\n"


def test_errors_as_a_cluster_gives_them(kubectl: Kubectl, sleeper: str) -> None:
    missing = kubectl("exec", "nobody", "--", "true", check=False)
    assert missing.returncode == 1 and 'Error from server (NotFound): pods "nobody" not found' in missing.stderr
    container = kubectl("exec", "sleeper", "-c", "nope", "--", "true", check=False)
    assert container.returncode == 1 and "container nope is not valid for pod sleeper" in container.stderr
    command = kubectl("exec", "sleeper", "--", "no-such-command", check=False)
    assert command.returncode == 127 and "command terminated with exit code 127" in command.stderr
    _create(kubectl, "finished", containers=[{"name": "main", "image": "python:3.11", "command": ["true"]}])
    kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/finished", timeout=90)
    finished = kubectl("exec", "finished", "--", "true", check=False)
    assert finished.returncode == 1
    assert "cannot exec into a container in a completed pod; current phase is Succeeded" in finished.stderr
    assert kubectl("exec", "sleeper", "--", "true").returncode == 0  # the daemon keeps serving


def test_tty_with_resize(kubectl_env: dict[str, str], test_namespace: str, sleeper: str) -> None:
    pid, terminal = pty.fork()
    if pid == 0:  # pragma: no cover - the child: kubectl on a 33x101 terminal
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
        os.execve(
            str(KUBECTL),
            [str(KUBECTL), "-n", test_namespace, "exec", "-it", "sleeper", "--", "sh", "-c", "tty; stty size; exit 4"],
            kubectl_env,
        )
    out = b""
    while True:
        try:
            chunk = os.read(terminal, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert "/dev/pts/" in text and "33 101" in text, text
    assert os.waitstatus_to_exitcode(status) == 4


def test_loopback_address_reaches_another_pods_port(kubectl: Kubectl, sleeper: str) -> None:
    serve = [
        sys.executable,
        "-c",
        "import os, socket, time; s = socket.socket(); "
        "s.bind((os.environ['POD_IP'], 23456)); s.listen(); time.sleep(600)",
    ]
    env = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    _create(kubectl, "master", containers=[{"name": "main", "image": "python:3.11", "command": serve, "env": env}])
    kubectl("wait", "--for=condition=Ready", "pod/master", timeout=90)
    ip = kubectl("get", "pod", "master", "-o", "jsonpath={.status.podIP}").stdout
    probe = [sys.executable, "-c", f"import socket; socket.create_connection(('{ip}', 23456), 5); print('open')"]
    for _ in range(50):  # the listener may take a moment after Ready
        done = kubectl("exec", "sleeper", "--", *probe, check=False)
        if done.returncode == 0:
            break
    assert done.stdout == "open\n", done.stderr
    if shutil.which("nc"):  # the seed's own command
        nc = kubectl("exec", "sleeper", "--", "nc", "-zv", ip, "23456")
        assert "succeeded" in nc.stderr or "open" in nc.stderr


def test_kubectl_cp_both_ways(kubectl: Kubectl, sleeper: str, tmp_path: Path, control_plane: Any) -> None:
    source = tmp_path / "model.bin"
    source.write_bytes(os.urandom(300_000))
    kubectl("cp", str(source), "sleeper:/scratch/model.bin", "-c", "main")
    assert kubectl("exec", "sleeper", "--", "sh", "-c", "wc -c < /scratch/model.bin").stdout.strip() == "300000"
    back = tmp_path / "back.bin"
    kubectl("cp", "sleeper:/scratch/model.bin", str(back), "-c", "main")
    assert back.read_bytes() == source.read_bytes()


def test_ten_concurrent_streams_of_10_mib(kubectl_env: dict[str, str], test_namespace: str, sleeper: str) -> None:
    payloads = [os.urandom(10 * 1024 * 1024) for _ in range(10)]

    def roundtrip(data: bytes) -> str:
        done = subprocess.run(
            [str(KUBECTL), "-n", test_namespace, "exec", "-i", "sleeper", "--", "cat"],
            input=data,
            capture_output=True,
            env=kubectl_env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return hashlib.sha256(done.stdout).hexdigest()

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        seen = list(pool.map(roundtrip, payloads))
    assert seen == [hashlib.sha256(p).hexdigest() for p in payloads]


def test_exec_into_a_running_init_container(kubectl: Kubectl) -> None:
    init = {"name": "setup", "image": "python:3.11", "command": SLEEP, "env": [{"name": "WHO", "value": "init"}]}
    _create(kubectl, "initializing", initContainers=[init])
    for _ in range(100):
        done = kubectl("exec", "initializing", "-c", "setup", "--", "sh", "-c", "echo $WHO", check=False)
        if done.returncode == 0:
            break
    assert done.stdout == "init\n", done.stderr


def _running(marker: str) -> list[int]:
    """Processes whose command line holds ``marker``, but for the kubectl that sent it."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in b" ".join(argv) and not argv[0].endswith(b"kubectl"):
                found.append(int(entry.name))
    return found


def _sleeping(marker: str) -> list[str]:
    """A command that sleeps and reads no input, found in ``/proc`` by ``marker``."""
    return [sys.executable, "-c", "import time; time.sleep(1000)", marker]


def _gone(marker: str, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while _running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_command_of_200_kb_is_answered(kubectl: Kubectl, sleeper: str) -> None:
    # kube-apiserver reads 1 MiB of request line; WebSocket's parser stopped at 8 KiB (kubectl
    # then fell back to SPDY and was refused)
    done = kubectl("exec", "sleeper", "--", "sh", "-c", "echo $((${#1} + ${#2}))", "_", "a" * 100_000, "b" * 100_000)
    assert done.stdout == "200000\n", done.stderr


def test_an_argument_longer_than_execve_takes_is_refused(control_plane: Any, test_namespace: str, sleeper: str) -> None:
    # kubectl cannot even start with such an argument (E2BIG): another WebSocket client can send it
    import ssl
    import urllib.parse

    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    query = urllib.parse.urlencode({"command": ["echo", "x" * 200_000], "stdout": "true"}, doseq=True)
    url = control_plane.api_url.replace("https://", "wss://") + f"/api/v1/namespaces/{test_namespace}/pods/sleeper/exec"
    tls = ssl.create_default_context(cafile=str(control_plane.ca))
    with pytest.raises(InvalidStatus) as refused:
        connect(
            f"{url}?{query}",
            ssl=tls,
            subprotocols=["v5.channel.k8s.io"],  # type: ignore[list-item]
            additional_headers={"Authorization": f"Bearer {control_plane.token}"},
            max_size=None,
        )
    assert refused.value.response.status_code == 400
    status = json.loads(refused.value.response.body)
    assert status["reason"] == "BadRequest"
    assert status["message"].startswith("command[1] is 200000 bytes: the node starts a command with execve")
    assert "pass long input on stdin" in status["message"]


def test_a_background_child_does_not_hold_the_stream_open(kubectl: Kubectl, sleeper: str) -> None:
    marker = f"background-{uuid.uuid4().hex}"
    child = f"{sys.executable} -c 'import time; time.sleep(1000)' {marker}"
    started = time.monotonic()
    done = kubectl("exec", "sleeper", "--", "sh", "-c", f"{child} & echo hi", timeout=20)
    assert done.stdout == "hi\n" and done.returncode == 0
    assert time.monotonic() - started < 10  # kubelet's exec ends when its command does
    assert _gone(marker), "the background child outlived its exec"


def test_a_command_whose_input_backs_up_goes_with_its_client(
    control_plane: Any, kubectl_env: dict[str, str], test_namespace: str, sleeper: str, tmp_path: Path
) -> None:
    marker = f"stalled-{uuid.uuid4().hex}"
    daemon_log = control_plane.home / "daemon.log"
    logged = daemon_log.stat().st_size
    said = tmp_path / "kubectl.stderr"
    with said.open("wb") as stderr:
        client = subprocess.Popen(
            [str(KUBECTL), "-v=6", "-n", test_namespace, "exec", "-i", "sleeper", "--", *_sleeping(marker)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=kubectl_env,
        )
    assert client.stdin is not None
    feeder = threading.Thread(target=_feed, args=(client.stdin,), daemon=True)
    feeder.start()
    try:
        deadline = time.monotonic() + 60
        while not _running(marker) and client.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _running(marker):
            with daemon_log.open("rb") as log:
                log.seek(logged)
                server = log.read().decode(errors="replace")
            pytest.fail(
                f"the command never started; kubectl ({client.poll()}) said:\n{said.read_text()}\n"
                f"the control plane logged meanwhile:\n{server}"
            )
        time.sleep(1)  # the input backs up: the command reads none of it
    finally:
        client.kill()
        client.wait()
    assert _gone(marker, timeout=15), "the command outlived its client"


def _feed(pipe: Any) -> None:
    with contextlib.suppress(OSError, ValueError):
        for _ in range(64):
            pipe.write(b"x" * (1 << 20))


def test_an_exec_goes_with_its_pod(kubectl: Kubectl, kubectl_env: dict[str, str], test_namespace: str) -> None:
    _create(kubectl, "doomed", terminationGracePeriodSeconds=1)
    kubectl("wait", "--for=condition=Ready", "pod/doomed", timeout=90)
    marker = f"doomed-{uuid.uuid4().hex}"
    client = subprocess.Popen(
        [str(KUBECTL), "-n", test_namespace, "exec", "doomed", "--", *_sleeping(marker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=kubectl_env,
    )
    try:
        deadline = time.monotonic() + 20
        while not _running(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _running(marker), "the command never started"
        kubectl("delete", "pod", "doomed", "--wait=true", timeout=60)
        assert _gone(marker), "the exec'd process outlived its pod"
        _, stderr = client.communicate(timeout=15)
        assert client.returncode == 137, stderr
    finally:
        client.kill()
        client.wait()


def test_a_command_over_1_mib_is_refused_with_the_limit(kubectl: Kubectl, sleeper: str) -> None:
    # kubectl retries the refused WebSocket upgrade over SPDY: that answer is the one it prints
    done = kubectl("exec", "sleeper", "--", "sh", "-c", "echo $#", *["x" * 100_000] * 11, check=False)
    assert done.returncode == 1
    assert "this API server reads URLs of at most 65535 bytes (1048576 for the WebSocket upgrade" in done.stderr
    assert "pass its input on stdin" in done.stderr


def test_long_commands_do_not_hold_up_other_clients(
    kubectl_env: dict[str, str], test_namespace: str, sleeper: str, kube_api: Any
) -> None:
    """While 1 MB exec commands come in, another client's list of namespaces stays fast."""
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    argv = [str(KUBECTL), "-n", test_namespace, "exec", "sleeper", "--", "sh", "-c", "echo $#"]
    argv += ["x" * 100_000] * 10
    stop = threading.Event()

    def heavy() -> None:
        while not stop.is_set():
            done = subprocess.run(argv, env=kubectl_env, capture_output=True, text=True, timeout=60)
            assert done.stdout == "9\n", done.stderr

    worker = threading.Thread(target=heavy)
    worker.start()
    try:
        time.sleep(0.3)
        latencies = []
        for _ in range(100):
            started = time.perf_counter()
            core.list_namespace()
            latencies.append(time.perf_counter() - started)
            time.sleep(0.01)
    finally:
        stop.set()
        worker.join()
    latencies.sort()
    print(
        f"list namespaces beside 1 MB exec commands: p50 {latencies[50] * 1000:.1f} ms, p99 {latencies[98] * 1000:.1f} ms"
    )
    assert latencies[98] < 0.2, f"p99 {latencies[98] * 1000:.0f} ms, median {latencies[50] * 1000:.0f} ms"
