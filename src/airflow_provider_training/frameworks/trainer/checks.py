"""All checks of a Trainer v2 / JobSet document, for ``airflow-training validate``.

A TrainJob is checked against the runtime it references, looked up among the documents validated
together (a TrainJob and its runtime may share a file) and then among the default
ClusterTrainingRuntimes of a v2.3.0 install. With the runtime in hand the JobSet is built exactly
as the controller would, and checked by the JobSet webhook: a TrainJob whose name passes its own
63-character rule can still produce pod names that JobSet refuses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training.frameworks.trainer import envrefs
from airflow_provider_training.frameworks.trainer.build import build
from airflow_provider_training.frameworks.trainer.info import BuildError, gpus_per_node
from airflow_provider_training.specs import names
from airflow_provider_training.specs.issues import Issue
from airflow_provider_training.specs.trainer import compat, documents, jobset_webhook, webhook
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.crds import JOBSET, openapi_schema
from airflow_provider_training.specs.trainer.models import JobSet, TrainingRuntime, TrainJob
from airflow_provider_training.specs.trainer.runtimes import default_runtimes
from airflow_provider_training.specs.trainer.schema import with_defaults


@dataclass
class Findings:
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)


@dataclass
class Catalog:
    """Runtimes known while validating: those in the input, then the bundled defaults."""

    runtimes: dict[tuple[str, str, str], TrainingRuntime] = field(default_factory=dict)
    use_defaults: bool = True
    # The runtime documents checked while collecting them, so that :func:`check` does not check
    # them a second time (keyed by identity; the document is kept to keep the key valid).
    checked: dict[int, tuple[dict[str, Any], documents.Checked]] = field(default_factory=dict)

    @classmethod
    def from_documents(cls, datas: Iterable[dict[str, Any]]) -> Catalog:
        catalog = cls()
        for data in datas:
            if str(data.get("kind")) not in c.RUNTIME_KINDS:
                continue
            checked = documents.check_document(data)
            catalog.checked[id(data)] = (data, checked)
            if isinstance(checked.object, TrainingRuntime):
                catalog.add(checked.object)
        return catalog

    def check_document(self, data: dict[str, Any]) -> documents.Checked:
        """:func:`documents.check_document`, once per document (nothing here changes what it returns)."""
        known = self.checked.get(id(data))
        if known is not None and known[0] is data:
            return known[1]
        return documents.check_document(data)

    def add(self, runtime: TrainingRuntime) -> None:
        namespace = (runtime.metadata.namespace or "default") if runtime.kind == c.TRAINING_RUNTIME else ""
        self.runtimes[(runtime.kind, namespace, runtime.name)] = runtime

    def lookup(self, job: TrainJob) -> tuple[TrainingRuntime | None, str]:
        """The referenced runtime and where it came from (``this input``, ``bundled defaults``)."""
        ref = job.spec.runtime_ref
        namespace = job.namespace if ref.kind == c.TRAINING_RUNTIME else ""
        found = self.runtimes.get((str(ref.kind), namespace, ref.name))
        if found is not None:
            return found, "this input"
        if self.use_defaults and ref.kind == c.CLUSTER_TRAINING_RUNTIME and ref.name in default_runtimes():
            return default_runtimes()[ref.name], "the default ClusterTrainingRuntimes of Kubeflow Trainer v2.3.0"
        return None, ""


def _metadata(data: dict[str, Any]) -> list[Issue]:
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    issues: list[Issue] = []
    if not meta.get("name") and not meta.get("generateName"):
        issues.append(Issue("metadata.name", "Required value: name or generateName is required", "cluster", "schema"))
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace:
        if data.get("kind") == c.CLUSTER_TRAINING_RUNTIME:
            issues.append(
                Issue(
                    "metadata.namespace",
                    f'"{namespace}" is ignored: ClusterTrainingRuntime is cluster-scoped',
                    "lint",
                    "scope",
                )
            )
        for err in names.dns1123_label(namespace):
            issues.append(Issue("metadata.namespace", f'Invalid value: "{namespace}": {err}', "cluster", "schema"))
    for key, value in (meta.get("labels") or {}).items():
        for err in names.qualified_name(key):
            issues.append(Issue("metadata.labels", f'Invalid value: "{key}": {err}', "cluster", "schema"))
        for err in names.label_value(str(value)):
            issues.append(Issue(f"metadata.labels[{key}]", f'Invalid value: "{value}": {err}', "cluster", "schema"))
    name = meta.get("name")
    if isinstance(name, str) and name and data.get("kind") != c.TRAINJOB:
        # Custom resources need DNS-1123 subdomain names (TrainJob's own CEL rules are stricter).
        for err in names.dns1123_subdomain(name):
            issues.append(Issue("metadata.name", f'Invalid value: "{name}": {err}', "cluster", "schema"))
    return issues


def check(data: dict[str, Any], catalog: Catalog, *, strict: bool = False) -> Findings:
    """Everything wrong with one document, split into errors and warnings."""
    findings = Findings()
    checked = catalog.check_document(data)
    findings.errors += checked.errors
    if strict:
        findings.errors += [Issue(i.path, i.message, "cluster", i.rule) for i in checked.unknown]
    else:
        findings.warnings += checked.unknown
    if checked.info is None or data.get("apiVersion") != checked.info.api_version:
        return findings
    meta_issues = _metadata(data)
    findings.errors += [i for i in meta_issues if i.level != "lint"]
    findings.warnings += [i for i in meta_issues if i.level == "lint"]
    obj = checked.object
    if isinstance(obj, TrainJob):
        _trainjob(obj, catalog, findings)
    elif isinstance(obj, TrainingRuntime):
        errors, warnings = webhook.check_runtime(obj)
        findings.errors += errors
        findings.warnings += [Issue("", w, "lint", "webhook-warning") for w in warnings]
        findings.warnings += compat.check_runtime(obj)
    elif isinstance(obj, JobSet) and checked.defaulted is not None:
        named = documents.with_generated_name(checked.defaulted)
        findings.errors += jobset_webhook.check_jobset(jobset_webhook.jobset_defaults(named))
    return findings


def _trainjob(job: TrainJob, catalog: Catalog, findings: Findings) -> None:
    runtime, origin = catalog.lookup(job)
    ref = job.spec.runtime_ref
    if runtime is None and ref.registry_key in c.REGISTERED_RUNTIMES:
        errors, _ = webhook.check_trainjob(job, None)
        refusal = "; ".join(str(e) for e in errors)
        findings.warnings.append(
            Issue(
                "spec.runtimeRef",
                f"{ref.kind} {ref.name!r} is neither in this input nor a default ClusterTrainingRuntime, so the "
                f"TrainJob was not checked against it; a cluster without it refuses the TrainJob: {refusal}",
                "lint",
                "runtime-not-found",
            )
        )
        return
    errors, warnings = webhook.check_trainjob(job, runtime)
    findings.errors += errors
    findings.warnings += [Issue("", w, "lint", "webhook-warning") for w in warnings]
    if runtime is None or errors:
        return
    issues = compat.check_trainjob(job, runtime)
    findings.errors += [i for i in issues if i.level != "lint"]
    findings.warnings += [i for i in issues if i.level == "lint"]
    if any(i.level != "lint" for i in issues):
        return
    if not job.name and job.metadata.generate_name:
        job = TrainJob.model_validate(documents.with_generated_name(job.to_dict()))
    try:
        built = build(job, runtime)
    except BuildError as exc:
        findings.errors.append(
            Issue("", f"the trainer controller cannot build this TrainJob's objects: {exc}", "provider", "build")
        )
        return
    container = built.info.trainer_container() if built.info else None
    if container is not None:
        findings.errors += compat.check_node_resources(
            container.get("resources") or {}, "spec.trainer.resourcesPerNode"
        )
    if built.info is not None:
        findings.warnings += compat.check_gpu_use(job, runtime, gpus_per_node(built.info.resources_per_node()))
    framework = runtime.spec.ml_policy.framework if runtime.spec.ml_policy else None
    findings.warnings += envrefs.check(job, built.jobset, framework)
    # in place: the JobSet was just built, and nothing reads it after this
    defaulted = with_defaults(built.jobset, openapi_schema(JOBSET), in_place=True)
    jobset = jobset_webhook.jobset_defaults(defaulted, in_place=True)
    for issue in jobset_webhook.check_jobset(jobset):
        findings.errors.append(
            Issue(
                "metadata.name" if "name is too long" in issue.message else "",
                f"the JobSet the controller creates for this TrainJob (runtime {runtime.name} from {origin}) is "
                f"refused: {issue.message}",
                "provider",
                "jobset",
            )
        )
