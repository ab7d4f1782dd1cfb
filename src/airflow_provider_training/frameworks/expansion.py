"""Kubernetes ``$(VAR)`` expansion (``third_party/forked/golang/expansion``; ``training-operator.md`` §7).

Written by hand: it must match the kubelet character for character (``$$`` escapes, undefined
references and an unclosed ``$(`` stay literal, no re-expansion), which no Python library does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def expand(text: str, mapping: Mapping[str, str]) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
                continue
            name = text[i + 2 : close]
            out.append(mapping[name] if name in mapping else text[i : close + 1])
            i = close + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def resolve_env(
    base: Mapping[str, str],
    env: Iterable[tuple[str, str | None, bool]],
) -> dict[str, str]:
    """``makeEnvironmentVariables``: the container's final environment.

    ``base`` holds what is visible before ``env`` (envFrom keys, in order). ``env`` yields
    ``(name, value, is_literal)`` in declaration order: a literal ``value`` is expanded against
    the variables resolved so far; a non-literal (``valueFrom``) one is taken as already
    resolved. Later duplicates win.
    """
    resolved = dict(base)
    for name, value, literal in env:
        text = value or ""
        resolved[name] = expand(text, resolved) if literal else text
    return resolved


def expand_command(args: Iterable[str] | None, environment: Mapping[str, str]) -> list[str]:
    """``command`` / ``args`` see the complete final environment."""
    return [expand(a, environment) for a in args or []]
