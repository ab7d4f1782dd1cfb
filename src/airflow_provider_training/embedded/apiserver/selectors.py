"""Label and field selectors in Kubernetes' text syntax (``a=b,c!=d,e in (x,y),!f``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_provider_training.specs.unstructured import Unstructured

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


class SelectorError(ValueError):
    pass


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present


def _split(text: str) -> list[str]:
    """Split on commas that are not inside ``( … )``."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> list[Requirement]:
    requirements = []
    for part in _split(text or ""):
        if match := _SET_RE.match(part):
            values = tuple(v.strip() for v in match.group(3).split(",") if v.strip())
            requirements.append(Requirement(match.group(1), match.group(2), values))
        elif match := _CMP_RE.match(part):
            op = "=" if match.group(2) == "==" else match.group(2)
            requirements.append(Requirement(match.group(1), op, (match.group(3),)))
        elif match := _EXISTS_RE.match(part):
            requirements.append(Requirement(match.group(2), "!exists" if match.group(1) else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r} in labelSelector {text!r}")
    return requirements


def label_matcher(requirements: list[Requirement]) -> Callable[[dict[str, str]], bool]:
    return lambda labels: all(r.matches(labels) for r in requirements)


def equality_terms(requirements: list[Requirement]) -> list[tuple[str, str]]:
    """Terms the store can answer from its label index."""
    terms = []
    for r in requirements:
        if r.op == "=" or (r.op == "in" and len(r.values) == 1):
            terms.append((r.key, r.values[0]))
    return terms


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str

    def matches(self, obj: Unstructured) -> bool:
        return (field_value(obj, self.field) == self.value) == self.equal


def field_value(obj: Unstructured, path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def parse_field_selector(text: str | None, allowed: Callable[[str], bool]) -> list[FieldRequirement]:
    requirements = []
    for part in _split(text or ""):
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not match:
            raise SelectorError(f"invalid selector: {part.strip()!r} in fieldSelector {text!r}")
        field, op, value = match.groups()
        if not allowed(field):
            raise SelectorError(f"field label not supported: {field}")
        requirements.append(FieldRequirement(field, op != "!=", value))
    return requirements


def field_matcher(requirements: list[FieldRequirement]) -> Callable[[Unstructured], bool]:
    return lambda obj: all(r.matches(obj) for r in requirements)
