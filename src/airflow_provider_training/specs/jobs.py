"""The seven training-job kinds as typed objects.

Each kind class carries its :class:`KindInfo`; ``replica_specs`` gives the kind's replica map
whatever its field is called (``pytorchReplicaSpecs``, ``tfReplicaSpecs`` …).
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from airflow_provider_training.specs import kinds
from airflow_provider_training.specs.base import KubeModel
from airflow_provider_training.specs.common import ElasticPolicy, JobStatus, ReplicaSpec, RunPolicy
from airflow_provider_training.specs.kinds import KindInfo
from airflow_provider_training.specs.meta import ObjectMeta


class JobSpec(KubeModel):
    run_policy: RunPolicy | None = None


class TrainingJob(KubeModel):
    """Common shape of every kind; use a subclass (``PyTorchJob`` …) or :func:`job_class`."""

    KIND: ClassVar[KindInfo]

    api_version: str = kinds.API_VERSION
    kind: str
    metadata: ObjectMeta = ObjectMeta()
    spec: JobSpec
    status: JobStatus | None = None

    @property
    def info(self) -> KindInfo:
        return self.KIND

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        specs: dict[str, ReplicaSpec] | None = getattr(self.spec, python_name(self.KIND.replica_specs_field))
        return specs or {}

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy or RunPolicy()


@functools.cache
def python_name(field: str) -> str:
    """The model attribute of a camelCase field (``pytorchReplicaSpecs`` -> ``pytorch_replica_specs``)."""
    return "".join("_" + c.lower() if c.isupper() else c for c in field)


class PyTorchJobSpec(JobSpec):
    pytorch_replica_specs: dict[str, ReplicaSpec] | None = None
    elastic_policy: ElasticPolicy | None = None
    nproc_per_node: str | None = None


class PyTorchJob(TrainingJob):
    KIND = kinds.PYTORCH
    kind: str = "PyTorchJob"
    spec: PyTorchJobSpec = PyTorchJobSpec()


class TFJobSpec(JobSpec):
    tf_replica_specs: dict[str, ReplicaSpec] | None = None
    success_policy: str | None = None
    enable_dynamic_worker: bool | None = None


class TFJob(TrainingJob):
    KIND = kinds.TENSORFLOW
    kind: str = "TFJob"
    spec: TFJobSpec = TFJobSpec()


class MPIJobSpec(JobSpec):
    mpi_replica_specs: dict[str, ReplicaSpec] | None = None
    slots_per_worker: int | None = None
    clean_pod_policy: str | None = None
    main_container: str | None = None


class MPIJob(TrainingJob):
    KIND = kinds.MPI
    kind: str = "MPIJob"
    spec: MPIJobSpec = MPIJobSpec()


class XGBoostJobSpec(JobSpec):
    xgb_replica_specs: dict[str, ReplicaSpec] | None = None


class XGBoostJob(TrainingJob):
    KIND = kinds.XGBOOST
    kind: str = "XGBoostJob"
    spec: XGBoostJobSpec = XGBoostJobSpec()


class PaddleJobSpec(JobSpec):
    paddle_replica_specs: dict[str, ReplicaSpec] | None = None
    elastic_policy: ElasticPolicy | None = None


class PaddleJob(TrainingJob):
    KIND = kinds.PADDLE
    kind: str = "PaddleJob"
    spec: PaddleJobSpec = PaddleJobSpec()


class MXJobSpec(JobSpec):
    mx_replica_specs: dict[str, ReplicaSpec] | None = None
    job_mode: str | None = None


class MXJob(TrainingJob):
    KIND = kinds.MXNET
    kind: str = "MXJob"
    spec: MXJobSpec = MXJobSpec()


class JAXJobSpec(JobSpec):
    jax_replica_specs: dict[str, ReplicaSpec] | None = None


class JAXJob(TrainingJob):
    KIND = kinds.JAX
    kind: str = "JAXJob"
    spec: JAXJobSpec = JAXJobSpec()


JOB_CLASSES: dict[str, type[TrainingJob]] = {
    cls.KIND.kind: cls for cls in (PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, MXJob, JAXJob)
}


def job_class(kind: str) -> type[TrainingJob]:
    kinds.kind_info(kind)  # raises the friendly error for unknown kinds
    return JOB_CLASSES[kind]


def job_from_dict(data: dict[str, Any]) -> TrainingJob:
    """Build the typed job from a document already checked against its schema."""
    return job_class(str(data.get("kind"))).model_validate(data)
