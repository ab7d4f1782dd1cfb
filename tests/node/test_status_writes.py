"""What the node agent writes for a pod, as a watching client sees it: the binding goes with the
first status write, no write repeats what the pod already shows, the final phase carries the
binding, and the kubelet's events are recorded once each even when a state was never written."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from tests.controllers.jobs import Jobs
from tests.factories import job_document as job
from tests.factories import replica
from tests.waiting import wait_for


def _history(api: client.ApiClient, namespace: str, since: str, pod: str) -> list[tuple[str, dict[str, Any]]]:
    """Every stored version of ``pod`` after ``since``, from a watch that replays them."""
    response = client.CoreV1Api(api).list_namespaced_pod(
        namespace,
        watch=True,
        resource_version=since,
        field_selector=f"metadata.name={pod}",
        timeout_seconds=1,
        _preload_content=False,
    )
    events = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    return [(e["type"], e["object"]) for e in events if e["type"] in ("ADDED", "MODIFIED")]


def test_a_short_replica_is_reported_without_repeated_writes(kube_api: client.ApiClient, test_namespace: str) -> None:
    jobs = Jobs(kube_api, test_namespace)
    since = jobs.core.list_namespaced_pod(test_namespace).metadata.resource_version
    specs = {"Master": replica("print('done')"), "Worker": replica("print('done')")}  # the worker has an init container
    jobs.create(job("PyTorchJob", "brief", specs))
    jobs.wait("PyTorchJob", "brief", "Succeeded")
    wait_for(lambda: jobs.pod("brief-worker-0").status.phase == "Succeeded", 30, "the worker's last write")

    for name in ("brief-master-0", "brief-worker-0"):
        pods = [obj for _, obj in _history(kube_api, test_namespace, since, name)]
        assert not pods[0]["spec"].get("nodeName")  # as created
        # every write shows something new: none repeats the status already shown
        shown = [json.dumps([p["status"], p["spec"].get("nodeName")], sort_keys=True) for p in pods]
        assert len(set(shown)) == len(shown), f"{name} written twice with the same status"
        # once bound, always bound: no status write loses the binding
        bound = [bool(p["spec"].get("nodeName")) for p in pods]
        assert bound == sorted(bound) and bound[-1]
        final = jobs.pod(name)
        assert final.status.phase == "Succeeded"
        assert final.spec.node_name == "embedded" and final.status.pod_ip and final.status.host_ip == "127.0.0.1"
        assert {c.type: c.status for c in final.status.conditions}["PodScheduled"] == "True"

    # the kubelet's Started for each container (the worker's init container too), however few writes
    master = [e.reason for e in jobs.events("brief-master-0")]
    worker = [e.reason for e in jobs.events("brief-worker-0")]
    assert (master.count("Scheduled"), master.count("Started")) == (1, 1), master
    assert (worker.count("Scheduled"), worker.count("Started")) == (1, 2), worker
