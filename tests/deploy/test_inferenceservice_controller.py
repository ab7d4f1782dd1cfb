"""The embedded InferenceService controller, through the Kubernetes API of the session's control plane:
a ``kit://`` ModelKit from the real registry is pulled by the storage initializer and served by the
built-in TorchScript runtime (or a custom container) behind a stable URL."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.deploy.conftest import ISVC, failed, pods_of, ready, wait_for_isvc
from tests.waiting import alive

pytestmark = pytest.mark.slow


def digits(n: int) -> tuple[list[list[float]], list[int]]:
    from sklearn.datasets import load_digits

    data = load_digits()
    return data.data[:n].tolist(), data.target[:n].tolist()


def infer(url: str, name: str, rows: list[list[float]], client: httpx.Client | None = None) -> list[list[float]]:
    body = {
        "inputs": [
            {"name": "input-0", "shape": [len(rows), 64], "datatype": "FP32", "data": [v for row in rows for v in row]}
        ]
    }
    response = (client or httpx).post(f"{url}/v2/models/{name}/infer", json=body, timeout=30)
    assert response.status_code == 200, response.text
    [out] = response.json()["outputs"]
    return [out["data"][i * 10 : (i + 1) * 10] for i in range(len(rows))]


def same(a: list[list[float]], b: list[list[float]]) -> bool:
    import numpy

    return bool(numpy.allclose(a, b, atol=1e-4))


def model_spec(uri: str) -> dict[str, Any]:
    return {"predictor": {"model": {"modelFormat": {"name": "pytorch"}, "storageUri": uri}}}


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_modelkit_is_served_over_the_open_inference_protocol(
    inference_services, isvc_api, kube_api, test_namespace, plain_http_secret, digits_models
):
    v2 = digits_models["v2"]
    created = inference_services(model_spec(v2.uri), {"serving.kserve.io/storage-secret": plain_http_secret})
    name = created["metadata"]["name"]
    obj = wait_for_isvc(isvc_api, test_namespace, name, ready)

    status = obj["status"]
    url = status["url"]
    assert url.startswith("http://127.0.0.1:")
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "IngressReady": "True",
        "LatestDeploymentReady": "True",
        "PredictorReady": "True",
        "Ready": "True",
    }
    assert status["modelStatus"]["transitionStatus"] == "UpToDate"
    assert status["modelStatus"]["states"] == {"activeModelState": "Loaded", "targetModelState": "Loaded"}
    assert httpx.get(f"{url}/v2/health/ready").json() == {"ready": True}
    assert httpx.get(f"{url}/v2/models/{name}").json()["name"] == name

    rows, labels = digits(50)
    logits = infer(url, name, rows)
    predicted = [max(range(10), key=row.__getitem__) for row in logits]
    assert sum(p == t for p, t in zip(predicted, labels, strict=True)) >= 40  # a trained model, not noise
    assert same(logits, v2.logits(rows))  # and exactly the pushed one

    [pod] = pods_of(kube_api, test_namespace, name)
    assert [c.name for c in pod.spec.init_containers] == ["storage-initializer"]
    assert pod.spec.init_containers[0].args == [v2.uri, "/mnt/models"]
    assert pod.spec.volumes[0].name == "kserve-provision-location"
    assert pod.metadata.owner_references[0].uid == obj["metadata"]["uid"]


def test_updating_the_storage_uri_rolls_out_with_no_failed_request(
    inference_services, isvc_api, kube_api, test_namespace, plain_http_secret, digits_models
):
    v1, v2 = digits_models["v1"], digits_models["v2"]
    created = inference_services(model_spec(v1.uri), {"serving.kserve.io/storage-secret": plain_http_secret})
    name = created["metadata"]["name"]
    before = wait_for_isvc(isvc_api, test_namespace, name, ready)
    url = before["status"]["url"]
    rows, _ = digits(4)
    assert same(infer(url, name, rows), v1.logits(rows))

    outcomes: Counter[str] = Counter()
    answers: list[list[list[float]]] = []
    stop = threading.Event()

    def client() -> None:
        with httpx.Client(timeout=30) as http:  # keep-alive connections, as a real client would
            while not stop.is_set():
                try:
                    answers.append(infer(url, name, rows, http))
                    outcomes["ok"] += 1
                except (AssertionError, httpx.HTTPError) as exc:
                    outcomes[repr(exc)[:200]] += 1

    threads = [threading.Thread(target=client) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        isvc_api.patch_namespaced_custom_object(
            *ISVC[:2], test_namespace, ISVC[2], name, {"spec": {"predictor": {"model": {"storageUri": v2.uri}}}}
        )
        after = wait_for_isvc(isvc_api, test_namespace, name, lambda o: ready(o) and o["metadata"]["generation"] == 2)
        deadline = time.monotonic() + 30
        while len(pods_of(kube_api, test_namespace, name)) > 1:  # the old predictor goes once drained
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join()

    assert set(outcomes) == {"ok"}, outcomes
    assert outcomes["ok"] > 20
    assert after["status"]["url"] == url  # the URL is stable
    revisions = after["status"]["components"]["predictor"]
    assert revisions["latestReadyRevision"] != before["status"]["components"]["predictor"]["latestReadyRevision"]
    assert same(answers[0], v1.logits(rows))
    assert same(answers[-1], v2.logits(rows))
    assert same(infer(url, name, rows), v2.logits(rows))


def test_a_model_that_cannot_be_pulled_reports_kserve_failure_and_keeps_the_old_one_serving(
    inference_services, isvc_api, test_namespace, plain_http_secret, digits_models, registry
):
    v1 = digits_models["v1"]
    created = inference_services(model_spec(v1.uri), {"serving.kserve.io/storage-secret": plain_http_secret})
    name = created["metadata"]["name"]
    url = wait_for_isvc(isvc_api, test_namespace, name, ready)["status"]["url"]
    missing = f"kit://{registry.host}/deploy-tests/digits:no-such-tag"
    isvc_api.patch_namespaced_custom_object(
        *ISVC[:2], test_namespace, ISVC[2], name, {"spec": {"predictor": {"model": {"storageUri": missing}}}}
    )
    obj = wait_for_isvc(isvc_api, test_namespace, name, failed)

    info = obj["status"]["modelStatus"]["lastFailureInfo"]
    assert info["reason"] == "ModelLoadFailed"
    assert info["exitCode"] == 1
    assert "storage-initializer" in info["message"] and "no-such-tag" in info["message"]
    assert condition(obj, "LatestDeploymentReady")["reason"] == "ModelLoadFailed"
    assert condition(obj, "Ready")["status"] == "True"  # v1 still serves
    rows, _ = digits(2)
    assert same(infer(url, name, rows), v1.logits(rows))


def test_a_format_without_runtime_is_refused_with_kserve_reason(inference_services, isvc_api, test_namespace):
    created = inference_services(
        {"predictor": {"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "kit://r.example/a/b:c"}}}
    )
    obj = wait_for_isvc(isvc_api, test_namespace, created["metadata"]["name"], failed)
    assert obj["status"]["modelStatus"]["transitionStatus"] == "InvalidSpec"
    assert obj["status"]["modelStatus"]["lastFailureInfo"]["reason"] == "NoSupportingRuntime"
    assert "sklearn" in condition(obj, "Ready")["message"]


def test_custom_container_reads_the_unpacked_modelkit_from_mnt_models(
    inference_services, isvc_api, test_namespace, plain_http_secret, digits_models
):
    """A custom predictor: any command that listens on $(POD_IP):$(PORT); STORAGE_URI gets the
    ModelKit unpacked into /mnt/models for it."""
    v1 = digits_models["v1"]
    spec = {
        "predictor": {
            "containers": [
                {
                    "name": "kserve-container",
                    "image": "python:3.11",
                    "command": ["python", "-m", "http.server", "$(PORT)", "--bind", "$(POD_IP)"],
                    "args": ["--directory", "/mnt/models"],
                    "env": [{"name": "STORAGE_URI", "value": v1.uri}],
                }
            ]
        }
    }
    created = inference_services(spec, {"serving.kserve.io/storage-secret": plain_http_secret})
    obj = wait_for_isvc(isvc_api, test_namespace, created["metadata"]["name"], ready)
    served = httpx.get(f"{obj['status']['url']}/metrics.json")
    assert served.status_code == 200
    assert served.json() == __import__("json").loads((v1.directory / "metrics.json").read_text())


def test_deleting_the_inferenceservice_stops_its_predictor(
    inference_services, isvc_api, kube_api, test_namespace, plain_http_secret, digits_models
):
    from tests.deploy.conftest import delete_and_wait

    created = inference_services(
        model_spec(digits_models["v1"].uri), {"serving.kserve.io/storage-secret": plain_http_secret}
    )
    name = created["metadata"]["name"]
    url = wait_for_isvc(isvc_api, test_namespace, name, ready)["status"]["url"]
    [pod] = pods_of(kube_api, test_namespace, name)
    pid = int(pod.status.container_statuses[0].container_id.removeprefix("process://"))
    os.kill(pid, 0)  # the predictor process runs

    delete_and_wait(kube_api, test_namespace, name)

    deadline = time.monotonic() + 15
    while alive(pid):
        assert time.monotonic() < deadline, "the predictor process outlived its InferenceService"
        time.sleep(0.1)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/v2/health/ready", timeout=2)
