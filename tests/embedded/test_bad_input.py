"""Bad requests get a clear 4xx Status naming what is wrong, and the server keeps serving."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from airflow_provider_training.embedded import ControlPlane
from tests.factories import pytorchjob


@pytest.fixture
def http(control_plane: ControlPlane) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=control_plane.api_url,
        verify=str(control_plane.ca),
        headers={"Authorization": f"Bearer {control_plane.token}"},
        timeout=10,
    ) as c:
        yield c


def _status(response: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Status" and body["code"] == code and body["reason"] == reason, body
    return body


JOBS = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"


def test_malformed_json(http: httpx.Client) -> None:
    body = _status(
        http.post(JOBS, content=b'{"kind": "PyTorchJob", ', headers={"Content-Type": "application/json"}),
        400,
        "BadRequest",
    )
    assert "malformed JSON" in body["message"]


def test_object_of_another_kind(http: httpx.Client) -> None:
    body = _status(
        http.post(JOBS, json={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}), 400, "BadRequest"
    )
    assert "Pod (v1)" in body["message"] and "PyTorchJob (kubeflow.org/v1)" in body["message"]


def test_body_over_three_mebibytes(http: httpx.Client) -> None:
    job = pytorchjob("huge")
    job["metadata"]["annotations"] = {"blob": "x" * (3 * 1024 * 1024 + 10)}
    body = _status(
        http.post(JOBS, content=json.dumps(job).encode(), headers={"Content-Type": "application/json"}),
        413,
        "RequestEntityTooLarge",
    )
    assert "3145728" in body["message"]


def test_unknown_group_resource_and_path(http: httpx.Client) -> None:
    _status(http.get("/apis/example.com/v1/namespaces/default/widgets"), 404, "NotFound")
    _status(http.get("/apis/kubeflow.org/v1/namespaces/default/widgets"), 404, "NotFound")
    _status(http.get("/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/x/scale/extra"), 404, "NotFound")
    _status(http.get("/apis/nothing"), 404, "NotFound")


def test_verbs_a_resource_does_not_have(http: httpx.Client) -> None:
    _status(http.post(f"{JOBS}/some-name", json=pytorchjob("some-name")), 405, "MethodNotAllowed")
    _status(http.put(JOBS, json=pytorchjob("x")), 405, "MethodNotAllowed")
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}}
    body = _status(
        http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd), 405, "MethodNotAllowed"
    )
    assert "read-only" in body["message"]


def test_bad_parameters(http: httpx.Client) -> None:
    body = _status(http.post(f"{JOBS}?fieldValidation=Loose", json=pytorchjob("fv")), 400, "BadRequest")
    assert "fieldValidation" in body["message"]
    body = _status(http.get("/api/v1/pods", params={"labelSelector": "a in b"}), 400, "BadRequest")
    assert "labelSelector" in body["message"]
    body = _status(http.get("/api/v1/pods", params={"fieldSelector": "spec.image=x"}), 400, "BadRequest")
    assert "spec.image" in body["message"]
    _status(http.get("/api/v1/pods", params={"continue": "not-a-token"}), 400, "BadRequest")


def test_invalid_name_and_missing_namespace(http: httpx.Client) -> None:
    body = _status(http.post(JOBS, json=pytorchjob("Not_A_Name")), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    body = _status(
        http.post("/apis/kubeflow.org/v1/namespaces/missing/pytorchjobs", json=pytorchjob("a")), 404, "NotFound"
    )
    assert body["message"] == 'namespaces "missing" not found'


def test_webhook_violation_is_422_with_one_cause_per_field(http: httpx.Client) -> None:
    job = pytorchjob("two-masters")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    body = _status(http.post(JOBS, json=job), 422, "Invalid")
    assert body["message"].startswith('PyTorchJob.kubeflow.org "two-masters" is invalid: [')
    fields = [cause["field"] for cause in body["details"]["causes"]]
    assert "spec.pytorchReplicaSpecs[Master].replicas" in fields


def test_unknown_fields_strict_warn_ignore(http: httpx.Client) -> None:
    job = pytorchjob("unknown-field")
    job["spec"]["cleanPodPolicy"] = "None"
    body = _status(http.post(f"{JOBS}?fieldValidation=Strict", json=job), 400, "BadRequest")
    assert 'strict decoding error: unknown field "spec.cleanPodPolicy"' in body["message"]
    warned = http.post(f"{JOBS}?fieldValidation=Warn&dryRun=All", json=job)
    assert warned.status_code == 201
    assert '299 - "unknown field \\"spec.cleanPodPolicy\\""' in warned.headers.get_list("warning")
    assert "cleanPodPolicy" not in warned.json()["spec"]
    ignored = http.post(f"{JOBS}?fieldValidation=Ignore&dryRun=All", json=job)
    assert ignored.status_code == 201 and "cleanPodPolicy" not in ignored.json()["spec"]
    assert not any("unknown field" in w for w in ignored.headers.get_list("warning"))


def test_still_serving_after_bad_input(http: httpx.Client) -> None:
    http.post(JOBS, content=b"\xff\xfe", headers={"Content-Type": "application/json"})
    assert http.get("/api/v1/namespaces/default").json()["metadata"]["name"] == "default"
    assert http.get("/readyz").text == "ok"


CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.mark.parametrize(
    ("body", "field", "go_type"),
    [
        ({"gracePeriodSeconds": "x"}, "gracePeriodSeconds", "int64"),
        ({"propagationPolicy": 5}, "propagationPolicy", "string"),
        ({"dryRun": "All"}, "dryRun", "[]string"),
        ({"preconditions": {"uid": 7}}, "Preconditions.preconditions.uid", "string"),
    ],
)
def test_delete_options_of_the_wrong_type_are_a_400_and_nothing_is_deleted(
    http: httpx.Client, body: dict[str, Any], field: str, go_type: str
) -> None:
    name = f"del-{field.replace('.', '-').lower()}"
    http.post(CONFIGMAPS, json={"metadata": {"name": name}, "data": {"k": "v"}}).raise_for_status()
    try:
        response = http.request("DELETE", f"{CONFIGMAPS}/{name}", json=body)
        status = _status(response, 400, "BadRequest")
        assert status["message"].startswith('DeleteOptions in version "v1" cannot be handled as a DeleteOptions: ')
        struct = field if "." in field else f"DeleteOptions.{field}"
        assert f"Go struct field {struct} of type {go_type}" in status["message"]
        assert http.get(f"{CONFIGMAPS}/{name}").status_code == 200
    finally:
        http.delete(f"{CONFIGMAPS}/{name}")


def test_delete_options_that_are_not_an_object_are_a_400(http: httpx.Client) -> None:
    status = _status(http.request("DELETE", f"{CONFIGMAPS}/whatever", json=[1]), 400, "BadRequest")
    assert "cannot unmarshal array into Go value of type DeleteOptions" in status["message"]


def _pb(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field, written by hand so the test does not trust the server's codec."""
    size, length = len(payload), b""
    while True:
        byte, size = size & 0x7F, size >> 7
        length += bytes([byte | (0x80 if size else 0)])
        if not size:
            break
    return bytes([number << 3 | 2]) + length + payload


def _pb_entry(number: int, key: bytes, value: bytes) -> bytes:
    return _pb(number, _pb(1, key) + _pb(2, value))


def _kubectl_body(kind: bytes, obj: bytes) -> bytes:
    return b"k8s\x00" + _pb(1, _pb(1, b"v1") + _pb(2, kind)) + _pb(2, obj)


BAD = b"\xc3("  # a UTF-8 lead byte followed by one that cannot continue it


@pytest.mark.parametrize(
    ("kind", "meta", "rest", "field"),
    [
        (b"ConfigMap", b"", _pb_entry(2, BAD, b"v"), "data"),
        (b"ConfigMap", b"", _pb_entry(2, b"key", BAD), "data[key]"),
        (b"ConfigMap", _pb_entry(11, BAD, b"v"), b"", "metadata.labels"),
        (b"ConfigMap", _pb_entry(12, b"note", BAD), b"", "metadata.annotations[note]"),
        (b"ConfigMap", _pb(14, BAD), b"", "metadata.finalizers[0]"),
        (b"Secret", b"", _pb_entry(4, b"password", BAD), "stringData[password]"),
        (b"Secret", b"", _pb(3, BAD), "type"),
    ],
)
def test_protobuf_strings_that_are_not_utf8_are_a_400_and_not_stored(
    http: httpx.Client, control_plane: ControlPlane, kind: bytes, meta: bytes, rest: bytes, field: str
) -> None:
    name = f"pb-utf8-{field.split('[')[0].replace('.', '-').lower()}-{kind.decode().lower()}"
    body = _kubectl_body(kind, _pb(1, _pb(1, name.encode()) + meta) + rest)
    plural = f"{kind.decode().lower()}s"
    log = control_plane.home / "daemon.log"
    seen = log.stat().st_size
    response = http.post(
        f"/api/v1/namespaces/default/{plural}",
        content=body,
        headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
    )
    status = _status(response, 400, "BadRequest")
    expected = f'{kind.decode()} in version "v1" cannot be handled as a {kind.decode()}: '
    assert status["message"].startswith(expected), status["message"]
    assert f"{field} " in status["message"] and "invalid UTF-8" in status["message"]
    assert http.get(f"/api/v1/namespaces/default/{plural}/{name}").status_code == 404
    with open(log, "rb") as fh:
        fh.seek(seen)
        assert b"Traceback" not in fh.read()


def test_protobuf_binary_secret_data_is_still_taken(http: httpx.Client) -> None:
    body = _kubectl_body(b"Secret", _pb(1, _pb(1, b"pb-binary")) + _pb_entry(2, b"blob", BAD))
    response = http.post(
        "/api/v1/namespaces/default/secrets",
        content=body,
        headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
    )
    try:
        assert response.status_code == 201, response.text
        assert response.json()["data"]["blob"] == "wyg="  # base64 of the two bytes, as kube-apiserver stores them
    finally:
        http.delete("/api/v1/namespaces/default/secrets/pb-binary")
