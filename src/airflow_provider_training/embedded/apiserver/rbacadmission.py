"""Admission that needs to know who writes: RBAC objects and pods' service accounts.

- Roles, ClusterRoles and their bindings are defaulted and validated (``rbacvalidation``), then
  checked against escalation as kube-apiserver's RBAC storage does (``pkg/registry/rbac``): a user
  outside ``system:masters`` may write a role only with rules they hold themselves (or the
  ``escalate`` verb on it), an ``aggregationRule`` only holding everything, and a binding only to a
  role whose rules they hold (or with the ``bind`` verb on it). Refusals are its 403s::

      clusterrolebindings.rbac.authorization.k8s.io "x" is forbidden: user "u" (groups=["g"]) is
      attempting to grant RBAC permissions not currently held:
      {APIGroups:[""], Resources:["secrets"], Verbs:["get"]}

- A new pod's service account must exist (the ServiceAccount admission plugin:
  ``pods "p" is forbidden: error looking up service account ns/sa: serviceaccount "sa" not found``),
  and decides, when the pod does not, whether its token is mounted (``automountServiceAccountToken``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from airflow_provider_training.embedded import serviceaccount
from airflow_provider_training.embedded.apiserver import errors, rbacvalidation
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.rbac import user as users
from airflow_provider_training.embedded.rbac.index import FULL_AUTHORITY
from airflow_provider_training.embedded.rbac.rules import (
    Attributes,
    compact,
    compact_string,
    go_quote,
    go_quote_list,
    uncovered,
)
from airflow_provider_training.embedded.rbac.user import UserInfo
from airflow_provider_training.embedded.resources import (
    CLUSTER_ROLES,
    PODS,
    RBAC_TYPES,
    ROLES,
    SERVICE_ACCOUNTS,
    ResourceType,
)
from airflow_provider_training.specs.unstructured import Unstructured

RBAC_KEYS = frozenset(rt.key for rt in RBAC_TYPES)
# What a write may change without an escalation check: what the garbage collector needs.
_GC_FIELDS = ("ownerReferences", "finalizers", "resourceVersion", "managedFields", "generation")


def requester(request: Request) -> UserInfo:
    """Who sent ``request`` (set by the authorization check; the control plane's own writes: admin)."""
    user = getattr(request.state, "user", None)
    return user if isinstance(user, UserInfo) else users.ADMIN


def admit(request: Request, ctx: ServerContext, rt: ResourceType, obj: Unstructured, old: Unstructured | None) -> bool:
    """Admission of ``obj`` (``old``: the stored object of an update). For a new pod, returns
    whether its token is to be mounted; raises the refusal otherwise."""
    if rt.key in RBAC_KEYS:
        rbacvalidation.default(rt.kind, obj)
        issues = rbacvalidation.validate(rt.kind, obj, old)
        if issues:
            raise errors.invalid(rt, str(obj["metadata"].get("name") or ""), issues)
        _no_escalation(ctx, requester(request), rt, obj, old)
    elif rt is PODS and old is None:
        return _service_account(ctx, obj)
    return True


def _service_account(ctx: ServerContext, pod: Unstructured) -> bool:
    meta = pod["metadata"]
    name = serviceaccount.account_of(pod)
    if ctx.store.get(SERVICE_ACCOUNTS.key, meta["namespace"], name) is None:
        raise errors.ApiError(
            403,
            "Forbidden",
            f'pods "{meta["name"]}" is forbidden: error looking up service account {meta["namespace"]}/{name}: '
            f'serviceaccount "{name}" not found',
            {"name": meta["name"], "kind": "pods"},
        )
    return serviceaccount.automounts(ctx.store, pod)


def _only_gc_fields(obj: Unstructured, old: Unstructured | None) -> bool:
    if old is None:
        return False

    def strip(o: Unstructured) -> Unstructured:
        meta = {k: v for k, v in (o.get("metadata") or {}).items() if k not in _GC_FIELDS}
        return {**o, "metadata": meta}

    return strip(obj) == strip(old)


def _no_escalation(
    ctx: ServerContext, user: UserInfo, rt: ResourceType, obj: Unstructured, old: Unstructured | None
) -> None:
    if user.privileged or _only_gc_fields(obj, old):
        return
    meta = obj["metadata"]
    namespace, name = meta.get("namespace", ""), str(meta.get("name", ""))
    authorizer = ctx.authorizer
    if rt in (ROLES, CLUSTER_ROLES):
        escalate = Attributes(user, "escalate", True, namespace, rt.group, "*", rt.plural, "", name)
        if authorizer.authorize(escalate).allowed:
            return
        _confirm(ctx, user, rt, name, namespace, obj.get("rules") or [])
        if rt is CLUSTER_ROLES and (_aggregates(obj) or _aggregates(old)):
            owner, _ = authorizer.rules_for(user, namespace)
            if uncovered(owner, FULL_AUTHORITY):
                raise _forbidden(rt, name, "must have cluster-admin privileges to use the aggregationRule")
        return
    ref = obj.get("roleRef") or {}
    resource = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
    bind = Attributes(
        user, "bind", True, namespace, str(ref.get("apiGroup", "")), "", resource, "", str(ref.get("name"))
    )
    if authorizer.authorize(bind).allowed:
        return
    rules = authorizer.role_reference_rules(ref, namespace)
    if rules is None:
        raise errors.not_found(CLUSTER_ROLES if resource == "clusterroles" else ROLES, str(ref.get("name")))
    _confirm(ctx, user, rt, name, namespace, rules)


def _aggregates(role: Unstructured | None) -> bool:
    return bool(role and ((role.get("aggregationRule") or {}).get("clusterRoleSelectors")))


def _confirm(ctx: ServerContext, user: UserInfo, rt: ResourceType, name: str, namespace: str, rules: list[Any]) -> None:
    """``ConfirmNoEscalation``: the writer's own rules in ``namespace`` cover ``rules``."""
    owner, resolution_errors = ctx.authorizer.rules_for(user, namespace)
    missing = uncovered(owner, [r for r in rules if isinstance(r, dict)])
    if not missing:
        return
    described = sorted({compact_string(rule) for rule in compact(missing)})
    message = (
        f"user {go_quote(user.name)} (groups={go_quote_list(user.groups)}) is attempting to grant RBAC permissions "
        "not currently held:\n" + "\n".join(described)
    )
    if resolution_errors:
        message += f"; resolution errors: [{' '.join(resolution_errors)}]"
    raise _forbidden(rt, name, message)


def _forbidden(rt: ResourceType, name: str, message: str) -> errors.ApiError:
    details = {"name": name, "group": rt.group, "kind": rt.plural}
    return errors.ApiError(403, "Forbidden", f'{rt.qualified_name} "{name}" is forbidden: {message}', details)
