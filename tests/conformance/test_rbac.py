"""RBAC and service accounts with the real kubectl 1.37, as on a cluster: ``auth can-i`` for the
admin and for a pod's own token, ``auth whoami``, ``create token`` with expiry, what a pod's token
cannot do outside its Role, the escalation check, kube-apiserver's 422s for malformed RBAC objects,
the default service account and the ServiceAccount admission, and ClusterRole aggregation."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_training.embedded import ControlPlane, serviceaccount, start, stop
from tests.conformance.conftest import KUBECTL, Kubectl
from tests.fixtures.control_plane import FAST_SETTINGS

SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


def _pod(kubectl: Kubectl, name: str, wait: bool = True, **spec: Any) -> None:
    container = {"name": "main", "image": "python:3.11", "command": SLEEP}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container], **spec}}
    kubectl("create", "-f", "-", stdin=json.dumps(pod))
    if wait:
        kubectl("wait", "--for=condition=Ready", f"pod/{name}", timeout=90)


def _pod_token(control_plane: ControlPlane, kubectl: Kubectl, pod: str) -> str:
    """The token the kubelet mounted in ``pod`` (the node's copy of its projected volume)."""
    uid = kubectl("get", "pod", pod, "-o", "jsonpath={.metadata.uid}").stdout
    (token,) = (control_plane.home / "node" / "pods" / uid / "volumes").glob("kube-api-access-*/token")
    return token.read_text()


def _can(kubectl: Kubectl, *args: str) -> str:
    done = kubectl("auth", "can-i", *args, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.strip()


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _http(control_plane: ControlPlane, token: str, path: str, body: str | None = None) -> tuple[int, dict[str, Any]]:
    """GET ``path`` (POST ``body``) with ``token``: the status code and the answer."""
    context = ssl.create_default_context(cafile=str(control_plane.ca))
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(
        control_plane.api_url + path, data=body.encode() if body else None, headers=headers
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# -- who may do what -----------------------------------------------------------------------------------

# (verb, resource or URL, expected for a pod running as its namespace's default account)
DEFAULT_ACCOUNT_MATRIX = [
    ("list", "pods", "no"),
    ("get", "secrets", "no"),
    ("create", "pytorchjobs.kubeflow.org", "no"),
    ("create", "pods/exec", "no"),
    ("create", "rolebindings.rbac.authorization.k8s.io", "no"),
    ("impersonate", "serviceaccounts", "no"),
    ("list", "namespaces", "no"),
    # what every authenticated user has (system:basic-user, system:discovery, Trainer's runtimes)
    ("create", "selfsubjectaccessreviews.authorization.k8s.io", "yes"),
    ("get", "/apis", "yes"),
    ("get", "/version", "yes"),
    ("list", "clustertrainingruntimes.trainer.kubeflow.org", "yes"),
]


def test_can_i_for_the_admin_and_a_pods_default_account(
    kubectl: Kubectl, control_plane: ControlPlane, test_namespace: str
) -> None:
    assert _can(kubectl, "*", "*", "--all-namespaces") == "yes"  # system:masters
    whoami = kubectl("auth", "whoami").stdout
    assert "kubernetes-admin" in whoami and "[system:masters system:authenticated]" in whoami

    _pod(kubectl, "plain")
    token = _pod_token(control_plane, kubectl, "plain")
    seen = {(verb, what): _can(kubectl, "--token", token, verb, what) for verb, what, _ in DEFAULT_ACCOUNT_MATRIX}
    assert seen == {(verb, what): expected for verb, what, expected in DEFAULT_ACCOUNT_MATRIX}
    # the same answers for the admin asking on the account's behalf (Impersonate-User)
    as_default = f"--as=system:serviceaccount:{test_namespace}:default"
    assert _can(kubectl, "list", "pods", as_default) == "no"
    assert _can(kubectl, "list", "clustertrainingruntimes.trainer.kubeflow.org", as_default) == "yes"

    whoami = kubectl("--token", token, "auth", "whoami").stdout
    assert f"system:serviceaccount:{test_namespace}:default" in whoami
    assert f"[system:serviceaccounts system:serviceaccounts:{test_namespace} system:authenticated]" in whoami
    assert "authentication.kubernetes.io/pod-name" in whoami and "[plain]" in whoami
    listed = kubectl("--token", token, "auth", "can-i", "--list").stdout
    assert "selfsubjectaccessreviews.authorization.k8s.io" in listed and "pods " not in listed

    denied = kubectl("--token", token, "get", "pods", check=False)
    assert denied.returncode == 1
    assert denied.stderr.strip() == (
        f'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:{test_namespace}:default" '
        f'cannot list resource "pods" in API group "" in the namespace "{test_namespace}"'
    )


def test_a_pods_token_cannot_act_outside_its_role(
    kubectl: Kubectl, control_plane: ControlPlane, test_namespace: str
) -> None:
    kubectl("create", "serviceaccount", "reader")
    kubectl("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods")
    kubectl("create", "rolebinding", "pod-reader", "--role=pod-reader", f"--serviceaccount={test_namespace}:reader")
    assert f"{test_namespace}/reader" in kubectl("get", "rolebinding", "pod-reader", "-o", "wide").stdout
    _pod(kubectl, "victim")
    kubectl("create", "secret", "generic", "creds", "--from-literal=password=hunter2")
    _pod(kubectl, "reader", serviceAccountName="reader")
    token = _pod_token(control_plane, kubectl, "reader")
    user = f"system:serviceaccount:{test_namespace}:reader"

    assert "victim" in kubectl("--token", token, "get", "pods", "-o", "name").stdout  # what its Role grants
    other = kubectl("--token", token, "get", "pods", "-n", "kubeflow", check=False)  # another namespace
    assert f'User "{user}" cannot list resource "pods" in API group "" in the namespace "kubeflow"' in other.stderr
    secret = kubectl("--token", token, "get", "secret", "creds", check=False)
    assert (
        f'secrets "creds" is forbidden: User "{user}" cannot get resource "secrets" in API group "" '
        f'in the namespace "{test_namespace}"'
    ) in secret.stderr
    assert "hunter2" not in secret.stdout + secret.stderr
    exec_ = kubectl("--token", token, "exec", "victim", "--", "true", check=False)
    assert exec_.returncode != 0
    assert f'pods "victim" is forbidden: User "{user}" cannot create resource "pods/exec"' in exec_.stderr
    grant = kubectl(
        "--token",
        token,
        "create",
        "rolebinding",
        "more",
        "--clusterrole=admin",
        f"--serviceaccount={test_namespace}:reader",
        check=False,
    )
    assert 'cannot create resource "rolebindings"' in grant.stderr
    become = kubectl("--token", token, "get", "pods", "--as=system:admin", check=False)
    assert (
        f'users "system:admin" is forbidden: User "{user}" cannot impersonate resource "users" in API group ""'
        in become.stderr
    )
    token_for_other = kubectl("--token", token, "create", "token", "default", check=False)
    assert 'cannot create resource "serviceaccounts/token"' in token_for_other.stderr


def test_metrics_need_get_on_the_metrics_url_as_system_monitoring_grants(kubectl: Kubectl, test_namespace: str) -> None:
    """``/metrics`` is a non-resource URL: a service account reads it once bound to
    ``system:monitoring``, as on kube-apiserver; the admin always."""
    assert "apiserver_request_total" in kubectl("get", "--raw", "/metrics").stdout
    kubectl("create", "serviceaccount", "scraper")
    token = kubectl("create", "token", "scraper").stdout.strip()
    refused = kubectl("--token", token, "get", "--raw", "/metrics", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "Error from server (Forbidden): forbidden: "
        f'User "system:serviceaccount:{test_namespace}:scraper" cannot get path "/metrics"'
    )
    assert _can(kubectl, "--token", token, "get", "/metrics") == "no"
    binding = f"{test_namespace}-scraper"
    kubectl("create", "clusterrolebinding", binding, "--clusterrole=system:monitoring",
            f"--serviceaccount={test_namespace}:scraper")  # fmt: skip
    try:
        assert _can(kubectl, "--token", token, "get", "/metrics") == "yes"
        assert "apiserver_request_total" in kubectl("--token", token, "get", "--raw", "/metrics").stdout
        assert "forbidden" in kubectl("--token", token, "get", "--raw", "/metrics/other", check=False).stderr
    finally:
        kubectl("delete", "clusterrolebinding", binding)


# -- service accounts and their tokens ------------------------------------------------------------------


def test_token_requests_expire_and_name_their_account(
    kubectl: Kubectl, control_plane: ControlPlane, test_namespace: str
) -> None:
    kubectl("create", "serviceaccount", "robot")
    token = kubectl("create", "token", "robot", "--duration", "10m").stdout.strip()
    claims = _claims(token)
    assert claims["exp"] - claims["iat"] == 600
    assert claims["sub"] == f"system:serviceaccount:{test_namespace}:robot"
    assert f"system:serviceaccount:{test_namespace}:robot" in kubectl("--token", token, "auth", "whoami").stdout

    short = kubectl("create", "token", "robot", "--duration", "5m", check=False)
    assert short.stderr.strip() == (
        'error: failed to create token: TokenRequest.authentication.k8s.io "robot" is invalid: '
        "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"
    )
    missing = kubectl("create", "token", "nobody", check=False)
    assert 'serviceaccounts "nobody" not found' in missing.stderr

    # a token whose time has passed (minted as TokenRequest mints them, an hour ago for ten minutes)
    uid = kubectl("get", "serviceaccount", "robot", "-o", "jsonpath={.metadata.uid}").stdout
    expired = serviceaccount.mint_request(
        control_plane.home, test_namespace, "robot", uid, [serviceaccount.ISSUER], int(time.time()) - 3000
    )
    refused = kubectl("--token", expired, "auth", "whoami", check=False)
    assert refused.returncode == 1 and "Unauthorized" in refused.stderr
    code, status = _http(control_plane, expired, "/api")
    assert (code, status["reason"]) == (401, "Unauthorized")
    assert "expired" in status["message"] and expired not in status["message"]

    # a token bound to a pod dies with the pod; every token of a deleted account dies with it
    _pod(kubectl, "holder")
    bound = kubectl(
        "create", "token", "robot", "--bound-object-kind", "Pod", "--bound-object-name", "holder"
    ).stdout.strip()
    assert _http(control_plane, bound, "/api")[0] == 200
    kubectl("delete", "pod", "holder", "--grace-period=1", "--wait", timeout=60)
    assert _http(control_plane, bound, "/api")[0] == 401
    assert _http(control_plane, token, "/api")[0] == 200
    kubectl("delete", "serviceaccount", "robot")
    code, status = _http(control_plane, token, "/api")
    assert code == 401 and f"service account {test_namespace}/robot" in status["message"]


def test_accounts_exist_with_their_namespace_and_pods_must_name_one(kubectl: Kubectl, test_namespace: str) -> None:
    assert kubectl("get", "serviceaccounts", "-o", "name").stdout.split() == ["serviceaccount/default"]
    refused = kubectl(
        "run", "orphan", "--image=python:3.11", "--overrides", '{"spec":{"serviceAccountName":"ghost"}}', check=False
    )
    assert refused.stderr.strip() == (
        f'Error from server (Forbidden): pods "orphan" is forbidden: error looking up service account '
        f'{test_namespace}/ghost: serviceaccount "ghost" not found'
    )
    # automountServiceAccountToken: the account's choice, unless the pod makes its own
    kubectl(
        "create",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "quiet"},
                "automountServiceAccountToken": False,
            }
        ),
    )
    _pod(kubectl, "silent", wait=False, serviceAccountName="quiet")
    _pod(kubectl, "chatty", wait=False, serviceAccountName="quiet", automountServiceAccountToken=True)
    volumes = {
        name: [
            v["name"] for v in json.loads(kubectl("get", "pod", name, "-o", "json").stdout)["spec"].get("volumes", [])
        ]
        for name in ("silent", "chatty")
    }
    assert volumes["silent"] == []
    assert [v.startswith("kube-api-access-") for v in volumes["chatty"]] == [True]
    # a deleted default account comes back (the serviceaccounts controller)
    kubectl("delete", "serviceaccount", "default")
    kubectl("wait", "--for=create", "serviceaccount/default", "--timeout=30s", timeout=40)


# -- the escalation check --------------------------------------------------------------------------


def test_roles_and_bindings_cannot_grant_what_their_writer_does_not_hold(kubectl: Kubectl, test_namespace: str) -> None:
    kubectl("create", "serviceaccount", "lead")
    kubectl("create", "rolebinding", "lead-admin", "--clusterrole=admin", f"--serviceaccount={test_namespace}:lead")
    token = kubectl("create", "token", "lead").stdout.strip()
    groups = f'["system:serviceaccounts" "system:serviceaccounts:{test_namespace}" "system:authenticated"]'
    user = f"system:serviceaccount:{test_namespace}:lead"

    escalate = kubectl(
        "--token",
        token,
        "create",
        "rolebinding",
        "root",
        "--clusterrole=cluster-admin",
        f"--serviceaccount={test_namespace}:lead",
        check=False,
    )
    assert escalate.stderr.strip() == (
        f'error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io "root" is forbidden: user "{user}" '
        f"(groups={groups}) is attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}'
    )
    assert kubectl("get", "rolebinding", "root", check=False).returncode == 1  # nothing was stored
    # what the writer holds it may grant: admin includes view
    kubectl("--token", token, "create", "rolebinding", "viewers", "--clusterrole=view", "--group=readers")
    role = kubectl(
        "--token",
        token,
        "create",
        "role",
        "nodes",
        "--verb=get",
        "--resource=pods,customresourcedefinitions.apiextensions.k8s.io",
        check=False,
    )
    assert '{APIGroups:["apiextensions.k8s.io"], Resources:["customresourcedefinitions"], Verbs:["get"]}' in role.stderr
    # ... or what it may `bind` / `escalate` explicitly
    kubectl(
        "create",
        "clusterrole",
        f"bind-{test_namespace}",
        "--verb=bind",
        "--resource=clusterroles",
        "--resource-name=cluster-admin",
    )
    kubectl(
        "create",
        "rolebinding",
        "lead-bind",
        f"--clusterrole=bind-{test_namespace}",
        f"--serviceaccount={test_namespace}:lead",
    )
    kubectl("--token", token, "create", "rolebinding", "root", "--clusterrole=cluster-admin", "--user=ops")
    kubectl("delete", "clusterrole", f"bind-{test_namespace}")
    # a binding to a role that does not exist: 404 for a writer without `bind` (nothing to compare)
    ghost = kubectl(
        "--token", token, "create", "rolebinding", "ghost", "--clusterrole=no-such-role", "--user=ops", check=False
    )
    assert 'clusterroles.rbac.authorization.k8s.io "no-such-role" not found' in ghost.stderr


def test_aggregation_rules_need_everything(kubectl: Kubectl, test_namespace: str) -> None:
    name = f"roles-{test_namespace}"
    kubectl("create", "serviceaccount", "roler")
    kubectl(
        "create", "clusterrole", name, "--verb=create,get,update", "--resource=clusterroles.rbac.authorization.k8s.io"
    )
    kubectl("create", "clusterrolebinding", name, f"--clusterrole={name}", f"--serviceaccount={test_namespace}:roler")
    token = kubectl("create", "token", "roler").stdout.strip()
    try:
        aggregated = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"agg-{test_namespace}"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"anything": "true"}}]},
        }
        refused = kubectl("--token", token, "create", "-f", "-", stdin=json.dumps(aggregated), check=False)
        assert "must have cluster-admin privileges to use the aggregationRule" in refused.stderr
    finally:
        kubectl("delete", "clusterrolebinding", name)
        kubectl("delete", "clusterrole", name)


# -- malformed objects -----------------------------------------------------------------------------------

MALFORMED = [
    (
        {
            "kind": "Role",
            "metadata": {"name": "bad"},
            "rules": [{"apiGroups": [""], "resources": []}, {"nonResourceURLs": ["/x"], "verbs": ["get"]}],
        },
        'Role.rbac.authorization.k8s.io "bad" is invalid: [rules[0].verbs: Required value: verbs must contain at least '
        "one value, rules[0].resources: Required value: resource rules must supply at least one resource, "
        'rules[1].nonResourceURLs: Invalid value: []string{"/x"}: namespaced rules cannot apply to non-resource URLs]',
    ),
    (
        {
            "kind": "RoleBinding",
            "metadata": {"name": "badb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Foo", "name": "a%b"},
            "subjects": [{"kind": "Robot", "name": "r"}, {"kind": "ServiceAccount", "name": "Bad_Name"}],
        },
        'RoleBinding.rbac.authorization.k8s.io "badb" is invalid: [roleRef.kind: Unsupported value: "Foo": supported '
        'values: "Role", "ClusterRole", roleRef.name: Invalid value: "a%b": may not contain \'%\', subjects[0].kind: '
        'Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group", subjects[1].name: Invalid '
        "value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]",
    ),
    (
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "badc"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Group", "name": "g", "apiGroup": "x"}],
        },
        'ClusterRoleBinding.rbac.authorization.k8s.io "badc" is invalid: [roleRef.kind: Unsupported value: "Role": '
        'supported values: "ClusterRole", subjects[0].namespace: Required value, subjects[1].apiGroup: Unsupported '
        'value: "x": supported values: "rbac.authorization.k8s.io"]',
    ),
    (
        {
            "kind": "ClusterRole",
            "metadata": {"name": "badr"},
            "aggregationRule": {"clusterRoleSelectors": []},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "services"], "resourceNames": ["x"]}],
        },
        'ClusterRole.rbac.authorization.k8s.io "badr" is invalid: [rules[0].resourceNames: Required value: resource '
        "names cannot apply to multiple resources, aggregationRule.clusterRoleSelectors: Required value: at least one "
        "clusterRoleSelector required if aggregationRule is non-nil]",
    ),
]


@pytest.mark.parametrize(("obj", "message"), MALFORMED, ids=[m[0]["kind"] for m in MALFORMED])
def test_malformed_rbac_objects_get_kube_apiservers_422(
    kubectl: Kubectl, control_plane: ControlPlane, test_namespace: str, obj: dict[str, Any], message: str
) -> None:
    body = {"apiVersion": "rbac.authorization.k8s.io/v1", **obj}
    plural = obj["kind"].lower() + "s"
    scope = f"namespaces/{test_namespace}/" if not obj["kind"].startswith("Cluster") else ""
    code, status = _http(
        control_plane, control_plane.token, f"/apis/rbac.authorization.k8s.io/v1/{scope}{plural}", json.dumps(body)
    )
    assert (code, status["reason"], status["message"]) == (422, "Invalid", message)
    # kubectl lists the same causes, one a line
    done = kubectl("create", "-f", "-", stdin=json.dumps(body), check=False)
    assert done.stderr.startswith(f'The {obj["kind"]} "{obj["metadata"]["name"]}" is invalid: ')
    for cause in status["details"]["causes"]:
        assert f"* {cause['field']}: {cause['message']}" in done.stderr
    assert kubectl("get", obj["kind"].lower(), obj["metadata"]["name"], check=False).returncode == 1


def test_a_binding_keeps_its_role_and_oversized_or_hostile_input_is_refused(kubectl: Kubectl) -> None:
    kubectl("create", "rolebinding", "fixed", "--clusterrole=view", "--user=ops")
    moved = kubectl("patch", "rolebinding", "fixed", "--type=merge", "-p", '{"roleRef":{"name":"edit"}}', check=False)
    assert moved.stderr.strip() == (
        'The RoleBinding "fixed" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", '
        'Kind:"ClusterRole", Name:"edit"}: cannot change roleRef'
    )
    # a role of 4 MiB of rules is over the API server's 3 MiB limit: 413, nothing stored
    huge = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "huge"},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": [f"r{i:07d}" for i in range(400_000)]}],
    }
    too_big = kubectl("create", "-f", "-", stdin=json.dumps(huge), check=False, timeout=60)
    assert too_big.returncode == 1 and "Request entity too large" in too_big.stderr
    # names: "system:" colons are fine for RBAC objects (path segments), a slash or % is not
    kubectl("create", "role", "system:team:reader", "--verb=get", "--resource=pods")
    hostile = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "a%2e\n<b>"},
        "rules": [],
    }
    refused = kubectl("create", "-f", "-", stdin=json.dumps(hostile), check=False)
    assert refused.returncode == 1 and "may not contain '%'" in refused.stderr


# -- the objects themselves ---------------------------------------------------------------------------


def test_kubectl_gets_and_describes_the_default_policy_and_aggregates_new_roles(
    kubectl: Kubectl, test_namespace: str
) -> None:
    names = kubectl("get", "clusterroles", "-o", "name").stdout.split()
    for expected in (
        "admin",
        "edit",
        "view",
        "cluster-admin",
        "system:basic-user",
        "kubeflow-training-edit",
        "kubeflow-trainer-edit",
    ):
        assert f"clusterrole.rbac.authorization.k8s.io/{expected}" in names
    described = kubectl("describe", "clusterrolebinding", "cluster-admin").stdout
    assert "Group  system:masters" in described
    wide = kubectl("get", "clusterrolebinding", "system:public-info-viewer", "-o", "wide").stdout
    assert "ClusterRole/system:public-info-viewer" in wide and "system:authenticated, system:unauthenticated" in wide

    extra = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": f"view-extra-{test_namespace}",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"},
        },
        # what view does not grant: one Secret, by name
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [test_namespace]}],
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(extra))
    as_viewer = ["--as=someone", "--as-group=viewers"]
    kubectl("create", "clusterrolebinding", f"viewers-{test_namespace}", "--clusterrole=view", "--group=viewers")
    try:
        deadline = time.monotonic() + 20
        while _can(kubectl, "get", f"secret/{test_namespace}", *as_viewer) != "yes":
            assert time.monotonic() < deadline, "view did not aggregate the new role"
            time.sleep(0.1)
        for aggregated in ("edit", "admin"):  # view aggregates into edit, edit into admin
            rules = yaml.safe_load(kubectl("get", "clusterrole", aggregated, "-o", "yaml").stdout)["rules"]
            assert extra["rules"][0] in rules
        kubectl("delete", "clusterrole", extra["metadata"]["name"])
        deadline = time.monotonic() + 20
        while _can(kubectl, "get", f"secret/{test_namespace}", *as_viewer) != "no":
            assert time.monotonic() < deadline, "view kept the deleted role's rules"
            time.sleep(0.1)
    finally:
        kubectl("delete", "clusterrolebinding", f"viewers-{test_namespace}")
        kubectl("delete", "clusterrole", extra["metadata"]["name"], "--ignore-not-found")


# -- the switch ------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_permissive_mode_lets_every_token_do_everything_and_a_wrong_mode_stops_the_daemon(tmp_path: Path) -> None:
    home = tmp_path / "permissive"
    plane = start(home, env={**FAST_SETTINGS, "AIRFLOW_TRAINING_AUTHORIZATION": "permissive"})
    try:
        env = {"KUBECONFIG": str(plane.kubeconfig), "KUBECACHEDIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([str(KUBECTL), *args], env=env, capture_output=True, text=True, timeout=30)

        token = run("create", "token", "default").stdout.strip()
        assert run("--token", token, "auth", "can-i", "delete", "secrets", "-A").stdout.strip() == "yes"
        assert run("--token", token, "get", "secrets", "-n", "kube-system").returncode == 0
    finally:
        stop(home)
    wrong = tmp_path / "wrong"
    with pytest.raises(Exception, match="not an authorization mode"):
        start(wrong, env={**FAST_SETTINGS, "AIRFLOW_TRAINING_AUTHORIZATION": "allow-all"}, timeout=20)
