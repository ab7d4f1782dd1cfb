"""An MPI launcher's exec into its workers goes through the node (its view hides the node's files and
it holds no privilege to enter another pod's view): the agent serves ``<home>/node/bin/exec.sock``,
tells who asks by the caller's mount namespace (its pod's view), serves MPI launchers only and only
into their own job's pods. A client that goes away takes its command with it; malformed requests
change nothing."""

from __future__ import annotations

import array
import asyncio
import contextlib
import json
import os
import shutil
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

UNSHARE, NSENTER = shutil.which("unshare"), shutil.which("nsenter")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or UNSHARE is None or NSENTER is None, reason="needs root, unshare and nsenter"
)


class Broker:
    """An ExecBroker on an event loop of its own thread; pods are directories with a spec, and a
    pod's view is a process in a mount namespace of its own (its "supervisor")."""

    def __init__(self, node_dir: Path) -> None:
        self.node_dir = node_dir
        self.views: list[subprocess.Popen[bytes]] = []
        self.loop = asyncio.new_event_loop()
        self.broker = ExecBroker(node_dir)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self.broker.serve)

    def call(self, fn: object) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                fn()  # type: ignore[operator]
            finally:
                done.set()

        self.loop.call_soon_threadsafe(run)
        assert done.wait(10)

    def pod(self, name: str, job: str, launcher: bool = False) -> int:
        """A pod of job ``job`` whose view is a new mount namespace; the pid of a process in it."""
        directory = self.node_dir / "pods" / f"uid-{name}"
        directory.mkdir(parents=True)
        container = {"name": "main", "env": {"PATH": "/usr/bin:/bin"}, "mounts": [], "workdir": str(self.node_dir)}
        spec = {"namespace": "ns", "pod": name, "uid": f"uid-{name}", "job": job, "execBroker": launcher}
        spec.update(isolation="links", containers=[container])
        (directory / "spec.json").write_text(json.dumps(spec))
        view = subprocess.Popen([str(UNSHARE), "--mount", "sleep", "300"], stdin=subprocess.DEVNULL)
        self.views.append(view)
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{view.pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (directory / "supervisor.pid").write_text(str(view.pid))
        return view.pid

    def stop(self) -> None:
        self.call(self.broker.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        for view in self.views:
            view.kill()
            view.wait()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    served = Broker(tmp_path / "node")
    served.launcher = served.pod("launcher", "job=1", launcher=True)  # type: ignore[attr-defined]
    served.pod("worker-a", "job=1")
    served.pod("other-job-worker", "job=2")
    served.bystander = served.pod("bystander", "job=1")  # type: ignore[attr-defined]
    yield served
    served.stop()


def _kubectl(broker: Broker, *args: str, view: int | None = None) -> subprocess.Popen[str]:
    """The launcher's exec, as run from inside the pod whose view is ``view`` (the launcher's)."""
    pid = broker.launcher if view is None else view  # type: ignore[attr-defined]
    enter = [str(NSENTER), "-t", str(pid), "-m", "--"] if pid else []
    socket_path = broker.node_dir / "bin" / "exec.sock"
    return subprocess.Popen(
        [*enter, sys.executable, "-I", "-S", str(lifecycle.ENTRY), "remote-exec", str(socket_path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_launcher_execs_into_its_own_jobs_pods_only(broker: Broker) -> None:
    done = _kubectl(broker, "exec", "worker-a", "--", "sh", "-c", "echo in $(pwd); exit 3")
    out, err = done.communicate(timeout=30)
    assert (done.returncode, out.strip()) == (3, f"in {broker.node_dir}"), err
    refused = _kubectl(broker, "exec", "other-job-worker", "--", "echo", "pwned")
    out, err = refused.communicate(timeout=30)
    assert refused.returncode == 1 and out == ""
    assert 'Error from server (Forbidden): pods "other-job-worker" is forbidden' in err
    missing = _kubectl(broker, "exec", "nobody", "--", "true")
    _, err = missing.communicate(timeout=30)
    assert missing.returncode == 1 and 'pods "nobody" not found' in err


@pytest.mark.parametrize("caller", ["host", "bystander"])
def test_only_a_launcher_is_served_whatever_it_claims(broker: Broker, caller: str) -> None:
    """Who asks comes from the kernel (the caller's mount namespace), not from the request: a pod
    that is not an MPI launcher, or a process outside every pod, is refused."""
    view = 0 if caller == "host" else broker.bystander  # type: ignore[attr-defined]
    refused = _kubectl(broker, "exec", "worker-a", "--", "echo", "pwned", view=view)
    out, err = refused.communicate(timeout=30)
    assert refused.returncode == 1 and out == ""
    assert "serves the MPI launchers of this node only" in err


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
        sock.connect(str(broker.node_dir / "bin" / "exec.sock"))
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
