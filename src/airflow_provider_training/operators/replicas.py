"""Which replicas' logs to show, and the failure report a failed job's task raises (pure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from airflow_provider_training.client import ReplicaFailure, job_state
from airflow_provider_training.client.state import is_master_role, replica_of
from airflow_provider_training.specs.kinds import KINDS

PodFilter = Callable[[dict[str, Any]], bool]
MASTER_TYPES = ("master", "chief", "launcher")


def replica_filter(log_replicas: str | Sequence[str], job: dict[str, Any]) -> PodFilter | None:
    """``"master"`` (the master-role replica: Master / Chief / Launcher, else worker 0), ``"all"``,
    ``"none"``, or replica names such as ``["master", "worker-1"]``. ``None`` means no logs."""
    if isinstance(log_replicas, str):
        choice = log_replicas.lower()
        if choice == "none":
            return None
        if choice == "all":
            return lambda pod: True
        if choice != "master":
            return replica_filter([log_replicas], job)
        info = KINDS.get(str(job.get("kind")))
        types = {t.lower() for t in ((job.get("spec") or {}).get(info.replica_specs_field) or {})} if info else set()
        has_master = bool(types & set(MASTER_TYPES))

        def master(pod: dict[str, Any]) -> bool:
            if is_master_role(pod):
                return True
            if str(job.get("kind")) == "Job":
                return True
            rtype, index = replica_of(pod)
            return not has_master and rtype == "worker" and index == 0

        return master
    wanted = {str(item).lower() for item in log_replicas}

    def chosen(pod: dict[str, Any]) -> bool:
        rtype, index = replica_of(pod)
        return rtype in wanted or f"{rtype}-{index}" in wanted

    return chosen


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
