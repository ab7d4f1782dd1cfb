"""Reading a Kubernetes watch stream: events, bookmarks and the ``410 Gone`` that means "list again".

Hand-written instead of ``kubernetes.watch.Watch`` because the waiters need the resourceVersion of
every bookmark and an explicit signal for 410, :class:`errors.Gone` (``Watch`` retries a 410 with the
same, still expired, resourceVersion once and then raises a generic ``ApiException``), and because
the sync and async clients must read streams the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from airflow_provider_training.client.errors import Gone, Transient


class WatchError(Transient):
    """The server ended the watch with an error other than 410 (retried like a dropped connection)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, f"watch failed with {code}: {message}")
        self.code = code


@dataclass
class Cursor:
    """Where a watch continues from; bookmarks move it without delivering an object."""

    resource_version: str


def parse_event(line: str | bytes, cursor: Cursor) -> tuple[str, dict[str, Any]] | None:
    """One line of a watch stream; ``None`` for blank lines and bookmarks (which advance ``cursor``)."""
    if not line or not line.strip():
        return None
    event = json.loads(line)
    kind = event.get("type")
    obj = event.get("object") or {}
    if kind == "ERROR":
        code = int(obj.get("code") or 0)
        if code == 410:
            raise Gone(str(obj.get("message", "resourceVersion too old")))
        raise WatchError(code, str(obj.get("message", "")))
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    if rv:
        cursor.resource_version = str(rv)
    if kind == "BOOKMARK":
        return None
    return str(kind), obj
