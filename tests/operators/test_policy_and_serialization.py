"""Decisions that need no cluster: name-collision policy, identity labels, coercion of templated
values, replica selection, failure reports, trigger serialization and job links."""

from __future__ import annotations

import pytest

from airflow_provider_training.client import ReplicaFailure
from airflow_provider_training.client.logselect import replica_filter
from airflow_provider_training.links.training import job_url
from airflow_provider_training.operators import identity, spec
from airflow_provider_training.operators.failures import failure_report
from airflow_provider_training.operators.training import STATE_KEY, stored_ref
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.triggers import TrainingJobTrigger
from tests.factories import simple_job as job

LABELS = identity.identity_labels("etl", "train", "manual__2026-01-01T00:00:00+00:00", -1, 1)


def existing(condition: str | None, labels: dict[str, str] | None = None) -> dict:
    doc = job(name="mnist", labels=labels if labels is not None else LABELS)
    doc["metadata"]["namespace"] = "default"
    if condition:
        doc["status"] = {"conditions": [{"type": condition, "status": "True", "reason": f"PyTorchJob{condition}"}]}
    return doc


@pytest.mark.parametrize("policy", identity.POLICIES)
def test_a_running_job_of_this_task_is_always_reattached(policy: str) -> None:
    assert identity.on_existing(existing("Running"), {**LABELS, identity.TRY_NUMBER: "2"}, policy).action == "reattach"


@pytest.mark.parametrize(
    ("policy", "mine_finished", "foreign"),
    [
        ("reattach", "rename", "fail"),
        ("rename", "rename", "rename"),
        ("replace", "replace", "replace"),
        ("fail", "fail", "fail"),
    ],
)
def test_policy_for_finished_and_foreign_jobs(policy: str, mine_finished: str, foreign: str) -> None:
    assert identity.on_existing(existing("Succeeded"), LABELS, policy).action == mine_finished
    other = identity.on_existing(existing("Running", labels={"team": "x"}), LABELS, policy)
    assert other.action == foreign
    if foreign == "fail" and policy == "reattach":
        assert "template the name" in other.why and "if_job_exists='rename'" in other.why


def test_free_name_and_unknown_policy() -> None:
    assert identity.on_existing(None, LABELS, "reattach").action == "create"
    with pytest.raises(ValueError, match="if_job_exists must be one of"):
        identity.on_existing(None, LABELS, "overwrite")


def test_identity_labels_are_valid_and_leave_try_number_out_of_the_selector() -> None:
    assert LABELS[identity.RUN_ID] != "manual__2026-01-01T00:00:00+00:00"  # ':' and '+' are not allowed
    assert len(LABELS[identity.RUN_ID]) <= 63 and LABELS[identity.RUN_ID][0].isalnum()
    assert identity.selector(LABELS) == (
        f"airflow-training/dag-id=etl,airflow-training/task-id=train,"
        f"airflow-training/run-id={LABELS[identity.RUN_ID]},!airflow-training/map-index"
    )
    mapped = identity.identity_labels("etl", "train", "r", 3, 1)
    assert identity.selector(mapped).endswith("airflow-training/map-index=3")


def test_names_are_dns_labels_stable_per_run_and_short_enough_for_pod_names() -> None:
    a = identity.default_name("Train_Model", "manual__1", -1)
    assert (
        a
        == identity.default_name("Train_Model", "manual__1", -1)
        != identity.default_name("Train_Model", "manual__2", -1)
    )
    assert a.startswith("train-model-")
    long = identity.retry_name("x" * 80, 12)
    assert long.endswith("-r12") and len(long) <= identity.MAX_NAME


def test_templated_strings_become_integers_and_booleans_where_the_schema_says_so() -> None:
    doc = job(replicas={"Master": 1, "Worker": 1})
    worker = doc["spec"]["pytorchReplicaSpecs"]["Worker"]
    worker["replicas"] = " 4 "
    worker["template"]["spec"]["containers"][0]["args"] = ["--epochs", "10"]  # strings stay strings
    doc["spec"]["runPolicy"] = {"backoffLimit": "3", "suspend": "false"}
    out = spec.load(doc)
    assert out["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    assert out["spec"]["runPolicy"] == {"backoffLimit": 3, "suspend": False}
    assert out["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"] == [
        "--epochs",
        "10",
    ]
    doc["spec"]["runPolicy"]["backoffLimit"] = "three"  # left alone: validation names the field
    assert spec.load(doc)["spec"]["runPolicy"]["backoffLimit"] == "three"


def test_typed_operators_fill_in_the_kind_and_refuse_another() -> None:
    doc = job("TFJob", replicas={"Worker": 1})
    del doc["kind"], doc["apiVersion"]
    assert spec.load(doc, "TFJob")["kind"] == "TFJob"
    from airflow_provider_training.specs import JobSpecError

    with pytest.raises(JobSpecError, match="use PyTorchJobOperator or TrainingJobOperator"):
        spec.load(job("PyTorchJob"), "TFJob")


def _pod(name: str, rtype: str, index: int, master: bool = False) -> dict:
    labels = {"training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": str(index)}
    if master:
        labels["training.kubeflow.org/job-role"] = "master"
    return {"metadata": {"name": name, "labels": labels}}


def test_replica_selection() -> None:
    master, w0, w1 = (
        _pod("j-master-0", "master", 0, True),
        _pod("j-worker-0", "worker", 0),
        _pod("j-worker-1", "worker", 1),
    )
    with_master = job(replicas={"Master": 1, "Worker": 2})
    pick = replica_filter("master", with_master)
    assert pick is not None and [pick(p) for p in (master, w0, w1)] == [True, False, False]
    workers_only = replica_filter("master", job(replicas={"Worker": 2}))  # PaddleJob collective style
    assert workers_only is not None and [workers_only(p) for p in (w0, w1)] == [True, False]
    some = replica_filter(["master", "worker-1"], with_master)
    assert some is not None and [some(p) for p in (master, w0, w1)] == [True, False, True]
    assert replica_filter("none", with_master) is None
    every = replica_filter("all", with_master)
    assert every is not None and all(every(p) for p in (master, w0, w1))


def test_failure_report_names_reason_replicas_exit_codes_and_log_tail() -> None:
    failed = existing("Failed")
    failed["status"]["conditions"][0]["message"] = "PyTorchJob mnist is failed because 1 Master replica(s) failed."
    text = failure_report(
        failed,
        [ReplicaFailure("mnist-master-0", 3, "Error")],
        {"mnist-master-0": "a\nValueError: bad\n"},
        [
            {
                "type": "Warning",
                "reason": "BackOff",
                "message": "restarting",
                "involvedObject": {"name": "mnist-master-0"},
            }
        ],
    )
    assert text.splitlines() == [
        "PyTorchJob default/mnist failed: PyTorchJobFailed: PyTorchJob mnist is failed because 1 Master replica(s) failed.",
        "Failed replicas: mnist-master-0 (exit code 3, Error)",
        "Last 2 log lines of mnist-master-0:",
        "  a",
        "  ValueError: bad",
        "Warning events:",
        "  mnist-master-0: BackOff: restarting",
    ]


def test_trigger_serializes_and_round_trips_without_leaking_credentials_in_repr() -> None:
    trigger = TrainingJobTrigger(
        "PyTorchJob",
        "mnist",
        "ml",
        "uid-1",
        kubernetes_conn_id="tke",
        connection_extras={"kube_config": "secret-token-here"},
        poll_interval=5,
        deadline=1_900_000_000.0,
        on_kill_action="delete",
    )
    path, kwargs = trigger.serialize()
    assert path == "airflow_provider_training.triggers.training.TrainingJobTrigger"
    again = TrainingJobTrigger(**kwargs)
    assert again.serialize() == (path, kwargs)
    assert kwargs["deadline"] == 1_900_000_000.0 and kwargs["on_kill_action"] == "delete"
    assert "secret-token-here" not in repr(trigger)
    import importlib

    module, _, name = path.rpartition(".")
    assert getattr(importlib.import_module(module), name) is TrainingJobTrigger


#: The kwargs of a TrainingJobTrigger as the version before ObjectRef (and before ``not_before``)
#: serialized them.
PREVIOUS_TRIGGER_KWARGS = {
    "kind": "PyTorchJob",
    "name": "mnist",
    "namespace": "ml",
    "uid": "uid-1",
    "kubernetes_conn_id": None,
    "connection_extras": None,
    "poll_interval": 10.0,
    "watch_timeout": 240.0,
    "deadline": 1_900_000_000.0,
    "on_kill_action": "delete",
}


def test_a_trigger_row_written_before_an_upgrade_resumes_and_new_rows_keep_its_shape() -> None:
    """The triggerer rebuilds a trigger from its row's (encrypted) kwargs: a row of the previous
    version must still load, and the job is still serialized flat, as it was."""
    from airflow.models.trigger import Trigger
    from airflow.sdk.module_loading import import_string

    path = "airflow_provider_training.triggers.training.TrainingJobTrigger"
    row = Trigger(classpath=path, kwargs=PREVIOUS_TRIGGER_KWARGS)
    trigger = import_string(row.classpath)(**row.kwargs)
    assert trigger.ref == ObjectRef("PyTorchJob", "ml", "mnist", "uid-1")
    _, kwargs = trigger.serialize()
    # what later versions added, at values that keep the old row's behaviour (resume on a worker)
    added = {"end_from_trigger": False, "log_replicas": "none", "on_finish_action": "keep", "push_summary": True}
    assert {k: v for k, v in kwargs.items() if k != "not_before"} == {**PREVIOUS_TRIGGER_KWARGS, **added}

    ref = ObjectRef("PyTorchJob", "ml", "mnist", "uid-1")
    built = TrainingJobTrigger(ref=ref, deadline=1_900_000_000.0, on_kill_action="delete", not_before=1.0)
    assert built.serialize() == (path, {**PREVIOUS_TRIGGER_KWARGS, **added, "not_before": 1.0})
    with pytest.raises(ValueError, match="kind, name and namespace"):
        TrainingJobTrigger(kind="PyTorchJob", name="mnist")


def test_the_task_state_store_entry_of_an_earlier_try_is_read_back() -> None:
    class Store(dict):
        def set(self, key: str, value: object) -> None:
            self[key] = value

    entry = {"kind": "PyTorchJob", "name": "mnist", "namespace": "ml", "uid": "uid-1"}  # as earlier tries wrote it
    assert stored_ref(Store({STATE_KEY: entry})) == ObjectRef("PyTorchJob", "ml", "mnist", "uid-1")
    assert ObjectRef("PyTorchJob", "ml", "mnist", "uid-1").to_dict() == entry  # what this version writes
    for junk in (None, "mnist", {"name": "mnist"}):
        assert stored_ref(Store({STATE_KEY: junk})) is None
    assert stored_ref(None) is None  # Airflow before 3.3: no store


def test_job_links() -> None:
    assert job_url("", "https://127.0.0.1:6443", kind="PyTorchJob", name="mnist", namespace="ml") == (
        "https://127.0.0.1:6443/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/mnist"
    )
    tke = "https://console.cloud.tencent.com/tke2/cluster/sub/list/kubeflow.org/{plural}?clusterId=cls-1&ns={namespace}&name={name}"
    assert job_url(tke, "", kind="TFJob", name="t", namespace="ml") == (
        "https://console.cloud.tencent.com/tke2/cluster/sub/list/kubeflow.org/tfjobs?clusterId=cls-1&ns=ml&name=t"
    )
    with pytest.raises(ValueError, match=r"unknown field\(s\) cluster"):
        job_url("https://x/{cluster}", "", kind="TFJob", name="t", namespace="ml")
