"""``TrainJobOperator``: submit a Kubeflow Trainer v2 TrainJob and wait for it, with the contract of
the v1 operators (it *is* a :class:`TrainingJobOperator`: validation, templating, identity labels,
reattach, deferrable, on_finish_action / on_kill_action, failure report). What differs:

- the document is a ``trainer.kubeflow.org/v1alpha1`` TrainJob, validated with the Trainer v2 rules
  (CRD schema and CEL, the webhooks, and the TrainJob checked against its runtime when that is one of
  the default ClusterTrainingRuntimes or in the same file);
- logs come from *steps*, as the Kubeflow SDK names them: ``node-0`` (default: the trainer's first
  node), ``node-1`` …, ``dataset-initializer``, ``model-initializer``, ``launcher``; ``"all"`` or
  ``"none"`` as for v1;
- the failure report names the failed steps;
- ``status.trainerStatus`` (progress percentage, time left, metrics, written by the training code
  through Trainer's status server — the Kubeflow SDK's ``update_trainjob_status`` — or any client)
  is logged whenever it changes, by the task while it waits and by the trigger while it is deferred.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_training.client import TrainingJobClient, replica_failure
from airflow_provider_training.client.logselect import LogChoice, step_of
from airflow_provider_training.client.progress import ProgressReports
from airflow_provider_training.client.state import main_container
from airflow_provider_training.operators import spec
from airflow_provider_training.operators.training import TrainingJobOperator
from airflow_provider_training.specs import JobSpecError
from airflow_provider_training.specs.issues import Issue
from airflow_provider_training.specs.loader import read_documents
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.crds import TRAINJOB, openapi_schema
from airflow_provider_training.validation import validate


class TrainJobOperator(TrainingJobOperator):
    """Submit a TrainJob (Kubeflow Trainer v2) and wait until it is ``Complete`` or ``Failed``.

    Every parameter, the XCom keys and the return value are :class:`TrainingJobOperator`'s; ``job``
    may leave out ``apiVersion`` and ``kind``. ``log_replicas`` takes step names (default
    ``"node-0"``). Returns the summary dict with ``state`` ``Succeeded`` or raises with the report.
    """

    kind = c.TRAINJOB
    ui_color = "#d6ecf3"

    def __init__(self, job: Any, *, log_replicas: str | Sequence[str] = "node-0", **kwargs: Any) -> None:
        super().__init__(job=job, log_replicas=log_replicas, **kwargs)
        self._progress = ProgressReports()

    def load_document(self) -> dict[str, Any]:
        return self.load_trainjob(self.job)

    @staticmethod
    def load_trainjob(source: Any) -> dict[str, Any]:
        documents = read_documents(source)
        if len(documents) != 1:
            raise JobSpecError("job", [Issue("", f"expected exactly one TrainJob document, found {len(documents)}")])
        data = dict(documents[0].data)
        data.setdefault("kind", c.TRAINJOB)
        data.setdefault("apiVersion", c.API_VERSION)
        if data["kind"] != c.TRAINJOB:
            raise JobSpecError(
                "job", [Issue("kind", f"TrainJobOperator submits TrainJobs but the document is a {data['kind']}")]
            )
        # Jinja renders "{{ params.nodes }}" as a string; the CRD wants an integer.
        coerced: dict[str, Any] = spec.coerce(data, openapi_schema(TRAINJOB))
        return coerced

    def check_document(self, data: dict[str, Any]) -> Any:
        report = validate(data)[0]
        if not report.ok:
            raise JobSpecError(report.title, report.errors)
        return report

    def on_job_change(self, obj: dict[str, Any]) -> None:
        line = self._progress.changed(obj)
        if line is not None:
            self.log.info("%s", line)

    def failure(self, client: TrainingJobClient, job: dict[str, Any]) -> str:
        report = super().failure(client, job)
        meta = job["metadata"]
        pods = client.pods(c.TRAINJOB, meta["name"], meta["namespace"])
        steps = sorted({step_of(p) for p in pods if replica_failure(p, main_container(p, c.NODE)) is not None})
        if not steps:
            return report
        first, _, rest = report.partition("\n")
        return "\n".join(part for part in (first, "Failed steps: " + ", ".join(steps), rest) if part)


JOB_APIS = ("v1", "v2")


class TrainingJobAPIOperator(TrainJobOperator):
    """Train through the Training Operator v1 or Kubeflow Trainer v2, chosen when the task runs.

    :param job_api: ``"v1"`` submits ``v1_job`` (a PyTorchJob, TFJob …) as
        :class:`TrainingJobOperator` does; ``"v2"`` submits ``v2_job`` (a TrainJob) as
        :class:`TrainJobOperator` does. Templated (``"{{ params.job_api }}"``), so one DAG offers
        both and its downstream tasks stay the same: XCom keys, the return value (``state``
        ``Succeeded``) and the failure report have the same shape either way.
    :param v1_job: the v1 job document (templated, like ``job``).
    :param v2_job: the TrainJob document (templated).
    :param log_replicas: default ``"master"`` for v1 and ``"node-0"`` for v2.

    Every other parameter is :class:`TrainingJobOperator`'s.
    """

    template_fields: Sequence[str] = (*TrainingJobOperator.template_fields, "v2_job", "job_api")
    template_fields_renderers = {"job": "yaml", "v2_job": "yaml"}

    def __init__(
        self,
        *,
        v1_job: Any,
        v2_job: Any,
        job_api: str = "v1",
        log_replicas: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(job=v1_job, log_replicas=log_replicas or "node-0", **kwargs)
        self.v2_job = v2_job
        self.job_api = job_api
        self._log_choice = log_replicas

    def _v2(self) -> bool:
        if self.job_api not in JOB_APIS:
            raise AirflowFailException(f"job_api must be one of {', '.join(JOB_APIS)} (got {self.job_api!r})")
        return self.job_api == "v2"

    def load_document(self) -> dict[str, Any]:
        return self.load_trainjob(self.v2_job) if self._v2() else spec.load(self.job, None)

    def check_document(self, data: dict[str, Any]) -> Any:
        return super().check_document(data) if self._v2() else TrainingJobOperator.check_document(self, data)

    def log_choice(self, job: dict[str, Any]) -> LogChoice:
        return self._log_choice or ("node-0" if job.get("kind") == c.TRAINJOB else "master")

    def failure(self, client: TrainingJobClient, job: dict[str, Any]) -> str:
        if job.get("kind") == c.TRAINJOB:
            return super().failure(client, job)
        return TrainingJobOperator.failure(self, client, job)
