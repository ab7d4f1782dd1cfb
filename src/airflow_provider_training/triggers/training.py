"""``TrainingJobTrigger``: watches one job from the triggerer until it finishes, then fires once.

Connection details come resolved from the worker (``connection_extras``), so a triggerer without
the worker's environment reaches the same cluster. The triggers of one triggerer share one watch
per cluster, namespace and kind (``client/informer.py``, through ``AsyncTrainingHook.wait``): a
thousand deferred tasks are one watch connection, not a thousand; it survives API disconnects and
410s. ``deadline`` is wall-clock, so a trigger that moves to another triggerer keeps the job-level
timeout of the first deferral.

The module imports nothing heavy: the triggerer imports it on its event loop, so the clients
(``kubernetes_asyncio``, the hooks) are imported inside :meth:`run` in a worker thread
(:func:`lazy.load`) and a new triggerer's loop is never blocked by them.

Events (exactly one): ``{"status": "finished" | "timeout" | "deleted" | "error", "kind", "name",
"namespace", "uid", "job": <summary>, "message"}``, on which the task resumes on a worker — or, for
a trigger told to ``end_from_trigger``, when the job *succeeded*: Airflow's ``TaskSuccessEvent``,
after the trigger did in the triggerer what the resumed task would have done (the selected
replicas' logs into the task log, ``on_finish_action``, the summary as ``return_value``). The task
is then successful without a worker: a worker resumes one task at a time per slot, so a hundred
jobs finishing together would queue behind each other for a minute on a small deployment.
Failures, timeouts and a deleted job still resume on a worker (the failure report, retries).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_training.triggers import lazy, settle

if TYPE_CHECKING:
    from airflow_provider_training.hooks.training import AsyncTrainingHook
    from airflow_provider_training.specs.refs import ObjectRef


class TrainingJobTrigger(BaseTrigger):
    """Wait for the job ``ref`` (or, as triggers were built before ``ref`` existed, ``kind``,
    ``name``, ``namespace``, ``uid``).

    The serialized kwargs keep the flat ``kind`` / ``name`` / ``namespace`` / ``uid`` of earlier
    versions, so a trigger row written before an upgrade resumes. The fields
    are held flat too and :attr:`ref` is built on use: ``ObjectRef`` lives in ``specs``, whose
    import (its pydantic models, ~40 ms) must not run on the triggerer's loop.
    """

    def __init__(
        self,
        kind: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        uid: str | None = None,
        *,
        ref: ObjectRef | None = None,
        kubernetes_conn_id: str | None = None,
        connection_extras: dict[str, Any] | None = None,
        poll_interval: float = 10.0,
        watch_timeout: float = 240.0,
        deadline: float | None = None,
        on_kill_action: str = "keep",
        not_before: float | None = None,
        end_from_trigger: bool = False,
        log_replicas: str | Sequence[str] = "none",
        on_finish_action: str = "keep",
        push_summary: bool = True,
    ) -> None:
        super().__init__()
        if ref is not None:
            kind, name, namespace, uid = ref.kind, ref.name, ref.namespace, ref.uid
        if not (kind and name and namespace):
            raise ValueError(
                f"TrainingJobTrigger needs the job's kind, name and namespace (got {kind!r}, {name!r}, {namespace!r})"
            )
        self.kind, self.name, self.namespace, self.uid = kind, name, namespace, uid
        self.kubernetes_conn_id = kubernetes_conn_id
        self.connection_extras = connection_extras
        self.poll_interval = poll_interval
        self.watch_timeout = watch_timeout
        self.deadline = deadline
        self.on_kill_action = on_kill_action
        self.not_before = settle.not_before(not_before)
        self.end_from_trigger = end_from_trigger
        # a list in the trigger's row (JSON), whatever sequence the operator was given
        self.log_replicas = log_replicas if isinstance(log_replicas, str) else [str(item) for item in log_replicas]
        self.on_finish_action = on_finish_action
        self.push_summary = push_summary
        self._fired = False

    @property
    def ref(self) -> ObjectRef:
        from airflow_provider_training.specs.refs import ObjectRef  # see the class docstring

        return ObjectRef(self.kind, self.namespace, self.name, self.uid)

    def __repr__(self) -> str:  # no connection extras: they may hold credentials
        return f"<TrainingJobTrigger {self.kind} {self.namespace}/{self.name} uid={self.uid}>"

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "kind": self.kind,
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "connection_extras": self.connection_extras,
                "poll_interval": self.poll_interval,
                "watch_timeout": self.watch_timeout,
                "deadline": self.deadline,
                "on_kill_action": self.on_kill_action,
                "not_before": self.not_before,
                "end_from_trigger": self.end_from_trigger,
                "log_replicas": self.log_replicas,
                "on_finish_action": self.on_finish_action,
                "push_summary": self.push_summary,
            },
        )

    def hook(self) -> AsyncTrainingHook:
        from airflow_provider_training.hooks.training import AsyncTrainingHook

        return AsyncTrainingHook(kubernetes_conn_id=self.kubernetes_conn_id, connection_extras=self.connection_extras)

    def _event(self, status: str, message: str = "", job: dict[str, Any] | None = None) -> TriggerEvent:
        from airflow_provider_training.client import summary

        self._fired = True
        return TriggerEvent(
            {
                "status": status,
                **self.ref.to_dict(),
                "job": summary(job) if job else None,
                "message": message,
            }
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        await lazy.load()
        from airflow_provider_training.client import JobDeleted, WaitTimeout, job_state
        from airflow_provider_training.client.progress import ProgressReports

        ref = self.ref
        timeout = None if self.deadline is None else max(0.0, self.deadline - time.time())
        progress = ProgressReports()

        def changed(obj: dict[str, Any]) -> None:
            """A TrainJob's progress reports (``status.trainerStatus``) reach the task's log while deferred."""
            line = progress.changed(obj)
            if line is not None:
                self.log.info("%s", line)

        try:
            job = await self.hook().wait(
                ref.kind,
                ref.name,
                ref.namespace,
                uid=ref.uid,
                timeout=timeout,
                watch_timeout=self.watch_timeout,
                poll_interval=self.poll_interval,
                on_change=changed if ref.kind == "TrainJob" else None,
            )
        except WaitTimeout as exc:
            event = self._event("timeout", str(exc), exc.last)
        except JobDeleted as exc:
            event = self._event("deleted", str(exc))
        except Exception as exc:  # the task fails with the reason instead of hanging in deferral
            event = self._event("error", f"{type(exc).__name__}: {exc}")
        else:
            event = self._event("finished", "", job)
            if self.end_from_trigger and job_state(job).succeeded:
                event = await self._end(job, event)
        await settle.settle(self.not_before)
        yield event

    async def _end(self, job: dict[str, Any], resume: TriggerEvent) -> TriggerEvent:
        """What the resumed task would do for a job that succeeded, here; then end the task. Anything
        that goes wrong on the way resumes the task on a worker instead (``resume``), which does it all
        again and fails with the reason if it must."""
        from airflow.triggers.base import TaskSuccessEvent

        from airflow_provider_training.client import job_state, summary
        from airflow_provider_training.client.logselect import log_filter, prefixed
        from airflow_provider_training.specs.actions import OnFinishAction

        ref = self.ref
        try:
            async with self.hook().get_client() as client:
                select = log_filter(self.log_replicas, job)
                if select is not None:
                    logs = await client.replica_logs(ref.kind, ref.name, ref.namespace, uid=ref.uid, select=select)
                    for count, line in enumerate(prefixed(logs), 1):
                        self.log.info("%s", line)
                        if count % 200 == 0:  # a long log must not hold the loop the other triggers share
                            await asyncio.sleep(0)
                self.log.info("%s succeeded: %s", ref, job_state(job).message)
                if OnFinishAction(self.on_finish_action).deletes(succeeded=True):
                    await client.delete(ref.kind, ref.name, ref.namespace, uid=ref.uid, propagation="Background")
        except Exception as exc:  # the worker finishes instead (and reports what it cannot do)
            self.log.warning(
                "%s: could not finish in the triggerer (%s: %s); resuming on a worker", ref, type(exc).__name__, exc
            )
            return resume
        return TaskSuccessEvent(xcoms={"return_value": summary(job)} if self.push_summary else None)

    async def on_kill(self) -> None:
        """A user killed the deferred task (mark failed/success, clear): apply ``on_kill_action``.
        Airflow 3.3 calls this only for user actions, never for a triggerer restart."""
        if self._fired:
            return
        await lazy.load()  # the client imports specs: its enums are loaded now, off the loop
        from airflow_provider_training.specs.actions import OnKillAction

        if self.on_kill_action != OnKillAction.DELETE:
            return
        async with self.hook().get_client() as jobs:
            deleted = await jobs.delete(self.ref.kind, self.ref.name, self.ref.namespace, uid=self.ref.uid)
        self.log.info("%s %s", self.ref, "deleted because the task was killed" if deleted else "was already gone")
