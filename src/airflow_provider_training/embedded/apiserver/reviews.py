"""The review kinds: asked with a POST, answered at once, never stored (kube-apiserver's
``authorization.k8s.io`` and ``authentication.k8s.io`` REST handlers).

- ``SelfSubjectAccessReview`` (``kubectl auth can-i VERB RESOURCE``) and ``SubjectAccessReview`` /
  ``LocalSubjectAccessReview`` (for another user): the authorizer's decision;
- ``SelfSubjectRulesReview`` (``kubectl auth can-i --list``): the rules that apply in a namespace;
- ``SelfSubjectReview`` (``kubectl auth whoami``) and ``TokenReview``: who a request or a token is.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from airflow_provider_training.embedded.apiserver import errors
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.http import Target, json_response, read_body
from airflow_provider_training.embedded.apiserver.rbacadmission import requester
from airflow_provider_training.embedded.rbac.rules import Attributes
from airflow_provider_training.embedded.rbac.user import UserInfo
from airflow_provider_training.embedded.serviceaccount import ISSUER

EXACTLY_ONE = "exactly one of nonResourceAttributes or resourceAttributes must be specified"


async def create(request: Request, ctx: ServerContext, target: Target) -> Response:
    rt = target.rt
    body = await read_body(request, ctx.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body must be a JSON object describing a {rt.kind}")
    kind, api_version = body.get("kind", rt.kind), body.get("apiVersion", rt.api_version)
    if kind != rt.kind or api_version != rt.api_version:
        raise errors.bad_request(
            f"the object is a {kind} ({api_version}) but this URL serves {rt.kind} ({rt.api_version})"
        )
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    answer: dict[str, Any] = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"creationTimestamp": None}}
    user = requester(request)
    if rt.kind == "SelfSubjectReview":
        answer["status"] = {"userInfo": user.to_user_info()}
        return json_response(answer, 201)
    if rt.kind == "TokenReview":
        answer["spec"] = spec
        answer["status"] = _token_review(ctx, str(spec.get("token") or ""))
        return json_response(answer, 201)
    answer["spec"] = spec
    if rt.kind == "SelfSubjectRulesReview":
        answer["status"] = _rules(ctx, user, str(spec.get("namespace") or ""))
        return json_response(answer, 201)
    issues = _access_issues(spec, subject=rt.kind != "SelfSubjectAccessReview")
    if rt.kind == "LocalSubjectAccessReview":
        resource = spec.get("resourceAttributes")
        if isinstance(resource, dict) and resource.get("namespace", "") != target.namespace:
            issues.append(
                (
                    "spec.resourceAttributes.namespace",
                    f'Invalid value: "{resource.get("namespace", "")}": must match metadata.namespace',
                )
            )
        answer["metadata"]["namespace"] = target.namespace
    if issues:
        raise errors.invalid(rt, "", issues)
    if rt.kind != "SelfSubjectAccessReview":
        user = _subject(spec)
    decision = ctx.authorizer.authorize(_attributes(user, spec))
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    answer["status"] = status
    return json_response(answer, 201)


def _access_issues(spec: dict[str, Any], *, subject: bool) -> list[tuple[str, str]]:
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    issues: list[tuple[str, str]] = []
    if resource is not None and non_resource is not None:
        issues.append(
            (
                "spec.nonResourceAttributes",
                f"Invalid value: {_shown(non_resource)}: cannot be specified in combination with resourceAttributes",
            )
        )
    if resource is None and non_resource is None:
        issues.append(("spec.resourceAttributes", f'Invalid value: "null": {EXACTLY_ONE}'))
    if subject and not spec.get("user") and not spec.get("groups"):
        issues.append(
            ("spec.user", f'Invalid value: "{spec.get("user") or ""}": at least one of user or group must be specified')
        )
    return issues


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return (
            "&authorization.NonResourceAttributes{"
            + ", ".join(f"{k.capitalize()}:{v!r}" for k, v in value.items())
            + "}"
        )
    return '"null"'


def _subject(spec: dict[str, Any]) -> UserInfo:
    extra = spec.get("extra") if isinstance(spec.get("extra"), dict) else {}
    assert isinstance(extra, dict)
    return UserInfo(
        str(spec.get("user") or ""),
        str(spec.get("uid") or ""),
        tuple(str(g) for g in spec.get("groups") or []),
        tuple((str(k), tuple(str(x) for x in v or [])) for k, v in extra.items()),
    )


def _attributes(user: UserInfo, spec: dict[str, Any]) -> Attributes:
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return Attributes(
            user,
            str(resource.get("verb") or ""),
            True,
            str(resource.get("namespace") or ""),
            str(resource.get("group") or ""),
            str(resource.get("version") or "*"),
            str(resource.get("resource") or ""),
            str(resource.get("subresource") or ""),
            str(resource.get("name") or ""),
        )
    other = spec.get("nonResourceAttributes") or {}
    return Attributes(user, str(other.get("verb") or ""), False, path=str(other.get("path") or ""))


def _rules(ctx: ServerContext, user: UserInfo, namespace: str) -> dict[str, Any]:
    if not namespace:
        raise errors.bad_request("no namespace on request")
    rules, resolution_errors = ctx.authorizer.rules_for(user, namespace)
    resource_rules, url_rules = [], []
    for rule in rules:
        if rule.get("resources"):
            out = {"verbs": list(rule.get("verbs") or [])}
            for field in ("apiGroups", "resources", "resourceNames"):
                if rule.get(field):
                    out[field] = list(rule[field])
            resource_rules.append(out)
        if rule.get("nonResourceURLs"):
            url_rules.append({"verbs": list(rule.get("verbs") or []), "nonResourceURLs": list(rule["nonResourceURLs"])})
    status: dict[str, Any] = {"resourceRules": resource_rules, "nonResourceRules": url_rules, "incomplete": False}
    if resolution_errors:
        status["evaluationError"] = "; ".join(resolution_errors)
    return status


def _token_review(ctx: ServerContext, token: str) -> dict[str, Any]:
    try:
        who = ctx.authenticator.authenticate(f"Bearer {token}")
    except errors.ApiError as exc:
        return {"authenticated": False, "error": exc.message, "user": {}}
    return {"authenticated": True, "user": who.to_user_info(), "audiences": [ISSUER]}
