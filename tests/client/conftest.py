from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_training.client import TrainingJobClient
from airflow_provider_training.embedded import ControlPlane


@pytest.fixture
def client_api(control_plane: ControlPlane) -> Iterator[Any]:
    """An ApiClient of the client under test only (the job driver uses its own), so requests can be counted."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(control_plane.kubeconfig), client_configuration=configuration)
    api = client.ApiClient(configuration)
    yield api
    api.close()


@pytest.fixture
def job_client(client_api: Any) -> TrainingJobClient:
    return TrainingJobClient(client_api, watch_timeout=30, poll_interval=0.5)


class CallCounter:
    """Counts API requests the client makes (wraps ApiClient.call_api, the single exit of the client)."""

    def __init__(self, api: Any) -> None:
        self.calls: list[str] = []
        original = api.call_api

        def counted(resource_path: str, method: str, *args: Any, **kwargs: Any) -> Any:
            query = dict(kwargs.get("query_params") or (args[1] if len(args) > 1 else None) or [])
            self.calls.append(f"{method} {resource_path}{' watch' if query.get('watch') else ''}")
            return original(resource_path, method, *args, **kwargs)

        api.call_api = counted
        self._restore = lambda: setattr(api, "call_api", original)

    def close(self) -> None:
        self._restore()


@pytest.fixture
def counter(client_api: Any) -> Iterator[CallCounter]:
    c = CallCounter(client_api)
    yield c
    c.close()
