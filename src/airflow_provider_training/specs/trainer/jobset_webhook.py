"""What the JobSet v0.12.0 admission webhooks decide, with their wording (``trainer-v2.md`` §7.6):
the defaults of the mutating webhook and the checks of the validating one, on create and update."""

from __future__ import annotations

import copy
import re
from typing import Any

from airflow_provider_training.specs import names
from airflow_provider_training.specs.issues import Issue


def _issue(path: str, message: str) -> Issue:
    return Issue(path, message, "cluster", "webhook")


JOB_FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def jobset_defaults(jobset: dict[str, Any], *, in_place: bool = False) -> dict[str, Any]:
    """The JobSet mutating webhook's defaults (``jobset:pkg/webhooks/jobset_webhook.go``); returns a copy,
    or ``jobset`` itself with ``in_place`` (for a caller that just built it)."""
    out = jobset if in_place else copy.deepcopy(jobset)
    spec = out.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rjob in spec.get("replicatedJobs") or []:
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec.setdefault("completionMode", "Indexed")
        pod = job_spec.setdefault("template", {}).setdefault("spec", {})
        if not pod.get("restartPolicy"):
            pod["restartPolicy"] = "OnFailure"
    network = spec.get("network") or {}
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    spec["network"] = network
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        if not rule.get("name"):
            rule["name"] = f"failurePolicyRule{i}"
    return out


def _dns1035(value: str, too_long: str) -> list[str]:
    return [too_long if "must be no more than 63 characters" in err else err for err in names.dns1035_label(value)]


def check_jobset(jobset: dict[str, Any], old: dict[str, Any] | None = None) -> list[Issue]:
    """The JobSet validating webhook, on a JobSet with defaults applied (CRD and :func:`jobset_defaults`)."""
    if old is not None:
        return _jobset_update(jobset, old)
    name = str((jobset.get("metadata") or {}).get("name") or "")
    spec = jobset.get("spec") or {}
    rjobs = [r for r in spec.get("replicatedJobs") or [] if isinstance(r, dict)]
    errors: list[str] = []
    issues: list[Issue] = []
    if rjobs and rjobs[0].get("dependsOn") is not None:
        errors.append("DependsOn can't be set for the first ReplicatedJob")
    valid = [str(r.get("name")) for r in rjobs]
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain:
        errors += names.dns1123_subdomain(subdomain)
        errors += _dns1035(subdomain, ".spec.network.subdomain is too long, must be less than 63 characters")
    managed_by = spec.get("managedBy")
    if managed_by is not None:
        issues += [_issue("spec.managedBy", error) for error in names.domain_prefixed_path(managed_by)]
        if len(managed_by) > 63:
            issues.append(_issue("spec.managedBy", "Too long: may not be more than 63 bytes"))
    seen: set[str] = set()
    for rjob in rjobs:
        rname = str(rjob.get("name"))
        replicas = int(rjob.get("replicas", 1))
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        parallelism = int(job_spec.get("parallelism", 1))
        if parallelism * replicas > 2**31 - 1:
            errors.append(
                f"the product of replicas and parallelism must not exceed {2**31 - 1} for replicatedJob '{rname}'"
            )
        errors += _dns1035(
            str(rjob.get("groupName", "default")),
            ".spec.replicatedJob[].groupName is too long, must be less than 63 characters",
        )
        errors += _dns1035(
            f"{name}-{rname}-{replicas - 1}",
            "JobSet name is too long, job names generated for this JobSet will exceed 63 characters",
        )
        completions = job_spec.get("completions")
        if job_spec.get("completionMode") == "Indexed" and completions is not None:
            pod_name = f"{name}-{rname}-{replicas - 1}-{int(completions) - 1}-abcde"
            errors += _dns1035(
                pod_name, "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
            )
        seen.add(rname)
        depends = rjob.get("dependsOn")
        if depends:
            target = depends[0].get("name")
            if target not in seen:
                errors.append(f"replicatedJob: {rname} cannot depend on replicatedJob: {target}")
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in valid:
            errors.append(f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs")
    errors += _failure_policy(spec.get("failurePolicy"), valid)
    coordinator = spec.get("coordinator")
    if coordinator is not None:
        error = _coordinator(coordinator, rjobs)
        if error:
            errors.append(error)
    return issues + [_issue("", err) for err in errors]


def _failure_policy(policy: dict[str, Any] | None, valid: list[str]) -> list[str]:
    if not policy:
        return []
    errors: list[str] = []
    by_name: dict[str, list[int]] = {}
    for i, rule in enumerate(policy.get("rules") or []):
        rule_name = str(rule.get("name", ""))
        if not 1 <= len(rule_name) <= 128:
            errors.append(
                f"invalid failure policy rule name of length {len(rule_name)}, the rule name must be at least 1 "
                "characters long and at most 128 characters long"
            )
        by_name.setdefault(rule_name, []).append(i)
        if not _RULE_NAME.match(rule_name):
            errors.append(
                f"invalid failure policy rule name '{rule_name}', a failure policy rule name must start with an "
                "alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and "
                "must end with an alphanumeric character or '_'"
            )
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in valid:
                errors.append(
                    f"invalid replicatedJob name '{target}' in failure policy does not appear in .spec.ReplicatedJobs"
                )
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in JOB_FAILURE_REASONS:
                errors.append(
                    f"invalid job failure reason '{reason}' in failure policy is not a recognized job failure reason"
                )
        action = rule.get("action")
        if action in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
            errors.append(
                "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when "
                "RestartJob feature gate is disabled"
            )
    if policy.get("restartStrategy") == "InPlaceRestart":
        errors.append("InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled")
    for rule_name, indexes in by_name.items():
        if len(indexes) > 1:
            shown = "[" + " ".join(str(i) for i in indexes) + "]"
            errors.append(f"rule names are not unique, rules with indices {shown} all have the same name '{rule_name}'")
    return errors


def _coordinator(coordinator: dict[str, Any], rjobs: list[dict[str, Any]]) -> str | None:
    target = coordinator.get("replicatedJob")
    rjob = next((r for r in rjobs if r.get("name") == target), None)
    if rjob is None:
        return f"coordinator replicatedJob {target} does not exist"
    job_index = int(coordinator.get("jobIndex", 0))
    if not 0 <= job_index < int(rjob.get("replicas", 1)):
        return f"coordinator job index {job_index} is invalid for replicatedJob {target}"
    job_spec = (rjob.get("template") or {}).get("spec") or {}
    if job_spec.get("completionMode") != "Indexed":
        return "job for coordinator pod must be indexed completion mode"
    pod_index = int(coordinator.get("podIndex", 0))
    if not 0 <= pod_index < int(job_spec.get("completions") or 0):
        return f"coordinator pod index {pod_index} is invalid for replicatedJob {target} job index {job_index}"
    return None


_MUTABLE_WHILE_SUSPENDED = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "nodeSelector"),
                            ("spec", "tolerations"), ("spec", "schedulingGates"))  # fmt: skip


def _jobset_update(jobset: dict[str, Any], old: dict[str, Any]) -> list[Issue]:
    spec = copy.deepcopy(jobset.get("spec") or {})
    old_spec = old.get("spec") or {}
    new_jobs = spec.get("replicatedJobs") or []
    old_jobs = old_spec.get("replicatedJobs") or []
    if (old_spec.get("suspend") or spec.get("suspend")) and len(new_jobs) == len(old_jobs):
        for new_job, old_job in zip(new_jobs, old_jobs, strict=True):
            new_pod = new_job.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
            old_pod = ((old_job.get("template") or {}).get("spec") or {}).get("template") or {}
            for part, key in _MUTABLE_WHILE_SUSPENDED:
                source = (old_pod.get(part) or {}).get(key)
                target = new_pod.setdefault(part, {})
                if source is None:
                    target.pop(key, None)
                else:
                    target[key] = source
                if not target:
                    new_pod.pop(part, None)
    issues: list[Issue] = []
    if _normal(spec.get("replicatedJobs")) != _normal(old_jobs):
        issues.append(_issue("spec.replicatedJobs", 'Invalid value: "array": field is immutable'))
    if spec.get("managedBy") != old_spec.get("managedBy"):
        issues.append(_issue("spec.managedBy", f'Invalid value: "{spec.get("managedBy")}": field is immutable'))
    return issues


def _normal(value: Any) -> Any:
    """Drop empty maps so ``{}`` and an absent field compare equal (Go's semantic DeepEqual on omitempty)."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if v not in ({}, None)}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value
