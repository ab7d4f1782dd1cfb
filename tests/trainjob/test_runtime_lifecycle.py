"""What Trainer v2.3.0 / JobSet v0.12.0 do over a TrainJob's life, on the session control plane: the
runtime a TrainJob was first built from is kept (``<tj>-runtime-snapshot``), so a later runtime edit
does not change its pods; a resumed TrainJob's JobSet is applied again with its changed
``runtimePatches``; a finished JobSet with ``ttlSecondsAfterFinished`` is deleted after it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from airflow_provider_training.embedded import ControlPlane
from tests.trainjob.helpers import GROUP, PY, VERSION, TrainJobs, runtime, trainjob, wait_for

SAY_COLOR = "import os, time; print('color', os.environ.get('COLOR'), flush=True); time.sleep(300)"


@pytest.fixture
def tj(kube_api: Any, test_namespace: str, control_plane: ControlPlane) -> TrainJobs:
    return TrainJobs(kube_api, test_namespace, control_plane.kubeconfig)


def _node_container(rt: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]["containers"][0]
    return container


def _log_of_running_pod(tj: TrainJobs, name: str, uid_not: str = "") -> tuple[str, str]:
    seen: list[tuple[str, str]] = []

    def printed() -> bool:
        for pod in tj.pods(name):
            if (
                pod.metadata.uid != uid_not
                and pod.status.phase == "Running"
                and pod.metadata.deletion_timestamp is None
            ):
                text = tj.logs(pod.metadata.name)
                if "color" in text:
                    seen[:] = [(pod.metadata.uid, text)]
                    return True
        return False

    wait_for(printed, 120, f"a running pod of {name} to print its color")
    return seen[0]


def test_a_runtime_edited_after_admission_does_not_change_the_trainjobs_pods(tj: TrainJobs) -> None:
    rt = runtime("painted", {"numNodes": 1, "torch": {}})
    _node_container(rt)["env"] = [{"name": "COLOR", "value": "blue"}]
    tj.create(rt)
    tj.create(trainjob("kept", runtime="painted", kind="TrainingRuntime", command=[PY, "-c", SAY_COLOR]))
    first_uid, log = _log_of_running_pod(tj, "kept")
    assert "color blue" in log
    snapshot = tj.core.read_namespaced_config_map("kept-runtime-snapshot", tj.namespace)
    assert snapshot.metadata.owner_references[0].kind == "TrainJob" and snapshot.metadata.owner_references[0].controller
    kept = yaml.safe_load(snapshot.data["runtime"])
    assert (kept["kind"], kept["metadata"]["name"]) == ("TrainingRuntime", "painted")

    # the runtime changes; the TrainJob's JobSet is lost (deleted by hand) and built again
    edited = tj.custom.get_namespaced_custom_object(GROUP, VERSION, tj.namespace, "trainingruntimes", "painted")
    _node_container(edited)["env"] = [{"name": "COLOR", "value": "red"}]
    tj.custom.replace_namespaced_custom_object(GROUP, VERSION, tj.namespace, "trainingruntimes", "painted", edited)
    deleted = tj.kubectl("delete", "jobset", "kept", "--wait=true")
    assert deleted.returncode == 0, deleted.stderr
    _, log = _log_of_running_pod(tj, "kept", uid_not=first_uid)
    assert "color blue" in log  # from the snapshot, not the edited runtime

    # a new TrainJob gets the runtime as it is now
    tj.create(trainjob("fresh", runtime="painted", kind="TrainingRuntime", command=[PY, "-c", SAY_COLOR]))
    assert "color red" in _log_of_running_pod(tj, "fresh")[1]
    for name in ("kept", "fresh"):
        tj.custom.delete_namespaced_custom_object(GROUP, VERSION, tj.namespace, "trainjobs", name)
    wait_for(
        lambda: (
            not tj.core.list_namespaced_config_map(tj.namespace, label_selector="").items
            or not any(
                c.metadata.name.endswith("-runtime-snapshot")
                for c in tj.core.list_namespaced_config_map(tj.namespace).items
            )
        ),
        30,
        "the snapshots to be garbage-collected with their TrainJobs",
    )


def _patch(manager: str, pod_template: dict[str, Any]) -> dict[str, Any]:
    job = {"name": "node", "template": {"spec": {"template": pod_template}}}
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}


def test_resume_applies_the_runtime_patches_changed_while_suspended(tj: TrainJobs) -> None:
    for name in ("queued", "remounted"):
        body = trainjob(name, numNodes=2, command=[PY, "-c", "print('ran', flush=True)"])
        body["spec"]["suspend"] = True
        tj.create(body)
        tj.wait_condition(name, "Suspended", timeout=60)
        wait_for(lambda name=name: bool(tj.jobset(name).get("status")), 30, f"{name}'s JobSet")
    # what Kueue does to a suspended TrainJob: labels, tolerations through a runtime patch, then resume
    toleration = {"key": "example.com/queue", "operator": "Exists", "effect": "NoSchedule"}
    kueue = _patch(
        "example.com/queue-controller",
        {"metadata": {"labels": {"queue": "gold"}}, "spec": {"tolerations": [toleration]}},
    )
    tj.patch("queued", {"spec": {"runtimePatches": [kueue]}})
    tj.patch("queued", {"spec": {"suspend": False}})
    tj.wait_condition("queued", "Complete", timeout=120)
    pods = tj.pods("queued")
    assert len(pods) == 2
    assert all(p.metadata.labels.get("queue") == "gold" for p in pods)
    assert all(
        any(t.key == "example.com/queue" and t.effect == "NoSchedule" for t in p.spec.tolerations or []) for p in pods
    )
    assert tj.jobset("queued")["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"] == {
        "queue": "gold"
    }

    # a patch JobSet's webhook does not let change on an existing JobSet (a volume): upstream's event,
    # and the TrainJob still resumes, without it
    volume = _patch(
        "example.com/storage",
        {"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}},
    )
    tj.patch("remounted", {"spec": {"runtimePatches": [volume]}})
    tj.patch("remounted", {"spec": {"suspend": False}})
    tj.wait_condition("remounted", "Complete", timeout=120)
    assert all(not any(v.name == "scratch" for v in p.spec.volumes or []) for p in tj.pods("remounted"))
    events = tj.core.list_namespaced_event(tj.namespace, field_selector="involvedObject.name=remounted").items
    refused = [e for e in events if e.reason == "TrainJobResourcesCreationFailed"]
    assert refused and refused[0].type == "Warning"
    assert refused[0].message.startswith("TrainJob resources reconciliation failed: ")
    assert "spec.replicatedJobs" in refused[0].message and "field is immutable" in refused[0].message


def test_a_finished_jobset_with_a_ttl_is_deleted_after_it(tj: TrainJobs) -> None:
    short = runtime("short-lived", {"numNodes": 1, "torch": {}}, ttlSecondsAfterFinished=2)
    tj.create(short)
    tj.create(trainjob("brief", runtime="short-lived", kind="TrainingRuntime", command=[PY, "-c", "pass"]))
    tj.wait_condition("brief", "Complete", timeout=120)
    jobset = tj.jobset("brief")
    assert jobset["spec"]["ttlSecondsAfterFinished"] == 2

    def gone() -> bool:
        try:
            tj.jobset("brief")
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, 60, "the finished JobSet to be deleted after its TTL")
    finished = next(c for c in jobset["status"]["conditions"] if c["type"] == "Completed")["lastTransitionTime"]
    assert finished  # deleted after it, not at once: the JobSet was read after it finished
    wait_for(
        lambda: not tj.pods("brief") and not tj.batch.list_namespaced_job(tj.namespace).items, 30, "its Jobs and pods"
    )
    # the TrainJob keeps its status (upstream: a missing JobSet of a finished TrainJob is fine)
    assert tj.condition("brief", "Complete") is not None
    assert json.loads(tj.kubectl("get", "trainjob", "brief", "-o", "json").stdout)["status"]["jobsStatus"]
