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
    runtime_snapshot,
    ssh_auth_secret,
)

__all__ = [
    "BuildError",
    "Built",
    "build",
    "endpoints",
    "new_ssh_key",
    "runtime_snapshot",
    "ssh_auth_secret",
]
