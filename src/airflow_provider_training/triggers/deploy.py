"""``InferenceServiceTrigger``: waits in the triggerer for a deploy's rollout (the deferrable half of
``InferenceServiceOperator``), watching the InferenceService through the triggerer's shared watch
of InferenceServices in its namespace (``client/informer.py``).

Event payload: ``{"status": "ready" | "failed" | "timeout" | "deleted", "name", "namespace", "uid",
"url", "revision", "reason", "message"}``. On a user's kill (mark failed / success / clear, Airflow
3.3+) ``on_kill`` applies the operator's ``on_kill_action``: ``rollback`` puts the previous spec
back (or deletes an InferenceService the task created), ``delete`` deletes it, ``keep`` leaves it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_training.triggers import lazy, settle

if TYPE_CHECKING:
    from airflow_provider_training.client.aio import AsyncTrainingJobClient
    from airflow_provider_training.hooks.training import AsyncTrainingHook

# The clients are imported in a thread when the trigger runs (see triggers.lazy), never at import.
CLIENTS = (
    *lazy.CLIENTS,
    "airflow_provider_training.client.inferenceservice",
    "airflow_provider_training.specs.actions",
)


async def undo(
    client: AsyncTrainingJobClient, name: str, namespace: str, uid: str, action: str, previous: dict[str, Any] | None
) -> str:
    """Apply a cleanup action; returns what was done, for the task log."""
    from airflow_provider_training.client.inferenceservice import KIND
    from airflow_provider_training.specs.actions import RolloutAction

    if action == RolloutAction.KEEP:
        return f"kept InferenceService {namespace}/{name} as it is"
    if action == RolloutAction.DELETE or previous is None:
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
        connection_extras: dict[str, Any] | None = None,
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
        self.connection_extras = connection_extras
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.started = started if started is not None else time.time()
        self.on_kill_action = on_kill_action
        self.previous = previous
        self.not_before = settle.not_before(not_before)

    def __repr__(self) -> str:  # no connection extras: they may hold credentials
        return f"<InferenceServiceTrigger {self.namespace}/{self.name} uid={self.uid}>"

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "generation": self.generation,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "connection_extras": self.connection_extras,
                "timeout": self.timeout,
                "poll_interval": self.poll_interval,
                "started": self.started,
                "on_kill_action": self.on_kill_action,
                "previous": self.previous,
                "not_before": self.not_before,
            },
        )

    def hook(self) -> AsyncTrainingHook:
        """The cluster the operator deployed to: its connection's extras as resolved in the worker
        (``TrainingHook.trigger_connection``), or — a trigger row written before they were passed —
        the connection by id (``None``: the embedded control plane)."""
        from airflow_provider_training.hooks.training import AsyncTrainingHook

        return AsyncTrainingHook(kubernetes_conn_id=self.kubernetes_conn_id, connection_extras=self.connection_extras)

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
        from airflow_provider_training.client import JobDeleted, WaitTimeout
        from airflow_provider_training.client.inferenceservice import KIND, rollout_state

        remaining = None if self.timeout is None else max(0.0, self.timeout - (time.time() - self.started))
        try:  # through the triggerer's shared watch of InferenceServices in the namespace
            obj = await self.hook().wait(
                KIND,
                self.name,
                self.namespace,
                uid=self.uid,
                timeout=remaining,
                until=lambda o: rollout_state(o, self.generation).finished,
                poll_interval=self.poll_interval,
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
        await lazy.load(*CLIENTS)
        from airflow_provider_training.specs.actions import RolloutAction

        if self.on_kill_action == RolloutAction.KEEP:
            return
        async with self.hook().get_client() as client:
            self.log.info(await undo(client, self.name, self.namespace, self.uid, self.on_kill_action, self.previous))
