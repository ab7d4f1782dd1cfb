"""Admission of training jobs: the project's level-1 validation, answered as a real API server
with the Training Operator's webhook answers (400 strict decoding, 422 Invalid, Warning headers)."""

from __future__ import annotations

from airflow_provider_training.embedded.apiserver.errors import bad_request, invalid
from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.specs.unstructured import Unstructured
from airflow_provider_training.validation import admit

FIELD_VALIDATION = ("Strict", "Warn", "Ignore")


def field_validation_mode(value: str | None) -> str:
    # A request without the parameter gets the server default, Warn (since Kubernetes 1.27).
    if value is None or value == "":
        return "Warn"
    if value not in FIELD_VALIDATION:
        raise bad_request(f'fieldValidation must be one of "Strict", "Warn", "Ignore" (got "{value}")')
    return value


def admit_training_job(
    rt: ResourceType, obj: Unstructured, old: Unstructured | None, field_validation: str
) -> tuple[Unstructured, list[str]]:
    """The object to store and the warnings for the response; raises the refusal as an ApiError."""
    result = admit(obj, old=old, field_validation=field_validation)
    if field_validation == "Strict" and result.unknown_fields:
        listed = ", ".join(f'unknown field "{path}"' for path in result.unknown_fields)
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding error: {listed}'
        )
    if result.errors:
        name = obj.get("metadata", {}).get("name", "")
        raise invalid(rt, name, [(issue.path, issue.message) for issue in result.errors])
    warnings = list(result.warnings)
    if field_validation == "Warn":
        for path in result.unknown_fields:
            text = f'unknown field "{path}"'
            if text not in warnings:
                warnings.insert(0, text)
    return result.object, warnings
