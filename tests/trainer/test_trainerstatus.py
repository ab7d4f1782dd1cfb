"""Trainer v2.3.0's TrainJobStatus plugin and its status server's request decoding (``pkg/statusserver``,
``plugins/trainjobstatus``), and runtime snapshots (``pkg/runtime/core/snapshot.go``) — the pure parts."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from airflow_provider_training.frameworks.trainer import build
from airflow_provider_training.frameworks.trainer import trainerstatus as ts
from airflow_provider_training.frameworks.trainer.snapshot import SnapshotError, read_snapshot, runtime_snapshot
from airflow_provider_training.specs.trainer import default_runtimes, documents
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob
from tests.factories import initializer_job, runtime, trainjob

SERVER = ts.StatusServer("https://127.0.0.1:6443", "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/tj/status"


def _typed(doc: dict[str, Any]) -> Any:
    checked = documents.check_document(doc)
    assert checked.errors == [], checked.errors
    return checked.object


def _pod(built: Any, rjob: str) -> dict[str, Any]:
    job = next(j for j in built.jobset["spec"]["replicatedJobs"] if j["name"] == rjob)
    pod: dict[str, Any] = job["template"]["spec"]["template"]["spec"]
    return pod


def test_the_plugin_gives_every_trainer_container_the_env_the_token_and_the_ca() -> None:
    job = _typed(trainjob(numNodes=2, command=["python", "train.py"]))
    built = build(job, default_runtimes()["torch-distributed"], status_server=SERVER)
    pod = _pod(built, "node")
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        "https://127.0.0.1:6443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/tj/status"
    )
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    assert env["PET_NNODES"] == "2"  # the framework's env is untouched
    assert {
        "name": "kubeflow-trainer-token",
        "mountPath": "/var/run/secrets/kubeflow/trainer",
        "readOnly": True,
    } in pod["containers"][0]["volumeMounts"]
    volume = next(v for v in pod["volumes"] if v["name"] == "kubeflow-trainer-token")
    token, ca = volume["projected"]["sources"]
    assert token == {"serviceAccountToken": {"audience": AUDIENCE, "expirationSeconds": 3600, "path": "token"}}
    assert ca == {"configMap": {"name": "tj-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    configmap = built.objects[0]
    assert (configmap["kind"], configmap["metadata"]["name"]) == ("ConfigMap", "tj-tls-config")
    assert configmap["data"] == {"ca.crt": SERVER.ca_pem}
    assert configmap["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"


def test_only_the_trainer_pods_get_it_and_only_with_the_gate_on() -> None:
    jobs = [initializer_job("dataset-initializer"), runtime()["spec"]["template"]["spec"]["replicatedJobs"][0]]
    jobs[1]["dependsOn"] = [{"name": "dataset-initializer", "status": "Complete"}]
    rt: TrainingRuntime = _typed(runtime(jobs=jobs))
    job: TrainJob = _typed(trainjob(runtime_name="my-runtime"))
    built = build(job, rt, status_server=SERVER)
    initializer = _pod(built, "dataset-initializer")["containers"][0]
    assert not any(e["name"].startswith("KUBEFLOW_TRAINER") for e in initializer.get("env") or [])
    assert "volumes" not in _pod(built, "dataset-initializer")
    off = build(job, rt)
    assert "volumes" not in _pod(off, "node") and off.objects == []
    assert not any(
        e["name"].startswith("KUBEFLOW_TRAINER") for e in _pod(off, "node")["containers"][0].get("env") or []
    )


# --- the request body, as Go's encoding/json decodes it ---------------------------------------------------


def test_what_the_sdk_sends_decodes_and_is_stored_as_the_api_stores_times() -> None:
    body = (
        b'{"trainerStatus": {"lastUpdatedTime": "2026-05-01T12:00:00.123456+02:00", "progressPercentage": 42,'
        b' "estimatedRemainingSeconds": 30, "metrics": [{"name": "loss", "value": "0.5"}]}}'
    )
    update = ts.decode_update(body)
    assert update.trainer_status is not None
    assert ts.applied_status(update.trainer_status) == {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 30,
        "metrics": [{"name": "loss", "value": "0.5"}],
        "lastUpdatedTime": "2026-05-01T10:00:00Z",
    }
    assert ts.echo(update)["trainerStatus"]["progressPercentage"] == 42


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b'"text"',
        b"42",
        b'{"trainerStatus": []}',
        b'{"trainerStatus": 5}',
        b'{"trainerStatus": {"progressPercentage": "42"}}',
        b'{"trainerStatus": {"progressPercentage": 42.0}}',
        b'{"trainerStatus": {"progressPercentage": 1e2}}',
        b'{"trainerStatus": {"progressPercentage": true}}',
        b'{"trainerStatus": {"progressPercentage": 2147483648}}',
        b'{"trainerStatus": {"estimatedRemainingSeconds": NaN}}',
        b'{"trainerStatus": {"metrics": {"loss": "0.5"}}}',
        b'{"trainerStatus": {"metrics": ["loss"]}}',
        b'{"trainerStatus": {"metrics": [{"name": "loss", "value": 0.5}]}}',
        b'{"trainerStatus": {"lastUpdatedTime": "yesterday"}}',
        b'{"trainerStatus": {"lastUpdatedTime": 1767225600}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2026-02-30T00:00:00Z"}}',
        b'{"deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # past Go's nesting limit (10000)
    ],
)
def test_bodies_gos_decoder_refuses_are_invalid_payloads(body: bytes) -> None:
    with pytest.raises(ts.PayloadError):
        ts.decode_update(body)


def test_gos_leniencies_are_kept() -> None:
    # keys match case-insensitively, unknown keys are ignored, what follows the first value is not read
    update = ts.decode_update(b' {"TrainerStatus": {"PROGRESSPERCENTAGE": 7, "extra": [1]}, "other": 1} trailing')
    assert update.trainer_status is not None and update.trainer_status.progress_percentage == 7
    assert ts.decode_update(b"null").trainer_status is None
    assert ts.decode_update(b'{"trainerStatus": null}').trainer_status is None
    assert ts.echo(ts.decode_update(b"{}")) == {}
    # out-of-range values decode (int32): the CRD's schema refuses them later, with its message
    status = ts.decode_update(b'{"trainerStatus": {"progressPercentage": -5, "metrics": [null]}}').trainer_status
    assert status is not None
    assert ts.applied_status(status) == {"progressPercentage": -5, "metrics": [{"name": "", "value": ""}]}


def test_an_empty_trainer_status_sets_no_time_so_the_crd_rule_refuses_it() -> None:
    status = ts.decode_update(b'{"trainerStatus": {}}').trainer_status
    assert status is not None and ts.applied_status(status) == {}
    job = trainjob()
    job["status"] = {"trainerStatus": ts.applied_status(status)}
    messages = [i.message for i in documents.check_document(job).errors]
    assert 'Invalid value: "object": lastUpdatedTime is required when trainerStatus is present' in messages


# --- runtime snapshots --------------------------------------------------------------------------------


def _owned_job(uid: str = "uid-1") -> TrainJob:
    doc = trainjob()
    doc["metadata"]["uid"] = uid
    job: TrainJob = _typed(doc)
    return job


def test_a_snapshot_keeps_the_runtime_as_stored_and_reads_back() -> None:
    stored = {
        **runtime(kind="ClusterTrainingRuntime", name="torch-distributed"),
        "metadata": {"name": "torch-distributed"},
    }
    job = _owned_job()
    configmap = runtime_snapshot(job, stored)
    assert configmap["metadata"]["name"] == "tj-runtime-snapshot"
    owner = configmap["metadata"]["ownerReferences"][0]
    assert (owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == ("uid-1", True, True)
    assert yaml.safe_load(configmap["data"]["runtime"]) == stored
    assert read_snapshot(configmap, job) == stored


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda cm: cm["metadata"]["ownerReferences"][0].update(uid="someone-else"),
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object",
        ),
        (lambda cm: cm.update(data={}), 'invalid runtime snapshot: snapshot ConfigMap missing "runtime" data key'),
        (lambda cm: cm.update(data={"runtime": "a: [b"}), "invalid runtime snapshot: unable to unmarshal the snapshot"),
        (
            lambda cm: cm.update(
                data={"runtime": yaml.safe_dump(runtime(kind="ClusterTrainingRuntime", name="other"))}
            ),
            "invalid runtime snapshot: the snapshot refers to the wrong runtime: expecting a runtime with name, api "
            'group and kind of "torch-distributed", "trainer.kubeflow.org", "ClusterTrainingRuntime" but found runtime '
            'with name, api group and kind of "other", "trainer.kubeflow.org", "ClusterTrainingRuntime"',
        ),
    ],
)
def test_a_snapshot_that_cannot_stand_for_the_runtime_is_refused_with_upstreams_words(
    change: Any, message: str
) -> None:
    job = _owned_job()
    configmap = runtime_snapshot(job, runtime(kind="ClusterTrainingRuntime", name="torch-distributed"))
    change(configmap)
    with pytest.raises(SnapshotError) as refused:
        read_snapshot(configmap, job)
    assert str(refused.value).startswith(message)
