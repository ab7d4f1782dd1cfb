"""Admission of batch/v1 Jobs as the Kubernetes API server does it: defaults (``completions`` /
``parallelism`` 1, ``backoffLimit`` 6, ``completionMode: NonIndexed``…), the generated selector and
pod-template labels (``batch.kubernetes.io/controller-uid``, ``batch.kubernetes.io/job-name`` and
their legacy ``controller-uid`` / ``job-name``), and the validation answers for what the embedded
job controller cannot run."""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_training.embedded.apiserver import errors
from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.specs.annotations import BATCH_CONTROLLER_UID as CONTROLLER_UID
from airflow_provider_training.specs.annotations import BATCH_JOB_NAME as JOB_NAME
from airflow_provider_training.specs.annotations import BATCH_LEGACY_CONTROLLER_UID as LEGACY_CONTROLLER_UID
from airflow_provider_training.specs.annotations import BATCH_LEGACY_JOB_NAME as LEGACY_JOB_NAME
from airflow_provider_training.specs.unstructured import Unstructured

GENERATED_LABELS = (CONTROLLER_UID, JOB_NAME, LEGACY_CONTROLLER_UID, LEGACY_JOB_NAME)
RESTART_POLICIES = ("OnFailure", "Never")


def admit_new(rt: ResourceType, obj: Unstructured, uid: str) -> None:
    """Default and validate a Job about to be created with ``uid`` (in place); raises a 422."""
    spec = obj.setdefault("spec", {})
    name = obj["metadata"]["name"]
    if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
        raise errors.invalid(rt, name, [("spec.template", "Required value")])
    _defaults(spec)
    if not spec.get("manualSelector"):
        labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
        labels.update({CONTROLLER_UID: uid, JOB_NAME: name, LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: name})
        spec["selector"] = {"matchLabels": {CONTROLLER_UID: uid}}
    meta = obj["metadata"]
    if not meta.get("labels"):
        meta["labels"] = dict(spec["template"].get("metadata", {}).get("labels") or {})
    issues = _issues(spec)
    if issues:
        raise errors.invalid(rt, name, issues)


def admit_update(rt: ResourceType, new: Unstructured, old: Unstructured) -> None:
    """Keep what the server generated (selector, template labels) when an update leaves it out."""
    spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
    if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
        raise errors.invalid(rt, new["metadata"]["name"], [("spec.template", "Required value")])
    _defaults(spec)
    if "selector" not in spec and "selector" in old_spec:
        spec["selector"] = copy.deepcopy(old_spec["selector"])
    old_labels = (old_spec.get("template") or {}).get("metadata", {}).get("labels") or {}
    labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
    for key in GENERATED_LABELS:
        if key in old_labels:
            labels.setdefault(key, old_labels[key])
    issues = _issues(spec)
    if issues:
        raise errors.invalid(rt, new["metadata"]["name"], issues)


def _defaults(spec: dict[str, Any]) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    pod = spec["template"].setdefault("spec", {})
    if isinstance(pod, dict):
        pod.setdefault("restartPolicy", "Always")  # the pod default; refused below, as upstream does
        pod.setdefault("terminationGracePeriodSeconds", 30)


def _issues(spec: dict[str, Any]) -> list[tuple[str, str]]:
    issues: list[tuple[str, str]] = []
    pod = spec["template"].get("spec")
    if not isinstance(pod, dict) or not pod.get("containers"):
        issues.append(("spec.template.spec.containers", "Required value"))
    else:
        policy = pod.get("restartPolicy")
        if policy not in RESTART_POLICIES:
            issues.append(
                (
                    "spec.template.spec.restartPolicy",
                    f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"',
                )
            )
    for field in ("completions", "parallelism", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        value = spec.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            issues.append((f"spec.{field}", f"Invalid value: {value!r}: must be greater than or equal to 0"))
    if isinstance(spec.get("activeDeadlineSeconds"), int) and spec["activeDeadlineSeconds"] == 0:
        issues.append(("spec.activeDeadlineSeconds", "Invalid value: 0: must be greater than 0"))
    if spec.get("completionMode") != "NonIndexed":
        issues.append(
            (
                "spec.completionMode",
                f'Unsupported value: "{spec.get("completionMode")}": supported values: "NonIndexed" '
                "(the embedded control plane runs non-indexed Jobs only; drop completionMode or run on a cluster)",
            )
        )
    for field in ("podFailurePolicy", "successPolicy", "backoffLimitPerIndex", "maxFailedIndexes"):
        if spec.get(field) is not None:
            issues.append(
                (
                    f"spec.{field}",
                    "Forbidden: not supported by the embedded control plane (it runs the common case: "
                    "completions, parallelism, backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished, suspend)",
                )
            )
    return issues
