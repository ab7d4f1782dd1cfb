"""Typed training-job objects: load from dict / YAML / file / model, check, default, dump.

Public names::

    from airflow_provider_training.specs import load_job, load_jobs, JobSpecError, PyTorchJob, ...

Validation (webhook rules, the provider's checks and lint, all at once) is
:func:`airflow_provider_training.validation.validate`.
"""

from __future__ import annotations

from airflow_provider_training.specs.common import (
    ElasticPolicy,
    JobCondition,
    JobStatus,
    ReplicaSpec,
    ReplicaStatus,
    RunPolicy,
    SchedulingPolicy,
)
from airflow_provider_training.specs.defaults import defaulted_from_dict, with_defaults
from airflow_provider_training.specs.issues import Issue
from airflow_provider_training.specs.jobs import (
    JAXJob,
    MPIJob,
    MXJob,
    PaddleJob,
    PyTorchJob,
    TFJob,
    TrainingJob,
    XGBoostJob,
    job_class,
)
from airflow_provider_training.specs.kinds import ALL_KINDS, KINDS, KindInfo, kind_info
from airflow_provider_training.specs.loader import JobSpecError, dump_yaml, load_job, load_jobs
from airflow_provider_training.specs.meta import ObjectMeta
from airflow_provider_training.specs.pod import Container, EnvVar, PodSpec, PodTemplateSpec

__all__ = [
    "ALL_KINDS",
    "KINDS",
    "Container",
    "ElasticPolicy",
    "EnvVar",
    "Issue",
    "JAXJob",
    "JobCondition",
    "JobSpecError",
    "JobStatus",
    "KindInfo",
    "MPIJob",
    "MXJob",
    "ObjectMeta",
    "PaddleJob",
    "PodSpec",
    "PodTemplateSpec",
    "PyTorchJob",
    "ReplicaSpec",
    "ReplicaStatus",
    "RunPolicy",
    "SchedulingPolicy",
    "TFJob",
    "TrainingJob",
    "XGBoostJob",
    "defaulted_from_dict",
    "dump_yaml",
    "job_class",
    "kind_info",
    "load_job",
    "load_jobs",
    "with_defaults",
]
