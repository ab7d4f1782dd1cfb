"""Kubernetes ``metav1.Time`` on the wire: RFC 3339, UTC, whole seconds."""

from __future__ import annotations

from datetime import UTC, datetime


def format_time(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (use datetime.now(UTC))")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
