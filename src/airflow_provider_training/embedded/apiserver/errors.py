"""Kubernetes ``Status`` answers: each failure carries the code and reason a real API server gives,
so the ``kubernetes`` clients raise their usual ``ApiException`` and kubectl prints its usual text."""

from __future__ import annotations

from typing import Any

from airflow_provider_training.embedded.resources import ResourceType

_CAUSE_REASONS = {
    "Required value": "FieldValueRequired",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
    "Duplicate value": "FieldValueDuplicate",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Not found": "FieldValueNotFound",
}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rt: ResourceType, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": rt.plural}
    if name:
        details["name"] = name
    if rt.group:
        details["group"] = rt.group
    return details


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rt.qualified_name} "{name}" not found', _details(rt, name))


def namespace_not_found(namespace: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"}
    )


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{rt.qualified_name} "{name}" already exists', _details(rt, name))


def conflict(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rt.qualified_name} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(rt, name),
    )


def invalid(rt: ResourceType, name: str, issues: list[tuple[str, str]]) -> ApiError:
    """``issues``: (field path, message such as "Forbidden: must be 1")."""
    causes = []
    for field, message in issues:
        reason = next(
            (r for prefix, r in _CAUSE_REASONS.items() if message.startswith(prefix)), "FieldValueInvalid"
        )
        causes.append({"reason": reason, "message": message, "field": field})
    listed = ", ".join(f"{field}: {message}" for field, message in issues)
    kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    details = _details(rt, name)
    details["kind"] = rt.kind
    details["causes"] = causes
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: [{listed}]', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, {})


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got "{content_type}")',
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)
