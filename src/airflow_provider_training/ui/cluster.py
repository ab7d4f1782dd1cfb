"""Reaching the cluster a task used, from the API server: the same hook and connection.

The embedded control plane is only *looked up* here (``AsyncTrainingHook(lookup_only=True)``),
never started: a read-only view must not spawn a daemon. Credentials stay in this process; the
browser gets the objects' fields only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from airflow_provider_training.client import AsyncTrainingJobClient
from airflow_provider_training.hooks.training import AsyncTrainingHook, ClusterUnavailable

__all__ = ["ClusterUnavailable", "hook", "open_client"]


def hook(conn_id: str | None) -> AsyncTrainingHook:
    """The hook of the task's cluster: a ``kubernetes`` connection, or (``None``) the running
    embedded control plane (:class:`ClusterUnavailable` when it does not run). Its ``subscribe``
    shares the API server process's watches (``client/informer.py``) among the open tabs."""
    return AsyncTrainingHook(kubernetes_conn_id=conn_id, lookup_only=True)


@contextlib.asynccontextmanager
async def open_client(conn_id: str | None, *, watch_timeout: float = 240.0) -> AsyncIterator[AsyncTrainingJobClient]:
    """A client for the task's cluster (see :func:`hook`)."""
    async with hook(conn_id).get_client(watch_timeout=watch_timeout) as client:
        yield client
