"""No node process outlives its purpose. A daemon killed with ``kill -9`` takes its zygote and the
spare supervisors forked ahead with it (also when the zygote's pipe leaked into a process that lives
on, and across kill/restart cycles); the supervisors of running pods stay, by design, for a
restarted daemon to adopt, until their data directory is deleted: then no daemon can ever adopt
them, and they stop their pods. (A benchmark once left 4,577 supervisors behind, each restarting a
crashed container every 5 minutes, and the machine's load reached 876.)"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_provider_training.embedded import ControlPlane, start, stop
from airflow_provider_training.embedded.node.lifecycle import ENTRY
from tests.fixtures.control_plane import FAST_SETTINGS
from tests.waiting import alive, wait_for

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _children(parent: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(int(p.name)) == parent]


def _zygote_family(daemon: int) -> list[int]:
    """The daemon's zygote and every process the zygote forked (spares, supervisors not yet on
    their own), as they are now."""
    zygotes = [pid for pid in _children(daemon) if b"zygote" in _cmdline(pid)]
    return zygotes + [child for zygote in zygotes for child in _children(zygote)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _supervisors(home: Path) -> set[int]:
    pids = set()
    for record in (home / "node" / "pods").glob("*/supervisor.pid"):
        with contextlib.suppress(OSError, ValueError):
            pids.add(int(record.read_text()))
    return pids


def _kill(pids: set[int] | list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


class Pods:
    def __init__(self, plane: ControlPlane) -> None:
        self.http = httpx.Client(
            base_url=plane.api_url, verify=str(plane.ca), headers={"Authorization": f"Bearer {plane.token}"}
        )

    def create(self, name: str, code: str, restart: str = "Never") -> None:
        container = {"name": "main", "image": "python:3.11", "command": [sys.executable, "-c", code]}
        body = {"metadata": {"name": name}, "spec": {"containers": [container], "restartPolicy": restart}}
        self.http.post("/api/v1/namespaces/default/pods", json=body).raise_for_status()

    def get(self, name: str) -> dict[str, Any]:
        response = self.http.get(f"/api/v1/namespaces/default/pods/{name}")
        response.raise_for_status()
        return dict(response.json())

    def running(self, name: str) -> bool:
        return (self.get(name).get("status") or {}).get("phase") == "Running"

    def restarts(self, name: str) -> int:
        statuses = (self.get(name).get("status") or {}).get("containerStatuses") or [{}]
        return int(statuses[0].get("restartCount") or 0)

    def container_pid(self, name: str) -> int:
        return int(self.get(name)["status"]["containerStatuses"][0]["containerID"].split("//")[1])


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    yield home
    stop(home, replicas=True)


def test_kill_9_of_the_daemon_ends_its_zygote_and_spares_but_not_its_pods(home: Path) -> None:
    plane = start(home, env=FAST_SETTINGS)
    pods = Pods(plane)
    pods.create("sleeper", "import time; time.sleep(300)")
    wait_for(lambda: pods.running("sleeper"), 30, "the sleeper to run")
    sleeper = pods.container_pid("sleeper")
    for cycle in range(3):  # kill, restart, kill again: no zygote or spare piles up across restarts
        daemon = plane.pid
        wait_for(lambda d=daemon: len(_zygote_family(d)) >= 1 + 4, 30, "the zygote and its 4 spares")
        # hostile: pods on their way through the zygote at the moment of the kill
        for i in range(5):
            pods.create(f"burst-{cycle}-{i}", "print('ok')")
        family = _zygote_family(daemon)
        pods.http.close()
        os.kill(daemon, signal.SIGKILL)

        def left(family: list[int] = family) -> list[int]:
            # a spare handed a pod just before the kill is that pod's supervisor now: it may stay
            return [pid for pid in family if alive(pid) and pid not in _supervisors(home)]

        try:
            wait_for(lambda: not left(), 10, "the zygote and its spares to end with their daemon")
        finally:
            _kill(left())
        assert alive(sleeper), "a running pod's container went down with the daemon"
        plane = start(home, env=FAST_SETTINGS)
        pods = Pods(plane)
        assert pods.running("sleeper") and pods.container_pid("sleeper") == sleeper  # adopted
    wait_for(lambda: len(_zygote_family(plane.pid)) >= 1 + 4, 30, "the new daemon's zygote and spares")
    assert len([pid for pid in _children(plane.pid) if b"zygote" in _cmdline(pid)]) == 1
    pods.http.close()


LEAKY_DAEMON = """
import subprocess, sys, time
zygote = subprocess.Popen([sys.executable, "-I", "-S", sys.argv[1], "zygote", "--spares", "2"],
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True)
# the leak: a process that outlives this one holds the write end of the zygote's stdin
holder = subprocess.Popen(["sleep", "300"], pass_fds=(zygote.stdin.fileno(),), start_new_session=True)
print(zygote.pid, holder.pid, flush=True)
time.sleep(300)
"""


def test_a_zygote_ends_with_its_daemon_even_when_its_pipe_leaked_into_a_survivor() -> None:
    daemon = subprocess.Popen(
        [sys.executable, "-c", LEAKY_DAEMON, str(ENTRY)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert daemon.stdout is not None
    zygote, holder = (int(word) for word in daemon.stdout.readline().split())
    family: list[int] = []
    try:
        wait_for(lambda: len(_children(zygote)) >= 2, 30, "the zygote's 2 spares")
        family = [zygote, *_children(zygote)]
        daemon.kill()
        daemon.wait()
        wait_for(lambda: not any(alive(pid) for pid in family), 10, "the zygote and its spares to end")
        assert alive(holder)  # (the pipe's write end was still open all along)
    finally:
        daemon.kill()
        daemon.wait()
        daemon.stdout.close()
        _kill([holder, *family])


def test_supervisors_of_a_deleted_data_directory_stop_their_pods(home: Path) -> None:
    plane = start(home, env=FAST_SETTINGS)
    pods = Pods(plane)
    pods.create("sleeper", "import time; time.sleep(300)")
    pods.create("crasher", "import sys; sys.exit(1)", restart="Always")  # CrashLoopBackOff for ever
    wait_for(
        lambda: pods.running("sleeper") and pods.restarts("crasher") >= 2,
        30,
        "a sleeper and a crash loop",
    )
    container = pods.container_pid("sleeper")
    supervisors = _supervisors(home)
    assert len(supervisors) == 2
    pods.http.close()
    try:
        os.kill(plane.pid, signal.SIGKILL)
        time.sleep(0.5)
        assert all(alive(pid) for pid in [*supervisors, container])  # still adoptable: they stay
        shutil.rmtree(home)
        home.mkdir()  # hostile: another data directory at the same path is not theirs
        wait_for(
            lambda: not any(alive(pid) for pid in [*supervisors, container]),
            30,
            "the supervisors of the deleted data directory to stop their pods and end",
        )
    finally:
        _kill([*supervisors, container])
