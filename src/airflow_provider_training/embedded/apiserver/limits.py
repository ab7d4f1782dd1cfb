"""Limits on what a request may carry, checked before any work is done with it, and the decoding
of bodies and query parameters into values that cannot surprise the handlers.

- a body is at most ``max_body_bytes`` (3 MiB, kube-apiserver's limit) as sent;
- JSON is parsed without ``NaN`` / ``Infinity`` (not JSON; stored, they broke every reader);
- YAML goes through the same guards as ``specs.loader`` (no Python tags, timestamps stay strings,
  aliases may not expand past ``MAX_EXPANDED_NODES`` nodes, nesting at most ``MAX_NESTING``);
- the decoded value must be plain JSON: string keys, finite numbers, at most ``MAX_NESTING`` levels;
- integer query parameters are ASCII digits within a bound, never a Python ``int()`` of anything.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from airflow_provider_training.embedded import jsoncodec
from airflow_provider_training.embedded.apiserver.errors import ApiError, bad_request
from airflow_provider_training.specs.loader import MAX_EXPANDED_NODES, MAX_NESTING, JobSpecError, parse_yaml

MAX_INT64 = 2**63 - 1
# kube-apiserver's HTTP server reads at most 1 MiB of request line and headers (MaxHeaderBytes), so a
# query string (an exec's command) may be that long; WebSocket's parser would stop at 8 KiB.
MAX_REQUEST_LINE_BYTES = 1 << 20
# A watch longer than a day is cut by kube-apiserver's own limits too; clients re-watch.
MAX_TIMEOUT_SECONDS = 24 * 3600
_DIGITS = re.compile(r"[0-9]{1,19}")

__all__ = ["MAX_EXPANDED_NODES", "MAX_NESTING", "decode_json", "decode_yaml", "non_negative", "timeout_seconds"]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def decode_json(raw: bytes) -> Any:
    try:
        value = jsoncodec.decode_strict(raw)  # the fast path, for bodies any decoder takes
    except (ValueError, RecursionError):
        value = _decode_json_stdlib(raw)  # the standard library's leniency and error messages
    check_plain(value)
    return value


def _decode_json_stdlib(raw: bytes) -> Any:
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise bad_request(f"the body of the request nests deeper than {MAX_NESTING} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the body of the request was malformed JSON: {exc}") from None
    return value


def decode_yaml(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(f"the body of the request was malformed YAML: not UTF-8 ({exc})") from None
    if "\x00" in text:
        raise bad_request("the body of the request was malformed YAML: it contains a NUL character")
    try:
        documents = parse_yaml(text, "the request body")
    except JobSpecError as exc:
        raise bad_request("; ".join(f"{exc.source}: {issue.message}" for issue in exc.issues)) from None
    except RecursionError:
        raise bad_request(f"the body of the request nests deeper than {MAX_NESTING} levels") from None
    if len(documents) != 1:
        raise bad_request(f"the body of the request must hold one YAML document (got {len(documents)})")
    value = documents[0].data
    check_plain(value)
    return value


def check_plain(value: Any) -> None:
    """Refuse what JSON cannot hold (YAML binary, non-string keys, NaN) and nesting past the limit,
    naming the first offending path."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_NESTING:
            raise bad_request(f"the object nests deeper than {MAX_NESTING} levels (at {path or 'the top'})")
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise bad_request(f"{path or 'the object'} has a key that is not a string: {key!r}")
                _check_text(key, path)
                stack.append((child, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(item, str):
            _check_text(item, path)
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise bad_request(f"{path}: {item} is not a valid JSON number (numbers must be finite)")
        elif item is not None and not isinstance(item, (str, int, bool)):
            raise bad_request(f"{path}: a {type(item).__name__} value cannot be represented in JSON")


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # JSON's "\\ud800" escapes can name half of a character, which no UTF-8 text can hold
        raise bad_request(f"{path or 'the object'}: a string holds a lone UTF-16 surrogate (not a character)") from None


def non_negative(value: str | None, name: str, maximum: int = MAX_INT64) -> int | None:
    """``value`` as an integer in [0, maximum], or a 400 naming the parameter."""
    if value is None:
        return None
    if not _DIGITS.fullmatch(value) or int(value) > maximum:
        raise bad_request(f"{name} must be an integer from 0 to {maximum} (got {value[:40]!r})")
    return int(value)


def timeout_seconds(value: str | None, default: float) -> float:
    if value is None or value == "":
        return default
    seconds = non_negative(value, "timeoutSeconds", MAX_TIMEOUT_SECONDS)
    return float(seconds if seconds is not None else default)


def content_length(value: str | None) -> int:
    if value is None:
        return 0
    length = non_negative(value.strip(), "Content-Length")
    return length or 0


def resource_version(value: str | None) -> int | None:
    """``resourceVersion`` of a list or watch: empty, or a non-negative int64."""
    if value is None or value == "":
        return None
    if not _DIGITS.fullmatch(value) or int(value) > MAX_INT64:
        raise ApiError(400, "BadRequest", f'resourceVersion must be a non-negative integer (got "{value[:40]}")')
    return int(value)
