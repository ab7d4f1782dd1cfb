"""Admission of Trainer v2 objects as an API server with Trainer and JobSet installed decides it."""

from __future__ import annotations

from typing import Any

from airflow_provider_training.frameworks.trainer.admission import admit
from airflow_provider_training.specs.trainer import default_runtimes
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob
from tests.factories import mutate, runtime, trainjob

SDK_BODY: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "a1b2c3d4e5f6"},
    "spec": {
        "runtimeRef": {"kind": "ClusterTrainingRuntime", "name": "torch-distributed"},
        "trainer": {
            "command": ["bash", "-c", "torchrun t.py"],
            "numNodes": 2,
            "resourcesPerNode": {"limits": {"cpu": 1.0}, "requests": {"cpu": 1.0}},
        },
        "runtimePatches": [{"manager": "trainer.kubeflow.org/kubeflow-sdk"}],
    },
}


def _defaults(job: TrainJob) -> tuple[TrainingRuntime | None, str | None]:
    found = default_runtimes().get(job.spec.runtime_ref.name)
    return (
        found,
        None if found else f'clustertrainingruntimes.trainer.kubeflow.org "{job.spec.runtime_ref.name}" not found',
    )


def test_the_sdk_body_is_defaulted_and_admitted() -> None:
    result = admit(SDK_BODY, lookup_runtime=_defaults, now="2026-12-01T00:00:00Z")
    assert result.errors == [] and result.warnings == []
    spec = result.object["spec"]
    assert spec["runtimeRef"]["apiGroup"] == "trainer.kubeflow.org"
    assert spec["managedBy"] == "trainer.kubeflow.org/trainjob-controller" and spec["suspend"] is False
    assert spec["runtimePatches"][0]["time"] == "2026-12-01T00:00:00Z"


def test_missing_runtime_is_a_webhook_denial() -> None:
    body = mutate(SDK_BODY, "spec.runtimeRef.name", "nope")
    result = admit(body, lookup_runtime=_defaults)
    assert result.denied_by_webhook
    assert str(result.errors[0]).endswith(
        'clustertrainingruntimes.trainer.kubeflow.org "nope" not found: specified clusterTrainingRuntime must be '
        "created before the TrainJob is created"
    )


def test_unknown_fields_by_field_validation() -> None:
    body = mutate(SDK_BODY, "spec.trainer.gpus", 1)
    strict = admit(body, lookup_runtime=_defaults)
    assert [str(e) for e in strict.errors] == ["spec.trainer.gpus: unknown field"] and not strict.denied_by_webhook
    warn = admit(body, lookup_runtime=_defaults, field_validation="Warn")
    assert warn.errors == [] and warn.warnings == ['unknown field "spec.trainer.gpus"']
    assert "gpus" not in warn.object["spec"]["trainer"]
    ignored = admit(body, lookup_runtime=_defaults, field_validation="Ignore")
    assert ignored.errors == [] and ignored.warnings == []


def test_update_keeps_patch_time_and_refuses_trainer_changes() -> None:
    stored = admit(SDK_BODY, lookup_runtime=_defaults, now="T0").object
    same = admit(mutate(stored, "spec.suspend", True), old=stored, lookup_runtime=_defaults, now="T1")
    assert same.errors == [] and same.object["spec"]["runtimePatches"][0]["time"] == "T0"
    changed = admit(mutate(stored, "spec.trainer.numNodes", 3), old=stored, lookup_runtime=_defaults, now="T1")
    assert [str(e) for e in changed.errors] == ['spec.trainer: Invalid value: "object": field is immutable']


def test_runtime_and_jobset_admission() -> None:
    bad = mutate(runtime(), "spec.template.spec.replicatedJobs[0].replicas", 3)
    result = admit(bad)
    assert result.denied_by_webhook and "always must be 1" in str(result.errors[0])
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {"containers": []}}}}}]},
    }
    admitted = admit(jobset)
    assert admitted.errors == []
    job_spec = admitted.object["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job_spec["completionMode"] == "Indexed" and job_spec["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert admitted.object["spec"]["replicatedJobs"][0]["replicas"] == 1
    assert admitted.object["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    moved = mutate(admitted.object, "spec.replicatedJobs[0].template.spec.parallelism", 4)
    assert [str(e) for e in admit(moved, old=admitted.object).errors] == [
        'spec.replicatedJobs: Invalid value: "array": field is immutable'
    ]


def test_trainjob_on_a_namespaced_runtime() -> None:
    rt = admit(runtime()).object
    typed = TrainingRuntime.model_validate(rt)
    job = mutate(trainjob(numNodes=1), "spec.runtimeRef", {"name": "my-runtime", "kind": "TrainingRuntime"})
    result = admit(job, lookup_runtime=lambda _job: (typed, None))
    assert result.errors == []
