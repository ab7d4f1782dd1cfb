"""The operator's defaulter (``*_defaults.go``; ``training-operator.md`` §6.1), applied in memory.

Upstream never writes defaults back to ``spec``; neither do we. :func:`with_defaults` returns a
defaulted copy and leaves the user's job untouched.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_training.specs.common import ElasticPolicy, ReplicaSpec, RunPolicy
from airflow_provider_training.specs.jobs import (
    MPIJob,
    PaddleJob,
    PyTorchJob,
    TFJob,
    TrainingJob,
    job_from_dict,
    python_name,
)
from airflow_provider_training.specs.pod import ContainerPort


def with_defaults(job: TrainingJob) -> TrainingJob:
    return _default(job.model_copy(deep=True))


def defaulted_from_dict(obj: dict[str, Any]) -> TrainingJob:
    """``with_defaults(job_from_dict(obj))`` without the copy: the parsed job is new, so it is
    defaulted in place (the controller reads every job this way on every pass; the deep copy of a
    pydantic model was most of a pass's CPU)."""
    return _default(job_from_dict(obj))


def _default(out: TrainingJob) -> TrainingJob:
    """Default ``out`` in place."""
    explicit_clean_pod_policy = out.run_policy.clean_pod_policy  # (before runPolicy gets its default)
    info = out.KIND
    if out.spec.run_policy is None:
        out.spec.run_policy = RunPolicy()
    if out.spec.run_policy.clean_pod_policy is None:
        out.spec.run_policy.clean_pod_policy = "None"
    renamed = {info.canonical_type(k): v for k, v in out.replica_specs.items()}
    setattr(out.spec, _field_attr(out), renamed)
    for rtype, spec in renamed.items():
        _replica_defaults(out, rtype, spec)
    if isinstance(out, PyTorchJob):
        _elastic_defaults(out.spec.elastic_policy, renamed)
        if out.spec.nproc_per_node is None and not (
            out.spec.elastic_policy is not None and out.spec.elastic_policy.n_proc_per_node is not None
        ):
            out.spec.nproc_per_node = "auto"
    elif isinstance(out, PaddleJob):
        _elastic_defaults(out.spec.elastic_policy, renamed)
    elif isinstance(out, TFJob):
        if out.spec.success_policy is None:
            out.spec.success_policy = ""
    elif isinstance(out, MPIJob):
        run_policy = out.spec.run_policy
        # The reconcile keeps both fields in sync, runPolicy winning (§6.1).
        if explicit_clean_pod_policy is None and out.spec.clean_pod_policy is not None:
            run_policy.clean_pod_policy = out.spec.clean_pod_policy
        out.spec.clean_pod_policy = run_policy.clean_pod_policy
        if out.spec.slots_per_worker is None:
            out.spec.slots_per_worker = 1
    return out


def _field_attr(job: TrainingJob) -> str:
    return python_name(job.KIND.replica_specs_field)


def _replica_defaults(job: TrainingJob, rtype: str, spec: ReplicaSpec) -> None:
    info = job.KIND
    if spec.replicas is None:
        spec.replicas = 0 if (isinstance(job, MPIJob) and rtype == "Worker") else 1
    if not spec.restart_policy:
        spec.restart_policy = info.default_restart_policy
    if not info.adds_default_port or spec.template is None or spec.template.spec is None:
        return
    containers = spec.template.spec.containers
    if not containers:
        return
    target = spec.template.spec.container(info.default_container) or containers[0]
    if target.port(info.default_port_name) is None:
        target.ports = [
            *(target.ports or []),
            ContainerPort(name=info.default_port_name, container_port=info.default_port),
        ]


def _elastic_defaults(policy: ElasticPolicy | None, specs: dict[str, ReplicaSpec]) -> None:
    if policy is None:
        return
    if policy.min_replicas is None and policy.max_replicas is None:
        workers = specs.get("Worker")
        count = workers.replicas if workers is not None else None
        policy.min_replicas = policy.max_replicas = count
    elif policy.min_replicas is None:
        policy.min_replicas = policy.max_replicas
    elif policy.max_replicas is None:
        policy.max_replicas = policy.min_replicas
