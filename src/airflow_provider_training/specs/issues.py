"""Findings about a job document, each tied to its Kubernetes field path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: ``cluster``: a real cluster (API server, webhook, controller validation) rejects it.
#: ``provider``: a cluster accepts it but it can never run (pods cannot be created…), the
#: provider's own check. ``lint``: probably a mistake; a warning only.
Level = Literal["cluster", "provider", "lint"]


@dataclass(frozen=True)
class Issue:
    path: str
    message: str
    level: Level = "cluster"
    rule: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def join(path: str, field: str) -> str:
    return f"{path}.{field}" if path else field


def index(path: str, key: int | str) -> str:
    return f"{path}[{key}]"
