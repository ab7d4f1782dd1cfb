"""batch/v1 Job: the seed's packaging pattern runs one after training (``package-job.yaml``)."""

from __future__ import annotations

from typing import Any

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


# kube-apiserver's limits on Indexed Jobs (pkg/apis/batch/validation): they cap the length of
# ``status.completedIndexes`` / ``failedIndexes``.
MAX_PARALLELISM_FOR_INDEXED_JOB = 100_000
MAX_FAILED_INDEXES_FOR_INDEXED_JOB = 100_000
COMPLETIONS_SOFT_LIMIT = 100_000
PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS = 10_000
MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS = 10_000


def indexed_job_issues(spec: dict[str, Any], path: str = "spec") -> list[tuple[str, str]]:
    """kube-apiserver's checks of an Indexed Job's counts, with its field paths and words: what a
    Job the JobSet controller creates is refused for (users cannot create Indexed Jobs here)."""
    if spec.get("completionMode") != "Indexed":
        return []
    issues: list[tuple[str, str]] = []
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    max_failed, per_index = spec.get("maxFailedIndexes"), spec.get("backoffLimitPerIndex")
    if completions is None:
        issues.append((f"{path}.completions", "Required value: when completion mode is Indexed"))
    if isinstance(parallelism, int) and parallelism > MAX_PARALLELISM_FOR_INDEXED_JOB:
        issues.append(
            (
                f"{path}.parallelism",
                f"Invalid value: {parallelism}: must be less than or equal to "
                f"{MAX_PARALLELISM_FOR_INDEXED_JOB} when completion mode is Indexed",
            )
        )
    if isinstance(completions, int) and isinstance(max_failed, int) and max_failed > completions:
        issues.append(
            (f"{path}.maxFailedIndexes", f"Invalid value: {max_failed}: must be less than or equal to completions")
        )
    if isinstance(max_failed, int) and max_failed > MAX_FAILED_INDEXES_FOR_INDEXED_JOB:
        issues.append(
            (
                f"{path}.maxFailedIndexes",
                f"Invalid value: {max_failed}: must be less than or equal to {MAX_FAILED_INDEXES_FOR_INDEXED_JOB}",
            )
        )
    if isinstance(completions, int) and completions > COMPLETIONS_SOFT_LIMIT and per_index is not None:
        high = f"when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
        if max_failed is None:
            issues.append(
                (
                    f"{path}.maxFailedIndexes",
                    f"Required value: must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}",
                )
            )
        if isinstance(parallelism, int) and parallelism > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS:
            issues.append(
                (
                    f"{path}.parallelism",
                    f"Invalid value: {parallelism}: must be less than or equal to "
                    f"{PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS} {high}",
                )
            )
        if isinstance(max_failed, int) and max_failed > MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS:
            issues.append(
                (
                    f"{path}.maxFailedIndexes",
                    f"Invalid value: {max_failed}: must be less than or equal to "
                    f"{MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS} {high}",
                )
            )
    return issues
