"""The cockpit's FastAPI app, mounted by Airflow's API server at ``/training``.

Every ``/api`` route needs an authenticated Airflow user who may read the DAG's task instances
(Airflow's own ``requires_access_dag``: anonymous → 401, no access to the DAG → 403). Routes are
read-only and answer with the fields of ``views``; the cluster is reached with the task's own
connection, so no token, CA or Secret ever reaches the browser. ``/static`` serves the bundled view.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.dagbag import create_dag_bag
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from kubernetes_asyncio.client.exceptions import ApiException

from airflow_provider_training.client import AsyncTrainingJobClient
from airflow_provider_training.client.errors import ApiError, BadRequest
from airflow_provider_training.client.selection import pod_selector, selects
from airflow_provider_training.client.state import job_state, replica_of_job
from airflow_provider_training.ui import metrics, modelkit, task, views, watches
from airflow_provider_training.ui.cluster import ClusterUnavailable, hook, open_client

STATIC = Path(__file__).parent / "static"
WATCH_SECONDS = 240.0  # one renewal per watch every 4 minutes while a job is idle
HEARTBEAT_SECONDS = 15.0
COALESCE_SECONDS = 0.05
MAX_EVENTS = 500
LOG_TAIL = 200
LOG_WINDOW = 100_000  # the last lines of a container a log pane can page through (kubectl logs has all)
METRIC_LOG_LINES = 100_000
WAIT_SECONDS = 1.0  # while a training task has not submitted its job yet, look for it this often

TI = "/api/dags/{dag_id}/runs/{run_id}/tasks/{task_id}"
CanRead = Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.TASK_INSTANCE))
# Serialized DAGs, for the operators' extra links. The API server's own bag is in the state of its
# app, not of this mounted one; this one caches the same way (LRU + TTL of [api] dag_cache_*).
DAG_BAG = create_dag_bag()

app = FastAPI(
    title="Training cockpit",
    description="Read-only views of the training jobs and ModelKits that Airflow tasks made.",
    docs_url=None,
    redoc_url=None,
)


@app.exception_handler(ClusterUnavailable)
async def _unavailable(request: Request, exc: ClusterUnavailable) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=503)


def _cluster_error(exc: ApiException) -> str:
    # The status and reason only: the body may echo request details, never credentials, but keep it short.
    if not exc.status:  # the typed client's Transient for a refused or dropped connection
        return f"the cluster did not answer: {exc.reason or 'no connection'}"
    return f"the cluster answered {exc.status} {exc.reason or ''}".strip()


class Missing(Exception):
    """No job (or ModelKit) for the task: 404 with why, and whether it may still come (``waiting``)."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(answer["detail"])
        self.answer = answer


@app.exception_handler(Missing)
async def _missing(request: Request, exc: Missing) -> JSONResponse:
    return JSONResponse(exc.answer, status_code=404)


@app.exception_handler(ApiException)
async def _api_error(request: Request, exc: ApiException) -> JSONResponse:
    return JSONResponse({"detail": _cluster_error(exc)}, status_code=502)


def _task_key(dag_id: str, run_id: str, task_id: str, map_index: int) -> task.TaskKey:
    return task.TaskKey(dag_id, run_id, task_id, map_index)


def _look_up_job(session: Any, key: task.TaskKey) -> task.JobRef | dict[str, Any]:
    """The job the task submitted, or why there is none (``task.missing``)."""
    ref = task.job_ref(session, key)
    return ref if ref is not None else task.missing(task.task_summary(session, key, DAG_BAG), key, "job")


def job_or_missing(
    dag_id: str, run_id: str, task_id: str, session: SessionDep, map_index: Annotated[int, Query()] = -1
) -> task.JobRef | dict[str, Any]:
    return _look_up_job(session, _task_key(dag_id, run_id, task_id, map_index))


def job_ref(found: Annotated[task.JobRef | dict[str, Any], Depends(job_or_missing)]) -> task.JobRef:
    if isinstance(found, task.JobRef):
        return found
    raise Missing(found)


def modelkit_ref(
    dag_id: str, run_id: str, task_id: str, session: SessionDep, map_index: Annotated[int, Query()] = -1
) -> task.ModelKitRef:
    key = _task_key(dag_id, run_id, task_id, map_index)
    ref = task.modelkit_ref(session, key)
    if ref is None:
        raise Missing(task.missing(task.task_summary(session, key, DAG_BAG), key, "modelkit"))
    return ref


JobRefDep = Annotated[task.JobRef, Depends(job_ref)]


async def _job(client: AsyncTrainingJobClient, ref: task.JobRef) -> dict[str, Any]:
    found = await client.find(ref.kind, ref.name, ref.namespace)
    if found is None or (ref.uid and (found.get("metadata") or {}).get("uid") != ref.uid):
        raise HTTPException(404, f"{ref.kind} {ref.namespace}/{ref.name} no longer exists (deleted after it finished?)")
    found.setdefault("kind", ref.kind)
    return found


async def _snapshot(client: AsyncTrainingJobClient, ref: task.JobRef) -> dict[str, Any]:
    job = await _job(client, ref)
    pods, events = await asyncio.gather(
        client.pods(ref.kind, ref.name, ref.namespace, uid=ref.uid),
        client.events(ref.kind, ref.name, ref.namespace, uid=ref.uid),
    )
    return {
        "job": views.job_view(job),
        "replicas": views.replicas_view(pods, ref.kind),
        "events": [views.event_view(e) for e in events][-MAX_EVENTS:],
    }


@app.get(TI + "/job", dependencies=[CanRead])
async def get_job(ref: JobRefDep) -> dict[str, Any]:
    """The job (header, spec summary, conditions), its replicas and the events of the job and its pods."""
    async with open_client(ref.conn_id) as client:
        return await _snapshot(client, ref)


@app.get(TI + "/job/replicas", dependencies=[CanRead])
async def get_replicas(ref: JobRefDep) -> list[dict[str, Any]]:
    async with open_client(ref.conn_id) as client:
        return views.replicas_view(await client.pods(ref.kind, ref.name, ref.namespace, uid=ref.uid), ref.kind)


@app.get(TI + "/job/events", dependencies=[CanRead])
async def get_events(ref: JobRefDep) -> list[dict[str, Any]]:
    async with open_client(ref.conn_id) as client:
        events = await client.events(ref.kind, ref.name, ref.namespace, uid=ref.uid)
    return [views.event_view(e) for e in events][-MAX_EVENTS:]


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


class _State:
    """The job, pods and events as the watches last reported them."""

    def __init__(self, ref: task.JobRef) -> None:
        self.ref = ref
        self.job: dict[str, Any] | None = None
        self.pods: dict[str, dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.selector = pod_selector(ref.kind, ref.name)

    def apply(self, source: str, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if source == "job":
            if kind == "DELETED":
                self.job = None
            elif not self.ref.uid or meta.get("uid") == self.ref.uid:
                obj.setdefault("kind", self.ref.kind)
                self.job = obj
        elif source == "pod":
            if kind == "DELETED":
                self.pods.pop(str(meta.get("name")), None)
            elif self._mine(obj):
                self.pods[str(meta.get("name"))] = obj
        elif source == "event":
            if kind == "DELETED":
                self.events.pop(str(meta.get("uid") or meta.get("name")), None)
            else:
                self.events[str(meta.get("uid") or meta.get("name"))] = obj
                if len(self.events) > 4 * MAX_EVENTS:
                    oldest = sorted(self.events, key=lambda k: views.event_view(self.events[k])["last"])
                    for key in oldest[: len(self.events) - 2 * MAX_EVENTS]:
                        del self.events[key]

    def _mine(self, pod: dict[str, Any]) -> bool:
        """A pod of the namespace's shared watch is a replica of this job as ``client.pods()`` decides
        it: its label selector, then the owner."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return selects(self.selector, labels) and replica_of_job(pod, self.ref.kind, self.ref.uid)

    def snapshot(self) -> dict[str, Any]:
        names = set(self.pods)
        mine = [
            views.event_view(e)
            for e in self.events.values()
            if (
                (e.get("involvedObject") or {}).get("kind") == self.ref.kind
                and (e.get("involvedObject") or {}).get("name") == self.ref.name
            )
            or (
                (e.get("involvedObject") or {}).get("kind") == "Pod"
                and (e.get("involvedObject") or {}).get("name") in names
            )
        ]
        mine.sort(key=lambda e: str(e["last"]))
        return {
            "job": views.job_view(self.job) if self.job else None,
            "replicas": views.replicas_view(list(self.pods.values()), self.ref.kind),
            "events": mine[-MAX_EVENTS:],
        }

    def settled(self) -> bool:
        """The job finished and no replica still runs: nothing will change any more."""
        if self.job is None or not job_state(self.job).finished:
            return False
        return all((p.get("status") or {}).get("phase") not in ("Pending", "Running") for p in self.pods.values())


async def _job_stream(ref: task.JobRef, request: Request) -> AsyncIterator[str]:
    """The job's snapshots from the process's shared watches (``watches.job_watches``); while the
    tab is open it holds no connection of its own."""
    try:
        state = _State(ref)
        async with open_client(ref.conn_id) as client:
            state.job = await _job(client, ref)
        loop = asyncio.get_running_loop()
        async with watches.job_watches(hook(ref.conn_id), ref.kind, ref.name, ref.namespace, WATCH_SECONDS) as feed:
            while True:
                try:
                    state.apply(*await asyncio.wait_for(feed.get(), HEARTBEAT_SECONDS))
                except asyncio.TimeoutError:
                    yield ": ping\n\n"
                    continue
                deadline = loop.time() + COALESCE_SECONDS  # a burst of writes is one update
                while (left := deadline - loop.time()) > 0:
                    try:
                        state.apply(*await asyncio.wait_for(feed.get(), left))
                    except asyncio.TimeoutError:
                        break
                if state.settled():
                    break
                yield _sse("snapshot", state.snapshot())
        # The last word comes from fresh lists, not from watches that may still be delivering
        # their initial objects.
        async with open_client(ref.conn_id) as client:
            final = await _snapshot(client, ref)
        yield _sse("snapshot", final)
        yield _sse("end", {"phase": final["job"]["phase"]})
    except HTTPException as exc:
        yield _sse("failure", {"detail": exc.detail, "status": exc.status_code})
    except ClusterUnavailable as exc:
        yield _sse("failure", {"detail": str(exc), "status": 503})
    except ApiException as exc:  # a shared watch ended with an answer retrying will not change (403 …)
        yield _sse("failure", {"detail": _cluster_error(exc), "status": 502})


def _look_up_job_now(key: task.TaskKey) -> task.JobRef | dict[str, Any]:
    from airflow.utils.session import create_session

    with create_session() as session:  # the request's session is not meant to outlive the request
        return _look_up_job(session, key)


async def _wait_for_job(key: task.TaskKey, request: Request) -> AsyncIterator[str]:
    """``waiting`` (the task's state, on every change) until the task has submitted its job, then
    the job's stream; ``absent`` when the task finished without one. Reads Airflow's database, never
    the cluster, while it waits."""
    told: Any = ()
    quiet = 0.0
    while True:
        found = await asyncio.to_thread(_look_up_job_now, key)
        if isinstance(found, task.JobRef):
            async for chunk in _job_stream(found, request):
                yield chunk
            return
        if not found["waiting"]:
            yield _sse("absent", found)
            return
        if found["state"] != told:
            told, quiet = found["state"], 0.0
            yield _sse("waiting", found)
        elif quiet >= HEARTBEAT_SECONDS:
            quiet = 0.0
            yield ": ping\n\n"
        await asyncio.sleep(WAIT_SECONDS)
        quiet += WAIT_SECONDS


SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@app.get(TI + "/job/stream", dependencies=[CanRead])
async def stream_job(
    found: Annotated[task.JobRef | dict[str, Any], Depends(job_or_missing)],
    request: Request,
    dag_id: str,
    run_id: str,
    task_id: str,
    map_index: Annotated[int, Query()] = -1,
) -> StreamingResponse:
    """Server-sent events: ``snapshot`` (same shape as ``/job``) whenever the job, a replica or an
    event changes, ``end`` once the job has finished and no replica runs. Opened before a training
    task has submitted its job: ``waiting`` until it has (then as above), or ``absent``."""
    if isinstance(found, task.JobRef):
        events = _job_stream(found, request)
    elif found["waiting"]:
        events = _wait_for_job(_task_key(dag_id, run_id, task_id, map_index), request)
    else:
        raise Missing(found)
    return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)


async def _owned_pod(client: AsyncTrainingJobClient, ref: task.JobRef, pod: str) -> dict[str, Any]:
    """The replica ``pod`` of this job — never any other pod of the namespace."""
    for candidate in await client.pods(ref.kind, ref.name, ref.namespace, uid=ref.uid):
        if candidate["metadata"]["name"] == pod:
            return candidate
    raise HTTPException(404, f"{pod} is not a replica of {ref.kind} {ref.namespace}/{ref.name}")


async def _log_lines(
    client: AsyncTrainingJobClient, ref: task.JobRef, pod: str, container: str | None, *, previous: bool
) -> list[str]:
    try:
        text = await client.read_log(pod, ref.namespace, container=container, tail_lines=LOG_WINDOW, previous=previous)
    except BadRequest:
        return []  # not started yet
    except ApiError:
        if previous:
            return []  # no container before this one (any more)
        raise
    return text.splitlines()


@app.get(TI + "/job/logs/{pod}", dependencies=[CanRead])
async def get_log(
    ref: JobRefDep,
    pod: str,
    tail: Annotated[int, Query(ge=0, le=LOG_WINDOW)] = LOG_TAIL,
    before: Annotated[int | None, Query(ge=0)] = None,
    previous: bool = False,
) -> dict[str, Any]:
    """A page of a replica's log. Without ``before``: the last ``tail`` lines of its current container
    (``lines``, from line ``start`` of ``total``) and, when it restarted, of the container before
    (``previous``, ``previous_start``, ``previous_total``). With ``before``: the ``tail`` lines before
    line ``before`` of the current container (``previous=true``: of the one before), to page back.
    Lines are counted from a container's first line, within its last ``LOG_WINDOW`` lines
    (``truncated`` when there are more)."""
    async with open_client(ref.conn_id) as client:
        found = await _owned_pod(client, ref, pod)
        replica = views.replica_view(found, ref.kind)
        container = replica["container"]
        if before is not None:
            lines = await _log_lines(client, ref, pod, container, previous=previous)
            return {"pod": pod, "container": container, **views.log_page(lines, tail, before, LOG_WINDOW)}
        current = views.log_page(await _log_lines(client, ref, pod, container, previous=False), tail, None, LOG_WINDOW)
        earlier = views.log_page(
            await _log_lines(client, ref, pod, container, previous=True) if replica["restarts"] else [],
            tail,
            None,
            LOG_WINDOW,
        )
    return {
        "pod": pod,
        "container": container,
        **current,
        "previous": earlier["lines"],
        "previous_start": earlier["start"],
        "previous_total": earlier["total"],
        "previous_truncated": earlier["truncated"],
    }


async def _log_stream(ref: task.JobRef, pod: str, tail: int) -> AsyncIterator[str]:
    try:
        async with open_client(ref.conn_id, watch_timeout=WATCH_SECONDS) as client:
            found = await _owned_pod(client, ref, pod)
            container = views.replica_view(found, ref.kind)["container"]
            follow = watches.follow_log(
                hook(ref.conn_id), client, ref.namespace, pod, container, tail=tail, seconds=WATCH_SECONDS
            )
            try:
                async for event, data in follow:
                    yield _sse(event, {"line": data, "time": time.time()} if event == "line" else {"value": data})
                    if event == "end":
                        return
            finally:
                await follow.aclose()
    except HTTPException as exc:
        yield _sse("failure", {"detail": exc.detail, "status": exc.status_code})
    except ClusterUnavailable as exc:
        yield _sse("failure", {"detail": str(exc), "status": 503})
    except ApiException as exc:  # the pod's shared watch ended with an answer retrying will not change
        yield _sse("failure", {"detail": _cluster_error(exc), "status": 502})


@app.get(TI + "/job/logs/{pod}/follow", dependencies=[CanRead])
async def follow_log(
    ref: JobRefDep, pod: str, tail: Annotated[int, Query(ge=0, le=100_000)] = LOG_TAIL
) -> StreamingResponse:
    """Server-sent events: ``line`` per log line (the last ``tail`` first), ``restart`` when the
    container starts again (its log follows from the start), ``end`` when the replica finished."""
    return StreamingResponse(_log_stream(ref, pod, tail), media_type="text/event-stream", headers=SSE_HEADERS)


async def _metrics(client: AsyncTrainingJobClient, ref: task.JobRef, replica: str | None = None) -> dict[str, Any]:
    pods = await client.pods(ref.kind, ref.name, ref.namespace, uid=ref.uid)
    pod = next((p for p in pods if p["metadata"]["name"] == replica), None) if replica else views.metrics_replica(pods)
    if pod is None:
        return {"replica": replica, "names": [], "points": []}
    container = views.replica_view(pod, ref.kind)["container"]
    try:
        text = await client.read_log(
            pod["metadata"]["name"], ref.namespace, container=container, tail_lines=METRIC_LOG_LINES
        )
    except BadRequest:  # not started yet
        text = ""
    points = metrics.parse(text.splitlines())
    return {"replica": pod["metadata"]["name"], "names": metrics.names(points), "points": points}


@app.get(TI + "/job/metrics", dependencies=[CanRead])
async def get_metrics(ref: JobRefDep, replica: str | None = None) -> dict[str, Any]:
    """The ``METRIC`` lines of the master replica (or ``replica``) as points ``{step, loss, …}``."""
    async with open_client(ref.conn_id) as client:
        result = await _metrics(client, ref, replica)
        job = await client.find(ref.kind, ref.name, ref.namespace)
    if job is not None and isinstance((job.get("status") or {}).get("trainerStatus"), dict):
        result["trainer_status"] = job["status"]["trainerStatus"]
    return result


@app.get(TI + "/modelkit", dependencies=[CanRead])
async def get_modelkit(ref: Annotated[task.ModelKitRef, Depends(modelkit_ref)]) -> dict[str, Any]:
    """The pushed ModelKit as the registry has it: digest, layers, Kitfile and metrics file."""
    from airflow_provider_training.kitops.registry import NotFoundError, RegistryError

    try:
        return await asyncio.to_thread(modelkit.describe, ref)
    except NotFoundError as exc:
        raise HTTPException(404, str(exc)) from None
    except (RegistryError, OSError) as exc:
        raise HTTPException(502, f"the registry did not answer: {exc}") from None


def _recent(dag_id: str, session: SessionDep, limit: Annotated[int, Query(ge=1, le=50)] = 10) -> list[dict[str, Any]]:
    return [
        {
            "run_id": run.run_id,
            "run_after": run.run_after,
            "run_state": str(run.state),
            "task_id": task_id,
            "ref": ref,
        }
        for run, task_id, ref in task.recent_jobs(session, dag_id, limit)
    ]


@app.get("/api/dags/{dag_id}/history", dependencies=[CanRead])
async def get_history(recent: Annotated[list[dict[str, Any]], Depends(_recent)]) -> list[dict[str, Any]]:
    """The training jobs of the DAG's last runs with their metrics (newest first): which model got better."""

    async def one(item: dict[str, Any]) -> dict[str, Any]:
        ref: task.JobRef = item.pop("ref")
        row = {**item, "kind": ref.kind, "job": ref.name, "phase": "", "names": [], "points": [], "error": ""}
        try:
            async with open_client(ref.conn_id) as client:
                job = await client.find(ref.kind, ref.name, ref.namespace)
                if job is None:
                    row["phase"], row["error"] = "Deleted", "the job no longer exists"
                    return row
                job.setdefault("kind", ref.kind)
                row["phase"] = job_state(job).phase
                row.update(
                    {k: v for k, v in (await _metrics(client, ref)).items() if k in ("names", "points", "replica")}
                )
        except ClusterUnavailable as exc:
            row["error"] = str(exc)
        except ApiException as exc:
            row["error"] = _cluster_error(exc)
        except OSError as exc:
            row["error"] = f"the cluster did not answer: {exc}"
        return row

    return list(await asyncio.gather(*(one(dict(item)) for item in recent)))


if STATIC.is_dir():
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
