"""The pod ``log`` subresource, read from the files the node agent writes (``podlogs``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from airflow_provider_training.embedded import podlogs
from airflow_provider_training.embedded.apiserver import errors, limits
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.http import Target, flag
from airflow_provider_training.embedded.resources import PODS
from airflow_provider_training.specs.unstructured import Unstructured

TERMINAL_PHASES = ("Succeeded", "Failed")
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"


def _container(pod: Unstructured, requested: str | None) -> str:
    spec = pod.get("spec", {})
    names = [c.get("name") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
    pod_name = pod["metadata"]["name"]
    if requested:
        if requested not in names:
            raise errors.bad_request(f"container {requested} is not valid for pod {pod_name}")
        return requested
    regular = [c.get("name") for c in spec.get("containers") or []]
    default = (pod["metadata"].get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION)
    if default in names:
        return str(default)
    if len(regular) == 1:
        return str(regular[0])
    raise errors.bad_request(
        f"a container name must be specified for pod {pod_name}, choose one of: [{' '.join(map(str, regular))}]"
    )


def _non_negative(request: Request, name: str) -> int | None:
    # bounded so that "now - sinceSeconds" and byte counts stay representable
    return limits.non_negative(request.query_params.get(name), name, 10**12)


def _since(request: Request) -> datetime | None:
    seconds = _non_negative(request, "sinceSeconds")
    if seconds is not None:
        return datetime.now(timezone.utc) - timedelta(seconds=min(seconds, 10**10))
    if text := request.query_params.get("sinceTime"):
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
        except ValueError:
            raise errors.bad_request(f"sinceTime must be an RFC 3339 time (got {text!r})") from None
    return None


def _container_done(pod: Unstructured | None, container: str, restart: int, directory: Path) -> bool:
    """Whether this container start will write no more output."""
    if pod is None or pod.get("status", {}).get("phase") in TERMINAL_PHASES:
        return True
    if any(n > restart for n in podlogs.restarts(directory)):
        return True
    for cs in pod.get("status", {}).get("containerStatuses") or []:
        if cs.get("name") == container and "terminated" in (cs.get("state") or {}):
            return int(cs.get("restartCount", 0)) <= restart
    return False


async def logs(request: Request, ctx: ServerContext, target: Target) -> Response:
    assert target.name is not None and target.namespace is not None
    pod = ctx.store.get(PODS.key, target.namespace, target.name)
    if pod is None:
        raise errors.not_found(PODS, target.name)
    container = _container(pod, request.query_params.get("container"))
    directory = podlogs.container_log_dir(ctx.home, target.namespace, target.name, container)
    starts = podlogs.restarts(directory)
    previous = flag(request.query_params.get("previous"))
    if previous:
        if len(starts) < 2:
            raise errors.bad_request(f'previous terminated container "{container}" in pod "{target.name}" not found')
        restart = starts[-2]
    elif starts:
        restart = starts[-1]
    else:
        raise errors.bad_request(
            f'container "{container}" in pod "{target.name}" is waiting to start: ContainerCreating'
        )
    path = directory / f"{restart}.log"
    timestamps = flag(request.query_params.get("timestamps"))
    tail = _non_negative(request, "tailLines")
    limit_bytes = _non_negative(request, "limitBytes")
    since = _since(request)

    def render(raw_lines: list[str]) -> list[str]:
        parsed = [podlogs.LogLine.parse(raw) for raw in raw_lines]
        if since is not None:
            parsed = [p for p in parsed if p.time is None or p.time >= since]
        return [p.render(timestamps) for p in parsed]

    raw = path.read_bytes()
    cut = raw.rfind(b"\n") + 1
    lines = render(raw[:cut].decode("utf-8", "replace").splitlines(keepends=True))
    if tail is not None:
        lines = lines[-tail:] if tail else []
    follow = flag(request.query_params.get("follow")) and not previous
    if not follow:
        if raw[cut:]:
            lines += render([raw[cut:].decode("utf-8", "replace")])
        body = "".join(lines).encode()
        return Response(body[:limit_bytes] if limit_bytes is not None else body, media_type="text/plain")

    async def stream() -> AsyncIterator[bytes]:
        sent = 0

        def budget(text: str) -> bytes:
            nonlocal sent
            chunk = text.encode()
            if limit_bytes is not None:
                chunk = chunk[: max(limit_bytes - sent, 0)]
            sent += len(chunk)
            return chunk

        if lines:
            yield budget("".join(lines))
        pending = raw[cut:]
        with path.open("rb") as handle:
            handle.seek(len(raw))
            while limit_bytes is None or sent < limit_bytes:
                current = ctx.store.get(PODS.key, target.namespace or "", target.name or "")
                done = _container_done(current, container, restart, directory)
                chunk = pending + handle.read()
                split = chunk.rfind(b"\n") + 1
                complete, pending = chunk[:split], chunk[split:]
                if complete:
                    yield budget("".join(render(complete.decode("utf-8", "replace").splitlines(keepends=True))))
                if done:
                    if pending:
                        yield budget("".join(render([pending.decode("utf-8", "replace")])))
                    return
                await asyncio.sleep(ctx.settings.log_poll_interval)

    return StreamingResponse(stream(), media_type="text/plain")
