"""Go's ``encoding/json`` text transforms on JSON that is already valid: ``json.Compact`` (what
marshalling a ``json.RawMessage`` does, HTML-escaping on) and ``json.Indent`` (what
``MarshalIndent`` does after ``Marshal``)."""

from __future__ import annotations

from collections.abc import Iterator

_WS = " \t\n\r"
_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _chars(text: str) -> Iterator[tuple[str, bool]]:
    """Each character and whether it is inside a string literal (quotes included)."""
    in_string = escaped = False
    for ch in text:
        if in_string:
            yield ch, True
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            yield ch, True
        else:
            yield ch, False


def go_compact(raw: str) -> str:
    return "".join(_HTML.get(ch, ch) if quoted else ch for ch, quoted in _chars(raw) if quoted or ch not in _WS)


def go_indent(compact: str, indent: str = "  ") -> str:
    out: list[str] = []
    depth = 0
    need_newline = False
    for ch, quoted in _chars(compact):
        if need_newline and ch not in "]}":
            out.append("\n" + indent * depth)
        need_newline = False
        if quoted:
            out.append(ch)
        elif ch in "[{":
            out.append(ch)
            depth += 1
            need_newline = True
        elif ch in "]}":
            depth -= 1
            if out and out[-1] not in "[{":
                out.append("\n" + indent * depth)
            out.append(ch)
        elif ch == ",":
            out.append(",\n" + indent * depth)
        elif ch == ":":
            out.append(": ")
        else:
            out.append(ch)
    return "".join(out)
