"""Who controls what: the controlling ownerReference a controller writes (``controller_ref``) and the
children it finds again (``Store.list_controlled``), as the Job, JobSet, TrainJob, training-job and
InferenceService controllers use them. A child is an owner's when its controlling reference names
the owner's uid; labels alone, another controller or a malformed reference do not make it one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_provider_training.embedded.store import Store
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.specs.resources import BY_KEY
from airflow_provider_training.specs.unstructured import controlled_by, controller_of, controller_ref
from tests.factories import typed_job

JOBS, PODS = BY_KEY["batch/jobs"], BY_KEY["core/pods"]
SELECTOR = [("batch.kubernetes.io/controller-uid", "uid-job")]


def _job(uid: str = "uid-job") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ns", "uid": uid}}


def _pod(name: str, refs: Any, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "labels": dict(SELECTOR) if labels is None else labels}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta, "ownerReferences": refs}, "spec": {}}


def test_the_controlling_reference_names_the_owner_as_upstream_writes_it() -> None:
    ref = controller_ref(_job(), JOBS)
    assert ref == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "uid": "uid-job",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert controller_ref({**_job(), "apiVersion": "batch/v1", "kind": "Job"}) == ref  # the object's own kind
    typed = typed_job("PyTorchJob", "ddp", {"Master": 1})
    assert controller_ref(typed, typed.KIND) == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "ddp",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_a_job_lists_only_the_children_it_controls(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    mine = controller_ref(_job(), JOBS)
    theirs = controller_ref(_job("uid-other"), JOBS)
    store.create(PODS.key, _pod("controlled", [mine]))
    store.create(PODS.key, _pod("also-owned-by-another", [{**theirs, "controller": False}, mine]))
    store.create(PODS.key, _pod("unlabelled", [mine], labels={}))  # outside the selector
    store.create(PODS.key, _pod("another-controller", [theirs]))
    store.create(PODS.key, _pod("merely-owned", [{**mine, "controller": False}]))
    store.create(PODS.key, _pod("malformed", ["uid-job", 7, None, {"controller": True}]))
    store.create(PODS.key, _pod("not-a-list", "uid-job"))
    names = [p["metadata"]["name"] for p in store.list_controlled(PODS.key, _job(), label_equals=SELECTOR)]
    assert names == ["also-owned-by-another", "controlled"]
    by_ref = store.list_controlled(PODS.key, ObjectRef("Job", "ns", "train", "uid-job"), label_equals=SELECTOR)
    assert [p["metadata"]["name"] for p in by_ref] == names
    everywhere = store.list_controlled(PODS.key, _job())  # no selector: the whole namespace
    assert [p["metadata"]["name"] for p in everywhere] == [*names, "unlabelled"]
    assert [p["metadata"]["name"] for p in store.list_controlled(PODS.key, {**_job(), "metadata": {}})] == []
    store.close()


def test_malformed_references_are_skipped_not_raised() -> None:
    for refs in (["x"], [3], "x", None, [{"uid": "u"}], [{"uid": "u", "controller": "yes"}]):
        obj = _pod("p", refs)
        assert controlled_by(obj, "nobody") is False
    assert controller_of(_pod("p", [{"uid": "u", "controller": True}])) == {"uid": "u", "controller": True}
    assert controlled_by(_pod("p", [{"uid": "u", "controller": True}]), None) is False
    assert controller_of({"metadata": "not an object"}) is None and controller_of("not an object") is None
