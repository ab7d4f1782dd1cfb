"""Go ``encoding/json.Marshal`` output for the values the operator serialises (TF_CONFIG, MX_CONFIG).

Compact separators, keys in the order given (callers pass Go's order: struct field order, or
sorted keys for maps), and Go's HTML-safe escaping of ``<``, ``>``, ``&``, U+2028 and U+2029.
"""

from __future__ import annotations

import json
from typing import Any

_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def go_marshal(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _GO_ESCAPES.items():
        text = text.replace(char, escaped)
    return text
