"""Long-running reads for the page: the job, its pods and the namespace's events through the API
server process's shared watches (``client/informer.py``), and a replica's log followed across
container restarts.

Every open tab subscribes to the same three informers of its job's cluster and namespace (the job's
kind, pods, events) instead of opening watches of its own, so ten tabs on jobs of one namespace are
three watch connections, renewed every ``watch_timeout`` seconds while nothing changes; the
watching rules (resume, 410, back-off) are the client's. Leaving a subscription's block
unsubscribes (Starlette cancels the stream when the browser goes away); the last subscriber's
leaving closes the watch after the informer's linger.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from airflow_provider_training.client import AsyncTrainingJobClient
from airflow_provider_training.client.informer import ERROR, Subscription
from airflow_provider_training.client.state import container_started
from airflow_provider_training.hooks.training import AsyncTrainingHook

Event = tuple[str, str, dict[str, Any]]  # (source, type, object)
TERMINAL = ("Succeeded", "Failed")


class Feed:
    """The changes of several subscriptions in one queue, each tagged with its source."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.subscriptions: list[Subscription] = []

    def into(self, source: str) -> Any:
        return lambda type_, obj: self.queue.put_nowait((source, type_, obj))

    async def get(self) -> Event:
        """The next change; raises a shared watch's error (403, an unreachable cluster) once it ended."""
        event = await self.queue.get()
        if event[1] == ERROR:
            for subscription in self.subscriptions:
                subscription.check()
        return event


@contextlib.asynccontextmanager
async def job_watches(
    hook: AsyncTrainingHook, kind: str, name: str, namespace: str, seconds: float
) -> AsyncIterator[Feed]:
    """The changes of the job (by name), of every pod and every event of its namespace — the caller
    picks the job's own — starting with what the shared watches hold now, as ``ADDED``."""
    feed = Feed()
    async with contextlib.AsyncExitStack() as stack:
        for source, watched, only in (("job", kind, name), ("pod", "Pod", None), ("event", "Event", None)):
            subscription = hook.subscribe(
                watched, namespace, name=only, deliver=feed.into(source), watch_timeout=seconds
            )
            feed.subscriptions.append(await stack.enter_async_context(subscription))
        yield feed


async def _pod_changes(
    hook: AsyncTrainingHook, namespace: str, pod: str, seconds: float
) -> AsyncGenerator[dict[str, Any], None]:
    """Each version of the pod (the current one first) until it is deleted."""
    async with hook.subscribe("Pod", namespace, name=pod, watch_timeout=seconds) as subscription:
        while True:
            kind, obj = await subscription.get()
            if kind in ("ADDED", "MODIFIED"):
                yield obj
            elif kind == "DELETED":
                return


def _running(pod: dict[str, Any], container: str | None) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if container is None or cs.get("name") == container:
            return "running" in (cs.get("state") or {})
    return False


def _terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL


async def follow_log(
    hook: AsyncTrainingHook,
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
    changes = _pod_changes(hook, namespace, pod, seconds)
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
                    async for line in client.log_lines(
                        pod, namespace, container=container, tail_lines=tail, previous=True
                    ):
                        yield ("line", line)
                    yield ("restart", str(restarts))
                elif followed >= 0 and restarts > followed:
                    yield ("restart", str(restarts))
                # A new container's log from its first line; a dropped stream resumes with new lines only.
                lines = tail if followed < 0 else (0 if restarts == followed else None)
                resume = False
                async for line in client.log_lines(pod, namespace, container=container, tail_lines=lines, follow=True):
                    yield ("line", line)
                followed = restarts
                current = await client.find_pod(pod, namespace)
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
