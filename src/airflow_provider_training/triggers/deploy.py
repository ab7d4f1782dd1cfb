"""``InferenceServiceTrigger``: waits in the triggerer for a deploy's rollout (the deferrable half of
``InferenceServiceOperator``), watching the InferenceService through ``kubernetes_asyncio``.

Event payload: ``{"status": "ready" | "failed" | "timeout" | "deleted", "name", "namespace", "uid",
"url", "revision", "reason", "message"}``. On a user's kill (mark failed / success / clear, Airflow
3.3+) ``on_kill`` applies the operator's ``on_kill_action``: ``rollback`` puts the previous spec
back (or deletes an InferenceService the task created), ``delete`` deletes it, ``keep`` leaves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_training.triggers import lazy, settle

if TYPE_CHECKING:
    from airflow_provider_training.client.aio import AsyncTrainingJobClient

# The clients are imported in a thread when the trigger runs (see triggers.lazy), never at import.
CLIENTS = ("airflow_provider_training.client", "airflow_provider_training.client.inferenceservice")

KILL_ACTIONS = ("keep", "rollback", "delete")


def embedded_home() -> str | None:
    from airflow.sdk import conf

    return conf.get("training", "embedded_home", fallback="") or None


@contextlib.asynccontextmanager
async def async_api_client(kubernetes_conn_id: str | None) -> AsyncIterator[Any]:
    """A ``kubernetes_asyncio`` ApiClient for the connection, or for the embedded control plane
    (started on demand) when there is none."""
    await lazy.load(
        "kubernetes_asyncio.config",
        "airflow.providers.cncf.kubernetes.hooks.kubernetes"
        if kubernetes_conn_id
        else "airflow_provider_training.embedded",
    )
    if kubernetes_conn_id:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook

        async with AsyncKubernetesHook(conn_id=kubernetes_conn_id).get_conn() as api:
            yield api
        return
    from kubernetes_asyncio import config

    from airflow_provider_training import embedded

    plane = await asyncio.to_thread(embedded.ensure_running, embedded_home())
    api = await config.new_client_from_config(config_file=str(plane.kubeconfig))
    try:
        yield api
    finally:
        await api.close()


async def undo(
    client: AsyncTrainingJobClient, name: str, namespace: str, uid: str, action: str, previous: dict[str, Any] | None
) -> str:
    """Apply a cleanup action; returns what was done, for the task log."""
    from airflow_provider_training.client.inferenceservice import KIND

    if action == "keep":
        return f"kept InferenceService {namespace}/{name} as it is"
    if action == "delete" or previous is None:
        deleted = await client.delete(KIND, name, namespace, uid=uid, propagation="Background")
        return f"deleted InferenceService {namespace}/{name}" if deleted else "nothing to delete"
    current = await client.get(KIND, name, namespace)
    current["spec"] = previous.get("spec") or {}
    current["metadata"]["annotations"] = previous.get("annotations") or {}
    await client.replace(current)
    return f"rolled InferenceService {namespace}/{name} back to its previous spec"


class InferenceServiceTrigger(BaseTrigger):
    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        uid: str,
        generation: int,
        kubernetes_conn_id: str | None = None,
        timeout: float | None = None,
        poll_interval: float = 10.0,
        started: float | None = None,
        on_kill_action: str = "rollback",
        previous: dict[str, Any] | None = None,
        not_before: float | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.generation = generation
        self.kubernetes_conn_id = kubernetes_conn_id
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.started = started if started is not None else time.time()
        self.on_kill_action = on_kill_action
        self.previous = previous
        self.not_before = settle.not_before(not_before)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "generation": self.generation,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "timeout": self.timeout,
                "poll_interval": self.poll_interval,
                "started": self.started,
                "on_kill_action": self.on_kill_action,
                "previous": self.previous,
                "not_before": self.not_before,
            },
        )

    def _event(self, status: str, obj: dict[str, Any] | None = None, **extra: Any) -> TriggerEvent:
        from airflow_provider_training.client.inferenceservice import rollout_state

        state = rollout_state(obj or {}, self.generation)
        payload = {
            "status": status,
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "url": state.url,
            "revision": state.revision,
            "reason": state.reason,
            "message": state.message,
        }
        payload.update(extra)
        return TriggerEvent(payload)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        await lazy.load(*CLIENTS)
        from airflow_provider_training.client import AsyncTrainingJobClient, JobDeleted, WaitTimeout
        from airflow_provider_training.client.inferenceservice import KIND, rollout_state

        remaining = None if self.timeout is None else max(0.0, self.timeout - (time.time() - self.started))
        async with async_api_client(self.kubernetes_conn_id) as api:
            client = AsyncTrainingJobClient(api, poll_interval=self.poll_interval)
            try:
                obj = await client.wait(
                    KIND,
                    self.name,
                    self.namespace,
                    uid=self.uid,
                    timeout=remaining,
                    until=lambda o: rollout_state(o, self.generation).finished,
                )
            except WaitTimeout as exc:
                event = self._event("timeout", exc.last)
            except JobDeleted as exc:
                event = self._event("deleted", None, message=str(exc))
            else:
                event = self._event("ready" if rollout_state(obj, self.generation).ready else "failed", obj)
        await settle.settle(self.not_before)
        yield event

    async def on_kill(self) -> None:
        if self.on_kill_action == "keep":
            return
        await lazy.load(*CLIENTS)
        from airflow_provider_training.client import AsyncTrainingJobClient

        async with async_api_client(self.kubernetes_conn_id) as api:
            client = AsyncTrainingJobClient(api)
            self.log.info(await undo(client, self.name, self.namespace, self.uid, self.on_kill_action, self.previous))
