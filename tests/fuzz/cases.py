"""Generated requests for every route of the embedded API server: bodies (valid objects mutated at
random paths, arbitrary JSON, YAML and bytes), query strings and patches of each type. Shared by
the CI slice (``test_api_fuzz.py``) and the longer run in ``benchmarks/hardening.py``.

A case is (method, path, query, content type, body bytes). ``send`` runs one and returns the
status code; streaming answers (watch, ``logs -f``) are judged by their status line and closed.
Nothing here creates a pod that runs: pods and pod templates are bound to a node nobody serves.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import strategies as st

FUZZ_NODE = "fuzz-node-nobody-serves"
PODS_TEMPLATE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app": "fuzz"}},
    "spec": {
        "nodeName": FUZZ_NODE,
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "python:3.11",
                "command": ["true"],
                "env": [{"name": "A", "value": "1"}],
                "volumeMounts": [{"name": "v", "mountPath": "/v", "subPath": "s"}],
                "resources": {"limits": {"cpu": "1", "memory": "64Mi"}},
            }
        ],
        "volumes": [{"name": "v", "configMap": {"name": "c", "items": [{"key": "k", "path": "k"}]}}],
    },
}
TEMPLATES: dict[str, dict[str, Any]] = {
    "configmaps": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}},
    "secrets": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg=="}},
    "pods": PODS_TEMPLATE,
    "services": {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "svc"},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}], "selector": {"app": "fuzz"}},
    },
    "persistentvolumeclaims": {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "claim"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    },
    "events": {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "Fuzz",
        "message": "m",
    },
    "jobs": {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": copy.deepcopy(PODS_TEMPLATE["spec"])}, "backoffLimit": 0},
    },
    "pytorchjobs": {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pj"},
        "spec": {
            "runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": copy.deepcopy(PODS_TEMPLATE["spec"])}},
            },
        },
    },
    "roles": {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "r"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"], "resourceNames": ["p"]}
        ],
    },
    "rolebindings": {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "default"}, {"kind": "Group", "name": "g"}],
    },
    "serviceaccounts": {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "sa"},
        "automountServiceAccountToken": False,
    },
    "tokenrequests": {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {},
        "spec": {"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 600},
    },
    "selfsubjectaccessreviews": {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "metadata": {},
        "spec": {"resourceAttributes": {"namespace": "ns", "verb": "get", "resource": "pods", "name": "p"}},
    },
    "subjectaccessreviews": {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": {
            "user": "u",
            "groups": ["g"],
            "extra": {"k": ["v"]},
            "nonResourceAttributes": {"path": "/api", "verb": "get"},
        },
    },
    "selfsubjectrulesreviews": {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "metadata": {},
        "spec": {"namespace": "ns"},
    },
    "tokenreviews": {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "metadata": {},
        "spec": {"token": "a.b.c"},
    },
}
BASES = {
    "configmaps": "/api/v1/namespaces/{ns}/configmaps",
    "secrets": "/api/v1/namespaces/{ns}/secrets",
    "pods": "/api/v1/namespaces/{ns}/pods",
    "services": "/api/v1/namespaces/{ns}/services",
    "persistentvolumeclaims": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
    "events": "/api/v1/namespaces/{ns}/events",
    "jobs": "/apis/batch/v1/namespaces/{ns}/jobs",
    "pytorchjobs": "/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs",
    "inferenceservices": "/apis/serving.kserve.io/v1beta1/namespaces/{ns}/inferenceservices",
    "roles": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "rolebindings": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "serviceaccounts": "/api/v1/namespaces/{ns}/serviceaccounts",
    "tokenrequests": "/api/v1/namespaces/{ns}/serviceaccounts/default/token",
    "selfsubjectaccessreviews": "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    "subjectaccessreviews": "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    "selfsubjectrulesreviews": "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
    "tokenreviews": "/apis/authentication.k8s.io/v1/tokenreviews",
}
READ_ONLY_PATHS = [
    "/api",
    "/apis",
    "/api/v1",
    "/apis/batch/v1",
    "/version",
    "/openapi/v3",
    "/openapi/v3/api/v1",
    "/api/v1/namespaces",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "/api/v1/pods",
    "/apis/kubeflow.org/v1/pytorchjobs",
]
QUERY_KEYS = [
    "limit",
    "continue",
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "watch",
    "labelSelector",
    "fieldSelector",
    "fieldValidation",
    "dryRun",
    "propagationPolicy",
    "gracePeriodSeconds",
    "tailLines",
    "sinceSeconds",
    "sinceTime",
    "limitBytes",
    "follow",
    "previous",
    "timestamps",
    "container",
    "includeObject",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "fieldManager",
    "force",
]
CONTENT_TYPES = [
    "application/json",
    "application/yaml",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
    "",
]
SPECIAL_TEXT = [
    "",
    " ",
    "\n",
    "x\n",
    "..",
    "../../etc",
    "/abs",
    "a" * 254,
    "NaN",
    "-1",
    "\uff11",
    "\u00b2",
    "\x00",
    "é",
    "$(A)",
]


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    content_type: str
    body: bytes | None


def json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
        st.sampled_from(SPECIAL_TEXT),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.text(max_size=12) | st.sampled_from(SPECIAL_TEXT), inner, max_size=4),
        ),
        max_leaves=12,
    )


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for key, value in obj.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            out += _paths(value, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, resource: str, name: str) -> Any:
    """A valid object of ``resource`` with a few fields replaced, added or removed (often none, so
    that the cases also reach admission's later rules and the store)."""
    obj = copy.deepcopy(TEMPLATES[resource])
    obj["metadata"]["name"] = name
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 1, 2, 3]))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = obj
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "add", "delete"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=10) | st.sampled_from(SPECIAL_TEXT))] = draw(json_values())
        else:
            parent[path[-1]] = draw(json_values())
    return _unrunnable(obj)


def _unrunnable(obj: Any) -> Any:
    """Bind every pod (and pod template) the case could create to a node nobody serves."""
    if not isinstance(obj, dict):
        return obj
    spec = obj.get("spec")
    if obj.get("kind") == "Pod" and isinstance(spec, dict):
        spec["nodeName"] = FUZZ_NODE
    if isinstance(spec, dict):
        template = spec.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            template["spec"]["nodeName"] = FUZZ_NODE
        replicas = spec.get("pytorchReplicaSpecs")
        if isinstance(replicas, dict):
            for replica in replicas.values():
                template = replica.get("template") if isinstance(replica, dict) else None
                if isinstance(template, dict) and isinstance(template.get("spec"), dict):
                    template["spec"]["nodeName"] = FUZZ_NODE
            spec.setdefault("runPolicy", {"managedBy": "kueue.x-k8s.io/multikueue"})
    return obj


def _encode(value: Any, content_type: str, draw: st.DrawFn) -> bytes:
    if content_type.endswith("yaml") and draw(st.booleans()):
        import yaml

        try:
            return yaml.safe_dump(value, allow_unicode=True).encode()
        except yaml.YAMLError:
            pass
    return json.dumps(value, ensure_ascii=draw(st.booleans())).encode()


@st.composite
def _query(draw: st.DrawFn) -> tuple[tuple[str, str], ...]:
    value = st.sampled_from(["1", "0", "true", "Strict", "All", "x", "99999999999999999999", *SPECIAL_TEXT])
    return tuple(draw(st.lists(st.tuples(st.sampled_from(QUERY_KEYS), value | st.text(max_size=12)), max_size=3)))


@st.composite
def _patch(draw: st.DrawFn, resource: str) -> tuple[str, bytes]:
    media = draw(st.sampled_from([t for t in CONTENT_TYPES if "patch" in t]))
    template = TEMPLATES.get(resource, TEMPLATES["configmaps"])
    if media == "application/json-patch+json":
        paths = ["/" + "/".join(str(step) for step in p) for p in _paths(template) if p] + ["", "/", "/x/y"]
        ops = st.fixed_dictionaries(
            {
                "op": st.sampled_from(["add", "replace", "remove", "move", "copy", "test", "bogus"]),
                "path": st.sampled_from(paths),
                "value": json_values(),
            }
        )
        return media, json.dumps(draw(st.lists(ops, max_size=3))).encode()
    obj = draw(mutated(resource if resource in TEMPLATES else "configmaps", "a"))
    keep = draw(st.sampled_from(sorted(obj)) if isinstance(obj, dict) and obj else st.just("metadata"))
    patch = {keep: obj[keep]} if isinstance(obj, dict) and keep in obj else {"metadata": {"labels": {"a": "b"}}}
    directive = draw(st.sampled_from([None, "$patch", "$retainKeys", "$deleteFromPrimitiveList/data"]))
    if directive and media == "application/strategic-merge-patch+json":
        patch[directive] = draw(json_values())
    return media, json.dumps(patch).encode()


@st.composite
def cases(draw: st.DrawFn, namespace: str) -> Case:
    """One request: mostly writes of near-valid objects and patches of existing names (to reach
    admission's later rules and the store), then reads, then anything at all."""
    resource = draw(st.sampled_from(sorted(BASES)))
    base = BASES[resource].format(ns=namespace)
    name = draw(st.sampled_from(["a", "b", "c"]))
    scenario = draw(st.sampled_from(["write", "write", "write", "patch", "patch", "read", "random", "random"]))
    template = resource if resource in TEMPLATES else "configmaps"
    if scenario == "write":
        method = draw(st.sampled_from(["POST", "POST", "PUT"]))
        path = base if method == "POST" else f"{base}/{name}"
        query = draw(st.sampled_from([(), (), (("fieldValidation", "Strict"),), (("fieldValidation", "Ignore"),)]))
        content_type = draw(st.sampled_from(["application/json", "application/json", "application/yaml"]))
        return Case(method, path, query, content_type, _encode(draw(mutated(template, name)), content_type, draw))
    if scenario == "patch":
        media, body = draw(_patch(resource))
        suffix = draw(st.sampled_from(["", "", "/status"]))
        return Case("PATCH", f"{base}/{name}{suffix}", (), media, body)
    if scenario == "read":
        path = draw(st.sampled_from([base, f"{base}/{name}", f"{base}/{name}/log", *READ_ONLY_PATHS]))
        return Case("GET", path, draw(_query()), "", None)
    base = BASES[resource].format(ns=draw(st.sampled_from([namespace, "no-such-namespace"])))
    name = draw(st.sampled_from(["a", "b", "fuzz-x"]) | st.text(max_size=8))
    kind = draw(st.sampled_from(["collection", "item", "status", "log", "readonly"]))
    if kind == "readonly":
        method, path = "GET", draw(st.sampled_from(READ_ONLY_PATHS))
    elif kind == "collection":
        method, path = draw(st.sampled_from(["GET", "POST", "DELETE", "PUT", "PATCH"])), base
    else:
        suffix = {"item": "", "status": "/status", "log": "/log"}[kind]
        method = draw(st.sampled_from(["GET", "PUT", "PATCH", "DELETE", "POST"]))
        path = f"{base}/{quote(name, safe='') or 'a'}{suffix}"
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    body: bytes | None = None
    if method in ("POST", "PUT", "PATCH", "DELETE") and draw(st.integers(0, 9)) > (7 if method == "DELETE" else 0):
        shape = draw(st.sampled_from(["mutated", "json", "patch", "bytes"]))
        if shape == "mutated":
            body = _encode(draw(mutated(template, name)), content_type, draw)
        elif shape == "json":
            body = _encode(draw(json_values()), content_type, draw)
        elif shape == "patch":
            body = draw(_patch(resource))[1]
        else:
            body = draw(
                st.binary(max_size=200) | st.sampled_from([b"{", b"[]", b"NaN", b'{"a": Infinity}', b"a: &a [*a]"])
            )
    return Case(method, path, draw(_query()), content_type, body)


def send(http: httpx.Client, case: Case) -> int:
    headers = {"Content-Type": case.content_type} if case.content_type else {}
    streaming = any(k in ("watch", "follow") for k, _ in case.query)
    request = http.build_request(case.method, case.path, params=list(case.query), content=case.body, headers=headers)
    if streaming:
        response = http.send(request, stream=True)
        response.close()
        return response.status_code
    return http.send(request).status_code


# -- credentials: who a request is (authentication) and whom it acts as (impersonation) --------------

CREDENTIAL_PATHS = [
    "/api",
    "/metrics",
    "/api/v1/namespaces/{ns}/pods",
    "/api/v1/namespaces/{ns}/secrets/s",
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
]


@dataclass(frozen=True)
class Credentials:
    """One request's credentials: the ``Authorization`` value, the headers beside it, and what the
    token is: ``garbage`` or ``forged`` (not signed by the server: never answered), ``signed`` (the
    server's signature over altered claims of the namespace's ``default`` account, which may read
    no Secret), or ``impersonating`` (the admin's token, with ``Impersonate-*`` headers)."""

    authorization: str
    headers: tuple[tuple[str, str], ...]
    path: str
    kind: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims(draw: st.DrawFn, namespace: str, account_uid: str) -> dict[str, Any]:
    """The claims TokenRequest writes, with fields replaced, dropped or given other types."""
    claims: dict[str, Any] = {
        "iss": "https://kubernetes.default.svc.cluster.local",
        "sub": f"system:serviceaccount:{namespace}:default",
        "aud": ["https://kubernetes.default.svc.cluster.local"],
        "exp": 4_000_000_000,
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": "default", "uid": account_uid}},
    }
    special = st.sampled_from(
        [float("inf"), float("-inf"), float("nan"), 10**400, -1, "1", None, [], {}, "../..", "system:masters"]
    )
    for path in draw(st.lists(st.sampled_from(_paths(claims)[1:]), min_size=1, max_size=3)):
        parent = claims
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None  # type: ignore[assignment]
        if not isinstance(parent, dict) or path[-1] not in parent:
            continue
        change = draw(st.sampled_from(["delete", "special", "special", "json"]))
        if change == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(special if change == "special" else json_values())
    return claims


@st.composite
def credentials(draw: st.DrawFn, namespace: str, admin_token: str, signing_key: bytes, account_uid: str) -> Credentials:
    path = draw(st.sampled_from(CREDENTIAL_PATHS)).format(ns=namespace)
    headers: list[tuple[str, str]] = []
    kind = draw(st.sampled_from(["forged", "signed", "garbage", "impersonating"]))
    if kind == "garbage":
        token = draw(st.one_of(st.text(max_size=200), st.sampled_from(["", ".", "..", "a.b.c", "x" * 6000])))
        token = "".join(c for c in token if c.isprintable() and c.isascii())
        scheme = draw(st.sampled_from(["Bearer", "bearer", "Basic", "", "Bearer  "]))
        return Credentials(f"{scheme} {token}".strip(), (), path, kind)  # (a header value has no edge blanks)
    if kind == "impersonating":
        token = admin_token
        who = st.one_of(
            st.text(max_size=40), st.sampled_from([*SPECIAL_TEXT, "system:serviceaccount:a", "system:anonymous"])
        )
        clean = lambda s: "".join(c for c in s if c.isprintable() and c.isascii()).strip()  # noqa: E731
        for header in draw(st.lists(st.sampled_from(
            ["Impersonate-User", "Impersonate-Group", "Impersonate-Uid", "Impersonate-Extra-scopes",
             "Impersonate-Extra-%ZZ", "Impersonate-Extra-a%2Fb"]), max_size=4)):  # fmt: skip
            headers.append((header, clean(draw(who))))
    else:
        claims = _claims(draw, namespace, account_uid)
        head = _b64(json.dumps({"alg": draw(st.sampled_from(["HS256", "none", "RS256"])), "typ": "JWT"}).encode())
        body = _b64(json.dumps(claims, allow_nan=True).encode())
        if kind == "signed":
            signature = _b64(hmac.new(signing_key, f"{head}.{body}".encode(), hashlib.sha256).digest())
        else:
            signature = draw(st.sampled_from(["", "AAAA", _b64(draw(st.binary(min_size=32, max_size=32)))]))
        token = f"{head}.{body}.{signature}"
    return Credentials(f"Bearer {token}", tuple(headers), path, kind)


def send_credentials(base_url: str, verify: str, creds: Credentials) -> int:
    """One request with these credentials only (a fresh connection: nothing carried over)."""
    method, body = ("POST", b'{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}') if (
        creds.path.endswith("selfsubjectreviews")
    ) else ("GET", None)  # fmt: skip
    headers = [("Content-Type", "application/json"), *creds.headers]
    if creds.authorization:
        headers.append(("Authorization", creds.authorization))
    with httpx.Client(base_url=base_url, verify=verify, timeout=20) as http:
        return http.request(method, creds.path, headers=headers, content=body).status_code
