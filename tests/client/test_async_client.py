"""AsyncTrainingJobClient (kubernetes_asyncio) against the embedded API server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from airflow_provider_training.client import AsyncTrainingJobClient, JobDeleted, WaitTimeout, job_state
from airflow_provider_training.embedded import ControlPlane
from tests.factories import simple_job as job
from tests.fixtures.job_driver import JobDriver


@asynccontextmanager
async def async_client(plane: ControlPlane, **kwargs: Any) -> AsyncIterator[AsyncTrainingJobClient]:
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield AsyncTrainingJobClient(api, **{"watch_timeout": 30, "poll_interval": 0.5, **kwargs})


def test_async_create_wait_pods_logs_delete(control_plane: ControlPlane, test_namespace: str) -> None:
    async def scenario() -> dict[str, Any]:
        async with async_client(control_plane, watch_timeout=1) as jobs:
            # (only the Master fails: when both did, which failure the job named first was a race)
            script = (
                "import os, sys; master = os.environ['RANK'] == '0'; "
                "print('hello from', 'master' if master else 'worker'); sys.exit(3 if master else 0)"
            )
            created = await jobs.create(
                job(name="aj", replicas={"Master": 1, "Worker": 1}, script=script), namespace=test_namespace
            )
            done = await jobs.wait("PyTorchJob", "aj", test_namespace, uid=created["metadata"]["uid"], timeout=15)
            pods = await jobs.pods("PyTorchJob", "aj", test_namespace, replica_type="Master")
            text = await jobs.read_log("aj-master-0", test_namespace, tail_lines=5)
            assert await jobs.delete("PyTorchJob", "aj", test_namespace, uid=created["metadata"]["uid"])
            assert await jobs.find("PyTorchJob", "aj", test_namespace) is None
            return {"done": done, "pods": pods, "log": text}

    result = asyncio.run(scenario())
    state = job_state(result["done"])
    assert state.failed and "Master replica(s) failed" in state.message
    [master] = result["pods"]
    assert master["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    assert result["log"] == "hello from master\n"


def test_async_wait_timeout_and_deletion(
    control_plane: ControlPlane, job_driver: JobDriver, test_namespace: str
) -> None:
    async def scenario() -> None:
        async with async_client(control_plane) as jobs:
            await jobs.create(job(name="t"), namespace=test_namespace)
            with pytest.raises(WaitTimeout):
                await jobs.wait("PyTorchJob", "t", test_namespace, timeout=0.8)
            job_driver.later(
                0.5,
                lambda: job_driver.custom.delete_namespaced_custom_object(
                    "kubeflow.org", "v1", test_namespace, "pytorchjobs", "t"
                ),
            )
            with pytest.raises(JobDeleted):
                await jobs.wait("PyTorchJob", "t", test_namespace, timeout=10)

    asyncio.run(scenario())
