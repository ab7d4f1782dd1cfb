"""RBAC's semantics without a daemon: what a rule grants (kube-apiserver's evaluation helpers), what
a request asks (its RequestInfo), the escalation check's comparison and messages, aggregation, and
the 403 wording."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_training.embedded.apiserver.authz import forbidden, request_attributes
from airflow_provider_training.embedded.rbac import bootstrap
from airflow_provider_training.embedded.rbac.aggregation import aggregated_rules, selector_matches
from airflow_provider_training.embedded.rbac.rules import Attributes, CompiledRule, compact, compact_string, uncovered
from airflow_provider_training.embedded.rbac.user import UserInfo, service_account_user

SA = service_account_user("ns", "sa")


def allows(rule: dict[str, Any], **asked: Any) -> bool:
    return CompiledRule(rule).allows(Attributes(SA, **asked))


@pytest.mark.parametrize(
    ("rule", "asked", "expected"),
    [
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, {"verb": "get", "resource": "pods"}, True),
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, {"verb": "list", "resource": "pods"}, False),
        # a subresource is its own resource: pods does not grant pods/log, nor the other way round
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
            {"verb": "get", "resource": "pods", "subresource": "log"},
            False,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]},
            {"verb": "get", "resource": "pods", "subresource": "log"},
            True,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]},
            {"verb": "get", "resource": "pods", "subresource": "log"},
            True,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]},
            {"verb": "get", "resource": "pods"},
            False,
        ),
        ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verb": "escalate", "resource": "roles"}, True),
        # the API group must match: kubeflow.org's resources are not the core group's
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pytorchjobs"]},
            {"verb": "get", "api_group": "kubeflow.org", "resource": "pytorchjobs"},
            False,
        ),
        # resourceNames: only those names; a list (no name) is not one of them
        (
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
            {"verb": "get", "resource": "pods", "name": "a"},
            True,
        ),
        (
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
            {"verb": "list", "resource": "pods"},
            False,
        ),
        # non-resource URLs: exact, or a prefix with a trailing *
        (
            {"verbs": ["get"], "nonResourceURLs": ["/api/*"]},
            {"verb": "get", "resource_request": False, "path": "/api/v1"},
            True,
        ),
        (
            {"verbs": ["get"], "nonResourceURLs": ["/api"]},
            {"verb": "get", "resource_request": False, "path": "/api/v1"},
            False,
        ),
        ({"verbs": ["get"], "nonResourceURLs": ["/api/*"]}, {"verb": "get", "resource": "pods"}, False),
        (
            {"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]},
            {"verb": "get", "resource_request": False, "path": "/api"},
            False,
        ),
    ],
)
def test_what_a_rule_grants(rule: dict[str, Any], asked: dict[str, Any], expected: bool) -> None:
    assert allows(rule, **asked) is expected


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "api/v1/namespaces/ns/pods", {}, ("list", "ns", "", "pods", "", "")),
        ("GET", "api/v1/namespaces/ns/pods", {"watch": "true"}, ("watch", "ns", "", "pods", "", "")),
        # a list or watch of one object by name is authorized for that name (kubectl wait does this)
        (
            "GET",
            "apis/kubeflow.org/v1/namespaces/ns/pytorchjobs",
            {"watch": "1", "fieldSelector": "metadata.name=job"},
            ("watch", "ns", "kubeflow.org", "pytorchjobs", "", "job"),
        ),
        ("GET", "api/v1/namespaces/ns/pods/p/log", {}, ("get", "ns", "", "pods", "log", "p")),
        ("DELETE", "api/v1/namespaces/ns/pods", {}, ("deletecollection", "ns", "", "pods", "", "")),
        (
            "POST",
            "api/v1/namespaces/ns/serviceaccounts/sa/token",
            {},
            ("create", "ns", "", "serviceaccounts", "token", "sa"),
        ),
        # a namespace is authorized in itself; its status is a subresource of it
        ("GET", "api/v1/namespaces/ns", {}, ("get", "ns", "", "namespaces", "", "ns")),
        ("PUT", "api/v1/namespaces/ns/status", {}, ("update", "ns", "", "namespaces", "status", "ns")),
        ("GET", "api/v1/pods", {}, ("list", "", "", "pods", "", "")),
        # exec, over WebSocket (GET) too, is decided by create (see authz's docstring)
        ("GET", "api/v1/namespaces/ns/pods/p/exec", {}, ("create", "ns", "", "pods", "exec", "p")),
    ],
)
def test_what_a_request_asks(method: str, path: str, query: dict[str, str], expected: tuple[str, ...]) -> None:
    a = request_attributes(SA, method, path, query)
    assert a.resource_request
    assert (a.verb, a.namespace, a.api_group, a.resource, a.subresource, a.name) == expected


@pytest.mark.parametrize("path", ["api", "api/v1", "apis", "apis/kubeflow.org/v1", "version", "openapi/v3", "healthz"])
def test_discovery_paths_are_non_resource_requests(path: str) -> None:
    a = request_attributes(SA, "GET", path, {})
    assert (a.resource_request, a.verb, a.path) == (False, "get", f"/{path}")


def test_forbidden_is_in_kube_apiservers_words() -> None:
    listed = forbidden(request_attributes(SA, "GET", "api/v1/namespaces/ns/pods", {}))
    assert (listed.code, listed.reason) == (403, "Forbidden")
    assert listed.message == (
        'pods is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "pods" in API group "" '
        'in the namespace "ns"'
    )
    assert listed.details == {"kind": "pods"}
    log = forbidden(request_attributes(SA, "GET", "apis/kubeflow.org/v1/namespaces/ns/pytorchjobs/j", {}), "why")
    assert log.message == (
        'pytorchjobs.kubeflow.org "j" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource '
        '"pytorchjobs" in API group "kubeflow.org" in the namespace "ns": why'
    )
    cluster = forbidden(request_attributes(SA, "POST", "apis/rbac.authorization.k8s.io/v1/clusterroles", {}))
    assert cluster.message.endswith('in API group "rbac.authorization.k8s.io" at the cluster scope')
    path = forbidden(request_attributes(SA, "GET", "metrics", {}))
    assert path.message == 'forbidden: User "system:serviceaccount:ns:sa" cannot get path "/metrics"'
    # hostile input: a user name with markup is escaped as the API server escapes it
    hostile = UserInfo('<script>"x"')
    text = forbidden(request_attributes(hostile, "GET", "api/v1/namespaces/ns/pods", {})).message
    assert "<script>" not in text and '&lt;script&gt;\\"x\\"' in text


def test_escalation_check_compares_atoms_and_reports_them_compacted() -> None:
    owner = [
        {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]},
        {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["mine"]},
    ]
    assert uncovered(owner, [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]) == []
    assert (
        uncovered(owner, [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["mine"]}])
        == []
    )
    missing = uncovered(
        owner,
        [
            {"verbs": ["get", "watch", "delete"], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]},  # all secrets: more than "mine"
            {"verbs": ["get"], "nonResourceURLs": ["/metrics"]},
        ],
    )
    assert sorted(compact_string(r) for r in compact(missing)) == [
        '{APIGroups:[""], Resources:["pods"], Verbs:["watch" "delete"]}',
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}',
        '{NonResourceURLs:["/metrics"], Verbs:["get"]}',
    ]


def test_selectors_of_aggregation_rules() -> None:
    labels = {"rbac.authorization.k8s.io/aggregate-to-view": "true", "tier": "b"}
    assert selector_matches({"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}, labels)
    assert not selector_matches({"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}, labels)
    assert selector_matches({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["b"]}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "x", "operator": "Bogus"}]}, labels)


def test_the_bootstrap_policy_aggregates_view_into_edit_into_admin() -> None:
    roles = [dict(r) for r in bootstrap.default_objects() if r["kind"] == "ClusterRole"]
    by_name = {r["metadata"]["name"]: r for r in roles}
    by_name["view"]["rules"] = aggregated_rules(by_name["view"], roles)
    by_name["edit"]["rules"] = aggregated_rules(by_name["edit"], roles)
    by_name["admin"]["rules"] = aggregated_rules(by_name["admin"], roles)
    view = by_name["view"]["rules"]
    assert any("pods/log" in r.get("resources", []) for r in view)
    assert not any("secrets" in r.get("resources", []) for r in view)  # view never reads Secrets
    edit, admin = by_name["edit"]["rules"], by_name["admin"]["rules"]
    assert all(r in edit for r in view) and all(r in admin for r in edit)
    assert any("rolebindings" in r.get("resources", []) for r in admin)
    assert not any("rolebindings" in r.get("resources", []) for r in edit)
    training_admin = aggregated_rules(by_name["kubeflow-training-admin"], roles)
    assert training_admin == by_name["kubeflow-training-edit"]["rules"]
