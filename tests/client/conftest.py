from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_training.client import TrainingJobClient


@pytest.fixture
def job_client(kube_api: Any) -> Iterator[TrainingJobClient]:
    yield TrainingJobClient(kube_api, watch_timeout=30, poll_interval=0.5)


class CallCounter:
    """Counts API requests the client makes (wraps ApiClient.call_api, the single exit of the client)."""

    def __init__(self, api: Any) -> None:
        self.calls: list[str] = []
        original = api.call_api

        def counted(resource_path: str, method: str, *args: Any, **kwargs: Any) -> Any:
            query = dict(kwargs.get("query_params") or [])
            self.calls.append(f"{method} {resource_path}{' watch' if query.get('watch') else ''}")
            return original(resource_path, method, *args, **kwargs)

        api.call_api = counted
        self._restore = lambda: setattr(api, "call_api", original)

    def close(self) -> None:
        self._restore()


@pytest.fixture
def counter(kube_api: Any) -> Iterator[CallCounter]:
    c = CallCounter(kube_api)
    yield c
    c.close()
