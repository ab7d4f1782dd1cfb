"""What the Trainer v2.3.0 admission webhooks decide, with their wording (``trainer-v2.md`` §6, §7.1);
the JobSet webhook is ``jobset_webhook.py``.

The functions take objects with CRD defaults applied (as a webhook sees them). Where upstream
prints a Go struct as the "Invalid value" of a field error, this module prints a short JSON summary
(names, never env values), so that secrets in env never reach a message.
"""

from __future__ import annotations

import copy
import json
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
        manager_path = join(RUNTIME_PATCHES, "manager")
        issues += [_issue(manager_path, error) for error in names.domain_prefixed_path(patch.manager)]
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
