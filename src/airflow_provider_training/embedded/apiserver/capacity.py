"""Admission of the embedded control plane's cap on the pods of one job (``specs/capacity.py``):
a TrainJob, JobSet, batch/v1 Job or training job asking for more pods at once than this machine
runs for one job is a 422 naming the field and ``AIRFLOW_TRAINING_MAX_PODS_PER_JOB``."""

from __future__ import annotations

from airflow_provider_training.embedded.apiserver import errors
from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.embedded.store import Store
from airflow_provider_training.embedded.trainerruntimes import CLUSTER_RUNTIMES, RUNTIMES
from airflow_provider_training.specs.capacity import pod_count, too_many_pods
from airflow_provider_training.specs.unstructured import Unstructured


def _runtime_num_nodes(store: Store, job: Unstructured) -> int | None:
    """The ``mlPolicy.numNodes`` of the runtime a TrainJob names (its default node count)."""
    spec = job.get("spec") if isinstance(job.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    trainer = spec.get("trainer")
    if isinstance(trainer, dict) and trainer.get("numNodes") is not None:
        return None
    ref = spec.get("runtimeRef") if isinstance(spec.get("runtimeRef"), dict) else {}
    assert isinstance(ref, dict)
    if ref.get("kind") == "TrainingRuntime":
        runtime = store.get(RUNTIMES, str((job.get("metadata") or {}).get("namespace", "")), str(ref.get("name")))
    else:
        runtime = store.get(CLUSTER_RUNTIMES, "", str(ref.get("name")))
    nodes = (((runtime or {}).get("spec") or {}).get("mlPolicy") or {}).get("numNodes")
    return nodes if isinstance(nodes, int) and not isinstance(nodes, bool) else None


def admit(store: Store, rt: ResourceType, obj: Unstructured, old: Unstructured | None) -> None:
    """Refuse ``obj`` (a create, or an update that asks for more pods than before) past the cap."""
    runtime_nodes = _runtime_num_nodes(store, obj) if rt.kind == "TrainJob" else None
    issue = too_many_pods(obj, runtime_nodes)
    if issue is None:
        return
    if old is not None:
        before, after = pod_count(old, runtime_nodes), pod_count(obj, runtime_nodes)
        if before is not None and after is not None and after.pods <= before.pods:
            return  # stored before the cap was lowered: changes that ask for no more pods pass
    raise errors.invalid(rt, str((obj.get("metadata") or {}).get("name", "")), [(issue.path, issue.message)])
