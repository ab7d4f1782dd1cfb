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
_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null"))
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


def safe_dump_all(documents: list[Any]) -> str:
    """The YAML stream of ``documents`` (block style, keys in insertion order)."""
    if yaml.__with_libyaml__ and all(_plain(document, 0) for document in documents):
        dumped: str = yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False)
        return dumped
    return yaml.safe_dump_all(documents, sort_keys=False)


class _Dumper(yaml.CSafeDumper):
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
