"""From what a DAG author passes as ``job`` (dict, YAML text, ``.yaml`` path, pydantic model) to the
document the operator submits: kind checked, templated scalars coerced, name / namespace / labels
applied, validated with the project's rules."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from airflow_provider_training.specs import JobSpecError, TrainingJob, load_job
from airflow_provider_training.specs.crds import openapi_schema
from airflow_provider_training.specs.kinds import API_VERSION, KINDS
from airflow_provider_training.specs.loader import read_documents
from airflow_provider_training.validation import ValidationReport, validate_job

_INT = re.compile(r"^[+-]?\d+$")


def coerce(value: Any, schema: Mapping[str, Any]) -> Any:
    """Turn strings into integers / booleans where the CRD schema wants those.

    Jinja renders ``replicas: "{{ params.replicas }}"`` as the string ``"3"``; a cluster would refuse
    it. Only exact integer / boolean spellings change; anything else is left for validation to report.
    """
    if schema.get("x-kubernetes-int-or-string"):
        return value
    expected = schema.get("type")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            sub = props.get(key) if key in props else (extra if isinstance(extra, dict) else None)
            out[key] = coerce(item, sub) if sub else item
        return out
    if isinstance(value, list):
        items = schema.get("items") or {}
        return [coerce(item, items) for item in value] if items else value
    if isinstance(value, str):
        text = value.strip()
        if expected == "integer" and _INT.match(text):
            return int(text)
        if expected == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
    return value


def load(source: Any, kind: str | None = None) -> dict[str, Any]:
    """The job document as a dict, with integer/boolean strings coerced. ``kind`` (typed operators)
    fills in ``kind`` / ``apiVersion`` when the document leaves them out and refuses another kind."""
    if isinstance(source, TrainingJob):
        data = source.to_dict()
    else:
        documents = read_documents(source)
        if len(documents) != 1:
            raise JobSpecError("job", [_issue(f"expected exactly one job document, found {len(documents)}")])
        data = dict(documents[0].data)
    if kind is not None:
        data.setdefault("kind", kind)
        data.setdefault("apiVersion", API_VERSION)
        if data["kind"] != kind:
            raise JobSpecError(
                "job",
                [
                    _issue(
                        f"this operator submits {kind}s but the document is a {data['kind']}; use "
                        f"{data['kind']}Operator or TrainingJobOperator"
                    )
                ],
            )
    info = KINDS.get(str(data.get("kind")))
    if info is not None:
        data = coerce(data, openapi_schema(info))
    return data


def _issue(message: str) -> Any:
    from airflow_provider_training.specs.issues import Issue

    return Issue("", message)


def apply(
    data: dict[str, Any], *, name: str | None, namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> dict[str, Any]:
    """Set name, namespace, labels and annotations on the job and its replicas' pod templates (so the
    pods carry the task's identity too)."""
    meta = dict(data.get("metadata") or {})
    if name:
        meta["name"] = name
        meta.pop("generateName", None)
    meta["namespace"] = namespace
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    out = {**data, "metadata": meta}
    info = KINDS.get(str(data.get("kind")))
    if info is not None:
        replicas = (out.get("spec") or {}).get(info.replica_specs_field) or {}
        for spec in replicas.values():
            if isinstance(spec, dict):
                template = spec.setdefault("template", {})
                tmeta = template.setdefault("metadata", {})
                tmeta["labels"] = {**(tmeta.get("labels") or {}), **labels}
    return out


def check(data: dict[str, Any]) -> tuple[TrainingJob, ValidationReport]:
    """Load (schema check) and validate; raises :class:`JobSpecError` on errors."""
    job = load_job(data)
    report = validate_job(job)
    if not report.ok:
        raise JobSpecError(report.title, report.errors)
    return job, report
