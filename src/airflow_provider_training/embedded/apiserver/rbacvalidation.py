"""Defaults and validation of Roles, ClusterRoles, RoleBindings and ClusterRoleBindings, with
kube-apiserver's rules and field messages (``pkg/apis/rbac/validation``, ``rbac/v1`` defaults).
Each problem is a (field path, message) pair for a 422."""

from __future__ import annotations

from typing import Any

from airflow_provider_training.embedded.apiserver import builtin
from airflow_provider_training.specs.unstructured import Unstructured

Issues = list[tuple[str, str]]
GROUP = "rbac.authorization.k8s.io"
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _q(value: Any) -> str:
    text = str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _go_strings(values: list[Any]) -> str:
    """Go's ``%#v`` of a ``[]string`` (how field.Invalid prints a list)."""
    return "[]string{" + ", ".join(_q(v) for v in values) + "}"


def _unsupported(value: Any, supported: tuple[str, ...]) -> str:
    return f"Unsupported value: {_q(value)}: supported values: " + ", ".join(_q(s) for s in supported)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def default(kind: str, obj: Unstructured) -> None:
    """``SetDefaults_RoleBinding`` / ``_ClusterRoleBinding`` / ``_Subject``."""
    if kind not in ("RoleBinding", "ClusterRoleBinding"):
        return
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = GROUP
    for subject in _list(obj.get("subjects")):
        if isinstance(subject, dict) and not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = GROUP


def validate(kind: str, obj: Unstructured, old: Unstructured | None) -> Issues:
    issues: Issues = []
    if kind in ("Role", "ClusterRole"):
        for i, rule in enumerate(_list(obj.get("rules"))):
            issues += policy_rule(rule if isinstance(rule, dict) else {}, kind == "Role", f"rules[{i}]")
        if kind == "ClusterRole":
            issues += _aggregation_rule(obj.get("aggregationRule"))
        return issues
    ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
    assert isinstance(ref, dict)
    if ref.get("apiGroup") != GROUP:
        issues.append(("roleRef.apiGroup", _unsupported(ref.get("apiGroup", ""), (GROUP,))))
    kinds = ("Role", "ClusterRole") if kind == "RoleBinding" else ("ClusterRole",)
    if ref.get("kind") not in kinds:
        issues.append(("roleRef.kind", _unsupported(ref.get("kind", ""), kinds)))
    if not ref.get("name"):
        issues.append(("roleRef.name", "Required value"))
    else:
        issues += builtin.path_segment_name("roleRef.name", ref["name"])
    for i, subject in enumerate(_list(obj.get("subjects"))):
        issues += _subject(subject if isinstance(subject, dict) else {}, kind == "RoleBinding", f"subjects[{i}]")
    if old is not None and (old.get("roleRef") or {}) != ref:
        shown = (
            f"rbac.RoleRef{{APIGroup:{_q(ref.get('apiGroup', ''))}, Kind:{_q(ref.get('kind', ''))}, "
            f"Name:{_q(ref.get('name', ''))}}}"
        )
        issues.append(("roleRef", f"Invalid value: {shown}: cannot change roleRef"))
    return issues


def policy_rule(rule: dict[str, Any], namespaced: bool, path: str) -> Issues:
    """``validatePolicyRule``."""
    issues: Issues = []
    if not _list(rule.get("verbs")):
        issues.append((f"{path}.verbs", "Required value: verbs must contain at least one value"))
    urls = _list(rule.get("nonResourceURLs"))
    if urls:
        shown = _go_strings(urls)
        if namespaced:
            issues.append(
                (
                    f"{path}.nonResourceURLs",
                    f"Invalid value: {shown}: namespaced rules cannot apply to non-resource URLs",
                )
            )
        if _list(rule.get("apiGroups")) or _list(rule.get("resources")) or _list(rule.get("resourceNames")):
            issues.append(
                (
                    f"{path}.nonResourceURLs",
                    f"Invalid value: {shown}: rules cannot apply to both regular resources and non-resource URLs",
                )
            )
        return issues
    if not _list(rule.get("apiGroups")):
        issues.append((f"{path}.apiGroups", "Required value: resource rules must supply at least one api group"))
    if not _list(rule.get("resources")):
        issues.append((f"{path}.resources", "Required value: resource rules must supply at least one resource"))
    if _list(rule.get("resourceNames")) and len(_list(rule.get("resources"))) > 1:
        issues.append((f"{path}.resourceNames", "Required value: resource names cannot apply to multiple resources"))
    return issues


def _subject(subject: dict[str, Any], namespaced: bool, path: str) -> Issues:
    """``validateRoleBindingSubject``."""
    issues: Issues = []
    name, kind, group = subject.get("name") or "", subject.get("kind") or "", subject.get("apiGroup") or ""
    if not name:
        issues.append((f"{path}.name", "Required value"))
    if kind == "ServiceAccount":
        if name:
            issues += builtin.subdomain(f"{path}.name", name)
        if group:
            issues.append((f"{path}.apiGroup", _unsupported(group, ("",))))
        if not namespaced and not subject.get("namespace"):
            issues.append((f"{path}.namespace", "Required value"))
    elif kind in ("User", "Group"):
        if not name:
            issues.append((f"{path}.name", f'Invalid value: "": {kind.lower()} name cannot be empty'))
        if group != GROUP:
            issues.append((f"{path}.apiGroup", _unsupported(group, (GROUP,))))
    else:
        issues.append((f"{path}.kind", _unsupported(kind, SUBJECT_KINDS)))
    return issues


def _aggregation_rule(rule: Any) -> Issues:
    if rule is None:
        return []
    selectors = _list(rule.get("clusterRoleSelectors")) if isinstance(rule, dict) else []
    if not selectors:
        return [
            (
                "aggregationRule.clusterRoleSelectors",
                "Required value: at least one clusterRoleSelector required if aggregationRule is non-nil",
            )
        ]
    issues: Issues = []
    for i, selector in enumerate(selectors):
        for j, expr in enumerate(_list(selector.get("matchExpressions")) if isinstance(selector, dict) else []):
            at = f"aggregationRule.clusterRoleSelectors[{i}].matchExpressions[{j}]"
            operator, values = expr.get("operator"), _list(expr.get("values"))
            if operator not in SELECTOR_OPERATORS:
                issues.append((f"{at}.operator", f"Invalid value: {_q(operator)}: not a valid selector operator"))
            elif operator in ("In", "NotIn") and not values:
                issues.append((f"{at}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'"))
            elif operator in ("Exists", "DoesNotExist") and values:
                issues.append(
                    (f"{at}.values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
                )
    return issues
