"""Which pods' logs a task shows (pure): the v1 operators' ``log_replicas`` (replica names) and
Trainer v2's steps (the Kubeflow SDK's names). Here, below the operators, because the trigger that
ends a task from the triggerer prints the same replicas' logs the resumed task would have."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from airflow_provider_training.client.state import is_master_role, replica_of
from airflow_provider_training.specs.kinds import KINDS
from airflow_provider_training.specs.trainer import constants as c

MASTER_TYPES = ("master", "chief", "launcher")
RESUME_LOG_LINES = 10_000  # what a task prints of each selected replica when the job has finished
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"

PodFilter = Callable[[dict[str, Any]], bool]
LogChoice = str | Sequence[str]


def replica_filter(log_replicas: LogChoice, job: dict[str, Any]) -> PodFilter | None:
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


def step_of(pod: dict[str, Any]) -> str:
    """The SDK's step name of a TrainJob pod: ``node-<index>`` for the ``node`` job, else the job's name."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    job = str(labels.get(REPLICATED_JOB_LABEL, ""))
    return f"{job}-{labels.get(COMPLETION_INDEX_LABEL, '0')}" if job == c.NODE else job


def step_filter(log_steps: LogChoice) -> PodFilter | None:
    """``"node-0"``, ``"all"``, ``"none"`` or a list of step names → a pod predicate (None: no logs)."""
    if isinstance(log_steps, str):
        if log_steps.lower() == "none":
            return None
        if log_steps.lower() == "all":
            return lambda pod: True
        log_steps = [log_steps]
    wanted = set(log_steps)
    return lambda pod: step_of(pod) in wanted


def log_filter(choice: LogChoice, job: dict[str, Any]) -> PodFilter | None:
    """The pods of ``job`` whose logs ``choice`` selects: steps for a TrainJob, replicas otherwise."""
    return step_filter(choice) if job.get("kind") == c.TRAINJOB else replica_filter(choice, job)


def default_container(kind: str) -> str | None:
    """The container whose log is the replica's (``pytorch``, ``tensorflow`` …; None: the pod's first)."""
    return KINDS[kind].default_container if kind in KINDS else None


def prefixed(logs: Sequence[tuple[str, str]]) -> Iterator[str]:
    """``(pod, text)`` pairs (``replica_logs``) as the task log shows them: ``[pod] line``."""
    for pod, text in logs:
        for line in text.splitlines():
            yield f"[{pod}] {line}"
