"""Where pods' runtime directories go (``node/rundir.py``): a symlink from the data directory into
memory, owner-only; the data directory's own ``node/pods`` when asked, or when one is there already."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from airflow_provider_training.embedded.node import rundir


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_pods_go_to_memory_through_a_symlink_only_the_owner_can_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = tmp_path / "shm"
    monkeypatch.setenv(rundir.RUNTIME_DIR_ENV, str(memory))
    node = tmp_path / "home" / "node"
    pods = rundir.pods_dir(node)
    assert pods == node / "pods" and pods.is_symlink()
    target = pods.resolve()
    assert target.is_relative_to(memory) and target.is_dir()
    assert _mode(memory) == _mode(target.parent) == _mode(target) == 0o700
    (pods / "uid-1").mkdir()
    assert rundir.pods_dir(node) == pods and (pods / "uid-1").is_dir()  # the same place next time
    other = rundir.pods_dir(tmp_path / "other-home" / "node").resolve()
    assert other != target  # one place per data directory


def test_a_runtime_directory_gone_with_a_reboot_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = tmp_path / "shm"
    monkeypatch.setenv(rundir.RUNTIME_DIR_ENV, str(memory))
    node = tmp_path / "home" / "node"
    target = rundir.pods_dir(node).resolve()
    shutil.rmtree(memory)
    assert not (node / "pods").exists()  # a dangling link, as after a reboot
    assert rundir.pods_dir(node).resolve() == target and target.is_dir()


def test_the_data_directory_keeps_its_pods_when_asked_or_when_it_has_them_already(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(rundir.RUNTIME_DIR_ENV, rundir.IN_HOME)
    node = tmp_path / "home" / "node"
    pods = rundir.pods_dir(node)
    assert pods.is_dir() and not pods.is_symlink()
    (pods / "uid-1").mkdir()  # a pod of a daemon from before
    monkeypatch.setenv(rundir.RUNTIME_DIR_ENV, str(tmp_path / "shm"))
    assert rundir.pods_dir(node) == pods and not pods.is_symlink() and (pods / "uid-1").is_dir()


def test_without_a_usable_tmpfs_the_pods_stay_in_the_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(rundir.RUNTIME_DIR_ENV, raising=False)
    monkeypatch.setattr(rundir, "TMPFS", tmp_path / "no-such-tmpfs")
    pods = rundir.pods_dir(tmp_path / "home" / "node")
    assert pods.is_dir() and not pods.is_symlink()


def test_empty_dirs_are_on_disk_beside_the_runtime_directories(tmp_path: Path) -> None:
    node = tmp_path / "home" / "node"
    assert rundir.empty_dir(node, "uid-1") == node / "emptydir" / "uid-1"
    assert os.path.commonpath([rundir.empty_dir(node, "uid-1"), node / "pods"]) == str(node)


def test_a_deleted_data_directory_leaves_nothing_in_memory_once_its_pods_have_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = tmp_path / "shm"
    monkeypatch.setenv(rundir.RUNTIME_DIR_ENV, str(memory))
    gone, running, kept = (tmp_path / name / "node" for name in ("gone", "running", "kept"))
    for node in (gone, running, kept):
        (rundir.pods_dir(node) / "uid-1").mkdir()
    places = {node: (node / "pods").resolve().parent for node in (gone, running, kept)}
    with open(places[running] / "pods" / "uid-1" / "supervisor.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a supervisor of the deleted data directory still runs
        shutil.rmtree(gone.parent)
        shutil.rmtree(running.parent)
        rundir.pods_dir(tmp_path / "new" / "node")  # the next node to start on the machine
        assert not places[gone].exists()  # its pods' tokens and state are not held in memory
        assert places[running].exists() and places[kept].exists()
    rundir.pods_dir(tmp_path / "new" / "node")
    assert not places[running].exists()  # once its supervisor has ended
    assert (kept / "pods" / "uid-1").is_dir()  # a data directory that exists keeps its pods


def test_a_place_left_by_an_older_version_is_traced_through_its_pods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = tmp_path / "shm"
    monkeypatch.setenv(rundir.RUNTIME_DIR_ENV, str(memory))
    old = tmp_path / "old" / "node"
    pod = rundir.pods_dir(old) / "uid-1"
    pod.mkdir()
    (pod / "spec.json").write_text(json.dumps({"logs": str(old.parent / "logs")}))
    place = (old / "pods").resolve().parent
    (place / rundir.HOME_MARK).unlink()  # made before the marks
    rundir.pods_dir(tmp_path / "new" / "node")
    assert place.exists()  # its data directory is still there
    shutil.rmtree(old.parent)
    rundir.pods_dir(tmp_path / "new" / "node")
    assert not place.exists()
