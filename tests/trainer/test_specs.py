"""The CRD level of TrainJob / runtimes / JobSet: schema, value limits, CRD defaults and the CRD's
own CEL rules (evaluated by cel-python), with the API server's wording."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_training.specs.trainer import documents
from tests.factories import DELETE, mutate, runtime, trainjob


def _errors(doc: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [str(issue) for issue in documents.check_document(doc, old).errors]


CREATE: list[tuple[str, dict[str, Any], str | None]] = [
    ("valid", trainjob(), None),
    ("name-uppercase", mutate(trainjob(), "metadata.name", "Tj"),
     'Invalid value: "object": metadata.name must match RFC 1035 DNS label format'),
    ("name-64", mutate(trainjob(), "metadata.name", "a" * 64),
     'Invalid value: "object": metadata.name must be no more than 63 characters'),
    ("name-63", mutate(trainjob(), "metadata.name", "a" * 63), None),
    ("no-runtime-ref", mutate(trainjob(), "spec.runtimeRef", DELETE), "spec.runtimeRef: Required value"),
    ("runtime-ref-name-empty", mutate(trainjob(), "spec.runtimeRef.name", ""),
     'spec.runtimeRef.name: Invalid value: "": should be at least 1 chars long'),
    # The CRD has no enum on runtimeRef.kind: the webhook refuses unknown kinds (test_webhook).
    ("runtime-ref-kind", mutate(trainjob(), "spec.runtimeRef.kind", "Runtime"), None),
    ("managed-by", mutate(trainjob(), "spec.managedBy", "me/x"),
     'spec.managedBy: Invalid value: "string": ManagedBy must be trainer.kubeflow.org/trainjob-controller or '
     "kueue.x-k8s.io/multikueue if set"),
    ("managed-by-kueue", mutate(trainjob(), "spec.managedBy", "kueue.x-k8s.io/multikueue"), None),
    ("storage-uri", mutate(trainjob(), "spec.initializer.dataset.storageUri", "data"),
     'spec.initializer.dataset.storageUri: Invalid value: "string": storageUri may be empty, or it must be a '
     "valid URI (scheme://...)"),
    ("storage-uri-empty", mutate(trainjob(), "spec.initializer.model.storageUri", ""), None),
    ("deadline-0", mutate(trainjob(), "spec.activeDeadlineSeconds", 0),
     "spec.activeDeadlineSeconds: Invalid value: 0: should be greater than or equal to 1"),
    ("num-nodes-type", mutate(trainjob(), "spec.trainer", {"numNodes": "two"}),
     'spec.trainer.numNodes: Invalid value: "string": must be of type integer'),
    ("too-many-patches", mutate(trainjob(), "spec.runtimePatches", [{"manager": f"a.io/m{i}"} for i in range(17)]),
     "spec.runtimePatches: Too many: 17: must have at most 16 items"),
    ("duplicate-patch-manager", mutate(trainjob(), "spec.runtimePatches", [{"manager": "a.io/m"}, {"manager": "a.io/m"}]),
     "spec.runtimePatches[1]: Duplicate value"),
    ("image-too-long", mutate(trainjob(), "spec.trainer", {"image": "x" * 501}),
     "spec.trainer.image: Too long: may not be more than 500 bytes"),
    ("status-empty", mutate(trainjob(), "status", {}), "status: Invalid value: 0: should have at least 1 properties"),
    ("trainer-status-no-time", mutate(trainjob(), "status", {"trainerStatus": {"progressPercentage": 5}}),
     'status.trainerStatus: Invalid value: "object": lastUpdatedTime is required when trainerStatus is present'),
    ("runtime-valid", runtime(), None),
    ("runtime-two-policies", runtime(ml_policy={"torch": {}, "jax": {}}),
     'spec.mlPolicy: Invalid value: "object": Only one of the policy can be configured'),
    ("runtime-env-injection-node", runtime(ml_policy={"torch": {"envInjection": {"targets": [
        {"jobName": "node", "containerNames": ["node"]}]}}}),
     "containerNames must not include the main node container because PET_* envs are always injected into it"),
    ("runtime-inorder-dependson", mutate(
        runtime(jobs=[{"name": "a", "template": {}},
                      {"name": "b", "template": {}, "dependsOn": [{"name": "a", "status": "Complete"}]}]),
        "spec.template.spec.startupPolicy", {"startupPolicyOrder": "InOrder"}),
     'spec.template.spec: Invalid value: "object": StartupPolicy and DependsOn APIs are mutually exclusive'),
    ("runtime-no-spec-fields", mutate(runtime(), "spec", {}),
     "spec: Invalid value: 0: should have at least 1 properties"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "doc", "expected"), CREATE, ids=[c[0] for c in CREATE])
def test_create(case: str, doc: dict[str, Any], expected: str | None) -> None:
    errors = _errors(doc)
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.runtimeRef", {"name": "other"}),
        ("spec.trainer", {"numNodes": 3}),
        ("spec.initializer", {"model": {"storageUri": "hf://x"}}),
        ("spec.activeDeadlineSeconds", 60),
        ("spec.managedBy", "kueue.x-k8s.io/multikueue"),
    ],
)
def test_immutable_on_update_only(path: str, value: Any) -> None:
    old = mutate(trainjob(), "spec.activeDeadlineSeconds", 30)
    old = mutate(old, "spec.trainer", {"numNodes": 2})
    old = mutate(old, "spec.initializer", {"dataset": {"storageUri": "hf://d"}})
    old = mutate(old, "spec.managedBy", "trainer.kubeflow.org/trainjob-controller")
    new = mutate(old, path, value)
    assert _errors(new) == []  # a create may say anything
    assert any(e.startswith(f"{path}: ") and e.endswith("field is immutable") for e in _errors(new, old)), _errors(
        new, old
    )
    assert _errors(old, old) == []


def test_transition_rules_need_an_old_value() -> None:
    # Adding a field that was absent is not a change the API server's transition rules can see.
    old = trainjob()
    assert _errors(mutate(old, "spec.initializer", {"dataset": {"storageUri": "hf://d"}}), old) == []


def test_suspend_and_patches_stay_mutable() -> None:
    old = mutate(trainjob(), "spec.runtimePatches", [{"manager": "a.io/m"}])
    new = mutate(old, "spec.suspend", True)
    new = mutate(new, "spec.runtimePatches[0].trainingRuntimeSpec", {"template": {"metadata": {"labels": {"a": "b"}}}})
    assert _errors(new, old) == []


def test_crd_defaults_are_applied() -> None:
    checked = documents.check_document(trainjob())
    assert checked.defaulted is not None
    spec = checked.defaulted["spec"]
    assert spec["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert spec["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    assert spec["suspend"] is False
    rt = documents.check_document(runtime(ml_policy={"mpi": {}}))
    assert rt.defaulted is not None
    assert rt.defaulted["spec"]["mlPolicy"]["mpi"] == {
        "mpiImplementation": "OpenMPI",
        "numProcPerNode": 1,
        "runLauncherAsNode": False,
        "sshAuthMountPath": "/root/.ssh",
    }
    assert rt.defaulted["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] == 1


def test_unknown_fields_are_pruned_and_reported() -> None:
    checked = documents.check_document(mutate(trainjob(), "spec.trainer", {"numNodes": 2, "replicas": 3}))
    assert checked.errors == []
    assert [i.path for i in checked.unknown] == ["spec.trainer.replicas"]
    assert checked.defaulted is not None and "replicas" not in checked.defaulted["spec"]["trainer"]


def test_jobset_cel_and_schema() -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {"containers": []}}}}}]},
    }
    assert _errors(jobset) == []
    changed = mutate(jobset, "spec.successPolicy", {"operator": "Any"})
    assert 'spec.successPolicy: Invalid value: "object": Value is immutable' in _errors(
        changed, mutate(jobset, "spec.successPolicy", {"operator": "All"})
    )
    assert any("Unsupported value" in e for e in _errors(mutate(jobset, "spec.successPolicy", {"operator": "Some"})))


def test_wrong_api_version_is_named() -> None:
    assert _errors(mutate(trainjob(), "apiVersion", "kubeflow.org/v1")) == [
        'apiVersion: Unsupported value: "kubeflow.org/v1": TrainJob is served as "trainer.kubeflow.org/v1alpha1"'
    ]
