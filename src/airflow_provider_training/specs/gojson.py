"""Go ``encoding/json.Marshal`` output, byte for byte, for the values the provider serialises: the
operator's TF_CONFIG / MX_CONFIG, a ModelKit's config blob, manifests and signatures.

Compact separators; keys in the order given (callers pass Go's order: struct field order, or
:func:`sorted_map` for a ``map[string]any``); Go's HTML-safe escaping of ``<``, ``>``, ``&``,
U+2028 and U+2029; floats in Go's shortest form (``1``, ``1e-7``); a ``datetime`` as ``time.Time``
(RFC 3339, trailing zeros of the fraction trimmed). What Go refuses (infinities, NaN, keys that are
not strings) raises :class:`UnsupportedValueError`.

Hand-written: ``json.dumps`` differs from Go for floats (``1.0``, ``1e-07``) and escaping.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


class UnsupportedValueError(ValueError):
    """A value Go's ``json.Marshal`` refuses (``json: unsupported value``)."""


def go_marshal(value: Any) -> str:
    """Compact JSON identical to Go's ``json.Marshal`` of ``value``."""
    return "".join(_parts(value))


def go_json(value: Any) -> bytes:
    """:func:`go_marshal` as the UTF-8 bytes that are hashed, signed or stored."""
    return go_marshal(value).encode("utf-8")


def _parts(value: Any) -> Iterator[str]:
    if value is None:
        yield "null"
    elif value is True:
        yield "true"
    elif value is False:
        yield "false"
    elif isinstance(value, int):
        yield str(value)
    elif isinstance(value, float):
        yield go_float(value)
    elif isinstance(value, str):
        yield go_string(value)
    elif isinstance(value, dt.datetime):
        yield go_string(_go_time(value))
    elif isinstance(value, dict):
        yield "{"
        first = True
        for k, v in value.items():
            if not isinstance(k, str):
                raise UnsupportedValueError(f"json: unsupported map key {k!r} (use string keys)")
            if not first:
                yield ","
            first = False
            yield go_string(k)
            yield ":"
            yield from _parts(v)
        yield "}"
    elif isinstance(value, (list, tuple)):
        yield "["
        for i, v in enumerate(value):
            if i:
                yield ","
            yield from _parts(v)
        yield "]"
    else:
        raise UnsupportedValueError(f"json: unsupported value {value!r}")


def go_float(f: float) -> str:
    """``strconv.FormatFloat`` as encoding/json uses it: shortest digits, exponent only when tiny/huge."""
    if math.isinf(f) or math.isnan(f):
        raise UnsupportedValueError(f"json: unsupported value: {f}")
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    d = Decimal(repr(f)).normalize()
    if abs(f) < 1e-6 or abs(f) >= 1e21:
        sign, digits, exp = d.as_tuple()
        text = "".join(map(str, digits))
        mant = text[0] + ("." + text[1:] if len(text) > 1 else "")
        e = int(exp) + len(text) - 1
        return f"{'-' if sign else ''}{mant}e{'-' if e < 0 else '+'}{abs(e)}"
    return format(d, "f")


def go_string(s: str) -> str:
    out = json.dumps(s, ensure_ascii=False)
    for char, escaped in _GO_ESCAPES.items():
        out = out.replace(char, escaped)
    return out


def _go_time(t: dt.datetime) -> str:
    text = t.isoformat()
    if t.microsecond:
        head, _, rest = text.partition(".")
        frac = rest[:6].rstrip("0")
        text = f"{head}.{frac}{rest[6:]}"
    return text.replace("+00:00", "Z")


def sorted_map(value: Any) -> Any:
    """Go marshals a ``map[string]any`` with its keys sorted (by bytes), at every level."""
    if isinstance(value, dict):
        return {k: sorted_map(value[k]) for k in sorted(value, key=lambda k: str(k).encode())}
    if isinstance(value, list):
        return [sorted_map(v) for v in value]
    return value
