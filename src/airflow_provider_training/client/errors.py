"""Errors the client raises while waiting, each saying what happened to the job."""

from __future__ import annotations


class TrainingJobError(RuntimeError):
    """Base class of the client's errors."""


class JobNotFound(TrainingJobError):
    def __init__(self, kind: str, namespace: str, name: str) -> None:
        super().__init__(f"{kind} {namespace}/{name} does not exist")
        self.kind, self.namespace, self.name = kind, namespace, name


class JobDeleted(TrainingJobError):
    """The job was deleted (or replaced by another object of the same name) while being waited for."""

    def __init__(self, kind: str, namespace: str, name: str, detail: str = "was deleted while waiting for it") -> None:
        super().__init__(f"{kind} {namespace}/{name} {detail}")
        self.kind, self.namespace, self.name = kind, namespace, name


class WaitTimeout(TrainingJobError):
    def __init__(self, kind: str, namespace: str, name: str, timeout: float, last: dict | None) -> None:
        super().__init__(f"{kind} {namespace}/{name} did not finish within {timeout:g}s")
        self.kind, self.namespace, self.name, self.timeout = kind, namespace, name, timeout
        self.last = last


#: API answers worth retrying: connection failure (0), throttling, server errors.
RETRYABLE_STATUS = (0, 429, 500, 502, 503, 504)
