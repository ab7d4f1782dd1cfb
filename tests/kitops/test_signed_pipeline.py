"""Data → job → ModelKit → served revision, provable: one real DAG run (``dag.test()``) trains a
PyTorchJob on the session's control plane, packs and pushes a signed ModelKit with the run's SLSA
provenance, and deploys it only after verifying both. OpenLineage events of the run are captured by
a file transport and link the three tasks through their datasets."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.cli.main import main as cli
from airflow_provider_training.kitops import keys, signing
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.reference import parse
from tests.paths import ROOT

pytestmark = pytest.mark.slow
PASSWORD = "pipeline-key-password"

DAG = """
from airflow.sdk import DAG, Param
from airflow_provider_training.operators import PyTorchJobOperator
from airflow_provider_training.operators.deploy import InferenceServiceOperator
from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator

OUT = "--output=/output/{{ run_id | replace(':', '-') | replace('+', '-') }}"
JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "signed-{{ ts_nodash | lower }}"},
    "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {
        "containers": [{"name": "pytorch", "image": "ccr.ccs.tencentyun.com/ml-models/digits-train:v3",
                        "command": ["python", "code/train.py"], "args": ["--epochs={{ params.epochs }}", OUT],
                        "volumeMounts": [{"name": "output", "mountPath": "/output"}]}],
        "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": "signed-output"}}]}}}}},
}

with DAG("signed_pipeline", schedule=None, params={"epochs": Param(2, type="integer"), "namespace": "default"}):
    train = PyTorchJobOperator(task_id="train", job=JOB, namespace="{{ params.namespace }}")
    package = ModelKitPackAndPushOperator(
        task_id="package",
        source="pvc://signed-output/{{ run_id | replace(':', '-') | replace('+', '-') }}",
        reference="{{ conn.pipeline_registry.host }}/ml-models/signed-digits:{{ ds_nodash }}",
        registry_conn_id="pipeline_registry",
        namespace="{{ params.namespace }}",
        signing_conn_id="pipeline_signing",
    )
    deploy = InferenceServiceOperator(
        task_id="deploy",
        name="signed-digits",
        namespace="{{ params.namespace }}",
        storage_uri="{{ ti.xcom_pull(task_ids='package', key='reference') }}",
        registry_conn_id="pipeline_registry",
        verify=True,
        signing_conn_id="pipeline_signing",
        require_provenance=True,
        poll_interval=0.5,
        timeout=120,
    )
    train >> package >> deploy
"""


@pytest.fixture
def openlineage_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """OpenLineage on, with a file transport: every event the provider emits is a line in the file."""
    from airflow.providers.openlineage import conf as ol_conf
    from airflow.providers.openlineage.plugins.listener import get_openlineage_listener
    from airflow.sdk.listener import get_listener_manager

    path = tmp_path / "openlineage.jsonl"
    monkeypatch.setenv(
        "AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps({"type": "file", "log_file_path": str(path), "append": True})
    )
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "airflow-provider-training-tests")
    for name in dir(ol_conf):
        clear = getattr(getattr(ol_conf, name), "cache_clear", None)
        if clear:
            clear()
    manager = get_listener_manager()
    listener = get_openlineage_listener()
    manager.add_listener(listener)
    yield path
    manager.pm.unregister(listener)
    for name in dir(ol_conf):
        clear = getattr(getattr(ol_conf, name), "cache_clear", None)
        if clear:
            clear()


def _complete_events(path: Path, jobs: set[str], timeout: float = 30) -> dict[str, dict[str, Any]]:
    """The COMPLETE event of each task (the provider emits from forked processes: wait for them)."""
    deadline = time.monotonic() + timeout
    while True:
        events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        done = {e["job"]["name"].split(".")[-1]: e for e in events if e.get("eventType") == "COMPLETE"}
        if jobs <= set(done) or time.monotonic() > deadline:
            return done
        time.sleep(0.2)


def test_dag_run_makes_a_signed_modelkit_with_provenance_and_linked_lineage(
    airflow_db, write_dag, dags_folder, control_plane, registry, kube_api, test_namespace, tmp_path,
    monkeypatch, openlineage_events, capsys,
):  # fmt: skip
    from tests.deploy.conftest import delete_and_wait, task_states, xcoms

    pair = keys.generate_key_pair(PASSWORD)
    public = tmp_path / "cosign.pub"
    public.write_bytes(pair.public_pem)
    monkeypatch.setenv("AIRFLOW_TRAINING_HOME", str(control_plane.home))
    monkeypatch.setenv(
        "AIRFLOW_CONN_PIPELINE_REGISTRY",
        json.dumps({"conn_type": "modelkit_registry", "host": registry.host, "extra": {"plain_http": True}}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_PIPELINE_SIGNING",
        json.dumps(
            {"conn_type": "modelkit_signing", "password": PASSWORD, "extra": {"private_key": pair.private_pem.decode()}}
        ),
    )
    if not (dags_folder / "code").exists():
        shutil.copytree(ROOT / "dags" / "code", dags_folder / "code")
    dag = write_dag(DAG, "signed_pipeline")
    try:
        run = dag.test(run_conf={"epochs": 2, "namespace": test_namespace})
        assert task_states(run) == {"train": "success", "package": "success", "deploy": "success"}
        pushed = xcoms("signed_pipeline", run.run_id)
    finally:
        delete_and_wait(kube_api, test_namespace, "signed-digits")

    reference, digest = pushed[("package", "reference")], pushed[("package", "digest")]
    assert pushed[("deploy", "verified_digest")] == digest
    hexpart = digest.split(":")[1]
    assert pushed[("package", "signature")].endswith(f":sha256-{hexpart}.sig")
    assert pushed[("package", "provenance")].endswith(f":sha256-{hexpart}.att")

    # the provenance names this run, its tasks, the training job and its image, and the code layer
    ref = parse(reference)
    with make_client(ref.registry, plain_http=True) as client:
        verified = signing.verify(client, ref, keys.load_public_key(pair.public_pem), require_provenance=True)
    statement = verified.provenance
    assert statement is not None and statement["subject"][0]["digest"] == {"sha256": hexpart}
    build = statement["predicate"]["buildDefinition"]
    assert build["externalParameters"]["dag_id"] == "signed_pipeline"
    assert build["externalParameters"]["params"]["epochs"] == 2
    internal = build["internalParameters"]
    assert internal["run_id"] == run.run_id
    assert internal["task_ids"] == ["train", "package"]
    [job] = internal["training_jobs"]
    assert job["kind"] == "PyTorchJob" and job["uid"] == pushed[("train", "job_uid")]
    assert job["images"] == ["ccr.ccs.tencentyun.com/ml-models/digits-train:v3"]
    uris = [d["uri"] for d in build["resolvedDependencies"]]
    assert "oci://ccr.ccs.tencentyun.com/ml-models/digits-train:v3" in uris
    assert statement["predicate"]["runDetails"]["builder"]["version"]["airflow-provider-training"]

    # kit inspect --provenance prints the same statement, verified with the public key
    monkeypatch.setenv("KITOPS_HOME", str(tmp_path / "kithome"))
    capsys.readouterr()
    assert cli(["kit", "inspect", reference, "--provenance", "--key", str(public), "--plain-http"]) == 0
    assert (
        json.loads(capsys.readouterr().out)["predicate"]["buildDefinition"]["internalParameters"]["run_id"]
        == run.run_id
    )

    # OpenLineage: data -> job -> ModelKit -> served revision, all children of this DAG run
    events = _complete_events(openlineage_events, {"train", "package", "deploy"})
    assert {"train", "package", "deploy"} <= set(events), sorted(events)

    def names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(d["namespace"], d["name"]) for d in datasets]

    claim = (f"pvc://{test_namespace}", "signed-output")
    modelkit = (f"modelkit://{ref.registry}", ref.repository)
    assert claim in names(events["train"]["outputs"])
    assert names(events["package"]["inputs"]) == [claim]
    assert names(events["package"]["outputs"]) == [modelkit]
    assert modelkit in names(events["deploy"]["inputs"])
    assert names(events["deploy"]["outputs"]) == [(f"kserve://{test_namespace}", "signed-digits")]
    out = events["package"]["outputs"][0]["facets"]
    assert out["version"]["datasetVersion"] == digest
    assert out["modelkit"]["signature"] == pushed[("package", "signature")]
    assert out["modelkit"]["provenance"] == pushed[("package", "provenance")]
    assert events["train"]["run"]["facets"]["trainingJob"]["uid"] == pushed[("train", "job_uid")]
    assert events["deploy"]["run"]["facets"]["inferenceService"]["storageUri"].endswith(f"@{digest}")
    parents = {events[task]["run"]["facets"]["parent"]["run"]["runId"] for task in ("train", "package", "deploy")}
    assert len(parents) == 1  # one DAG run is the parent of all three
    if "signed_pipeline" in events:  # the DAG run's own event, when the provider emits one
        assert parents == {events["signed_pipeline"]["run"]["runId"]}
