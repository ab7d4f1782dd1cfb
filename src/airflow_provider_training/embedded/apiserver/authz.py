"""The one check every request passes, after authentication and before anything else: who is asking
(``authn``, then ``Impersonate-*`` headers), what they ask (kube-apiserver's ``RequestInfo``: verb,
API group, resource, subresource, namespace, name — or a non-resource path), and whether the
authorizer (``ServerContext.authorizer``: RBAC, or permissive) allows it. A refusal is the 403
kube-apiserver gives, in its words::

    pods is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "pods" in API group "" in the namespace "ns"

``pods/exec`` (and ``attach`` / ``portforward``) is authorized as ``create``: kube-apiserver ≥ 1.35
requires ``create`` on them for the WebSocket upgrade too (``AuthorizePodWebsocketUpgradeCreatePermission``),
and this server serves exec only over WebSocket, so ``create`` is what decides on either path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.errors import ApiError, bad_request
from airflow_provider_training.embedded.rbac import user as users
from airflow_provider_training.embedded.rbac.rules import Attributes, go_quote
from airflow_provider_training.embedded.rbac.user import UserInfo

_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
NAMESPACE_SUBRESOURCES = ("status", "finalize")
CONNECT_SUBRESOURCES = ("exec", "attach", "portforward")
IMPERSONATE_PREFIX = "impersonate-"
_SANITIZE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def check(ctx: ServerContext, method: str, path: str, headers: Mapping[str, str], query: Any) -> UserInfo:
    """The user a request acts as; raises the 401, 400 or 403 it gets instead."""
    user = ctx.authenticator.authenticate(headers.get("authorization", ""))
    if any(key.startswith(IMPERSONATE_PREFIX) for key in headers):
        user = impersonate(ctx, user, headers)
    attributes = request_attributes(user, method, path, query)
    decision = ctx.authorizer.authorize(attributes)
    if not decision.allowed:
        raise forbidden(attributes, decision.reason)
    return user


def request_attributes(user: UserInfo, method: str, path: str, query: Any) -> Attributes:
    """kube-apiserver's ``RequestInfoFactory.NewRequestInfo`` for the paths this server serves."""
    full = "/" + path.lstrip("/")
    parts = [p for p in path.split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis") or (parts[0] == "apis" and len(parts) < 4):
        return Attributes(user, method.lower(), resource_request=False, path=full)
    group, rest = ("", parts[1:]) if parts[0] == "api" else (parts[1], parts[2:])
    version, rest = rest[0], rest[1:]
    verb = _VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        watch = query.get("watch")
        verb = "watch" if watch is not None and watch.lower() not in ("false", "0", "") else "list"
        name = _selected_name(query.get("fieldSelector"))
    elif not name and verb == "delete":
        verb = "deletecollection"
    if subresource in CONNECT_SUBRESOURCES and resource == "pods":
        verb = "create"
    return Attributes(user, verb, True, namespace, group, version, resource, subresource, name, full)


def _selected_name(selector: str | None) -> str:
    """A list or watch of one object by ``metadata.name`` is authorized for that name (``resourceNames``)."""
    for term in (selector or "").split(","):
        field, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and field.strip() == "metadata.name":
            value = value.strip()
            if value not in ("", ".", "..") and "/" not in value and "%" not in value:
                return value
    return ""


def forbidden(a: Attributes, reason: str = "") -> ApiError:
    """``responsewriters.Forbidden``: ``forbiddenMessage`` + ``apierrors.NewForbidden``."""
    who = go_quote(a.user.name)
    if not a.resource_request:
        text = f"User {who} cannot {a.verb} path {go_quote(a.path)}".translate(_SANITIZE)
        return ApiError(403, "Forbidden", f"forbidden: {text}: {reason}" if reason else f"forbidden: {text}", {})
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    scope = f"in the namespace {go_quote(a.namespace)}" if a.namespace else "at the cluster scope"
    text = f"User {who} cannot {a.verb} resource {go_quote(resource)} in API group {go_quote(a.api_group)} {scope}"
    text = text.translate(_SANITIZE)
    if reason:
        text = f"{text}: {reason}"
    qualified = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
    subject = f"{qualified} {go_quote(a.name)}" if a.name else qualified
    details: dict[str, Any] = {"kind": a.resource}
    if a.name:
        details["name"] = a.name
    if a.api_group:
        details["group"] = a.api_group
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {text}", details)


def impersonate(ctx: ServerContext, requestor: UserInfo, headers: Mapping[str, str]) -> UserInfo:
    """``Impersonate-User`` / ``-Group`` / ``-Uid`` / ``-Extra-*``: each one needs the ``impersonate``
    verb on what it names (``users``, ``serviceaccounts``, ``groups``, ``uids``, ``userextras``)."""
    name = headers.get("impersonate-user", "")
    groups = [v.strip() for v in _all(headers, "impersonate-group")]
    uid = headers.get("impersonate-uid", "")
    extra: dict[str, list[str]] = {}
    for key in headers:
        if key.startswith("impersonate-extra-"):
            extra[unquote(key[len("impersonate-extra-") :]).lower()] = _all(headers, key)
    if not name:
        if groups or extra or uid:
            raise bad_request("requested impersonation of groups, extra or a uid without impersonating a user")
        return requestor
    checks: list[Attributes] = []
    account = users.split_service_account(name)
    if account is not None:
        checks.append(_acting(requestor, "serviceaccounts", account[1], account[0]))
    else:
        checks.append(_acting(requestor, "users", name))
    checks += [_acting(requestor, "groups", g) for g in groups]
    for key, values in extra.items():
        checks += [_acting(requestor, "userextras", v, group="authentication.k8s.io", sub=key) for v in values]
    if uid:
        checks.append(_acting(requestor, "uids", uid, group="authentication.k8s.io"))
    for attributes in checks:
        decision = ctx.authorizer.authorize(attributes)
        if not decision.allowed:
            raise forbidden(attributes, decision.reason)
    if account is not None and not groups:
        groups = list(users.service_account_groups(account[0]))[:2]
    if name != users.ANONYMOUS and not ({users.AUTHENTICATED, users.UNAUTHENTICATED} & set(groups)):
        groups.append(users.AUTHENTICATED)
    return UserInfo(name, uid, tuple(groups), tuple((k, tuple(v)) for k, v in extra.items()))


def _acting(
    requestor: UserInfo, resource: str, name: str, namespace: str = "", group: str = "", sub: str = ""
) -> Attributes:
    return Attributes(requestor, "impersonate", True, namespace, group, "", resource, sub, name)


def _all(headers: Mapping[str, str], key: str) -> list[str]:
    getlist = getattr(headers, "getlist", None)
    values = getlist(key) if getlist is not None else [headers[key]] if key in headers else []
    return [str(v) for v in values]
