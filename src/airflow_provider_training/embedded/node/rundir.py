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
pods bound to this node are reported lost, as they would be anyway. A data directory deleted with
its daemon stopped (a test's, ``rm -rf`` of a home) leaves its runtime directory behind; the next
node to start on the machine removes every such one whose supervisors have all ended (each records
its data directory in a ``home`` file), so memory is not held until a reboot.

``AIRFLOW_TRAINING_RUNTIME_DIR``: another directory for them (a tmpfs elsewhere), or ``home`` to keep
them in the data directory (the layout before: a real directory ``<home>/node/pods``). A data
directory that already has a real ``node/pods`` keeps it (pods may still run from it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

from airflow_provider_training.embedded.node.lifecycle import lock_held

RUNTIME_DIR_ENV = "AIRFLOW_TRAINING_RUNTIME_DIR"
IN_HOME = "home"
TMPFS = Path("/dev/shm")
HOME_MARK = "home"  # in each data directory's place in memory: that data directory's node directory


def pods_dir(node_dir: Path) -> Path:
    """``node_dir / "pods"``, made ready: a symlink into memory where possible, else a directory.
    Also removes what data directories deleted since left in memory (``sweep``)."""
    link = runtime_dir(node_dir, "pods")
    if link.is_symlink():
        place = link.resolve().parent
        sweep(place.parent, keep=place)
    return link


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
    if not (link.is_symlink() and Path(os.readlink(link)) == target):
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    mark = target.parent / HOME_MARK
    if not mark.exists():  # after the link: a marked place whose data directory has no link to it is stale
        mark.write_text(str(node_dir.resolve()))
    return link


def sweep(base: Path, keep: Path) -> list[Path]:
    """Remove the places under ``base`` of data directories that no longer link to them (deleted,
    or switched to ``home``) and whose supervisors have all ended; returns what was removed. A place
    from before the marks is traced through its pods' specs (their ``logs`` is ``<home>/logs``)."""
    removed = []
    with contextlib.suppress(OSError):
        for place in base.iterdir():
            if place == keep or place.is_symlink() or not place.is_dir():
                continue
            try:
                if _in_use(place):
                    continue
                shutil.rmtree(place)
            except OSError:  # another node removing it too, or not ours to remove
                continue
            removed.append(place)
    return removed


def _in_use(place: Path) -> bool:
    pods = [pod for pod in (place / "pods").glob("*") if pod.is_dir()]
    node_dir = _node_dir_of(place, pods)
    if node_dir is None:
        return True  # being made (the mark comes last), or empty and from before the marks: left alone
    if any(
        (node_dir / name).is_symlink() and (node_dir / name).resolve().parent == place.resolve()
        for name in ("pods", "endpoints")
    ):
        return True  # its data directory still uses it
    # pods of a deleted data directory that still run: removed once they end
    return any(lock_held(pod / "supervisor.lock") for pod in pods)


def _node_dir_of(place: Path, pods: list[Path]) -> Path | None:
    with contextlib.suppress(OSError):
        return Path((place / HOME_MARK).read_text())
    for pod in pods:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return Path(json.loads((pod / "spec.json").read_text())["logs"]).parent / "node"
    return None


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


def hidden(node_dir: Path) -> tuple[str, ...]:
    """What no pod may see: the data directory (the admin token, the service-account signing key,
    the store, the logs and every pod's volumes) and the runtime directories in memory (every pod's
    tokens and secrets), each data directory's on this machine when they are in the default place."""
    out = [str(node_dir.parent.resolve())]
    pods = node_dir / "pods"
    if pods.is_symlink():
        place = pods.resolve().parent
        base = place.parent
        out.append(str(base if base.name.startswith("airflow-training-") else place))
    return tuple(out)
