"""Kubeflow Trainer v2.3.0's TrainJob status server (``pkg/statusserver``), served by the embedded API
server at upstream's path: ``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/trainjobs/NAME/status``
with ``{"trainerStatus": {...}}``, what the Kubeflow SDK's ``update_trainjob_status`` sends.

Upstream runs it on a port of its own (10443) beside the controller; here it shares the API
server's address and certificate (the pods already reach both), and a POST to that path is this
server's (kube-apiserver answers 405 there). Its own authentication, not the API server's: a
projected service-account token whose audience is this TrainJob's endpoint
(``trainer.kubeflow.org/v1alpha1/namespaces/NS/trainjobs/NAME/status``), signed by this control
plane, not expired, of this namespace (upstream's checks), and — stricter than upstream, which
accepts any token with that audience — bound to a pod that exists and belongs to that TrainJob
(pod → Job → JobSet → TrainJob by controller ownerReferences). Answers as upstream: 413 ``Payload
too large`` over 64 KiB, 403 ``Forbidden`` (why is logged, never the token), 422 ``Invalid
payload`` when Go's JSON decoder would refuse the body, 422 with the API server's message when the
CRD's schema refuses the status (``progressPercentage`` over 100 …), 404 ``Train job not found``,
else 200 with the decoded request echoed. ``status.trainerStatus`` is replaced in one store write
(upstream's server-side apply with field owner ``trainer-status``, the only writer of it).
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from airflow_provider_training.embedded import serviceaccount
from airflow_provider_training.embedded.apiserver import limits
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.errors import ApiError
from airflow_provider_training.embedded.apiserver.trainer import check_trainer_status
from airflow_provider_training.embedded.resources import BY_KEY, PODS
from airflow_provider_training.embedded.store import ConflictError, Store
from airflow_provider_training.frameworks.trainer import trainerstatus as ts
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.unstructured import OwnerReference, Unstructured, controller_of

log = logging.getLogger(__name__)
TRAINJOBS = BY_KEY["trainer.kubeflow.org/trainjobs"]
PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"
_WRITE_ATTEMPTS = 5


def _status(message: str, reason: str, code: int) -> Response:
    """``badRequest``: a ``metav1.Status`` as Go's encoder writes it (no kind, an empty metadata)."""
    body = {"metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}
    return Response(json.dumps(body, separators=(",", ":")) + "\n", code, media_type="application/json")


def _ok(body: dict[str, Any]) -> Response:
    return Response(json.dumps(body, separators=(",", ":")) + "\n", 200, media_type="application/json")


def bearer(header: str) -> str:
    """``extractRawToken``: the credentials of a ``Bearer`` header with exactly two fields, else ""."""
    parts = header.split()
    return parts[1] if len(parts) == 2 and parts[0].lower() == "bearer" else ""


def refusal(store: Store, home_root: Any, header: str, namespace: str, name: str) -> str | None:
    """Why the request may not update TrainJob ``namespace/name`` (None: it may)."""
    token = bearer(header)
    if not token:
        return "no bearer token"
    try:
        identity = serviceaccount.verify(home_root, token, audience=ts.token_audience(namespace, name))
    except serviceaccount.TokenError as exc:
        return str(exc)
    if identity.namespace != namespace:
        return f"the token is of namespace {identity.namespace}"
    if not identity.pod:
        return "the token is not bound to a pod"
    pod = store.get(PODS.key, namespace, identity.pod)
    if pod is None or pod["metadata"].get("uid") != identity.pod_uid:
        return f"the token's pod {namespace}/{identity.pod} no longer exists"
    if not _pod_of(store, pod, name):
        return f"pod {namespace}/{identity.pod} is not a pod of TrainJob {namespace}/{name}"
    return None


def _controller(obj: Unstructured, kind: str) -> OwnerReference | None:
    ref = controller_of(obj)
    return ref if ref is not None and ref.get("kind") == kind else None


def _pod_of(store: Store, pod: Unstructured, trainjob: str) -> bool:
    """Pod → Job → JobSet → TrainJob ``trainjob``, each the controller owner of the one before (by uid)."""
    namespace = pod["metadata"]["namespace"]
    chain = (("Job", "batch/jobs"), (c.JOBSET, "jobset.x-k8s.io/jobsets"), (c.TRAINJOB, TRAINJOBS.key))
    current = pod
    for kind, resource in chain:
        ref = _controller(current, kind)
        if ref is None:
            return False
        owner = store.get(resource, namespace, str(ref.get("name", "")))
        if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
            return False
        current = owner
    return bool(current["metadata"]["name"] == trainjob)


async def _body(request: Request) -> bytes | None:
    """At most 64 KiB of the body; None past it (Go's ``MaxBytesReader`` fails the decoder then)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > c.STATUS_MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def update_trainjob_status(request: Request, ctx: ServerContext, namespace: str, name: str) -> Response:
    try:
        declared = limits.content_length(request.headers.get("content-length"))
    except ApiError:
        declared = 0
    if declared > c.STATUS_MAX_BODY_BYTES:
        return _status("Payload too large", "RequestEntityTooLarge", 413)
    why = refusal(ctx.store, ctx.home.root, request.headers.get("authorization", ""), namespace, name)
    if why is not None:
        log.info("status server: refused an update of TrainJob %s/%s: %s", namespace, name, why)
        return _status("Forbidden", "Forbidden", 403)
    raw = await _body(request)
    try:
        if raw is None:
            raise ts.PayloadError("http: request body too large")
        update = ts.decode_update(raw)
    except ts.PayloadError as exc:
        log.debug("status server: TrainJob %s/%s: invalid payload: %s", namespace, name, exc)
        return _status("Invalid payload", "Invalid", 422)
    if update.trainer_status is None:
        return _ok(ts.echo(update))
    applied = ts.applied_status(update.trainer_status)
    for _ in range(_WRITE_ATTEMPTS):
        current = ctx.store.get(TRAINJOBS.key, namespace, name)
        if current is None:
            return _status("Train job not found", "NotFound", 404)
        new = copy.deepcopy(current)
        new.setdefault("status", {})["trainerStatus"] = applied
        try:
            check_trainer_status(TRAINJOBS, new, current)
        except ApiError as exc:
            return _status(exc.message, "Invalid", 422)
        if new == current:
            return _ok(ts.echo(update))
        try:
            ctx.store.update(TRAINJOBS.key, new)  # (resourceVersion checked: a controller's write in between)
        except ConflictError:
            continue
        return _ok(ts.echo(update))
    return _status("Internal error", "InternalError", 500)
