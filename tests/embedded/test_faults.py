"""Faults said plainly: a full disk is a 507 naming the store and heals when space is freed; a
damaged store is refused at start with the file named and how to recover; a container whose log
fills the disk keeps running and its log says what was dropped."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from airflow_provider_training.embedded import ControlPlane, start, stop
from airflow_provider_training.embedded.daemon import DaemonError
from airflow_provider_training.embedded.podlogs import LogWriter
from airflow_provider_training.embedded.store import Store, StoreDamagedError, StoreFullError
from tests.fixtures.control_plane import FAST_SETTINGS


def _cm(name: str, size: int = 10) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": {"a": "x" * size},
    }


def test_a_full_store_says_so_and_recovers(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.db")
    store.create("core/configmaps", _cm("before"))
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count={pages + 2}")  # SQLite's own SQLITE_FULL, as on a full disk
    with pytest.raises(StoreFullError) as caught:
        for i in range(50):
            store.create("core/configmaps", _cm(f"big-{i}", 20_000))
    assert str(caught.value) == f"insufficient storage: the store's disk is full ({tmp_path / 'store.db'})"
    rv = store.resource_version
    store._conn.execute("PRAGMA max_page_count=1073741823")  # space freed
    created = store.create("core/configmaps", _cm("after"))
    assert int(created["metadata"]["resourceVersion"]) == rv + 1
    assert store.get("core/configmaps", "ns", "before") is not None
    store.close()


def test_a_damaged_store_is_named_with_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = Store(path)
    for i in range(200):
        store.create("core/configmaps", _cm(f"cm-{i}", 500))
    store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    raw = bytearray(path.read_bytes())
    page = 4096
    raw[3 * page : 3 * page + 200] = os.urandom(200)  # a damaged page inside the database
    path.write_bytes(bytes(raw))
    with pytest.raises(StoreDamagedError) as caught:
        Store(path)
    message = str(caught.value)
    assert str(path) in message and "mv " in message and "restore" in message


def test_daemon_refuses_a_store_that_is_not_a_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "store.db").write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(DaemonError) as caught:
        start(home, env=FAST_SETTINGS, timeout=60)
    text = str(caught.value)
    assert f"the store {home / 'store.db'} is damaged" in text
    assert f"mv {home / 'store.db'} {home / 'store.db'}.damaged" in text
    assert "Traceback" not in text


def test_log_writer_survives_a_device_with_no_space() -> None:
    writer = LogWriter(Path("/dev/full"))  # every write fails with ENOSPC, for real
    writer.write("line one\nline two\n")
    writer.write("partial")
    assert writer.dropped > 0
    writer.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs: a disk that really fills up (root can mount one; skipped where it cannot)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        with contextlib.suppress(Exception):
            stop(mount / "home", replicas=True)
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(path: Path) -> None:
    chunk = b"\0" * (256 * 1024)
    with contextlib.suppress(OSError), open(path, "wb") as f:
        while True:
            f.write(chunk)
            f.flush()


def test_full_disk_507_and_a_log_that_fills_it(small_disk: Path) -> None:
    plane: ControlPlane = start(small_disk / "home", env=FAST_SETTINGS)
    marker = f"chatty-{uuid.uuid4().hex}"
    code = f"import itertools, sys, time  # {marker}\nfor i in itertools.count():\n    print('line', i, 'x' * 200, flush=True)\n    time.sleep(0.002)"
    with httpx.Client(
        base_url=plane.api_url, verify=str(plane.ca), headers={"Authorization": f"Bearer {plane.token}"}, timeout=30
    ) as http:
        pods = "/api/v1/namespaces/default/pods"
        pod = {
            "metadata": {"name": "chatty"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "python:3.11", "command": [sys.executable, "-c", code]}],
            },
        }
        assert http.post(pods, json=pod).status_code == 201
        deadline = time.monotonic() + 30
        while http.get(f"{pods}/chatty").json()["status"].get("phase") != "Running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        filler = small_disk / "filler"
        _fill(filler)
        time.sleep(1.0)  # the container keeps printing into a full disk
        # (a write may still fit in the store's log, which SQLite reuses once it was checkpointed:
        # the disk is full when the store can write no more)
        for attempt in range(100):
            refused = http.post(
                "/api/v1/namespaces/default/configmaps",
                json={"metadata": {"name": f"c-{attempt}"}, "data": {"a": "x" * 200_000}},
            )
            if refused.status_code != 201:
                break
        assert refused.status_code == 507, refused.text
        body = refused.json()
        assert body["reason"] == "InsufficientStorage"
        assert body["message"] == f"insufficient storage: the store's disk is full ({small_disk / 'home' / 'store.db'})"
        filler.unlink()  # space freed: the same request now works
        assert (
            http.post(
                "/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "c"}, "data": {"a": "x"}}
            ).status_code
            == 201
        )
        log_file = small_disk / "home" / "logs" / "default" / "chatty" / "main" / "0.log"
        deadline = time.monotonic() + 20
        while "[log truncated:" not in log_file.read_text(errors="replace"):
            assert time.monotonic() < deadline, "no truncation note in the log"
            time.sleep(0.2)
        text = log_file.read_text(errors="replace")
        after = text.split("[log truncated:", 1)[1]
        assert "bytes of output were dropped while the disk was full]" in after
        time.sleep(0.5)
        assert http.get(f"{pods}/chatty").json()["status"]["phase"] == "Running"  # the container kept running
        assert "line" in log_file.read_text(errors="replace").split("[log truncated:", 1)[1].split("\n", 1)[1]
        assert http.delete(f"{pods}/chatty").status_code == 200
