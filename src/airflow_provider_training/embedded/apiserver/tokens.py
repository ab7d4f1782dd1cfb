"""``TokenRequest`` (``POST …/serviceaccounts/NAME/token``, what ``kubectl create token NAME
--duration 1h`` sends): a token of the service account that expires, optionally bound to a pod
(``--bound-object-kind Pod --bound-object-name …``), answered as kube-apiserver answers it."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from airflow_provider_training.embedded import serviceaccount
from airflow_provider_training.embedded.apiserver import errors
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.http import Target, json_response, read_body
from airflow_provider_training.embedded.resources import PODS, SERVICE_ACCOUNTS
from airflow_provider_training.embedded.store import now_timestamp

KIND, API_VERSION = "TokenRequest", "authentication.k8s.io/v1"
DEFAULT_SECONDS = 3600  # kube-apiserver's default for a TokenRequest without expirationSeconds
MIN_SECONDS = 10 * 60
MAX_SECONDS = 1 << 32


def _invalid(name: str, field: str, message: str) -> errors.ApiError:
    cause = {"reason": "FieldValueInvalid", "message": message, "field": field}
    return errors.ApiError(
        422,
        "Invalid",
        f'{KIND}.authentication.k8s.io "{name}" is invalid: {field}: {message}',
        {"name": name, "group": "authentication.k8s.io", "kind": KIND, "causes": [cause]},
    )


async def create_token(request: Request, ctx: ServerContext, target: Target) -> Response:
    assert target.name is not None and target.namespace is not None
    name, namespace = target.name, target.namespace
    body = await read_body(request, ctx.settings.max_body_bytes)
    if (
        not isinstance(body, dict)
        or body.get("kind", KIND) != KIND
        or body.get("apiVersion", API_VERSION) != API_VERSION
    ):
        raise errors.bad_request(f"the body must be a {KIND} ({API_VERSION})")
    spec: dict[str, Any] = body.get("spec") if isinstance(body.get("spec"), dict) else {}  # type: ignore[assignment]
    seconds = spec.get("expirationSeconds", DEFAULT_SECONDS)
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise errors.bad_request(
            f'{KIND} in version "v1" cannot be handled as a {KIND}: json: cannot unmarshal '
            f"{type(seconds).__name__} into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64"
        )
    if seconds < MIN_SECONDS:
        raise _invalid(
            name, "spec.expirationSeconds", f"Invalid value: {seconds}: may not specify a duration less than 10 minutes"
        )
    if seconds > MAX_SECONDS:
        raise _invalid(
            name,
            "spec.expirationSeconds",
            f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds",
        )
    account = ctx.store.get(SERVICE_ACCOUNTS.key, namespace, name)
    if account is None:
        raise errors.not_found(SERVICE_ACCOUNTS, name)
    audiences = [str(a) for a in spec.get("audiences") or []] or [serviceaccount.ISSUER]
    pod = _bound_pod(ctx, namespace, spec.get("boundObjectRef"))
    expires = int(time.time()) + seconds
    token = serviceaccount.mint_request(
        ctx.home.root, namespace, name, account["metadata"]["uid"], audiences, expires, pod
    )
    out_spec: dict[str, Any] = {"audiences": audiences, "expirationSeconds": seconds}
    if pod is not None:
        out_spec["boundObjectRef"] = {"kind": "Pod", "apiVersion": "v1", "name": pod[0], "uid": pod[1]}
    answer = {
        "kind": KIND,
        "apiVersion": API_VERSION,
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now_timestamp()},
        "spec": out_spec,
        "status": {"token": token, "expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))},
    }
    return json_response(answer, 201)


def _bound_pod(ctx: ServerContext, namespace: str, ref: Any) -> tuple[str, str] | None:
    """``boundObjectRef``: the pod the token dies with (Secret and Node bindings are not served)."""
    if not isinstance(ref, dict) or not ref:
        return None
    kind = ref.get("kind")
    if kind != "Pod":
        raise errors.bad_request(
            f"cannot bind a token to a {kind or '(no kind)'}: the embedded control plane binds tokens to pods only "
            "(kubectl create token SA --bound-object-kind Pod --bound-object-name NAME)"
        )
    pod_name = str(ref.get("name", ""))
    pod = ctx.store.get(PODS.key, namespace, pod_name)
    if pod is None:
        raise errors.not_found(PODS, pod_name)
    uid = pod["metadata"]["uid"]
    if ref.get("uid") and ref["uid"] != uid:
        raise errors.ApiError(
            409,
            "Conflict",
            f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. "
            "The object might have been deleted and then recreated",
        )
    return pod_name, uid
