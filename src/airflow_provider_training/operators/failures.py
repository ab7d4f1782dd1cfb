"""The failure report a failed job's task raises (pure)."""

from __future__ import annotations

from typing import Any

from airflow_provider_training.client import ReplicaFailure, job_state


def failure_report(
    job: dict[str, Any],
    failures: list[ReplicaFailure],
    tails: dict[str, str],
    events: list[dict[str, Any]],
) -> str:
    """The task's error: the job's condition reason and message, failed replicas with exit codes,
    the last lines of their logs and the warning events."""
    meta = job.get("metadata") or {}
    state = job_state(job)
    lines = [f"{job.get('kind')} {meta.get('namespace')}/{meta.get('name')} failed: {state.reason}: {state.message}"]
    if failures:
        lines.append("Failed replicas: " + ", ".join(f.describe() for f in failures))
    for pod, tail in tails.items():
        text = tail.rstrip("\n")
        if text:
            count = len(text.splitlines())
            lines.append(f"Last {count} log lines of {pod}:")
            lines += [f"  {line}" for line in text.splitlines()]
    warnings = [e for e in events if e.get("type") == "Warning"]
    if warnings:
        lines.append("Warning events:")
        lines += [f"  {e['involvedObject'].get('name')}: {e.get('reason')}: {e.get('message')}" for e in warnings[-10:]]
    return "\n".join(lines)
