"""``DeployApprovalOperator``: a person approves (or rejects) serving a candidate ModelKit, on
Airflow's Human-in-the-loop ``ApprovalOperator``.

The request shows what the decision needs: the candidate's metric (``metrics.json`` in its docs
layer, read from the registry) next to the metric of the ModelKit the InferenceService serves now,
and the candidate's reference and digest. "Approve" lets the deploy run; "Reject" skips the tasks
after it (the run still succeeds: a rejection is an answer, not a failure).

``enabled`` (templated: ``"{{ params.approve_deploy }}"``) off returns at once without asking, so
one DAG serves both unattended runs and runs a person signs off.

On Airflow 3.2 the request waits in the triggerer (``HITLTrigger``), so ``dag.test()`` cannot answer
it there: the task fails at once saying so (``compat.approval_unsupported``); 3.3+ wait without one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_training import compat
from airflow_provider_training.client.inferenceservice import KIND, served_storage_uri
from airflow_provider_training.hooks.registry import ModelKitRegistryHook
from airflow_provider_training.hooks.training import DEFAULT, TrainingHook
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.files import read_file
from airflow_provider_training.kitops.reference import Reference, ReferenceError, parse
from airflow_provider_training.kitops.registry import RegistryOptions

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", "", "none"}


def flag(field: str, value: Any) -> bool:
    """A templated on/off (``"{{ params.x }}"`` renders ``"True"``); anything else names the field."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{field}={value!r}: use true or false")


@dataclass(frozen=True)
class ModelKit:
    """A ``[kit://]<reference>@<digest>`` as the request shows it: the reference without ``kit://``,
    as written without its digest, the digest, and the parsed reference (None when it does not parse:
    shown anyway, its metric not read)."""

    reference: str
    written: str
    digest: str
    parsed: Reference | None

    @classmethod
    def of(cls, uri: str) -> ModelKit:
        text = uri.removeprefix("kit://")
        try:
            parsed = parse(text, check_tcr=False)
        except ReferenceError:
            written, _, digest = text.partition("@")
            return cls(text, written, digest, None)
        digest = parsed.digest
        return cls(text, text.replace(f"@{digest}", "", 1) if digest else text, digest, parsed)


class DeployApprovalOperator(ApprovalOperator):
    """Ask a person whether ``candidate`` should replace what InferenceService ``service_name`` serves.

    :param candidate: the ModelKit to deploy, ``<reference>@<digest>`` (``kit://`` accepted), e.g.
        ``{{ ti.xcom_pull('package', key='reference') }}@{{ ti.xcom_pull('package', key='digest') }}``.
    :param service_name: the InferenceService whose served ModelKit the candidate is compared with.
    :param namespace: its namespace.
    :param enabled: ask (true) or let the deploy go ahead without asking (false); templated.
    :param metric: the key of ``metrics.json`` shown for both models.
    :param registry_conn_id: ``modelkit_registry`` connection to read the ModelKits' metrics with.
    :param kubernetes_conn_id: as the deploy operator takes it (``DEFAULT``: ``[training] kubernetes_conn_id``).
    Everything else (``response_timeout``, ``assigned_users``, ``notifiers``, ...) as ``ApprovalOperator``.
    """

    template_fields: Sequence[str] = (
        *ApprovalOperator.template_fields,
        "candidate",
        "service_name",
        "namespace",
        "enabled",
        "metric",
        "registry_conn_id",
        "kubernetes_conn_id",
    )
    ui_color = "#fff3c4"

    def __init__(
        self,
        *,
        candidate: str,
        service_name: str,
        namespace: str = "default",
        enabled: bool | str = True,
        metric: str = "accuracy",
        registry_conn_id: str | None = None,
        kubernetes_conn_id: str | None = DEFAULT,
        subject: str = "Deploy the new model?",
        **kwargs: Any,
    ) -> None:
        super().__init__(subject=subject, **kwargs)
        self.candidate = candidate
        self.service_name = service_name
        self.namespace = namespace
        self.enabled = enabled
        self.metric = metric
        self.registry_conn_id = registry_conn_id
        self.kubernetes_conn_id = DEFAULT if kubernetes_conn_id is None else kubernetes_conn_id

    def execute(self, context: Any) -> Any:
        if not flag("enabled", self.enabled):
            self.log.info("Approval not asked (enabled is off): %s goes ahead to deploy", self.candidate)
            return None
        if unsupported := compat.approval_unsupported():  # rather than HITLTrigger's AttributeError
            raise AirflowFailException(unsupported)
        served = served_storage_uri(
            TrainingHook(kubernetes_conn_id=self.kubernetes_conn_id)
            .get_client()
            .find(KIND, self.service_name, self.namespace)
        )
        self.body = self.describe(served)
        self.subject = f"Deploy {ModelKit.of(self.candidate).written} to {self.service_name}?"
        self.log.info("Asking for approval: %s", self.subject)
        return super().execute(context)

    def describe(self, served: str | None) -> str:
        """The request's Markdown: both models' metric and the candidate's digest."""
        rows = [
            self._row("candidate", ModelKit.of(self.candidate)),
            self._row("deployed now", ModelKit.of(served))
            if served
            else f"| deployed now | — | nothing is deployed as `{self.namespace}/{self.service_name}` yet | |",
        ]
        return "\n".join(
            [
                f"Serve the candidate ModelKit as InferenceService `{self.namespace}/{self.service_name}`?",
                "",
                f"| model | {self.metric} | reference | digest |",
                "|---|---|---|---|",
                *rows,
                "",
                "**Approve** deploys it; **Reject** skips the deploy (the run still succeeds).",
            ]
        )

    def _row(self, label: str, modelkit: ModelKit) -> str:
        return f"| {label} | {self._score(modelkit)} | `{modelkit.written}` | `{modelkit.digest or 'no digest'}` |"

    def _score(self, modelkit: ModelKit) -> str:
        """The metric from the ModelKit's ``metrics.json``, or why it is not shown (never a failure:
        the person still decides). One attempt: the person waits for this page, not for a back-off."""
        reference = modelkit.reference
        try:
            if modelkit.parsed is None:
                raise ReferenceError(f"{reference!r} is not a ModelKit reference")
            registry, options = modelkit.parsed.registry, RegistryOptions.single_attempt()
            if self.registry_conn_id:
                client = ModelKitRegistryHook(self.registry_conn_id).get_conn(registry, options=options)
            else:
                client = make_client(registry, options=options)
            with client:
                metrics = json.loads(read_file(client, reference, "metrics.json"))
        except Exception as exc:  # the registry's answer, shown to the person deciding
            self.log.warning("Could not read %s's metrics.json: %s", reference, exc)
            return f"not read ({type(exc).__name__})"
        value = metrics.get(self.metric) if isinstance(metrics, dict) else None
        if not isinstance(value, int | float):
            return f"not in metrics.json (keys: {', '.join(sorted(metrics)) if isinstance(metrics, dict) else 'none'})"
        return f"{value:.4g}"
