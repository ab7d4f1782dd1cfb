"""``AsyncTrainingJobClient``: the async twin of :class:`TrainingJobClient` over ``kubernetes_asyncio``,
for triggers. The same operations and waiting rules (``operations.py``, ``waiting.py``), answered
with ``kubernetes_asyncio``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import client as ak

from airflow_provider_training.client import operations as op
from airflow_provider_training.client.errors import BadRequest, NotFound, api_error, translate
from airflow_provider_training.client.following import Follower, follow
from airflow_provider_training.client.logselect import RESUME_LOG_LINES
from airflow_provider_training.client.state import finished
from airflow_provider_training.client.steps import Call, Driver, Run, Sleep, Steps, T, decode
from airflow_provider_training.client.waiting import Predicate, Waiter, wait

Objects = list[dict[str, Any]]  # (the clients have a method called ``list``)


class AsyncTrainingJobClient(Driver):
    """``api_client`` is a configured ``kubernetes_asyncio.client.ApiClient``; the methods are those of
    :class:`TrainingJobClient`, awaited."""

    custom_api = ak.CustomObjectsApi
    core_api = ak.CoreV1Api

    # -- the driver: answers an operation's requests with ``kubernetes_asyncio`` -------------------
    async def _drive(self, steps: Steps[T]) -> T:
        run = Run(steps)
        while (request := run.request) is not None:
            with run.answering():
                if isinstance(request, Sleep):
                    await asyncio.sleep(request.seconds)
                    run.send(None)
                elif isinstance(request, Call) and request.read == "stream":
                    await self._stream(run, request)
                else:
                    run.send(await self._call(request))  # type: ignore[arg-type]
        return run.result()

    async def _call(self, call: Call) -> Any:
        response: Any = await getattr(self._api(call), call.method)(*call.args, **call.options())
        if call.read == "object":
            return response
        if response.status != 200:  # with _preload_content=False, kubernetes_asyncio does not check
            text = await response.text()
            response.release()
            raise api_error(response.status, text[:500])
        return response if call.read == "stream" else decode(call, await response.read())

    async def _stream(self, run: Run[Any], call: Call) -> None:
        response = await self._call(call)
        try:
            while run.feed((await response.content.readline()) or None):
                continue
        finally:
            response.release()

    # -- objects, pods, logs, events (see TrainingJobClient) ---------------------------------------
    async def create(self, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        return await self._drive(op.create(body, namespace, self._timeout))

    async def find(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        return await self._drive(op.find(kind, name, namespace, self._timeout))

    async def get(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        return await self._drive(op.get(kind, name, namespace, self._timeout))

    async def list(self, kind: str, namespace: str, label_selector: str | None = None) -> Objects:
        return await self._drive(op.list_(kind, namespace, label_selector, self._timeout))

    async def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self._drive(op.replace(body, self._timeout))

    async def apply_secret(self, body: Mapping[str, Any]) -> None:
        await self._drive(op.apply_secret(body, self._timeout))

    async def delete(
        self, kind: str, name: str, namespace: str, *, propagation: str = "Foreground", uid: str | None = None
    ) -> bool:
        return await self._drive(op.delete(kind, name, namespace, propagation, uid, self._timeout))

    async def wait(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        timeout: float | None = None,
        until: Predicate = finished,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Return the job once ``until(job)`` holds (default: finished). Raises :class:`WaitTimeout`
        or :class:`JobDeleted` like the sync client."""
        waiter = Waiter(kind, name, namespace, self, uid=uid, timeout=timeout, until=until, on_change=on_change)
        return await self._drive(wait(waiter, self._timeout))

    async def follow(self, follower: Follower) -> None:
        """Hand every change of ``follower``'s objects to its ``on_event`` (``following.py``) until
        the task is cancelled (the open watch is closed then). Raises what retrying will not change.
        Many followers of one kind and namespace in a process: share one (``informer.py``)."""
        await self._drive(follow(follower, self._timeout))

    async def pods(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        replica_type: str | None = None,
        index: int | None = None,
    ) -> Objects:
        return await self._drive(op.pods(kind, name, namespace, uid, replica_type, index, self._timeout))

    async def list_pods(self, namespace: str, label_selector: str) -> Objects:
        return await self._drive(op.list_pods(namespace, label_selector, self._timeout))

    async def find_pod(self, name: str, namespace: str) -> dict[str, Any] | None:
        return await self._drive(op.find_pod(name, namespace, self._timeout))

    async def log_lines(
        self,
        pod: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
        follow: bool = False,
    ) -> AsyncIterator[str]:
        """The container's log line by line (``follow``: until the container ends or the server drops
        the stream). Nothing for a container that has not started or a pod that is gone; the
        response is closed when the caller stops iterating."""
        kwargs = op.log_options(container, tail_lines, **({"previous": True} if previous else {"follow": follow}))
        try:
            with translate():
                response: Any = await self.core.read_namespaced_pod_log(
                    pod,
                    namespace,
                    _preload_content=False,
                    _request_timeout=aiohttp.ClientTimeout(total=None, connect=10.0),
                    **kwargs,
                )
        except (BadRequest, NotFound):  # not started yet, or gone
            return
        try:
            if response.status != 200:
                return
            while raw := await response.content.readline():
                yield raw.decode("utf-8", "replace").rstrip("\n")
        finally:
            response.close()

    async def read_log(
        self,
        pod: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        return await self._drive(op.read_log(pod, namespace, container, tail_lines, previous, self._timeout))

    async def replica_logs(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        select: Callable[[dict[str, Any]], bool],
        tail_lines: int | None = RESUME_LOG_LINES,
    ) -> op.Logs:
        """``(pod, last lines)`` of the job's pods ``select`` accepts (a note where a log is not available)."""
        return await self._drive(op.replica_logs(kind, name, namespace, uid, select, tail_lines, self._timeout))

    async def events(self, kind: str, name: str, namespace: str, *, uid: str | None = None) -> Objects:
        return await self._drive(op.events(kind, name, namespace, uid, self._timeout))
