"""Which REST resource serves a kind: the training-job kinds, batch/v1 Jobs and KServe InferenceServices."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_training.specs.kinds import ALL_KINDS, GROUP, VERSION


@dataclass(frozen=True)
class Resource:
    """A namespaced custom-object-style resource (``/apis/{group}/{version}/namespaces/{ns}/{plural}``)."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def path(self, namespace: str, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{name}" if name else base


BATCH_JOB = Resource("batch", "v1", "jobs", "Job")
INFERENCE_SERVICE = Resource("serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService")
TRAINJOB = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")  # Kubeflow Trainer v2
TRAINING_JOBS: dict[str, Resource] = {info.kind: Resource(GROUP, VERSION, info.plural, info.kind) for info in ALL_KINDS}
RESOURCES: dict[str, Resource] = {
    **TRAINING_JOBS,
    "Job": BATCH_JOB,
    "InferenceService": INFERENCE_SERVICE,
    "TrainJob": TRAINJOB,
}


def resource_for(kind: str) -> Resource:
    """The resource of ``kind``; the error lists the kinds this client handles."""
    try:
        return RESOURCES[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r}: the client handles {', '.join(RESOURCES)}") from None
