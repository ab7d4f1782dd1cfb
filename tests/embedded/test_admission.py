"""Admission of built-in objects as kube-apiserver does it: wrong types are a 400 naming the field,
broken rules a 422 with causes, undecodable bodies a 400 — never a 500, never stored — and after
all of it kubectl and the official client still list every namespace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from airflow_provider_training.embedded import ControlPlane

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


@pytest.fixture
def http(control_plane: ControlPlane) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=control_plane.api_url,
        verify=str(control_plane.ca),
        headers={"Authorization": f"Bearer {control_plane.token}"},
        timeout=30,
    ) as c:
        yield c


def status(response: httpx.Response, code: int) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Status" and body["code"] == code, body
    return body


def cm(name: str, data: Any = None, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data or {}, **extra}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "python:3.11", "command": ["true"]}
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        # bound to a node nobody serves: these tests are about the API, not about running it
        "metadata": {"name": name},
        "spec": {"nodeName": "api-test-node", "containers": [container], **spec},
    }


def kubectl(plane: ControlPlane, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "KUBECACHEDIR": str(plane.home / "kube-cache")}
    return subprocess.run(
        [str(KUBECTL), *args], env=env, input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def assert_lists_still_decode(plane: ControlPlane, kube_api: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    core.list_namespaced_config_map(namespace)
    core.list_namespaced_secret(namespace)
    core.list_namespaced_pod(namespace)
    client.BatchV1Api(kube_api).list_namespaced_job(namespace)
    for kind in ("configmaps", "secrets", "pods", "jobs"):
        done = kubectl(plane, "get", kind, "-n", namespace, "-o", "json")
        assert done.returncode == 0, done.stderr


WRONG_TYPES = [
    ("configmaps", cm("name-number") | {"metadata": {"name": 123}}, "ObjectMeta.metadata.name of type string"),
    ("configmaps", cm("labels-list") | {"metadata": {"name": "l", "labels": ["a"]}}, "metadata.labels"),
    ("configmaps", cm("data-list", [1]), "ConfigMap.data of type map[string]string"),
    ("configmaps", cm("data-number-value", {"a": 1}), "ConfigMap.data[a] of type string"),
    ("pods", pod("grace-x", terminationGracePeriodSeconds="x"), "spec.terminationGracePeriodSeconds of type int64"),
    ("pods", pod("volumes-x", volumes="x"), "spec.volumes of type []Volume"),
    ("pods", pod("env-x", container={"env": "A=1"}), "spec.containers[0].env of type []EnvVar"),
    ("pods", pod("time-x") | {"metadata": {"name": "t", "creationTimestamp": "yesterday"}}, "parsing time"),
    ("secrets", {"metadata": {"name": "s"}, "data": {"password": "hunter2!"}}, "illegal base64 data in data[password]"),
    (
        "jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "job-grace-x"},
            "spec": {"template": {"spec": {**pod("x")["spec"], "terminationGracePeriodSeconds": "x"}}},
        },
        "spec.template.spec.terminationGracePeriodSeconds of type int64",
    ),
]


def _url(namespace: str, plural: str) -> str:
    return (
        f"/apis/batch/v1/namespaces/{namespace}/jobs"
        if plural == "jobs"
        else f"/api/v1/namespaces/{namespace}/{plural}"
    )


@pytest.mark.parametrize(
    ("plural", "obj", "expected"), WRONG_TYPES, ids=[o[1]["metadata"].get("name") or "x" for o in WRONG_TYPES]
)
def test_wrong_types_are_400_and_not_stored(
    http: httpx.Client, test_namespace: str, plural: str, obj: dict[str, Any], expected: str
) -> None:
    body = status(http.post(_url(test_namespace, plural), json=obj), 400)
    assert expected in body["message"], body["message"]
    assert "hunter2" not in body["message"]
    listed = http.get(_url(test_namespace, plural)).json()
    assert listed["items"] == []


INVALID = [
    ("configmaps", cm("newline\n"), "metadata.name", 'Invalid value: "newline\\n"'),
    ("configmaps", cm("Upper"), "metadata.name", "RFC 1123 subdomain"),
    (
        "configmaps",
        cm("bad-label") | {"metadata": {"name": "b", "labels": {"a b": "c"}}},
        "metadata.labels",
        "name part",
    ),
    (
        "configmaps",
        cm("bad-label-value") | {"metadata": {"name": "b", "labels": {"a": "c d"}}},
        "metadata.labels",
        "valid label",
    ),
    ("configmaps", cm("key-space", {"bad key": "v"}), "data[bad key]", "valid config key"),
    ("configmaps", cm("key-254", {"k" * 254: "v"}), f"data[{'k' * 80}]", "Too long"),
    ("configmaps", cm("key-dotdot", {"..data": "v"}), "data[..data]", "must not start with '..'"),
    ("configmaps", cm("too-big", {"a": "x" * (1024 * 1024 + 1)}), "data", "Too long"),
    (
        "pods",
        pod(
            "subpath-up",
            container={"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": "../../etc"}]},
            volumes=[{"name": "v", "emptyDir": {}}],
        ),
        "spec.containers[0].volumeMounts[0].subPath",
        "must not contain '..'",
    ),
    (
        "pods",
        pod(
            "subpath-abs",
            container={"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": "/etc"}]},
            volumes=[{"name": "v", "emptyDir": {}}],
        ),
        "spec.containers[0].volumeMounts[0].subPath",
        "must be a relative path",
    ),
    (
        "pods",
        pod(
            "items-up",
            volumes=[{"name": "v", "configMap": {"name": "c", "items": [{"key": "k", "path": "a/../../x"}]}}],
        ),
        "spec.volumes[0].configMap.items[0].path",
        "must not contain '..'",
    ),
    (
        "pods",
        pod("claim-up", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "../../etc"}}]),
        "spec.volumes[0].persistentVolumeClaim.claimName",
        "RFC 1123 subdomain",
    ),
    (
        "pods",
        pod("mount-unknown", container={"volumeMounts": [{"name": "nope", "mountPath": "/m"}]}),
        "spec.containers[0].volumeMounts[0].name",
        'Not found: "nope"',
    ),
    ("pods", pod("policy", restartPolicy="Sometimes"), "spec.restartPolicy", "Unsupported value"),
    ("pods", pod("no-containers") | {"spec": {"containers": []}}, "spec.containers", "Required value"),
]


@pytest.mark.parametrize(
    ("plural", "obj", "field", "expected"), INVALID, ids=[o[1]["metadata"]["name"].strip() for o in INVALID]
)
def test_invalid_objects_are_422_with_the_field(
    http: httpx.Client, test_namespace: str, plural: str, obj: dict[str, Any], field: str, expected: str
) -> None:
    body = status(http.post(_url(test_namespace, plural), json=obj), 422)
    assert body["reason"] == "Invalid"
    assert any(c["field"] == field and expected in c["message"] for c in body["details"]["causes"]), body
    assert http.get(_url(test_namespace, plural)).json()["items"] == []


def test_legal_edge_cases_are_accepted(http: httpx.Client, test_namespace: str) -> None:
    url = _url(test_namespace, "configmaps")
    assert http.post(url, json=cm("key-253", {"k" * 253: "v"})).status_code == 201
    limits = {"cpu": 1, "memory": "1Gi"}  # a quantity may be a JSON number
    assert (
        http.post(
            _url(test_namespace, "pods"), json=pod("numbers", container={"resources": {"limits": limits}})
        ).status_code
        == 201
    )
    yaml_body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dates\ndata:\n  day: 2024-01-01\n"
    created = http.post(url, content=yaml_body, headers={"Content-Type": "application/yaml"})
    assert created.status_code == 201, created.text
    assert created.json()["data"]["day"] == "2024-01-01"


def test_undecodable_bodies_and_parameters_are_400(
    http: httpx.Client, test_namespace: str, control_plane: ControlPlane, kube_api: Any
) -> None:
    url = _url(test_namespace, "configmaps")
    for constant in ("NaN", "Infinity", "-Infinity"):
        raw = f'{{"metadata": {{"name": "n"}}, "data": {{}}, "x": {constant}}}'
        body = status(http.post(url, content=raw, headers={"Content-Type": "application/json"}), 400)
        assert "numbers must be finite" in body["message"]
    deep = '{"metadata": {"name": "deep"}, "data": {}, "x": ' + "[" * 5000 + "]" * 5000 + "}"
    assert (
        "nests deeper"
        in status(http.post(url, content=deep, headers={"Content-Type": "application/json"}), 400)["message"]
    )
    bomb = (
        'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
        + "".join(
            f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + "metadata: {name: bomb}\n"
    )
    started = time.monotonic()
    body = status(http.post(url, content=bomb, headers={"Content-Type": "application/yaml"}), 400)
    assert "aliases" in body["message"] and time.monotonic() - started < 5
    binary = "metadata: {name: bin}\ndata: {a: !!binary aGVsbG8=}\n"
    assert (
        "bytes value"
        in status(http.post(url, content=binary, headers={"Content-Type": "application/yaml"}), 400)["message"]
    )
    for query in ("limit=abc", "limit=-1", "limit=²", "resourceVersion=99999999999999999999999", "resourceVersion=x"):
        status(http.get(f"{url}?{query}"), 400)
    for query in ("timeoutSeconds=x", "timeoutSeconds=nan", "timeoutSeconds=1e999", "resourceVersion=-1"):
        status(http.get(f"{url}?watch=true&{query}"), 400)
    assert_lists_still_decode(control_plane, kube_api, test_namespace)


def test_unknown_fields_strict_warn_ignore(
    http: httpx.Client, test_namespace: str, control_plane: ControlPlane
) -> None:
    url = _url(test_namespace, "pods")
    typo = pod("typo", container={"imagee": "python"})
    body = status(http.post(f"{url}?fieldValidation=Strict", json=typo), 400)
    assert body["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.containers[0].imagee"'
    )
    warned = http.post(f"{url}?fieldValidation=Warn", json=typo)
    assert warned.status_code == 201
    assert warned.headers["Warning"] == '299 - "unknown field \\"spec.containers[0].imagee\\""'
    ignored = http.post(f"{url}?fieldValidation=Ignore", json=pod("typo2", container={"imagee": "python"}))
    assert ignored.status_code == 201 and "Warning" not in ignored.headers
    # kubectl sends Strict and shows the server's words
    manifest = json.dumps(pod("typo3", container={"imagee": "python"}))
    done = kubectl(control_plane, "create", "-n", test_namespace, "-f", "-", stdin=manifest)
    assert done.returncode != 0
    assert 'strict decoding error: unknown field "spec.containers[0].imagee"' in done.stderr


def test_patches_that_make_an_object_invalid_are_refused(
    http: httpx.Client, test_namespace: str, control_plane: ControlPlane, kube_api: Any
) -> None:
    url = _url(test_namespace, "configmaps")
    assert http.post(url, json=cm("target", {"a": "1"})).status_code == 201
    item = f"{url}/target"
    patches = [
        ("application/strategic-merge-patch+json", {"data": 5}, 400),
        ("application/merge-patch+json", {"data": [1]}, 400),
        ("application/merge-patch+json", {"metadata": {"labels": {"a b": "c"}}}, 422),
        ("application/json-patch+json", [{"op": "add", "path": "/data/b", "value": 1.5}], 400),
        ("application/json-patch+json", [{"op": "add", "path": "/data/..x", "value": "v"}], 422),
        ("application/strategic-merge-patch+json", {"$deleteFromPrimitiveList/data": 5}, 400),
    ]
    for media, patch, code in patches:
        response = http.patch(item, content=json.dumps(patch), headers={"Content-Type": media})
        status(response, code)
    assert http.get(item).json()["data"] == {"a": "1"}
    done = kubectl(control_plane, "patch", "configmap", "target", "-n", test_namespace, "-p", '{"data": 5}')
    assert done.returncode != 0 and "cannot unmarshal number" in done.stderr
    assert_lists_still_decode(control_plane, kube_api, test_namespace)


def test_training_job_templates_follow_the_path_rules(http: httpx.Client, test_namespace: str) -> None:
    from tests.factories import pytorchjob

    job = pytorchjob("escape")
    template = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    template["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "../home"}}]
    template["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/d", "subPath": "../.."}]
    body = status(http.post(f"/apis/kubeflow.org/v1/namespaces/{test_namespace}/pytorchjobs", json=job), 422)
    fields = {c["field"] for c in body["details"]["causes"]}
    assert fields == {
        "spec.pytorchReplicaSpecs[Master].template.spec.volumes[0].persistentVolumeClaim.claimName",
        "spec.pytorchReplicaSpecs[Master].template.spec.containers[0].volumeMounts[0].subPath",
    }


def test_pod_spec_is_immutable_and_status_only_through_the_subresource(http: httpx.Client, test_namespace: str) -> None:
    """kube-apiserver's ValidatePodUpdate: what runs is what is stored."""
    url = _url(test_namespace, "pods")
    body = pod("frozen", tolerations=[{"key": "a", "operator": "Exists"}])
    assert http.post(url, json=body).status_code == 201, body
    item = f"{url}/frozen"
    merge = {"Content-Type": "application/merge-patch+json"}
    strategic = {"Content-Type": "application/strategic-merge-patch+json"}
    refused = [
        {"spec": {"containers": [{"name": "main", "command": ["sh", "-c", "evil"]}]}},
        {"spec": {"nodeName": "elsewhere"}},
        {"spec": {"volumes": [{"name": "host", "emptyDir": {}}]}},
        {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}},  # drops "a": not an addition
    ]
    for patch in refused:
        answer = status(http.patch(item, content=json.dumps(patch), headers=strategic), 422)
        assert answer["reason"] == "Invalid", answer
        assert answer["message"].startswith(
            'Pod "frozen" is invalid: spec: Forbidden: pod updates may not change fields other than '
            "`spec.containers[*].image`"
        ), answer["message"]
        assert answer["details"]["causes"][0]["field"] == "spec", answer
    stored = http.get(item).json()
    assert stored["spec"]["containers"][0]["command"] == ["true"] and stored["spec"]["nodeName"] == "api-test-node"
    # what may change does
    allowed = [
        {"spec": {"containers": [{"name": "main", "image": "python:3.12"}]}},
        {"spec": {"activeDeadlineSeconds": 100}},
        {"spec": {"activeDeadlineSeconds": 50}},
        {"spec": {"tolerations": [*stored["spec"]["tolerations"], {"key": "b", "operator": "Exists"}]}},
        {"metadata": {"labels": {"ok": "yes"}}},
    ]
    for patch in allowed:  # strategic: containers merge by name (a merge patch would replace the list)
        response = http.patch(item, content=json.dumps(patch), headers=strategic)
        assert response.status_code == 200, (patch, response.text)
    answer = status(http.patch(item, content=json.dumps({"spec": {"activeDeadlineSeconds": 60}}), headers=merge), 422)
    assert answer["message"] == (
        'Pod "frozen" is invalid: spec.activeDeadlineSeconds: Invalid value: 60: '
        "must be less than or equal to previous value"
    ), answer
    # status on the main resource is ignored; through /status it is written
    before = http.get(item).json()
    response = http.patch(item, content=json.dumps({"status": {"phase": "Succeeded"}}), headers=merge)
    assert response.status_code == 200, response.text
    assert response.json().get("status", {}).get("phase") == before.get("status", {}).get("phase") != "Succeeded"
    replaced = {**response.json(), "status": {"phase": "Failed"}}
    response = http.put(item, json=replaced)
    assert response.status_code == 200 and response.json().get("status", {}).get("phase") != "Failed", response.text
    response = http.patch(f"{item}/status", content=json.dumps({"status": {"phase": "Succeeded"}}), headers=merge)
    assert response.status_code == 200 and response.json()["status"]["phase"] == "Succeeded", response.text
    final = http.get(item).json()
    assert final["spec"]["containers"][0]["image"] == "python:3.12" and final["spec"]["activeDeadlineSeconds"] == 50


def test_a_job_of_more_pods_than_this_machine_runs_is_refused_naming_the_field(
    control_plane: ControlPlane, http: httpx.Client, test_namespace: str
) -> None:
    """Issue 25 item 1: a TrainJob of 1,000,000 nodes was admitted and stalled every client for
    minutes. The embedded control plane refuses more than AIRFLOW_TRAINING_MAX_PODS_PER_JOB pods
    (1,000 by default) for one job, as kubectl shows it, and stores nothing."""
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "million", "namespace": test_namespace},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1_000_000}},
    }
    done = kubectl(control_plane, "create", "-f", "-", stdin=json.dumps(trainjob))
    assert done.returncode == 1
    assert 'The TrainJob "million" is invalid: spec.trainer.numNodes: Invalid value: 1000000:' in done.stderr
    assert "at most 1000 pods for one job" in done.stderr and "AIRFLOW_TRAINING_MAX_PODS_PER_JOB" in done.stderr
    trainjobs = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{test_namespace}/trainjobs"
    assert http.get(f"{trainjobs}/million").status_code == 404
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "wide"},
        "spec": {"parallelism": 5000, "template": {"spec": {**pod("x")["spec"], "restartPolicy": "Never"}}},
    }
    body = status(http.post(_url(test_namespace, "jobs"), json=job), 422)
    assert body["details"]["causes"][0]["field"] == "spec.parallelism"
    worker = {"replicas": 20_000, "template": {"spec": {"containers": [{"name": "pytorch", "image": "python:3.11"}]}}}
    pytorchjob = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "wide"},
        "spec": {"pytorchReplicaSpecs": {"Worker": worker}},
    }
    body = status(http.post(f"/apis/kubeflow.org/v1/namespaces/{test_namespace}/pytorchjobs", json=pytorchjob), 422)
    assert body["details"]["causes"][0]["field"] == "spec.pytorchReplicaSpecs[Worker].replicas"
    # hostile: a count past int32 is kube-apiserver's decoding error, not a cap
    job["spec"]["parallelism"] = 3_000_000_000
    body = status(http.post(_url(test_namespace, "jobs"), json=job), 400)
    assert body["message"].endswith(
        "json: cannot unmarshal number 3000000000 into Go struct field JobSpec.spec.parallelism of type int32"
    )
    # a job at the cap is admitted (and, suspended, runs nothing)
    trainjob["spec"]["trainer"]["numNodes"] = 1000
    trainjob["spec"]["suspend"] = True
    assert http.post(trainjobs, json=trainjob).status_code == 201
    http.delete(f"{trainjobs}/million")
