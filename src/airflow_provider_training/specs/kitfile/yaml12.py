"""YAML read with Go ``yaml.v3`` semantics, as kit decodes a Kitfile (``kitops.md`` §1).

kit decodes with ``KnownFields(true)``: duplicate keys are errors, a string field keeps the literal
scalar text (``version: 1.10`` is ``"1.10"``), and free-form ``parameters`` follow YAML 1.2
resolution (``yes`` stays a string, ``010`` is octal 8). PyYAML resolves YAML 1.1, so this module
composes the node tree with PyYAML and resolves the scalars itself.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

import yaml

from airflow_provider_training.specs.kitfile.errors import KitfileError

_PLAIN = "?plain"


class _Loader(yaml.SafeLoader):
    """Marks untagged plain scalars so they can be resolved with YAML 1.2 rules, not PyYAML's 1.1."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            return _PLAIN
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]


def load_yaml(text: str | bytes, source: str = "Kitfile") -> Any:
    """Load the first YAML document: strings keep literal text, duplicate keys are errors."""
    try:
        loader = _Loader(text)
        try:
            node = loader.get_node() if loader.check_node() else None  # first document only, like yaml.v3
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise KitfileError(f"{source}: not valid YAML: {exc}") from exc
    if node is None:
        return None
    return _construct(node, source, raw=True, path="")


_FIELDS_RESOLVED = {"parameters"}


def _construct(node: yaml.Node, source: str, raw: bool, path: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or (key_node.tag == _PLAIN and key_node.value == "<<"):
                merged = _construct(value_node, source, raw, path)
                for m in merged if isinstance(merged, list) else [merged]:
                    if isinstance(m, dict):
                        for k, v in m.items():
                            out.setdefault(k, v)
                continue
            key = _construct(key_node, source, raw=raw, path=path)
            if isinstance(key, (dict, list)):
                raise KitfileError(f"{source}: line {key_node.start_mark.line + 1}: mapping keys must be scalars")
            if key in out:
                raise KitfileError(
                    f'{source}: line {key_node.start_mark.line + 1}: mapping key "{key}" already defined'
                )
            sub = f"{path}.{key}" if path else str(key)
            child_raw = raw and str(key) not in _FIELDS_RESOLVED
            out[key] = _construct(value_node, source, child_raw, sub)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(n, source, raw, f"{path}[{i}]") for i, n in enumerate(node.value)]
    assert isinstance(node, yaml.ScalarNode)
    return _scalar(node, source, raw)


def _scalar(node: yaml.ScalarNode, source: str, raw: bool) -> Any:
    text: str = node.value
    # quoted/block scalars and explicit !!str are strings; other explicit tags resolve like plain
    explicit_str = node.tag in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:binary")
    if node.tag != _PLAIN and (explicit_str or node.style):
        return text
    resolved = resolve_plain(text)
    if raw:
        # a string field takes the literal text of any non-null scalar (yaml.v3 decoding into string)
        return None if resolved is None else text
    return resolved


_FLOAT_RE = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_DATE_RE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")
_DATETIME_RE = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})[Tt ](\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?\s*(Z|[-+]\d{1,2}(:?\d{2})?)?$"
)

_Resolved = None | bool | int | float | str | dt.datetime


def resolve_plain(text: str) -> _Resolved:
    """Resolve an unquoted scalar the way yaml.v3 does when decoding into ``any``."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"):
        return math.inf
    if text in ("-.inf", "-.Inf", "-.INF"):
        return -math.inf
    if text in (".nan", ".NaN", ".NAN"):
        return math.nan
    if not text or text[0] not in "0123456789+-.":
        return text
    stamp = _timestamp(text)
    if stamp is not None:
        return stamp
    plain = text.replace("_", "")
    number = _go_parse_int(plain)
    if number is not None and -(1 << 63) <= number < (1 << 64):
        return number
    if _FLOAT_RE.match(plain):
        try:
            return float(plain)
        except ValueError:
            pass
    for prefix, base in (("0b", 2), ("-0b", 2), ("0o", 8), ("-0o", 8)):
        if plain.startswith(prefix):
            try:
                return int(plain.replace(prefix, "-" if prefix[0] == "-" else "", 1) or "x", base)
            except ValueError:
                return text
    return text


def _go_parse_int(s: str) -> int | None:
    """``strconv.ParseInt(s, 0, 64)``: 0x/0o/0b prefixes, a leading 0 means octal."""
    sign = 1
    body = s
    if body[:1] in "+-":
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if not body:
        return None
    base = 10
    low = body.lower()
    if low.startswith("0x"):
        base, body = 16, body[2:]
    elif low.startswith("0o"):
        base, body = 8, body[2:]
    elif low.startswith("0b"):
        base, body = 2, body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, body = 8, body[1:]
    if not body or not all(c in "0123456789abcdefABCDEF"[: base if base <= 10 else 22] for c in body):
        return None
    try:
        return sign * int(body, base)
    except ValueError:
        return None


def _timestamp(text: str) -> dt.datetime | None:
    m = _DATE_RE.match(text)
    if m:
        try:
            return dt.datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=dt.timezone.utc)
        except ValueError:
            return None
    m = _DATETIME_RE.match(text)
    if not m:
        return None
    try:
        frac = int(((m[7] or ".0")[1:] + "000000")[:6])
        tz = dt.timezone.utc
        if m[8] and m[8] != "Z":
            sign = -1 if m[8][0] == "-" else 1
            digits = m[8][1:].replace(":", "")
            hours, minutes = int(digits[:2] if len(digits) > 2 else digits), int(digits[2:] or 0)
            tz = dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))
        return dt.datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]), frac, tzinfo=tz)
    except ValueError:
        return None


class _KitDumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # yaml.v3 indents list items under their key
        super().increase_indent(flow, False)


def dump_yaml(data: Any) -> str:
    """YAML as yaml.v3 writes it: keys in the order given, list items indented under their key."""
    return yaml.dump(data, Dumper=_KitDumper, sort_keys=False, allow_unicode=True, width=1 << 30)
