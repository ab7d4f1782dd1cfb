"""A TrainJob checked against the runtime it references, beyond the webhook: what a cluster accepts
but cannot run as meant (level ``provider``) and likely mistakes (level ``lint``).

The webhook checks initializer jobs by *name*, while the controller injects ``STORAGE_URI`` and the
trainer settings by *ancestor label*, and it lets counts through that no Job can have; those gaps
are what this module reports.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_provider_training.specs import lint, quantity
from airflow_provider_training.specs.issues import Issue, join
from airflow_provider_training.specs.pod import Container, PodSpec
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob

# Schemes upstream's initializer images accept (``pkg/initializers``).
INITIALIZER_SCHEMES = {c.DATASET_INITIALIZER: ("hf", "s3", "cache"), c.MODEL_INITIALIZER: ("hf", "s3")}
# Short names the Kubeflow SDK rewrites before posting; a hand-written TrainJob must use the real ones.
RESOURCE_ALIASES = {"gpu": "nvidia.com/gpu", "storage": "ephemeral-storage"}


def _provider(path: str, message: str, rule: str = "trainer-runtime") -> Issue:
    return Issue(path, message, "provider", rule)


def _lint(path: str, message: str, rule: str = "trainer-lint") -> Issue:
    return Issue(path, message, "lint", rule)


def check_trainjob(job: TrainJob, runtime: TrainingRuntime) -> list[Issue]:
    """Provider errors and lint for ``job`` on ``runtime`` (both with CRD defaults applied)."""
    issues: list[Issue] = []
    where = f"{runtime.kind} {runtime.name}"
    trainer = job.spec.trainer
    trainer_job = runtime.trainer_job()
    trainer_pod = trainer_job.template.spec.template.spec if trainer_job else None
    if trainer is not None and (trainer_pod is None or trainer_pod.container(c.NODE) is None):
        issues.append(
            _provider(
                "spec.trainer",
                f"{where} has no replicatedJob labelled {c.LABEL_ANCESTOR}={c.ANCESTOR_TRAINER} with a container "
                f'named "{c.NODE}": the controller ignores spec.trainer (image, command, env, numNodes, '
                "resourcesPerNode); fix the runtime or reference another one",
            )
        )
    if trainer is not None:
        if trainer.num_nodes is not None and trainer.num_nodes < 1:
            issues.append(
                _provider(
                    "spec.trainer.numNodes",
                    f"Invalid value: {trainer.num_nodes}: must be at least 1 (it becomes the Job's parallelism "
                    "and completions)",
                )
            )
        if trainer.num_proc_per_node is not None and trainer.num_proc_per_node < 1:
            issues.append(
                _provider(
                    "spec.trainer.numProcPerNode", f"Invalid value: {trainer.num_proc_per_node}: must be at least 1"
                )
            )
        issues += _resources(job)
        issues += _ignored_fields(job, runtime)
        container = Container(name=c.NODE, image=trainer.image, command=trainer.command, args=trainer.args)
        issues += lint.check_container(container, "spec.trainer", trainer_pod or PodSpec())
    policy = runtime.spec.ml_policy
    if trainer is None and policy is not None and policy.framework in ("torch", "jax", "xgboost"):
        issues.append(
            _lint(
                "spec.trainer",
                f"not set: the {policy.framework} plugin injects its environment (and port 29500) only when "
                "spec.trainer is present, so the trainer runs without it; add spec.trainer (even {})",
            )
        )
    issues += _initializers(job, runtime)
    return issues


def _resources(job: TrainJob) -> list[Issue]:
    trainer = job.spec.trainer
    resources = trainer.resources_per_node if trainer else None
    if resources is None:
        return []
    issues: list[Issue] = []
    for part, values in (("limits", resources.limits), ("requests", resources.requests)):
        for name in values or {}:
            alias = RESOURCE_ALIASES.get(name) or (f"nvidia.com/{name}" if name.startswith("mig-") else None)
            if alias:
                issues.append(
                    _lint(
                        f"spec.trainer.resourcesPerNode.{part}[{name}]",
                        f'"{name}" is the Kubeflow SDK\'s short name, not a Kubernetes resource; write "{alias}"',
                    )
                )
    return issues


def _ignored_fields(job: TrainJob, runtime: TrainingRuntime) -> list[Issue]:
    trainer = job.spec.trainer
    policy = runtime.spec.ml_policy
    if trainer is None or trainer.num_proc_per_node is None:
        return []
    framework = policy.framework if policy else None
    if framework in ("torch", "mpi"):
        return []
    shown = f"the {framework} policy" if framework else "a runtime without mlPolicy"
    return [
        _lint(
            "spec.trainer.numProcPerNode",
            f"ignored by {shown} of {runtime.kind} {runtime.name}: only torch (PET_NPROC_PER_NODE) and MPI (slots) "
            "use it",
        )
    ]


def _initializers(job: TrainJob, runtime: TrainingRuntime) -> list[Issue]:
    initializer = job.spec.initializer
    if initializer is None:
        return []
    issues: list[Issue] = []
    labelled = {rjob.template.ancestor for rjob in runtime.spec.template.spec.replicated_jobs}
    for step, source, field in (
        (c.DATASET_INITIALIZER, initializer.dataset, "dataset"),
        (c.MODEL_INITIALIZER, initializer.model, "model"),
    ):
        if source is None:
            continue
        path = join("spec.initializer", field)
        if step not in labelled and runtime.spec.template.spec.replicated_job(step) is not None:
            issues.append(
                _provider(
                    path,
                    f"the {step} job of {runtime.kind} {runtime.name} lacks the label {c.LABEL_ANCESTOR}={step}: "
                    "the controller never passes STORAGE_URI or this env to it; label the job's template",
                )
            )
        uri = source.storage_uri or ""
        match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", uri)
        schemes = INITIALIZER_SCHEMES[step]
        if match and match.group(1) not in schemes:
            shown = ", ".join(f"{s}://" for s in schemes)
            issues.append(
                _lint(
                    join(path, "storageUri"),
                    f'"{match.group(1)}://" is not a scheme the upstream {step} image reads ({shown}); it fails at '
                    "run time unless the runtime uses its own initializer image",
                )
            )
    return issues


def check_runtime(runtime: TrainingRuntime) -> list[Issue]:
    """What makes a runtime unusable from the Kubeflow SDK, or a trainer step without a ``node``."""
    issues: list[Issue] = []
    if runtime.framework_label is None:
        issues.append(
            _lint(
                "metadata.labels",
                f"no {c.LABEL_FRAMEWORK} label: the Kubeflow SDK skips this runtime when listing and refuses it "
                "by name",
            )
        )
    sdk_trainer = None
    for rjob in runtime.spec.template.spec.replicated_jobs:
        labels = rjob.template.metadata.labels if rjob.template.metadata else None
        pod = rjob.template.spec.template.spec
        node = pod.container(c.NODE) if pod else None
        if labels and c.LABEL_ANCESTOR in labels and node is not None and node.image:
            sdk_trainer = rjob
            break
    if sdk_trainer is None:
        issues.append(
            _lint(
                "spec.template.spec.replicatedJobs",
                f'no replicatedJob with the label {c.LABEL_ANCESTOR} and a container "{c.NODE}" with an image: '
                'the Kubeflow SDK fails with "Runtime doesn\'t have trainer container"',
            )
        )
    return issues


def check_node_resources(resources: dict[str, Any], path: str) -> list[Issue]:
    """Pod validation of the trainer container's resources (runtime's merged with the TrainJob's):
    what makes the Job controller's pod creation fail, so the TrainJob never starts."""
    issues: list[Issue] = []
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    for name, amount in requests.items():
        request = quantity.decimal_value(amount)
        limit = quantity.decimal_value(limits[name]) if name in limits else None
        if _overcommittable(name):
            if request is not None and limit is not None and request > limit:
                issues.append(
                    _provider(
                        f"{path}.requests[{name}]",
                        f'Invalid value: "{amount}": must be less than or equal to {name} limit of {limits[name]}',
                    )
                )
        elif name not in limits:
            issues.append(
                _provider(
                    f"{path}.limits[{name}]", "Required value: Limit must be set for non overcommitable resources"
                )
            )
        elif request != limit:
            issues.append(
                _provider(
                    f"{path}.requests[{name}]",
                    f'Invalid value: "{amount}": must be equal to {name} limit of {limits[name]}',
                )
            )
    return issues


def _overcommittable(name: str) -> bool:
    # Kubernetes: only native resources (no domain, or *kubernetes.io/) may request less than their limit.
    return "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io")


def check_gpu_use(job: TrainJob, runtime: TrainingRuntime, gpus: int) -> list[Issue]:
    """Lint where the mlPolicy and the GPUs per node disagree."""
    policy = runtime.spec.ml_policy
    trainer = job.spec.trainer
    if policy is None or trainer is None or gpus == 0:
        return []
    issues: list[Issue] = []
    nproc = trainer.num_proc_per_node
    if policy.torch is not None and nproc is not None and nproc > gpus:
        issues.append(
            _lint(
                "spec.trainer.numProcPerNode",
                f"{nproc} processes per node but {gpus} GPU(s) per node: torchrun starts {nproc} workers that share "
                "the GPUs; leave it unset to get one per GPU (PET_NPROC_PER_NODE=auto)",
            )
        )
    if policy.xgboost is not None and gpus > 1:
        issues.append(
            _lint(
                "spec.trainer.resourcesPerNode",
                f"{gpus} GPUs per node: the XGBoost runtime counts one worker per GPU (DMLC_NUM_WORKER = nodes x "
                f"{gpus}) but starts one process per node; the program must start a worker per GPU",
            )
        )
    return issues
