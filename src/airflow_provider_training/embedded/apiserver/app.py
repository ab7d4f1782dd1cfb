"""The FastAPI application: health endpoints, Trainer's TrainJob status server (a POST to a TrainJob's
``status``, with its own token check), then for every other request one authentication and
authorization check (``authz.check``), and one dispatcher that routes Kubernetes REST paths
(discovery, OpenAPI, resources and their subresources, the review kinds, TokenRequest) to the handlers."""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.websockets import WebSocket

from airflow_provider_training.embedded.apiserver import (
    authz,
    crud,
    discovery,
    errors,
    metrics,
    operatorpod,
    reviews,
    statusserver,
    tokens,
)
from airflow_provider_training.embedded.apiserver import exec as exec_
from airflow_provider_training.embedded.apiserver.apply import server_side_apply
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.http import (
    Target,
    error_response,
    flag,
    json_response,
    parse_target,
)
from airflow_provider_training.embedded.apiserver.logs import logs
from airflow_provider_training.embedded.apiserver.patch import APPLY_PATCH
from airflow_provider_training.embedded.apiserver.watch import watch
from airflow_provider_training.embedded.resources import GROUP_VERSIONS
from airflow_provider_training.embedded.store import StoreDamagedError, StoreFullError

log = logging.getLogger(__name__)
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
HEALTH = ("/healthz", "/livez", "/readyz")


def _discovery(request: Request, path: str) -> Any:
    parts = [p for p in path.split("/") if p]
    if parts == ["version"]:
        return discovery.version()
    if parts == ["api"]:
        return discovery.api_versions(f"{request.url.hostname}:{request.url.port}")
    if parts == ["apis"]:
        return discovery.api_group_list()
    if parts == ["api", "v1"]:
        return discovery.api_resource_list("", "v1")
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in GROUP_VERSIONS:
        return discovery.api_group(parts[1])
    if len(parts) == 3 and parts[0] == "apis":
        return discovery.api_resource_list(parts[1], parts[2])
    return None


def _openapi(path: str) -> Response | None:
    parts = [p for p in path.split("/") if p]
    if parts == ["openapi", "v3"]:
        return json_response(discovery.openapi_v3_root())
    if parts[:2] == ["openapi", "v3"] and len(parts) in (4, 5):
        group, version = ("", parts[3]) if parts[2] == "api" else (parts[3], parts[4] if len(parts) == 5 else "")
        body = discovery.openapi_v3_cached(group, version)
        if body is not None:
            return Response(body, media_type="application/json")
    return None


# How kube-apiserver's metrics name each verb (``metrics.py``).
KUBE_VERBS = {"create": "POST", "update": "PUT", "deletecollection": "DELETECOLLECTION"}


async def _resource(request: Request, ctx: ServerContext, path: str) -> Response:
    """Answer a request about a resource, counted in ``/metrics`` (a watch counts itself: it is
    open long after this returns)."""
    target = parse_target(path)
    verb = _verb(request, target)
    key = metrics.labels(KUBE_VERBS.get(verb, verb), target)
    try:
        response = await _answer(request, ctx, target, verb)
    except errors.ApiError as exc:
        ctx.metrics.answered(key, exc.code)
        raise
    if verb != "watch" or response.status_code != 200:
        ctx.metrics.answered(key, response.status_code)
    return response


def _verb(request: Request, target: Target) -> str:
    method = request.method
    if target.name is None and method == "GET":
        return "watch" if flag(request.query_params.get("watch")) else "list"
    if target.name is None and method == "DELETE":
        return "deletecollection"
    if method == "PATCH" and request.headers.get("content-type", "").startswith(APPLY_PATCH):
        return "apply"
    return {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]


async def _answer(request: Request, ctx: ServerContext, target: Target, verb: str) -> Response:
    rt, method = target.rt, request.method
    if target.name is None:
        if method not in ("GET", "DELETE", "POST"):
            raise errors.method_not_allowed()
    elif target.subresource == "token" and method == "POST":
        return await tokens.create_token(request, ctx, target)
    elif method == "POST" or (target.subresource and method == "DELETE"):
        raise errors.method_not_allowed()
    if not rt.stored:  # the review kinds: created (answered), nothing else
        if verb != "create":
            raise errors.method_not_allowed()
        return await reviews.create(request, ctx, target)
    if target.subresource == "log":
        if method != "GET":
            raise errors.method_not_allowed()
        return operatorpod.logs(request, ctx, target.namespace, target.name) or await logs(request, ctx, target)
    checked = "patch" if verb == "apply" else verb
    if checked not in rt.verbs and not (target.subresource == "status" and checked in ("get", "update", "patch")):
        raise errors.method_not_allowed(
            f"{rt.qualified_name} is read-only on the embedded control plane"
            if rt.read_only
            else "the server does not allow this method on the requested resource"
        )
    if verb == "apply":
        return await server_side_apply(request, ctx, target)
    handler = {
        "watch": watch,
        "list": crud.list_,
        "create": crud.create,
        "deletecollection": crud.delete_collection,
        "get": crud.get,
        "update": crud.replace,
        "patch": crud.patch,
        "delete": crud.delete,
    }[verb]
    return await handler(request, ctx, target)


def create_app(ctx: ServerContext) -> FastAPI:
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, title="airflow-training control plane")
    app.state.ctx = ctx

    @app.get("/healthz")
    @app.get("/livez")
    @app.get("/readyz")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/metrics")
    async def request_metrics(request: Request) -> Response:
        """kube-apiserver's request counters (``metrics.py``), for whoever may ``get`` the non-resource
        URL ``/metrics`` (``system:monitoring``, ``cluster-admin``; a pod's account only when bound)."""
        try:
            authz.check(ctx, "GET", "metrics", request.headers, request.query_params)
        except errors.ApiError as exc:
            return error_response(exc)
        return PlainTextResponse(ctx.metrics.text(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.post(statusserver.PATH)
    async def trainjob_status(request: Request, namespace: str, name: str) -> Response:
        """Trainer's status server (its own token check, not the API server's: ``statusserver.py``)."""
        try:
            return await statusserver.update_trainjob_status(request, ctx, namespace, name)
        except Exception:  # upstream's recovery middleware: a Status, never a dropped connection
            log.exception("internal error serving the status of TrainJob %s/%s", namespace, name)
            return error_response(errors.ApiError(500, "InternalError", "Internal Server Error"))

    @app.websocket("/api/v1/namespaces/{namespace}/pods/{name}/exec")
    async def pod_exec(websocket: WebSocket, namespace: str, name: str) -> None:
        try:
            websocket.state.user = authz.check(
                ctx, "GET", websocket.url.path, websocket.headers, websocket.query_params
            )
        except errors.ApiError as exc:
            await exec_.deny(websocket, error_response(exc))
            return
        await exec_.serve(websocket, ctx, namespace, name)

    @app.api_route("/{path:path}", methods=METHODS)
    async def dispatch(request: Request, path: str) -> Response:
        try:
            # who asks, and may they: the one authorization check of a request (401 / 403 otherwise)
            request.state.user = authz.check(ctx, request.method, path, request.headers, request.query_params)
            if request.method == "GET":
                if (body := _discovery(request, path)) is not None:
                    return json_response(body)
                if path.startswith("openapi/"):
                    return _openapi(path) or error_response(errors.path_not_found())
            if (refusal := exec_.plain_http(ctx, path, request.query_params)) is not None:
                raise refusal
            return await _resource(request, ctx, path)
        except errors.ApiError as exc:
            return error_response(exc)
        except StoreFullError as exc:  # nothing was written; it works again once space is freed
            log.warning("%s", exc)
            return error_response(errors.ApiError(507, "InsufficientStorage", str(exc)))
        except sqlite3.DatabaseError as exc:
            log.error("the store %s failed: %s", ctx.store.path, exc)
            return error_response(
                errors.ApiError(500, "InternalError", str(StoreDamagedError(ctx.store.path, str(exc))))
            )
        except Exception as exc:  # keep serving; the client gets a Status, the log the traceback
            log.exception("internal error serving %s %s", request.method, request.url.path)
            return error_response(errors.ApiError(500, "InternalError", f"an error on the server: {exc}"))

    return app
