"""Kubeflow Trainer v2's progress report — ``status.trainerStatus``, which the training code writes
through Trainer's status server (the Kubeflow SDK's ``update_trainjob_status``) — as one log line,
for the operator's task log (sync) and the trigger's (deferred)."""

from __future__ import annotations

from typing import Any


def progress_line(trainer_status: dict[str, Any]) -> str:
    """``42%; about 30 s left; loss=0.5``."""
    parts = []
    if trainer_status.get("progressPercentage") is not None:
        parts.append(f"{trainer_status['progressPercentage']}%")
    if trainer_status.get("estimatedRemainingSeconds") is not None:
        parts.append(f"about {trainer_status['estimatedRemainingSeconds']} s left")
    metrics = ", ".join(f"{m.get('name')}={m.get('value')}" for m in trainer_status.get("metrics") or [])
    if metrics:
        parts.append(metrics)
    return "; ".join(parts) or "(no progress reported)"


class ProgressReports:
    """The line to log for each new version of a TrainJob: only when its progress report changed."""

    def __init__(self) -> None:
        self.last: str | None = None

    def changed(self, obj: dict[str, Any]) -> str | None:
        """``TrainJob NS/NAME progress: …`` when ``obj``'s trainerStatus differs from the last one seen."""
        trainer_status = (obj.get("status") or {}).get("trainerStatus")
        if not isinstance(trainer_status, dict):
            return None
        line = progress_line(trainer_status)
        if line == self.last:
            return None
        self.last = line
        meta = obj.get("metadata") or {}
        return f"TrainJob {meta.get('namespace')}/{meta.get('name')} progress: {line}"


__all__ = ["ProgressReports", "progress_line"]
