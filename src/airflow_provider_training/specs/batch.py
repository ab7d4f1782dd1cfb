"""batch/v1 Job: the seed's packaging pattern runs one after training (``package-job.yaml``)."""

from __future__ import annotations

from airflow_provider_training.specs.base import KubeModel
from airflow_provider_training.specs.meta import ObjectMeta
from airflow_provider_training.specs.pod import PodTemplateSpec


class BatchJobSpec(KubeModel):
    template: PodTemplateSpec
    backoff_limit: int | None = None
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    completions: int | None = None
    parallelism: int | None = None


class BatchJob(KubeModel):
    api_version: str = "batch/v1"
    kind: str = "Job"
    metadata: ObjectMeta = ObjectMeta()
    spec: BatchJobSpec
