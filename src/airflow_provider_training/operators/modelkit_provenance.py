"""What an Airflow run knows about the ModelKit it made — for the provenance statement and for the
OpenLineage facets: the DAG, run and tasks, the Params and conf, the training job(s) upstream
(kind, name, uid, images, read from their XCom and the API server) and the input Assets with the
events (versions) that triggered the run.

Best effort by design: a fact that cannot be read (a job already deleted, an API server that is
gone) is left out with a log line; signing never fails because provenance is incomplete.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from airflow.sdk.exceptions import TaskNotFound

from airflow_provider_training import xcom
from airflow_provider_training.client.state import job_images
from airflow_provider_training.kitops.provenance import AssetInput, BuildFacts, TrainingJobFacts

log = logging.getLogger(__name__)
JOB_KEYS = xcom.JOB_REF


def upstream_task_ids(task: Any) -> list[str]:
    return sorted(task.get_flat_relative_ids(upstream=True))  # empty for a task outside a DAG


def training_jobs(task: Any, context: Any, task_ids: Iterable[str] | None = None) -> list[TrainingJobFacts]:
    """Training jobs that upstream tasks submitted (they push ``job_kind``/``job_name``/… to XCom)."""
    ti = context["ti"]
    jobs = []
    for tid in task_ids if task_ids is not None else upstream_task_ids(task):
        values = {key: ti.xcom_pull(task_ids=tid, key=key) for key in JOB_KEYS}
        if not values[xcom.JOB_KIND] or not values[xcom.JOB_NAME]:
            continue
        job = TrainingJobFacts(
            kind=str(values[xcom.JOB_KIND]),
            name=str(values[xcom.JOB_NAME]),
            namespace=str(values[xcom.JOB_NAMESPACE] or ""),
            uid=str(values[xcom.JOB_UID] or ""),
            task_id=tid,
        )
        job.images = _job_images(task, context, tid, job)
        jobs.append(job)
    return jobs


def _job_images(task: Any, context: Any, tid: str, job: TrainingJobFacts) -> list[str]:
    dag = context.get("dag") or getattr(task, "dag", None)
    upstream = None
    try:
        upstream = dag.get_task(tid) if dag is not None else None
    except TaskNotFound:
        upstream = None
    spec = getattr(upstream, "job", None)
    if isinstance(spec, dict):
        images = job_images(spec)
        if images:
            return images
    try:  # the job as the API server stored it
        from airflow_provider_training.hooks.training import DEFAULT, TrainingHook

        # The upstream operator's own setting (DEFAULT included: resolved here, as it did when it ran).
        conn = getattr(upstream, "kubernetes_conn_id", DEFAULT)
        obj = TrainingHook(kubernetes_conn_id=conn).get_client().get(job.kind, job.name, job.namespace or "default")
        return job_images(obj.get("spec") or {})
    except Exception as exc:  # provenance is best effort: the connection, starting the embedded plane, the API
        log.info("provenance: could not read the images of %s %s (%s)", job.kind, job.name, exc)
        return []


def _asset_inputs(task: Any, context: Any, task_ids: Iterable[str]) -> list[AssetInput]:
    inputs: dict[str, AssetInput] = {}
    events = context.get("triggering_asset_events") or {}
    try:
        items = list(events.items())
    except Exception:  # the accessor asks Airflow's API server; provenance is best effort
        items = []
    for asset, evs in items:
        uri = str(getattr(asset, "uri", asset))
        for ev in evs or []:
            stamp = getattr(ev, "timestamp", None)
            inputs[uri] = AssetInput(
                uri=uri,
                name=str(getattr(asset, "name", "") or uri),
                version=str(getattr(ev, "id", "") or (stamp.isoformat() if stamp else "")),
                extra=dict(getattr(ev, "extra", None) or {}),
            )
    dag: Any = context.get("dag") or getattr(task, "dag", None)
    tasks = [task]
    for tid in task_ids if dag is not None else ():
        try:
            tasks.append(dag.get_task(tid))
        except TaskNotFound:
            continue
    for t in tasks:
        for inlet in getattr(t, "inlets", None) or []:
            inlet_uri = getattr(inlet, "uri", None)
            if inlet_uri and inlet_uri not in inputs:
                inputs[inlet_uri] = AssetInput(uri=str(inlet_uri), name=str(getattr(inlet, "name", "") or inlet_uri))
    return list(inputs.values())


def _plain(value: Any) -> Any:
    """Params/conf as JSON-safe data (ParamsDict, dates, anything else as text)."""
    import json

    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def build_facts(
    task: Any, context: Any, source: str = "", training_task_ids: Iterable[str] | None = None
) -> BuildFacts:
    ti = context["ti"]
    dag_run = context.get("dag_run")
    params = context.get("params") or {}
    try:
        params = dict(params)
    except (TypeError, ValueError):
        params = {}
    upstream = list(training_task_ids) if training_task_ids is not None else upstream_task_ids(task)
    jobs = training_jobs(task, context, upstream)
    import airflow

    airflow_version = str(airflow.__version__)
    started = getattr(dag_run, "start_date", None)
    return BuildFacts(
        dag_id=str(getattr(ti, "dag_id", "") or getattr(task, "dag_id", "")),
        run_id=str(getattr(ti, "run_id", "")),
        task_ids=[*upstream, task.task_id],
        params=_plain(params),
        conf=_plain(getattr(dag_run, "conf", None) or {}),
        training_jobs=jobs,
        inputs=_asset_inputs(task, context, upstream),
        source=source,
        airflow_version=airflow_version,
        started_on=started.strftime("%Y-%m-%dT%H:%M:%SZ") if started else "",
    )
