"""``kubernetes_asyncio`` (what the deferrable triggers use) against the embedded API server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.rest import ApiException

from airflow_provider_training.embedded import ControlPlane, Home
from airflow_provider_training.embedded.podlogs import LogWriter, log_path
from tests.factories import condition, pod, pytorchjob

G, V, P = "kubeflow.org", "v1", "pytorchjobs"


async def _api(plane: ControlPlane) -> client.ApiClient:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


def test_crud_watch_status_and_logs(control_plane: ControlPlane, test_namespace: str) -> None:
    ns = test_namespace

    async def scenario() -> None:
        async with await _api(control_plane) as api:
            jobs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
            listed = await jobs.list_namespaced_custom_object(G, V, ns, P)
            created = await jobs.create_namespaced_custom_object(G, V, ns, P, pytorchjob("async-job"))
            assert (await jobs.get_namespaced_custom_object(G, V, ns, P, "async-job"))["metadata"]["uid"] == created[
                "metadata"
            ]["uid"]

            async def succeed() -> None:
                await asyncio.sleep(0.2)
                await jobs.patch_namespaced_custom_object_status(
                    G,
                    V,
                    ns,
                    P,
                    "async-job",
                    {"status": {"conditions": [condition("Succeeded", "PyTorchJobSucceeded", "done")]}},
                    # kubernetes_asyncio would send a dict to custom objects as a JSON patch (a real
                    # server refuses that too), so name the merge patch
                    _content_type="application/merge-patch+json",
                )

            task = asyncio.create_task(succeed())
            types = []
            async with watch.Watch() as w:
                async for event in w.stream(
                    jobs.list_namespaced_custom_object,
                    G,
                    V,
                    ns,
                    P,
                    resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=5,
                ):
                    types.append(event["type"])
                    conditions = event["object"].get("status", {}).get("conditions", [])
                    if conditions and conditions[-1]["type"] == "Succeeded":
                        break
            await task
            assert types == ["ADDED", "MODIFIED"]

            await core.create_namespaced_pod(ns, pod("async-job-master-0"))
            writer = LogWriter(log_path(Home(Path(control_plane.home)), ns, "async-job-master-0", "pytorch", 0))
            writer.write("hello from rank 0\n")
            writer.close()
            text = await core.read_namespaced_pod_log("async-job-master-0", ns)
            assert text == "hello from rank 0\n"

            await jobs.delete_namespaced_custom_object(G, V, ns, P, "async-job")
            with pytest.raises(ApiException) as missing:
                await jobs.get_namespaced_custom_object(G, V, ns, P, "async-job")
            assert missing.value.status == 404

    asyncio.run(scenario())
