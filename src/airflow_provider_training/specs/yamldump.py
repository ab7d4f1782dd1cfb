"""``yaml.safe_dump_all(documents, sort_keys=False)``, the same bytes written faster.

PyYAML's emitter is pure Python (about 35 µs a line: most of ``airflow-training migrate``'s time
once validation was fast); libyaml's is C, but PyYAML still builds a node per value and resolves
each scalar's tag twice in Python. Three ways, the first that applies:

1. Documents of mappings, lists, ints, bools, nulls and strings that are plain scalars by a narrow
   rule (:func:`_plain_string`), no object twice: written here, line by line, as PyYAML lays out
   block style (indent 2, lists under a key not indented, ``{}``/``[]`` for empty ones).
2. Documents whose strings are all printable ASCII and whose keys are non-empty strings: libyaml.
   It agrees with PyYAML on everything but scalars it measures differently: escaped characters
   when a double-quoted scalar is folded at the line width, and an empty mapping key (``'': x``
   against ``? ''``).
3. Anything else: PyYAML, as before.

``tests/specs/test_yamldump.py`` compares all three with PyYAML on random documents.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from airflow_provider_training.specs.yamltags import RememberedTags

_SCALARS = (bool, int, float, type(None))
_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null"))
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


def safe_dump_all(documents: list[Any]) -> str:
    """The YAML stream of ``documents`` (block style, keys in insertion order)."""
    written = _written(documents)
    if written is not None:
        return written
    if yaml.__with_libyaml__ and all(_plain(document, 0) for document in documents):
        dumped: str = yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False)
        return dumped
    return yaml.safe_dump_all(documents, sort_keys=False)


# --- 1. written here ----------------------------------------------------------------------------

_WIDTH = 80  # PyYAML's line width
_SIMPLE_KEY = 128  # PyYAML writes a longer key as a complex key ("? key")
# Characters that PyYAML never treats as an indicator inside a plain scalar (",", "@" and ":" only
# after the first); single spaces only between words (no leading, trailing or double space). A
# leading "-" and a ":" are checked in context.
_WORDS = re.compile(r"[A-Za-z0-9_./=+-][A-Za-z0-9_./:=+@,-]*(?: [A-Za-z0-9_./:=+@,-]+)*")
_RESOLVER = yaml.resolver.Resolver()  # SafeDumper's implicit resolvers: what a plain scalar would read back as
_VERDICTS: dict[str, bool] = {}  # strings seen, plain or not (bounded like yamltags)
_REMEMBERED = 50_000
_EMPTY: dict[type, str] = {dict: "{}", list: "[]"}  # empty ones in flow style, as PyYAML writes them


class _Unwritable(Exception):
    """Not by rule 1: the caller tries the next way."""


def _written(documents: list[Any]) -> str | None:
    lines: list[str] = []
    try:
        for number, document in enumerate(documents):
            if type(document) is not dict or not document:
                return None
            if number:
                lines.append("---")
            _mapping(document, 0, "", lines, set())
    except (_Unwritable, RecursionError):
        return None
    lines.append("")
    return "\n".join(lines)


def _mapping(value: dict[str, Any], indent: int, lead: str, lines: list[str], seen: set[int]) -> None:
    """A non-empty mapping whose first key goes after ``lead`` (a list item's ``- ``) and the rest
    at ``indent``."""
    _once(value, seen)
    pad = " " * indent
    for key, item in value.items():
        if type(key) is not str or len(key) >= _SIMPLE_KEY or not _plain_string(key):
            raise _Unwritable
        head = f"{lead}{key}:"
        lead = pad
        kind = type(item)
        if kind in _EMPTY and not item:
            _once(item, seen)
            lines.append(f"{head} {_EMPTY[kind]}")
        elif kind is dict:
            lines.append(head)
            _mapping(item, indent + 2, " " * (indent + 2), lines, seen)
        elif kind is list:
            lines.append(head)
            _sequence(item, indent, pad, lines, seen)  # under a key, a list is not indented
        else:
            lines.append(_line(f"{head} ", item))


def _sequence(value: list[Any], indent: int, lead: str, lines: list[str], seen: set[int]) -> None:
    """A non-empty list whose first ``- `` goes after ``lead`` and the rest at ``indent``."""
    _once(value, seen)
    pad = " " * indent
    for item in value:
        head = f"{lead}- "
        lead = pad
        kind = type(item)
        if kind in _EMPTY and not item:
            _once(item, seen)
            lines.append(head + _EMPTY[kind])
        elif kind is dict:
            _mapping(item, indent + 2, head, lines, seen)
        elif kind is list:
            _sequence(item, indent + 2, head, lines, seen)
        else:
            lines.append(_line(head, item))


def _once(value: Any, seen: set[int]) -> None:
    """An object met twice in a document is an anchor and an alias in PyYAML's output (empty ones too)."""
    key = id(value)
    if key in seen:
        raise _Unwritable
    seen.add(key)


def _line(head: str, value: Any) -> str:
    kind = type(value)
    if kind is str:
        text: str = value
        # PyYAML folds a plain scalar at a space it meets past the line width
        if not _plain_string(text) or len(head) + text.rfind(" ") > _WIDTH:
            raise _Unwritable  # quoted or folded: PyYAML's business
        return head + text
    if kind is bool:
        return head + ("true" if value else "false")
    if kind is int:
        return head + str(value)
    if value is None:
        return head + "null"
    raise _Unwritable  # floats (.inf, 1.0e+20 …) and other types


def _plain_string(value: str) -> bool:
    """Whether PyYAML writes ``value`` as a plain scalar (no quotes) in block context."""
    verdict = _VERDICTS.get(value)
    if verdict is None:
        verdict = bool(
            _WORDS.fullmatch(value)
            and not value.startswith(("---", "...", "- "))
            and value != "-"
            and ": " not in value
            and not value.endswith(":")
            and _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR  # type: ignore[no-untyped-call]
        )
        if len(_VERDICTS) < _REMEMBERED:
            _VERDICTS[value] = verdict
    return verdict


# --- 2. libyaml ---------------------------------------------------------------------------------


class _Dumper(RememberedTags, yaml.CSafeDumper):
    """``SafeRepresenter`` with ``default_flow_style=False`` for the types :func:`_plain` lets through,
    without its per-object lookup of a representer (the Python half of libyaml dumping)."""

    def represent_data(self, data: Any) -> yaml.Node:
        kind = type(data)
        if kind is str:
            return yaml.ScalarNode(_STR, data)
        if kind is bool:
            return yaml.ScalarNode(_BOOL, "true" if data else "false")
        if kind is int:
            return yaml.ScalarNode(_INT, str(data))
        if data is None:
            return yaml.ScalarNode(_NULL, "null")
        if kind is dict or kind is list:
            # the same object twice becomes an anchor and an alias, as SafeRepresenter does it
            key = id(data)
            if key in self.represented_objects:
                node: yaml.Node = self.represented_objects[key]
                return node
            self.object_keeper.append(data)
            if kind is dict:
                pairs: list[tuple[yaml.Node, yaml.Node]] = []
                node = self.represented_objects[key] = yaml.MappingNode(_MAP, pairs, flow_style=False)
                pairs += [(self.represent_data(k), self.represent_data(v)) for k, v in data.items()]
            else:
                items: list[yaml.Node] = []
                node = self.represented_objects[key] = yaml.SequenceNode(_SEQ, items, flow_style=False)
                items += [self.represent_data(item) for item in data]
            return node
        return super().represent_data(data)  # float


def _plain(value: Any, depth: int) -> bool:
    """Whether libyaml writes ``value`` byte for byte as PyYAML does (rule 2 of the module's docstring)."""
    if depth > 100:  # deeper than any object the API server takes; PyYAML decides
        return False
    kind = type(value)
    if kind is str:
        text: str = value
        return text.isascii() and text.isprintable()
    if kind is dict:
        return all(
            type(key) is str and key and key.isascii() and key.isprintable() and _plain(item, depth + 1)
            for key, item in value.items()
        )
    if kind is list:
        return all(_plain(item, depth + 1) for item in value)
    return kind in _SCALARS
