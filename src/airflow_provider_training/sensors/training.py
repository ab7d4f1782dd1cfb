"""``TrainingJobSensor``: wait for a training job someone else submitted (another DAG, kubectl)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from airflow_provider_training.client import job_state, resource_for, summary
from airflow_provider_training.hooks.training import DEFAULT, TrainingHook
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.triggers.training import TrainingJobTrigger


class TrainingJobSensor(BaseSensorOperator):
    """Succeed when the job has ``Succeeded``; fail with the job's reason when it has ``Failed``
    (skipped instead with ``soft_fail=True``).

    :param job_name: the job's name (templated).
    :param kind: its kind (``PyTorchJob``, ``TFJob`` …; also ``Job`` and ``InferenceService``).
    :param namespace: templated; default: the connection's, else ``default``.
    :param kubernetes_conn_id: as for the operators (default ``[training] kubernetes_conn_id``;
        empty = embedded control plane).
    :param mode: ``"poke"`` or ``"reschedule"`` (frees the slot between pokes every
        ``poke_interval`` seconds).
    :param deferrable: wait in the triggerer instead (watch-based); ``timeout`` still applies.
    :param watch_timeout: seconds one watch request lasts in deferrable mode.

    Returns (XCom ``return_value``) the job summary, as the operators do.
    """

    template_fields: Sequence[str] = ("job_name", "namespace")
    ui_color = "#dbe9f6"

    def __init__(
        self,
        *,
        job_name: str,
        kind: str,
        namespace: str | None = None,
        kubernetes_conn_id: str | None = DEFAULT,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        watch_timeout: float = 240.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        resource_for(kind)  # unknown kinds fail when the DAG is parsed
        self.job_name = job_name
        self.kind = kind
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deferrable = deferrable
        self.watch_timeout = watch_timeout

    def _namespace(self, hook: TrainingHook) -> str:
        return self.namespace or hook.get_namespace() or "default"

    def _judge(self, job: dict[str, Any] | None, namespace: str) -> PokeReturnValue:
        if job is None:
            self.log.info("%s %s/%s does not exist (yet)", self.kind, namespace, self.job_name)
            return PokeReturnValue(False)
        state = job_state(job)
        if state.failed:
            raise AirflowFailException(
                f"{self.kind} {namespace}/{self.job_name} failed: {state.reason}: {state.message}"
            )
        self.log.info("%s %s/%s is %s", self.kind, namespace, self.job_name, state.phase)
        return PokeReturnValue(state.succeeded, summary(job) if state.succeeded else None)

    def poke(self, context: Any) -> PokeReturnValue:
        hook = TrainingHook(kubernetes_conn_id=self.kubernetes_conn_id)
        namespace = self._namespace(hook)
        return self._judge(hook.get_client().find(self.kind, self.job_name, namespace), namespace)

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        hook = TrainingHook(kubernetes_conn_id=self.kubernetes_conn_id)
        namespace = self._namespace(hook)
        job = hook.get_client().find(self.kind, self.job_name, namespace)
        if job is None:
            raise AirflowFailException(f"{self.kind} {namespace}/{self.job_name} does not exist")
        try:
            verdict = self._judge(job, namespace)
        except AirflowFailException as exc:
            if self.soft_fail:
                raise AirflowSkipException(f"soft_fail: {exc}") from exc
            raise
        if verdict.is_done:
            return verdict.xcom_value
        self.defer(
            trigger=TrainingJobTrigger(
                ref=ObjectRef.of(job, self.kind),
                **hook.trigger_connection(),
                poll_interval=self.poke_interval,
                watch_timeout=self.watch_timeout,
                on_kill_action="keep",
            ),
            method_name="execute_complete",
            timeout=self.timeout,
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if event.get("status") != "finished":
            raise AirflowException(event.get("message") or f"waiting for the job failed ({event.get('status')})")
        ref = ObjectRef.from_dict(event)
        hook = TrainingHook(kubernetes_conn_id=self.kubernetes_conn_id)
        job = hook.get_client().get(ref.kind, ref.name, ref.namespace)
        return self._judge(job, ref.namespace).xcom_value
