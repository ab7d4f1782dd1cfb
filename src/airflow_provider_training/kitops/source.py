"""Where a ModelKit operator's ``source`` lives: a local directory or ``pvc://<claim>/<path>``."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

PVC_SCHEME = "pvc://"


class ClusterModeUnavailableError(RuntimeError):
    pass


def training_home() -> Path:
    """``$AIRFLOW_TRAINING_HOME``, else ``~/.airflow-training`` (the embedded control plane's data dir)."""
    env = os.environ.get("AIRFLOW_TRAINING_HOME")
    return Path(env) if env else Path.home() / ".airflow-training"


def embedded_claim_dir(claim: str, namespace: str = "default", home: Path | None = None) -> Path:
    """Directory backing a PersistentVolumeClaim on the embedded control plane.

    The one place that knows the embedded layout: point it at the control plane's real layout when
    that lands (``<home>/volumes/pvc/<namespace>/<claim>`` for now).
    """
    return (home or training_home()) / "volumes" / "pvc" / namespace / claim


def split_pvc(source: str) -> tuple[str, str] | None:
    """``pvc://claim/sub/dir`` -> ``("claim", "sub/dir")``; None for a local directory."""
    if not source.startswith(PVC_SCHEME):
        return None
    rest = source[len(PVC_SCHEME) :].strip("/")
    claim, _, sub = rest.partition("/")
    if not claim:
        raise ValueError(f"source {source!r} names no claim (expected pvc://<claim>/<path>)")
    if ".." in PurePosixPath(sub).parts:
        raise ValueError(f"source {source!r} leaves the claim's directory ('..' is not allowed)")
    return claim, sub.strip("/")


def resolve_source(source: str, namespace: str = "default", cluster: bool = False) -> Path:
    """The local directory to pack. ``pvc://claim/sub/dir`` maps to the claim's directory on the
    embedded control plane; on a real cluster packaging must run as a Job next to the volume."""
    split = split_pvc(source)
    if split is None:
        return Path(source).expanduser()
    claim, sub = split
    if cluster:
        raise ClusterModeUnavailableError(
            f"{source} lives in a PersistentVolumeClaim on a cluster, which this worker cannot read: "
            "package it with a Job on the cluster (mode='job' or 'auto'), or copy the model output to a "
            "local directory"
        )
    base = embedded_claim_dir(claim, namespace)
    target = (base / sub).resolve() if sub else base.resolve()
    if os.path.commonpath([str(base.resolve()), str(target)]) != str(base.resolve()):
        raise ValueError(f"source {source!r} leaves the claim's directory")
    return target
