"""Check one TrainJob / TrainingRuntime / ClusterTrainingRuntime / JobSet document as the API server
does before any webhook: identify it, check it against its CRD (structure, value constraints),
apply CRD defaults, evaluate the CRD's CEL rules, and build the typed object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from airflow_provider_training.specs import lint
from airflow_provider_training.specs.issues import Issue
from airflow_provider_training.specs.loader import _with_object_meta
from airflow_provider_training.specs.schema import check
from airflow_provider_training.specs.trainer import jobset_webhook
from airflow_provider_training.specs.trainer import schema as trainer_schema
from airflow_provider_training.specs.trainer.crds import TRAINER_KINDS, TrainerKind, openapi_schema
from airflow_provider_training.specs.trainer.models import JobSet, TrainingRuntime, TrainJob

TrainerObject = TrainJob | TrainingRuntime | JobSet


def identify(data: dict[str, Any]) -> TrainerKind | None:
    """The trainer kind of a document, or None if it is not one of them (wrong apiVersion included)."""
    info = TRAINER_KINDS.get(str(data.get("kind")))
    return info if info is not None and data.get("apiVersion") == info.api_version else None


def is_trainer_document(data: dict[str, Any]) -> bool:
    """Whether the document claims one of these kinds (by kind; a wrong apiVersion is an error later)."""
    return str(data.get("kind")) in TRAINER_KINDS


@dataclass
class Checked:
    """What the API server would store (``defaulted``) and everything wrong on the way."""

    info: TrainerKind | None
    errors: list[Issue] = field(default_factory=list)
    unknown: list[Issue] = field(default_factory=list)
    defaulted: dict[str, Any] | None = None
    object: TrainerObject | None = None


def check_document(data: dict[str, Any], old: dict[str, Any] | None = None) -> Checked:
    """Schema, constraints, defaults and CEL (transition rules only with ``old``); never raises."""
    kind = data.get("kind")
    info = TRAINER_KINDS.get(str(kind))
    if info is None:
        return Checked(None, [Issue("kind", f'Unsupported value: "{kind}"', "cluster", "schema")])
    result = Checked(info)
    if data.get("apiVersion") != info.api_version:
        result.errors.append(
            Issue(
                "apiVersion",
                f'Unsupported value: "{data.get("apiVersion")}": {info.kind} is served as "{info.api_version}"',
                "cluster",
                "schema",
            )
        )
        return result
    schema = openapi_schema(info)
    if info.kind == "JobSet" and isinstance(data.get("spec"), dict):
        # JobSet's mutating webhook runs before the schema check (it names failure-policy rules).
        data = jobset_webhook.jobset_defaults(data)
    structural = check(data, _with_object_meta(schema))
    result.errors += structural.errors
    result.unknown = [lint.unknown_field(path, schema) for path in structural.unknown_fields]
    if structural.errors:
        return result
    pruned = structural.pruned
    result.errors += trainer_schema.constraints(pruned, schema)
    # without errors the pruned document is a new tree (the check rebuilds every object and list)
    defaulted = trainer_schema.with_defaults(pruned, schema, in_place=True)
    old_defaulted = trainer_schema.with_defaults(old, schema) if old is not None else None
    named = with_generated_name(defaulted)  # the API server names the object before validating it
    if old_defaulted is None:
        result.errors += trainer_schema.cel_rules(named, schema)
    else:
        result.errors += trainer_schema.cel_rules(named, schema, old_defaulted)
    result.defaulted = defaulted
    if result.errors:
        return result
    try:
        result.object = build(info, defaulted)
    except ValidationError as exc:  # the schema check should have caught it; report, never crash
        result.errors += [
            Issue(".".join(str(p) for p in err["loc"]), err["msg"], "cluster", "schema") for err in exc.errors()
        ]
    return result


GENERATED_SUFFIX = "abcde"  # stands for the 5 random characters the API server appends to generateName


def with_generated_name(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``metadata.name`` as the API server would generate it from ``generateName``
    (prefix cut to 58 characters, 5 random characters appended); unchanged when it has a name."""
    meta = data.get("metadata")
    if not isinstance(meta, dict) or meta.get("name") or not isinstance(meta.get("generateName"), str):
        return data
    return {**data, "metadata": {**meta, "name": meta["generateName"][:58] + GENERATED_SUFFIX}}


def build(info: TrainerKind, data: dict[str, Any]) -> TrainerObject:
    if info.kind == "TrainJob":
        return TrainJob.model_validate(data)
    if info.kind == "JobSet":
        return JobSet.model_validate(data)
    return TrainingRuntime.model_validate(data)
