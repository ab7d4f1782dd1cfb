"""``watch=true``: ADDED / MODIFIED / DELETED / BOOKMARK as newline-delimited JSON.

The stream subscribes to the store before it reads the backlog (the event log after the client's
resourceVersion, or the current objects as ADDED), and drops live events it already sent, so no
write falls between the two. A resourceVersion older than the event log reaches is answered as a
real API server does: one ERROR event carrying a 410 Expired Status, telling the client to list again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from airflow_provider_training.embedded.apiserver import errors, limits, metrics, offload
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.crud import list_objects
from airflow_provider_training.embedded.apiserver.http import Target, dumps, flag
from airflow_provider_training.embedded.apiserver.selectors import (
    SelectorError,
    field_matcher,
    label_matcher,
    parse_field_selector,
    parse_label_selector,
)
from airflow_provider_training.embedded.apiserver.tablewatch import table_lines
from airflow_provider_training.embedded.store import GoneError, WatchEvent
from airflow_provider_training.specs.unstructured import ObjectMeta, Unstructured

# kube-apiserver ends a watch after a random 30-60 minutes; one fixed hour is enough here.
DEFAULT_TIMEOUT = 3600.0
EVENTS_PER_CHUNK = 256


def _line(event_type: str, obj: Unstructured) -> bytes:
    return dumps({"type": event_type, "object": obj}) + b"\n"


async def watch(request: Request, ctx: ServerContext, target: Target) -> Response:
    rt, query = target.rt, request.query_params
    line = table_lines(request, rt) or _line  # `kubectl get -w` asks for table rows, not objects
    try:
        labels = label_matcher(parse_label_selector(query.get("labelSelector")))
        fields = field_matcher(parse_field_selector(query.get("fieldSelector"), rt.allows_field))
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from None
    namespace = target.namespace

    def matches(obj: Unstructured | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata", {})
        if namespace is not None and meta.get("namespace") != namespace:
            return False
        return labels(meta.get("labels") or {}) and fields(obj)

    timeout = limits.timeout_seconds(query.get("timeoutSeconds"), DEFAULT_TIMEOUT)
    bookmarks = flag(query.get("allowWatchBookmarks"))
    initial_events = flag(query.get("sendInitialEvents"))
    since = query.get("resourceVersion") or ""
    limits.resource_version(since)

    queue: asyncio.Queue[WatchEvent | None] = asyncio.Queue()  # None: the wait timed out
    loop = asyncio.get_running_loop()

    def listener(event: WatchEvent) -> None:
        if event.resource == rt.key:
            loop.call_soon_threadsafe(queue.put_nowait, event)

    def read_backlog() -> tuple[list[bytes], int]:
        """What happened before the watch: the current objects, or the events since ``since``."""
        backlog: list[bytes] = []
        if since in ("", "0") or initial_events:
            result = list_objects(request, ctx, target)
            backlog = [line("ADDED", obj) for obj in result.items]
            if initial_events:
                backlog.append(
                    line("BOOKMARK", _bookmark(rt.kind, rt.api_version, result.resource_version, initial_end=True))
                )
            return backlog, result.resource_version
        last = int(since)
        for event in ctx.store.events_since(last, rt.key):
            if matches(event.object):
                backlog.append(line(event.type, event.object))
            last = event.rv
        return backlog, last

    unsubscribe = ctx.store.subscribe(listener)
    try:
        backlog, last_rv = await offload.run(read_backlog)  # (a backlog of large objects is work)
    except GoneError as exc:
        unsubscribe()
        ctx.metrics.answered(metrics.labels("WATCH", target), 410)
        status = errors.gone(
            f"{exc}: the resourceVersion is older than the event history; list again and "
            "watch from the list's resourceVersion"
        ).status()
        return StreamingResponse(_once(line("ERROR", status)), media_type="application/json")
    except BaseException:
        unsubscribe()
        raise

    key = metrics.labels("WATCH", target)

    async def stream() -> AsyncIterator[bytes]:
        nonlocal last_rv
        ctx.metrics.opened(key)  # here, not before: a stream that never starts never ends either
        try:
            for pending in backlog:
                yield pending
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + ctx.settings.bookmark_interval
            while True:
                now = time.monotonic()
                if now >= deadline:
                    return
                wait = min(deadline, next_bookmark) - now if bookmarks else deadline - now
                event = queue.get_nowait() if not queue.empty() else await _next(queue, max(wait, 0.001))
                if event is None:
                    if bookmarks and time.monotonic() >= next_bookmark:
                        yield line("BOOKMARK", _bookmark(rt.kind, rt.api_version, last_rv))
                        next_bookmark = time.monotonic() + ctx.settings.bookmark_interval
                    continue
                # a burst (one pass's pods, say) goes out as one chunk: one TLS record and one send
                # (a few hundred events at most, so that a thousand pods' events do not hold the loop)
                burst: list[bytes] = []
                for _ in range(EVENTS_PER_CHUNK):
                    if event.rv > last_rv:
                        last_rv = event.rv
                        translated = _translate(event, matches, line)
                        if translated is not None:
                            burst.append(translated)
                    if queue.empty():
                        break
                    next_event = queue.get_nowait()
                    if next_event is None:  # a timer's wake-up, no event
                        break
                    event = next_event
                if burst:
                    yield b"".join(burst)
        finally:
            unsubscribe()
            ctx.metrics.closed(key)

    return StreamingResponse(stream(), media_type="application/json")


async def _next(queue: asyncio.Queue[WatchEvent | None], timeout: float) -> WatchEvent | None:
    """The next event, or None after ``timeout`` seconds. A timer that queues None rather than
    ``wait_for``: no task per wait, so an event reaches the client one loop pass after its commit,
    ahead of the controllers' reconciles the same commit starts (a timer that fired after an event
    leaves a None, read later as a spurious timeout: harmless)."""
    timer = asyncio.get_running_loop().call_later(timeout, queue.put_nowait, None)
    try:
        return await queue.get()
    finally:
        timer.cancel()


def _translate(
    event: WatchEvent,
    matches: Callable[[Unstructured | None], bool],
    line: Callable[[str, Unstructured], bytes] = _line,
) -> bytes | None:
    """An update that moves an object into or out of the selection is ADDED or DELETED for this watch."""
    now_in = matches(event.object)
    if event.type != "MODIFIED" or event.old is None:
        return line(event.type, event.object) if now_in else None
    was_in = matches(event.old)
    if now_in and was_in:
        return line("MODIFIED", event.object)
    if now_in:
        return line("ADDED", event.object)
    if was_in:
        return line("DELETED", event.object)
    return None


def _bookmark(kind: str, api_version: str, rv: int, initial_end: bool = False) -> dict[str, Any]:
    meta: ObjectMeta = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": kind, "apiVersion": api_version, "metadata": meta}


async def _once(line: bytes) -> AsyncIterator[bytes]:
    yield line
