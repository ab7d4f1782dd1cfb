"""Structural-schema check of a document against its CRD, as the API server does it.

Hand-written because the CRDs use Kubernetes extensions (``x-kubernetes-int-or-string``,
``x-kubernetes-preserve-unknown-fields``, list-map keys) and pruning semantics that a generic JSON
Schema validator does not implement, and because errors must use Kubernetes' field-path wording.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training.specs.issues import Issue, index, join

MAX_DEPTH = 64
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


@dataclass
class SchemaResult:
    errors: list[Issue] = field(default_factory=list)
    # Paths of fields the schema does not know, in the API server's strict-decoding form
    # (``spec.cleanPodPolicy``, ``spec.template.spec.containers[0].foo``).
    unknown_fields: list[str] = field(default_factory=list)
    # The document with unknown fields removed: what a server stores under fieldValidation=Warn.
    pruned: Any = None


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


class _Walker:
    def __init__(self) -> None:
        self.result = SchemaResult()

    def error(self, path: str, message: str) -> None:
        self.result.errors.append(Issue(path, message, "cluster", "schema"))

    def walk(self, value: Any, schema: dict[str, Any], path: str, dotted: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.error(path, f"Invalid value: nesting deeper than {MAX_DEPTH} levels")
            return None
        if schema.get("x-kubernetes-int-or-string"):
            return self._int_or_string(value, schema, path)
        expected = schema.get("type")
        if expected == "object" or (expected is None and "properties" in schema):
            return self._object(value, schema, path, dotted, depth)
        if expected == "array":
            return self._array(value, schema, path, dotted, depth)
        if expected == "string":
            return self._string(value, schema, path)
        if expected == "integer":
            return self._integer(value, schema, path)
        if expected == "number":
            if not _is_number(value):
                self._type_error(path, value, "number")
            elif not math.isfinite(value):
                self.error(path, f"Invalid value: {value!r}: must be a finite number")
            return value
        if expected == "boolean":
            if not isinstance(value, bool):
                self._type_error(path, value, "boolean")
            return value
        # No type: anything JSON can carry.
        return self._any_json(value, path, depth)

    def _type_error(self, path: str, value: Any, expected: str) -> None:
        self.error(path, f'Invalid value: "{type_name(value)}": must be of type {expected}')

    def _object(self, value: Any, schema: dict[str, Any], path: str, dotted: str, depth: int) -> Any:
        if not isinstance(value, dict):
            self._type_error(path, value, "object")
            return value
        properties: dict[str, Any] = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.error(path, f"Invalid value: {key!r}: field names must be strings")
                continue
            if item is None:
                # The API server drops nulls of non-nullable fields instead of failing.
                continue
            if key in properties:
                out[key] = self.walk(item, properties[key], join(path, key), join(dotted, key), depth + 1)
            elif isinstance(additional, dict):
                out[key] = self.walk(item, additional, index(path, key), join(dotted, key), depth + 1)
            elif preserve or additional is True:
                out[key] = self._any_json(item, join(path, key), depth + 1)
            else:
                self.result.unknown_fields.append(join(dotted, key))
        for required in schema.get("required", []):
            if value.get(required) is None:
                self.error(join(path, required), "Required value")
        return out

    def _array(self, value: Any, schema: dict[str, Any], path: str, dotted: str, depth: int) -> Any:
        if not isinstance(value, list):
            self._type_error(path, value, "array")
            return value
        items = schema.get("items", {})
        out = [self.walk(item, items, index(path, i), index(dotted, i), depth + 1) for i, item in enumerate(value)]
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "map":
            keys = schema.get("x-kubernetes-list-map-keys", [])
            seen: set[tuple[Any, ...]] = set()
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                ident = tuple(_hashable(item.get(k)) for k in keys)
                if ident in seen:
                    shown = ", ".join(f"{k}={item.get(k)!r}" for k in keys)
                    self.error(index(path, i), f"Duplicate value: {{{shown}}}")
                seen.add(ident)
        elif list_type == "set":
            seen_values: set[Any] = set()
            for i, item in enumerate(value):
                marker = _hashable(item)
                if marker in seen_values:
                    self.error(index(path, i), f"Duplicate value: {item!r}")
                seen_values.add(marker)
        return out

    def _string(self, value: Any, schema: dict[str, Any], path: str) -> Any:
        if not isinstance(value, str):
            self._type_error(path, value, "string")
            return value
        pattern = schema.get("pattern")
        if pattern and re.search(pattern, value) is None:
            self.error(path, f"Invalid value: \"{value}\": should match '{pattern}'")
        return value

    def _integer(self, value: Any, schema: dict[str, Any], path: str) -> Any:
        if not _is_number(value) or (isinstance(value, float) and not value.is_integer()):
            self._type_error(path, value, "integer")
            return value
        low, high = INT32 if schema.get("format") == "int32" else INT64
        if not low <= value <= high:
            fmt = schema.get("format", "int64")
            self.error(path, f"Invalid value: {value}: must fit in {fmt} ({low} to {high})")
        return value

    def _int_or_string(self, value: Any, schema: dict[str, Any], path: str) -> Any:
        if isinstance(value, str):
            pattern = _any_of_pattern(schema)
            if pattern and re.search(pattern, value) is None:
                self.error(path, f'Invalid value: "{value}": must be an integer or a quantity such as "500m" or "8Gi"')
            return value
        if _is_number(value) and not isinstance(value, float):
            return value
        if isinstance(value, float) and value.is_integer():
            return value
        self._type_error(path, value, "integer or string")
        return value

    def _any_json(self, value: Any, path: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.error(path, f"Invalid value: nesting deeper than {MAX_DEPTH} levels")
            return None
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    self.error(path, f"Invalid value: {key!r}: field names must be strings")
                    continue
                out[key] = self._any_json(item, join(path, key), depth + 1)
            return out
        if isinstance(value, list):
            return [self._any_json(item, index(path, i), depth + 1) for i, item in enumerate(value)]
        if isinstance(value, float) and not math.isfinite(value):
            self.error(path, f"Invalid value: {value!r}: must be a finite number")
        elif not (value is None or isinstance(value, str | bool | int | float)):
            self.error(path, f"Invalid value: values of type {type_name(value)} are not allowed here")
        return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _any_of_pattern(schema: dict[str, Any]) -> str | None:
    if "pattern" in schema:
        return str(schema["pattern"])
    for option in schema.get("anyOf", []):
        if option.get("type") == "string" and "pattern" in option:
            return str(option["pattern"])
    return None


def check(value: Any, schema: dict[str, Any], path: str = "") -> SchemaResult:
    """Check ``value`` against a structural schema; never raises on bad input."""
    walker = _Walker()
    walker.result.pruned = walker.walk(value, schema, path, path, 0)
    return walker.result
