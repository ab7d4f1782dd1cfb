"""What a task recorded about the job or ModelKit it made: its XComs (and rendered fields), read
from Airflow's metadata database on the API server.

Training operators push ``job_name``, ``job_namespace``, ``job_uid``, ``job_kind`` and
``job_conn_id`` (the ``kubernetes`` connection; empty for the embedded control plane) before they
wait; ModelKit operators push ``reference``, ``digest`` and ``size`` and render
``registry_conn_id``. Tasks run before ``job_conn_id`` existed fall back to ``[training]
kubernetes_conn_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_provider_training import xcom
from airflow_provider_training.links.modelkit import ModelKitRegistryLink
from airflow_provider_training.links.training import TrainingJobLink
from airflow_provider_training.specs.refs import ObjectRef

JOB_KEYS = (*xcom.JOB_REF, xcom.JOB_CONN_ID)
MODELKIT_KEYS = xcom.MODELKIT
# The extra links of the training and of the ModelKit operators: how a tab tells which task may
# still make its object.
JOB_LINK, MODELKIT_LINK = TrainingJobLink.name, ModelKitRegistryLink.name
# A task instance in one of these states will not push anything any more (Airflow's State.finished).
FINISHED = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


@dataclass(frozen=True)
class TaskKey:
    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1


@dataclass(frozen=True)
class JobRef(ObjectRef):
    """The job (an :class:`ObjectRef`) and the connection that reaches its cluster."""

    conn_id: str | None = None  # None: the embedded control plane


@dataclass(frozen=True)
class ModelKitRef:
    reference: str
    digest: str
    size: int | None
    registry_conn_id: str | None


@dataclass(frozen=True)
class TaskSummary:
    """The task instance as far as a tab needs it: may it still make a job or a ModelKit?"""

    state: str | None  # None: not scheduled yet
    operator: str
    links: frozenset[str]  # the names of its operator's extra links ("Training job", "ModelKit")

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


def task_summary(session: Session, key: TaskKey, dag_bag: Any) -> TaskSummary | None:
    """``None`` when there is no such task instance. The extra links tell a training task (its operator
    has the "Training job" link) or a ModelKit task from any other, whatever the operator's class is
    called; they come from the serialized DAG, so nothing of the DAG's code is imported here."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance

    ti = session.execute(
        select(TaskInstance.state, TaskInstance.operator, TaskInstance.custom_operator_name).where(
            TaskInstance.dag_id == key.dag_id,
            TaskInstance.run_id == key.run_id,
            TaskInstance.task_id == key.task_id,
            TaskInstance.map_index == key.map_index,
        )
    ).first()
    if ti is None:
        return None
    links: frozenset[str] = frozenset()
    run = session.scalar(select(DagRun).where(DagRun.dag_id == key.dag_id, DagRun.run_id == key.run_id))
    dag = dag_bag.get_dag_for_run(run, session=session) if run is not None else None
    if dag is not None and dag.has_task(key.task_id):
        links = frozenset(dag.get_task(key.task_id).extra_links)
    return TaskSummary(
        state=str(ti.state) if ti.state is not None else None,
        operator=str(ti.custom_operator_name or ti.operator or ""),
        links=links,
    )


def missing(summary: TaskSummary | None, key: TaskKey, what: str) -> dict[str, Any]:
    """Why a task has no job (``what="job"``) or ModelKit (``"modelkit"``), and whether it may still
    make one (``waiting``): a training task that has not finished has simply not submitted it yet."""
    link, noun = (JOB_LINK, "a training job") if what == "job" else (MODELKIT_LINK, "a ModelKit")
    made = "submitted" if what == "job" else "pushed"
    task = f"task {key.task_id}{f'[{key.map_index}]' if key.map_index >= 0 else ''} of run {key.run_id}"
    if summary is None:
        return {"detail": f"{task} does not exist", "waiting": False, "state": None}
    if link not in summary.links:
        kind = "training" if what == "job" else "ModelKit"
        return {
            "detail": f"{task} has not {made} {noun}: it is not a {kind} task ({summary.operator or 'no operator'})",
            "waiting": False,
            "state": summary.state,
        }
    if summary.finished:
        return {
            "detail": f"{task} finished ({summary.state}) without having {made} {noun}",
            "waiting": False,
            "state": summary.state,
        }
    return {
        "detail": f"{task} has not {made} {noun} yet (the task is {summary.state or 'not scheduled yet'})",
        "waiting": True,
        "state": summary.state,
    }


def xcoms(session: Session, key: TaskKey, keys: tuple[str, ...]) -> dict[str, Any]:
    from airflow.models.xcom import XComModel

    rows = session.execute(
        select(XComModel.key, XComModel.value).where(
            XComModel.dag_id == key.dag_id,
            XComModel.run_id == key.run_id,
            XComModel.task_id == key.task_id,
            XComModel.map_index == key.map_index,
            XComModel.key.in_(keys),
        )
    ).all()
    return {row.key: XComModel.deserialize_value(row) for row in rows}


def _default_conn_id() -> str | None:
    from airflow_provider_training.hooks.training import DEFAULT, resolve_conn_id  # the hooks' reading of it

    return resolve_conn_id(DEFAULT)


def job_ref(session: Session, key: TaskKey) -> JobRef | None:
    """The job this task submitted, or ``None`` when it submitted none (yet)."""
    values = xcoms(session, key, JOB_KEYS)
    if not values.get(xcom.JOB_NAME) or not values.get(xcom.JOB_KIND):
        return None
    conn_id = (values[xcom.JOB_CONN_ID] or None) if xcom.JOB_CONN_ID in values else _default_conn_id()
    return JobRef(
        kind=str(values[xcom.JOB_KIND]),
        name=str(values[xcom.JOB_NAME]),
        namespace=str(values.get(xcom.JOB_NAMESPACE) or "default"),
        uid=str(values[xcom.JOB_UID]) if values.get(xcom.JOB_UID) else None,
        conn_id=conn_id,
    )


def modelkit_ref(session: Session, key: TaskKey) -> ModelKitRef | None:
    values = xcoms(session, key, MODELKIT_KEYS)
    if not values.get(xcom.REFERENCE):
        return None
    rendered = rendered_fields(session, key)
    conn = rendered.get("registry_conn_id")
    size = values.get(xcom.SIZE)
    return ModelKitRef(
        reference=str(values[xcom.REFERENCE]),
        digest=str(values.get(xcom.DIGEST) or ""),
        size=int(size) if isinstance(size, (int, float)) else None,
        registry_conn_id=str(conn) if conn else None,
    )


def rendered_fields(session: Session, key: TaskKey) -> dict[str, Any]:
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF

    row = session.scalar(
        select(RTIF).where(
            RTIF.dag_id == key.dag_id,
            RTIF.run_id == key.run_id,
            RTIF.task_id == key.task_id,
            RTIF.map_index == key.map_index,
        )
    )
    fields = row.rendered_fields if row is not None else None
    return dict(fields) if isinstance(fields, dict) else {}


def recent_jobs(session: Session, dag_id: str, limit: int) -> list[tuple[Any, str, JobRef]]:
    """``(dag run, task_id, job)`` for the training tasks of the DAG's last ``limit`` runs, newest first."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel

    runs = session.scalars(
        select(DagRun).where(DagRun.dag_id == dag_id).order_by(DagRun.run_after.desc()).limit(limit)
    ).all()
    found: list[tuple[Any, str, JobRef]] = []
    for run in runs:
        tasks = session.execute(
            select(XComModel.task_id, XComModel.map_index)
            .where(XComModel.dag_id == dag_id, XComModel.run_id == run.run_id, XComModel.key == "job_name")
            .order_by(XComModel.task_id)
        ).all()
        for task_id, map_index in tasks:
            ref = job_ref(session, TaskKey(dag_id, run.run_id, task_id, map_index))
            if ref is not None:
                found.append((run, task_id, ref))
    return found
