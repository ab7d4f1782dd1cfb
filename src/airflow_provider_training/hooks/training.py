"""``TrainingHook`` / ``AsyncTrainingHook``: the cluster a training job goes to.

Both take ``kubernetes_conn_id``, a connection of cncf.kubernetes' ``kubernetes`` type (in-cluster,
kubeconfig path or content, context, namespace). Left out, it comes from the provider option
``[training] kubernetes_conn_id``; empty there means the embedded control plane of this machine
(``[training] embedded_home``), started on demand. So a DAG moves from a laptop to a cluster by
configuration, not by editing it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook, KubernetesHook
from airflow.sdk import conf

from airflow_provider_training import embedded
from airflow_provider_training.client import AsyncTrainingJobClient, TrainingJobClient

EMBEDDED_NAMESPACE = "default"


class _Default:
    def __repr__(self) -> str:
        return "<[training] kubernetes_conn_id>"


DEFAULT: Any = _Default()


def resolve_conn_id(kubernetes_conn_id: str | _Default | None) -> str | None:
    """The connection to use; ``None`` means the embedded control plane."""
    if isinstance(kubernetes_conn_id, _Default):
        kubernetes_conn_id = conf.get("training", "kubernetes_conn_id", fallback="")
    return kubernetes_conn_id or None


def embedded_control_plane() -> embedded.ControlPlane:
    home = conf.get("training", "embedded_home", fallback="") or None
    return embedded.ensure_running(home)


class TrainingHook(KubernetesHook):
    """Sync hook: ``get_client()`` gives a :class:`TrainingJobClient` for the resolved cluster."""

    hook_name = "Kubeflow Training (Kubernetes cluster)"

    def __init__(self, kubernetes_conn_id: str | None = DEFAULT, **kwargs: Any) -> None:
        conn_id = resolve_conn_id(kubernetes_conn_id)
        super().__init__(conn_id=conn_id, kubernetes_conn_id=conn_id, **kwargs)
        self.embedded = conn_id is None
        self.kubernetes_conn_id = conn_id

    def get_conn(self) -> Any:
        if self.embedded and self.config_file is None:
            self.config_file = str(embedded_control_plane().kubeconfig)
        return super().get_conn()

    def get_client(self, *, watch_timeout: float = 240.0, poll_interval: float = 10.0) -> TrainingJobClient:
        return TrainingJobClient(self.api_client, watch_timeout=watch_timeout, poll_interval=poll_interval)

    def get_namespace(self) -> str | None:
        return EMBEDDED_NAMESPACE if self.embedded else super().get_namespace()

    @property
    def api_url(self) -> str:
        """The API server's base URL (for links to jobs)."""
        return str(self.api_client.configuration.host).rstrip("/")

    def trigger_connection(self) -> dict[str, Any]:
        """What a trigger needs to reach the same cluster without this worker's environment:
        the connection's extras resolved here (for the embedded control plane: its kubeconfig path)."""
        if self.embedded:
            if self.config_file is None:
                self.config_file = str(embedded_control_plane().kubeconfig)
            return {"kubernetes_conn_id": None, "connection_extras": {"kube_config_path": self.config_file}}
        return {"kubernetes_conn_id": self.kubernetes_conn_id, "connection_extras": dict(self.conn_extras)}


class AsyncTrainingHook(AsyncKubernetesHook):
    """Async twin for triggers: ``async with hook.get_client() as client``."""

    hook_name = "Kubeflow Training (Kubernetes cluster, async)"

    def __init__(
        self,
        kubernetes_conn_id: str | None = DEFAULT,
        connection_extras: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        conn_id = resolve_conn_id(kubernetes_conn_id)
        super().__init__(conn_id=conn_id, kubernetes_conn_id=conn_id, connection_extras=connection_extras, **kwargs)
        self.embedded = conn_id is None and not connection_extras

    @contextlib.asynccontextmanager
    async def get_client(
        self, *, watch_timeout: float = 240.0, poll_interval: float = 10.0
    ) -> AsyncIterator[AsyncTrainingJobClient]:
        if self.embedded and self._extras is None:
            plane = await asyncio.to_thread(embedded_control_plane)  # may start the daemon: not on the loop
            self._extras = {"kube_config_path": str(plane.kubeconfig)}
        async with self.get_conn() as api:
            yield AsyncTrainingJobClient(api, watch_timeout=watch_timeout, poll_interval=poll_interval)
