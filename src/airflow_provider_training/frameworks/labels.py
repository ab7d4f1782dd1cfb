"""The ``training.kubeflow.org/*`` labels (``common_types.go``; ``training-operator.md`` §2.4)."""

from __future__ import annotations

OPERATOR_NAME = "training.kubeflow.org/operator-name"
JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
JOB_ROLE = "training.kubeflow.org/job-role"


def job_labels(operator_name: str, job_name: str) -> dict[str, str]:
    """``GenLabels``: what every pod and Service of a job carries (and the list selector)."""
    return {OPERATOR_NAME: operator_name, JOB_NAME: job_name.replace("/", "-")}


def replica_labels(operator_name: str, job_name: str, rtype: str, index: int | None) -> dict[str, str]:
    out = job_labels(operator_name, job_name)
    out[REPLICA_TYPE] = rtype.lower()
    if index is not None:
        out[REPLICA_INDEX] = str(index)
    return out


def format_selector(selector: dict[str, str]) -> str:
    """``metav1.FormatLabelSelector`` for match labels: ``k=v`` pairs, keys sorted, comma-joined."""
    return ",".join(f"{k}={selector[k]}" for k in sorted(selector))
