"""The implicit tag of a YAML scalar, remembered by value for the loader and the dumper.

PyYAML asks its resolver for the tag of every scalar it reads (once) and writes (twice: plain and
quoted), each time matching the value against the implicit resolvers' regular expressions, in
Python; libyaml does the rest in C. Kubernetes documents repeat their keys and many values, so the
answers are remembered per resolver class. Only for classes without path resolvers (neither the
safe loader nor the safe dumper has one): there the tag depends on nothing but the arguments.
"""

from __future__ import annotations

from typing import Any, ClassVar

import yaml

_REMEMBERED = 50_000  # distinct scalars per class; past that, resolved as PyYAML does (no growth)
_LONGEST = 256  # characters: longer values (commands, scripts) are resolved each time


class RememberedTags(yaml.resolver.BaseResolver):
    """Mix in before PyYAML's loader or dumper class (``class L(RememberedTags, yaml.CSafeLoader)``)."""

    _tags: ClassVar[dict[tuple[str, Any], str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._tags = {}  # one memo per class: each has its own implicit resolvers

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not yaml.ScalarNode or self.yaml_path_resolvers or len(value) > _LONGEST:
            return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        key = (value, implicit)
        tag = self._tags.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
            if len(self._tags) < _REMEMBERED:
                self._tags[key] = tag
        return tag
