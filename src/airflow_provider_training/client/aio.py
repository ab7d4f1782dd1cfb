"""``AsyncTrainingJobClient``: the async twin of :class:`TrainingJobClient` over ``kubernetes_asyncio``,
for triggers. Same waiting rules: watch from a resourceVersion, reconnect, GET after 410, poll
fallback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import client as ak
from kubernetes_asyncio.client.exceptions import ApiException

from airflow_provider_training.client.errors import RETRYABLE_STATUS, JobDeleted, JobNotFound, WaitTimeout
from airflow_provider_training.client.resources import Resource, resource_for
from airflow_provider_training.client.selection import pod_selector, sorted_events
from airflow_provider_training.client.state import finished, owned_by
from airflow_provider_training.client.watching import Cursor, Gone, WatchError, parse_event

Predicate = Callable[[dict[str, Any]], bool]
Objects = list[dict[str, Any]]  # (the clients have a method called ``list``)
TRANSIENT = (aiohttp.ClientError, OSError, asyncio.TimeoutError, WatchError)


def transient_async(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in RETRYABLE_STATUS
    return isinstance(exc, TRANSIENT)


class AsyncTrainingJobClient:
    """``api_client`` is a configured ``kubernetes_asyncio.client.ApiClient``."""

    def __init__(
        self,
        api_client: ak.ApiClient,
        *,
        watch_timeout: float = 240.0,
        poll_interval: float = 10.0,
        request_timeout: float = 60.0,
    ) -> None:
        self.api_client = api_client
        self.custom = ak.CustomObjectsApi(api_client)
        self.core = ak.CoreV1Api(api_client)
        self.watch_timeout = watch_timeout
        self.poll_interval = poll_interval
        self.request_timeout = request_timeout
        self.can_watch = True

    @property
    def _timeout(self) -> tuple[float, float]:
        return (10.0, self.request_timeout)

    async def create(self, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        res = resource_for(str(body.get("kind")))
        ns = namespace or (body.get("metadata") or {}).get("namespace") or "default"
        created: dict[str, Any] = await self.custom.create_namespaced_custom_object(
            res.group, res.version, ns, res.plural, dict(body), _request_timeout=self._timeout
        )
        return created

    async def find(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        res = resource_for(kind)
        try:
            found: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, name, _request_timeout=self._timeout
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    async def get(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        found = await self.find(kind, name, namespace)
        if found is None:
            raise JobNotFound(kind, namespace, name)
        return found

    async def list(self, kind: str, namespace: str, label_selector: str | None = None) -> Objects:
        res = resource_for(kind)
        listed = await self.custom.list_namespaced_custom_object(
            res.group,
            res.version,
            namespace,
            res.plural,
            label_selector=label_selector or "",
            _request_timeout=self._timeout,
        )
        return list(listed.get("items") or [])

    async def delete(
        self, kind: str, name: str, namespace: str, *, propagation: str = "Foreground", uid: str | None = None
    ) -> bool:
        res = resource_for(kind)
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await self.custom.delete_namespaced_custom_object(
                res.group,
                res.version,
                namespace,
                res.plural,
                name,
                body=body,  # type: ignore[arg-type]
                _request_timeout=self._timeout,
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    async def _current(self, kind: str, name: str, namespace: str, uid: str | None) -> tuple[dict[str, Any], str]:
        """The job and the resourceVersion to watch from: a LIST's, which is current even when the
        object itself has not changed for longer than the server's watch history reaches (a GET's
        resourceVersion would be answered with 410 again)."""
        res = resource_for(kind)
        listed = await self.custom.list_namespaced_custom_object(
            res.group,
            res.version,
            namespace,
            res.plural,
            field_selector=f"metadata.name={name}",
            _request_timeout=self._timeout,
        )
        items = listed.get("items") or []
        if not items:
            raise JobDeleted(kind, namespace, name)
        obj: dict[str, Any] = items[0]
        if uid and obj["metadata"].get("uid") != uid:
            raise JobDeleted(kind, namespace, name, "was replaced by another object of the same name")
        obj.setdefault("kind", kind)
        obj.setdefault("apiVersion", res.api_version)
        return obj, str(
            (listed.get("metadata") or {}).get("resourceVersion") or obj["metadata"].get("resourceVersion", "")
        )

    async def watch_object(
        self, res: Resource, name: str, namespace: str, cursor: Cursor, seconds: float
    ) -> AsyncIterator[dict[str, Any]]:
        response: Any = await self.custom.list_namespaced_custom_object(
            res.group,
            res.version,
            namespace,
            res.plural,
            field_selector=f"metadata.name={name}",
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=cursor.resource_version,
            timeout_seconds=max(1, int(seconds)),
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=None, connect=10.0, sock_read=seconds + 30.0),
        )
        try:
            if response.status != 200:
                body = await response.text()
                raise ApiException(status=response.status, reason=body[:500])
            while True:
                line = await response.content.readline()
                if not line:
                    return
                event = parse_event(line, cursor)
                if event is None:
                    continue
                kind, obj = event
                if kind == "DELETED":
                    raise JobDeleted(res.kind, namespace, name)
                yield obj
        finally:
            response.release()

    async def wait(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        timeout: float | None = None,
        until: Predicate = finished,
    ) -> dict[str, Any]:
        """Return the job once ``until(job)`` holds (default: finished). Raises :class:`WaitTimeout`
        or :class:`JobDeleted` like the sync client."""
        res = resource_for(kind)
        deadline = None if timeout is None else time.monotonic() + timeout
        obj, version = await self._current(kind, name, namespace, uid)
        cursor = Cursor(version)
        backoff, stale, gone = 0.5, False, False
        while True:
            if stale:  # after a dropped watch, a 410 or a poll interval: read the job again
                try:
                    obj, cursor.resource_version = await self._current(kind, name, namespace, uid)
                    stale = False
                except Exception as exc:
                    if not transient_async(exc):
                        raise
                    if deadline is not None and time.monotonic() >= deadline:
                        raise WaitTimeout(kind, namespace, name, float(timeout or 0), obj) from exc
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self.poll_interval)
                    continue
            if until(obj):
                return obj
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeout(kind, namespace, name, float(timeout or 0), obj)
            window = self.watch_timeout if remaining is None else min(self.watch_timeout, remaining)
            if not self.can_watch:
                await asyncio.sleep(min(self.poll_interval, window))
                stale = True
                continue
            try:
                async for new in self.watch_object(res, name, namespace, cursor, window):
                    if uid and new["metadata"].get("uid") != uid:
                        raise JobDeleted(kind, namespace, name, "was replaced by another object of the same name")
                    obj = new
                    backoff, gone = 0.5, False
                    if until(obj):
                        return obj
                    if deadline is not None and time.monotonic() >= deadline:
                        break
                # The server ended the watch at its timeout: continue from the cursor, no read needed.
            except Gone:
                if gone:  # a second 410 in a row: the server is struggling, do not hammer it
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self.poll_interval)
                gone, stale = True, True
            except Exception as exc:
                if isinstance(exc, ApiException) and exc.status in (400, 404, 405, 501):
                    self.can_watch = False  # this server cannot watch the resource: poll
                elif not transient_async(exc):
                    raise
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.poll_interval)
                stale = True

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
        response: Any = await self.core.list_namespaced_pod(
            namespace,
            label_selector=pod_selector(kind, name, replica_type, index),
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        items = json.loads(await response.read()).get("items") or []
        return sorted((p for p in items if owned_by(p, uid)), key=lambda p: str(p["metadata"]["name"]))

    async def read_log(
        self,
        pod: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        kwargs: dict[str, Any] = {"previous": previous}
        if container:
            kwargs["container"] = container
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        response: Any = await self.core.read_namespaced_pod_log(
            pod, namespace, _preload_content=False, _request_timeout=self._timeout, **kwargs
        )
        text = await response.read()
        if response.status != 200:
            raise ApiException(status=response.status, reason=text.decode("utf-8", "replace")[:500])
        return text.decode("utf-8", "replace")

    async def events(self, kind: str, name: str, namespace: str, *, uid: str | None = None) -> Objects:
        mine: Any = await self.core.list_namespaced_event(
            namespace,
            field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
            _request_timeout=self._timeout,
            _preload_content=False,
        )
        pods = {p["metadata"]["name"] for p in await self.pods(kind, name, namespace, uid=uid)}
        of_pods: Any = await self.core.list_namespaced_event(
            namespace,
            field_selector="involvedObject.kind=Pod",
            _request_timeout=self._timeout,
            _preload_content=False,
        )
        events = json.loads(await mine.read()).get("items") or []
        events += [
            e for e in json.loads(await of_pods.read()).get("items") or [] if e["involvedObject"].get("name") in pods
        ]
        return sorted_events(events)
