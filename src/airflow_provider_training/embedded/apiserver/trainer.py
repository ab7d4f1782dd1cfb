"""Admission of Kubeflow Trainer v2 and JobSet objects (TrainJob, TrainingRuntime,
ClusterTrainingRuntime, JobSet) as an API server with Trainer v2.3.0 and JobSet v0.12.0 installed
decides it (``frameworks.trainer.admission``): CRD schema, defaults and CEL, then the webhooks, with
the referenced runtime and the existing JobSet looked up in the store. Schema/CEL refusals and
JobSet's webhook are 422 Invalid; Trainer's validating webhooks are 403 ``admission webhook
"validator.trainjob.trainer.kubeflow.org" denied the request: …`` (``trainer-v2.md`` §6), with
upstream's field paths and messages; strict decoding errors are 400, as for the v1 kinds."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_provider_training.embedded.apiserver.errors import ApiError, bad_request, invalid
from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.embedded.store import Store
from airflow_provider_training.embedded.trainerruntimes import install_default_runtimes, stored_runtime
from airflow_provider_training.embedded.workloads.trainer_initializer import pvc_problem
from airflow_provider_training.frameworks.trainer import admission
from airflow_provider_training.frameworks.trainer import jobset as js
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.documents import check_document
from airflow_provider_training.specs.unstructured import Unstructured

JOBSETS = "jobset.x-k8s.io/jobsets"
BATCH_JOBS = "batch/jobs"


def webhook_denied(rt: ResourceType, name: str, issues: list[tuple[str, str]]) -> ApiError:
    """What kube-apiserver answers when Trainer's validating webhook (controller-runtime, a plain
    aggregate error) refuses: 403, ``admission webhook "<name>" denied the request: [e1, e2]``."""
    listed = [f"{path}: {message}" if path else message for path, message in issues]
    text = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
    webhook = f"validator.{rt.kind.lower()}.{c.GROUP}"
    return ApiError(403, "Forbidden", f'admission webhook "{webhook}" denied the request: {text}', {})


def _active_replicated_jobs(store: Store, obj: Unstructured) -> list[str]:
    meta = obj.get("metadata") or {}
    jobs = store.list(
        BATCH_JOBS, str(meta.get("namespace", "")), label_equals=[(js.JOBSET_NAME, str(meta.get("name", "")))]
    )
    return sorted(
        {
            (j["metadata"].get("labels") or {}).get(js.REPLICATED_JOB_NAME, "")
            for j in jobs.items
            if int((j.get("status") or {}).get("active") or 0) > 0
        }
    )


def admit_trainer_object(
    store: Store, rt: ResourceType, obj: Unstructured, old: Unstructured | None, field_validation: str
) -> tuple[Unstructured, list[str]]:
    """The object to store and the response's warnings; raises the refusal as an ApiError."""
    obj = {**obj, "apiVersion": obj.get("apiVersion") or rt.api_version, "kind": obj.get("kind") or rt.kind}
    result = admission.admit(
        obj,
        old=old,
        field_validation="Warn" if field_validation == "Strict" else field_validation,
        lookup_runtime=lambda job: stored_runtime(store, job),
        active_replicated_jobs=_active_replicated_jobs(store, obj) if old is not None else (),
        now=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    if field_validation == "Strict" and result.unknown_fields:
        listed = ", ".join(f'unknown field "{path}"' for path in result.unknown_fields)
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding error: {listed}'
        )
    if result.errors:
        name = str((obj.get("metadata") or {}).get("name", ""))
        issues = [(issue.path, issue.message) for issue in result.errors]
        if result.denied_by_webhook and rt.kind != c.JOBSET:
            raise webhook_denied(rt, name, issues)
        raise invalid(rt, name, issues)
    if rt.kind == c.TRAINJOB:
        _confine_claims(rt, result.object)
    return result.object, list(result.warnings)


def check_trainer_status(rt: ResourceType, new: Unstructured, old: Unstructured) -> None:
    """A status write (the status subresource, or the TrainJob status server) is checked against the
    CRD's schema and CEL rules for the status, as kube-apiserver checks it: ``progressPercentage``
    0 to 100, at most 256 metrics, ``lastUpdatedTime is required when trainerStatus is present`` …
    Raises the 422; webhooks do not see status writes."""
    checked = check_document(new, old)
    issues = [(i.path, i.message) for i in checked.errors if i.path == "status" or i.path.startswith("status.")]
    if issues:
        raise invalid(rt, str((new.get("metadata") or {}).get("name", "")), issues)


def _confine_claims(rt: ResourceType, job: Unstructured) -> None:
    """``pvc://`` initializer sources (this control plane's own scheme) name a claim of the TrainJob's
    namespace; the initializer copies the claim's directory, so ``..`` or another namespace would
    copy someone else's data."""
    initializer = (job.get("spec") or {}).get("initializer") or {}
    issues = []
    for step in ("dataset", "model"):
        uri = (initializer.get(step) or {}).get("storageUri") if isinstance(initializer, dict) else None
        why = pvc_problem(uri) if isinstance(uri, str) else None
        if why is not None:
            issues.append((f"spec.initializer.{step}.storageUri", why))
    if issues:
        raise invalid(rt, str((job.get("metadata") or {}).get("name", "")), issues)


__all__ = [
    "admit_trainer_object",
    "check_trainer_status",
    "install_default_runtimes",
    "stored_runtime",
    "webhook_denied",
]
