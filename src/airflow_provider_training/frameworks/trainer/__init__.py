"""Kubeflow Trainer v2.3.0's runtime framework as pure functions: a TrainJob and its resolved
runtime in, the JobSet (and MPI Secret/ConfigMap) upstream's controller would apply out.

Public names::

    from airflow_provider_training.frameworks.trainer import build, Built, BuildError
"""

from __future__ import annotations

from airflow_provider_training.frameworks.trainer.build import (
    BuildError,
    Built,
    build,
    endpoints,
    new_ssh_key,
    ssh_auth_secret,
)
from airflow_provider_training.frameworks.trainer.snapshot import SnapshotError, read_snapshot, runtime_snapshot
from airflow_provider_training.frameworks.trainer.trainerstatus import StatusServer

__all__ = [
    "BuildError",
    "Built",
    "SnapshotError",
    "StatusServer",
    "build",
    "endpoints",
    "new_ssh_key",
    "read_snapshot",
    "runtime_snapshot",
    "ssh_auth_secret",
]
