"""What the Trainer v2.3.0 and JobSet v0.12.0 admission webhooks decide, with their wording
(``trainer-v2.md`` §6, §7.1, §7.6).

The functions take objects with CRD defaults applied (as a webhook sees them). Where upstream
prints a Go struct as the "Invalid value" of a field error, this module prints a short JSON summary
(names, never env values), so that secrets in env never reach a message.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from typing import Any

from airflow_provider_training.specs import names
from airflow_provider_training.specs.issues import Issue, index, join
from airflow_provider_training.specs.pod import EnvVar
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob

RUNTIME_PATCHES = "spec.runtimePatches"


def _issue(path: str, message: str) -> Issue:
    return Issue(path, message, "cluster", "webhook")


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


def _ref_value(job: TrainJob) -> str:
    return _json(job.spec.runtime_ref.to_dict())


def _env_names(env: list[EnvVar] | None) -> str:
    return _json([item.name for item in env or []])


def _patch_managers(job: TrainJob) -> str:
    return _json([{"manager": patch.manager} for patch in job.spec.runtime_patches or []])


# --- generic validators ------------------------------------------------------------------------------

_PATH_CHARS = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def domain_prefixed_path(path: str, value: str) -> list[Issue]:
    """``validation.IsDomainPrefixedPath`` (``acme.io/foo``)."""
    if not value:
        return [_issue(path, "Required value")]
    parts = value.split("/", 1)
    if len(parts) < 2:
        return [_issue(path, f'Invalid value: "{value}": must be a domain-prefixed path (such as "acme.io/foo")')]
    host, rest = parts
    issues = [_issue(path, f'Invalid value: "{host}": {err}') for err in names.dns1123_subdomain(host)]
    if not _PATH_CHARS.match(rest):
        issues.append(_issue(path, f'Invalid value: "{rest}": Invalid path'))
    return issues


# --- TrainJob ----------------------------------------------------------------------------------------


def runtime_not_found(job: TrainJob) -> str:
    """The API server's NotFound text for the TrainJob's runtime reference."""
    plural = "trainingruntimes" if job.spec.runtime_ref.kind == c.TRAINING_RUNTIME else "clustertrainingruntimes"
    return f'{plural}.{c.GROUP} "{job.spec.runtime_ref.name}" not found'


def check_trainjob(
    job: TrainJob,
    runtime: TrainingRuntime | None,
    *,
    lookup_error: str | None = None,
    old: TrainJob | None = None,
    active_replicated_jobs: Iterable[str] = (),
) -> tuple[list[Issue], list[str]]:
    """``validator.trainjob.trainer.kubeflow.org`` on create (``old`` None) or update.

    ``runtime`` is the referenced runtime, or None when it does not exist (``lookup_error`` then
    says why, default: NotFound). ``active_replicated_jobs`` names the replicatedJobs of the
    existing JobSet that still have active Jobs (updates only).
    """
    ref = job.spec.runtime_ref
    if ref.registry_key not in c.REGISTERED_RUNTIMES:
        return [_issue("", f"unsupported runtime: {ref.registry_key}")], []
    cluster = ref.kind == c.CLUSTER_TRAINING_RUNTIME
    if runtime is None:
        error = lookup_error or runtime_not_found(job)
        kind_word = "clusterTrainingRuntime" if cluster else "trainingRuntime"
        # Upstream spells the ClusterTrainingRuntime path "spec.RuntimeRef".
        path = "spec.RuntimeRef" if cluster else "spec.runtimeRef"
        return [
            _issue(
                path,
                f"Invalid value: {_ref_value(job)}: {error}: specified {kind_word} must be created before the "
                "TrainJob is created",
            )
        ], []
    warnings: list[str] = []
    if cluster and runtime.metadata.label(c.LABEL_SUPPORT) == c.SUPPORT_DEPRECATED:
        warnings.append(
            f'Referenced ClusterTrainingRuntime "{runtime.name}" is deprecated and will be removed in a future '
            f"release of Kubeflow Trainer. See runtime deprecation policy: {c.RUNTIME_DEPRECATION_POLICY_URL}"
        )
    issues = _initializers(job, runtime) + _runtime_patches(job, runtime, old, list(active_replicated_jobs))
    issues += _ml_policy(job, runtime)
    return issues, warnings


def _containers_by_job(runtime: TrainingRuntime) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for rjob in runtime.spec.template.spec.replicated_jobs:
        pod = rjob.template.spec.template.spec
        names_ = {ct.name for ct in (pod.init_containers or [])} | {ct.name for ct in pod.containers} if pod else set()
        out[rjob.name] = names_
    return out


def _initializers(job: TrainJob, runtime: TrainingRuntime) -> list[Issue]:
    initializer = job.spec.initializer
    if initializer is None:
        return []
    issues: list[Issue] = []
    containers = _containers_by_job(runtime)
    for step, source, config in (
        (c.DATASET_INITIALIZER, initializer.dataset, "datasetConfig"),
        (c.MODEL_INITIALIZER, initializer.model, "modelConfig"),
    ):
        if source is None:
            continue
        value = _ref_value(job)
        if step not in containers:
            issues.append(
                _issue(
                    "spec.runtimeRef",
                    f"Invalid value: {value}: must have {step} job when trainJob is configured with input {config}",
                )
            )
        elif step not in containers[step]:
            issues.append(
                _issue(
                    "spec.runtimeRef",
                    f"Invalid value: {value}: must have container with name - {step} in the {step} job",
                )
            )
        else:
            rjob = runtime.spec.template.spec.replicated_job(step)
            pod = rjob.template.spec.template.spec if rjob else None
            container = pod.container(step) if pod else None
            mounts = [m.name for m in (container.volume_mounts or [])] if container else []
            if c.INITIALIZER_VOLUME not in mounts:
                issues.append(
                    _issue(
                        "spec.runtimeRef",
                        f"Invalid value: {value}: must have volumeMount with name - {c.INITIALIZER_VOLUME} in "
                        f"container {step} of the {step} job",
                    )
                )
    return issues


def _runtime_patches(job: TrainJob, runtime: TrainingRuntime, old: TrainJob | None, active: list[str]) -> list[Issue]:
    issues: list[Issue] = []
    if old is not None:
        before = [p.to_dict() | {"time": None} for p in old.spec.runtime_patches or []]
        after = [p.to_dict() | {"time": None} for p in job.spec.runtime_patches or []]
        if before != after:
            if not old.spec.suspend and not job.spec.suspend:
                issues.append(
                    _issue(
                        RUNTIME_PATCHES,
                        "Forbidden: RuntimePatches can only be modified when the TrainJob is suspended before or "
                        "after the update",
                    )
                )
            else:
                issues += [
                    _issue(
                        RUNTIME_PATCHES,
                        f"Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob {name} is "
                        "still active",
                    )
                    for name in active
                ]
    containers = _containers_by_job(runtime)
    value = _patch_managers(job)
    for patch in job.spec.runtime_patches or []:
        issues += domain_prefixed_path(join(RUNTIME_PATCHES, "manager"), patch.manager)
        for rjob in patch.replicated_job_patches():
            name = rjob.get("name")
            if name not in containers:
                issues.append(
                    _issue(
                        RUNTIME_PATCHES,
                        f"Invalid value: {value}: must not have replicated job that doesn't exist in the runtime job "
                        "template",
                    )
                )
                continue
            pod = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            for container in pod.get("initContainers") or []:
                if container.get("name") not in containers[name]:
                    issues.append(
                        _issue(
                            RUNTIME_PATCHES,
                            f"Invalid value: {value}: must not have initContainer that doesn't exist in the runtime "
                            f"job {name}",
                        )
                    )
            for container in pod.get("containers") or []:
                cname = container.get("name")
                if cname not in containers[name]:
                    issues.append(
                        _issue(
                            RUNTIME_PATCHES,
                            f"Invalid value: {value}: must not have container that doesn't exist in the runtime job "
                            f"{name}",
                        )
                    )
                elif container.get("env") and cname in (c.DATASET_INITIALIZER, c.MODEL_INITIALIZER, c.NODE):
                    issues.append(
                        _issue(
                            RUNTIME_PATCHES,
                            f"Invalid value: {value}: must not have envs for the {c.DATASET_INITIALIZER}, "
                            f"{c.MODEL_INITIALIZER}, {c.NODE} containers",
                        )
                    )
    return issues


def _reserved(job: TrainJob, reserved: tuple[str, ...]) -> list[Issue]:
    trainer = job.spec.trainer
    if trainer is None:
        return []
    found = sorted({env.name for env in trainer.env or [] if env.name in reserved})
    if not found:
        return []
    return [
        _issue(
            "spec.trainer.env",
            f"Invalid value: {_env_names(trainer.env)}: must not have reserved envs, invalid envs configured: "
            f"[{' '.join(found)}]",
        )
    ]


def _ml_policy(job: TrainJob, runtime: TrainingRuntime) -> list[Issue]:
    policy = runtime.spec.ml_policy
    if policy is None:
        return []
    issues: list[Issue] = []
    if policy.torch is not None:
        targets = policy.torch.env_injection.targets if policy.torch.env_injection else None
        for target in targets or []:
            for name in target.container_names:
                if name not in _containers_by_job(runtime).get(target.job_name, set()):
                    issues.append(
                        _issue(
                            "spec.runtimeRef",
                            f"Invalid value: {_json(target.to_dict())}: envInjection target podSet "
                            f'"{target.job_name}" container "{name}" not found in runtime template',
                        )
                    )
        issues += _reserved(job, c.TORCH_RESERVED_ENV)
    if policy.mpi is not None:
        trainer = job.spec.trainer
        num_nodes = trainer.num_nodes if trainer and trainer.num_nodes is not None else 1
        jobs = {rjob.name for rjob in runtime.spec.template.spec.replicated_jobs}
        if (
            trainer is not None
            and num_nodes >= 2
            and policy.mpi.run_launcher_as_node
            and (c.LAUNCHER not in jobs or c.NODE not in jobs)
        ):
            issues.append(
                _issue(
                    "spec.trainer.numNodes",
                    f"Invalid value: {trainer.num_nodes}: must have 1 when MPI trainingRuntime with enabled "
                    "runLauncherAsNode does not have either launcher and node",
                )
            )
        issues += _reserved(job, c.MPI_RESERVED_ENV)
    if policy.xgboost is not None and job.spec.trainer is not None:
        for i, env in enumerate(job.spec.trainer.env or []):
            if env.name in c.XGBOOST_RESERVED_ENV:
                issues.append(
                    _issue(index("spec.trainer.env", i), f"Forbidden: {env.name} is reserved for the XGBoost runtime")
                )
    return issues


def default_runtime_patch_times(job: dict[str, Any], old: dict[str, Any] | None, now: str) -> dict[str, Any]:
    """``defaulter.trainjob.trainer.kubeflow.org``: stamp ``runtimePatches[].time``; returns a copy."""
    out = copy.deepcopy(job)
    patches = (out.get("spec") or {}).get("runtimePatches") or []
    old_patches = {p.get("manager"): p for p in ((old or {}).get("spec") or {}).get("runtimePatches") or []}
    for patch in patches:
        previous = old_patches.get(patch.get("manager")) if old is not None else None
        if previous is not None:
            same = {k: v for k, v in previous.items() if k != "time"} == {k: v for k, v in patch.items() if k != "time"}
            patch["time"] = previous.get("time") if same else now
        elif patch.get("time") is None:
            patch["time"] = now
    return out


# --- TrainingRuntime / ClusterTrainingRuntime -------------------------------------------------------


def check_runtime(runtime: TrainingRuntime, old: TrainingRuntime | None = None) -> tuple[list[Issue], list[str]]:
    """The runtime validating webhooks (skipped for runtimes labelled ``webhook-validation: disabled``)."""
    if runtime.metadata.label(c.LABEL_WEBHOOK_VALIDATION) == "disabled":
        return [], []
    cluster = runtime.kind == c.CLUSTER_TRAINING_RUNTIME
    if not cluster and old is not None:
        return [], []  # TrainingRuntime is validated on create only
    warnings: list[str] = []
    if cluster and old is None and runtime.metadata.label(c.LABEL_SUPPORT) == c.SUPPORT_DEPRECATED:
        warnings.append(
            f'ClusterTrainingRuntime "{runtime.name}" is deprecated and will be removed in a future release of '
            f"Kubeflow Trainer. See runtime deprecation policy: {c.RUNTIME_DEPRECATION_POLICY_URL}"
        )
    issues: list[Issue] = []
    base = "spec.template.spec.replicatedJobs"
    for i, rjob in enumerate(runtime.spec.template.spec.replicated_jobs):
        ancestor = rjob.template.ancestor
        if ancestor not in c.ANCESTOR_CONTAINERS:
            continue
        replicas = 1 if rjob.replicas is None else rjob.replicas
        if replicas != 1:
            issues.append(_issue(join(index(base, i), "replicas"), f"Invalid value: {replicas}: always must be 1"))
        pod = rjob.template.spec.template.spec
        containers = [ct.name for ct in pod.containers] if pod else []
        if c.ANCESTOR_CONTAINERS[ancestor] not in containers:
            issues.append(
                _issue(
                    join(index(base, i), "template.spec.template.spec.containers"),
                    f"Invalid value: {_json(containers)}: must contain the required container for the ancestor: "
                    f"{ancestor}",
                )
            )
    return issues, warnings


# --- JobSet ------------------------------------------------------------------------------------------

JOB_FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def jobset_defaults(jobset: dict[str, Any]) -> dict[str, Any]:
    """The JobSet mutating webhook's defaults (``jobset:pkg/webhooks/jobset_webhook.go``); returns a copy."""
    out = copy.deepcopy(jobset)
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
        issues += domain_prefixed_path("spec.managedBy", managed_by)
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
