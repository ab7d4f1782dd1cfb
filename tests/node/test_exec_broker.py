"""An MPI launcher's ``kubectl exec`` goes through the node (its view hides the node's files and it
holds no privilege to enter another pod's view): the agent serves a socket in the launcher's
``/opt/kube``, runs the command in the target pod for it, and lets it reach only its own job's
pods. A client that goes away takes its command with it; malformed requests change nothing."""

from __future__ import annotations

import array
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_training.embedded.node import lifecycle
from airflow_provider_training.embedded.node.execbroker import ExecBroker


class Broker:
    """An ExecBroker on an event loop of its own thread, serving one launcher of job ``job-1``."""

    def __init__(self, node_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.broker = ExecBroker(node_dir)
        self.socket = node_dir / "launcher-volume" / "exec.sock"
        self.socket.parent.mkdir(parents=True)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(lambda: self.broker.serve("launcher", self.socket, "ns", "job-1"))

    def call(self, fn: object) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                fn()  # type: ignore[operator]
            finally:
                done.set()

        self.loop.call_soon_threadsafe(run)
        assert done.wait(10)

    def stop(self) -> None:
        self.call(self.broker.close_all)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _pod(node_dir: Path, uid: str, name: str, owner: str) -> None:
    directory = node_dir / "pods" / uid
    directory.mkdir(parents=True)
    container = {"name": "main", "env": {"PATH": "/usr/bin:/bin"}, "mounts": [], "workdir": str(node_dir)}
    spec = {"namespace": "ns", "pod": name, "uid": uid, "owner": owner, "isolation": "links", "containers": [container]}
    (directory / "spec.json").write_text(json.dumps(spec))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    node_dir = tmp_path / "node"
    _pod(node_dir, "uid-a", "worker-a", "job-1")
    _pod(node_dir, "uid-b", "other-job-worker", "job-2")
    served = Broker(node_dir)
    yield served
    served.stop()


def _kubectl(broker: Broker, *args: str, **kw: object) -> subprocess.Popen[str]:
    """The launcher's delivered kubectl, as the launcher runs it."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(lifecycle.ENTRY), "remote-exec", str(broker.socket), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[call-overload]
    )


def test_the_launcher_execs_into_its_own_jobs_pods_only(broker: Broker) -> None:
    done = _kubectl(broker, "exec", "worker-a", "--", "sh", "-c", "echo in $(pwd); exit 3")
    out, err = done.communicate(timeout=30)
    assert (done.returncode, out.strip()) == (3, f"in {broker.socket.parent.parent}"), err
    refused = _kubectl(broker, "exec", "other-job-worker", "--", "echo", "pwned")
    out, err = refused.communicate(timeout=30)
    assert refused.returncode == 1 and out == ""
    assert 'Error from server (Forbidden): pods "other-job-worker" is forbidden' in err
    missing = _kubectl(broker, "exec", "nobody", "--", "true")
    _, err = missing.communicate(timeout=30)
    assert missing.returncode == 1 and 'pods "nobody" not found' in err


def test_a_client_that_goes_away_takes_its_command_along(broker: Broker, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    client = _kubectl(broker, "exec", "worker-a", "--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 1000")
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the command did not start"
        time.sleep(0.02)
    pid = int(pid_file.read_text())
    client.send_signal(signal.SIGKILL)  # mpirun ending its rsh agent, or the launcher going
    client.wait()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid):
        assert time.monotonic() < deadline, "the command outlived its client"
        time.sleep(0.02)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@pytest.mark.parametrize(
    "request_bytes",
    [b"not json\n", b'{"argv": ["exec"]}', b"[1, 2, 3]\n", b"x" * (2 << 20)],
    ids=["not-json", "no-newline", "not-an-object", "oversized"],
)
def test_malformed_requests_are_dropped_and_the_next_one_is_served(broker: Broker, request_bytes: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(broker.socket))
        with open(os.devnull, "rb") as null:
            fds = array.array("i", [null.fileno()] * 3)
            sock.sendmsg([request_bytes[:65536]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        with contextlib.suppress(OSError):  # (the broker may have hung up on an oversized request already)
            sock.sendall(request_bytes[65536:])
            sock.shutdown(socket.SHUT_WR)
        sock.settimeout(15)
        assert sock.recv(100) == b""  # hung up, no exit code: nothing ran
    done = _kubectl(broker, "exec", "worker-a", "--", "echo", "still served")
    out, err = done.communicate(timeout=30)
    assert (done.returncode, out.strip()) == (0, "still served"), err
