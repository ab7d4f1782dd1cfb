"""Reaching the cluster a task used, from the API server: the same hook and connection.

The embedded control plane is only *looked up* here, never started: a read-only view must not
spawn a daemon. Credentials stay in this process; the browser gets the objects' fields only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from airflow_provider_training import embedded
from airflow_provider_training.client import AsyncTrainingJobClient
from airflow_provider_training.hooks.training import AsyncTrainingHook


class ClusterUnavailable(RuntimeError):
    """The cluster cannot be reached; the message says why and what to do."""


def embedded_home() -> str | None:
    from airflow.configuration import conf

    return conf.get("training", "embedded_home", fallback="") or None


async def hook_for(conn_id: str | None) -> AsyncTrainingHook:
    """The task's hook: a ``kubernetes`` connection, or (``None``) the running embedded control plane."""
    if conn_id is not None:
        return AsyncTrainingHook(kubernetes_conn_id=conn_id)
    home = embedded_home()
    state = await asyncio.to_thread(embedded.status, home)
    if not state.ready:
        where = home or "the default home ($AIRFLOW_TRAINING_HOME or ~/.airflow-training)"
        raise ClusterUnavailable(
            f"the embedded control plane in {where} is {state.message}; "
            "start it with `airflow-training embedded start` (or run a training task)"
        )
    return AsyncTrainingHook(kubernetes_conn_id=None, connection_extras={"kube_config_path": str(state.kubeconfig)})


@contextlib.asynccontextmanager
async def open_client(conn_id: str | None, *, watch_timeout: float = 240.0) -> AsyncIterator[AsyncTrainingJobClient]:
    hook = await hook_for(conn_id)
    async with hook.get_client(watch_timeout=watch_timeout) as client:
        yield client
