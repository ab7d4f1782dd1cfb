"""Kubeflow Trainer v2.3.0 (TrainJob, TrainingRuntime, ClusterTrainingRuntime) and JobSet v0.12.0:
typed objects, the vendored CRDs, the default ClusterTrainingRuntimes and the admission rules.

Public names::

    from airflow_provider_training.specs.trainer import TrainJob, TrainingRuntime, JobSet, default_runtimes
"""

from __future__ import annotations

from airflow_provider_training.specs.trainer.crds import ALL_TRAINER_KINDS, TRAINER_KINDS, TrainerKind
from airflow_provider_training.specs.trainer.models import (
    JobSet,
    MLPolicy,
    ReplicatedJob,
    RuntimePatch,
    RuntimeRef,
    Trainer,
    TrainingRuntime,
    TrainJob,
)
from airflow_provider_training.specs.trainer.runtimes import (
    default_runtime,
    default_runtime_documents,
    default_runtimes,
)

__all__ = [
    "ALL_TRAINER_KINDS",
    "TRAINER_KINDS",
    "JobSet",
    "MLPolicy",
    "ReplicatedJob",
    "RuntimePatch",
    "RuntimeRef",
    "TrainJob",
    "Trainer",
    "TrainerKind",
    "TrainingRuntime",
    "default_runtime",
    "default_runtime_documents",
    "default_runtimes",
]
