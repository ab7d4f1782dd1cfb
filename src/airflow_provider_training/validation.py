"""Validate job documents the way a cluster would, and better: the public API behind
``airflow-training validate`` and the embedded API server's admission.

Three levels (see :class:`~airflow_provider_training.specs.issues.Issue`): ``cluster`` errors are
what a real cluster rejects (CRD schema, webhook, MPIJob/MXJob controller validation);
``provider`` errors are what a cluster accepts but can never run; ``lint`` findings are warnings.
Unknown fields are warnings by default (the API server prunes them) and errors under ``strict``
(what ``kubectl apply`` asks for).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from airflow_provider_training import frameworks
from airflow_provider_training.specs import lint, runnable, webhook
from airflow_provider_training.specs.batch import BatchJob
from airflow_provider_training.specs.capacity import too_many_pods
from airflow_provider_training.specs.crds import openapi_schema
from airflow_provider_training.specs.defaults import with_defaults
from airflow_provider_training.specs.issues import Issue, index, join
from airflow_provider_training.specs.jobs import TrainingJob
from airflow_provider_training.specs.kinds import KINDS
from airflow_provider_training.specs.loader import (
    Document,
    JobSpecError,
    Source,
    build,
    check_schema,
    identify,
    read_documents,
)
from airflow_provider_training.specs.pod import Container

if TYPE_CHECKING:
    from airflow_provider_training.frameworks.trainer.checks import Catalog

__all__ = ["AdmissionResult", "ValidationReport", "admit", "validate", "validate_job"]

# Core objects that often share a file with a job; `validate` passes over them.
PASSED_OVER = {("v1", k) for k in ("PersistentVolumeClaim", "ConfigMap", "Secret", "Service", "Namespace")}


@dataclass
class ValidationReport:
    """Findings for one document."""

    source: str
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    checked: bool = True

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def title(self) -> str:
        if self.kind is None:
            return self.source
        where = f"{self.namespace}/{self.name}" if self.namespace else (self.name or "<unnamed>")
        return f"{self.source}: {self.kind} {where}"

    def lines(self) -> list[str]:
        if not self.checked:
            return [f"{self.title}: not a training job, not checked"]
        state = "valid" if self.ok else "INVALID"
        counts = f"{len(self.errors)} error(s), {len(self.warnings)} warning(s)"
        out = [f"{self.title}: {state} ({counts})"]
        out += [f"  error: {issue}" for issue in self.errors]
        out += [f"  warning: {issue}" for issue in self.warnings]
        return out


def validate(source: Source | Iterable[Source], *, strict: bool = False) -> list[ValidationReport]:
    """Check every document in ``source``; never raises for bad input, returns a report per document."""
    try:
        documents = read_documents(source)
    except JobSpecError as exc:
        return [ValidationReport(exc.source, errors=exc.issues)]
    if not any(_is_trainer_document(doc) for doc in documents):
        return [_validate_document(doc, strict) for doc in documents]
    # Imported here: Trainer v2 checks load their CRDs and rules, which v1-only input never needs.
    from airflow_provider_training.frameworks.trainer.checks import Catalog

    catalog = Catalog.from_documents(doc.data for doc in documents)
    return [
        _validate_trainer_document(doc, strict, catalog)
        if _is_trainer_document(doc)
        else _validate_document(doc, strict)
        for doc in documents
    ]


TRAINER_KINDS = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "JobSet")


def _is_trainer_document(doc: Document) -> bool:
    return str(doc.data.get("kind")) in TRAINER_KINDS


def _validate_trainer_document(doc: Document, strict: bool, catalog: Catalog) -> ValidationReport:
    """TrainJob, (Cluster)TrainingRuntime and JobSet: see :mod:`airflow_provider_training.frameworks.trainer.checks`."""
    from airflow_provider_training.frameworks.trainer import checks as trainer_checks

    meta = doc.data.get("metadata") if isinstance(doc.data.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    report = ValidationReport(
        doc.source,
        kind=str(doc.data.get("kind")),
        name=meta.get("name") if isinstance(meta.get("name"), str) else None,
        namespace=meta.get("namespace") if isinstance(meta.get("namespace"), str) else None,
    )
    findings = trainer_checks.check(doc.data, catalog, strict=strict)
    report.errors, report.warnings = findings.errors, findings.warnings + embedded_capacity(doc.data)
    return report


def validate_job(job: TrainingJob, *, strict: bool = False) -> ValidationReport:
    """Check an already-loaded job (what the operators do before submitting)."""
    return _validate_document(Document(f"{job.kind}/{job.name}", job.to_dict()), strict)


def _validate_document(doc: Document, strict: bool) -> ValidationReport:
    data = doc.data
    raw_meta = data.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    report = ValidationReport(
        doc.source,
        kind=str(data.get("kind")) if data.get("kind") is not None else None,
        name=meta.get("name") if isinstance(meta.get("name"), str) else None,
        namespace=meta.get("namespace") if isinstance(meta.get("namespace"), str) else None,
    )
    key = (str(data.get("apiVersion")), str(data.get("kind")))
    if key in PASSED_OVER:
        report.checked = False
        return report
    if key == ("batch/v1", "Job"):
        _validate_batch_job(data, report)
        report.warnings += embedded_capacity(data)
        return report
    report.errors = identify(doc)
    if report.errors:
        return report
    schema = check_schema(doc)
    report.errors += schema.errors
    unknown = [lint.unknown_field(path, openapi_schema(KINDS[data["kind"]])) for path in schema.unknown_fields]
    if strict:
        report.errors += [Issue(i.path, i.message, "cluster", i.rule) for i in unknown]
    else:
        report.warnings += unknown
    if schema.errors:
        return report
    try:
        job = build(doc)
    except JobSpecError as exc:  # the schema check should have caught it; report, never crash
        report.errors += exc.issues
        return report
    errors, webhook_warnings = webhook.check(job)
    report.errors += errors
    report.warnings += [Issue("", w, "lint", "webhook-warning") for w in webhook_warnings]
    report.errors += runnable.check(job)
    report.warnings += embedded_capacity(data)
    for rtype, spec in job.replica_specs.items():
        if spec.template and spec.template.spec:
            path = f"{index('spec.' + job.KIND.replica_specs_field, rtype)}.template.spec"
            report.warnings += lint.check_pod(spec.template.spec, path, restart_policy_owned=True)
    if not errors:
        report.warnings += env_references(job)
    return report


def embedded_capacity(data: dict[str, Any]) -> list[Issue]:
    """A warning, not an error: the embedded control plane refuses a job of more pods than it runs
    for one job (``specs/capacity.py``), but a cluster takes the same document, and ``validate``
    does not know where it goes. Its exit status stays what a cluster would say."""
    issue = too_many_pods(data)
    if issue is None:
        return []
    return [Issue(issue.path, f"the embedded control plane would refuse this: {issue.message}", "lint", issue.rule)]


def _validate_batch_job(data: dict[str, Any], report: ValidationReport) -> None:
    try:
        job = BatchJob.model_validate(data)
    except ValidationError as exc:
        report.errors += [
            Issue(".".join(str(p) for p in err["loc"]), err["msg"], "cluster", "schema") for err in exc.errors()
        ]
        return
    pod = job.spec.template.spec
    if pod is None:
        report.errors.append(Issue("spec.template.spec", "Required value", "cluster", "schema"))
        return
    report.errors += runnable.check_pod(pod, "spec.template.spec")
    report.warnings += lint.check_pod(pod, "spec.template.spec", restart_policy_owned=False)


# --- $(VAR) and $VAR references ------------------------------------------------------------------

# Every variable some kind's operator injects, and names users expect but no operator sets.
OPERATOR_VARIABLES = {
    "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
    "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_NNODES", "PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND",
    "PET_MAX_RESTARTS", "PET_RDZV_ID", "PET_RDZV_CONF", "PET_STANDALONE", "TF_CONFIG", "WORKER_PORT",
    "WORKER_ADDRS", "PADDLE_JOB_ID", "PADDLE_NNODES", "PADDLE_MASTER", "POD_IP_DUMMY",
    "PADDLE_SERVER_NUM", "PADDLE_TRAINER_NUM", "DMLC_PS_ROOT_PORT", "DMLC_PS_ROOT_URI",
    "DMLC_NUM_SERVER", "DMLC_NUM_WORKER", "DMLC_ROLE", "DMLC_USE_KUBERNETES", "DMLC_WORKER_ID",
    "MX_CONFIG", "COORDINATOR_PORT", "COORDINATOR_ADDRESS", "NUM_PROCESSES", "PROCESS_ID",
    "PYTORCH_JOB_NAME",
}  # fmt: skip

HINTS = {
    "MASTER_ADDR": "the operator sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE only when the job has a Master replica",
    "PET_RDZV_ENDPOINT": "the operator sets PET_RDZV_ENDPOINT only for jobs with an elasticPolicy",
    "PYTORCH_JOB_NAME": "no Training Operator version sets PYTORCH_JOB_NAME; read the job name from the "
    "label training.kubeflow.org/job-name with a fieldRef, or write it literally",
}
for _name in ("MASTER_PORT", "RANK", "WORLD_SIZE", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NODE_RANK"):
    HINTS[_name] = HINTS["MASTER_ADDR"]
for _name in ("PET_RDZV_BACKEND", "PET_MAX_RESTARTS", "PET_RDZV_ID", "PET_RDZV_CONF", "PET_STANDALONE"):
    HINTS[_name] = HINTS["PET_RDZV_ENDPOINT"]

K8S_REFERENCE = re.compile(r"\$\(([A-Z_][A-Z0-9_]*)\)")
SHELL_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _escaped(text: str, start: int) -> bool:
    """``$$(X)`` is Kubernetes' escape for a literal ``$(X)``: count the ``$`` run before ``start``."""
    run = 0
    while start - run - 1 >= 0 and text[start - run - 1] == "$":
        run += 1
    return run % 2 == 1


def env_references(job: TrainingJob) -> list[Issue]:
    """Warn about ``$(VAR)`` / ``$VAR`` references that nothing will define for that replica."""
    defaulted = with_defaults(job)
    plugin = frameworks.plugin(job.kind)
    issues: list[Issue] = []
    for rtype, spec in defaulted.replica_specs.items():
        if spec.template is None or spec.template.spec is None:
            continue
        base = f"{index('spec.' + job.KIND.replica_specs_field, rtype)}.template.spec"
        indexes = range(max(1, min(spec.replicas or 0, 2)))
        for i, container in enumerate(spec.template.spec.containers):
            injected: set[str] = set()
            for replica in indexes:
                injected |= {env.name for env in plugin.injected_env(defaulted, rtype, replica, container.name)}
            issues += _container_references(container, index(join(base, "containers"), i), injected)
    return issues


def _container_references(container: Container, path: str, injected: set[str]) -> list[Issue]:
    if container.env_from:
        return []  # keys from ConfigMaps/Secrets are unknown here
    issues: list[Issue] = []
    declared: list[str] = []
    for j, env in enumerate(container.env or []):
        for name in _k8s_refs(env.value or ""):
            if name not in declared:
                later = name in injected or any(e.name == name for e in (container.env or [])[j:])
                why = (
                    "it is declared after this variable or injected by the operator after the user's env"
                    if later
                    else "nothing defines it"
                )
                issues.append(
                    Issue(
                        join(index(join(path, "env"), j), "value"),
                        f"$({name}) stays literal text: {why} (Kubernetes expands only variables defined earlier)",
                        "lint",
                        "env-reference",
                    )
                )
        declared.append(env.name)
    defined = set(declared) | injected
    for field_name, words in (("command", container.command or []), ("args", container.args or [])):
        for k, word in enumerate(words):
            for name in _k8s_refs(word):
                if name not in defined:
                    hint = HINTS.get(name, "neither the container's env nor the operator defines it")
                    issues.append(
                        Issue(
                            index(join(path, field_name), k),
                            f"$({name}) stays literal text at run time: {hint}",
                            "lint",
                            "env-reference",
                        )
                    )
            for name in _shell_refs(word):
                if name in OPERATOR_VARIABLES and name not in defined:
                    hint = HINTS.get(name, f"the operator does not set {name} for this kind and topology")
                    issues.append(
                        Issue(
                            index(join(path, field_name), k),
                            f"${name} is empty in the shell: {hint}",
                            "lint",
                            "env-reference",
                        )
                    )
    return issues


def _k8s_refs(text: str) -> list[str]:
    return [m.group(1) for m in K8S_REFERENCE.finditer(text) if not _escaped(text, m.start())]


def _shell_refs(text: str) -> list[str]:
    names = []
    for m in SHELL_REFERENCE.finditer(text):
        if _escaped(text, m.start()):
            continue
        names.append(m.group(1) or m.group(2))
    return names


# --- admission (the embedded API server) --------------------------------------------------------


@dataclass
class AdmissionResult:
    object: dict[str, Any]
    unknown_fields: list[str] = field(default_factory=list)
    errors: list[Issue] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def admit(
    obj: dict[str, Any], *, old: dict[str, Any] | None = None, field_validation: str = "Strict"
) -> AdmissionResult:
    """What a real API server with the Training Operator's webhook decides about a create/update.

    Level ``cluster`` findings are ``errors``; level ``provider`` and ``lint`` findings come back as
    ``warnings`` (a cluster accepts such jobs). ``object`` has unknown fields pruned.
    """
    doc = Document(f"{obj.get('kind')}", obj)
    result = AdmissionResult(object=obj)
    result.errors = identify(doc)
    if result.errors:
        return result
    schema = check_schema(doc)
    result.unknown_fields = list(schema.unknown_fields)
    result.errors = list(schema.errors)
    if field_validation != "Strict" or not result.unknown_fields:
        result.object = schema.pruned
    if field_validation == "Warn":
        result.warnings += [f'unknown field "{path}"' for path in schema.unknown_fields]
    if result.errors:
        return result
    job = build(Document(doc.source, result.object))
    old_job = None
    if old is not None:
        try:
            old_job = build(Document("old", old))
        except JobSpecError:
            old_job = None
    errors, warnings = webhook.check(job, old_job)
    result.errors = errors
    result.warnings += warnings
    if not errors:
        result.warnings += [str(i) for i in runnable.check(job)]
        result.warnings += [str(i) for i in env_references(job)]
    return result
