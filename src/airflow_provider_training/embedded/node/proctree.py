"""A process and everything it started, found in ``/proc`` and killed together: what a container
runtime does with an exec'd process when its stream ends (it has the container's cgroup; the node
has no cgroup per exec, so it follows parent links, process groups and sessions).

A process that left both (``setsid`` in a child that was then orphaned: a classic daemon) is out of
reach. Without ``/proc`` (macOS) only the process group is signalled. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import NamedTuple

_PROC = Path("/proc")
_ROUNDS = 10  # a tree that forks while it is killed: the next round finds the new children


class Stat(NamedTuple):
    ppid: int
    pgrp: int
    session: int
    state: str
    starttime: int


def stat(pid: int) -> Stat | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # the fields after the command name, which may itself hold spaces and parentheses
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return Stat(int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode(), int(fields[19]))
    except (IndexError, ValueError):
        return None


def _table() -> dict[int, Stat]:
    table = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(_PROC):
            if entry.name.isdigit():
                found = stat(int(entry.name))
                if found is not None and found.state != "Z":  # a zombie is dead already
                    table[int(entry.name)] = found
    return table


def members(root: int, table: dict[int, Stat] | None = None) -> set[int]:
    """``root`` (if it still runs), the processes of its session and process group (they stay
    there after ``root`` exits), and every descendant of those."""
    table = _table() if table is None else table
    found = {pid for pid, s in table.items() if pid == root or root in (s.session, s.pgrp)}
    children: dict[int, list[int]] = {}
    for pid, s in table.items():
        children.setdefault(s.ppid, []).append(pid)
    queue = list(found)
    while queue:
        for child in children.get(queue.pop(), []):
            if child not in found:
                found.add(child)
                queue.append(child)
    found.discard(os.getpid())
    return found


def kill_tree(root: int, starttime: int | None = None) -> int:
    """SIGKILL ``root``'s tree (``members``); ``starttime`` (``stat(root).starttime`` when it was
    recorded) guards against a pid the kernel has since given to another process. Returns the
    number of processes signalled."""
    if starttime is not None:
        now = stat(root)
        # A pid in use as a session or group id is not given out again, so a gone root's session
        # is still its own; a running root with another start time is another process.
        if now is not None and now.starttime != starttime:
            return 0
    if not _PROC.is_dir():
        return _kill_group(root)
    signalled = 0
    for _ in range(_ROUNDS):
        pids = members(root)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                signalled += 1
    return signalled


def _kill_group(pgid: int) -> int:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return 0
    return 1
