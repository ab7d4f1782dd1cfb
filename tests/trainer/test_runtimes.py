"""The default ClusterTrainingRuntimes of a v2.3.0 install, bundled as package data."""

from __future__ import annotations

from airflow_provider_training.specs.trainer import default_runtime_documents, default_runtimes, documents
from airflow_provider_training.validation import validate


def test_the_five_vendored_runtimes_load_with_the_install_overlay() -> None:
    runtimes = default_runtimes()
    assert sorted(runtimes) == [
        "deepspeed-distributed",
        "jax-distributed",
        "mlx-distributed",
        "torch-distributed",
        "xgboost-distributed",
    ]
    for runtime in runtimes.values():
        assert runtime.kind == "ClusterTrainingRuntime"
        assert runtime.metadata.label("trainer.kubeflow.org/webhook-validation") == "disabled"
        assert runtime.framework_label is not None
        assert runtime.trainer_job() is not None
    torch = runtimes["torch-distributed"]
    assert torch.spec.ml_policy is not None and torch.spec.ml_policy.framework == "torch"
    node = torch.trainer_job()
    assert node is not None and node.template.spec.template.spec is not None
    assert node.template.spec.template.spec.containers[0].image == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
    deepspeed = runtimes["deepspeed-distributed"]
    assert [job.name for job in deepspeed.spec.template.spec.replicated_jobs] == ["node", "launcher"]
    launcher = deepspeed.trainer_job()
    assert launcher is not None and launcher.name == "launcher"
    image = launcher.template.spec.template.spec.containers[0].image  # type: ignore[union-attr]
    assert image == "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0"
    mpi = deepspeed.spec.ml_policy.mpi  # type: ignore[union-attr]
    assert mpi is not None and mpi.run_launcher_as_node and mpi.ssh_auth_mount_path == "/home/mpiuser/.ssh"
    assert runtimes["xgboost-distributed"].trainer_job().template.spec.template.spec.containers[0].image == (  # type: ignore[union-attr]
        "ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0"
    )


def test_documents_are_fresh_api_objects_that_pass_every_check() -> None:
    first = default_runtime_documents()
    first[0]["metadata"]["name"] = "changed"
    assert default_runtime_documents()[0]["metadata"]["name"] != "changed"
    plain = default_runtime_documents(install_overlay=False)
    assert all("trainer.kubeflow.org/webhook-validation" not in d["metadata"]["labels"] for d in plain)
    for doc in default_runtime_documents():
        assert documents.check_document(doc).errors == []
    reports = validate(default_runtime_documents())
    assert all(r.ok and not r.warnings for r in reports), [r.lines() for r in reports]


def test_validate_dispatches_exactly_the_trainer_kinds() -> None:
    from airflow_provider_training.specs.trainer import TRAINER_KINDS
    from airflow_provider_training.validation import TRAINER_KINDS as DISPATCHED

    assert sorted(DISPATCHED) == sorted(TRAINER_KINDS)
