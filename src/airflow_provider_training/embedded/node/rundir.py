"""Where the node keeps its pods' runtime directories (``<home>/node/pods/<uid>``): in memory where
the machine has a tmpfs for it, as a container runtime keeps its state under ``/run`` and a kubelet
backs secret and projected volumes with tmpfs.

A pod's runtime directory holds its supervisor's bookkeeping (``spec.json``, ``state.json`` written
on every change, the lock and pid files, the supervisor's log), the empty directories its views are
mounted on, and its secret, ConfigMap, downward-API and projected volumes (the service account's
token above all). Every pod start creates and renames a couple of dozen such files; on a slow disk
(a VM's, an encrypted or network home) that was a large part of a pod's start, and a token written
to disk outlives the pod. So on Linux ``<home>/node/pods`` is a symlink to
``/dev/shm/airflow-training-<uid>/<home hash>/pods`` (owner-only), and every path the node uses
stays ``<home>/node/pods/...``; so is ``<home>/node/endpoints`` (the published pod addresses). What users keep does not go there: emptyDir volumes (unless
``medium: Memory``) are under ``<home>/node/emptydir/<uid>/``, container logs under ``<home>/logs``.

The directory lives as long as the machine's tmpfs: supervisors (and the pods) survive a daemon
restart and are adopted as before; after a reboot the directory is gone with the processes, and the
pods bound to this node are reported lost, as they would be anyway.

``AIRFLOW_TRAINING_RUNTIME_DIR``: another directory for them (a tmpfs elsewhere), or ``home`` to keep
them in the data directory (the layout before: a real directory ``<home>/node/pods``). A data
directory that already has a real ``node/pods`` keeps it (pods may still run from it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

RUNTIME_DIR_ENV = "AIRFLOW_TRAINING_RUNTIME_DIR"
IN_HOME = "home"
TMPFS = Path("/dev/shm")


def pods_dir(node_dir: Path) -> Path:
    """``node_dir / "pods"``, made ready: a symlink into memory where possible, else a directory."""
    return runtime_dir(node_dir, "pods")


def runtime_dir(node_dir: Path, name: str) -> Path:
    """``node_dir / name`` for runtime state (``pods``, the published ``endpoints``), made ready."""
    link = node_dir / name
    node_dir.mkdir(parents=True, exist_ok=True)
    if link.is_dir() and not link.is_symlink():
        return link  # a data directory from before, or one that asked for it
    base = _memory_base()
    if base is None:
        if link.is_symlink():  # (asked for the home since): pods left in memory are gone with it
            link.unlink()
        link.mkdir(exist_ok=True)
        return link
    target = base / hashlib.sha256(str(node_dir.resolve()).encode()).hexdigest()[:16] / name
    target.mkdir(parents=True, exist_ok=True)
    for directory in (target.parent, target):
        os.chmod(directory, 0o700)  # tokens and secrets: the owner's only
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return link
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(target, target_is_directory=True)
    return link


def _memory_base() -> Path | None:
    chosen = os.environ.get(RUNTIME_DIR_ENV, "")
    if chosen == IN_HOME:
        return None
    if chosen:
        base = Path(chosen).expanduser()
    elif TMPFS.is_dir() and os.access(TMPFS, os.W_OK | os.X_OK):
        base = TMPFS / f"airflow-training-{os.geteuid()}"
    else:
        return None  # no tmpfs (macOS): in the data directory
    try:
        base.mkdir(parents=True, exist_ok=True)
        os.chmod(base, 0o700)
    except OSError:
        return None
    return base


def empty_dir(node_dir: Path, uid: str) -> Path:
    """Where a pod's disk-backed emptyDir volumes go (``<name>`` below it), out of memory."""
    return node_dir / "emptydir" / uid
