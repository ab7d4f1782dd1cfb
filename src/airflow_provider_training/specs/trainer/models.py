"""TrainJob, TrainingRuntime, ClusterTrainingRuntime and JobSet as typed objects (v2.3.0 / v0.12.0).

Only what this project reads is typed; every other field is kept verbatim (``extra="allow"``), so a
loaded document dumps back to what the user wrote. Runtime patches stay plain dicts: they are
merged as strategic merge patches, not interpreted field by field.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_training.specs.base import KubeModel
from airflow_provider_training.specs.meta import ObjectMeta
from airflow_provider_training.specs.pod import EnvVar, PodTemplateSpec, ResourceRequirements
from airflow_provider_training.specs.trainer import constants as c

# --- JobSet (jobset.x-k8s.io/v1alpha2) -------------------------------------------------------------


class DependsOn(KubeModel):
    name: str
    status: str


class JobSpec(KubeModel):
    """The batch/v1 JobSpec inside a replicatedJob; other Job fields are kept as written."""

    parallelism: int | None = None
    completions: int | None = None
    completion_mode: str | None = None
    backoff_limit: int | None = None
    template: PodTemplateSpec = PodTemplateSpec()


class JobTemplateSpec(KubeModel):
    metadata: ObjectMeta | None = None
    spec: JobSpec = JobSpec()

    @property
    def ancestor(self) -> str | None:
        return self.metadata.label(c.LABEL_ANCESTOR) if self.metadata else None


class ReplicatedJob(KubeModel):
    name: str
    group_name: str | None = None
    replicas: int | None = None
    depends_on: list[DependsOn] | None = None
    template: JobTemplateSpec = JobTemplateSpec()


class JobSetSpec(KubeModel):
    replicated_jobs: list[ReplicatedJob] = []
    network: dict[str, Any] | None = None
    success_policy: dict[str, Any] | None = None
    failure_policy: dict[str, Any] | None = None
    startup_policy: dict[str, Any] | None = None
    coordinator: dict[str, Any] | None = None
    suspend: bool | None = None
    managed_by: str | None = None

    def replicated_job(self, name: str) -> ReplicatedJob | None:
        for job in self.replicated_jobs:
            if job.name == name:
                return job
        return None


class JobSet(KubeModel):
    api_version: str = c.JOBSET_API_VERSION
    kind: str = c.JOBSET
    metadata: ObjectMeta = ObjectMeta()
    spec: JobSetSpec = JobSetSpec()
    status: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name or ""


# --- TrainingRuntime / ClusterTrainingRuntime --------------------------------------------------------


class EnvInjectionTarget(KubeModel):
    job_name: str
    container_names: list[str] = []


class EnvInjection(KubeModel):
    targets: list[EnvInjectionTarget] | None = None


class TorchMLPolicy(KubeModel):
    env_injection: EnvInjection | None = None


class MPIMLPolicy(KubeModel):
    # CRD defaults: 1, "OpenMPI", "/root/.ssh", false (apply them with ``schema.with_defaults``).
    num_proc_per_node: int | None = None
    mpi_implementation: str | None = None
    ssh_auth_mount_path: str | None = None
    run_launcher_as_node: bool | None = None


class MLPolicy(KubeModel):
    num_nodes: int | None = None
    torch: TorchMLPolicy | None = None
    mpi: MPIMLPolicy | None = None
    jax: dict[str, Any] | None = None
    xgboost: dict[str, Any] | None = None
    flux: dict[str, Any] | None = None

    @property
    def framework(self) -> str | None:
        """``torch``, ``mpi``, ``jax``, ``xgboost``, ``flux`` or None (plain)."""
        for name in ("torch", "mpi", "jax", "xgboost", "flux"):
            if getattr(self, name) is not None:
                return name
        return None


class JobSetTemplateSpec(KubeModel):
    metadata: ObjectMeta | None = None
    spec: JobSetSpec = JobSetSpec()


class TrainingRuntimeSpec(KubeModel):
    ml_policy: MLPolicy | None = None
    pod_group_policy: dict[str, Any] | None = None
    template: JobSetTemplateSpec = JobSetTemplateSpec()


class TrainingRuntime(KubeModel):
    """A TrainingRuntime or a ClusterTrainingRuntime (same spec; ``kind`` tells which)."""

    api_version: str = c.API_VERSION
    kind: str = c.CLUSTER_TRAINING_RUNTIME
    metadata: ObjectMeta = ObjectMeta()
    spec: TrainingRuntimeSpec = TrainingRuntimeSpec()

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def framework_label(self) -> str | None:
        return self.metadata.label(c.LABEL_FRAMEWORK)

    def trainer_job(self) -> ReplicatedJob | None:
        """The replicatedJob whose Job template carries ``trainjob-ancestor-step: trainer``."""
        for job in self.spec.template.spec.replicated_jobs:
            if job.template.ancestor == c.ANCESTOR_TRAINER:
                return job
        return None


# --- TrainJob ----------------------------------------------------------------------------------------


class RuntimeRef(KubeModel):
    name: str
    api_group: str | None = None
    kind: str | None = None

    @property
    def registry_key(self) -> str:
        """``<Kind>.<group>`` as ``schema.GroupKind.String()`` prints it (no dot when the group is empty)."""
        kind = self.kind or ""
        return f"{kind}.{self.api_group}" if self.api_group else kind


class InitializerSource(KubeModel):
    storage_uri: str | None = None
    env: list[EnvVar] | None = None
    secret_ref: dict[str, Any] | None = None


class Initializer(KubeModel):
    dataset: InitializerSource | None = None
    model: InitializerSource | None = None


class Trainer(KubeModel):
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None
    num_nodes: int | None = None
    resources_per_node: ResourceRequirements | None = None
    num_proc_per_node: int | None = None


class RuntimePatch(KubeModel):
    manager: str
    time: str | None = None
    training_runtime_spec: dict[str, Any] | None = None

    def replicated_job_patches(self) -> list[dict[str, Any]]:
        spec = ((self.training_runtime_spec or {}).get("template") or {}).get("spec") or {}
        jobs = spec.get("replicatedJobs") or []
        return [job for job in jobs if isinstance(job, dict)]


class TrainJobSpec(KubeModel):
    runtime_ref: RuntimeRef
    initializer: Initializer | None = None
    trainer: Trainer | None = None
    runtime_patches: list[RuntimePatch] | None = None
    suspend: bool | None = None
    active_deadline_seconds: int | None = None
    managed_by: str | None = None


class TrainJob(KubeModel):
    api_version: str = c.API_VERSION
    kind: str = c.TRAINJOB
    metadata: ObjectMeta = ObjectMeta()
    spec: TrainJobSpec
    status: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"
