"""Long-running reads for the page: watches of the job, its pods and events, and a replica's log
followed across container restarts.

Every request here is a watch or a follow, not a poll: an open tab that shows an idle job costs
one request per watch every ``watch_timeout`` seconds. Each generator closes its responses in
``finally``, so a browser that goes away (Starlette cancels the stream) leaves no open watch behind.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from airflow_provider_training.client import AsyncTrainingJobClient, resource_for
from airflow_provider_training.client.errors import BadRequest, NotFound, api_error, translate
from airflow_provider_training.client.selection import pod_selector
from airflow_provider_training.client.state import container_started
from airflow_provider_training.client.watching import Cursor, Gone, parse_event

Event = tuple[str, str, dict[str, Any]]  # (source, type, object)
TERMINAL = ("Succeeded", "Failed")


def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=None, connect=10.0, sock_read=seconds + 30.0)


async def watch(
    source: str,
    call: Callable[..., Awaitable[Any]],
    queue: asyncio.Queue[Event],
    seconds: float,
    **kwargs: Any,
) -> None:
    """Put every event of a watch into ``queue`` (tagged ``source``) until cancelled; renew it when
    the server ends it; after 410 start over (the server resends the objects as ADDED)."""
    cursor = Cursor("")
    backoff = 0.5
    while True:
        try:
            response = await call(
                watch=True,
                allow_watch_bookmarks=True,
                resource_version=cursor.resource_version,
                timeout_seconds=max(1, int(seconds)),
                _preload_content=False,
                _request_timeout=_timeout(seconds),
                **kwargs,
            )
            try:
                if response.status != 200:
                    raise api_error(response.status, (await response.text())[:300])  # a 410 is Gone: start over
                while line := await response.content.readline():
                    event = parse_event(line, cursor)
                    if event is not None:
                        await queue.put((source, event[0], event[1]))
                        backoff = 0.5
            finally:
                response.close()
        except Gone:
            cursor.resource_version = ""
            await queue.put((source, "RESET", {}))
        except (ApiException, aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError):
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)


@contextlib.asynccontextmanager
async def job_watches(
    client: AsyncTrainingJobClient, kind: str, name: str, namespace: str, seconds: float
) -> AsyncIterator[asyncio.Queue[Event]]:
    """A queue fed by three watches: the job, its pods and the namespace's events."""
    res = resource_for(kind)
    queue: asyncio.Queue[Event] = asyncio.Queue()
    tasks = [
        asyncio.create_task(
            watch(
                "job",
                client.custom.list_namespaced_custom_object,
                queue,
                seconds,
                group=res.group,
                version=res.version,
                namespace=namespace,
                plural=res.plural,
                field_selector=f"metadata.name={name}",
            )
        ),
        asyncio.create_task(
            watch(
                "pod",
                client.core.list_namespaced_pod,
                queue,
                seconds,
                namespace=namespace,
                label_selector=pod_selector(kind, name),
            )
        ),
        asyncio.create_task(watch("event", client.core.list_namespaced_event, queue, seconds, namespace=namespace)),
    ]
    try:
        yield queue
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _pod_changes(
    client: AsyncTrainingJobClient, namespace: str, pod: str, seconds: float
) -> AsyncGenerator[dict[str, Any], None]:
    queue: asyncio.Queue[Event] = asyncio.Queue()
    task = asyncio.create_task(
        watch(
            "pod",
            client.core.list_namespaced_pod,
            queue,
            seconds,
            namespace=namespace,
            field_selector=f"metadata.name={pod}",
        )
    )
    try:
        while True:
            _, kind, obj = await queue.get()
            if kind in ("ADDED", "MODIFIED"):
                yield obj
            elif kind == "DELETED":
                return
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def _running(pod: dict[str, Any], container: str | None) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if container is None or cs.get("name") == container:
            return "running" in (cs.get("state") or {})
    return False


def _terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL


async def _read_pod(client: AsyncTrainingJobClient, namespace: str, pod: str) -> dict[str, Any] | None:
    try:
        with translate():
            response: Any = await client.core.read_namespaced_pod(pod, namespace, _preload_content=False)
    except NotFound:
        return None
    if response.status == 404:
        response.close()
        return None
    found: dict[str, Any] = await response.json()
    return found


async def follow_log(
    client: AsyncTrainingJobClient,
    namespace: str,
    pod: str,
    container: str | None,
    *,
    tail: int,
    seconds: float,
) -> AsyncGenerator[tuple[str, str], None]:
    """``("line", text)`` for each log line of the replica — the last ``tail`` of the current container
    first, then live — ``("restart", n)`` when its container starts again (that container's log
    follows from its first line), and ``("end", phase)`` once the pod has finished or is gone. Found
    already restarted, the last ``tail`` lines of the container before come first, then the restart."""
    followed = -1
    changes = _pod_changes(client, namespace, pod, seconds)
    current: dict[str, Any] | None = None
    resume = False
    try:
        while True:
            if current is None:
                try:
                    current = await anext(changes)
                except StopAsyncIteration:
                    yield ("end", "Deleted")
                    return
            started, restarts = container_started(current, container)
            if started and (restarts > followed or resume):
                if followed < 0 and restarts > 0:
                    # Opened after a restart (or the crash was over before a running status was
                    # written): the last lines of the container before, so the reason shows.
                    async for line in _stream(client, namespace, pod, container, tail, seconds, previous=True):
                        yield ("line", line)
                    yield ("restart", str(restarts))
                elif followed >= 0 and restarts > followed:
                    yield ("restart", str(restarts))
                # A new container's log from its first line; a dropped stream resumes with new lines only.
                lines = tail if followed < 0 else (0 if restarts == followed else None)
                resume = False
                async for line in _stream(client, namespace, pod, container, lines, seconds):
                    yield ("line", line)
                followed = restarts
                current = await _read_pod(client, namespace, pod)
                if current is None:
                    yield ("end", "Deleted")
                    return
                if container_started(current, container)[1] > followed:
                    continue  # it restarted meanwhile: follow the new container now
                if _running(current, container) and not _terminal(current):
                    # The stream ended but the container runs on (a dropped connection, or a status
                    # that lags the exit): resume with new lines after a pause.
                    await asyncio.sleep(0.5)
                    resume = True
                    continue
            if _terminal(current) and (followed >= 0 or not started):
                yield ("end", str((current.get("status") or {}).get("phase")))
                return
            current = None
    finally:
        await changes.aclose()


async def _stream(
    client: AsyncTrainingJobClient,
    namespace: str,
    pod: str,
    container: str | None,
    tail: int | None,
    seconds: float,
    *,
    previous: bool = False,
) -> AsyncIterator[str]:
    kwargs: dict[str, Any] = {"previous": True} if previous else {"follow": True}
    if container:
        kwargs["container"] = container
    if tail is not None:
        kwargs["tail_lines"] = tail
    try:
        with translate():
            response: Any = await client.core.read_namespaced_pod_log(
                pod,
                namespace,
                _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(total=None, connect=10.0),
                **kwargs,
            )
    except (BadRequest, NotFound):  # not started yet, or gone: the pod watch decides what next
        return
    try:
        if response.status != 200:
            return
        while raw := await response.content.readline():
            yield raw.decode("utf-8", "replace").rstrip("\n")
    finally:
        response.close()
