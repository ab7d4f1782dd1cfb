"""Kubeflow Trainer v2.3.0's TrainJob status server on the embedded control plane: the Kubeflow SDK's
``update_trainjob_status`` run unchanged inside a trainer pod lands in ``status.trainerStatus``; a
token of another TrainJob, an expired one, one without the TrainJob's audience or of a pod that is
not the TrainJob's gets 403 and changes nothing; hostile bodies get upstream's 413 / 422."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from kubernetes import client

from airflow_provider_training.embedded import ControlPlane, serviceaccount
from tests.trainjob.helpers import PY, TrainJobs, trainjob, wait_for

REPORT = (
    "from kubeflow.trainer import update_trainjob_status\n"
    "print('reported', update_trainjob_status(42, 30, {'loss': 0.5}), flush=True)\n"
)
SLEEP = "import time; time.sleep(300)"
STATUS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status"


@pytest.fixture
def tj(kube_api: Any, test_namespace: str, control_plane: ControlPlane) -> TrainJobs:
    return TrainJobs(kube_api, test_namespace, control_plane.kubeconfig)


def test_the_sdk_in_a_trainer_pod_reports_progress_into_the_trainjob(
    tj: TrainJobs, kubeflow_sdk_python: Path, control_plane: ControlPlane
) -> None:
    tj.create(trainjob("sdk", numNodes=1, command=[str(kubeflow_sdk_python), "-c", REPORT]))
    tj.wait_condition("sdk", "Complete", timeout=180)
    shown = tj.kubectl("get", "trainjob", "sdk", "-o", "yaml")
    assert shown.returncode == 0, shown.stderr
    status = yaml.safe_load(shown.stdout)["status"]["trainerStatus"]
    assert status["progressPercentage"] == 42 and status["estimatedRemainingSeconds"] == 30
    assert status["metrics"] == [{"name": "loss", "value": "0.5"}]
    assert status["lastUpdatedTime"].endswith("Z")
    (pod,) = tj.pods("sdk")
    assert "reported True" in tj.logs(pod.metadata.name)
    # what the plugin gave the pod: the server's URL, CA and a token for this TrainJob only
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == control_plane.api_url + STATUS.format(ns=tj.namespace, name="sdk")
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    volume = next(v for v in pod.spec.volumes if v.name == "kubeflow-trainer-token")
    projection = volume.projected.sources[0].service_account_token
    assert projection.audience == f"trainer.kubeflow.org/v1alpha1/namespaces/{tj.namespace}/trainjobs/sdk/status"
    assert projection.expiration_seconds == 3600
    ca = tj.core.read_namespaced_config_map("sdk-tls-config", tj.namespace)
    assert ca.data["ca.crt"] == Path(control_plane.ca).read_text()
    assert ca.metadata.owner_references[0].kind == "TrainJob"


class Endpoint:
    def __init__(self, plane: ControlPlane, namespace: str, name: str) -> None:
        self.url = plane.api_url + STATUS.format(ns=namespace, name=name)
        self.ca = str(plane.ca)

    def post(self, token: str | None, body: Any, *, raw: bytes | None = None) -> requests.Response:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = raw if raw is not None else json.dumps(body).encode()
        return requests.post(self.url, data=data, headers=headers, verify=self.ca, timeout=30)


def _running_pod(tj: TrainJobs, name: str) -> Any:
    found: list[Any] = []

    def running() -> bool:
        found[:] = [p for p in tj.pods(name) if p.status.phase == "Running"]
        return bool(found)

    wait_for(running, 120, f"a running pod of TrainJob {name}")
    return found[0]


def _pod_token(plane: ControlPlane, pod: Any) -> str:
    """The token the node projected into the pod (as the pod reads it)."""
    path = Path(plane.home) / "node" / "pods" / pod.metadata.uid / "volumes" / "kubeflow-trainer-token" / "token"
    return path.read_text().strip()


def _status(now: float | None = None, **fields: Any) -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now or time.time()))
    return {"trainerStatus": {"lastUpdatedTime": stamp, **fields}}


def test_only_the_trainjobs_own_valid_token_may_update_and_bad_bodies_change_nothing(
    tj: TrainJobs, control_plane: ControlPlane
) -> None:
    for name in ("alpha", "beta"):
        tj.create(trainjob(name, numNodes=1, command=[PY, "-c", SLEEP]))
    alpha, beta = _running_pod(tj, "alpha"), _running_pod(tj, "beta")
    endpoint = Endpoint(control_plane, tj.namespace, "alpha")
    audience = f"trainer.kubeflow.org/v1alpha1/namespaces/{tj.namespace}/trainjobs/alpha/status"
    before = tj.get("alpha")["metadata"]["resourceVersion"]
    account = tj.core.read_namespaced_service_account("default", tj.namespace)

    def created_token(*args: str) -> str:
        made = tj.kubectl("create", "token", "default", "--duration", "1h", *args)
        assert made.returncode == 0, made.stderr
        return made.stdout.strip()

    refused = {
        "no token": None,
        "not a token": "x.y.z",
        "another TrainJob's": _pod_token(control_plane, beta),
        "expired": serviceaccount.mint_request(
            Path(control_plane.home),
            tj.namespace,
            "default",
            account.metadata.uid,
            [audience],
            int(time.time()) - 1,
            (alpha.metadata.name, alpha.metadata.uid),
        ),
        "without the audience (the API server's)": created_token(
            "--bound-object-kind", "Pod", "--bound-object-name", alpha.metadata.name
        ),
        "with the audience, of no pod": created_token("--audience", audience),
        "with the audience, of another TrainJob's pod": created_token(
            "--audience", audience, "--bound-object-kind", "Pod", "--bound-object-name", beta.metadata.name
        ),
    }
    for why, token in refused.items():
        answer = endpoint.post(token, _status(progressPercentage=13))
        assert answer.status_code == 403, (why, answer.text)
        assert (answer.json()["reason"], answer.json()["message"]) == ("Forbidden", "Forbidden"), why

    token = _pod_token(control_plane, alpha)
    hostile = {
        "oversized": (413, "Payload too large", endpoint.post(token, None, raw=b'{"x": "' + b"a" * 70_000 + b'"}')),
        "a string percent": (422, "Invalid payload", endpoint.post(token, _status(progressPercentage="42"))),
        "a fraction": (422, "Invalid payload", endpoint.post(token, _status(progressPercentage=42.5))),
        "metrics as a map": (422, "Invalid payload", endpoint.post(token, _status(metrics={"loss": "0.5"}))),
        "not JSON": (422, "Invalid payload", endpoint.post(token, None, raw=b"{progress: 42")),
        "over 100": (
            422,
            "status.trainerStatus.progressPercentage: Invalid value: 101: should be less than or equal to 100",
            endpoint.post(token, _status(progressPercentage=101)),
        ),
        "negative": (
            422,
            "status.trainerStatus.progressPercentage: Invalid value: -1: should be greater than or equal to 0",
            endpoint.post(token, _status(progressPercentage=-1)),
        ),
        "too many metrics": (
            422,
            "status.trainerStatus.metrics: Too many: 257: must have at most 256 items",
            endpoint.post(token, _status(metrics=[{"name": f"m{i}", "value": "1"} for i in range(257)])),
        ),
        "no time": (
            422,
            "lastUpdatedTime is required when trainerStatus is present",
            endpoint.post(token, {"trainerStatus": {"progressPercentage": 5}}),
        ),
    }
    for why, (code, message, answer) in hostile.items():
        assert answer.status_code == code, (why, answer.text)
        assert message in answer.json()["message"], (why, answer.json())
    # kube-apiserver's own status subresource refuses the same values
    patched = tj.kubectl(
        "patch",
        "trainjob",
        "alpha",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": _status(progressPercentage=150)}),
    )
    assert patched.returncode != 0 and "should be less than or equal to 100" in patched.stderr

    after = tj.get("alpha")
    assert after["metadata"]["resourceVersion"] == before and "trainerStatus" not in after.get("status", {})

    answer = endpoint.post(
        token, _status(progressPercentage=42, estimatedRemainingSeconds=30, metrics=[{"name": "loss", "value": "0.5"}])
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["trainerStatus"]["progressPercentage"] == 42
    assert tj.get("alpha")["status"]["trainerStatus"]["progressPercentage"] == 42
    assert "trainerStatus" not in tj.get("beta").get("status", {})
    for name in ("alpha", "beta"):
        client.CustomObjectsApi(tj.custom.api_client).delete_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", tj.namespace, "trainjobs", name
        )
    # the pod is gone with its TrainJob: its token is no longer good either
    wait_for(lambda: not tj.pods("alpha"), 60, "alpha's pods to go")
    assert endpoint.post(token, _status(progressPercentage=50)).status_code == 403
