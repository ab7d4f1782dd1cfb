"""Paths inside a volume stay inside it: whatever passed admission (or was written around it),
the node agent resolves every ``subPath``, ``items[].path`` and claim directory under its root,
following symlinks that already exist, and refuses one that would leave it (``FailedMount``)."""

from __future__ import annotations

import os
from pathlib import Path


class PathEscape(ValueError):
    """A relative path that would leave its root."""


def inside(root: Path, relative: str, what: str) -> Path:
    """``root / relative`` with symlinks resolved, or :class:`PathEscape` naming ``what``."""
    if not isinstance(relative, str) or not relative:
        raise PathEscape(f"{what} must be a non-empty relative path")
    if "\x00" in relative:
        raise PathEscape(f"{what} {relative!r} contains a NUL character")
    if os.path.isabs(relative):
        raise PathEscape(f"{what} {relative!r} must be a relative path")
    if ".." in Path(relative).parts:
        raise PathEscape(f"{what} {relative!r} must not contain '..'")
    base = root.resolve()
    target = (base / relative).resolve()  # follows symlinks that exist (one planted by a container, say)
    if target != base and not target.is_relative_to(base):
        raise PathEscape(f"{what} {relative!r} resolves to {target}, outside its volume")
    return target
