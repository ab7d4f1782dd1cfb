"""What an API server with Kubeflow Trainer v2.3.0 and JobSet v0.12.0 installed decides about a
create or update of a TrainJob, (Cluster)TrainingRuntime or JobSet, in the API server's order:
prune unknown fields, CRD defaults, mutating webhooks, schema and CEL, validating webhooks.

For an embedded control plane to call from its API server; the store lookups it needs (the
referenced runtime, the JobSet's active replicatedJobs) come in as arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training.specs.issues import Issue
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer import documents, jobset_webhook, webhook
from airflow_provider_training.specs.trainer.models import JobSet, TrainingRuntime, TrainJob

# Finds the runtime a TrainJob references: the runtime, or None and the lookup error (NotFound text).
RuntimeLookup = Callable[[TrainJob], "tuple[TrainingRuntime | None, str | None]"]


@dataclass
class Admission:
    object: dict[str, Any]
    errors: list[Issue] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unknown_fields: list[str] = field(default_factory=list)
    # True when a webhook (not the schema) refused it: the API server answers 403 instead of 422.
    denied_by_webhook: bool = False


def admit(
    obj: dict[str, Any],
    *,
    old: dict[str, Any] | None = None,
    field_validation: str = "Strict",
    lookup_runtime: RuntimeLookup | None = None,
    active_replicated_jobs: Iterable[str] = (),
    now: str = "",
) -> Admission:
    """Admit ``obj``; ``now`` (RFC 3339) stamps ``runtimePatches[].time`` as the defaulting webhook does."""
    if obj.get("kind") == c.TRAINJOB and now:
        obj = webhook.default_runtime_patch_times(obj, old, now)
    checked = documents.check_document(obj, old)
    result = Admission(object=checked.defaulted if checked.defaulted is not None else obj)
    result.unknown_fields = [issue.path for issue in checked.unknown]
    result.errors = list(checked.errors)
    if field_validation == "Strict" and result.unknown_fields:
        result.errors += [Issue(path, "unknown field", "cluster", "schema") for path in result.unknown_fields]
    elif field_validation == "Warn":
        result.warnings += [f'unknown field "{path}"' for path in result.unknown_fields]
    if result.errors or checked.object is None:
        return result
    errors, warnings = _webhooks(checked.object, checked.defaulted or obj, old, lookup_runtime, active_replicated_jobs)
    result.errors, result.denied_by_webhook = errors, bool(errors)
    result.warnings += warnings
    return result


def _webhooks(
    obj: TrainJob | TrainingRuntime | JobSet,
    data: dict[str, Any],
    old: dict[str, Any] | None,
    lookup_runtime: RuntimeLookup | None,
    active: Iterable[str],
) -> tuple[list[Issue], list[str]]:
    if isinstance(obj, TrainJob):
        old_job = _typed(old, TrainJob)
        runtime, error = lookup_runtime(obj) if lookup_runtime is not None else (None, None)
        return webhook.check_trainjob(obj, runtime, lookup_error=error, old=old_job, active_replicated_jobs=active)
    if isinstance(obj, TrainingRuntime):
        return webhook.check_runtime(obj, _typed(old, TrainingRuntime))
    return jobset_webhook.check_jobset(data, jobset_webhook.jobset_defaults(old) if old is not None else None), []


def _typed(data: dict[str, Any] | None, cls: type[Any]) -> Any:
    if data is None:
        return None
    checked = documents.check_document(data)
    return checked.object if isinstance(checked.object, cls) else None
