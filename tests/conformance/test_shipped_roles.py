"""The least-privilege manifests in ``deploy/rbac`` are exact: the Airflow worker's Role grants what
the provider's operations ask of the API (each one succeeds under it), every verb it grants is
needed (removed, the named operation fails with the client's one-sentence message naming the verb,
the resource and the manifest), and nothing else is granted (``kubectl auth can-i``, and the rules
a SelfSubjectRulesReview lists). The operations run at the client layer, through the same calls
the operators, sensor, triggers and cockpit make, with a token of the Role's service account."""

from __future__ import annotations

import copy
import json
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from airflow_provider_training.client.errors import Forbidden, WaitTimeout, translate
from airflow_provider_training.client.resources import INFERENCE_SERVICE, TRAINJOB
from airflow_provider_training.client.sync import TrainingJobClient
from airflow_provider_training.embedded import ControlPlane
from tests.conformance.conftest import KUBECTL, Kubectl
from tests.paths import ROOT

RBAC = ROOT / "deploy" / "rbac"
WORKER_MANIFEST = RBAC / "airflow-worker.yaml"
SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]
Operation = Callable[[TrainingJobClient, str], object]


def _manifest(path: Path, namespace: str) -> list[dict[str, Any]]:
    """The shipped documents, their service-account subjects moved to ``namespace``."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        for subject in doc.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount" and "namespace" in subject:
                subject["namespace"] = namespace
    return docs


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def pytorchjob(name: str, command: list[str] | None = None) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "pytorch/pytorch:2", "command": command or SLEEP}
    master = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


def trainjob(name: str) -> dict[str, Any]:
    spec = {"runtimeRef": {"name": "torch-distributed"}, "suspend": True}
    return {"apiVersion": TRAINJOB.api_version, "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


def batch_job(name: str) -> dict[str, Any]:
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "kit", "image": "ghcr.io/kitops-ml/kitops:v1", "command": ["true"]}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"suspend": True, "template": {"spec": pod}},
    }


def isvc(name: str) -> dict[str, Any]:
    predictor = {"containers": [{"name": "kserve-container", "image": "python:3.11", "command": SLEEP}]}
    return {
        "apiVersion": INFERENCE_SERVICE.api_version,
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {"predictor": predictor},
    }


def _stream(call: Callable[..., Any], namespace: str) -> None:
    """A one-second watch, as the log follower and the cockpit open them."""
    with translate():
        response = call(namespace, watch=True, timeout_seconds=1, _preload_content=False, _request_timeout=10)
    response.close()  # (not back to the pool: the server is still streaming on it)


def _wait_briefly(kind: str, name: str) -> Operation:
    """Wait for a condition that does not come: list, then watch, until the (short) timeout."""

    def run(c: TrainingJobClient, ns: str) -> None:
        with pytest.raises(WaitTimeout):
            c.wait(kind, name, ns, until=lambda obj: False, timeout=1.5)

    return run


# (API group, resource, verb) -> (the provider's operation that needs it, that operation at the client layer)
OPERATIONS: dict[tuple[str, str, str], tuple[str, Operation]] = {
    ("kubeflow.org", "pytorchjobs", "create"): (
        "TrainingJobOperator submits the job",
        lambda c, ns: c.create(pytorchjob(_unique("submitted"), ["true"]), ns),
    ),
    ("kubeflow.org", "pytorchjobs", "get"): (
        "the cockpit and a retry find the job",
        lambda c, ns: c.get("PyTorchJob", "seen", ns),
    ),
    ("kubeflow.org", "pytorchjobs", "list"): (
        "a retry reattaches by identity labels",
        lambda c, ns: c.list("PyTorchJob", ns, "training.airflow.apache.org/task-id=t"),
    ),
    ("kubeflow.org", "pytorchjobs", "watch"): (
        "the operator, sensor and trigger wait",
        _wait_briefly("PyTorchJob", "seen"),
    ),
    ("kubeflow.org", "pytorchjobs", "delete"): (
        "on_kill deletes the job",
        lambda c, ns: c.delete("PyTorchJob", "gone", ns),
    ),
    ("trainer.kubeflow.org", "trainjobs", "create"): (
        "TrainJobOperator submits the TrainJob",
        lambda c, ns: c.create(trainjob(_unique("tj")), ns),
    ),
    ("trainer.kubeflow.org", "trainjobs", "get"): (
        "a retry finds the TrainJob",
        lambda c, ns: c.get("TrainJob", "seen-tj", ns),
    ),
    ("trainer.kubeflow.org", "trainjobs", "list"): ("a retry reattaches", lambda c, ns: c.list("TrainJob", ns)),
    ("trainer.kubeflow.org", "trainjobs", "watch"): ("TrainJobOperator waits", _wait_briefly("TrainJob", "seen-tj")),
    ("trainer.kubeflow.org", "trainjobs", "delete"): (
        "on_kill deletes the TrainJob",
        lambda c, ns: c.delete("TrainJob", "gone", ns),
    ),
    ("batch", "jobs", "create"): (
        "the ModelKit operator starts its packaging Job",
        lambda c, ns: c.create(batch_job(_unique("pack")), ns),
    ),
    ("batch", "jobs", "list"): ("the packaging Job is waited for (list)", lambda c, ns: c.list("Job", ns)),
    ("batch", "jobs", "watch"): ("the packaging Job is waited for (watch)", _wait_briefly("Job", "seen-pack")),
    ("batch", "jobs", "delete"): ("a killed packaging Job is deleted", lambda c, ns: c.delete("Job", "gone", ns)),
    ("serving.kserve.io", "inferenceservices", "create"): (
        "DeployModelKitOperator creates the InferenceService",
        lambda c, ns: c.create(isvc(_unique("isvc")), ns),
    ),
    ("serving.kserve.io", "inferenceservices", "get"): (
        "DeployModelKitOperator reads the served InferenceService",
        lambda c, ns: c.get("InferenceService", "seen-isvc", ns),
    ),
    ("serving.kserve.io", "inferenceservices", "list"): (
        "the rollout is waited for (list)",
        lambda c, ns: c.list("InferenceService", ns),
    ),
    ("serving.kserve.io", "inferenceservices", "watch"): (
        "the rollout is waited for (watch)",
        _wait_briefly("InferenceService", "seen-isvc"),
    ),
    ("serving.kserve.io", "inferenceservices", "update"): (
        "DeployModelKitOperator replaces the InferenceService",
        lambda c, ns: c.replace(_admin_read(c, ns)),
    ),
    ("serving.kserve.io", "inferenceservices", "delete"): (
        "a rollback deletes the InferenceService",
        lambda c, ns: c.delete("InferenceService", "gone", ns),
    ),
    ("", "pods", "get"): ("the cockpit reads a replica's pod", lambda c, ns: _read_pod(c, ns)),
    ("", "pods", "list"): ("the operator finds the job's replicas", lambda c, ns: c.pods("PyTorchJob", "seen", ns)),
    ("", "pods", "watch"): (
        "the log follower and the cockpit follow the pods",
        lambda c, ns: _stream(c.core.list_namespaced_pod, ns),
    ),
    ("", "pods/log", "get"): ("replica logs reach the task log", lambda c, ns: c.read_log(_pod_name(c, ns), ns)),
    ("", "events", "list"): (
        "a failed job's events reach the task log",
        lambda c, ns: c.events("PyTorchJob", "seen", ns),
    ),
    ("", "events", "watch"): ("the cockpit's live events", lambda c, ns: _stream(c.core.list_namespaced_event, ns)),
    ("", "secrets", "create"): (
        "the registry credentials are written",
        lambda c, ns: c.apply_secret(_secret(_unique("registry"), ns)),
    ),
    ("", "secrets", "update"): (
        "changed registry credentials are written over the old",
        lambda c, ns: c.apply_secret(_secret("registry", ns)),
    ),
}

_ADMIN: dict[str, TrainingJobClient] = {}


def _admin_read(c: TrainingJobClient, ns: str) -> dict[str, Any]:
    """The InferenceService as the operator holds it before replacing it (read by the admin, so
    that only ``update`` is in question)."""
    return _ADMIN["client"].get("InferenceService", "seen-isvc", ns)


def _read_pod(c: TrainingJobClient, ns: str) -> None:
    with translate():
        c.core.read_namespaced_pod("seen-master-0", ns)


def _pod_name(c: TrainingJobClient, ns: str) -> str:
    return "seen-master-0"


def _secret(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": {"k": uuid.uuid4().hex},
    }


def _client(control_plane: ControlPlane, token: str) -> TrainingJobClient:
    configuration = k8s.Configuration()
    configuration.host = control_plane.api_url
    configuration.ssl_ca_cert = str(control_plane.ca)
    configuration.api_key = {"BearerToken": f"Bearer {token}"}
    return TrainingJobClient(k8s.ApiClient(configuration), watch_timeout=1, poll_interval=0.2, request_timeout=15)


@pytest.fixture
def worker(kubectl: Kubectl, control_plane: ControlPlane, test_namespace: str) -> Iterator[TrainingJobClient]:
    """The Role applied as shipped, bound to ``airflow-worker`` in the test's namespace; the objects
    its operations read made by the admin; the account's client."""
    kubectl("create", "serviceaccount", "airflow-worker")
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(_manifest(WORKER_MANIFEST, test_namespace)))
    admin = _ADMIN["client"] = _client(control_plane, control_plane.token)
    admin.create(pytorchjob("seen"), test_namespace)
    admin.create(trainjob("seen-tj"), test_namespace)
    admin.create(batch_job("seen-pack"), test_namespace)
    admin.create(isvc("seen-isvc"), test_namespace)
    admin.apply_secret(_secret("registry", test_namespace))
    kubectl("wait", "--for=condition=Ready", "pod/seen-master-0", timeout=90)
    token = kubectl("create", "token", "airflow-worker", "--duration", "1h").stdout.strip()
    yield _client(control_plane, token)
    admin.api_client.close()


def test_every_operation_works_under_the_shipped_role_and_every_verb_is_needed(
    worker: TrainingJobClient, kubectl: Kubectl, test_namespace: str
) -> None:
    role = next(d for d in _manifest(WORKER_MANIFEST, test_namespace) if d["kind"] == "Role")
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    # each rule's verbs are tried on its first resource (the others share the rule's fate)
    tried = {(rule["apiGroups"][0], rule["resources"][0], v) for rule in role["rules"] for v in rule["verbs"]}
    assert tried == set(OPERATIONS), "a verb of the shipped Role has no operation here that needs it (or the reverse)"
    assert tried <= granted

    for what, operation in OPERATIONS.values():
        try:
            operation(worker, test_namespace)
        except Forbidden as exc:
            raise AssertionError(f"{what}: refused under the shipped Role: {exc}") from None

    for index, rule in enumerate(role["rules"]):
        for verb in rule["verbs"]:
            key = (rule["apiGroups"][0], rule["resources"][0], verb)
            what, operation = OPERATIONS[key]
            reduced = copy.deepcopy(role)
            reduced["rules"][index]["verbs"] = [v for v in rule["verbs"] if v != verb]
            if not reduced["rules"][index]["verbs"]:  # (its only verb: the rule goes)
                del reduced["rules"][index]
            kubectl("apply", "-f", "-", stdin=json.dumps(reduced))
            try:
                with pytest.raises(Forbidden) as refused:
                    operation(worker, test_namespace)
            except pytest.fail.Exception:
                raise AssertionError(
                    f"{what} still works without {verb} on {key[1]}: the Role grants more than needed"
                ) from None
            finally:
                kubectl("apply", "-f", "-", stdin=json.dumps(role))
            group, resource = key[0], key[1]
            base, _, sub = resource.partition("/")
            named = f"{base}.{group}/{sub}".rstrip("/") if group else resource
            sentence = str(refused.value)
            assert sentence == (
                f"The Kubernetes API refused to let system:serviceaccount:{test_namespace}:airflow-worker {verb} "
                f'{named} in namespace "{test_namespace}" (403 Forbidden): grant it with this provider\'s Role in '
                "deploy/rbac/airflow-worker.yaml (docs/cluster.md, Permissions)."
            ), what


# (verb, resource, expected) for the worker's account in its namespace: what it needs, and what it must not have
WORKER_MATRIX = [
    ("create", "pytorchjobs.kubeflow.org", "yes"),
    ("watch", "jaxjobs.kubeflow.org", "yes"),
    ("delete", "trainjobs.trainer.kubeflow.org", "yes"),
    ("update", "inferenceservices.serving.kserve.io", "yes"),
    ("get", "pods/log", "yes"),
    ("create", "secrets", "yes"),
    ("get", "secrets", "no"),
    ("list", "secrets", "no"),
    ("update", "pytorchjobs.kubeflow.org", "no"),
    ("patch", "pytorchjobs.kubeflow.org", "no"),
    ("get", "jobs.batch", "no"),
    ("create", "pods", "no"),
    ("delete", "pods", "no"),
    ("create", "pods/exec", "no"),
    ("create", "rolebindings.rbac.authorization.k8s.io", "no"),
    ("create", "serviceaccounts/token", "no"),
    ("list", "clustertrainingruntimes.trainer.kubeflow.org", "yes"),  # every authenticated user's
]


def test_can_i_for_the_shipped_roles_and_nothing_else_is_granted(
    worker: TrainingJobClient, kubectl: Kubectl, control_plane: ControlPlane, test_namespace: str
) -> None:
    account = f"--as=system:serviceaccount:{test_namespace}:airflow-worker"
    seen = [(v, r, kubectl("auth", "can-i", v, r, account, check=False).stdout.strip()) for v, r, _ in WORKER_MATRIX]
    assert seen == WORKER_MATRIX
    assert kubectl("auth", "can-i", "list", "pods", "-n", "kubeflow", account, check=False).stdout.strip() == "no"

    # the rules that apply, all of them: the Role's, and what every authenticated user has
    token = kubectl("create", "token", "airflow-worker").stdout.strip()
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": test_namespace},
    }
    request = urllib.request.Request(
        f"{control_plane.api_url}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        data=json.dumps(review).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    context = ssl.create_default_context(cafile=str(control_plane.ca))
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        status = json.loads(response.read())["status"]
    role = next(d for d in _manifest(WORKER_MANIFEST, test_namespace) if d["kind"] == "Role")
    everyone = {
        ("create", "authorization.k8s.io", "selfsubjectaccessreviews"),
        ("create", "authorization.k8s.io", "selfsubjectrulesreviews"),
        ("create", "authentication.k8s.io", "selfsubjectreviews"),
        ("get", "trainer.kubeflow.org", "clustertrainingruntimes"),
        ("list", "trainer.kubeflow.org", "clustertrainingruntimes"),
        ("watch", "trainer.kubeflow.org", "clustertrainingruntimes"),
    }
    shipped = {
        (v, g, r) for rule in role["rules"] for v in rule["verbs"] for g in rule["apiGroups"] for r in rule["resources"]
    }
    listed = {
        (v, g, r)
        for rule in status["resourceRules"]
        for v in rule["verbs"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert listed == shipped | everyone
    assert not any(rule.get("resourceNames") for rule in status["resourceRules"])


def test_the_packaging_role_lets_its_account_wait_for_pytorchjobs_only(kubectl: Kubectl, test_namespace: str) -> None:
    kubectl("apply", "-f", str(RBAC / "packaging-job.yaml"))
    account = f"--as=system:serviceaccount:{test_namespace}:model-packager"
    matrix = [
        ("get", "pytorchjobs.kubeflow.org", "yes"),
        ("list", "pytorchjobs.kubeflow.org", "yes"),
        ("watch", "pytorchjobs.kubeflow.org", "yes"),
        ("create", "pytorchjobs.kubeflow.org", "no"),
        ("get", "tfjobs.kubeflow.org", "no"),
        ("get", "pods", "no"),
        ("get", "secrets", "no"),
    ]
    assert [(v, r, kubectl("auth", "can-i", v, r, account, check=False).stdout.strip()) for v, r, _ in matrix] == matrix
    default = f"--as=system:serviceaccount:{test_namespace}:default"
    assert kubectl("auth", "can-i", "get", "pytorchjobs.kubeflow.org", default, check=False).stdout.strip() == "no"
    kubectl("apply", "-f", str(RBAC / "packaging-job-default-sa.yaml"))
    assert kubectl("auth", "can-i", "get", "pytorchjobs.kubeflow.org", default, check=False).stdout.strip() == "yes"


# what kubectl wait asks of the packaging account, each verb in turn: (verb, whether kubectl lists
# first, as kubectl before watch-list did and does against API servers without it)
WAIT_VERBS = [("get", False), ("watch", False), ("list", True)]


@pytest.mark.parametrize(("verb", "lists_first"), WAIT_VERBS, ids=[v for v, _ in WAIT_VERBS])
def test_every_verb_of_the_packaging_role_is_needed_by_kubectl_wait(
    kubectl: Kubectl, kubectl_env: dict[str, str], test_namespace: str, verb: str, lists_first: bool
) -> None:
    """The seed's ``kubectl wait --for=condition=Succeeded pytorchjob/...`` as the packaging account:
    under the shipped Role it waits (here: until its timeout, the job never succeeds); without
    ``verb`` it is refused with kube-apiserver's 403 naming that verb. ``list`` is what a kubectl
    that lists before it watches asks (client-go's ``WatchListClient`` off)."""
    kubectl("apply", "-f", str(RBAC / "packaging-job.yaml"))
    kubectl("create", "-f", "-", stdin=json.dumps(pytorchjob("waited")))
    env = {**kubectl_env, "KUBE_FEATURE_WatchListClient": "false" if lists_first else "true"}
    user = f"system:serviceaccount:{test_namespace}:model-packager"

    def wait() -> str:
        done = subprocess.run(
            [str(KUBECTL), "-n", test_namespace, "wait", "--for=condition=Succeeded", "pytorchjob/waited",
             "--timeout=2s", f"--as={user}"],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 1
        return done.stderr.replace('\\"', '"')  # (client-go's reflector logs the 403 with its quotes escaped)

    assert wait().strip() == "error: timed out waiting for the condition on pytorchjobs/waited"
    role = next(d for d in _manifest(RBAC / "packaging-job.yaml", test_namespace) if d["kind"] == "Role")
    role["rules"][0]["verbs"].remove(verb)
    kubectl("apply", "-f", "-", stdin=json.dumps(role))
    assert (
        f'User "{user}" cannot {verb} resource "pytorchjobs" in API group "kubeflow.org" '
        f'in the namespace "{test_namespace}"'
    ) in wait()
