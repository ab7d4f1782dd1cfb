"""Daemon lifecycle and durability, each test with a private daemon in its own data directory."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from airflow_provider_training.embedded import ControlPlane, DaemonError, start, status, stop
from tests.fixtures.control_plane import FAST_SETTINGS


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # stdout is a pipe read to EOF: `start` must not leave the daemon holding it
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_training.cli.main", "embedded", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def _core(plane: ControlPlane) -> client.CoreV1Api:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    return client.CoreV1Api(client.ApiClient(configuration))


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "home"
    stop(tmp_path / "home")


def test_cli_start_status_stop(home: Path) -> None:
    started = _cli("start", "--home", str(home))
    assert started.returncode == 0, started.stdout + started.stderr
    assert "API:        https://127.0.0.1:" in started.stdout
    assert f"kubeconfig: {home / 'kubeconfig'}" in started.stdout
    state = _cli("status", "--home", str(home))
    assert state.returncode == 0 and "running (pid" in state.stdout
    pid = status(home).pid
    again = _cli("start", "--home", str(home))  # one daemon per data directory
    assert again.returncode == 0 and status(home).pid == pid
    assert (home / "kubeconfig").stat().st_mode & 0o077 == 0  # holds the token: owner only
    stopped = _cli("stop", "--home", str(home))
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    after = _cli("status", "--home", str(home))
    assert after.returncode == 3 and "not running" in after.stdout


def test_home_from_the_environment(tmp_path: Path) -> None:
    env = {"AIRFLOW_TRAINING_HOME": str(tmp_path / "from-env")}
    try:
        assert _cli("start", env=env).returncode == 0
        assert (tmp_path / "from-env" / "store.db").exists()
    finally:
        _cli("stop", env=env)


def test_status_tells_the_truth_after_kill_9(home: Path) -> None:
    plane = start(home, env=FAST_SETTINGS)
    os.kill(plane.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    state = status(home)
    while state.running and time.monotonic() < deadline:
        time.sleep(0.05)
        state = status(home)
    assert not state.running
    assert f"pid {plane.pid} ended without cleaning up" in state.message
    assert not (home / "daemon.pid").exists()
    restarted = start(home, env=FAST_SETTINGS)
    assert restarted.pid != plane.pid and restarted.api_url == plane.api_url  # same port: kubeconfigs stay valid


def test_acknowledged_writes_survive_kill_9_and_watch_resumes(home: Path) -> None:
    plane = start(home, env=FAST_SETTINGS)
    core = _core(plane)
    acknowledged: list[tuple[str, int]] = []
    stop_writing = threading.Event()

    def writer() -> None:
        i = 0
        while not stop_writing.is_set():
            try:
                made = core.create_namespaced_config_map(
                    "default", {"metadata": {"name": f"cm-{i}"}, "data": {"i": str(i)}}
                )
            except Exception:
                return  # the daemon died mid-request: that write was never acknowledged
            acknowledged.append((made.metadata.name, int(made.metadata.resource_version)))
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    while len(acknowledged) < 60:
        time.sleep(0.01)
    os.kill(plane.pid, signal.SIGKILL)
    stop_writing.set()
    thread.join(timeout=30)
    watched_until = acknowledged[29][1]  # a watcher that had seen the first 30 writes

    restarted = start(home, env=FAST_SETTINGS)
    core = _core(restarted)
    stored = {
        cm.metadata.name: int(cm.metadata.resource_version) for cm in core.list_namespaced_config_map("default").items
    }
    missing = [name for name, _ in acknowledged if name not in stored]
    assert not missing, f"acknowledged but lost: {missing}"
    assert all(stored[name] == rv for name, rv in acknowledged)

    resumed = [
        e["object"].metadata.name
        for e in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=str(watched_until), timeout_seconds=1
        )
    ]
    expected = [name for name, rv in acknowledged if rv > watched_until]
    assert resumed[: len(expected)] == expected


def test_watch_older_than_the_event_history_gets_410(home: Path) -> None:
    plane = start(home, env={**FAST_SETTINGS, "AIRFLOW_TRAINING_EVENT_RETENTION": "20"})
    core = _core(plane)
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "first"}})
    for i in range(40):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"later-{i}"}})
    with pytest.raises(ApiException) as expired:
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=first.metadata.resource_version,
                timeout_seconds=2,
            )
        )
    assert expired.value.status == 410
    # the hint works: list again, watch from the list's resourceVersion
    fresh = core.list_namespaced_config_map("default").metadata.resource_version
    assert (
        list(
            watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=fresh, timeout_seconds=1)
        )
        == []
    )


def test_a_store_from_a_newer_provider_is_refused(home: Path) -> None:
    start(home, env=FAST_SETTINGS)
    stop(home)
    with sqlite3.connect(home / "store.db") as db:
        db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(DaemonError) as refused:
        start(home, timeout=10)
    assert "schema version 99" in str(refused.value) and "upgrade the provider" in str(refused.value)
    cli: Any = _cli("start", "--home", str(home), "--timeout", "10")
    assert cli.returncode == 1 and "schema version 99" in cli.stdout


def test_events_expire_after_the_time_to_live_as_with_event_ttl(home: Path) -> None:
    plane = start(home, env={**FAST_SETTINGS, "AIRFLOW_TRAINING_EVENT_TTL": "2"})
    core = _core(plane)
    listed = core.list_namespaced_event("default").metadata.resource_version
    started = time.monotonic()
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "job.started"},
            "involvedObject": {"kind": "PyTorchJob", "name": "job", "namespace": "default"},
            "reason": "Started",
            "message": "a user's event",
            "type": "Normal",
        },
    )
    assert [e.metadata.name for e in core.list_namespaced_event("default").items] == ["job.started"]
    deleted: list[str] = []
    events = watch.Watch()
    for e in events.stream(core.list_namespaced_event, "default", resource_version=listed, timeout_seconds=15):
        if e["type"] == "DELETED":
            deleted.append(e["object"].metadata.name)
            events.stop()
    assert deleted == ["job.started"]  # watchers are told, as when etcd's lease expires
    # after its time to live (2 s; creationTimestamp has whole seconds, so 1-2 s), not before
    assert 1.0 <= time.monotonic() - started < 10
    assert core.list_namespaced_event("default").items == []
