"""The official ``kubernetes`` client against the embedded API server, over real HTTPS."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from airflow_provider_training.embedded import ControlPlane, Home
from airflow_provider_training.embedded.podlogs import LogWriter, log_path
from tests.factories import JOB_LABEL, condition, pod, pytorchjob

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"


def custom(api: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def test_create_get_replace_delete_a_pytorchjob(kube_api: Any, test_namespace: str) -> None:
    jobs = custom(kube_api)
    created = jobs.create_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, pytorchjob("mnist"))
    meta = created["metadata"]
    assert meta["uid"] and meta["generation"] == 1 and meta["creationTimestamp"].endswith("Z")
    fetched = jobs.get_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, "mnist")
    assert fetched == created

    fetched["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = "Never"
    replaced = jobs.replace_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, "mnist", fetched)
    assert replaced["metadata"]["generation"] == 2
    assert int(replaced["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])

    # the first copy is stale now: optimistic concurrency refuses it
    with pytest.raises(ApiException) as stale:
        jobs.replace_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, "mnist", created)
    assert stale.value.status == 409 and '"reason":"Conflict"' in stale.value.body

    with pytest.raises(ApiException) as duplicate:
        jobs.create_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, pytorchjob("mnist"))
    assert duplicate.value.status == 409 and "AlreadyExists" in duplicate.value.body

    jobs.delete_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, "mnist")
    with pytest.raises(ApiException) as gone:
        jobs.get_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, "mnist")
    assert gone.value.status == 404
    assert 'pytorchjobs.kubeflow.org \\"mnist\\" not found' in gone.value.body


def test_status_only_changes_through_the_status_subresource(kube_api: Any, test_namespace: str) -> None:
    jobs = custom(kube_api)
    job = pytorchjob("status-job")
    job["status"] = {"conditions": [condition("Succeeded", "Faked", "set at create")]}
    created = jobs.create_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, job)
    assert "status" not in created  # dropped on create, as for any CRD with a status subresource

    running = {"status": {"conditions": [condition("Running", "PyTorchJobRunning", "running")]}}
    patched = jobs.patch_namespaced_custom_object_status(GROUP, VERSION, test_namespace, PLURAL, "status-job", running)
    assert patched["status"]["conditions"][0]["type"] == "Running"
    assert patched["metadata"]["generation"] == 1

    # a write to the main resource keeps the stored status
    bogus = {"status": {"conditions": []}, "metadata": {"labels": {"team": "a"}}}
    after = jobs.patch_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, "status-job", bogus)
    assert after["status"]["conditions"][0]["type"] == "Running"
    assert after["metadata"]["labels"] == {"team": "a"}


def test_watch_replays_from_a_resource_version_and_follows_live_writes(kube_api: Any, test_namespace: str) -> None:
    jobs = custom(kube_api)
    start_rv = jobs.list_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL)["metadata"]["resourceVersion"]
    jobs.create_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, pytorchjob("w1"))
    jobs.patch_namespaced_custom_object(
        GROUP, VERSION, test_namespace, PLURAL, "w1", {"metadata": {"labels": {"x": "1"}}}
    )

    def later() -> None:
        time.sleep(0.3)
        jobs.delete_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, "w1")

    threading.Thread(target=later).start()
    seen = []
    stream = watch.Watch().stream(
        jobs.list_namespaced_custom_object,
        GROUP,
        VERSION,
        test_namespace,
        PLURAL,
        resource_version=start_rv,
        timeout_seconds=5,
    )
    for event in stream:
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if event["type"] == "DELETED":
            break
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


def test_watch_sends_bookmarks_when_asked(kube_api: Any, test_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    response = core.list_namespaced_config_map(
        test_namespace, watch=True, allow_watch_bookmarks=True, timeout_seconds=2, _preload_content=False
    )
    first = next(response.stream())  # the server ends the stream at timeoutSeconds
    assert b'"type":"BOOKMARK"' in first and b'"resourceVersion"' in first
    response.release_conn()


def _pods(api: Any, namespace: str, **kwargs: Any) -> list[str]:
    return sorted(p.metadata.name for p in client.CoreV1Api(api).list_namespaced_pod(namespace, **kwargs).items)


def test_label_and_field_selectors_and_pagination(kube_api: Any, test_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    for i, rtype in enumerate(["master", "worker", "worker"]):
        labels = {JOB_LABEL: "mnist", "training.kubeflow.org/replica-type": rtype}
        if i == 2:
            labels["gpu"] = "yes"
        core.create_namespaced_pod(test_namespace, pod(f"mnist-{rtype}-{i}", labels))
    core.create_namespaced_pod(test_namespace, pod("other", {JOB_LABEL: "other"}))
    core.patch_namespaced_pod_status("mnist-worker-2", test_namespace, {"status": {"phase": "Running"}})

    assert _pods(kube_api, test_namespace, label_selector=f"{JOB_LABEL}=mnist") == [
        "mnist-master-0",
        "mnist-worker-1",
        "mnist-worker-2",
    ]
    assert _pods(kube_api, test_namespace, label_selector=f"{JOB_LABEL}!=mnist") == ["other"]
    assert _pods(kube_api, test_namespace, label_selector="training.kubeflow.org/replica-type in (master)") == [
        "mnist-master-0"
    ]
    assert _pods(kube_api, test_namespace, label_selector="training.kubeflow.org/replica-type notin (master)") == [
        "mnist-worker-1",
        "mnist-worker-2",
        "other",
    ]
    assert _pods(kube_api, test_namespace, label_selector="gpu") == ["mnist-worker-2"]
    assert _pods(kube_api, test_namespace, label_selector=f"!gpu,{JOB_LABEL}=mnist") == [
        "mnist-master-0",
        "mnist-worker-1",
    ]
    assert _pods(kube_api, test_namespace, field_selector="status.phase=Running") == ["mnist-worker-2"]
    assert _pods(kube_api, test_namespace, field_selector="metadata.name=other") == ["other"]

    first = core.list_namespaced_pod(test_namespace, limit=3)
    assert len(first.items) == 3 and first.metadata._continue
    rest = core.list_namespaced_pod(test_namespace, limit=3, _continue=first.metadata._continue)
    assert [p.metadata.name for p in first.items + rest.items] == sorted(
        ["mnist-master-0", "mnist-worker-1", "mnist-worker-2", "other"]
    )
    assert not rest.metadata._continue


def test_json_merge_and_strategic_merge_patches(kube_api: Any, test_namespace: str) -> None:
    jobs, core = custom(kube_api), client.CoreV1Api(kube_api)
    jobs.create_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, pytorchjob("p", workers=1))
    ops = [{"op": "replace", "path": "/spec/pytorchReplicaSpecs/Worker/replicas", "value": 3}]
    json_patch = "application/json-patch+json"
    patched = jobs.patch_namespaced_custom_object(
        GROUP, VERSION, test_namespace, PLURAL, "p", ops, _content_type=json_patch
    )
    assert patched["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    merged = jobs.patch_namespaced_custom_object(
        GROUP, VERSION, test_namespace, PLURAL, "p", {"spec": {"pytorchReplicaSpecs": {"Worker": None}}}
    )
    assert list(merged["spec"]["pytorchReplicaSpecs"]) == ["Master"]
    with pytest.raises(ApiException) as bad:
        jobs.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            test_namespace,
            PLURAL,
            "p",
            [{"op": "remove", "path": "/spec/nothing"}],
            _content_type=json_patch,
        )
    assert bad.value.status == 422

    core.create_namespaced_pod(test_namespace, pod("two", containers=("main", "sidecar")))
    # the python client sends strategic merge patch for core types: containers merge by name
    core.patch_namespaced_pod(
        "two", test_namespace, {"spec": {"containers": [{"name": "sidecar", "image": "busybox"}]}}
    )
    containers = {c.name: c.image for c in core.read_namespaced_pod("two", test_namespace).spec.containers}
    assert containers == {"main": "python:3.11", "sidecar": "busybox"}


def test_owner_references_drive_garbage_collection(kube_api: Any, test_namespace: str) -> None:
    jobs, core = custom(kube_api), client.CoreV1Api(kube_api)
    owner = jobs.create_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, pytorchjob("gc"))
    core.create_namespaced_pod(test_namespace, pod("gc-master-0", owner=owner))
    jobs.delete_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, "gc", propagation_policy="Background")
    assert _pods(kube_api, test_namespace) == []

    owner = jobs.create_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, pytorchjob("orphan"))
    core.create_namespaced_pod(test_namespace, pod("orphan-master-0", owner=owner))
    jobs.delete_namespaced_custom_object(GROUP, VERSION, test_namespace, PLURAL, "orphan", propagation_policy="Orphan")
    kept = core.read_namespaced_pod("orphan-master-0", test_namespace)
    assert not kept.metadata.owner_references


def test_generate_name_and_dry_run(kube_api: Any, test_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    made = core.create_namespaced_config_map(test_namespace, {"metadata": {"generateName": "cfg-"}, "data": {"a": "1"}})
    assert made.metadata.name.startswith("cfg-") and len(made.metadata.name) == 9
    dry = core.create_namespaced_config_map(test_namespace, {"metadata": {"name": "dry"}}, dry_run="All")
    assert dry.metadata.name == "dry"
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("dry", test_namespace)
    assert missing.value.status == 404


def test_pod_logs_tail_timestamps_and_follow(kube_api: Any, control_plane: ControlPlane, test_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_pod(test_namespace, pod("logger"))
    with pytest.raises(ApiException) as waiting:
        core.read_namespaced_pod_log("logger", test_namespace)
    assert waiting.value.status == 400 and "waiting to start" in waiting.value.body

    home = Home(Path(control_plane.home))
    first = LogWriter(log_path(home, test_namespace, "logger", "pytorch", 0))
    first.write("epoch 1 loss 0.9\nepoch 2 loss 0.5\n")
    first.close()
    writer = LogWriter(log_path(home, test_namespace, "logger", "pytorch", 1))
    writer.write("restarted\nepoch 3 loss 0.3\n")

    def read(**kwargs: Any) -> str:
        # kubernetes 36 turns a text/plain body into "b'...'" when it preloads it; read the raw body
        # as the cncf.kubernetes provider does
        return str(
            core.read_namespaced_pod_log("logger", test_namespace, _preload_content=False, **kwargs).data.decode()
        )

    assert read() == "restarted\nepoch 3 loss 0.3\n"
    assert read(previous=True).startswith("epoch 1 loss 0.9\n")
    assert read(tail_lines=1) == "epoch 3 loss 0.3\n"
    assert read(since_seconds=3600) == "restarted\nepoch 3 loss 0.3\n"
    stamped = read(timestamps=True).splitlines()
    assert stamped[0].endswith("Z restarted") and stamped[0][:4].isdigit()

    def finish() -> None:
        time.sleep(0.3)
        writer.write("epoch 4 loss 0.1\n")
        writer.close()
        core.patch_namespaced_pod_status("logger", test_namespace, {"status": {"phase": "Succeeded"}})

    threading.Thread(target=finish).start()
    started = time.monotonic()
    followed = core.read_namespaced_pod_log("logger", test_namespace, follow=True, _preload_content=False)
    text = followed.data.decode()
    assert text == "restarted\nepoch 3 loss 0.3\nepoch 4 loss 0.1\n"
    assert time.monotonic() - started < 5


def test_pvc_made_on_first_reference_and_events_selectable(
    kube_api: Any, control_plane: ControlPlane, test_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_pod(test_namespace, pod("uses-claim", claim="model-output-pvc"))
    claim = core.read_namespaced_persistent_volume_claim("model-output-pvc", test_namespace)
    assert claim.status.phase == "Bound"
    assert (Path(control_plane.home) / "volumes" / "pvc" / test_namespace / "model-output-pvc").is_dir()
    events = core.list_namespaced_event(
        test_namespace, field_selector="involvedObject.name=model-output-pvc,involvedObject.kind=PersistentVolumeClaim"
    )
    assert [e.reason for e in events.items] == ["ProvisioningSucceeded"]


def test_wrong_token_is_refused(control_plane: ControlPlane) -> None:
    configuration = client.Configuration()
    configuration.host = control_plane.api_url
    configuration.ssl_ca_cert = str(control_plane.ca)
    configuration.api_key = {"authorization": "Bearer not-the-token"}
    with client.ApiClient(configuration) as api, pytest.raises(ApiException) as refused:
        client.CoreV1Api(api).list_namespace()
    assert refused.value.status == 401
