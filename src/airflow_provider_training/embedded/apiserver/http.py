"""Request parsing and response building shared by the handlers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from airflow_provider_training.embedded import jsoncodec
from airflow_provider_training.embedded.apiserver import limits, offload, protobuf
from airflow_provider_training.embedded.apiserver.errors import (
    ApiError,
    bad_request,
    path_not_found,
    too_large,
)
from airflow_provider_training.embedded.resources import BY_PATH, ResourceType


@dataclass(frozen=True)
class Target:
    rt: ResourceType
    namespace: str | None  # None: across namespaces (lists) or a cluster-scoped resource
    name: str | None
    subresource: str | None

    @property
    def store_namespace(self) -> str:
        return self.namespace or ""


def parse_target(path: str) -> Target:
    """``/api/v1/namespaces/ns/pods/name/log`` and ``/apis/group/version/…`` into their parts."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise path_not_found()
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise path_not_found()
    rt = BY_PATH.get((group, version, rest[0]))
    if rt is None or (namespace is not None and not rt.namespaced):
        raise path_not_found()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in rt.subresources:
        raise path_not_found()
    return Target(rt, namespace, name, sub)


async def read_raw(request: Request, limit: int) -> bytes:
    """The request's body as sent, refused past ``limit`` bytes before more is read (on the loop:
    this part is I/O; :func:`decode_body` is the work)."""
    declared = request.headers.get("content-length")
    if declared is not None and limits.content_length(declared) > limit:
        raise too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_body(request: Request, limit: int) -> Any:
    """:func:`read_raw` on the loop, then :func:`decode_body` on a worker thread."""
    raw = await read_raw(request, limit)
    return await offload.run(decode_body, request, raw)


def decode_body(request: Request, raw: bytes) -> Any:
    """The body as a plain JSON value, by its media type (a worker thread's part: a 3 MiB body is
    tens of milliseconds of parsing and checking)."""
    if not raw.strip():
        raise bad_request("the request has no body: send the object as JSON")
    media = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if media in ("application/yaml", "application/apply-patch+yaml"):
        return limits.decode_yaml(raw)
    if media == protobuf.MEDIA_TYPE:
        decoded = _protobuf(raw)
        limits.check_plain(decoded)
        return decoded
    return limits.decode_json(raw)


def _protobuf(raw: bytes) -> Any:
    try:
        return protobuf.decode(raw)
    except protobuf.ProtobufError as exc:
        undecodable = "not decoded by" in str(exc)
        raise ApiError(
            415 if undecodable else 400, "UnsupportedMediaType" if undecodable else "BadRequest", str(exc)
        ) from None


def dumps(obj: Any) -> bytes:
    return jsoncodec.encode(obj)


def json_response(obj: Any, status_code: int = 200, warnings: list[str] | None = None) -> Response:
    response = Response(dumps(obj), status_code=status_code, media_type="application/json")
    for warning in warnings or []:
        # A header holds printable ASCII only: field names from input may hold anything else.
        text = warning.encode("ascii", "backslashreplace").decode("ascii")
        text = "".join(c if " " <= c < "\x7f" else f"\\x{ord(c):02x}" for c in text)
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.append("Warning", f'299 - "{escaped}"')
    return response


def error_response(error: ApiError) -> Response:
    return json_response(error.status(), error.code)


def wants_table(request: Request) -> bool:
    return "as=Table" in request.headers.get("accept", "")


def flag(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")
