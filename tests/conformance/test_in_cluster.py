"""Pods get in-cluster configuration: kubectl and the official client inside a replica reach the
API with no flags; tokens are per pod, die with their pod, and forged ones are refused. (A pod may
do what its service account is bound to, as on a cluster: these tests bind ``view`` first.)"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from typing import Any

from airflow_provider_training.embedded import ControlPlane
from tests.conformance.conftest import Kubectl

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
INSIDE = f"""
import json, os, subprocess
from kubernetes import client, config
config.load_incluster_config()
names = [p.metadata.name for p in client.CoreV1Api().list_namespaced_pod(open("{SA_DIR}/namespace").read()).items]
kubectl = subprocess.run(["kubectl", "get", "pods", "-o", "name"], capture_output=True, text=True)
print(json.dumps({{"client": names, "kubectl": kubectl.stdout.split(), "err": kubectl.stderr,
                  "host": os.environ["KUBERNETES_SERVICE_HOST"]}}))
"""


def _pod(name: str, code: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "ghcr.io/kitops-ml/kit:v1", "command": [sys.executable, "-c", code]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [container], **spec},
    }


def _apply(kubectl: Kubectl, obj: dict[str, Any]) -> None:
    kubectl("create", "-f", "-", stdin=json.dumps(obj))


def _call(control_plane: ControlPlane, token: str, path: str) -> tuple[int, dict[str, Any]]:
    context = ssl.create_default_context(cafile=str(control_plane.ca))
    request = urllib.request.Request(control_plane.api_url + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _grant_view(kubectl: Kubectl, namespace: str) -> None:
    """What a cluster admin does for pods that read the API: bind ``view`` to their account."""
    kubectl("create", "rolebinding", "default-view", "--clusterrole=view", f"--serviceaccount={namespace}:default")


def _token(control_plane: ControlPlane, kubectl: Kubectl, pod: str) -> str:
    uid = kubectl("get", "pod", pod, "-o", "jsonpath={.metadata.uid}").stdout
    (token,) = (control_plane.home / "node" / "pods" / uid / "volumes").glob("kube-api-access-*/token")
    return token.read_text()


def test_kubectl_and_client_inside_a_pod_need_no_flags(kubectl: Kubectl, test_namespace: str) -> None:
    _grant_view(kubectl, test_namespace)
    _apply(kubectl, _pod("inside", INSIDE))
    kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/inside", timeout=90)
    seen = json.loads(kubectl("logs", "inside").stdout.strip().splitlines()[-1])
    assert seen["client"] == ["inside"], seen
    assert seen["kubectl"] == ["pod/inside"], seen["err"]  # in the pod's own namespace, from the mounted file
    assert seen["host"] == "127.0.0.1"
    pod = json.loads(kubectl("get", "pod", "inside", "-o", "json").stdout)
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
    mount = pod["spec"]["containers"][0]["volumeMounts"][0]
    assert mount == {"name": volume["name"], "mountPath": SA_DIR, "readOnly": True}


def test_automount_false_gets_no_token(kubectl: Kubectl) -> None:
    code = f"import os; print(os.path.exists('{SA_DIR}/token'))"
    _apply(kubectl, _pod("opted-out", code, automountServiceAccountToken=False))
    kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/opted-out", timeout=90)
    assert kubectl("logs", "opted-out").stdout.strip() == "False"
    pod = json.loads(kubectl("get", "pod", "opted-out", "-o", "json").stdout)
    assert "volumes" not in pod["spec"] and "volumeMounts" not in pod["spec"]["containers"][0]


def test_tokens_are_per_pod_and_die_with_it(kubectl: Kubectl, control_plane: ControlPlane, test_namespace: str) -> None:
    sleep = "import time; time.sleep(600)"
    _grant_view(kubectl, test_namespace)
    for name in ("one", "two"):
        _apply(kubectl, _pod(name, sleep))
    kubectl("wait", "--for=condition=Ready", "pod/one", "pod/two", timeout=90)
    one, two = _token(control_plane, kubectl, "one"), _token(control_plane, kubectl, "two")
    assert one != two
    path = f"/api/v1/namespaces/{test_namespace}/pods"
    assert _call(control_plane, one, path)[0] == 200
    kubectl("delete", "pod", "one", "--grace-period=1", "--wait", timeout=60)
    code, status = _call(control_plane, one, path)
    assert (code, status["kind"], status["reason"]) == (401, "Status", "Unauthorized")
    assert f"pod {test_namespace}/one is no longer valid" in status["message"]
    assert _call(control_plane, two, path)[0] == 200  # the other pod's token still works

    header, payload, _ = two.split(".")
    forged = f"{header}.{payload}.{'A' * 43}"
    code, status = _call(control_plane, forged, path)
    assert (code, status["reason"]) == (401, "Unauthorized")
    assert "not one this control plane issued" in status["message"] and forged not in status["message"]
    assert _call(control_plane, control_plane.token, "/api/v1/namespaces")[0] == 200  # still serving
