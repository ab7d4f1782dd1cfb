"""Talking to the API server that holds training jobs (a cluster or the embedded control plane).

No Airflow here: ``TrainingJobClient`` (``kubernetes``) and ``AsyncTrainingJobClient``
(``kubernetes_asyncio``) take a configured API client; the hooks build those from Airflow
connections. Both also handle batch/v1 ``Job`` and KServe ``InferenceService`` objects.
"""

from airflow_provider_training.client.aio import AsyncTrainingJobClient
from airflow_provider_training.client.errors import JobDeleted, JobNotFound, TrainingJobError, WaitTimeout
from airflow_provider_training.client.logs import LogFollower
from airflow_provider_training.client.resources import RESOURCES, Resource, resource_for
from airflow_provider_training.client.state import (
    JobState,
    ReplicaFailure,
    job_images,
    job_state,
    replica_failure,
    summary,
)
from airflow_provider_training.client.sync import TrainingJobClient
from airflow_provider_training.specs.refs import ObjectRef

__all__ = [
    "RESOURCES",
    "AsyncTrainingJobClient",
    "JobDeleted",
    "JobNotFound",
    "JobState",
    "LogFollower",
    "ObjectRef",
    "ReplicaFailure",
    "Resource",
    "TrainingJobClient",
    "TrainingJobError",
    "WaitTimeout",
    "job_images",
    "job_state",
    "replica_failure",
    "resource_for",
    "summary",
]
