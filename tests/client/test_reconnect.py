"""Waiting survives what real API servers do: expire old resourceVersions (410) and drop connections.

A control plane of this module's own, with a tiny event history and a fixed port, so it can be
stopped and started again under a waiting client.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.client import AsyncTrainingJobClient, TrainingJobClient, job_state
from airflow_provider_training.embedded import ControlPlane, start, stop
from tests.factories import simple_job as job
from tests.fixtures.control_plane import FAST_SETTINGS
from tests.fixtures.job_driver import JobDriver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def small_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, int]]:
    home = tmp_path_factory.mktemp("small-history")
    port = _free_port()
    env = {**FAST_SETTINGS, "AIRFLOW_TRAINING_EVENT_RETENTION": "5"}
    plane = start(home, port=port, env=env)
    yield plane, port
    stop(home)


def _api(plane: ControlPlane) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


def test_expired_resource_version_is_answered_by_a_fresh_get(small_plane: tuple[ControlPlane, int]) -> None:
    plane, _ = small_plane
    api, driver_api = _api(plane), _api(plane)
    jobs = TrainingJobClient(api, watch_timeout=30, poll_interval=0.5)
    driver = JobDriver(driver_api, Path(plane.home))
    jobs.create(job(name="expire"), namespace="default")
    seen: list[str] = []

    def churn(obj: dict[str, Any]) -> None:
        seen.append(obj["metadata"]["resourceVersion"])
        if len(seen) == 1:  # before the first watch: push the job's resourceVersion out of the history
            for i in range(12):
                driver.core.create_namespaced_config_map("default", {"metadata": {"name": f"churn-{i}"}})
            driver.later(0.5, lambda: driver.succeed("PyTorchJob", "expire", "default"))

    done = jobs.wait("PyTorchJob", "expire", "default", timeout=15, on_change=churn)
    assert job_state(done).succeeded
    # the watch from the first read got 410; the client listed again (same, unchanged job), watched
    # from the list's resourceVersion and saw the Succeeded version: no 410 loop
    assert len(seen) == 3 and seen[0] == seen[1] != seen[2]


def test_waiters_survive_a_restart_of_the_api_server(small_plane: tuple[ControlPlane, int]) -> None:
    plane, port = small_plane
    jobs = TrainingJobClient(_api(plane), watch_timeout=30, poll_interval=0.5)
    jobs.create(job(name="restart"), namespace="default")
    jobs.create(job(name="restart-async"), namespace="default")
    results: dict[str, Any] = {}

    def sync_wait() -> None:
        results["sync"] = jobs.wait("PyTorchJob", "restart", "default", timeout=30)

    async def async_wait() -> None:
        from kubernetes_asyncio import client, config

        configuration = client.Configuration()
        await config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
        async with client.ApiClient(configuration) as api:
            waiter = AsyncTrainingJobClient(api, watch_timeout=30, poll_interval=0.5)
            results["async"] = await waiter.wait("PyTorchJob", "restart-async", "default", timeout=30)

    threads = [threading.Thread(target=sync_wait), threading.Thread(target=lambda: asyncio.run(async_wait()))]
    for t in threads:
        t.start()
    time.sleep(1.0)
    stop(plane.home)  # both watches drop
    time.sleep(0.5)
    restarted = start(plane.home, port=port, env={**FAST_SETTINGS, "AIRFLOW_TRAINING_EVENT_RETENTION": "5"})
    driver = JobDriver(_api(restarted), Path(restarted.home))
    driver.succeed("PyTorchJob", "restart", "default")
    driver.succeed("PyTorchJob", "restart-async", "default")
    for t in threads:
        t.join(20)
    assert job_state(results["sync"]).succeeded
    assert job_state(results["async"]).succeeded
