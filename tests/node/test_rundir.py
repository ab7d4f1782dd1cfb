"""Where pods' runtime directories go (``node/rundir.py``): a symlink from the data directory into
memory, owner-only; the data directory's own ``node/pods`` when asked, or when one is there already."""

from __future__ import annotations

import os
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
    for path in sorted(memory.rglob("*"), reverse=True):
        path.rmdir()
    memory.rmdir()
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
