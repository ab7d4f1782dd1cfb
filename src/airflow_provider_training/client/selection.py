"""Label selectors for a job's pods, and event ordering (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_training.client.state import JOB_NAME_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL

# The label each controller puts on the pods of its object.
POD_LABELS = {
    "Job": "batch.kubernetes.io/job-name",
    "InferenceService": "serving.kserve.io/inferenceservice",
    "TrainJob": "jobset.sigs.k8s.io/jobset-name",  # the TrainJob's JobSet has its name
}


def pod_selector(kind: str, name: str, replica_type: str | None = None, index: int | None = None) -> str:
    parts = [f"{POD_LABELS.get(kind, JOB_NAME_LABEL)}={name.replace('/', '-')}"]
    if replica_type is not None:
        parts.append(f"{REPLICA_TYPE_LABEL}={replica_type.lower()}")
    if index is not None:
        parts.append(f"{REPLICA_INDEX_LABEL}={index}")
    return ",".join(parts)


def selects(selector: str, labels: Mapping[str, str]) -> bool:
    """Whether the equality selector ``selector`` (``a=b,c=d``, as :func:`pod_selector` writes them)
    selects an object with ``labels`` — for objects of a shared watch of the whole namespace."""
    terms = (term.partition("=") for term in selector.split(",") if term)
    return all(labels.get(key) == value for key, _, value in terms)


def sorted_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def when(event: dict[str, Any]) -> str:
        return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")

    return sorted(events, key=when)
