"""Names and tags for one DAG run, from what every run has — its run id and ``run_after`` — never
from the logical date, which Airflow 3 leaves empty for runs triggered from the CLI, the REST API,
the UI form or an Asset event (``ts_nodash`` / ``ds_nodash`` are then undefined).

``run_key`` is ``<run_after as YYYYMMDDtHHMMSS>-<6 hex of sha1(dag_id/run_id)>``: readable, sorted
by time, and different for two runs of the same day or even the same second. From it:

- ``run_name(prefix)`` — a Kubernetes name: DNS-1035 (starts with a letter; ``a-z0-9-``), at most
  :data:`identity.MAX_NAME` characters so that ``<name>-<replica type>-<index>`` pod names stay
  within 63, a retry's ``-r<try>`` included;
- ``run_tag(prefix="")`` — an OCI tag (``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}``) and a folder name.

In templates (after ``DAG(..., user_defined_macros=naming.MACROS)``)::

    "metadata": {"name": "{{ run_name('digits') }}"}
    reference="registry/ns/repo:{{ run_tag() }}"
    source="pvc://claim/{{ run_tag('retrain') }}"

In Python (a ``@task``): ``names_for(context)`` or ``run_name_for(prefix, dag_id, run_id, run_after)``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from jinja2 import pass_context

from airflow_provider_training.operators.identity import MAX_NAME

TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
HASH_CHARS = 6


class MissingRunValue(ValueError):
    """A value a name is made of is missing; the message says which and how to pass it."""


def run_key(dag_id: str, run_id: str, run_after: datetime | str | None) -> str:
    """``20261130t234512-a1b2c3``: the run's ``run_after`` (UTC) and a hash of ``dag_id/run_id``."""
    if not run_id:
        raise MissingRunValue(
            "the run has no run_id, so no job name or tag can be made for it; trigger the DAG through "
            "Airflow (UI, `airflow dags trigger`, REST API) or pass run_id to dag.test()"
        )
    digest = hashlib.sha1(f"{dag_id}/{run_id}".encode()).hexdigest()[:HASH_CHARS]
    stamp = _stamp(run_after)
    return f"{stamp}-{digest}" if stamp else digest


def _stamp(run_after: datetime | str | None) -> str:
    if run_after is None:
        return ""
    if isinstance(run_after, str):
        try:
            run_after = datetime.fromisoformat(run_after)
        except ValueError:
            return ""
    if run_after.tzinfo is not None:
        run_after = run_after.astimezone(timezone.utc)
    return run_after.strftime("%Y%m%dt%H%M%S")


def run_name_for(prefix: str, dag_id: str, run_id: str, run_after: datetime | str | None, limit: int = MAX_NAME) -> str:
    """``<prefix>-<run key>`` as a DNS-1035 name of at most ``limit`` characters (the prefix is cut)."""
    key = run_key(dag_id, run_id, run_after)
    head = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")
    head = re.sub(r"^[^a-z]+", "", head)  # DNS-1035: the first character is a letter
    room = limit - len(key) - 1
    head = head[:room].rstrip("-") if room > 0 else ""
    name = f"{head}-{key}" if head else f"r{key}"[:limit]
    return name


def run_tag_for(prefix: str, dag_id: str, run_id: str, run_after: datetime | str | None) -> str:
    """``[<prefix>-]<run key>``: a valid OCI tag (and folder name)."""
    key = run_key(dag_id, run_id, run_after)
    head = re.sub(r"[^A-Za-z0-9_.-]+", "-", prefix).strip("-.")
    tag = f"{head}-{key}" if head else key
    return tag[-128:] if len(tag) > 128 else tag


def _run_of(context: Mapping[str, Any]) -> tuple[str, str, Any]:
    dag_run = context.get("dag_run")
    run_id = context.get("run_id") or getattr(dag_run, "run_id", None) or ""
    dag = context.get("dag")
    dag_id = getattr(dag, "dag_id", None) or getattr(dag_run, "dag_id", None) or ""
    run_after = getattr(dag_run, "run_after", None) or context.get("logical_date")
    return str(dag_id), str(run_id), run_after


def names_for(context: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """``{"name": …, "tag": …}`` for the run of a task's ``context`` (what a ``@task`` receives)."""
    dag_id, run_id, run_after = _run_of(context)
    return {
        "name": run_name_for(prefix, dag_id, run_id, run_after),
        "tag": run_tag_for(prefix, dag_id, run_id, run_after),
    }


@pass_context
def run_name(context: Any, prefix: str, limit: int = MAX_NAME) -> str:
    """Jinja macro: the run's Kubernetes name with ``prefix`` (see the module docstring)."""
    return run_name_for(prefix, *_run_of(context), limit=limit)


@pass_context
def run_tag(context: Any, prefix: str = "") -> str:
    """Jinja macro: the run's OCI tag / folder name, optionally with ``prefix``."""
    return run_tag_for(prefix, *_run_of(context))


MACROS: dict[str, Any] = {"run_name": run_name, "run_tag": run_tag}


def require_param(params: Mapping[str, Any] | None, name: str, dag_id: str, example: Any) -> Any:
    """``params[name]``, or a sentence naming the param and how to pass it (instead of a bare assert)."""
    value = (params or {}).get(name)
    if value is None or value == "":
        import json

        raise MissingRunValue(
            f"param {name!r} is missing for this run of {dag_id}: fill it in the trigger form, or pass it as "
            f"`airflow dags trigger {dag_id} --conf '{json.dumps({name: example})}'` "
            f'(REST: POST /api/v2/dags/{dag_id}/dagRuns with {{"logical_date": null, "conf": {json.dumps({name: example})}}})'
        )
    return value
