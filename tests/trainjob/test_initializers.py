"""Initializer steps on the embedded control plane: Kubeflow's initializer image runs before the
trainer (the runtime's ``dependsOn``) and fills the shared ``initializer`` volume from a local path
or a claim; ``hf://`` fails the TrainJob at once with a clear reason instead of a crash loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.embedded import ControlPlane
from tests.trainjob.helpers import GROUP, PY, VERSION, TrainJobs, trainjob

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
READ = "import pathlib; print(sorted(p.name for p in pathlib.Path('/workspace/dataset').iterdir()))"


@pytest.fixture
def tj(kube_api: Any, test_namespace: str, control_plane: ControlPlane) -> TrainJobs:
    return TrainJobs(kube_api, test_namespace, control_plane.kubeconfig)


def _job(name: str, ancestor: str, container: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        **extra,
        "template": {
            "metadata": {"labels": {ANCESTOR: ancestor}},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {**container, "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}]}
                        ],
                        "volumes": [{"name": "initializer", "persistentVolumeClaim": {"claimName": "shared-init"}}],
                    }
                }
            },
        },
    }


def with_dataset_initializer(step: str = "dataset", name: str = "with-data") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        _job(
                            f"{step}-initializer",
                            f"{step}-initializer",
                            {
                                "name": f"{step}-initializer",
                                "image": f"ghcr.io/kubeflow/trainer/{step}-initializer:v2.3.0",
                            },
                        ),
                        _job(
                            "node",
                            "trainer",
                            {"name": "node", "image": "python:3.11"},
                            dependsOn=[{"name": f"{step}-initializer", "status": "Complete"}],
                        ),
                    ]
                }
            },
        },
    }


def test_local_dataset_is_copied_before_the_trainer_runs(tj: TrainJobs, tmp_path: Path) -> None:
    data = tmp_path / "digits"
    data.mkdir()
    (data / "train.csv").write_text("1,2\n")
    (data / "test.csv").write_text("3,4\n")
    tj.create(with_dataset_initializer())
    body = trainjob("withdata", runtime="with-data", kind="TrainingRuntime", numNodes=1, command=[PY, "-c", READ])
    body["spec"]["initializer"] = {"dataset": {"storageUri": f"file://{data}"}}
    tj.create(body)
    tj.wait_condition("withdata", "Complete", timeout=120)
    pods = {p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]: p for p in tj.pods("withdata")}
    assert set(pods) == {"dataset-initializer", "node"}
    init, node = pods["dataset-initializer"], pods["node"]
    assert init.status.container_statuses[0].state.terminated.finished_at <= node.status.start_time
    assert "['test.csv', 'train.csv']" in tj.logs(node.metadata.name)


def test_hf_initializer_fails_the_trainjob_with_a_clear_reason(tj: TrainJobs) -> None:
    tj.create(with_dataset_initializer())
    body = trainjob("hfdata", runtime="with-data", kind="TrainingRuntime", numNodes=1, command=[PY, "-c", READ])
    body["spec"]["initializer"] = {"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}}
    tj.create(body)
    failed = tj.wait_condition("hfdata", "Failed", timeout=60)
    assert failed["reason"] == "InitializerNotSupported"
    assert failed["message"].startswith("spec.initializer.dataset.storageUri: hf://tatsu-lab/alpaca: ")
    assert "kit://" in failed["message"]
    assert tj.pods("hfdata") == []


KITFILE = """manifestVersion: "1.0"
package:
  name: tiny
model:
  name: tiny
  path: model.bin
"""
READ_MODEL = (
    "import pathlib; m = pathlib.Path('/workspace/model'); "
    "print(sorted(p.name for p in m.iterdir()), (m / 'model.bin').read_text())"
)


def test_kit_model_initializer_pulls_the_modelkit_before_the_trainer(
    tj: TrainJobs, tmp_path: Path, registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_training.cli.main import main as cli

    model = tmp_path / "model"
    model.mkdir()
    (model / "Kitfile").write_text(KITFILE)
    (model / "model.bin").write_text("weights-v1")
    monkeypatch.setenv("KITOPS_HOME", str(tmp_path / "kitops"))
    reference = f"{registry.host}/ml-models/tiny:v1"
    assert cli(["kit", "pack", str(model), "-t", reference, "--push", "--plain-http"]) == 0
    tj.create(with_dataset_initializer("model", "with-model"))
    body = trainjob(
        "withmodel", runtime="with-model", kind="TrainingRuntime", numNodes=1, command=[PY, "-c", READ_MODEL]
    )
    body["spec"]["initializer"] = {
        "model": {"storageUri": f"kit://{reference}", "env": [{"name": "KIT_UNPACK_FLAGS", "value": "--plain-http"}]}
    }
    tj.create(body)
    tj.wait_condition("withmodel", "Complete", timeout=120)
    pods = {p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]: p for p in tj.pods("withmodel")}
    assert "['Kitfile', 'model.bin'] weights-v1" in tj.logs(pods["node"].metadata.name)
    assert f"pulling ModelKit {reference}" in tj.logs(pods["model-initializer"].metadata.name)


@pytest.mark.parametrize(
    "uri",
    [
        "pvc://../other-ns/claim",
        "pvc://claim/../../other-ns/claim",
        "pvc://claim//etc/passwd",
        "pvc:///etc/passwd",
        "pvc://..",
        "pvc://Other_NS/claim",
    ],
)
def test_pvc_initializer_outside_the_namespace_is_refused_by_admission(tj: TrainJobs, uri: str) -> None:
    from kubernetes.client.exceptions import ApiException

    tj.create(with_dataset_initializer())
    body = trainjob("escape", runtime="with-data", kind="TrainingRuntime", numNodes=1, command=[PY, "-c", READ])
    body["spec"]["initializer"] = {"dataset": {"storageUri": uri}}
    with pytest.raises(ApiException) as refused:
        tj.create(body)
    assert refused.value.status == 422, refused.value.body
    assert "spec.initializer.dataset.storageUri: Invalid value:" in refused.value.body
    assert tj.pods("escape") == []


def test_pvc_initializer_copies_only_inside_the_claim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The initializer itself (a runtime may set STORAGE_URI without spec.initializer): ``..`` and
    a symlink out of the claim copy nothing."""
    from airflow_provider_training.embedded.workloads import trainer_initializer as ti

    namespace = tmp_path / "pvc" / "team-a"
    (namespace / "claim" / "data").mkdir(parents=True)
    (namespace / "claim" / "data" / "mine.txt").write_text("mine")
    (tmp_path / "pvc" / "team-b" / "secret").mkdir(parents=True)
    (tmp_path / "pvc" / "team-b" / "secret" / "theirs.txt").write_text("theirs")
    (namespace / "claim" / "out").symlink_to(tmp_path / "pvc" / "team-b" / "secret")
    monkeypatch.setenv(ti.PVC_ROOT_ENV, str(namespace))
    for uri in ("pvc://../team-b/secret", "pvc://claim/../../team-b/secret", "pvc://claim/out"):
        destination = tmp_path / "dest" / str(abs(hash(uri)))
        assert ti.initialize("dataset", uri, destination) == 2, uri
        assert not any(destination.rglob("theirs.txt")) if destination.exists() else True
    assert ti.initialize("dataset", "pvc://claim/data", tmp_path / "ok") == 0
    assert (tmp_path / "ok" / "mine.txt").read_text() == "mine"
