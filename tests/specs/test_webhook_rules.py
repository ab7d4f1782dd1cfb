"""Each webhook / controller-validation rule, per kind: one document that breaks it, one that passes.

Expected messages are the operator's wording (training-operator.md §4.x), with Kubernetes field paths.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_training.validation import validate
from tests.factories import DELETE, minimal, mutate

C = "template.spec.containers"

# (case id, kind, mutations, expected error or None for "must pass")
RULES: list[tuple[str, str, list[tuple[str, Any]], str | None]] = [
    # --- name: DNS-1035 label (all webhook kinds + MXJob) ---
    *[
        (f"{kind}-name-uppercase", kind, [("metadata.name", "Bad_Name")],
         'metadata.name: Invalid value: "Bad_Name": should match: a DNS-1035 label must consist of lower case')
        for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MXJob")
    ],
    *[
        (f"{kind}-name-starts-with-digit", kind, [("metadata.name", "1job")], 'metadata.name: Invalid value: "1job"')
        for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")
    ],
    *[(f"{kind}-name-ok", kind, [("metadata.name", "job-1")], None) for kind in ("PyTorchJob", "TFJob", "JAXJob")],
    # --- containers present / image / default-named container ---
    ("PyTorchJob-no-containers", "PyTorchJob", [(f"spec.pytorchReplicaSpecs.Worker.{C}", [])],
     "spec.pytorchReplicaSpecs[Worker].template.spec.containers: Required value: must be specified"),
    ("PyTorchJob-no-image", "PyTorchJob", [(f"spec.pytorchReplicaSpecs.Master.{C}[0].image", DELETE)],
     "spec.pytorchReplicaSpecs[Master].template.spec.containers[0].image: Required value: must be required"),
    ("PyTorchJob-no-pytorch-container", "PyTorchJob", [(f"spec.pytorchReplicaSpecs.Worker.{C}[0].name", "main")],
     "spec.pytorchReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container with name pytorch"),
    ("TFJob-no-tensorflow-container", "TFJob", [(f"spec.tfReplicaSpecs.Worker.{C}[0].name", "tf")],
     "spec.tfReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container with name tensorflow"),
    ("XGBoostJob-no-xgboost-container", "XGBoostJob", [(f"spec.xgbReplicaSpecs.Worker.{C}[0].name", "xgb")],
     "spec.xgbReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container with name xgboost"),
    ("PaddleJob-no-paddle-container", "PaddleJob", [(f"spec.paddleReplicaSpecs.Worker.{C}[0].name", "pd")],
     'spec.paddleReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container with name "paddle"'),
    ("JAXJob-no-jax-container", "JAXJob", [(f"spec.jaxReplicaSpecs.Worker.{C}[0].name", "main")],
     "spec.jaxReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container with name jax"),
    ("JAXJob-no-image", "JAXJob", [(f"spec.jaxReplicaSpecs.Worker.{C}[0].image", "")],
     "spec.jaxReplicaSpecs[Worker].template.spec.containers[0].image: Required value: must be required"),
    ("MXJob-no-mxnet-container", "MXJob", [(f"spec.mxReplicaSpecs.Server.{C}[0].name", "mx")],
     "spec.mxReplicaSpecs[Server].template.spec.containers: Required value: MXJobSpec is not valid: There is no container named mxnet in Server"),
    ("MPIJob-no-image", "MPIJob", [(f"spec.mpiReplicaSpecs.Worker.{C}[0].image", DELETE)],
     "spec.mpiReplicaSpecs[Worker].template.spec.containers[0].image: Required value: MPIJobSpec is not valid: Image is undefined in the container of Worker"),
    ("MPIJob-no-containers", "MPIJob", [(f"spec.mpiReplicaSpecs.Launcher.{C}", [])],
     "spec.mpiReplicaSpecs[Launcher].template.spec.containers: Required value: MPIJobSpec is not valid: containers definition expected in Launcher"),
    # --- exact replica-type keys ---
    ("PyTorchJob-lowercase-key", "PyTorchJob", [("spec.pytorchReplicaSpecs.worker", {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}})],
     'spec.pytorchReplicaSpecs[worker]: Unsupported value: "worker": supported values: "Master", "Worker"'),
    ("XGBoostJob-unknown-key", "XGBoostJob", [("spec.xgbReplicaSpecs.PS", {"replicas": 1, "template": {"spec": {"containers": [{"name": "xgboost", "image": "x"}]}}})],
     'spec.xgbReplicaSpecs[PS]: Unsupported value: "PS": supported values: "Master", "Worker"'),
    ("PaddleJob-unknown-key", "PaddleJob", [("spec.paddleReplicaSpecs.Chief", {"replicas": 1, "template": {"spec": {"containers": [{"name": "paddle", "image": "x"}]}}})],
     'spec.paddleReplicaSpecs[Chief]: Unsupported value: "Chief": supported values: "Master", "Worker"'),
    ("JAXJob-master-key", "JAXJob", [("spec.jaxReplicaSpecs.Master", {"replicas": 1, "template": {"spec": {"containers": [{"name": "jax", "image": "x"}]}}})],
     'spec.jaxReplicaSpecs[Master]: Unsupported value: "Master": supported values: "Worker"'),
    ("MPIJob-unknown-key", "MPIJob", [("spec.mpiReplicaSpecs.Master", {"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}})],
     'spec.mpiReplicaSpecs[Master]: Unsupported value: "Master": supported values: "Launcher", "Worker"'),
    # TF does not validate keys: lower-case keys pass (the defaulter CamelCases them).
    ("TFJob-lowercase-keys-pass", "TFJob", [("spec.tfReplicaSpecs.ps", {"replicas": 1, "template": {"spec": {"containers": [{"name": "tensorflow", "image": "x"}]}}})], None),
    # --- replica counts ---
    ("PyTorchJob-master-2", "PyTorchJob", [("spec.pytorchReplicaSpecs.Master.replicas", 2)],
     "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    ("PyTorchJob-master-nil", "PyTorchJob", [("spec.pytorchReplicaSpecs.Master.replicas", DELETE)],
     "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    ("PyTorchJob-worker-0", "PyTorchJob", [("spec.pytorchReplicaSpecs.Worker.replicas", 0)],
     "spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1"),
    ("PyTorchJob-worker-nil-passes", "PyTorchJob", [("spec.pytorchReplicaSpecs.Worker.replicas", DELETE)], None),
    ("XGBoostJob-no-master", "XGBoostJob", [("spec.xgbReplicaSpecs.Master", DELETE)],
     "spec.xgbReplicaSpecs[Master]: Required value: must be present"),
    ("XGBoostJob-master-nil", "XGBoostJob", [("spec.xgbReplicaSpecs.Master.replicas", DELETE)],
     "spec.xgbReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    ("TFJob-chief-and-master", "TFJob", [("spec.tfReplicaSpecs.Master", {"replicas": 1, "template": {"spec": {"containers": [{"name": "tensorflow", "image": "x"}]}}})],
     "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"),
    ("TFJob-two-chiefs", "TFJob", [("spec.tfReplicaSpecs.Chief.replicas", 2)],
     "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"),
    ("MPIJob-two-launchers", "MPIJob", [("spec.mpiReplicaSpecs.Launcher.replicas", 2)],
     "spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 2: MPIJobSpec is not valid: There must be only 1 launcher replica"),
    ("MPIJob-no-launcher", "MPIJob", [("spec.mpiReplicaSpecs.Launcher", DELETE)],
     "spec.mpiReplicaSpecs[Launcher]: Required value: MPIJobSpec is not valid: Master ReplicaSpec must be present"),
    ("MPIJob-launcher-nil-passes", "MPIJob", [("spec.mpiReplicaSpecs.Launcher.replicas", DELETE)], None),
    ("MXJob-two-schedulers", "MXJob", [("spec.mxReplicaSpecs.Scheduler.replicas", 2)],
     "spec.mxReplicaSpecs[Scheduler].replicas: Invalid value: 2: more than 1 scheduler found"),
    ("PaddleJob-any-count-passes", "PaddleJob", [("spec.paddleReplicaSpecs.Worker.replicas", 7)], None),
    # --- elasticPolicy (PyTorch, 1.9) ---
    ("PyTorchJob-elastic-without-worker", "PyTorchJob",
     [("spec.pytorchReplicaSpecs.Worker", DELETE), ("spec.elasticPolicy", {"minReplicas": 1, "maxReplicas": 2})],
     "spec.pytorchReplicaSpecs[Worker]: Required value: must be configured if elastic policy is used"),
    ("PyTorchJob-nproc-twice", "PyTorchJob",
     [("spec.elasticPolicy", {"nProcPerNode": 2}), ("spec.nprocPerNode", "2")],
     "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"),
    ("PyTorchJob-elastic-passes", "PyTorchJob", [("spec.elasticPolicy", {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d"})], None),
    # --- managedBy (1.9: PyTorch, TF, XGBoost, Paddle) ---
    *[
        (f"{kind}-managed-by-unknown", kind, [("spec.runPolicy", {"managedBy": "example.com/other"})],
         'spec.runPolicy.managedBy: Unsupported value: "example.com/other": supported values: "kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"')
        for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob")
    ],
    *[
        (f"{kind}-managed-by-kueue-passes", kind, [("spec.runPolicy", {"managedBy": "kueue.x-k8s.io/multikueue"})], None)
        for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob")
    ],
    # JAXJob's webhook has no managedBy rule.
    ("JAXJob-managed-by-unchecked", "JAXJob", [("spec.runPolicy", {"managedBy": "example.com/other"})], None),
    # --- the CRD schema (what the API server checks before the webhook) ---
    ("PyTorchJob-replicas-string", "PyTorchJob", [("spec.pytorchReplicaSpecs.Worker.replicas", "3")],
     'spec.pytorchReplicaSpecs[Worker].replicas: Invalid value: "string": must be of type integer'),
    ("TFJob-no-replica-map", "TFJob", [("spec.tfReplicaSpecs", DELETE)], "spec.tfReplicaSpecs: Required value"),
    ("MXJob-no-job-mode", "MXJob", [("spec.jobMode", DELETE)], "spec.jobMode: Required value"),
    ("MPIJob-slots-string", "MPIJob", [("spec.slotsPerWorker", "one")],
     'spec.slotsPerWorker: Invalid value: "string": must be of type integer'),
    ("PyTorchJob-bad-quantity", "PyTorchJob", [(f"spec.pytorchReplicaSpecs.Worker.{C}[0].resources", {"limits": {"memory": "8GB"}})],
     'spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].resources.limits[memory]: Invalid value: "8GB"'),
    ("PyTorchJob-duplicate-port", "PyTorchJob",
     [(f"spec.pytorchReplicaSpecs.Worker.{C}[0].ports", [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 80, "protocol": "TCP"}])],
     "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].ports[1]: Duplicate value"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "mutations", "expected"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_rule(kind: str, mutations: list[tuple[str, Any]], expected: str | None) -> None:
    doc = minimal(kind)
    for path, value in mutations:
        doc = mutate(doc, path, value)
    [report] = validate(doc)
    messages = [str(e) for e in report.errors]
    if expected is None:
        assert messages == []
    else:
        assert any(m.startswith(expected) for m in messages), messages


@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "MXJob", "JAXJob"])
def test_minimal_job_of_every_kind_is_valid(kind: str) -> None:
    [report] = validate(minimal(kind))
    assert report.errors == []
    assert report.kind == kind


def test_errors_are_collected_not_first_only() -> None:
    doc = mutate(minimal("PyTorchJob", name="Bad_Name"), "spec.pytorchReplicaSpecs.Master.replicas", 3)
    doc = mutate(doc, f"spec.pytorchReplicaSpecs.Worker.{C}[0].image", DELETE)
    [report] = validate(doc)
    paths = {e.path for e in report.errors}
    assert {
        "metadata.name",
        "spec.pytorchReplicaSpecs[Master].replicas",
        "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image",
    } <= paths


def test_mxjob_carries_the_deprecation_warning() -> None:
    [report] = validate(minimal("MXJob"))
    assert any("MXJob is deprecated" in str(w) for w in report.warnings)


def test_managed_by_is_immutable_on_update_except_pytorch_quirk() -> None:
    from airflow_provider_training.validation import admit

    for kind, immutable in (("TFJob", True), ("XGBoostJob", True), ("PaddleJob", True), ("PyTorchJob", False)):
        old = mutate(minimal(kind), "spec.runPolicy", {"managedBy": "kubeflow.org/training-operator"})
        new = mutate(minimal(kind), "spec.runPolicy", {"managedBy": "kueue.x-k8s.io/multikueue"})
        result = admit(new, old=old)
        messages = [str(e) for e in result.errors]
        assert (
            messages == ['spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable']
        ) is immutable, (kind, messages)
