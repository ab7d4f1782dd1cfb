"""``.kitignore``: Docker ``.dockerignore`` matching (moby/patternmatcher v0.6.0) plus kit's cross-layer rule.

Hand-written because no maintained Python package reproduces patternmatcher's quirks (exact, prefix
and suffix fast paths, ``**`` handling, parent-directory matching), and layer digests depend on them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

IGNORE_FILE = ".kitignore"
ALWAYS_IGNORED = ("Kitfile", "kitfile", ".kitfile", ".kitignore")
_ESCAPE = set(".+()|{}$")


class IgnoreError(ValueError):
    pass


@dataclass
class _Pattern:
    cleaned: str
    exclusion: bool
    kind: str = ""
    regex: re.Pattern[str] | None = None

    def __post_init__(self) -> None:
        self._compile()

    def _compile(self) -> None:
        pattern = self.cleaned
        reg = "^"
        kind = "exact"
        i = 0
        n = len(pattern)
        step = 0
        while i < n:
            ch = pattern[i]
            i += 1
            if ch == "*":
                if i < n and pattern[i] == "*":
                    i += 1
                    if i < n and pattern[i] == "/":
                        i += 1
                    if i >= n:
                        if kind == "exact":
                            kind = "prefix"
                        else:
                            reg += ".*"
                            kind = "regexp"
                    else:
                        reg += "(.*/)?"
                        kind = "regexp"
                    if step == 0:
                        kind = "suffix"
                else:
                    reg += "[^/]*"
                    kind = "regexp"
            elif ch == "?":
                reg += "[^/]"
                kind = "regexp"
            elif ch in _ESCAPE:
                reg += "\\" + ch
            elif ch == "\\":
                if i < n:
                    reg += "\\" + pattern[i]
                    i += 1
                else:
                    reg += "\\\\"
            elif ch in "[]":
                reg += ch
                kind = "regexp"
            else:
                reg += re.escape(ch) if ch in "^" else ch
            step += 1
        self.kind = kind
        if kind == "regexp":
            try:
                self.regex = re.compile(reg + r"(/.*)?\Z", re.DOTALL)
            except re.error as exc:
                raise IgnoreError(f"{IGNORE_FILE}: invalid pattern {self.cleaned!r}: {exc}") from exc

    def match(self, path: str) -> bool:
        if self.kind == "exact":
            return path == self.cleaned
        if self.kind == "prefix":
            return path.startswith(self.cleaned[:-2])
        if self.kind == "suffix":
            suffix = self.cleaned[2:]
            if path.endswith(suffix):
                return True
            return bool(suffix) and suffix[0] == "/" and path == suffix[1:]
        assert self.regex is not None
        return bool(self.regex.match(path))


@dataclass
class PatternMatcher:
    patterns: list[_Pattern] = field(default_factory=list)

    @property
    def has_exclusions(self) -> bool:
        return any(p.exclusion for p in self.patterns)

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> PatternMatcher:
        pm = cls()
        for raw in lines:
            p = raw.strip()
            if not p:
                continue
            exclusion = p.startswith("!")
            if exclusion:
                p = p[1:].strip()
                if not p:
                    raise IgnoreError(f'{IGNORE_FILE}: illegal exclusion pattern: "!"')
            p = posixpath.normpath(p)
            if p.startswith("/") and p != "/":
                p = p[1:]
            pm.patterns.append(_Pattern(p, exclusion))
        return pm

    def matches_or_parent_matches(self, path: str) -> bool:
        matched = False
        parent = posixpath.dirname(path) or "."
        parent_dirs = parent.split("/")
        for pattern in self.patterns:
            if pattern.exclusion != matched:
                continue
            match = pattern.match(path)
            if not match and parent != ".":
                for i in range(len(parent_dirs)):
                    if pattern.match("/".join(parent_dirs[: i + 1])):
                        match = True
                        break
            if match:
                matched = not pattern.exclusion
        return matched


def read_ignore_lines(text: str) -> list[str]:
    """moby ``ignorefile.ReadAll``: BOM stripped, ``#`` comments, trimmed lines."""
    out: list[str] = []
    for i, line in enumerate(text.splitlines()):
        if i == 0:
            line = line.lstrip("\ufeff")
        if line.startswith("#"):
            continue
        line = line.strip()
        if not line:
            continue
        invert = line.startswith("!")
        if invert:
            line = line[1:].strip()
        if line:
            line = posixpath.normpath(line)
            if line.startswith("/") and len(line) > 1:
                line = line[1:]
        out.append(("!" if invert else "") + line)
    return out


@dataclass
class Ignore:
    """What pack leaves out of a layer: ``.kitignore`` patterns and other layers' paths."""

    matcher: PatternMatcher
    layer_paths: Sequence[str]

    @classmethod
    def load(cls, context: Path, layer_paths: Sequence[str], extra: Sequence[str] = ()) -> Ignore:
        lines: list[str] = []
        file = context / IGNORE_FILE
        if file.is_file():
            lines = read_ignore_lines(file.read_text(encoding="utf-8"))
        return cls(PatternMatcher.from_lines([*lines, *extra, *ALWAYS_IGNORED]), list(layer_paths))

    @property
    def has_exclusions(self) -> bool:
        return self.matcher.has_exclusions

    def matches(self, path: str, layer_path: str) -> bool:
        # kit compares with a plain string prefix: with layers "." and "model", "model_card.md" goes
        # to neither the "." layer nor the model layer; replicated so digests match kit's.
        for other in self.layer_paths:
            if path.startswith(other) and not layer_path.startswith(other):
                return True
        return self.matcher.matches_or_parent_matches(path)
