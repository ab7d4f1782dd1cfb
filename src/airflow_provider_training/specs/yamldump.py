"""``yaml.safe_dump_all(documents, sort_keys=False)``, through libyaml where that gives the same bytes.

PyYAML's emitter is pure Python (about 35 µs a line: most of ``airflow-training migrate``'s time
once validation was fast); libyaml's is C. The two agree on everything but scalars libyaml measures
differently: escaped characters when a double-quoted scalar is folded at the line width, and an
empty mapping key (``'': x`` against ``? ''``). So libyaml writes only documents whose strings are
all printable ASCII and whose keys are non-empty strings; anything else goes through PyYAML as
before. ``tests/specs/test_yamldump.py`` compares the two on random documents of that shape.
"""

from __future__ import annotations

from typing import Any

import yaml

_SCALARS = (bool, int, float, type(None))


def safe_dump_all(documents: list[Any]) -> str:
    """The YAML stream of ``documents`` (block style, keys in insertion order)."""
    if yaml.__with_libyaml__ and all(_plain(document, 0) for document in documents):
        dumped: str = yaml.dump_all(documents, Dumper=yaml.CSafeDumper, sort_keys=False)
        return dumped
    return yaml.safe_dump_all(documents, sort_keys=False)


def _plain(value: Any, depth: int) -> bool:
    """Whether libyaml writes ``value`` byte for byte as PyYAML does (see the module's docstring)."""
    if depth > 100:  # deeper than any object the API server takes; PyYAML decides
        return False
    kind = type(value)
    if kind is str:
        return value.isascii() and value.isprintable()
    if kind is dict:
        return all(
            type(key) is str and key and key.isascii() and key.isprintable() and _plain(item, depth + 1)
            for key, item in value.items()
        )
    if kind is list:
        return all(_plain(item, depth + 1) for item in value)
    return kind in _SCALARS
