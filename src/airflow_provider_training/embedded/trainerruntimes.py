"""Trainer v2 runtimes in the store, shared by the API server's admission and the TrainJob
controller: the runtime a TrainJob references (live, or as its runtime snapshot kept it), and the
default ClusterTrainingRuntimes a fresh control plane gets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_training.embedded.store import AlreadyExistsError, Store
from airflow_provider_training.frameworks.trainer.snapshot import (
    SnapshotError,
    read_snapshot,
    runtime_snapshot,
    snapshot_name,
)
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.documents import check_document
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob
from airflow_provider_training.specs.trainer.runtimes import RELEASE, default_runtime_documents
from airflow_provider_training.specs.trainer.webhook import runtime_not_found
from airflow_provider_training.specs.unstructured import Unstructured

CLUSTER_RUNTIMES = "trainer.kubeflow.org/clustertrainingruntimes"
CONFIGMAPS = "core/configmaps"
# What the Kubeflow SDK reads first (a warning when absent): the install's public version ConfigMap.
SYSTEM_NAMESPACE = "kubeflow-system"
PUBLIC_CONFIGMAP = "kubeflow-trainer-public"
RUNTIMES = "trainer.kubeflow.org/trainingruntimes"


def _live_runtime(store: Store, job: TrainJob) -> dict[str, Any] | None:
    ref = job.spec.runtime_ref
    if ref.kind == c.TRAINING_RUNTIME:
        return store.get(RUNTIMES, job.namespace, ref.name)
    return store.get(CLUSTER_RUNTIMES, "", ref.name)


def _typed(job: TrainJob, obj: Unstructured) -> tuple[TrainingRuntime | None, str | None]:
    checked = check_document(obj)
    if not isinstance(checked.object, TrainingRuntime):
        return None, f"{job.spec.runtime_ref.name}: the stored runtime cannot be read"
    return checked.object, None


def stored_runtime(store: Store, job: TrainJob) -> tuple[TrainingRuntime | None, str | None]:
    """The runtime a TrainJob references, typed with CRD defaults, or None and the NotFound text."""
    obj = _live_runtime(store, job)
    if obj is None:
        return None, runtime_not_found(job)
    return _typed(job, obj)


@dataclass(frozen=True)
class Resolved:
    runtime: TrainingRuntime | None
    error: str | None = None
    # The error is the snapshot's (upstream's ``invalid runtime snapshot: …``), not a missing runtime.
    bad_snapshot: bool = False


def snapshot_runtime(store: Store, job: TrainJob) -> Resolved:
    """The runtime a TrainJob's objects are built from (``NewObjects``): its snapshot ConfigMap
    ``<tj>-runtime-snapshot`` when there is one, else the live runtime, of which a snapshot is taken
    now, so that later edits (or the runtime's deletion) never reach this TrainJob."""
    configmap = store.get(CONFIGMAPS, job.namespace, snapshot_name(job.name))
    if configmap is not None:
        try:
            return Resolved(*_typed(job, read_snapshot(configmap, job)))
        except SnapshotError as exc:
            return Resolved(None, str(exc), bad_snapshot=True)
    live = _live_runtime(store, job)
    if live is None:
        return Resolved(None, runtime_not_found(job))
    try:
        store.create(CONFIGMAPS, runtime_snapshot(job, live))
    except AlreadyExistsError:  # taken meanwhile: that one stands
        return snapshot_runtime(store, job)
    return Resolved(*_typed(job, live))


def install_default_runtimes(store: Store) -> list[str]:
    """Create the default ClusterTrainingRuntimes of a Trainer v2.3.0 install that are missing (a
    fresh control plane, or one from before Trainer v2 was served); returns the names created.
    A runtime the user changed is left as it is. Also the ``kubeflow-system`` namespace with the
    ``kubeflow-trainer-public`` ConfigMap (``kubeflow_trainer_version``) the Kubeflow SDK reads."""
    created = []
    for document in default_runtime_documents():
        name = document["metadata"]["name"]
        if store.get(CLUSTER_RUNTIMES, "", name) is not None:
            continue
        checked = check_document(document)
        store.create(CLUSTER_RUNTIMES, checked.defaulted if checked.defaulted is not None else document)
        created.append(name)
    if store.get("core/namespaces", "", SYSTEM_NAMESPACE) is None:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}
        store.create("core/namespaces", {**namespace, "status": {"phase": "Active"}})
    if store.get("core/configmaps", SYSTEM_NAMESPACE, PUBLIC_CONFIGMAP) is None:
        store.create(
            "core/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": PUBLIC_CONFIGMAP, "namespace": SYSTEM_NAMESPACE},
                "data": {"kubeflow_trainer_version": RELEASE},
            },
        )
    return created
