"""ClusterRole aggregation (kube-controller-manager's ``clusterrole-aggregation`` controller): a
ClusterRole with an ``aggregationRule`` holds the rules of every other ClusterRole its label
selectors match, selector by selector, roles in name order, each rule once (upstream's order)."""

from __future__ import annotations

from typing import Any

from airflow_provider_training.specs.unstructured import Unstructured


def selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """A ``metav1.LabelSelector`` (``matchLabels`` and ``matchExpressions``) against ``labels``;
    an empty selector matches everything, as ``LabelSelectorAsSelector`` makes it."""
    if not isinstance(selector, dict):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False  # validation refuses these; a stored one (written around the API) selects nothing
    return True


def aggregated_rules(role: Unstructured, roles: list[Unstructured]) -> list[dict[str, Any]]:
    """The rules ``role`` (one with an aggregationRule) should hold, given every ClusterRole."""
    name = role["metadata"]["name"]
    ordered = sorted(roles, key=lambda r: r["metadata"]["name"])
    rules: list[dict[str, Any]] = []
    for selector in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
        for other in ordered:
            if other["metadata"]["name"] == name:
                continue
            if not selector_matches(selector, other["metadata"].get("labels") or {}):
                continue
            for rule in other.get("rules") or []:
                if rule not in rules:
                    rules.append(rule)
    return rules
