"""Which task a job belongs to, and what to do when its name is taken (pure policy)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_training.client import job_state
from airflow_provider_training.specs.actions import IfJobExists
from airflow_provider_training.specs.actions import JobDecision as Action

PREFIX = "airflow-training"
DAG_ID = f"{PREFIX}/dag-id"
TASK_ID = f"{PREFIX}/task-id"
RUN_ID = f"{PREFIX}/run-id"
MAP_INDEX = f"{PREFIX}/map-index"
TRY_NUMBER = f"{PREFIX}/try-number"
IDENTITY = (DAG_ID, TASK_ID, RUN_ID, MAP_INDEX)  # try_number is left out: retries share the identity
MAX_NAME = 48  # pods are named {job}-{replica type}-{index}; keep room under the 63-character limit

POLICIES = tuple(IfJobExists)  # str-valued: the strings users write are members


def safe_label_value(value: str) -> str:
    """A valid label value: cncf.kubernetes' rule (strip invalid characters, hash when changed)."""
    safe = re.sub(r"^[^a-z0-9A-Z]*|[^a-zA-Z0-9_\-\.]|[^a-z0-9A-Z]*$", "", value)
    if len(safe) > 63 or safe != value:
        digest = hashlib.md5(value.encode()).hexdigest()[:9]
        safe = safe[: 63 - len(digest) - 1] + "-" + digest
    return safe


def identity_labels(dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int) -> dict[str, str]:
    labels = {
        DAG_ID: safe_label_value(dag_id),
        TASK_ID: safe_label_value(task_id),
        RUN_ID: safe_label_value(run_id),
        TRY_NUMBER: str(try_number),
    }
    if map_index >= 0:  # as in KubernetesPodOperator: unmapped tasks carry no map-index label
        labels[MAP_INDEX] = str(map_index)
    return labels


def selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={labels[key]}" if key in labels else f"!{key}" for key in IDENTITY)


def same_identity(job: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    mine = (job.get("metadata") or {}).get("labels") or {}
    return all(mine.get(key) == labels.get(key) for key in IDENTITY)


def dns_name(text: str, limit: int = MAX_NAME) -> str:
    """A DNS-1123 label made from ``text`` (task ids have underscores and capitals)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "job"
    if len(name) > limit:
        digest = hashlib.sha1(text.encode()).hexdigest()[:6]
        name = name[: limit - 7].rstrip("-") + "-" + digest
    return name


def default_name(task_id: str, run_id: str, map_index: int) -> str:
    """``<task>-<hash of run and map index>``: stable across retries of one run, unique across runs."""
    digest = hashlib.sha1(f"{run_id}/{map_index}".encode()).hexdigest()[:8]
    return f"{dns_name(task_id, MAX_NAME - 9)}-{digest}"


def retry_name(base: str, try_number: int, attempt: int = 0) -> str:
    suffix = f"-r{try_number}" + (f"-{attempt}" if attempt else "")
    return dns_name(base, MAX_NAME - len(suffix)) + suffix


@dataclass(frozen=True)
class Decision:
    """``action``: :class:`~airflow_provider_training.specs.actions.JobDecision` (``create`` when the name
    is free, ``reattach``, ``rename``, ``replace``: delete, then create, or ``fail``); ``why`` is logged
    / raised."""

    action: Action
    why: str


def on_existing(existing: Mapping[str, Any] | None, labels: Mapping[str, str], policy: str) -> Decision:
    """What to do when the job's name is taken by ``existing``.

    A *running* job of this very task (same dag, task, run, map index) is always reattached — that is
    a retry after a worker crash, and a second submission would duplicate the training. Otherwise:
    ``reattach`` (default) keeps a finished job of this task as history and renames the retry, and
    refuses to touch someone else's job; ``rename`` renames in both cases; ``replace`` deletes the
    existing job first; ``fail`` fails.
    """
    if policy not in POLICIES:
        raise ValueError(f"if_job_exists must be one of {', '.join(POLICIES)} (got {policy!r})")
    if existing is None:
        return Decision(Action.CREATE, "the name is free")
    meta = existing.get("metadata") or {}
    what = f"{existing.get('kind')} {meta.get('namespace')}/{meta.get('name')}"
    mine = same_identity(existing, labels)
    state = job_state(dict(existing))
    if mine and not state.finished:
        return Decision(
            Action.REATTACH, f"{what} of this task is still {state.phase}: reattaching instead of submitting again"
        )
    if policy == IfJobExists.FAIL:
        return Decision(
            Action.FAIL, f"{what} already exists ({'this task' if mine else 'not this task'}'s, {state.phase})"
        )
    if policy == IfJobExists.REPLACE:
        return Decision(Action.REPLACE, f"{what} exists ({state.phase}); deleting it as if_job_exists='replace' asks")
    if mine or policy == IfJobExists.RENAME:
        return Decision(Action.RENAME, f"{what} exists ({state.phase}); kept, submitting under a new name")
    return Decision(
        Action.FAIL,
        f"{what} exists and belongs to another task or was created outside Airflow; template the name "
        "(e.g. name=\"{{ run_name('train') }}\" with naming.MACROS) or pass if_job_exists='rename' or 'replace'",
    )
