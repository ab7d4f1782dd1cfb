"""Paths inside a volume stay inside it: whatever passed admission (or was written around it),
the node agent resolves every ``subPath``, ``items[].path`` and claim directory under its root,
following symlinks that already exist, and refuses one that would leave it (``FailedMount``)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


class PathEscape(ValueError):
    """A relative path that would leave its root."""


def check_relative(relative: str, what: str) -> None:
    """The rules admission applies: a non-empty relative path without '..' or NUL."""
    if not isinstance(relative, str) or not relative:
        raise PathEscape(f"{what} must be a non-empty relative path")
    if "\x00" in relative:
        raise PathEscape(f"{what} {relative!r} contains a NUL character")
    if os.path.isabs(relative):
        raise PathEscape(f"{what} {relative!r} must be a relative path")
    if ".." in Path(relative).parts:
        raise PathEscape(f"{what} {relative!r} must not contain '..'")


def inside(root: Path, relative: str, what: str) -> Path:
    """``root / relative`` with symlinks resolved, or :class:`PathEscape` naming ``what``."""
    check_relative(relative, what)
    base = root.resolve()
    target = (base / relative).resolve()  # follows symlinks that exist (one planted by a container, say)
    if target != base and not target.is_relative_to(base):
        raise PathEscape(f"{what} {relative!r} resolves to {target}, outside its volume")
    return target


def open_beneath(root: str, relative: str, what: str = "subPath") -> int:
    """An ``O_PATH`` descriptor of ``root/relative``, as the kubelet opens a ``subPath`` at each
    container start: symlinks that exist are resolved and must stay inside ``root``, then the
    resolved path is opened component by component with ``O_NOFOLLOW`` from ``root``'s descriptor,
    so a component swapped for a link in between (by a container of the pod, say) fails the open
    instead of leading out. Missing directories are created with the mode of ``root``. The caller
    mounts ``/proc/self/fd/N``, the very directory or file that was checked, and closes it.
    :class:`PathEscape` (the path leaves ``root``, or changed while it was opened) or ``OSError``."""
    check_relative(relative, what)
    base = os.path.realpath(root)
    resolved = os.path.realpath(os.path.join(base, relative))
    if resolved != base and not resolved.startswith(base.rstrip("/") + "/"):
        raise PathEscape(f"{what} {relative!r} leads out of its volume through a symbolic link")
    parts = [p for p in os.path.relpath(resolved, base).split("/") if p and p != "."]
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | nofollow)
    try:
        mode = os.fstat(fd).st_mode & 0o7777
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                child = os.open(part, os.O_PATH | nofollow, dir_fd=fd)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened below like any other
                    os.mkdir(part, 0o700, dir_fd=fd)
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=fd)
                os.fchmod(child, mode)  # not the umask's: a non-root container must write where root could
            info = os.fstat(child)
            if stat.S_ISLNK(info.st_mode) or (not last and not stat.S_ISDIR(info.st_mode)):
                os.close(child)
                raise PathEscape(f"{what} {relative!r} changed while it was opened (a component is now a link)")
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise
