"""Events the reconcile steps ask the controller to record (``kubectl describe`` shows them)."""

from __future__ import annotations

from dataclasses import dataclass

NORMAL = "Normal"
WARNING = "Warning"


@dataclass(frozen=True)
class Event:
    type: str  # Normal / Warning
    reason: str
    message: str
    # Object the event is about when it is not the job (``Pod/<name>``); None = the job.
    involved: str | None = None
