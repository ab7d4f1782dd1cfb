"""Which REST resource serves a kind: the training-job kinds, batch/v1 Jobs and KServe
InferenceServices — a view by kind of the one resource table (``specs.resources``)."""

from __future__ import annotations

from airflow_provider_training.specs.kinds import ALL_KINDS
from airflow_provider_training.specs.resources import BY_KIND, ResourceType

Resource = ResourceType  # the client's name for it: group, version, plural, kind, api_version, path()

BATCH_JOB = BY_KIND["Job"]
INFERENCE_SERVICE = BY_KIND["InferenceService"]
TRAINING_JOBS: dict[str, Resource] = {info.kind: BY_KIND[info.kind] for info in ALL_KINDS}
TRAINJOB = BY_KIND["TrainJob"]  # Kubeflow Trainer v2
RESOURCES: dict[str, Resource] = {
    **TRAINING_JOBS,
    "Job": BATCH_JOB,
    "InferenceService": INFERENCE_SERVICE,
    "TrainJob": TRAINJOB,
}


# Kinds a follow (``following.py``) may also watch: the core objects around a job.
CORE: dict[str, Resource] = {"Pod": BY_KIND["Pod"], "Event": BY_KIND["Event"]}


def resource_for(kind: str) -> Resource:
    """The resource of ``kind``; the error lists the kinds this client handles."""
    try:
        return RESOURCES[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r}: the client handles {', '.join(RESOURCES)}") from None


def followable(kind: str) -> Resource:
    """The resource of ``kind`` for a follow: the client's kinds, pods and events."""
    if kind in CORE:
        return CORE[kind]
    try:
        return RESOURCES[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r}: a follow handles {', '.join([*RESOURCES, *CORE])}") from None
