"""What a cluster rejects beyond the schema: the validating webhooks (v1.9.4) and the
controller-side validation of MPIJob and MXJob (v1.8.1), with the operator's wording
(``training-operator.md`` §4.x, §6.2). Runs on the raw, un-defaulted job, as the webhook does.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_provider_training.specs import kinds, names
from airflow_provider_training.specs.common import ReplicaSpec
from airflow_provider_training.specs.issues import Issue, index, join
from airflow_provider_training.specs.jobs import PyTorchJob, TFJob, TrainingJob


def _issue(path: str, message: str) -> Issue:
    return Issue(path, message, "cluster", "webhook")


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def check_name(job: TrainingJob) -> list[Issue]:
    name = job.metadata.name
    if not name:
        return (
            []
            if job.metadata.generate_name
            else [_issue("metadata.name", "Required value: name or generateName is required")]
        )
    errors = names.dns1035_label(name)
    if errors:
        return [_issue("metadata.name", f'Invalid value: "{name}": should match: {",".join(errors)}')]
    return []


def check_metadata(job: TrainingJob) -> list[Issue]:
    """Generic API-server checks of every object's metadata (labels, annotations, namespace)."""
    issues: list[Issue] = []
    meta = job.metadata
    if meta.namespace:
        for err in names.dns1123_label(meta.namespace):
            issues.append(_issue("metadata.namespace", f'Invalid value: "{meta.namespace}": {err}'))
    for key, value in (meta.labels or {}).items():
        for err in names.qualified_name(key):
            issues.append(_issue("metadata.labels", f'Invalid value: "{key}": {err}'))
        for err in names.label_value(value):
            issues.append(_issue(f"metadata.labels[{key}]", f'Invalid value: "{value}": {err}'))
    for key in meta.annotations or {}:
        for err in names.qualified_name(key.lower()):
            issues.append(_issue("metadata.annotations", f'Invalid value: "{key}": {err}'))
    return issues


def check_managed_by(job: TrainingJob, old: TrainingJob | None, immutable: bool) -> list[Issue]:
    path = "spec.runPolicy.managedBy"
    value = job.run_policy.managed_by
    issues: list[Issue] = []
    if value is not None and value not in kinds.MANAGED_BY_VALUES:
        issues.append(
            _issue(path, f'Unsupported value: "{value}": supported values: {_quoted(kinds.MANAGED_BY_VALUES)}')
        )
    if immutable and old is not None and old.run_policy.managed_by != value:
        issues.append(_issue(path, f'Invalid value: "{value}": field is immutable'))
    return issues


def check_containers(
    job: TrainingJob,
    rtype: str,
    spec: ReplicaSpec,
    missing_default: str,
) -> list[Issue]:
    """At least one container, every one with an image, one named like the kind's default."""
    base = index(f"spec.{job.KIND.replica_specs_field}", rtype)
    containers_path = f"{base}.template.spec.containers"
    pod = spec.template.spec if spec.template else None
    containers = pod.containers if pod else []
    if not containers:
        return [_issue(containers_path, "Required value: must be specified")]
    issues = [
        _issue(join(index(containers_path, i), "image"), "Required value: must be required")
        for i, container in enumerate(containers)
        if not container.image
    ]
    if not any(c.name == job.KIND.default_container for c in containers):
        issues.append(_issue(containers_path, f"Required value: {missing_default}"))
    return issues


def _exact_keys(job: TrainingJob) -> list[Issue]:
    allowed = job.KIND.replica_types
    field = f"spec.{job.KIND.replica_specs_field}"
    return [
        _issue(index(field, key), f'Unsupported value: "{key}": supported values: {_quoted(allowed)}')
        for key in job.replica_specs
        if key not in allowed
    ]


def _replica_map_required(job: TrainingJob) -> list[Issue]:
    field = job.KIND.replica_specs_field
    if job.spec.to_dict().get(field) is None:
        return [_issue(f"spec.{field}", "Required value: must be required")]
    return []


def _common_webhook(job: TrainingJob, quote_container: bool) -> list[Issue]:
    container = job.KIND.default_container
    shown = f'"{container}"' if quote_container else container
    issues = _replica_map_required(job)
    for rtype, spec in job.replica_specs.items():
        issues += check_containers(job, rtype, spec, f"must have at least one container with name {shown}")
    return issues


def pytorch(job: TrainingJob, old: TrainingJob | None) -> tuple[list[Issue], list[str]]:
    assert isinstance(job, PyTorchJob)
    issues = check_name(job) + check_managed_by(job, old, immutable=False)
    warnings: list[str] = []
    field = "spec.pytorchReplicaSpecs"
    elastic = job.spec.elastic_policy
    if elastic is not None:
        if "Worker" not in job.replica_specs:
            issues.append(
                _issue(index(field, "Worker"), "Required value: must be configured if elastic policy is used")
            )
        if elastic.n_proc_per_node is not None:
            warnings.append("spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead")
            if job.spec.nproc_per_node is not None:
                issues.append(
                    _issue("spec.elasticPolicy.nProcPerNode", "Forbidden: must not be used with spec.nprocPerNode")
                )
    issues += _common_webhook(job, quote_container=False)
    issues += _exact_keys(job)
    for rtype, spec in job.replica_specs.items():
        if rtype == "Master":
            if spec.replicas != 1:
                issues.append(_issue(f"{index(field, rtype)}.replicas", "Forbidden: must be 1"))
        elif spec.replicas is not None and spec.replicas < 1:
            issues.append(_issue(f"{index(field, rtype)}.replicas", "Forbidden: must be at least 1"))
    return issues, warnings


def tensorflow(job: TrainingJob, old: TrainingJob | None) -> tuple[list[Issue], list[str]]:
    assert isinstance(job, TFJob)
    issues = check_name(job) + check_managed_by(job, old, immutable=True)
    issues += _common_webhook(job, quote_container=False)
    chiefs = sum(
        (spec.replicas if spec.replicas is not None else 1)
        for rtype, spec in job.replica_specs.items()
        if rtype in ("Chief", "Master")
    )
    if chiefs > 1:
        issues.append(_issue("spec.tfReplicaSpecs", "Forbidden: must not have more than 1 Chief or Master role"))
    return issues, []


def xgboost(job: TrainingJob, old: TrainingJob | None) -> tuple[list[Issue], list[str]]:
    issues = check_name(job) + check_managed_by(job, old, immutable=True)
    issues += _common_webhook(job, quote_container=False)
    issues += _exact_keys(job)
    field = "spec.xgbReplicaSpecs"
    master = job.replica_specs.get("Master")
    if master is None:
        issues.append(_issue(index(field, "Master"), "Required value: must be present"))
    elif master.replicas != 1:
        issues.append(_issue(f"{index(field, 'Master')}.replicas", "Forbidden: must be 1"))
    return issues, []


def paddle(job: TrainingJob, old: TrainingJob | None) -> tuple[list[Issue], list[str]]:
    issues = check_name(job) + check_managed_by(job, old, immutable=True)
    issues += _common_webhook(job, quote_container=True)
    issues += _exact_keys(job)
    return issues, []


def jax(job: TrainingJob, old: TrainingJob | None) -> tuple[list[Issue], list[str]]:
    issues = check_name(job) + _common_webhook(job, quote_container=False) + _exact_keys(job)
    return issues, []


def mpi(job: TrainingJob, old: TrainingJob | None) -> tuple[list[Issue], list[str]]:
    """``ValidateV1MpiJobSpec``: no webhook upstream; the controller refuses to reconcile."""
    field = "spec.mpiReplicaSpecs"
    prefix = "MPIJobSpec is not valid: "
    issues = _replica_map_required(job)
    for rtype, spec in job.replica_specs.items():
        base = index(field, rtype)
        if rtype not in ("Launcher", "Worker"):
            issues.append(_issue(base, f'Unsupported value: "{rtype}": supported values: "Launcher", "Worker"'))
        containers = spec.template.spec.containers if spec.template and spec.template.spec else []
        if not containers:
            issues.append(
                _issue(
                    f"{base}.template.spec.containers",
                    f"Required value: {prefix}containers definition expected in {rtype}",
                )
            )
        for i, container in enumerate(containers):
            cpath = index(f"{base}.template.spec.containers", i)
            if not container.image:
                issues.append(
                    _issue(f"{cpath}.image", f"Required value: {prefix}Image is undefined in the container of {rtype}")
                )
            if not container.name:
                issues.append(
                    _issue(
                        f"{cpath}.name", f"Required value: {prefix}ImageName is undefined in the container of {rtype}"
                    )
                )
        if rtype == "Launcher" and spec.replicas is not None and spec.replicas != 1:
            issues.append(
                _issue(
                    f"{base}.replicas", f"Invalid value: {spec.replicas}: {prefix}There must be only 1 launcher replica"
                )
            )
    if job.replica_specs and "Launcher" not in job.replica_specs:
        issues.append(_issue(index(field, "Launcher"), f"Required value: {prefix}Master ReplicaSpec must be present"))
    return issues, []


def mxnet(job: TrainingJob, old: TrainingJob | None) -> tuple[list[Issue], list[str]]:
    """v1.8.1: in-controller validation; the webhook only returns the deprecation warning."""
    field = "spec.mxReplicaSpecs"
    issues = check_name(job) + _replica_map_required(job)
    for rtype, spec in job.replica_specs.items():
        base = index(field, rtype)
        containers = spec.template.spec.containers if spec.template and spec.template.spec else []
        if not containers:
            issues.append(_issue(f"{base}.template.spec.containers", "Required value: MXJobSpec is not valid"))
            continue
        for i, container in enumerate(containers):
            if not container.image:
                issues.append(
                    _issue(
                        f"{index(f'{base}.template.spec.containers', i)}.image",
                        "Required value: MXJobSpec is not valid",
                    )
                )
        if not any(c.name == "mxnet" for c in containers):
            issues.append(
                _issue(
                    f"{base}.template.spec.containers",
                    f"Required value: MXJobSpec is not valid: There is no container named mxnet in {rtype}",
                )
            )
        if kinds.MXNET.canonical_type(rtype) == "Scheduler" and (spec.replicas or 1) > 1:
            issues.append(_issue(f"{base}.replicas", f"Invalid value: {spec.replicas}: more than 1 scheduler found"))
    warning = (
        "MXJob is deprecated, and the MXJob will be removed in the release v1.9.0. "
        "Please use other frameworks such as PyTorchJob."
    )
    return issues, [warning]


Rule = Callable[[TrainingJob, "TrainingJob | None"], tuple[list[Issue], list[str]]]

RULES: dict[str, Rule] = {
    "PyTorchJob": pytorch,
    "TFJob": tensorflow,
    "XGBoostJob": xgboost,
    "PaddleJob": paddle,
    "JAXJob": jax,
    "MPIJob": mpi,
    "MXJob": mxnet,
}


def check(job: TrainingJob, old: TrainingJob | None = None) -> tuple[list[Issue], list[str]]:
    """Webhook / controller-validation errors and the webhook's warnings for ``job``."""
    issues, warnings = RULES[job.KIND.kind](job, old)
    return check_metadata(job) + issues, warnings
