"""Decoding of built-in objects as kube-apiserver decodes them into its Go types: the field types
and names come from the official ``kubernetes`` client's models, which are generated from the
Kubernetes OpenAPI document (``openapi_types`` / ``attribute_map``), not written here.

A value of the wrong type is a 400 (``json: cannot unmarshal string into Go struct field
PodSpec.spec.terminationGracePeriodSeconds of type int64``); an unknown field is a 400 with
``fieldValidation=Strict`` (``strict decoding error: unknown field "spec.containers[0].imagee"``),
a ``Warning`` header with ``Warn`` (the default) and nothing with ``Ignore``. Unknown fields are
kept, as the project keeps unknown Kubernetes fields verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import kubernetes.client

from airflow_provider_training.embedded.apiserver.errors import ApiError, bad_request
from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.specs.unstructured import Unstructured

# The client model of each built-in kind this server stores.
MODELS = {
    "core/namespaces": "V1Namespace",
    "core/pods": "V1Pod",
    "core/services": "V1Service",
    "core/events": "CoreV1Event",
    "core/configmaps": "V1ConfigMap",
    "core/secrets": "V1Secret",
    "core/persistentvolumeclaims": "V1PersistentVolumeClaim",
    "batch/jobs": "V1Job",
    "core/serviceaccounts": "V1ServiceAccount",
    "rbac.authorization.k8s.io/roles": "V1Role",
    "rbac.authorization.k8s.io/clusterroles": "V1ClusterRole",
    "rbac.authorization.k8s.io/rolebindings": "V1RoleBinding",
    "rbac.authorization.k8s.io/clusterrolebindings": "V1ClusterRoleBinding",
}
# resource.Quantity fields are strings in the client's models, but the API server also takes numbers.
QUANTITY_FIELDS = frozenset(
    {
        "limits",
        "requests",
        "capacity",
        "allocatable",
        "hard",
        "used",
        "overhead",
        "sizeLimit",
        "allocatedResources",
        "divisor",
    }
)
# int32 fields (the client's models say only "int"): a batch/v1 Job's counts, from k8s.io/api's JobSpec.
INT32_FIELDS = frozenset(
    ("JobSpec", name)
    for name in (
        "parallelism",
        "completions",
        "backoffLimit",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
        "ttlSecondsAfterFinished",
    )
)
_LIST = re.compile(r"list\[(.+)\]")
_DICT = re.compile(r"dict[(\[]str, (.+)[)\]]")
_GO_TYPES = {"str": "string", "int": "int64", "float": "float64", "bool": "bool", "datetime": "Time", "date": "Time"}
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2}))?")


@dataclass
class Decoded:
    unknown: list[str] = field(default_factory=list)


@cache
def _fields(model: str) -> dict[str, str]:
    """JSON field name -> the client's type string for that field."""
    cls = getattr(kubernetes.client, model)
    return {json_name: cls.openapi_types[attr] for attr, json_name in cls.attribute_map.items()}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class _TypeError(Exception):
    def __init__(self, value: Any, struct: str, path: str, go_type: str, what: str | None = None) -> None:
        super().__init__(
            f"json: cannot unmarshal {what or _json_type(value)} into Go struct field {struct}.{path} of type {go_type}"
        )


def _walk(value: Any, type_: str, path: str, struct: str, name: str, out: Decoded) -> Any:
    """Check ``value`` against the client type string ``type_``; returns it (integral floats as ints)."""
    if value is None:
        return None
    if match := _LIST.fullmatch(type_):
        if not isinstance(value, list):
            raise _TypeError(value, struct, path, f"[]{_go(match.group(1))}")
        return [_walk(v, match.group(1), f"{path}[{i}]", struct, name, out) for i, v in enumerate(value)]
    if match := _DICT.fullmatch(type_):
        if not isinstance(value, dict):
            raise _TypeError(value, struct, path, f"map[string]{_go(match.group(1))}")
        element = match.group(1)
        # Go stores a null map value as the element's zero value ("" for a string)
        return {
            k: "" if v is None and element == "str" else _walk(v, element, f"{path}[{k}]", struct, name, out)
            for k, v in value.items()
        }
    if type_ == "object":
        return value  # IntOrString, RawExtension and free-form fields
    if type_ == "str":
        if isinstance(value, str):
            return value
        if name in QUANTITY_FIELDS and isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        raise _TypeError(value, struct, path, "string")
    if type_ == "bool":
        if isinstance(value, bool):
            return value
        raise _TypeError(value, struct, path, "bool")
    if type_ == "int":
        bits = 32 if (struct, name) in INT32_FIELDS else 64
        if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** (bits - 1):
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool) and -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # Go's decoder: "cannot unmarshal number 3000000000 into ... of type int32"
            raise _TypeError(value, struct, path, f"int{bits}", f"number {value}")
        raise _TypeError(value, struct, path, "int64")
    if type_ == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        raise _TypeError(value, struct, path, "float64")
    if type_ in ("datetime", "date"):
        if isinstance(value, str) and _TIME.fullmatch(value):
            return value
        if isinstance(value, str):
            raise bad_request(f'parsing time "{value[:64]}" as "2006-01-02T15:04:05Z07:00" at {path}: cannot parse')
        raise _TypeError(value, struct, path, "Time")
    # a model
    if not isinstance(value, dict):
        raise _TypeError(value, struct, path, _go(type_))
    fields = _fields(type_)
    result = {}
    for key, child in value.items():
        child_path = f"{path}.{key}" if path else key
        if key not in fields:
            out.unknown.append(child_path)
            result[key] = child
            continue
        result[key] = _walk(child, fields[key], child_path, _struct(type_), key, out)
    return result


def _struct(model: str) -> str:
    return re.sub(r"^(V\d+(alpha\d+|beta\d+)?|CoreV\d+)", "", model)


def _go(type_: str) -> str:
    return _GO_TYPES.get(type_, _struct(type_))


def decode(rt: ResourceType, obj: Unstructured, field_validation: str) -> tuple[Unstructured, list[str]]:
    """The object as it decodes into its kind's type, and the warnings for the response; a value
    of the wrong type (or an unknown field under Strict) is a 400 as kubectl shows it."""
    model = MODELS.get(rt.key)
    if model is None:
        return obj, []
    out = Decoded()
    prefix = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}'
    try:
        decoded = _walk(obj, model, "", _struct(model), "", out)
    except _TypeError as exc:
        raise bad_request(f"{prefix}: {exc}") from None
    except ApiError as exc:
        raise bad_request(f"{prefix}: {exc.message}") from None
    out.unknown = [u for u in out.unknown if u not in ("apiVersion", "kind")]
    if field_validation == "Strict" and out.unknown:
        listed = ", ".join(f'unknown field "{path}"' for path in out.unknown)
        raise bad_request(f"{prefix}: strict decoding error: {listed}")
    warnings = [f'unknown field "{path}"' for path in out.unknown] if field_validation == "Warn" else []
    return decoded, warnings


def decode_pod_template(template: Any, path: str) -> None:
    """Type-check a pod template embedded in another object (a training job's replica template)."""
    if template is None:
        return
    try:
        _walk(template, "V1PodTemplateSpec", path, "PodTemplateSpec", "", Decoded())
    except _TypeError as exc:
        raise bad_request(str(exc)) from None


def decode_metadata(rt: ResourceType, obj: Unstructured) -> None:
    """Type-check only ``metadata`` (custom resources: the rest is their schema's business)."""
    try:
        _walk(obj.get("metadata"), "V1ObjectMeta", "metadata", "ObjectMeta", "metadata", Decoded())
    except _TypeError as exc:
        raise bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {exc}') from None


def decode_delete_options(body: Any) -> dict[str, Any]:
    """A DELETE's body, type-checked as kube-apiserver decodes it into ``DeleteOptions``."""
    prefix = 'DeleteOptions in version "v1" cannot be handled as a DeleteOptions'
    if not isinstance(body, dict):
        raise bad_request(f"{prefix}: json: cannot unmarshal {_json_type(body)} into Go value of type DeleteOptions")
    try:
        decoded: dict[str, Any] = _walk(body, "V1DeleteOptions", "", "DeleteOptions", "", Decoded())
    except _TypeError as exc:
        raise bad_request(f"{prefix}: {exc}") from None
    return decoded
