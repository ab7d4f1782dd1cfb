"""What the reconcile steps need to know about an existing pod, read from its Kubernetes JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_training.frameworks import labels

# Upstream's "no terminated state" sentinel (0xbeef), which is >= 128 and so counts as retryable.
NO_EXIT_CODE = 0xBEEF

PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"


@dataclass(frozen=True)
class PodState:
    name: str
    replica_type: str  # the lower-case ``replica-type`` label
    index: int | None  # ``replica-index`` label (MPI's launcher has none)
    phase: str
    deleting: bool = False
    # Terminated exit code of the kind's default container; None while it has not terminated.
    exit_code: int | None = None
    # restartCount summed over init and regular containers (what PastBackoffLimit adds up).
    restart_count: int = 0

    @property
    def exit_code_or_sentinel(self) -> int:
        return NO_EXIT_CODE if self.exit_code is None else self.exit_code

    @classmethod
    def from_pod(cls, pod: dict[str, Any], default_container: str) -> PodState:
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        pod_labels = meta.get("labels") or {}
        raw_index = pod_labels.get(labels.REPLICA_INDEX)
        exit_code: int | None = None
        restarts = 0
        for key in ("initContainerStatuses", "containerStatuses"):
            for cs in status.get(key) or []:
                restarts += int(cs.get("restartCount") or 0)
                terminated = (cs.get("state") or {}).get("terminated")
                if key == "containerStatuses" and cs.get("name") == default_container and terminated:
                    exit_code = int(terminated.get("exitCode", 0))
        return cls(
            name=str(meta.get("name", "")),
            replica_type=str(pod_labels.get(labels.REPLICA_TYPE, "")),
            index=int(raw_index) if raw_index is not None and str(raw_index).isdigit() else None,
            phase=str(status.get("phase") or PENDING),
            deleting=meta.get("deletionTimestamp") is not None,
            exit_code=exit_code,
            restart_count=restarts,
        )


def of_type(pods: list[PodState], rtype: str) -> list[PodState]:
    return [p for p in pods if p.replica_type == rtype.lower()]
